"""The registration of minilm-pairs (MiniLM bi-encoder pairs (zero-shot reference)); its code: ``core.rerank.biencoder``."""
from __future__ import annotations

from core.system_spec import SystemSpec

REGISTRATION = SystemSpec(
    "minilm-pairs", "reranker", "MiniLM bi-encoder pairs (zero-shot reference)", "core.rerank.biencoder",
    "tree-search-bert-guo.md §3.2 representation-based cosine of (query, candidate), no training",
    datasets=("*",), note="untrained reference the cross-encoder must beat", minilm_derived=True,
    family="reranker", cheap=True,  # zero-shot: encoded on first use
    needs=("minilm",),  # minilm's cached collection vectors
    order=90,
)
