"""Shared helpers for the reranker benchmarks: first-stage top-20 candidates (BM25, MiniLM bi-encoder)
for held-out test queries (each query removed from its own ranking), reranking metrics, latency."""
from __future__ import annotations

import time

import numpy as np

from core.evaluation import evaluate_run
from core.registry import load_system

METRICS = ("map@20", "mrr@100", "precision@1")


def first_stage(dataset, name: str, variant: str | None, qids: list[str], k: int = 20):
    """Top-k of a built first-stage system for ``qids`` (ignore_identical_ids=True), or None if not built."""
    try:
        retriever = load_system(name, dataset, variant=variant)
    except Exception as exc:  # noqa: BLE001 - report and skip
        print(f"[skip] first stage {name}: {exc}")
        return None
    return retriever.search_many({q: dataset.queries[q] for q in qids}, k=k, ignore_identical_ids=True)


def sample_queries(dataset, n: int, seed: int = 0) -> list[str]:
    qids = sorted(dataset.split_queries("test"))
    if n and n < len(qids):
        rng = np.random.default_rng(seed)
        qids = sorted(rng.choice(qids, n, replace=False).tolist())
    return qids


def rerank_eval(reranker, dataset, n_queries: int = 300, k: int = 20) -> dict:
    """MAP@20 / MRR / P@1 of BM25 and MiniLM top-20 before and after reranking, plus latency per query."""
    qids = sample_queries(dataset, n_queries)
    qrels = {q: dataset.qrels[q] for q in qids if dataset.qrels.get(q)}
    out: dict = {"queries": len(qids), "note": "held-out test queries (sample, seed 0); query removed from its own ranking"}
    for name, variant in (("bm25", None), ("minilm", "mean")):
        cands = first_stage(dataset, name, variant, qids, k)
        if cands is None:
            continue
        before = evaluate_run(qrels, cands, METRICS)
        t0 = time.perf_counter()
        after_r = reranker.rerank_many({q: dataset.queries[q] for q in qids}, cands, dataset.corpus, batch_pairs=20 * 32)
        seconds = time.perf_counter() - t0
        for q in after_r:  # keep the candidate set: same ids, new order
            assert sorted(after_r[q].doc_ids) == sorted(cands[q].doc_ids)
        after = evaluate_run(qrels, after_r, METRICS)
        out[f"{name}{'@' + variant if variant else ''}"] = {"before": before, "after": after,
                                                            "rerank_seconds_per_query": seconds / max(1, len(qids))}
    out["latency_ms_20"] = latency(reranker, dataset, qids[:30])
    return out


def latency(reranker, dataset, qids: list[str], k: int = 20) -> dict:
    """Wall time of ``rerank`` for one query and 20 candidates (warm; p50 / p90 in ms)."""
    from core.retrieval.base import Ranking

    ids = list(dataset.corpus)[:k]
    reranker.rerank(dataset.queries[qids[0]], Ranking("x", ids, [0.0] * k), dataset.corpus)  # warm-up
    times = []
    for q in qids:
        cand = Ranking("x", ids, [0.0] * k)
        t0 = time.perf_counter()
        reranker.rerank(dataset.queries[q], cand, dataset.corpus)
        times.append((time.perf_counter() - t0) * 1000)
    return {"p50": float(np.percentile(times, 50)), "p90": float(np.percentile(times, 90)), "n": len(times)}
