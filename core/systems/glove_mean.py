"""The registration of glove-mean (GloVe mean (untrained reference)); its code: ``core.retrieval.wordmean``."""
from __future__ import annotations

from core.system_spec import SystemSpec
from core.systems import DENSE

REGISTRATION = SystemSpec(
    "glove-mean", "retriever", "GloVe mean (untrained reference)", "core.retrieval.wordmean",
    "untrained reference: mean of GloVe 6B-50d word vectors, cosine, no training", datasets=("*",),
    note="untrained starting point that DenseTrans and dual-encoder must beat", cheap=True, **DENSE,
    order=30,
)
