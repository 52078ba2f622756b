"""The registration of minilm (MiniLM bi-encoder (compute-all)); its code: ``core.retrieval.bert``."""
from __future__ import annotations

from core.system_spec import LayerSource, SystemSpec
from core.systems import DENSE

REGISTRATION = SystemSpec(
    "minilm", "retriever", "MiniLM bi-encoder (compute-all)", "core.retrieval.bert",
    "tree-search-bert-guo.md §3.2 (representation-based, compute-all cosine)",
    variants=("cls", "mean", "max", "finetuned"), datasets=("*",), trained_variants=("finetuned",),
    note="all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates", minilm_derived=True,
    layer_sources=(LayerSource("MiniLM [CLS]", pooling="cls"), LayerSource("MiniLM mean", pooling="mean")),
    **DENSE,
    threads=2,  # encoding only (its vectors do not depend on the threads): both cores
    order=20,
)
