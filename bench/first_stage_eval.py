"""Evaluate first-stage systems on the QQP held-out test queries against the full 36.7k collection.

Each query is removed from its own ranking (``search_many(..., ignore_identical_ids=True)``).
For every trained system: exact (flat) and ANN indexes; ranx metrics via core.evaluation; ANN recall
against exact search at the same k; per-query latency (batched search with stored query vectors, and
one-at-a-time with the query encoded from text); optional paired significance tests.

Usage: QRS_VAR=... python bench/first_stage_eval.py [--systems densetrans sdml-cnn:tl-ssd ...]
       [--indexes flat ivfpq hnsw] [--compare bm25,densetrans sdml-cnn:tl-ssd,sdml-cnn] [--out FILE]
A system is ``name[:variant][#tag]`` (tag = the experiment folder suffix of first_stage_train.py --tag); ``bm25`` is indexed in memory if not built.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

METRICS = ["recall@10", "recall@20", "recall@50", "recall@100", "mrr@100", "map@100", "ndcg@10",
           "hit_rate@1", "hit_rate@10"]


def parse(spec: str) -> tuple[str, str | None, str | None]:
    base, _, tag = spec.partition("#")
    name, _, variant = base.partition(":")
    return name, variant or None, tag or None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--systems", nargs="*", default=["bm25", "densetrans", "sdml-cnn"])
    ap.add_argument("--indexes", nargs="*", default=["flat", "default", "hnsw"])
    ap.add_argument("--compare", nargs="*", default=[])
    ap.add_argument("--latency-queries", type=int, default=200)
    ap.add_argument("--out")
    args = ap.parse_args()
    import faiss
    import numpy as np
    import torch

    torch.set_num_threads(1)
    faiss.omp_set_num_threads(1)
    from core.data.datasets import load_dataset
    from core.evaluation import as_run, compare_runs, evaluate_run
    from core.retrieval import bm25 as bm25_mod

    ds = load_dataset("qqp-bimpm")
    queries, qrels = ds.split_queries("test"), ds.split_qrels("test")
    results, runs = {}, {}
    for spec in args.systems:
        name, variant, tag = parse(spec)
        if name == "bm25":
            try:
                retriever = bm25_mod.load(ds)
            except Exception:
                retriever = bm25_mod.BM25Retriever.index(ds.corpus)
            t0 = time.perf_counter()
            rankings = retriever.search_many(queries, k=100, ignore_identical_ids=True)
            seconds = time.perf_counter() - t0
            results[spec] = {"flat": {**evaluate_run(qrels, rankings, METRICS),
                                      "ms_per_query_batched": 1000 * seconds / len(queries)}}
            runs[spec] = as_run(rankings, spec)
            print(spec, json.dumps(results[spec]), flush=True)
            continue
        if name == "densetrans":
            from core.retrieval import densetrans as mod
        elif name == "dual-encoder":
            from core.retrieval import dual_encoder as mod
        elif name == "glove-mean":
            from core.retrieval import wordmean as mod
        else:
            from core.retrieval import sdml as mod
        entry, exact_ids = {}, None
        if name == "glove-mean":
            from core.registry import system_dir

            folder = system_dir(ds.name, "glove-mean")
        elif name == "dual-encoder":
            folder = mod._folder(ds, tag)
        else:
            folder = mod._folder(ds, variant, tag)
        train_metrics = json.loads((folder / "metrics.json").read_text()) if (folder / "metrics.json").is_file() else {}
        entry["train"] = {k: v for k, v in train_metrics.items() if k not in ("history", "training")}
        entry["train"]["training"] = train_metrics.get("training") or train_metrics.get("history")
        for index in args.indexes:
            index_name = mod.DEFAULT_INDEX if index == "default" else index
            t0 = time.perf_counter()
            retriever = mod.load(ds, variant=variant, index=index_name, tag=tag)
            load_seconds = time.perf_counter() - t0
            t0 = time.perf_counter()
            rankings = retriever.search_many(queries, k=100, ignore_identical_ids=True)
            seconds = time.perf_counter() - t0
            row = {**evaluate_run(qrels, rankings, METRICS), "factory": retriever.spec.factory,
                   "search_params": retriever.spec.search_params, "load_seconds": load_seconds,
                   "ms_per_query_batched": 1000 * seconds / len(queries),
                   "distance_computations_per_query": float(np.mean(
                       [r.stats.get("distance_computations", 0) for r in rankings.values()]))}
            ids = {q: r.doc_ids for q, r in rankings.items()}
            if index_name == "flat":
                exact_ids = ids
                runs[spec] = as_run(rankings, spec)
            elif exact_ids is not None:
                for k in (10, 100):
                    row[f"ann_recall_vs_exact@{k}"] = float(np.mean(
                        [len(set(ids[q][:k]) & set(exact_ids[q][:k])) / max(1, len(exact_ids[q][:k])) for q in ids]))
            # end-to-end single-query latency: encode the text, then search
            sample = list(queries.values())[: args.latency_queries]
            t0 = time.perf_counter()
            for text in sample:
                vec = retriever.encoder.encode([text])
                if retriever.normalize:
                    vec = vec / np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12)
                retriever.retrieve_vectors(vec, 101)
            row["ms_per_query_single_encode+search"] = 1000 * (time.perf_counter() - t0) / len(sample)
            entry[index_name] = row
            print(spec, index_name, json.dumps(row), flush=True)
        results[spec] = entry
    reports = {}
    for pair in args.compare:
        a, b = pair.split(",")
        report = compare_runs(qrels, [runs[a], runs[b]], metrics=("recall@100", "mrr@100", "map@100", "ndcg@10"))
        reports[pair] = {"table": str(report), "dict": report.to_dict()}
        print(report, flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"results": results, "compare": reports}, indent=1, default=str))


if __name__ == "__main__":
    main()
