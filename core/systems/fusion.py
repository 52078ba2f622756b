"""The registration of fusion (Fusion of first stages (ranx)); its code: ``core.retrieval.fusion``."""
from __future__ import annotations

from core.system_spec import SystemSpec

REGISTRATION = SystemSpec(
    "fusion", "retriever", "Fusion of first stages (ranx)", "core.retrieval.fusion",
    "densetrans-cai2021.md §4.2.1 (hybrids of BM25 and embeddings); ranx fuse: RRF, CombSUM, weighted sum",
    variants=("bm25+minilm:rrf", "bm25+minilm:combsum", "bm25+minilm:wsum", "bm25+densetrans:rrf",
              "bm25+densetrans:combsum", "bm25+densetrans:wsum"),
    datasets=("*",), variant_pattern=r"[^:]+\+[^:]+:[a-z]+(?::untuned)?",
    note="variant PART+PART:METHOD, e.g. bm25+minilm:rrf; weights tuned on the dev split; on candidate "
         "lists every part (any system, a run file too) scores the query's own candidates",
    family="fusion", composite=True,
    needs=("bm25", "minilm"),  # the default variant's parts
    order=80,
)
