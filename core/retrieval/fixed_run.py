"""A TREC run file as a fixed system: it ranks exactly the dataset queries the file covers.

Registered by ``python -m core systems add NAME --run FILE --dataset D`` (``core.user_systems``): the
provider :class:`FixedRun` serves the file's rankings through the one loader and runner, so the run is
shown on Compare, pooled and evaluated like any system. It has no model, so it cannot rank a typed
query: :func:`typed_query_error` is the one line every caller shows. Order within a query: score
descending, then doc id descending (trec_eval's order; ``core.evaluation`` applies the same rule).
On a candidate-list dataset it is a :class:`~core.retrieval.base.Reranker` that orders each covered
query's candidates by the run (candidates the run does not list are left out).
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from core.data.datasets import Dataset
from core.errors import MissingArtifactError, NotReadyError, QueryError, StudioError
from core.retrieval.base import Hits, ProgressFn, Ranking, Reranker, Retriever, no_progress

_PARSED: dict[tuple[str, int, int], dict[str, list[tuple[str, float]]]] = {}  # (path, size, mtime) -> rankings


class TypedQueryError(QueryError, NotReadyError):
    """A fixed run asked for a query it does not hold: what a fixed run is, not a failure."""


def typed_query_error(name: str) -> QueryError:
    """The one line shown when a fixed run is asked for a query it does not hold."""
    return TypedQueryError(f"{name} is a fixed run: it cannot rank a typed query")


def read_rankings(path: str | Path) -> dict[str, list[tuple[str, float]]]:
    """``{qid: [(doc_id, score), ...]}`` of a TREC run file, best first (score desc, doc id desc); cached per
    (path, size, modification time). A malformed file raises ``DataFormatError`` naming its line."""
    from core.evaluation import read_trec_run

    path = Path(path)
    if not path.is_file():
        raise StudioError(f"the run file {path} no longer exists")
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _PARSED:
        run = read_trec_run(path).to_dict()
        _PARSED[key] = {q: sorted(((d, float(s)) for d, s in docs.items()), key=lambda x: (-x[1], _desc(x[0])))
                        for q, docs in run.items()}
    return _PARSED[key]


def _desc(doc_id: str) -> tuple:
    """Sort key putting larger doc ids first (trec_eval's tie order) inside an ascending sort."""
    return tuple(-ord(c) for c in doc_id) + (1,)


class _Lookup:
    """The run's rankings and the dataset's query texts (stored and display form) -> query id."""

    def __init__(self, name: str, rankings: dict[str, list[tuple[str, float]]], dataset: Dataset) -> None:
        self.name, self.rankings = name, rankings
        self.qid_of_text: dict[str, str] = {}
        for qid in rankings:
            if qid in dataset.queries:
                self.qid_of_text.setdefault(" ".join(dataset.queries[qid].split()), qid)
                self.qid_of_text.setdefault(" ".join(dataset.display_query(qid).split()), qid)

    def qid(self, text: str, hint: Iterable[str] = ()) -> str:
        for qid in hint:  # the runner passes a dataset query's own id as the id to exclude
            if qid in self.rankings:
                return qid
        qid = self.qid_of_text.get(" ".join(text.split()))
        if qid is None:
            raise typed_query_error(self.name)
        return qid

    def ranking(self, qid: str, k: int, exclude: set[str] = frozenset()) -> Ranking:
        hits = [(d, s) for d, s in self.rankings.get(qid, []) if d not in exclude][:k]
        return Ranking(self.name, [d for d, _ in hits], [s for _, s in hits], 0.0, {})


class FixedRunRetriever(Retriever):
    """A run file's rankings of a collection dataset (the queries it covers only)."""

    def __init__(self, name: str, rankings: dict[str, list[tuple[str, float]]], dataset: Dataset) -> None:
        self.name = name
        self.lookup = _Lookup(name, rankings, dataset)

    def retrieve(self, texts: list[str], k: int) -> Hits:
        out = [self.lookup.ranking(self.lookup.qid(t), k) for t in texts]
        return Hits([r.doc_ids for r in out], [r.scores for r in out])

    def search(self, query: str, k: int = 10, exclude: Iterable[str] = ()) -> Ranking:
        exclude = set(exclude)
        start = time.perf_counter()
        ranking = self.lookup.ranking(self.lookup.qid(query, exclude), k, exclude)
        ranking.seconds = time.perf_counter() - start
        return ranking

    def search_many(self, queries: Mapping[str, str], k: int = 100, ignore_identical_ids: bool = True,
                    progress: ProgressFn = no_progress) -> dict[str, Ranking]:
        """The run's rankings of the covered queries among ``queries`` (the others are left out)."""
        out = {q: self.lookup.ranking(q, k, {q} if ignore_identical_ids else set())
               for q in queries if q in self.lookup.rankings}
        progress(1.0, f"{self.name}: {len(out):,} of {len(queries):,} queries in the run")
        return out


class FixedRunReranker(Reranker):
    """A run file over a candidate-list dataset: each covered query's candidates in the run's order."""

    def __init__(self, name: str, rankings: dict[str, list[tuple[str, float]]], dataset: Dataset) -> None:
        self.name = name
        self.lookup = _Lookup(name, rankings, dataset)

    def score_pairs(self, queries: list[str], docs: list[str]):  # noqa: ARG002 - a run has no pair scores
        raise typed_query_error(self.name)

    def rerank(self, query: str, candidates: Ranking, corpus: Mapping[str, str], k: int | None = None) -> Ranking:
        scores = dict(self.lookup.rankings.get(self.lookup.qid(query), []))
        kept = sorted((d for d in candidates.doc_ids if d in scores), key=lambda d: (-scores[d], _desc(d)))
        kept = kept[: k or len(kept)]
        return Ranking(self.name, kept, [scores[d] for d in kept], 0.0, {})

    def rerank_many(self, queries: Mapping[str, str], candidates: Mapping[str, Ranking], corpus: Mapping[str, str],
                    k: int | None = None, batch_pairs: int = 2048, progress: ProgressFn = no_progress) -> dict[str, Ranking]:
        return {q: self.rerank(queries[q], candidates[q], corpus, k) for q in queries
                if q in candidates and q in self.lookup.rankings}


class FixedRun:
    """Provider (``registry.system_module``) of a run-file system: ``spec.source`` is the file,
    ``spec.datasets[0]`` the dataset it ranks."""

    DEFAULT_INDEX = None

    def __init__(self, spec) -> None:
        self.spec = spec

    @property
    def path(self) -> Path:
        return Path(self.spec.source)

    def _check_dataset(self, dataset: Dataset) -> None:
        if dataset.name not in self.spec.datasets:
            raise StudioError(f"{self.spec.name} is a fixed run of {self.spec.datasets[0]}: it has no rankings for "
                              f"{dataset.name}")

    def build(self, dataset: Dataset, profile: str = "quick", progress: ProgressFn = no_progress,
              variant: str | None = None) -> dict:
        """Nothing to build: read the file once (a malformed one says which line) and count what it covers."""
        from core.artifacts import save_json
        from core.registry import system_dir

        self._check_dataset(dataset)
        rankings = read_rankings(self.path)
        covered = sum(q in dataset.queries for q in rankings)
        metrics = {"queries": covered, "run": str(self.path)}
        save_json(system_dir(dataset.name, self.spec.name) / "config.json", metrics)  # where the run applies
        progress(1.0, f"{self.spec.name}: {covered:,} queries of {dataset.name} in the run")
        return metrics

    def is_built(self, dataset: Dataset, variant: str | None = None) -> bool:
        return dataset.name in self.spec.datasets and self.path.is_file()

    def load(self, dataset: Dataset, variant: str | None = None, **options) -> Retriever | Reranker:
        self._check_dataset(dataset)
        if not self.path.is_file():
            raise MissingArtifactError(f"the run file {self.path}", f"python -m core systems remove {self.spec.name}",
                                       "missing")
        rankings = read_rankings(self.path)
        cls = FixedRunReranker if dataset.candidates else FixedRunRetriever
        return cls(self.spec.name, rankings, dataset)

    def config_dict(self, variant: str | None = None) -> dict:
        return {"run file": str(self.path), "dataset": self.spec.datasets[0],
                "ranks": "only the dataset queries the file covers; no typed queries"}
