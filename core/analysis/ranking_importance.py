"""Which query words decide what a system retrieves: occlusion on the system's own ranking, not on one pair.

A pair's occlusion (``core.analysis.occlusion``) answers "why this score for this candidate"; without a candidate
the question is "which words of the query made the system rank what it ranked". For each distinct word w of the
query (``keyword_candidates``), the query is ranked again with every occurrence of w left out, by the same system
through the same search (a retriever: ``search_many``; a reranker: ``rerank_many`` over the full query's fixed
first-stage pool), and

    importance(w) = 1 − RBO_p(top-k of q, top-k of q \\ w)

with RBO the rank-biased overlap of Webber, Moffat & Zobel (2010, "A similarity measure for indefinite rankings",
Eq. 7 truncated at depth k and divided by its maximum 1 − p^k, so two equal lists give 1). 0: leaving the word out
changes nothing in the top k; 1: nothing of the top k is left. Faithful by construction (it is the system's own
ranking without the word), and the same for every system that ranks a typed text. A question of the collection
whose words are the query's own (the query itself, in the QQP protocol) is left out of every ranking.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from core.analysis.occlusion import MAX_WORDS, left_out
from core.data.keywords import keyword_candidates
from core.errors import StudioError

__all__ = ["MEASURE", "POOL", "RankingImportance", "rank_biased_overlap", "rank_variants", "ranking_importance",
           "ranking_importances"]

DEPTH = 10  # the top k compared
POOL = 20  # a reranker's fixed pool: the first stage's top 20 (the candidates the Keywords page offers)
PERSISTENCE = 0.9  # RBO's p: the top 10 carries about 86 % of the weight
MEASURE = "1 − RBO(p = 0.9) between the system's top 10 for the query and for the query with the word left out"


@dataclass(frozen=True)
class RankingImportance:
    """Per-word importance of a query to one system's ranking (words in question order)."""

    system: str
    query: list[tuple[str, float]]
    top: list[str]  # the full query's top k (collection ids)
    k: int = DEPTH
    p: float = PERSISTENCE
    measure: str = MEASURE

    def ranked(self, k: int) -> list[str]:
        """The ``k`` most important words (ties: the earlier word)."""
        order = sorted(range(len(self.query)), key=lambda i: (-self.query[i][1], i))
        return [self.query[i][0] for i in order[:k]]

    def as_json(self) -> dict:
        return {"system": self.system, "measure": self.measure, "k": self.k, "p": self.p, "top": list(self.top),
                "query": [[w, round(float(x), 6)] for w, x in self.query]}


def rank_biased_overlap(a: list[str], b: list[str], p: float = PERSISTENCE) -> float:
    """RBO of two top-k lists truncated at ``len(a)`` (Webber et al. 2010, Eq. 7), divided by 1 − p^k: 1 when equal."""
    k = len(a)
    if k == 0:
        return 1.0
    total = sum(p ** (d - 1) * len(set(a[:d]) & set(b[:d])) / d for d in range(1, k + 1))
    return (1 - p) * total / (1 - p ** k)


def rank_variants(system, variants: Mapping[str, tuple[str, str]], dataset, k: int = DEPTH, first_stage=None,
                  depth: int = POOL) -> dict[str, list[str]]:
    """The system's top ``k`` (collection ids) for every variant ``key -> (source query, text)``, in one batched
    call: a retriever ranks the collection; a reranker reorders the source query's fixed pool, ``first_stage``'s top
    ``depth`` for the source query. Every question whose words are the source query's own is left out. Raises
    ``StudioError`` (one line) when the system cannot rank a typed text."""
    from core.data.pipeline import terms
    from core.retrieval.base import Ranking, Reranker, Retriever

    extra = 3  # room for the query's own question(s), dropped below
    own = {source: terms(source) for source, _ in variants.values()}
    doc_terms: dict[str, list[str]] = {}  # each hit's terms, once per call

    def not_own(doc_id: str, source: str) -> bool:
        if doc_id not in doc_terms:
            doc_terms[doc_id] = terms(dataset.corpus[doc_id])
        return doc_terms[doc_id] != own[source]

    texts = {key: text for key, (_, text) in variants.items()}
    if isinstance(system, Reranker):
        if first_stage is None:
            raise StudioError(f"{system.name} reranks candidates: it needs a first stage to rank a typed query")
        found = first_stage.search_many({q: q for q in own}, k=depth + extra, ignore_identical_ids=False)
        pools = {}
        for source, ranking in found.items():
            kept = [(d, x) for d, x in zip(ranking.doc_ids, ranking.scores) if not_own(d, source)][:depth]
            pools[source] = Ranking(ranking.system, [d for d, _ in kept], [x for _, x in kept])
        out = system.rerank_many(texts, {key: pools[source] for key, (source, _) in variants.items()},
                                 dataset.corpus, k=k)
    elif isinstance(system, Retriever):
        out = system.search_many(texts, k=k + extra, ignore_identical_ids=False)
    else:
        raise StudioError(f"{getattr(system, 'name', type(system).__name__)} does not rank a typed query")
    return {key: [d for d in out[key].doc_ids if not_own(d, source)][:k] for key, (source, _) in variants.items()}


def ranking_importances(system, queries: Sequence[str], dataset, k: int = DEPTH, first_stage=None,
                        depth: int = POOL) -> list[RankingImportance]:
    """:func:`ranking_importance` for many queries (each with at least two words) in one call to the system."""
    words = [keyword_candidates(q, MAX_WORDS)[0] for q in queries]
    variants = {}
    for i, query in enumerate(queries):
        variants[f"{i}/full"] = (query, left_out(query, None))
        variants.update({f"{i}/w{j}": (query, left_out(query, w)) for j, w in enumerate(words[i])})
    top = rank_variants(system, variants, dataset, k, first_stage, depth)
    name = getattr(system, "name", type(system).__name__)
    out = []
    for i, ws in enumerate(words):
        base = top[f"{i}/full"]
        weights = [(w, max(0.0, 1.0 - rank_biased_overlap(base, top[f"{i}/w{j}"])))  # ≥ 0: rounding
                   for j, w in enumerate(ws)]
        out.append(RankingImportance(name, weights, base, k))
    return out


def ranking_importance(system, query: str, dataset, k: int = DEPTH, first_stage=None,
                       depth: int = POOL) -> RankingImportance:
    """Each query word's 1 − RBO between the system's top ``k`` with and without it (module docstring). ``system``:
    a loaded retriever or reranker; a reranker reorders ``first_stage``'s top ``depth`` for the full query (one
    fixed pool for every variant). ``query`` must be validated text. Raises ``StudioError`` (one line) when the
    query has one word or the system cannot rank a typed text."""
    words, _ = keyword_candidates(query, MAX_WORDS)
    if len(words) < 2:
        raise StudioError("the query has one word: leaving it out leaves nothing to rank, so there is no ranking "
                          "importance to show (give a candidate to weigh the pair)")
    if getattr(dataset, "candidates", None):
        raise StudioError(f"{dataset.name} ranks each question's own candidate list, not the collection: give a "
                          "candidate to weigh the pair")
    return ranking_importances(system, [query], dataset, k, first_stage, depth)[0]
