"""FRM rerank latency for 1 query × 20 candidates: features, one MiniLM query forward, FRM scoring.

Usage: QRS_VAR=... python bench/rerank_latency.py [--threads 2] [--n 20]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch

from core.data import load_dataset
from core.rerank import frm as F
from core.retrieval.base import Ranking


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ds = load_dataset("qqp-bimpm")
    rr = F.load(ds)
    qids = sorted(ds.split_queries("test"))[: args.n + 1]
    ids = list(ds.corpus)[100:120]
    docs = [ds.corpus[i] for i in ids]
    rr.rerank(ds.queries[qids[0]], Ranking("x", ids, [0.0] * 20), ds.corpus)  # warm-up
    # total = score_pairs (cached candidate vectors); minilm = one uncached query forward; frm = total − features
    parts = {"features": [], "minilm": [], "frm": [], "total": []}
    for q in qids[1:]:
        query = ds.queries[q]
        t0 = time.perf_counter()
        feats = rr.featurizer.features(list(dict.fromkeys([query, *docs])))
        t1 = time.perf_counter()
        rr.featurizer.vectors(feats[:1])  # MiniLM forward for a typed (uncached) query
        t2 = time.perf_counter()
        rr.score_pairs([query] * 20, docs)  # full path (features + MiniLM + FRM)
        t3 = time.perf_counter()
        parts["features"].append(t1 - t0)
        parts["minilm"].append(t2 - t1)
        parts["total"].append(t3 - t2)
        parts["frm"].append((t3 - t2) - (t1 - t0))
    print(json.dumps({k: round(1000 * float(np.median(v)), 1) for k, v in parts.items()} | {"threads": args.threads, "n": args.n}))


if __name__ == "__main__":
    main()
