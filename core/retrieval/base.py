"""One interface per role: a retriever ranks the collection for a query; a reranker rescores candidates.

Every system returns a ``Ranking`` (ordered doc ids, scores, seconds, and counters such as distance
computations) for one query, and a ``ranx.Run`` named after the system for many queries. Callers
never branch on concrete classes.

Self-match removal: in the QQP protocol every query is also in the collection; ``search_many(...,
ignore_identical_ids=True)`` and ``search(..., exclude=[qid])`` fetch one extra hit and drop the
query's own id before truncating to k (BEIR's ``ignore_identical_ids``).
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from core.errors import QueryError
from core.data.pipeline import terms
from core.data.text import strip_control
from core.progress import ProgressFn, no_progress

if TYPE_CHECKING:
    from ranx import Run

MAX_QUERY_CHARS = 2000


def validate_query(text: str, max_chars: int = MAX_QUERY_CHARS) -> str:
    """Clean a user query or raise ``QueryError`` with a message to show (nothing is run).

    Refused: non-text, empty or white space only, longer than ``max_chars``, and text without a word token
    of the text pipeline (``core.data.pipeline.terms``: punctuation or symbols only)."""
    if not isinstance(text, str):
        raise QueryError("the query must be text")
    cleaned = " ".join(strip_control(text).split())
    if not cleaned:
        raise QueryError("the query is empty: type a question")
    if len(cleaned) > max_chars:
        raise QueryError(f"the query has {len(cleaned):,} characters; the limit is {max_chars:,}")
    if not terms(cleaned):  # "???", "!!": nothing any system can match (BM25 finds no term, encoders rank junk)
        raise QueryError(f"the query {cleaned!r} has no words (letters or digits): type a question")
    return cleaned


@dataclass
class Ranking:
    """One system's answer for one query."""

    system: str
    doc_ids: list[str]
    scores: list[float]
    seconds: float = 0.0
    stats: dict[str, float] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.doc_ids)

    def top(self, k: int) -> Ranking:
        return Ranking(self.system, self.doc_ids[:k], self.scores[:k], self.seconds, dict(self.stats))

    def as_dict(self) -> dict[str, float]:
        return dict(zip(self.doc_ids, map(float, self.scores)))


@dataclass
class Hits:
    """Raw batched output of a retriever: ids and scores per query (best first), optional counters."""

    ids: list[list[str]]
    scores: list[list[float]]
    stats: list[dict[str, float]] | None = None


def to_run(rankings: Mapping[str, Ranking], name: str) -> Run:
    """Many rankings -> a ``ranx.Run`` named after the system."""
    from ranx import Run  # here, not at import: ranx loads matplotlib and scipy.stats, seconds of a page's first visit
    run = Run.from_dict({q: r.as_dict() for q, r in rankings.items() if r.doc_ids}, name=name)
    run.name = name
    return run


TIE_TOLERANCE = 1e-5  # relative: float32 sums of one score computed two ways differ by ~1e-6


def tie_depth(k: int) -> int:
    """How many hits to fetch so that the score tie at rank ``k`` can be ordered (``order_ties``)."""
    return k + max(32, k)


def order_ties(positions: Sequence[int], scores: Sequence[float], k: int,
               tolerance: float = TIE_TOLERANCE) -> list[int]:
    """Indices into ``positions``/``scores``, best first, at most ``k``: scores within ``tolerance``
    (relative, chained) of the previous one are a tie, and a tie is ordered by collection position.

    One order for one scoring function, whichever engine computed it (bm25s, Milvus's sparse index):
    engines break equal scores their own way and sum floats in their own order, so without this the
    top-k of two exact engines differs at the tie that straddles rank k (faiss/Milvus parity)."""
    values = np.asarray(scores, dtype=np.float64)
    by_score = np.argsort(-values, kind="stable")
    group = np.zeros(len(by_score), dtype=np.int64)
    for j in range(1, len(by_score)):
        prev, cur = values[by_score[j - 1]], values[by_score[j]]
        group[j] = group[j - 1] + (prev - cur > tolerance * max(1.0, abs(prev)))
    pos = np.asarray(positions, dtype=np.int64)[by_score]
    order = np.lexsort((pos, group))
    return by_score[order][:k].tolist()


def _drop(ids: Sequence[str], scores: Sequence[float], exclude: set[str], k: int) -> tuple[list[str], list[float]]:
    keep = [(d, float(s)) for d, s in zip(ids, scores) if d not in exclude][:k]
    return [d for d, _ in keep], [s for _, s in keep]


class Retriever(ABC):
    """First-stage ranker over a fixed collection. Subclasses implement ``retrieve`` (batched)."""

    name: str = "retriever"
    batch_size: int = 256

    @abstractmethod
    def retrieve(self, texts: list[str], k: int) -> Hits:
        """Top-k collection ids for each text, best first (batched; no self-match handling)."""

    def search(self, query: str, k: int = 10, exclude: Iterable[str] = ()) -> Ranking:
        """Rank the collection for one query; ids in ``exclude`` (e.g. the query's own id) are dropped."""
        query = validate_query(query)
        exclude = set(exclude)
        start = time.perf_counter()
        hits = self.retrieve([query], k + len(exclude))
        ids, scores = _drop(hits.ids[0], hits.scores[0], exclude, k)
        seconds = time.perf_counter() - start
        return Ranking(self.name, ids, scores, seconds, (hits.stats or [{}])[0])

    def search_many(
        self,
        queries: Mapping[str, str],
        k: int = 100,
        ignore_identical_ids: bool = True,
        progress: ProgressFn = no_progress,
    ) -> dict[str, Ranking]:
        """Rank for many queries in batches; with ``ignore_identical_ids`` a query id never ranks itself."""
        qids = list(queries)
        extra = 1 if ignore_identical_ids else 0
        out: dict[str, Ranking] = {}
        for start in range(0, len(qids), self.batch_size):
            batch = qids[start : start + self.batch_size]
            t0 = time.perf_counter()
            hits = self.retrieve([queries[q] for q in batch], k + extra)
            per_query = (time.perf_counter() - t0) / max(1, len(batch))
            for i, qid in enumerate(batch):
                ids, scores = _drop(hits.ids[i], hits.scores[i], {qid} if extra else set(), k)
                out[qid] = Ranking(self.name, ids, scores, per_query, (hits.stats or [{}] * len(batch))[i])
            progress(min(1.0, (start + len(batch)) / len(qids)), f"{self.name}: {start + len(batch)}/{len(qids)} queries")
        return out


class Reranker(ABC):
    """Rescores candidates from any first stage. Subclasses implement ``score_pairs`` (batched)."""

    name: str = "reranker"
    # an interpolation chosen on dev (core.rerank.interpolation.Interpolation), or None
    interpolation = None
    # the pair scorer whose score is mixed in when the partner is not the first stage (set by the loader)
    partner = None

    def _served(self, scores: np.ndarray, candidates: Ranking, queries: list[str] | None = None,
                docs: list[str] | None = None, partner_scores: np.ndarray | None = None) -> np.ndarray:
        """The ranking scores: the reranker's own, or interpolated with its partner's when a weight was
        chosen for candidates of exactly this first stage (``core.rerank.interpolation``): the first stage's
        own scores, or the partner scorer's on the same (query, doc) pairs."""
        mixing = self.interpolation
        if mixing is None or mixing.weight <= 0 or candidates.system != mixing.first_stage:
            return scores
        if self.partner is not None:
            if partner_scores is not None:
                other = np.asarray(partner_scores, dtype=np.float64)
            elif queries is None or docs is None or not len(scores):
                return scores
            else:
                other = np.asarray(self.partner.score_pairs(queries, docs), dtype=np.float64)
        else:
            if len(candidates.scores) != len(scores):
                return scores
            other = np.asarray(candidates.scores, dtype=np.float64)
        return mix(scores, other, mixing.weight)

    @abstractmethod
    def score_pairs(self, queries: list[str], docs: list[str]) -> np.ndarray:
        """Relevance score for each (query, doc) pair; higher is better."""

    def rerank(self, query: str, candidates: Ranking, corpus: Mapping[str, str], k: int | None = None) -> Ranking:
        """Reorder ``candidates`` (same ids, new scores); keep the top ``k`` (all by default)."""
        query = validate_query(query)
        start = time.perf_counter()
        ids = list(candidates.doc_ids)
        if not ids:
            return Ranking(self.name, [], [], 0.0)
        texts = [corpus[d] for d in ids]
        scores = np.asarray(self.score_pairs([query] * len(ids), texts), dtype=np.float64)
        scores = self._served(scores, candidates, [query] * len(ids), texts)
        order = np.argsort(-scores, kind="stable")[: k or len(ids)]
        seconds = time.perf_counter() - start
        return Ranking(
            self.name,
            [ids[i] for i in order],
            [float(scores[i]) for i in order],
            seconds,
            {"pairs_scored": float(len(ids)), "first_stage_seconds": candidates.seconds},
        )

    def rerank_many(
        self,
        queries: Mapping[str, str],
        candidates: Mapping[str, Ranking],
        corpus: Mapping[str, str],
        k: int | None = None,
        batch_pairs: int = 2048,
        progress: ProgressFn = no_progress,
    ) -> dict[str, Ranking]:
        """Rerank many queries, batching pairs across queries for throughput."""
        qids = [q for q in queries if q in candidates]
        flat_q, flat_d, owners = [], [], []
        for q in qids:
            for d in candidates[q].doc_ids:
                flat_q.append(queries[q])
                flat_d.append(corpus[d])
                owners.append(q)
        scores = np.empty(len(flat_q), dtype=np.float64)
        partner = np.empty(len(flat_q), dtype=np.float64) if self.partner is not None else None
        t0 = time.perf_counter()
        for start in range(0, len(flat_q), batch_pairs):  # the partner is scored in the same batches
            end = start + batch_pairs
            scores[start:end] = self.score_pairs(flat_q[start:end], flat_d[start:end])
            if partner is not None:
                partner[start:end] = self.partner.score_pairs(flat_q[start:end], flat_d[start:end])
            progress(min(1.0, end / max(1, len(flat_q))), f"{self.name}: {min(end, len(flat_q))}/{len(flat_q)} pairs")
        per_query = (time.perf_counter() - t0) / max(1, len(qids))
        out: dict[str, Ranking] = {}
        pos = 0
        for q in qids:
            ids = candidates[q].doc_ids
            s = self._served(scores[pos : pos + len(ids)], candidates[q],
                             partner_scores=None if partner is None else partner[pos : pos + len(ids)])
            pos += len(ids)
            order = np.argsort(-s, kind="stable")[: k or len(ids)]
            out[q] = Ranking(self.name, [ids[i] for i in order], [float(s[i]) for i in order], per_query)
        return out


# ----------------------------------------------------------------------------- interpolation with a first stage
def minmax(values: Sequence[float]) -> np.ndarray:
    """Scores scaled to [0, 1] over one candidate list (all equal: zeros)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return arr
    lo, hi = float(arr.min()), float(arr.max())
    return (arr - lo) / (hi - lo) if hi - lo > 1e-12 else np.zeros_like(arr)


def mix(reranker_scores: Sequence[float], first_scores: Sequence[float], weight: float) -> np.ndarray:
    """(1 − α) · minmax(reranker) + α · minmax(first stage) for one query's candidate list."""
    if weight <= 0:
        return np.asarray(reranker_scores, dtype=np.float64)
    return (1.0 - weight) * minmax(reranker_scores) + weight * minmax(first_scores)
