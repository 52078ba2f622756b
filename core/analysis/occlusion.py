"""Word importance by occlusion, for any system that scores a (query, candidate) pair.

Leave-one-out (Li, Monroe & Jurafsky 2016, "Understanding neural networks through representation erasure";
ERASER's comprehensiveness with k = 1): for each distinct word w of a side (the keyword candidates of
``core.data.keywords.keyword_candidates``, every occurrence left out together),

    importance(w) = s(q, d) − s(q \\ w, d)        (and likewise s(q, d) − s(q, d \\ w) on the candidate side)

with s the system's own pair score (``core.serving.pair_scoring.pair_scores``). Both texts are scored in the
pipeline's token form (tokens joined by spaces) so that a word's importance is only the word's; all variants of
a pair are scored in ONE call to the system. Positive: the word pulls the pair together; negative: apart.

A side with one word has nothing left when the word is left out: that word carries the whole score
(importance = s(q, d)) and ``notes`` says so. A side beyond ``keyword_candidates``' 32 distinct words weighs its
first 32 (``notes`` says so).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from core.data.keywords import keyword_candidates
from core.data.pipeline import tokens

MAX_WORDS = 32  # keyword_candidates' default cap of distinct words per side


def left_out(text: str, words: str | Iterable[str] | None) -> str:
    """``text`` in token form, every occurrence of ``words`` (one word or several; case-insensitive) left out;
    None: all tokens."""
    drop = _lowered(words)
    return " ".join(t for t in tokens(text, lower=False) if t.lower() not in drop)


def kept_only(text: str, words: Iterable[str]) -> str:
    """``text`` in token form with only the occurrences of ``words`` (case-insensitive), in text order."""
    keep = _lowered(words)
    return " ".join(t for t in tokens(text, lower=False) if t.lower() in keep)


def _lowered(words: str | Iterable[str] | None) -> set[str]:
    if words is None:
        return set()
    return {words.lower()} if isinstance(words, str) else {w.lower() for w in words}


def occlusion(score: Callable[[list[str], list[str]], np.ndarray], query: str, candidate: str,
              ) -> tuple[list[tuple[str, float]], list[tuple[str, float]], float, list[str]]:
    """(query words, candidate words, full score, notes): each word with s(full) − s(word left out), one batch."""
    q_words, _ = keyword_candidates(query, MAX_WORDS)
    d_words, _ = keyword_candidates(candidate, MAX_WORDS)
    full_q, full_d = left_out(query, None), left_out(candidate, None)
    queries, docs = [full_q], [full_d]
    q_sides = [left_out(query, w) for w in q_words] if len(q_words) > 1 else []
    d_sides = [left_out(candidate, w) for w in d_words] if len(d_words) > 1 else []
    queries += q_sides + [full_q] * len(d_sides)
    docs += [full_d] * len(q_sides) + d_sides
    scores = np.asarray(score(queries, docs), dtype=np.float64)
    full = float(scores[0])
    notes = []
    q_imp = full - scores[1:1 + len(q_sides)]
    d_imp = full - scores[1 + len(q_sides):]
    for side, words, imp in (("query", q_words, q_imp), ("candidate", d_words, d_imp)):
        if len(words) == 1:
            notes.append(f"the {side} has one word: leaving it out leaves nothing, so it carries the whole score")
        if len(keyword_candidates(query if side == "query" else candidate, 10_000)[0]) > MAX_WORDS:
            notes.append(f"the {side} has more than {MAX_WORDS} distinct words: its first {MAX_WORDS} are weighed")
    q_pairs = list(zip(q_words, [full] if len(q_words) == 1 else q_imp.tolist()))
    d_pairs = list(zip(d_words, [full] if len(d_words) == 1 else d_imp.tolist()))
    return q_pairs, d_pairs, full, notes


def spearman(a: Sequence[tuple[str, float]], b: Sequence[tuple[str, float]]) -> float | None:
    """Spearman's ρ between two weightings of the same words (matched by lower-cased word); None below 3 shared
    words or when either weighting is constant."""
    from scipy.stats import spearmanr

    left = {w.lower(): x for w, x in a}
    right = {w.lower(): x for w, x in b}
    shared = [w for w in left if w in right]
    if len(shared) < 3:
        return None
    x = np.asarray([left[w] for w in shared], dtype=np.float64)
    y = np.asarray([right[w] for w in shared], dtype=np.float64)
    if np.ptp(x) < 1e-12 or np.ptp(y) < 1e-12:
        return None
    return float(spearmanr(x, y).statistic)
