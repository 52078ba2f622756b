"""Train FRM (quick profile, or an ablation variant) on QQP and measure pair Acc/AUC, Jaccard buckets,
reranking of BM25 / MiniLM bi-encoder top-20 on held-out test queries, and rerank latency.

Usage: QRS_VAR=... python bench/rerank_frm.py [--variant V] [--train-pairs N] [--epochs E]
       [--rerank-queries N] [--skip-build] [--out JSON]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch

from core.data.datasets import load_dataset
from core.data.keywords import jaccard_bucket, jaccard_texts
from core.rerank import frm as F


def pair_metrics(reranker, dataset, split: str = "test") -> dict:
    pairs = dataset.pairs[split]
    q = [dataset.corpus[p.id1] for p in pairs]
    d = [dataset.corpus[p.id2] for p in pairs]
    labels = np.array([p.label for p in pairs])
    t0 = time.perf_counter()
    probs = reranker.score_pairs(q, d)
    seconds = time.perf_counter() - t0
    out = {"pairs": len(pairs), **F.accuracy_auc(labels, probs), "score_seconds": seconds}
    buckets = np.array([jaccard_bucket(l, jaccard_texts(a, b)) for l, a, b in zip(labels, q, d)])
    for b in ("hard", "easy", "middle"):
        sel = buckets == b
        out[f"acc_{b}"] = float(((probs[sel] > 0.5) == (labels[sel] > 0)).mean()) if sel.any() else float("nan")
        out[f"n_{b}"] = int(sel.sum())
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", default=None)
    ap.add_argument("--train-pairs", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=3, help="epoch cap (early stopping on dev AUC decides)")
    ap.add_argument("--rerank-queries", type=int, default=300)
    ap.add_argument("--skip-build", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ds = load_dataset("qqp-bimpm")
    result: dict = {"variant": args.variant or "full"}
    if not args.skip_build:
        tcfg = dataclasses.replace(F.FRMTrainConfig.for_profile("quick"), train_pairs=args.train_pairs,
                                   max_epochs=args.epochs)
        t0 = time.perf_counter()
        result["build"] = F.build(ds, variant=args.variant, train_config=tcfg,
                                  progress=lambda f, m: None)
        result["build_seconds"] = time.perf_counter() - t0
    rr = F.load(ds, variant=args.variant)
    result["test_pairs"] = pair_metrics(rr, ds)
    if rr.store is not None and rr.model.importance_net is not None:  # w(k, q) on the test pairs' questions
        from core.training import device

        texts = list(dict.fromkeys(ds.corpus[i] for p in ds.pairs["test"] for i in (p.id1, p.id2)))
        feats = rr.featurizer.features(texts)
        rr.store.ensure(rr.featurizer, feats)
        result["importance_test"] = F.importance_report(rr.model, feats, rr.store, device())
    if args.rerank_queries:
        from bench.rerank_common import rerank_eval

        result["rerank"] = rerank_eval(rr, ds, args.rerank_queries)
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
