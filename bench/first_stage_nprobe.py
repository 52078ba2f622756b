"""ANN recall against exact search vs the IVF probe count (DenseTrans IVFPQ, SDML-CNN IVF), QQP test queries.

Usage: QRS_VAR=... python bench/first_stage_nprobe.py [--nprobe 10 40 100]
Reports, per setting, the mean |ANN top-k ∩ exact top-k| / k (k = 10, 100), Recall@100 (ranx, query
removed from its own ranking) and the distance computations per query.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nprobe", nargs="*", type=int, default=[10, 40, 100])
    args = ap.parse_args()
    import faiss
    import numpy as np
    import torch

    torch.set_num_threads(1)
    faiss.omp_set_num_threads(1)
    from core.data.datasets import load_dataset
    from core.evaluation import evaluate_run
    from core.retrieval import densetrans, sdml

    ds = load_dataset("qqp-bimpm")
    queries, qrels = ds.split_queries("test"), ds.split_qrels("test")
    for mod in (densetrans, sdml):
        exact = mod.load(ds, index="flat").search_many(queries, k=100)
        ann = mod.load(ds, index="ivfpq" if mod is densetrans else "ivf")  # the papers' ANN (defaults are exact now)
        for nprobe in args.nprobe:
            ann.set_params(f"nprobe={nprobe}")
            got = ann.search_many(queries, k=100)
            row = {"system": mod.SYSTEM, "index": ann.spec.factory, "nprobe": nprobe,
                   "recall@100": evaluate_run(qrels, got, ["recall@100"])["recall@100"],
                   "distance_computations_per_query": float(np.mean([r.stats["distance_computations"] for r in got.values()]))}
            for k in (10, 100):
                row[f"ann_vs_exact@{k}"] = float(np.mean([len(set(got[q].doc_ids[:k]) & set(exact[q].doc_ids[:k])) / k for q in got]))
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
