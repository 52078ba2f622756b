"""Per-word importance a reranker shows: what the Keywords page draws and ``python -m core explain`` prints.

One function, :func:`word_importance`, gives the weights of every offered method (FRM's own keyword importance
w(k, q), Eq. 7 of frm-multiview-chong.md, and an input x gradient attribution over the same model); the keyword
candidates themselves come from the text pipeline (``core.data.keywords.keyword_candidates``).
"""
from __future__ import annotations

from dataclasses import dataclass

from core.errors import StudioError

# ----------------------------------------------------------------------------- per-word importance shown
# What the Keywords page draws and ``python -m core explain`` prints, from this one function: the method is
# a name, the reranker any system that offers it (FRM: both).
METHODS: dict[str, str] = {
    "w": "FRM keyword importance w(k, q) (Eq. 7)",
    "gradient": "input × gradient of sim(q, d) over each keyword's MiniLM vector",
}


@dataclass(frozen=True)
class WordImportance:
    """Per-word importance of a query and a candidate under one method (words in question order)."""

    system: str
    method: str
    query: list[tuple[str, float]]
    candidate: list[tuple[str, float]]
    score: float

    def as_json(self) -> dict:
        """``{"query": [[word, weight], ...], "candidate": [...]}`` (what ``core explain --json`` prints)."""
        return {"query": [[w, round(float(x), 6)] for w, x in self.query],
                "candidate": [[w, round(float(x), 6)] for w, x in self.candidate]}

    def top(self, k: int, side: str = "query") -> list[str]:
        """The ``k`` most important words of one side (ties: the earlier word)."""
        pairs = self.query if side == "query" else self.candidate
        order = sorted(range(len(pairs)), key=lambda i: (-pairs[i][1], i))
        return [pairs[i][0] for i in order[:k]]


def offered_methods(reranker) -> list[str]:
    """The methods of ``METHODS`` a loaded reranker can explain with (none: it shows no per-word importance)."""
    out = []
    if callable(getattr(reranker, "explain", None)):
        out.append("w")
    if callable(getattr(reranker, "keyword_gradients", None)):
        out.append("gradient")
    return out


def word_importance(reranker, query: str, candidate: str, method: str = "w") -> WordImportance:
    """Per-word importance of (query, candidate) under ``method`` (``METHODS``); raises ``StudioError`` when the
    reranker does not offer it. Query and candidate must be validated text (``validate_query``)."""
    offered = offered_methods(reranker)
    if method not in offered:
        name = getattr(reranker, "name", type(reranker).__name__)
        raise StudioError(f"{name} shows no per-word importance by {method!r}"
                          + (f"; it offers: {', '.join(offered)}" if offered else ""))
    name = getattr(reranker, "name", "")
    if method == "w":
        e = reranker.explain(query, candidate)
        return WordImportance(name, method, list(zip(e.query_keywords, e.query_importance)),
                              list(zip(e.candidate_keywords, e.candidate_importance)), float(e.score))
    kq, aq, kd, ad = reranker.keyword_gradients(query, candidate)
    score = float(reranker.score_pairs([query], [candidate])[0])
    return WordImportance(name, method, list(zip(kq, aq)), list(zip(kd, ad)), score)
