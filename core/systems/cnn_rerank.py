"""The registration of cnn-rerank (Severyn-Moschitti CNN); its code: ``core.rerank.cnn``."""
from __future__ import annotations

from core.system_spec import Recipe, SystemSpec
from core.systems import INTERPOLATION_NOTE

REGISTRATION = SystemSpec(
    "cnn-rerank", "reranker", "Severyn-Moschitti CNN", "core.rerank.cnn",
    "cnn-rerank-severyn2015.md §3 (CNN pair reranker with overlap features)",
    variants=("no-features", "train-all"),
    datasets=("qqp-bimpm", "trecqa"), deviation=INTERPOLATION_NOTE.replace("its score", "the CNN's score").format(partner="BM25"),
    recipes=(Recipe("train-all", "TRAIN-ALL (1,229 questions, automatic labels)",
                    "trained on TrecQA's TRAIN-ALL (53,417 pairs with automatic labels, assembled from "
                    "public pieces: data/trecqa/PROVENANCE.md) with overlap features and dev-MAP early "
                    "stopping; still differs: GloVe 6B-50d (paper: word2vec 50-d on Wikipedia + AQUAINT), "
                    "quick profile capped at 6 epochs (paper: 25 with patience 5)"),),
    family="reranker", reference="bm25",
    threads=2,  # trained on 2 threads: the committed models' weights depend on it
    order=110,
)
