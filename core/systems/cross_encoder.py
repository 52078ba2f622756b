"""The registration of cross-encoder (MiniLM cross-encoder); its code: ``core.rerank.cross_encoder``."""
from __future__ import annotations

from core.system_spec import SystemSpec
from core.systems import INTERPOLATION_NOTE

REGISTRATION = SystemSpec(
    "cross-encoder", "reranker", "MiniLM cross-encoder", "core.rerank.cross_encoder",
    "tree-search-bert-guo.md §3.2 interaction-based; FRM baseline 'BERT' (frm-multiview-chong.md §4)", minilm_derived=True,
    deviation='quick profile: 250 steps of 32 pairs, not trained to convergence (`--profile full`); '
              + INTERPOLATION_NOTE.format(partner="the zero-shot MiniLM pair scorer (its reference)"),
    family="cross-encoder", reference="minilm-pairs",
    threads=2,  # trained on 2 threads: the committed models' weights depend on it
    order=120,
)
