"""Per-layer discriminativeness on QQP from the built models (what the Layers page draws; densetrans-cai2021.md
Figures 1 and 3): mean |log cos(q, q⁺) − log cos(q, q⁻)| per layer, and the signed mean beside it.

Usage: QRS_VAR=... python bench/layers_curves.py [--queries 500] [--negatives random] [--seed 13]
       [--sources minilm:cls minilm:mean densetrans densetrans:-AllDense densetrans#full600] [--out FILE]
A source is ``name[:variant or MiniLM pooling][#tag]`` (tag = a first_stage_train.py --tag experiment folder).
Triples (q, q⁺, q⁻) come from the test split's queries (``core.analysis.layers.sample_triples``).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def layer_fn(name: str, variant: str | None, tag: str | None, ds):
    """texts -> per-layer vectors of one built model."""
    from core.serving.loader import load as load_system

    if name == "minilm":
        retriever = load_system("minilm", ds)
        return lambda texts: retriever.layer_embeddings(texts, pooling=variant or "cls")
    if name != "densetrans":
        raise SystemExit(f"no per-layer vectors for {name!r}: use minilm or densetrans")
    from core.retrieval import densetrans

    return densetrans.load(ds, variant=variant, index="flat", tag=tag).layer_embeddings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--negatives", default="random")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--sources", nargs="*", default=["minilm:cls", "minilm:mean", "densetrans", "densetrans:-AllDense"])
    ap.add_argument("--out")
    args = ap.parse_args()
    import torch

    from core.analysis.layers import discriminativeness, sample_triples
    from core.data.datasets import load_dataset
    from core.serving.loader import load as load_system

    torch.set_num_threads(2)
    ds = load_dataset(args.dataset)
    bm25 = load_system("bm25", ds) if args.negatives == "bm25" else None
    triples = sample_triples(ds, args.queries, args.negatives, bm25=bm25, seed=args.seed, split="test")
    out = {"dataset": ds.name, "queries": len(triples), "negatives": args.negatives, "seed": args.seed,
           "split": "test", "curves": {}}
    for source in args.sources:
        base, _, tag = source.partition("#")
        name, _, variant = base.partition(":")
        t0 = time.perf_counter()
        curve = discriminativeness(source, layer_fn(name, variant or None, tag or None, ds), triples)
        out["curves"][source] = {"mean": curve.mean.astype(float).round(4).tolist(),
                                 "signed_mean": curve.signed_mean.astype(float).round(4).tolist(),
                                 "clipped": curve.clipped, "seconds": round(time.perf_counter() - t0, 1)}
        fmt = lambda a: " ".join(f"{v:.3f}" for v in a)  # noqa: E731
        print(f"{source:24s} |gap| {fmt(curve.mean)}  signed {fmt(curve.signed_mean)}  clipped {curve.clipped}",
              flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
