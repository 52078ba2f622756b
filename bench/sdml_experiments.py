"""SDML-CNN experiments: train one config (early stopping on dev H@1) and measure the held-out test
queries by exact search against the full collection (each query dropped from its own ranking).

Usage: QRS_VAR=... python bench/sdml_experiments.py [--variant tl-ssd] [--profile quick] [--tag T]
       [--threads 2] [--set key=value ...] [--reference | --build]   (one JSON line on stdout)
``--reference`` also measures the untrained copy of the CNN and the mean-GloVe-50d baseline;
``--build`` runs the system's own build() (metrics.json with the same three measurements, served index).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TEST_METRICS = ("hit_rate@1", "hit_rate@10", "recall@100", "mrr@100")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant")
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--tag", default="exp")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--set", nargs="*", action="extend", default=[])
    ap.add_argument("--reference", action="store_true")
    ap.add_argument("--build", action="store_true", help="run the system's build() (writes metrics.json)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    from core.data.datasets import load_dataset
    from core.retrieval import sdml

    overrides = {}
    for kv in args.set:
        k, v = kv.split("=", 1)
        try:
            overrides[k] = json.loads(v)
        except json.JSONDecodeError:
            overrides[k] = v
    ds = load_dataset("qqp-bimpm")
    cfg = sdml.make_config(args.profile, args.variant, **overrides)
    t0 = time.perf_counter()
    if args.build:  # the system's own build(): training, collection vectors, test + untrained + reference
        metrics = sdml.build(ds, args.profile, variant=cfg.variant, config=cfg, tag=args.tag, resume=False)
        out = {"variant": cfg.variant, "tag": args.tag, "config": overrides, "wall_seconds": time.perf_counter() - t0,
               "test": metrics.pop("test"), "untrained_test": metrics.pop("untrained")["test"],
               "glove_mean_test": metrics["training"]["reference"]["test_metrics"]}
    else:
        folder = sdml._folder(ds, cfg.variant, args.tag)
        metrics = sdml.train(ds, cfg, folder, resume=False)
        out = {"variant": cfg.variant, "tag": args.tag, "config": overrides, "train_seconds": time.perf_counter() - t0}
        _cfg, encoder = sdml._load_model(folder, "bench")
        out["test"] = sdml.retrieval_scores(encoder.encode, ds, "test", "all", metrics=TEST_METRICS)
        if args.reference:
            vocab = encoder.vocab
            untrained = sdml._encoder(sdml.new_model(cfg, vocab).eval(), vocab, cfg, "untrained")
            out["untrained_test"] = sdml.retrieval_scores(untrained.encode, ds, "test", "all", metrics=TEST_METRICS)
            out["glove_mean_test"] = sdml.retrieval_scores(sdml.glove_mean_encode, ds, "test", "all",
                                                           metrics=TEST_METRICS, metric="cos")
            out["glove_mean_dev"] = sdml.retrieval_scores(sdml.glove_mean_encode, ds, "dev", metric="cos")
    tr = metrics.pop("training")
    out["curve"] = [(p["step"], round(p["dev"], 4), None if p["loss"] is None else round(p["loss"], 4),
                     round(p["seconds"], 1)) for p in tr["curve"]]
    out["stopped"] = tr["stopped"]
    out.update(metrics)
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
