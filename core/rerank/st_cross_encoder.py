"""A researcher's sentence-transformers cross-encoder folder as a reranker.

Registered by ``python -m core systems add NAME --cross-encoder PATH`` (``core.user_systems``). It scores
(query, candidate) pairs with ``sentence_transformers.CrossEncoder`` (the model's raw output, no
activation), both texts through the one text pipeline (``core.data.pipeline.subword_text``) as for the
built-in MiniLM systems; it reranks its first stage (BM25's top 20 unless asked otherwise) through the
one runner. Nothing is built: ``is_built`` says whether the folder is still there.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from core.data.datasets import Dataset
from core.data.pipeline import subword_text
from core.errors import MissingArtifactError
from core.retrieval.base import ProgressFn, Reranker, no_progress


class FolderCrossEncoder(Reranker):
    """(query, candidate) -> the cross-encoder's score; batched, counts scored pairs."""

    def __init__(self, name: str, folder: str | Path, batch_size: int = 64) -> None:
        from sentence_transformers import CrossEncoder

        from core.training import device

        self.name, self.batch_size = name, batch_size
        self.model = CrossEncoder(str(folder), device=str(device()), local_files_only=True)
        self.pairs_scored = 0

    def score_pairs(self, queries: list[str], docs: list[str]) -> np.ndarray:
        import torch

        if not queries:
            return np.empty(0, dtype=np.float32)
        pairs = [(subword_text(q), subword_text(d)) for q, d in zip(queries, docs)]
        scores = self.model.predict(pairs, batch_size=self.batch_size, activation_fn=torch.nn.Identity(),
                                    convert_to_numpy=True, show_progress_bar=False)
        scores = np.asarray(scores, dtype=np.float32)
        if scores.ndim > 1:  # a multi-class head: the last class is "relevant"
            scores = scores[:, -1]
        self.pairs_scored += len(pairs)
        return scores


class CrossEncoderFolder:
    """Provider (``registry.system_module``) of a cross-encoder user system: ``spec.source`` is the folder."""

    def __init__(self, spec) -> None:
        self.spec = spec
        self._loaded: FolderCrossEncoder | None = None

    def _check(self) -> None:
        if not Path(self.spec.source).is_dir():
            raise MissingArtifactError(f"the model folder {self.spec.source}",
                                       f"python -m core systems remove {self.spec.name}", "missing")

    def build(self, dataset: Dataset, profile: str = "quick", progress: ProgressFn = no_progress,
              variant: str | None = None) -> dict:
        """Nothing to train or index: load the model once to check it."""
        self.load(dataset)
        progress(1.0, f"{self.spec.name}: ready (nothing to build)")
        return {"model folder": self.spec.source}

    def is_built(self, dataset: Dataset, variant: str | None = None) -> bool:
        return Path(self.spec.source).is_dir()

    def load(self, dataset: Dataset, variant: str | None = None, **options) -> FolderCrossEncoder:
        self._check()
        if self._loaded is None:
            self._loaded = FolderCrossEncoder(self.spec.name, self.spec.source)
        return self._loaded

    def config_dict(self, variant: str | None = None) -> dict:
        return {"model folder": self.spec.source, "scores": "sentence_transformers.CrossEncoder, raw output",
                "text": "core.data.pipeline.subword_text for both texts"}
