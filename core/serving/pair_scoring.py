"""Any loaded system as a scorer of free (query, text) pairs: what occlusion and faithfulness rescore.

One hook, three routes, asked of the loaded system (never of its name):

- a reranker (FRM, the CNN, the cross-encoder, minilm-pairs, a user cross-encoder): its own batched
  ``score_pairs``;
- a retriever with ``score_text_pairs(queries, texts, corpus=None)`` (BM25: its exact sum over query terms with
  the index's own statistics; any user or plugin retriever may define it);
- a bi-encoder (a retriever with an ``encoder``: MiniLM, glove-mean, dual-encoder, DenseTrans, SDML-CNN, a user
  model folder): the similarity it searches with, cosine (inner product of unit vectors) or −‖q − d‖² for a
  squared-L2 index (sdml-bonadiman2019.md §2.1.2), every distinct text encoded in one ``encode`` call.

A system with none of them (a fixed run file, a tree search, a fusion of rankings) raises ``StudioError`` with
one line saying why.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from core.errors import StudioError
from core.retrieval.base import Reranker

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
    raise StudioError(f"{name} cannot score a (query, candidate) pair: it ranks from a fixed list "
                      "(no pair scorer, text scorer or encoder), so there is no pair score to explain")


def can_score_pairs(system, spec=None) -> bool:
    """Whether :func:`pair_scores` gives a scorer for ``system``."""
    try:
        pair_scores(system, None, spec)
    except StudioError:
        return False
    return True
