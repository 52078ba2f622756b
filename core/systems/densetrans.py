"""The registration of densetrans (DenseTrans); its code: ``core.retrieval.densetrans``."""
from __future__ import annotations

from core.system_spec import LayerSource, Recipe, SystemSpec
from core.systems import DENSE

REGISTRATION = SystemSpec(
    "densetrans", "retriever", "DenseTrans", "core.retrieval.densetrans",
    "densetrans-cai2021.md §3 (dense-connected Transformer, eq. 5)",
    variants=("full", "-TopDense", "-AllDense", "+Concat", "paper-objective"),
    deviation="project recipe, not the paper's: mean pooling + dropout 0.2, τ 0.05, d 60 on GloVe 6B-50d, "
              "600-step cap (paper: [CLS], τ 1 i.e. raw cosine, dropout 0.1, d 300 FastText; the paper's "
              "objective at this size: densetrans@paper-objective; its whole recipe: `--profile paper`)",
    recipe_label="project recipe: mean, τ .05, d 60",
    recipes=(Recipe("paper-objective", "paper objective: [CLS], τ 1; d 60, 600-step cap",
                    "the paper's objective ([CLS] pooling, τ 1 i.e. raw cosine in Eq. 6, dropout 0.1, "
                    "PyTorch's default position init) at the default build's CPU size; still differs: "
                    "d 60 on GloVe 6B-50d (paper: d 300, FastText), batches of 128 queries (paper: 32), "
                    "lr 2e-3 (paper: not given), 600-step cap with dev early stopping every 50 steps "
                    "(paper: trained to its dev optimum); on QQP 7,894 positive training pairs of the "
                    "cluster-disjoint split (paper: 79.6K training questions)"),),
    reference="glove-mean",
    layer_sources=(LayerSource("DenseTrans", options=(("index", "flat"),)),
                   LayerSource("DenseTrans -AllDense", "-AllDense", options=(("index", "flat"),))),
    **DENSE,
    needs=("bm25",),  # hard negatives
    threads=2,  # trained on 2 threads: the committed models' weights depend on it
    order=60,
)
