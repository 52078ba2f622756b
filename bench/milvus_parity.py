"""Milvus parity on the QQP held-out test queries: the same system served by faiss/bm25s and by
Milvus gives the same top-10.

For each exact index (BM25 on Milvus's sparse inverted index against bm25s; glove-mean and DenseTrans on
Milvus FLAT against faiss exact search), every test query is ranked both ways through the one loader
(``core.serving.loader``; ``backend="milvus"`` for the Milvus side), each query dropped from its own
ranking, k = 10: overlap@10 (the mean of |A ∩ B| / 10), identical top-10 lists, and the largest score
difference at the same rank. A ``milvus-lite server`` is started on 127.0.0.1 for the run.

    .venv/bin/python -m bench.milvus_parity            # writes bench/reports/milvus_parity.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
K = 10
SYSTEMS = ("bm25", "glove-mean", "densetrans")


def compare(ref: dict, got: dict) -> dict:
    """overlap@10, identical lists and max |score difference| at the same rank over the shared queries."""
    qids = sorted(ref)
    overlap = [len(set(ref[q].doc_ids) & set(got[q].doc_ids)) / K for q in qids]
    identical = sum(ref[q].doc_ids == got[q].doc_ids for q in qids)
    diffs = [abs(a - b) for q in qids for a, b in zip(ref[q].scores, got[q].scores)]
    return {"queries": len(qids), "overlap@10": round(float(np.mean(overlap)), 5), "identical_top10_lists": identical,
            "max_abs_score_diff_at_same_rank": float(f"{max(diffs, default=0.0):.2g}")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="qqp-bimpm")
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS))
    parser.add_argument("--out", default=str(ROOT / "bench" / "reports" / "milvus_parity.json"))
    args = parser.parse_args(argv)
    from bench.measure import machine
    from core.data.datasets import load_dataset
    from core.retrieval.milvus_server import LocalMilvusServer
    from core.serving.loader import load

    dataset = load_dataset(args.dataset)
    queries = {q: dataset.queries[q] for q in dataset.query_splits["test"]}
    rows: dict[str, dict] = {}
    started = time.perf_counter()
    with LocalMilvusServer(ready_timeout=120) as server:
        os.environ["QRS_MILVUS_URI"] = server.uri
        for name in args.systems:
            reference = load(name, dataset)
            served = load(name, dataset, backend="milvus")
            ref = reference.search_many(queries, k=K, ignore_identical_ids=True)
            got = served.search_many(queries, k=K, ignore_identical_ids=True)
            rows[f"{served.name} vs {reference.name}"] = compare(ref, got)
            print(json.dumps({served.name: rows[f'{served.name} vs {reference.name}']}), flush=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    report = {
        "command": ".venv/bin/python -m bench.milvus_parity " + " ".join(argv if argv is not None else sys.argv[1:]),
        "commit": commit, "machine": machine(), "dataset": args.dataset, "split": "test", "k": K,
        "collection": len(dataset.corpus), "self_match": "each query removed from its own ranking on both sides",
        "ties": ("BM25 (bm25s and Milvus) fetch past rank k and order a score tie by collection position "
                 "(core.retrieval.base.order_ties), so both exact engines cut the tie at rank k the same way"),
        "results": rows, "total_seconds": round(time.perf_counter() - started, 1),
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
    }
    out = Path(args.out)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
