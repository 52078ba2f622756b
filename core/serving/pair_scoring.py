"""Any loaded system as a scorer of (query, text) pairs: the one pair-scoring contract.

Occlusion, faithfulness, the Keywords page, Compare's "why", ``core explain`` and, through
``core.serving.candidates.pair_scorer``, every candidate list (Compare, fused columns, pooling, Error Analysis)
score pairs here. One hook, asked of the loaded system (never of its name), with one default:

- the hook: a system that declares a faster scorer uses it, in this order:

  - a reranker (FRM, the CNN, the cross-encoder, minilm-pairs, a user cross-encoder): its own batched
    ``score_pairs``;
  - a retriever with ``score_text_pairs(queries, texts, corpus=None)`` (BM25: its exact sum over query terms with
    the index's own statistics; any user or plugin retriever may define it);
  - a bi-encoder (a retriever with an ``encoder``: MiniLM, glove-mean, dual-encoder, DenseTrans, SDML-CNN, a user
    model folder): the similarity it searches with, cosine (inner product of unit vectors) or −‖q − d‖² for a
    squared-L2 index (sdml-bonadiman2019.md §2.1.2), every distinct text encoded in one ``encode`` call;
- the default, for any other first stage (a ``Retriever`` with only ``retrieve``): its own retrieval scores of
  the query over its collection, restricted to the texts asked about (:class:`RetrievalPairScores`). It scores
  texts of its collection only (every candidate of a candidate list is one), so a free text (an occlusion's
  variant) is refused in one line and occlusion is not offered for it (``scores_free_pairs``).

A system with none of them (a tree search, a fusion of rankings) raises ``StudioError`` with one line saying why.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from core.errors import StudioError
from core.retrieval.base import Reranker, Retriever

PairScores = Callable[[list[str], list[str]], np.ndarray]


def encoder_pair_scores(encoder, metric: str = "ip") -> PairScores:
    """The bi-encoder's own similarity of each pair; all distinct texts of a call in one batched ``encode``."""
    from core.retrieval.dense import l2_normalize

    def score(queries: list[str], texts: list[str]) -> np.ndarray:
        unique = list(dict.fromkeys([*queries, *texts]))
        vectors = np.asarray(encoder.encode(unique), dtype=np.float32)
        if metric != "l2":
            vectors = l2_normalize(vectors)
        row = {t: i for i, t in enumerate(unique)}
        q = vectors[[row[t] for t in queries]]
        d = vectors[[row[t] for t in texts]]
        if metric == "l2":
            return -((q - d) ** 2).sum(axis=1).astype(np.float64)
        return (q * d).sum(axis=1).astype(np.float64)

    return score


class RetrievalPairScores:
    """The default scorer of a first stage that declares no faster one: the query retrieved over the whole
    collection (``retrieve(texts, k=len(collection))``, one batched call for the distinct queries of a call), each
    asked text scored by its document's retrieval score; a text the retrieval leaves out scores one below the
    query's lowest retrieved score. Texts outside the collection raise ``StudioError`` in one line."""

    scores_free_pairs = False

    def __init__(self, system: Retriever, corpus: Mapping[str, str]) -> None:
        self.system, self.name = system, getattr(system, "name", type(system).__name__)
        self.ids = list(corpus)
        self.id_of_text: dict[str, str] = {}
        for doc_id, text in corpus.items():
            self.id_of_text.setdefault(text, doc_id)
        self._kept: dict[str, dict[str, float]] = {}

    def _retrieve(self, queries: list[str]) -> None:
        todo = [q for q in dict.fromkeys(queries) if q not in self._kept]
        if not todo:
            return
        hits = self.system.retrieve(todo, len(self.ids))
        for query, ids, scores in zip(todo, hits.ids, hits.scores):
            self._kept[query] = {str(d): float(s) for d, s in zip(ids, scores)}

    def __call__(self, queries: list[str], texts: list[str]) -> np.ndarray:
        outside = next((t for t in texts if t not in self.id_of_text), None)
        if outside is not None:
            raise StudioError(f"{self.name} scores only texts of its own collection (it ranks by retrieval and "
                              "declares no pair scorer: score_text_pairs or an encoder)")
        self._retrieve(list(queries))
        out = np.empty(len(queries), dtype=np.float64)
        for i, (query, text) in enumerate(zip(queries, texts)):
            scores = self._kept[query]
            floor = min(scores.values(), default=0.0) - 1.0
            out[i] = scores.get(self.id_of_text[text], floor)
        return out


def check_spec(spec) -> None:
    """Raise the one line of a registration that cannot score a pair (a fusion of rankings, or ``pair_scoring=False``),
    before loading."""
    if spec is not None and spec.composite:
        raise StudioError(f"{spec.name} cannot score a (query, candidate) pair: it fuses other systems' rankings, "
                          "so there is no pair score of its own to explain (explain one of its parts)")
    if spec is not None and not spec.pair_scoring:
        raise StudioError(f"{spec.name} cannot score a (query, candidate) pair: it is a {spec.kind_family} search "
                          "over the whole collection, so there is no pair score to explain")


def pair_scores(system, corpus: Mapping[str, str] | None = None, spec=None) -> PairScores:
    """``(queries, texts) -> scores`` of a loaded system (see the module docstring); ``corpus`` is the collection a
    lexical scorer may need for its statistics; ``spec`` its ``SystemSpec`` (``pair_scoring=False``: refused)."""
    name = getattr(system, "name", type(system).__name__)
    check_spec(spec)
    if isinstance(system, Reranker):
        return lambda queries, texts: np.asarray(system.score_pairs(list(queries), list(texts)), dtype=np.float64)
    own = getattr(system, "score_text_pairs", None)
    if callable(own):
        return lambda queries, texts: np.asarray(own(list(queries), list(texts), corpus=corpus), dtype=np.float64)
    encoder = getattr(system, "encoder", None)
    if encoder is not None and callable(getattr(encoder, "encode", None)):
        return encoder_pair_scores(encoder, getattr(getattr(system, "spec", None), "metric", "ip"))
    if isinstance(system, Retriever) and corpus is not None:
        return RetrievalPairScores(system, corpus)
    raise StudioError(f"{name} cannot score a (query, candidate) pair: it ranks from a fixed list "
                      "(no pair scorer, text scorer, encoder or retrieval), so there is no pair score to explain")


def can_score_pairs(system, spec=None) -> bool:
    """Whether :func:`pair_scores` scores free pairs of ``system`` (any text, as occlusion asks; the retrieval
    default scores its collection's texts only, so it does not count)."""
    if not getattr(system, "scores_free_pairs", True):
        return False
    try:
        pair_scores(system, None, spec)
    except StudioError:
        return False
    return True
