"""The registration of tree-bert-cross (Tree-search BERT (interaction)); its code: ``core.rerank.tree_cross``."""
from __future__ import annotations

from core.system_spec import SystemSpec

REGISTRATION = SystemSpec(
    "tree-bert-cross", "retriever", "Tree-search BERT (interaction)", "core.rerank.tree_cross",
    "tree-search-bert-guo.md §3.3-3.4, Algorithm 2 (cross-encoder tree search)",
    note="slow by nature: per-query budget of pair scorings", pair_scoring=False, minilm_derived=True,
    family="tree",
    not_stored="seconds per query (a budget of cross-encoder scorings): computed on demand only",
    needs=("tree-bert", "cross-encoder"),
    order=130,
)
