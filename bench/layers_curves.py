"""Per-layer measures on QQP from the built models (what the Layers page draws; densetrans-cai2021.md Figures 1
and 3, §4.4.1): the AUC P(cos(q,q⁺) > cos(q,q⁻)) and the paper's mean |log cos(q,q⁺) − log cos(q,q⁻)| with the
triples whose cosine is ≤ 0 excluded and counted (not clipped), each with a 95% bootstrap CI, and the paired
bootstrap CI of the per-layer difference DenseTrans − its −AllDense ablation when both are built.

Usage: nice -n 10 .venv/bin/python bench/layers_curves.py [--queries 500] [--negatives random bm25] [--seed 13]
       [--resamples 1000] [--sources minilm:cls minilm:mean densetrans densetrans:-AllDense densetrans#full600]
       [--out bench/reports/layers_measures_qqp.json]
A source is ``name[:variant or MiniLM pooling][#tag]`` (tag = a first_stage_train.py --tag experiment folder); a
source that is not built is listed with its build command and skipped. Triples (q, q⁺, q⁻) come from the test
split's queries (``core.analysis.layers.sample_triples``); every model sees the same triples, so the CIs are paired.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PAIR = ("densetrans", "densetrans:-AllDense")  # Figure 3: DenseTrans against −AllDense


def layer_fn(name: str, variant: str | None, tag: str | None, ds):
    """texts -> per-layer vectors of one built model; raises MissingArtifactError when it is not built."""
    from core.serving.loader import load as load_system

    if name == "minilm":
        retriever = load_system("minilm", ds)
        return lambda texts: retriever.layer_embeddings(texts, pooling=variant or "cls")
    if name != "densetrans":
        raise SystemExit(f"no per-layer vectors for {name!r}: use minilm or densetrans")
    from core.retrieval import densetrans

    return densetrans.load(ds, variant=variant, index="flat", tag=tag).layer_embeddings


def _r(values, digits: int = 4) -> list:
    return [None if v is None or not np.isfinite(v) else round(float(v), digits) for v in np.asarray(values, float)]


def _curve_record(curve, resamples: int, seed: int) -> dict:
    from core.analysis.layers import bootstrap_ci

    paper = curve.paper
    clipped = np.abs(np.log(np.maximum(curve.pos, 1e-3)) - np.log(np.maximum(curve.neg, 1e-3))).mean(axis=1)
    return {
        "layers": curve.n_layers, "triples": curve.n_triples,
        "auc": _r(curve.auc), "auc_ci95": bootstrap_ci(curve, "auc", n_resamples=resamples, seed=seed).as_dict(),
        "paper_mean": _r(paper.mean), "paper_signed_mean": _r(paper.signed_mean),
        "paper_ci95": bootstrap_ci(curve, "paper", n_resamples=resamples, seed=seed).as_dict(),
        "excluded": [int(v) for v in paper.excluded], "excluded_share": _r(paper.excluded_share),
        "excluded_pos_nonpositive": [int(v) for v in (curve.pos <= 0).sum(axis=1)],
        "excluded_neg_nonpositive": [int(v) for v in (curve.neg <= 0).sum(axis=1)],
        "old_clipped_mean_1e-3": _r(clipped),
        "mean_cos_pos": _r(curve.pos.mean(axis=1)), "mean_cos_neg": _r(curve.neg.mean(axis=1)),
    }


def _verdict(block: dict) -> list[str]:
    """What the numbers of one sampler say about Figure 3 (derived from them, nothing else)."""
    curves, diff = block["curves"], block.get("difference")
    lines = []
    for source in PAIR:
        c = curves.get(source)
        if not c or "auc" not in c:
            continue
        for m, key in (("auc", "auc"), ("paper", "paper_mean")):
            v = c[key]
            ci = c[f"{m}_ci95"]
            trend = "rises" if v[-1] > v[0] else "falls"
            lines.append(f"{source} {m}: layer 0 {v[0]} -> last layer {v[-1]} ({trend}; last-layer 95% CI "
                         f"[{ci['low'][-1]}, {ci['high'][-1]}]); excluded per layer {c['excluded']}")
    if diff:
        for m in ("auc", "paper"):
            d = diff[m]
            parts = []
            for layer, (e, lo, hi) in enumerate(zip(d["estimate"], d["low"], d["high"])):
                if lo is None or hi is None:
                    word = "undefined"
                else:
                    word = "DenseTrans higher" if lo > 0 else "DenseTrans lower" if hi < 0 else "CI contains 0"
                parts.append(f"layer {layer}: {e} [{lo}, {hi}] {word}")
            lines.append(f"DenseTrans − (−AllDense), {m}: " + "; ".join(parts))
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--negatives", nargs="+", default=["random", "bm25"])
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--sources", nargs="*", default=["minilm:cls", "minilm:mean", "densetrans", "densetrans:-AllDense"])
    ap.add_argument("--out")
    args = ap.parse_args()
    import torch

    from bench.harness import machine
    from core.analysis.layers import MEASURE_NAMES, bootstrap_ci, discriminativeness, sample_triples
    from core.data.datasets import load_dataset
    from core.errors import MissingArtifactError
    from core.serving.loader import load as load_system

    torch.set_num_threads(2)
    t_start = time.perf_counter()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "core/analysis/layers.py", "bench/layers_curves.py"],
                           capture_output=True, text=True, cwd=ROOT).stdout.strip()
    ds = load_dataset(args.dataset)
    out = {"command": "nice -n 10 .venv/bin/python " + " ".join(shlex.quote(a) for a in sys.argv),
           "commit": commit + (" (with uncommitted changes to the measure code)" if dirty else ""),
           "machine": machine(), "dataset": ds.name, "split": "test", "queries": args.queries, "seed": args.seed,
           "artifacts": os.environ.get("QRS_VAR", "var/"),
           "measures": {**MEASURE_NAMES, "old_clipped_mean_1e-3": "the previous measure, for reference only: "
                        "cosines clipped at 1e-3 before the log (each clipped negative adds about 6.9)"},
           "bootstrap": f"{args.resamples} resamples of the sampled queries with replacement (numpy, seed "
                        f"{args.seed}); 95% percentile intervals; the difference is paired (both models scored on "
                        "the same resampled triples); the paper's measure keeps each model's own exclusions",
           "auc_definition": "ROC AUC of the cosine separating the sample's positive pairs (q, q+) from its negative "
                             "pairs (q, q-): P(cos+ > cos-) over all (positive, negative) combinations, ties 1/2 "
                             "(Mann-Whitney with scipy.stats.rankdata; equal to sklearn roc_auc_score)",
           "by_negatives": {}}
    bm25 = load_system("bm25", ds) if "bm25" in args.negatives else None
    loaded: dict = {}
    for negatives in args.negatives:
        triples = sample_triples(ds, args.queries, negatives, bm25=bm25, seed=args.seed, split="test")
        block: dict = {"triples": len(triples), "curves": {}}
        built = {}
        for source in args.sources:
            base, _, tag = source.partition("#")
            name, _, variant = base.partition(":")
            t0 = time.perf_counter()
            try:
                if source not in loaded:
                    loaded[source] = layer_fn(name, variant or None, tag or None, ds)
            except MissingArtifactError as exc:
                block["curves"][source] = {"not_built": str(exc)}
                print(f"{source}: not built ({exc})", flush=True)
                continue
            curve = discriminativeness(source, loaded[source], triples)
            built[source] = curve
            block["curves"][source] = {**_curve_record(curve, args.resamples, args.seed),
                                       "seconds": round(time.perf_counter() - t0, 1)}
            fmt = lambda a: " ".join("  nan" if v != v else f"{v:.3f}" for v in a)  # noqa: E731
            print(f"[{negatives}] {source:22s} AUC {fmt(curve.auc)} | paper {fmt(curve.paper.mean)} | excluded "
                  f"{curve.paper.excluded.tolist()}", flush=True)
        if all(s in built for s in PAIR):
            a, b = built[PAIR[0]], built[PAIR[1]]
            block["difference"] = {m: bootstrap_ci(a, m, b, n_resamples=args.resamples, seed=args.seed).as_dict()
                                   for m in ("auc", "paper")}
        block["findings"] = _verdict(block)
        for line in block["findings"]:
            print(f"[{negatives}] {line}", flush=True)
        out["by_negatives"][negatives] = block
    out["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    out["total_seconds"] = round(time.perf_counter() - t_start, 1)
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
