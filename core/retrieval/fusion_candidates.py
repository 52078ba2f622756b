"""Fusion on candidate lists (TrecQA, WikiQA, an imported ``qid query docid doc label`` TSV): every part scores
the query's own candidates, and the parts' scores are fused per query with the fusion's method and tuned
parameters (``core.retrieval.fusion.fuse_dicts``: RRF over the parts' ranks of the candidates, CombSUM or a
weighted sum of their min-max-normalised scores).

A part is any system that ranks candidate lists, as the one loader gives it there: a first stage as a pair scorer
(BM25 over the candidate texts, a bi-encoder's cosine), a reranker (cross-encoder, FRM, CNN) or a user's run
file (its own scores of the candidates it lists). Nothing searches a collection.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from core.errors import StudioError
from core.retrieval.base import ProgressFn, Ranking, Reranker, no_progress, validate_query


class CandidateFusion(Reranker):
    """The fused parts over each query's candidate list (a ``Reranker`` that ranks whole lists). ``depth`` is None:
    every part ranks the query's whole candidate list (a collection's fusion has a number there)."""

    depth: int | None = None
    tuned: bool = False
    tuned_on: str = "untuned defaults"

    def __init__(self, spec, parts: Sequence[Reranker], params: Mapping | None = None, *,  # noqa: ANN001
                 fuse: Callable[..., dict[str, list[tuple[str, float]]]]) -> None:
        """``spec``: the parsed fusion name; ``fuse``: ``core.retrieval.fusion.fuse_dicts`` (passed in: that module
        makes this one)."""
        if len(parts) != len(spec.parts):
            raise StudioError(f"fusion {spec.variant}: {len(spec.parts)} parts named, {len(parts)} loaded")
        self.spec, self.parts, self.params, self.fuse = spec, list(parts), dict(params or {}), fuse
        self.name = f"fusion@{spec.variant}"

    def score_pairs(self, queries: list[str], docs: list[str]):  # noqa: ARG002 - fusion needs the whole list
        raise StudioError(f"{self.name} fuses the parts' rankings of a query's whole candidate list (RRF uses the "
                          "ranks): it ranks lists (rerank), it does not score single pairs")

    def _fused(self, per_part: Sequence[Mapping[str, Ranking]], k: int | None) -> dict[str, list[tuple[str, float]]]:
        return self.fuse([{q: r.as_dict() for q, r in part.items() if r.doc_ids} for part in per_part],
                          self.spec.method, self.params, k)

    def rerank(self, query: str, candidates: Ranking, corpus: Mapping[str, str], k: int | None = None) -> Ranking:
        """The query's candidates ordered by the fused score of every part's ranking of them."""
        query = validate_query(query)
        start = time.perf_counter()
        per_part, stats = [], {}
        for label, part in zip(self.spec.part_labels, self.parts):
            ranking = part.rerank(query, candidates, corpus)
            per_part.append({"q": ranking})
            stats[f"{label}_seconds"] = ranking.seconds
        fused = self._fused(per_part, k).get("q", [])
        return Ranking(self.name, [d for d, _ in fused], [s for _, s in fused], time.perf_counter() - start, stats)

    def rerank_many(self, queries: Mapping[str, str], candidates: Mapping[str, Ranking], corpus: Mapping[str, str],
                    k: int | None = None, batch_pairs: int = 2048,
                    progress: ProgressFn = no_progress) -> dict[str, Ranking]:
        """Every part's ``rerank_many`` over the full candidate lists, then one fusion of all queries."""
        n = len(self.parts)
        t0 = time.perf_counter()
        per_part = [part.rerank_many(queries, candidates, corpus, None, batch_pairs,
                                     progress=lambda f, m, i=i: progress((i + f) / (n + 0.2), f"fusion part {i + 1}/{n}: {m}"))
                    for i, part in enumerate(self.parts)]
        fused = self._fused(per_part, k)
        per_query = (time.perf_counter() - t0) / max(1, len(queries))
        progress(1.0, f"{self.name}: {len(queries):,}/{len(queries):,} queries")
        return {q: Ranking(self.name, [d for d, _ in fused[q]], [s for _, s in fused[q]], per_query)
                for q in queries if q in candidates and fused.get(q)}
