"""The four word-overlap features x_feat of Severyn & Moschitti (cnn-rerank-severyn2015.md §5.1), after
Yu et al. 2014: word overlap and IDF-weighted word overlap, over all words and over non-stop words.

For a question word set Q and answer word set A (optionally without stop words):

- overlap     = |Q ∩ A| / (|Q| + |A|)
- idf overlap = Σ_{w ∈ Q ∩ A} idf(w) / (|Q| + |A|),   idf(w) = log(N / df(w))

with document frequencies over the texts given to ``OverlapFeaturizer.fit`` (N texts); this is the
normalisation of the authors' released preprocessing (deep-qa ``compute_overlap_features``). Words are
the text pipeline's lower-cased tokens (``core.data.pipeline``), digits replaced by 0 (§5.1 preprocessing). Stop words: spaCy's English list. Computed with
sparse binary matrices (one product per feature, no per-pair Python loop).
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from core.data.pipeline import digits_to_zero, tokens

FEATURE_NAMES = ("overlap", "idf_overlap", "overlap_nostop", "idf_overlap_nostop")


def normalize_tokens(text: str) -> list[str]:
    """The text pipeline's lower-cased tokens, every digit replaced by 0 (§5.1)."""
    return digits_to_zero(tokens(text))


def english_stop_words() -> frozenset[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS)


@dataclass
class OverlapFeaturizer:
    """Document frequencies and a stop list; ``transform`` gives the 4 features for (q, d) pairs."""

    idf: dict[str, float]
    stop_words: frozenset[str]

    @classmethod
    def fit(cls, texts: Iterable[str], stop_words: Iterable[str] | None = None) -> OverlapFeaturizer:
        df: Counter[str] = Counter()
        n = 0
        for t in texts:
            df.update(set(normalize_tokens(t)))
            n += 1
        idf = {w: math.log(n / c) for w, c in df.items()}
        return cls(idf, frozenset(stop_words) if stop_words is not None else english_stop_words())

    def _binary(self, texts: Sequence[str], vocab: dict[str, int]) -> sp.csr_matrix:
        rows, cols = [], []
        for i, t in enumerate(texts):
            for w in set(normalize_tokens(t)):
                rows.append(i)
                cols.append(vocab.setdefault(w, len(vocab)))
        return rows, cols

    def transform(self, queries: Sequence[str], docs: Sequence[str]) -> np.ndarray:
        """(n, 4) float32: overlap, idf overlap, and both over non-stop words."""
        vocab: dict[str, int] = {}
        rq, cq = self._binary(queries, vocab)
        rd, cd = self._binary(docs, vocab)
        shape = (len(queries), max(1, len(vocab)))
        q = sp.csr_matrix((np.ones(len(rq), np.float64), (rq, cq)), shape=shape)
        d = sp.csr_matrix((np.ones(len(rd), np.float64), (rd, cd)), shape=shape)
        words = sorted(vocab, key=vocab.get)
        idf = np.array([self.idf.get(w, 0.0) for w in words] or [0.0])
        keep = np.array([w not in self.stop_words for w in words] or [True], dtype=np.float64)
        inter = q.multiply(d)
        out = []
        for mask in (np.ones_like(keep), keep):
            denom = np.asarray(q @ mask + d @ mask).ravel()
            denom = np.where(denom > 0, denom, 1.0)
            out.append(np.asarray(inter @ mask).ravel() / denom)
            out.append(np.asarray(inter @ (idf * mask)).ravel() / denom)
        return np.stack([out[0], out[1], out[2], out[3]], 1).astype(np.float32)
