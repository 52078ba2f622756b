"""Where error analysis looks closer: unjudged items in the systems' top-k (``unjudged_rate``, ``most_unjudged``)
and query groups (Jaccard difficulty buckets, query length) with each system's mean metric per group.

Buckets
- Jaccard (frm-multiview-chong.md §4.2): a labelled *pair* is hard when a positive has word Jaccard
  in [0, 0.2] or a negative in [0.7, 1]; easy when a positive is in [0.7, 1] or a negative in
  [0, 0.2]; middle otherwise. A *query* is hard when all its positives are hard, easy when all are
  easy, middle otherwise (the paper buckets pairs; per-query metrics need the query lifted).
- Query length in words (``core.data.pipeline.terms``).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from ranx import Run

from core.analysis.error_analysis import Analysis
from core.data.pipeline import terms

LENGTH_BINS = ((1, 5), (6, 10), (11, 15), (16, 20), (21, 10**9))


# ----------------------------------------------------------------------------- unjudged
@dataclass(frozen=True)
class UnjudgedRate:
    """Share of a system's top-k items that carry no label in the chosen source."""

    system: str
    k: int
    retrieved: int
    unjudged: int

    @property
    def rate(self) -> float:
        return self.unjudged / self.retrieved if self.retrieved else 0.0


def unjudged_rate(run: Run, judged: Mapping[str, Mapping[str, int]], k: int = 10,
                  queries: Sequence[str] | None = None) -> UnjudgedRate:
    """How many of the run's top-k items (over ``queries``, default all) have no label."""
    data = run.to_dict()
    retrieved = unjudged = 0
    for q in queries if queries is not None else list(data):
        top = sorted(data.get(q, {}).items(), key=lambda kv: (-kv[1], kv[0]))[:k]
        labels = judged.get(q, {})
        retrieved += len(top)
        unjudged += sum(d not in labels for d, _ in top)
    return UnjudgedRate(run.name, k, retrieved, unjudged)


def most_unjudged(runs: Sequence[Run], judged: Mapping[str, Mapping[str, int]], k: int = 10,
                  limit: int = 20) -> list[tuple[str, int, dict[str, list[str]]]]:
    """Queries with the most unlabelled items in the systems' pooled top-k: (qid, count, pool)."""
    datas = {r.name: r.to_dict() for r in runs}
    qids = sorted({q for d in datas.values() for q in d})
    out = []
    for q in qids:
        pool = {name: [d for d, _ in sorted(data.get(q, {}).items(), key=lambda kv: (-kv[1], kv[0]))[:k]]
                for name, data in datas.items()}
        missing = {d for ids in pool.values() for d in ids if d not in judged.get(q, {})}
        if missing:
            out.append((q, len(missing), pool))
    out.sort(key=lambda t: (-t[1], t[0]))
    return out[:limit]


# ----------------------------------------------------------------------------- buckets
def jaccard(a: str, b: str) -> float:
    """Word-set Jaccard similarity (``core.data.pipeline.terms``); 0 for two empty texts."""
    sa, sb = set(terms(a)), set(terms(b))
    union = sa | sb
    return len(sa & sb) / len(union) if union else 0.0


def pair_bucket(similarity: float, relevant: bool) -> str:
    """frm-multiview-chong.md §4.2: hard / easy / middle for one labelled pair."""
    low, high = similarity <= 0.2, similarity >= 0.7
    if relevant:
        return "hard" if low else "easy" if high else "middle"
    return "hard" if high else "easy" if low else "middle"


def query_buckets(qrels: Mapping[str, Mapping[str, int]], queries: Mapping[str, str],
                  corpus: Mapping[str, str]) -> dict[str, str]:
    """Query -> bucket from its positives: all hard -> hard, all easy -> easy, else middle."""
    out = {}
    for q, docs in qrels.items():
        buckets = {pair_bucket(jaccard(queries[q], corpus[d]), True) for d, label in docs.items()
                   if label > 0 and d in corpus}
        if buckets:
            out[q] = buckets.pop() if len(buckets) == 1 and buckets <= {"hard", "easy"} else "middle"
    return out


def pair_bucket_counts(judged: Mapping[str, Mapping[str, int]], queries: Mapping[str, str],
                       corpus: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """Labelled pairs per bucket, split into positives and negatives."""
    out = {b: {"positive": 0, "negative": 0} for b in ("hard", "middle", "easy")}
    for q, docs in judged.items():
        if q not in queries:
            continue
        for d, label in docs.items():
            if d in corpus:
                out[pair_bucket(jaccard(queries[q], corpus[d]), label > 0)]["positive" if label > 0 else "negative"] += 1
    return out


def length_bucket(text: str) -> str:
    """Query length bin in words (``LENGTH_BINS``)."""
    n = len(terms(text))
    for lo, hi in LENGTH_BINS:
        if lo <= n <= hi:
            return f"{lo}-{hi}" if hi < 10**9 else f"{lo}+"
    return "0"


def metric_by_group(analysis: Analysis, metric: str, groups: Mapping[str, str],
                    order: Sequence[str] | None = None) -> list[dict]:
    """Mean per-query metric of every system within each group: rows {group, queries, system...}."""
    values = analysis.per_query[metric]
    names = list(order) if order is not None else sorted(set(groups.values()))
    rows = []
    for g in names:
        qids = [q for q in values[analysis.baseline] if groups.get(q) == g]
        if not qids:
            continue
        row: dict = {"group": g, "queries": len(qids)}
        for s in analysis.systems:
            row[s] = float(np.mean([values[s].get(q, 0.0) for q in qids]))
        rows.append(row)
    return rows
