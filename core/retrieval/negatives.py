"""Hard negatives from BM25 (densetrans-cai2021.md §4.1): each training question's BM25 top-100 with
its paraphrases (and itself) removed. Computed once per (dataset, split, depth) and cached in
``var/cache/negatives``.
"""
from __future__ import annotations

import time

from core.artifacts import save_json
from core.data.datasets import Dataset
from core.paths import artifact_dir
from core.registry import slug
from core.progress import ProgressFn, no_progress


def _bm25(dataset: Dataset):
    """The built BM25 system if there is one for this collection, else an in-memory index (seconds)."""
    from core.errors import MissingArtifactError
    from core.retrieval import bm25

    try:
        return bm25.load(dataset)
    except (MissingArtifactError, OSError, ValueError):
        return bm25.BM25Retriever.index(dataset.corpus)


def bm25_negatives(
    dataset: Dataset, split: str = "train", depth: int = 100, progress: ProgressFn = no_progress
) -> dict[str, list[str]]:
    """Query id -> BM25 top-``depth`` ids minus the query and its relevant questions (best first).

    Cached as JSON; a corrupt or stale cache file is recomputed.
    """
    import json

    path = artifact_dir("cache", "negatives") / f"{slug(dataset.name)}-{split}-bm25top{depth}.json"
    queries = dataset.split_queries(split)
    if path.is_file():
        try:
            cached = json.loads(path.read_text(encoding="utf-8"))
            if set(cached) == set(queries):
                progress(1.0, "BM25 negatives loaded from cache")
                return cached
        except (json.JSONDecodeError, UnicodeDecodeError):
            pass
    start = time.perf_counter()
    progress(0.0, f"BM25 negatives: ranking {len(queries):,} {split} questions")
    retriever = _bm25(dataset)
    if len(queries) < 2000:
        retriever.batch_size = 63  # bm25s' numpy backend: no numba compilation for a few queries
    rankings = retriever.search_many(queries, k=depth, ignore_identical_ids=True, progress=progress)
    out = {}
    for qid, ranking in rankings.items():
        positives = dataset.qrels.get(qid, {})
        out[qid] = [d for d in ranking.doc_ids if d != qid and d not in positives]
    save_json(path, out)
    progress(1.0, f"BM25 negatives in {time.perf_counter() - start:.1f}s")
    return out
