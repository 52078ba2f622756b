"""Severyn–Moschitti CNN: TrecQA (TRAIN → raw/clean TEST, with and without overlap features, Tables 2-3)
and QQP (pairs Acc/AUC, Jaccard buckets, reranking BM25 / MiniLM top-20, latency).

Usage: QRS_VAR=... python bench/rerank_cnn.py --dataset trecqa|qqp-bimpm [--variant no-features]
       [--skip-build] [--rerank-queries N] [--out JSON]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from core.data.datasets import load_dataset
from core.evaluation import evaluate_run
from core.rerank import cnn as C


def trecqa_eval(reranker, ds) -> dict:
    out = {}
    for split in ("test", "clean-test", "dev"):
        cands = C.candidate_rankings(ds, split)
        run = reranker.rerank_many({q: ds.queries[q] for q in cands}, cands, ds.corpus)
        with_rel = {q: ds.qrels[q] for q in cands if any(v > 0 for v in ds.qrels[q].values())}
        all_q = {q: ds.qrels[q] for q in cands}
        out[split] = {
            "queries": len(cands), "queries_with_relevant": len(with_rel),
            "dropping_queries_without_relevant": evaluate_run(with_rel, run, ["map@1000", "mrr@1000"]),
            "all_queries_zero_if_no_relevant": evaluate_run(all_q, run, ["map@1000", "mrr@1000"]),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="trecqa")
    ap.add_argument("--variant", default=None)
    ap.add_argument("--skip-build", action="store_true")
    ap.add_argument("--rerank-queries", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ds = load_dataset(args.dataset)
    result: dict = {"dataset": args.dataset, "variant": args.variant or "with-features"}
    if not args.skip_build:
        t0 = time.perf_counter()
        result["build"] = C.build(ds, variant=args.variant, progress=lambda f, m: None)
        result["build_seconds"] = time.perf_counter() - t0
    rr = C.load(ds, variant=args.variant)
    if ds.candidates:
        result["eval"] = trecqa_eval(rr, ds)
    else:
        from bench.rerank_common import rerank_eval
        from bench.rerank_frm import pair_metrics

        result["test_pairs"] = pair_metrics(rr, ds)
        if args.rerank_queries:
            result["rerank"] = rerank_eval(rr, ds, args.rerank_queries)
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
