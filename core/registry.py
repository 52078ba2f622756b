"""Systems by name: what each one is, where its code lives, how to build and load it.

Each system module (``SystemSpec.module``) provides three functions, so the CLI, the build and the
app treat every system the same way:

- ``build(dataset, profile="quick", progress=..., variant=None) -> dict`` trains/indexes and saves
  the artifacts (config saved beside them); returns measured metrics (dev scores, seconds).
- ``is_built(dataset, variant=None) -> bool``.
- ``load(dataset, variant=None, **options) -> Retriever | Reranker``; raises ``MissingArtifactError``
  naming the build command when an artifact is missing or corrupt.

Optionally ``config_dict(variant=None) -> dict`` (shown on the Models page, paper defaults marked).
"""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from core.data import Dataset
from core.errors import UnknownNameError
from core.paths import artifact_dir


@dataclass(frozen=True)
class SystemSpec:
    """A named system: kind, module, paper, and whether the default build includes it."""

    name: str
    kind: str  # "retriever" or "reranker"
    title: str
    module: str
    paper: str
    variants: tuple[str, ...] = ()
    default_build: bool = True
    datasets: tuple[str, ...] = ("qqp-bimpm",)
    note: str = ""


SYSTEMS: tuple[SystemSpec, ...] = (
    SystemSpec("bm25", "retriever", "BM25", "core.retrieval.bm25",
               "Okapi BM25 (bm25s, Lucene variant); k1=3.44, b=0.87 tuned for Quora in densetrans-cai2021.md §4.2.3",
               variants=("anserini-default", "classic"), datasets=("*",)),
    SystemSpec("minilm", "retriever", "MiniLM bi-encoder (compute-all)", "core.retrieval.bert",
               "tree-search-bert-guo.md §3.2 (representation-based, compute-all cosine)",
               variants=("cls", "mean", "max", "finetuned"), datasets=("*",),
               note="all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates"),
    SystemSpec("tree-bert", "retriever", "Tree-search BERT", "core.retrieval.tree",
               "tree-search-bert-guo.md §3.3-3.4, Algorithm 1 (k-means tree, beam search)", datasets=("*",),
               note="all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates"),
    SystemSpec("tree-bert-cross", "retriever", "Tree-search BERT (interaction)", "core.retrieval.tree_cross",
               "tree-search-bert-guo.md §3.3-3.4, Algorithm 2 (cross-encoder tree search)",
               note="slow by nature: per-query budget of pair scorings"),
    SystemSpec("densetrans", "retriever", "DenseTrans", "core.retrieval.densetrans",
               "densetrans-cai2021.md §3 (dense-connected Transformer, eq. 5)",
               variants=("full", "-TopDense", "-AllDense", "+Concat")),
    SystemSpec("sdml-cnn", "retriever", "SDML-CNN", "core.retrieval.sdml",
               "sdml-bonadiman2019.md §2.1, §3 (CNN encoder, smoothed deep metric loss)",
               variants=("sdml", "tl-euc", "tl-ssd")),
    SystemSpec("cross-encoder", "reranker", "MiniLM cross-encoder", "core.rerank.cross_encoder",
               "tree-search-bert-guo.md §3.2 interaction-based; FRM baseline 'BERT' (frm-multiview-chong.md §4)"),
    SystemSpec("frm", "reranker", "FRM", "core.rerank.frm",
               "frm-multiview-chong.md §3 (keyword importance, multi-level keyword sets, multi-view matching)",
               variants=("-m_mlp", "-m_att", "-m_lm", "FRM-1", "FRM-TFIDF", "one-level", "two-level", "three-level")),
    SystemSpec("cnn-rerank", "reranker", "Severyn-Moschitti CNN", "core.rerank.cnn",
               "cnn-rerank-severyn2015.md §3 (CNN pair reranker with overlap features)",
               variants=("no-features",),
               datasets=("qqp-bimpm", "trecqa")),
)
_BY_NAME = {s.name: s for s in SYSTEMS}


def list_systems(kind: str | None = None) -> list[SystemSpec]:
    return [s for s in SYSTEMS if kind is None or s.kind == kind]


def get_spec(name: str) -> SystemSpec:
    if name not in _BY_NAME:
        raise UnknownNameError("system", name, list(_BY_NAME))
    return _BY_NAME[name]


def system_module(name: str) -> ModuleType:
    """Import the module behind a system (raises ``ModuleNotFoundError`` if it is not implemented)."""
    return importlib.import_module(get_spec(name).module)


def check_variant(name: str, variant: str | None) -> None:
    spec = get_spec(name)
    if variant is not None and variant not in spec.variants:
        raise UnknownNameError(f"variant of {name}", variant, list(spec.variants))


def supports(spec: SystemSpec, dataset: Dataset) -> bool:
    """Whether a system applies to a dataset (rerank-only data has no first-stage retrieval)."""
    if spec.kind == "retriever" and dataset.candidates:
        return False
    return "*" in spec.datasets or dataset.name in spec.datasets


def load_system(name: str, dataset: Dataset, variant: str | None = None, **options: Any):
    """Load a built system for a dataset (``MissingArtifactError`` names the command if not built)."""
    check_variant(name, variant)
    return system_module(name).load(dataset, variant=variant, **options)


def slug(text: str) -> str:
    """A file-system-safe name for a dataset or variant."""
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", text).strip("_") or "default"


def system_dir(dataset_name: str, system: str, variant: str | None = None) -> Path:
    """``var/systems/<dataset>/<system>[@variant]/``: where a system keeps its artifacts."""
    leaf = system if not variant else f"{system}@{slug(variant)}"
    return artifact_dir("systems", slug(dataset_name), leaf)


def build_command(system: str, dataset_name: str, variant: str | None = None) -> str:
    cmd = f"python -m core train --system {system} --dataset {dataset_name}"
    return cmd + (f" --variant={variant}" if variant else "")
