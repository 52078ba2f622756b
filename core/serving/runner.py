"""The one runner: a loaded system and queries to rankings.

Compare, Error Analysis, the stored runs, pooling, the CLI and bench/ all rank through here, so a
question gets the same ranking wherever it is asked:

- candidate-list dataset: the system scores the query's own candidates (``core.serving.candidates``);
- retriever: it searches the collection; the query's own id is dropped when the dataset says so
  (QQP: every query is in the collection);
- reranker: it rescores its first stage's top ``depth`` (BM25's top 20 unless asked otherwise).

``SystemChoice`` names a system as a caller asks for it (name, variant, first stage, depth, load options);
:func:`rank_one` ranks one query (typed text, or a dataset query by id), :func:`rank_many` a set of
dataset queries with progress.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from core.serving.candidates import candidate_rankings, pair_scorer, rank_candidates
from core.data.datasets import Dataset
from core.errors import QueryError, StudioError
from core.retrieval.base import ProgressFn, Ranking, Reranker, Retriever, no_progress, validate_query
from core.serving.loader import FIRST_STAGE, RERANK_DEPTH
from core.serving.loader import load as default_load

Loader = Callable[[str, "str | None", tuple], object]  # (name, variant, options) -> loaded system


@dataclass(frozen=True)
class SystemChoice:
    """A system as a caller runs it: rerankers carry their first stage and depth; ``options`` go to its
    loader (``index``, ``beam``...). No options = the system's serving defaults."""

    name: str
    variant: str | None = None
    first_stage: str | None = None
    depth: int = RERANK_DEPTH
    options: tuple[tuple[str, object], ...] = ()

    @property
    def label(self) -> str:
        """The column name: ``name[@variant]``, ``[milvus]`` when served from Milvus, ``← first stage`` for rerankers."""
        base = self.name + (f"@{self.variant}" if self.variant else "")
        backend = dict(self.options).get("backend")
        if backend and backend != "faiss":
            base += f" [{backend}]"
        return f"{base} ← {self.first_stage}" if self.first_stage else base


def loader_for(dataset: Dataset, notice: Callable[[str], None] | None = None,
               progress: ProgressFn | None = None) -> Loader:
    """The default ``(name, variant, options) -> system`` of ``dataset`` (``core.serving.loader.load``); ``progress``
    reports what loading does first (a first-use build or encoding: counts and fractions)."""
    return lambda name, variant=None, options=(): default_load(name, dataset, variant, progress or no_progress,
                                                                notice=notice, **dict(options))


def rank_one(run: SystemChoice, dataset: Dataset, query: str, k: int = 10, query_id: str | None = None,
             load: Loader | None = None) -> Ranking:
    """One ranking for one query: typed text, or the dataset query ``query_id`` (then ``query`` is its text)."""
    load = load or loader_for(dataset)
    if not dataset.candidates:
        query = validate_query(query)  # bad input gets its one line before any model loads
    system = load(run.name, run.variant, run.options)
    if dataset.candidates:
        if query_id is None:
            raise QueryError("this dataset ranks each question's own candidate list: pick one of its questions")
        return rank_candidates(pair_scorer(system, dataset, system.name), dataset, query_id, k)
    exclude = [query_id] if query_id and dataset.ignore_identical_ids else []
    if isinstance(system, Retriever):
        return system.search(query, k, exclude=exclude)
    if not isinstance(system, Reranker):
        raise StudioError(f"not a system: {type(system).__name__}")
    start = time.perf_counter()
    first = load(run.first_stage or FIRST_STAGE, None, ()).search(query, max(k, run.depth), exclude=exclude)
    ranking = system.rerank(query, first.top(run.depth), dataset.corpus, k=k)
    ranking.stats["first_stage_ms"] = 1000 * first.seconds
    ranking.seconds = time.perf_counter() - start
    return ranking


def rank_many(run: SystemChoice, dataset: Dataset, queries: Mapping[str, str], k: int = 100,
              progress: ProgressFn = no_progress, load: Loader | None = None,
              first_stage: Mapping[str, Ranking] | None = None) -> dict[str, Ranking]:
    """Rankings of dataset queries ``{qid: text}`` (``progress`` reports query counts).

    ``first_stage`` may hand a reranker precomputed first-stage rankings (several rerankers over one run).
    """
    load = load or loader_for(dataset)
    queries = dict(queries)
    system = load(run.name, run.variant, run.options)
    if isinstance(system, Retriever) and not dataset.candidates:
        return system.search_many(queries, k=k, ignore_identical_ids=dataset.ignore_identical_ids, progress=progress)
    if dataset.candidates:
        system = pair_scorer(system, dataset, system.name)
        cands = candidate_rankings(dataset, [q for q in queries if q in dataset.candidates])
    elif not isinstance(system, Reranker):
        raise StudioError(f"not a system: {type(system).__name__}")
    elif first_stage is not None:
        cands = {q: first_stage[q].top(run.depth) for q in queries if q in first_stage}
    else:
        first = load(run.first_stage or FIRST_STAGE, None, ())
        cands = first.search_many(queries, k=run.depth, ignore_identical_ids=dataset.ignore_identical_ids,
                                  progress=lambda f, m: progress(0.1 * f, m))
    out: dict[str, Ranking] = {}
    qids = list(cands)
    step = max(1, 2048 // max(1, run.depth))
    for start in range(0, len(qids), step):  # chunks of queries so that progress reports query counts
        chunk = qids[start:start + step]
        out.update(system.rerank_many({q: queries[q] for q in chunk}, {q: cands[q] for q in chunk}, dataset.corpus,
                                      k=k))
        done = min(len(qids), start + step)
        progress(0.1 + 0.9 * done / max(1, len(qids)), f"{system.name}: {done:,}/{len(qids):,} queries")
    return out
