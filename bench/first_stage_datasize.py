"""Data-size curve: a first-stage encoder trained on 1/8, 1/4, 1/2 and all of the
positive train pairs (same rule: early stopping on its dev metric, Recall@100 for DenseTrans and the
dual encoder, H@1 for SDML-CNN), scored on the 1,781 held-out QQP
test queries against the full 36,737-question collection, exact search, each query dropped from its
own ranking. Prints one JSON line per fraction and a markdown table.

Usage: QRS_VAR=... python bench/first_stage_datasize.py [--system densetrans|dual-encoder|sdml-cnn]
       [--fractions 0.125 0.25 0.5 1] [--profile quick] [--threads 1] [--set key=value ...]
Each run is stored as the system's experiment folder ``<variant>+frac<f>`` (``dual-encoder@frac<f>``).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--system", default="densetrans", choices=["densetrans", "dual-encoder", "sdml-cnn"])
    ap.add_argument("--fractions", nargs="*", type=float, default=[0.125, 0.25, 0.5, 1.0])
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--set", nargs="*", action="extend", default=[])
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    from core.data.datasets import load_dataset

    overrides = {}
    for kv in args.set:
        k, v = kv.split("=", 1)
        overrides[k] = json.loads(v) if v[:1] in "0123456789-[{tf" else v
    from core.retrieval import densetrans, dual_encoder, sdml

    mod = {"densetrans": densetrans, "dual-encoder": dual_encoder, "sdml-cnn": sdml}[args.system]
    ds = load_dataset("qqp-bimpm")
    rows = []
    for fraction in args.fractions:
        tag = f"frac{fraction:g}"
        t0 = time.perf_counter()
        cfg = mod.make_config(args.profile, train_fraction=fraction, **overrides)
        metrics = mod.build(ds, args.profile, config=cfg, tag=tag)
        log = metrics["training"]
        row = {"system": args.system, "fraction": fraction,
               "train_pairs": metrics["train_pairs"],
               "train_queries": metrics.get("train_queries"), **metrics["test"], "best_dev": log["best_dev"],
               "best_step": log["best_step"], "stopped": log["stopped"], "seconds": time.perf_counter() - t0}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"\n| fraction | train queries | positive pairs | test R@100 | H@1 | MRR@100 | best dev {log['dev_metric']} (step) | stopped |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        queries = f"{r['train_queries']:,}" if r["train_queries"] is not None else "–"
        print(f"| {r['fraction']:g} | {queries} | {r['train_pairs']:,} | {r['recall@100']:.4f} | "
              f"{r['hit_rate@1']:.4f} | {r['mrr@100']:.4f} | {r['best_dev']:.4f} ({r['best_step']}) | {r['stopped']} |")


if __name__ == "__main__":
    main()
