"""The registration of sdml-cnn (SDML-CNN); its code: ``core.retrieval.sdml``."""
from __future__ import annotations

from core.system_spec import SystemSpec
from core.systems import DENSE

REGISTRATION = SystemSpec(
    "sdml-cnn", "retriever", "SDML-CNN", "core.retrieval.sdml",
    "sdml-bonadiman2019.md §2.1, §3 (CNN encoder, smoothed deep metric loss)",
    variants=("sdml", "tl-euc", "tl-ssd"),
    deviation="project recipe: GloVe 6B-50d input embeddings over every collection word, 450-step cap (paper: random 300-d embeddings, 50k words + hash bins; `--profile paper`); trained on 7,894 pairs (paper: 219k)",
    reference="glove-mean", **DENSE,
    threads=2,  # trained on 2 threads: the committed models' weights depend on it
    order=70,
)
