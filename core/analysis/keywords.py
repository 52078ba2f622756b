"""Per-word importance any system shows: what the Keywords page draws and ``python -m core explain`` prints.

One function, :func:`word_importance`, gives the weights of every offered method: occlusion on the system's own
pair score (``core.analysis.occlusion``; every system that scores pairs), the exact per-term contributions of a
score that is a sum over terms (BM25), FRM's own keyword importance w(k, q) (Eq. 7 of frm-multiview-chong.md)
and an input x gradient attribution over the same model. The words themselves come from the text pipeline
(``core.data.keywords.keyword_candidates``).
"""
from __future__ import annotations

from dataclasses import dataclass

from core.errors import StudioError

# ----------------------------------------------------------------------------- per-word importance shown
# What the Keywords page draws and ``python -m core explain`` prints, from this one function: the method is
# a name, the reranker any system that offers it (FRM: both).
METHODS: dict[str, str] = {
    "occlusion": "occlusion: the system's score minus its score with the word left out",
    "terms": "exact per-term contributions of a score that is a sum over the query's terms (BM25)",
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
    notes: tuple[str, ...] = ()  # what the reader must know (a one-word side, a long candidate cut)
    agreement: float | None = None  # Spearman ρ of the query words with the system's own weights (FRM: w(k, q))

    def as_json(self) -> dict:
        """``{"query": [[word, weight], ...], "candidate": [...], ...}`` (what ``core explain --json`` prints)."""
        out = {"system": self.system, "method": self.method, "score": round(float(self.score), 6),
               "query": [[w, round(float(x), 6)] for w, x in self.query],
               "candidate": [[w, round(float(x), 6)] for w, x in self.candidate]}
        if self.notes:
            out["notes"] = list(self.notes)
        if self.agreement is not None:
            out["spearman_with_w"] = round(self.agreement, 4)
        return out

    def top(self, k: int, side: str = "query") -> list[str]:
        """The ``k`` most important words of one side (ties: the earlier word)."""
        pairs = self.query if side == "query" else self.candidate
        order = sorted(range(len(pairs)), key=lambda i: (-pairs[i][1], i))
        return [pairs[i][0] for i in order[:k]]


def offered_methods(system, spec=None) -> list[str]:
    """The methods of ``METHODS`` a loaded system can explain with, in ``METHODS`` order (none: it cannot score a
    pair and has no weights of its own). ``spec``: its ``SystemSpec`` (``pair_scoring=False`` rules occlusion out)."""
    from core.serving.pair_scoring import can_score_pairs

    out = []
    if can_score_pairs(system, spec):
        out.append("occlusion")
    if callable(getattr(system, "term_contributions", None)):
        out.append("terms")
    if callable(getattr(system, "explain", None)):
        out.append("w")
    if callable(getattr(system, "keyword_gradients", None)):
        out.append("gradient")
    return out


def _per_word(words: list[str], values: list[float]) -> list[tuple[str, float]]:
    """Per-term values summed per distinct word (``keyword_candidates``' words, first casing)."""
    from core.data.keywords import keyword_candidates

    keywords, _ = keyword_candidates(" ".join(words), 10_000)
    total = {k.lower(): 0.0 for k in keywords}
    for w, x in zip(words, values):
        total[w.lower()] = total.get(w.lower(), 0.0) + float(x)
    return [(k, total[k.lower()]) for k in keywords]


def word_importance(system, query: str, candidate: str, method: str = "occlusion", corpus=None,
                    spec=None) -> WordImportance:
    """Per-word importance of (query, candidate) under ``method`` (``METHODS``); raises ``StudioError`` with one
    line when the system does not offer it (``offered_methods``). Query and candidate must be validated text
    (``validate_query``); ``corpus`` is the collection a lexical scorer reads its statistics from."""
    offered = offered_methods(system, spec)
    name = getattr(system, "name", type(system).__name__)
    if method not in offered:
        if method == "occlusion" and not offered:
            from core.serving.pair_scoring import pair_scores

            pair_scores(system, corpus, spec)  # raises its own one line: why it cannot score a pair
        raise StudioError(f"{name} shows no per-word importance by {method!r}"
                          + (f"; it offers: {', '.join(offered)}" if offered else ""))
    if method == "occlusion":
        from core.analysis.occlusion import occlusion, spearman
        from core.serving.pair_scoring import pair_scores

        q, d, full, notes = occlusion(pair_scores(system, corpus, spec), query, candidate)
        agreement = None
        if "w" in offered:  # the system's own weights beside occlusion, with their rank agreement
            own = system.explain(query, candidate)
            agreement = spearman(q, list(zip(own.query_keywords, own.query_importance)))
        return WordImportance(name, method, q, d, full, tuple(notes), agreement)
    if method == "terms":
        from core.data.pipeline import terms

        q_vals, d_vals = system.term_contributions(query, candidate, corpus)
        return WordImportance(name, method, _per_word(terms(query, lower=False), q_vals),
                              _per_word(terms(candidate, lower=False), d_vals), float(sum(q_vals)))
    if method == "w":
        e = system.explain(query, candidate)
        return WordImportance(name, method, list(zip(e.query_keywords, e.query_importance)),
                              list(zip(e.candidate_keywords, e.candidate_importance)), float(e.score))
    kq, aq, kd, ad = system.keyword_gradients(query, candidate)
    score = float(system.score_pairs([query], [candidate])[0])
    return WordImportance(name, method, list(zip(kq, aq)), list(zip(kd, ad)), score)
