"""The registration of bm25 (BM25); its code: ``core.retrieval.bm25``."""
from __future__ import annotations

from core.system_spec import SystemSpec

REGISTRATION = SystemSpec(
    "bm25", "retriever", "BM25", "core.retrieval.bm25",
    "Okapi BM25 (bm25s, Lucene variant); k1=3.44, b=0.87 tuned for Quora in densetrans-cai2021.md §4.2.3",
    variants=("anserini-default", "classic"), datasets=("*",), family="sparse", milvus_servable=True,
    cheap=True, default_first_stage=True,
    order=10,
)
