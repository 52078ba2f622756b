"""The registration of dual-encoder (DualEncoder (trained word mean)); its code: ``core.retrieval.dual_encoder``."""
from __future__ import annotations

from core.system_spec import SystemSpec
from core.systems import DENSE

REGISTRATION = SystemSpec(
    "dual-encoder", "retriever", "DualEncoder (trained word mean)", "core.retrieval.dual_encoder",
    "densetrans-cai2021.md §4.2.1 DualEncoder baseline (mean of trainable word vectors + linear, Eq. 6-7)",
    note="the DenseTrans paper's own baseline; seconds on a CPU; untrained reference: glove-mean",
    reference="glove-mean", **DENSE,
    needs=("bm25",),  # its hard negatives come from BM25's index
    threads=2,  # trained on 2 threads: the committed models' weights depend on it
    order=40,
)
