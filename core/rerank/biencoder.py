"""System "minilm-pairs": the zero-shot all-MiniLM-L6-v2 bi-encoder as a pair scorer, cos(u_q, u_d) with
mean pooling (tree-search-bert-guo.md §3.2, representation-based method, no fine-tuning).

It is the untrained reference the fine-tuned ``cross-encoder`` must beat: the same pairs,
scored by the pretrained sentence embeddings instead of the interaction model. Collection texts reuse
the ``minilm`` system's cached collection embeddings; other texts (typed queries) are encoded on the
fly in one batch. No training; ``build`` caches the embeddings and measures the pair ROC AUC on the
held-out dev/test pairs. all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates.
"""
from __future__ import annotations

import time

import numpy as np

from core.data.pipeline import check_stamp, is_current, stamped
from core.artifacts import load_json, save_json
from core.data.datasets import Dataset
from core.registry import build_command, system_dir
from core.retrieval.base import ProgressFn, Reranker, no_progress
from core.systems import registration_for

REGISTRATION = registration_for(__name__)  # this system's SystemSpec (its module in core.systems)

QUORA_NOTE = "all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates"


class BiEncoderPairReranker(Reranker):
    """Cosine of the two texts' MiniLM embeddings (batched; known texts come from a vector table)."""

    name = "minilm-pairs"

    def __init__(self, encoder, known: dict[str, np.ndarray] | None = None, batch_size: int = 128) -> None:
        """``encoder``: the Encoder protocol (``encode(texts) -> L2-normalised rows``); ``known``: text -> vector."""
        self.encoder, self.known, self.batch_size = encoder, dict(known or {}), batch_size
        self.pairs_scored = 0

    def _vectors(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.known]
        found = {}
        if missing:
            encoded = self.encoder.encode(missing, batch_size=self.batch_size)
            found = dict(zip(missing, encoded))
        return np.stack([self.known[t] if t in self.known else found[t] for t in texts]).astype(np.float32)

    def score_pairs(self, queries: list[str], docs: list[str]) -> np.ndarray:
        """cos(u_q, u_d) per pair (vectors are L2-normalised: a dot product); higher = more similar."""
        if len(queries) != len(docs):
            raise ValueError(f"{len(queries)} queries but {len(docs)} candidates: give one candidate per query")
        if not queries:
            return np.empty(0, dtype=np.float32)
        a = self._vectors(list(queries))
        b = self._vectors(list(docs))
        self.pairs_scored += len(queries)
        return (a * b).sum(1).astype(np.float32)


def _folder(dataset: Dataset):
    return system_dir(dataset.name, "minilm-pairs")


class _NotCached(Exception):
    pass


class _CacheOnly:
    """Encoder protocol with the pretrained mean encoder's id that refuses to encode (a cache probe)."""

    def __init__(self, encoder_id: str) -> None:
        self.encoder_id = encoder_id

    def encode(self, texts, batch_size: int = 128, progress: ProgressFn = no_progress):
        raise _NotCached


def pair_reranker(dataset: Dataset, encode_collection: bool = False,
                  progress: ProgressFn = no_progress) -> BiEncoderPairReranker:
    """The zero-shot pair scorer for ``dataset``: collection vectors from the ``minilm`` (mean) cache when
    present (or encoded now with ``encode_collection``); otherwise texts are encoded when first scored."""
    from core.retrieval import bert
    from core.retrieval.dense import cached_embeddings

    encoder_id = bert.stamped_encoder_id(bert.pretrained_base_id("mean", bert.MiniLMConfig().max_length))
    known: dict[str, np.ndarray] = {}
    try:
        if encode_collection:
            vectors = bert.collection_embeddings(dataset, "mean", progress)
        else:
            vectors = cached_embeddings(_CacheOnly(encoder_id), dataset.corpus)
        known = dict(zip(dataset.corpus.values(), vectors))
    except _NotCached:
        pass
    return BiEncoderPairReranker(_LazyPretrained(), known)


class _LazyPretrained:
    """The pretrained mean-pooling MiniLM encoder, loaded on first use (cache hits never load it)."""

    def __init__(self) -> None:
        self._encoder = None

    def encode(self, texts: list[str], batch_size: int = 128, progress: ProgressFn = no_progress) -> np.ndarray:
        if self._encoder is None:
            from core.retrieval.minilm_encoder import MiniLMEncoder

            self._encoder = MiniLMEncoder.pretrained("mean", 64)
        return self._encoder.encode(texts, batch_size=batch_size, progress=progress)


def build(dataset: Dataset, profile: str = "quick", progress: ProgressFn = no_progress,
          variant: str | None = None) -> dict:
    """No training: caches the collection embeddings; measures pair ROC AUC on held-out dev/test pairs."""
    from core.evaluation import pair_auc, score_pairs_of

    start = time.perf_counter()
    reranker = pair_reranker(dataset, True, lambda f, m: progress(0.9 * f, m))
    metrics: dict = {"note": QUORA_NOTE, "training": None}
    for split in ("dev", "test"):
        pairs = dataset.pairs.get(split) or []
        if pairs:
            metrics[f"{split}_roc_auc"] = pair_auc(score_pairs_of(reranker, pairs, dataset.corpus), pairs)
            metrics[f"{split}_pairs"] = len(pairs)
    metrics["build_seconds"] = time.perf_counter() - start
    folder = _folder(dataset)
    save_json(folder / "config.json", stamped(config_dict()))
    save_json(folder / "metrics.json", metrics)
    progress(1.0, "minilm-pairs: ready (zero-shot, no training)")
    return metrics


def is_built(dataset: Dataset, variant: str | None = None) -> bool:
    return is_current(_folder(dataset) / "config.json")


def load(dataset: Dataset, variant: str | None = None, **options) -> BiEncoderPairReranker:
    command = build_command("minilm-pairs", dataset.name)
    check_stamp(load_json(_folder(dataset) / "config.json", "minilm-pairs", command), "minilm-pairs", command)
    return pair_reranker(dataset)


def config_dict(variant: str | None = None) -> dict:
    return {"encoder": "sentence-transformers/all-MiniLM-L6-v2 (pretrained, no fine-tuning)", "pooling": "mean",
            "max_length": 64, "score": "cosine of the two sentence embeddings (tree-search-bert-guo.md §3.2)",
            "role": "untrained reference for the cross-encoder", "note": QUORA_NOTE}
