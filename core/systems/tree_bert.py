"""The registration of tree-bert (Tree-search BERT); its code: ``core.retrieval.tree``."""
from __future__ import annotations

from core.system_spec import SystemSpec

REGISTRATION = SystemSpec(
    "tree-bert", "retriever", "Tree-search BERT", "core.retrieval.tree",
    "tree-search-bert-guo.md §3.3-3.4, Algorithm 1 (k-means tree, beam search)", datasets=("*",),
    pair_scoring=False, family="tree", exact_reference="minilm", knobs=("beam", "K"),
    note="all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates", minilm_derived=True,
    needs=("minilm",),  # the tree is built over minilm's cached collection vectors
    order=50,
)
