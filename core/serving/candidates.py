"""Candidate-list datasets as first-class: every system ranks each query's own candidates.

On a candidate-list dataset (TrecQA, an imported ``qid \\t query \\t docid \\t doc \\t label`` TSV) the
candidate list stands in for the collection. Every system ranks a query's candidates through :func:`pair_scorer`,
the pair-scoring contract of ``core.serving.pair_scoring`` (one hook, one default):

- rerankers (FRM, CNN, cross-encoder) score the (query, candidate) pairs as they always do;
- BM25 declares its faster scorer as a module ``candidate_scorer`` the loader asks first
  (``core.retrieval.bm25.BM25PairScorer``): the Lucene BM25 score of the query against each candidate, statistics
  (idf, average length) over all candidate texts of the dataset (densetrans-cai2021.md §4.2.3 variant);
- bi-encoders (``EncoderPairScorer``: MiniLM, DenseTrans, SDML-CNN, the untrained references): the
  encoder's own similarity, cosine for inner-product systems and −‖q − d‖² for squared-L2 ones
  (sdml-bonadiman2019.md §2.1.2). Candidate vectors come from the embedding cache (computed once per
  (encoder, dataset)); queries are encoded once per process;
- a retriever with ``score_text_pairs``: that;
- any other first stage (a plugin defining only ``retrieve``): the default, its own retrieval scores over the
  candidate texts restricted to the query's candidates (``pair_scoring.RetrievalPairScores``).

The one runner (``core.serving.runner``) ranks every dataset through these.
"""
from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np

from core.data.datasets import Dataset
from core.errors import QueryError, StudioError
from core.retrieval.base import ProgressFn, Ranking, Reranker, no_progress


def candidate_rankings(dataset: Dataset, qids: list[str] | None = None) -> dict[str, Ranking]:
    """The dataset's candidate lists as first-stage rankings (given order, zero scores)."""
    qids = list(dataset.candidates) if qids is None else qids
    return {q: Ranking("candidates", list(dataset.candidates[q]), [0.0] * len(dataset.candidates[q]))
            for q in qids if dataset.candidates.get(q)}


class EncoderPairScorer(Reranker):
    """A bi-encoder as a pair scorer: cosine (``metric="ip"``) or −‖q − d‖² (``metric="l2"``)."""

    def __init__(self, encoder, corpus: Mapping[str, str], name: str, metric: str = "ip",
                 progress: ProgressFn = no_progress) -> None:
        from core.retrieval.dense import cached_embeddings

        self.name, self.encoder, self.metric = name, encoder, metric
        self.doc_vectors = cached_embeddings(encoder, dict(corpus), progress=progress, normalize=metric != "l2")
        self._row_of_text: dict[str, int] = {}
        for i, text in enumerate(corpus.values()):
            self._row_of_text.setdefault(text, i)
        self._query_cache: dict[str, np.ndarray] = {}

    def _encode(self, texts: list[str]) -> np.ndarray:
        from core.retrieval.dense import l2_normalize

        vecs = np.asarray(self.encoder.encode(list(texts)), dtype=np.float32)
        return l2_normalize(vecs) if self.metric != "l2" else vecs

    def _vectors(self, texts: list[str], docs: bool) -> np.ndarray:
        out = np.empty((len(texts), self.doc_vectors.shape[1]), dtype=np.float32)
        todo = []
        for i, t in enumerate(texts):
            row = self._row_of_text.get(t) if docs else None
            if row is not None:
                out[i] = self.doc_vectors[row]
            elif t in self._query_cache:
                out[i] = self._query_cache[t]
            else:
                todo.append(i)
        if todo:
            unique = list(dict.fromkeys(texts[i] for i in todo))
            for t, v in zip(unique, self._encode(unique)):
                self._query_cache[t] = v
            for i in todo:
                out[i] = self._query_cache[texts[i]]
        return out

    def score_pairs(self, queries: list[str], docs: list[str]) -> np.ndarray:
        q = self._vectors(queries, docs=False)
        d = self._vectors(docs, docs=True)
        if self.metric == "l2":
            return -((q - d) ** 2).sum(axis=1).astype(np.float64)
        return (q * d).sum(axis=1).astype(np.float64)


class ScoresAsReranker(Reranker):
    """A first stage's pair scores (``core.serving.pair_scoring.pair_scores``) as a ranker of candidate lists."""

    def __init__(self, name: str, scores) -> None:  # noqa: ANN001 - a PairScores callable
        self.name, self.scores = name, scores
        self.scores_free_pairs = getattr(scores, "scores_free_pairs", True)

    def score_pairs(self, queries: list[str], docs: list[str]) -> np.ndarray:
        return np.asarray(self.scores(list(queries), list(docs)), dtype=np.float64)


def pair_scorer(system, dataset: Dataset, name: str, progress: ProgressFn = no_progress) -> Reranker:
    """A loaded system as a ranker of candidate lists (see the module docstring): a reranker as it is, a bi-encoder
    as an ``EncoderPairScorer`` (cached candidate vectors), any other first stage through the pair-scoring
    contract (its ``score_text_pairs``, else its retrieval restricted to the candidates)."""
    from core.serving.pair_scoring import pair_scores

    if isinstance(system, Reranker):
        return system
    encoder = getattr(system, "encoder", None)
    if encoder is not None and not callable(getattr(system, "score_text_pairs", None)):
        metric = getattr(getattr(system, "spec", None), "metric", "ip")
        return EncoderPairScorer(encoder, dataset.corpus, name, metric, progress)
    try:
        return ScoresAsReranker(name, pair_scores(system, dataset.corpus))
    except StudioError:
        raise StudioError(f"{name} cannot score a candidate list: it is neither a reranker nor a first stage "
                          "(no score_pairs, score_text_pairs, encoder or retrieve)") from None


def rank_candidates(scorer: Reranker, dataset: Dataset, query_id: str, k: int | None = None) -> Ranking:
    """One query's own candidates, reordered by ``scorer`` (top ``k``; all by default)."""
    if query_id not in dataset.candidates:
        raise QueryError(f"{query_id!r} is not a question of {dataset.name}: on a candidate-list dataset pick "
                         "one of its questions (each ranks its own candidates)")
    start = time.perf_counter()
    ranking = scorer.rerank(dataset.queries[query_id], candidate_rankings(dataset, [query_id])[query_id],
                            dataset.corpus, k=k)
    ranking.seconds = time.perf_counter() - start
    return ranking
