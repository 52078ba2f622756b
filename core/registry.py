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

from core.data.datasets import Dataset
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
    datasets: tuple[str, ...] = ("qqp-bimpm",)  # default build; "*" = needs no training (any dataset)
    note: str = ""
    pair_scoring: bool = True  # can score a query's own candidate list (False: tree search over a collection)
    trained_variants: tuple[str, ...] = ()  # variants of an untrained ("*") system that are trained
    variant_pattern: str = ""  # variants not listed that are valid too (regex; core.retrieval.fusion's PART+PART:METHOD)
    minilm_derived: bool = False  # built on all-MiniLM-L6-v2, pre-trained on data that includes Quora duplicates
    deviation: str = ""  # how the default (quick) build differs from the paper's recipe: said where results are shown


SYSTEMS: tuple[SystemSpec, ...] = (
    SystemSpec("bm25", "retriever", "BM25", "core.retrieval.bm25",
               "Okapi BM25 (bm25s, Lucene variant); k1=3.44, b=0.87 tuned for Quora in densetrans-cai2021.md §4.2.3",
               variants=("anserini-default", "classic"), datasets=("*",)),
    SystemSpec("minilm", "retriever", "MiniLM bi-encoder (compute-all)", "core.retrieval.bert",
               "tree-search-bert-guo.md §3.2 (representation-based, compute-all cosine)",
               variants=("cls", "mean", "max", "finetuned"), datasets=("*",), trained_variants=("finetuned",),
               note="all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates", minilm_derived=True),
    SystemSpec("glove-mean", "retriever", "GloVe mean (untrained reference)", "core.retrieval.wordmean",
               "issue 12 reference: mean of GloVe 6B-50d word vectors, cosine, no training", datasets=("*",),
               note="untrained starting point that DenseTrans and dual-encoder must beat"),
    SystemSpec("dual-encoder", "retriever", "DualEncoder (trained word mean)", "core.retrieval.dual_encoder",
               "densetrans-cai2021.md §4.2.1 DualEncoder baseline (mean of trainable word vectors + linear, Eq. 6-7)",
               note="the DenseTrans paper's own baseline; seconds on a CPU; untrained reference: glove-mean"),
    SystemSpec("tree-bert", "retriever", "Tree-search BERT", "core.retrieval.tree",
               "tree-search-bert-guo.md §3.3-3.4, Algorithm 1 (k-means tree, beam search)", datasets=("*",),
               pair_scoring=False,
               note="all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates", minilm_derived=True),
    SystemSpec("densetrans", "retriever", "DenseTrans", "core.retrieval.densetrans",
               "densetrans-cai2021.md §3 (dense-connected Transformer, eq. 5)",
               variants=("full", "-TopDense", "-AllDense", "+Concat"),
               deviation="project recipe, not the paper's: mean pooling + dropout 0.2, τ 0.05, d 60 on GloVe 6B-50d, 600-step cap (paper: [CLS], τ 1 i.e. raw cosine, d 300 FastText; `--profile paper`)"),
    SystemSpec("sdml-cnn", "retriever", "SDML-CNN", "core.retrieval.sdml",
               "sdml-bonadiman2019.md §2.1, §3 (CNN encoder, smoothed deep metric loss)",
               variants=("sdml", "tl-euc", "tl-ssd"),
               deviation="project recipe: GloVe 6B-50d input embeddings over every collection word, 450-step cap (paper: random 300-d embeddings, 50k words + hash bins; `--profile paper`); trained on 7,894 pairs (paper: 219k)"),
    SystemSpec("fusion", "retriever", "Fusion of first stages (ranx)", "core.retrieval.fusion",
               "densetrans-cai2021.md §4.2.1 (hybrids of BM25 and embeddings); ranx fuse: RRF, CombSUM, weighted sum",
               variants=("bm25+minilm:rrf", "bm25+minilm:combsum", "bm25+minilm:wsum", "bm25+densetrans:rrf",
                         "bm25+densetrans:combsum", "bm25+densetrans:wsum"),
               datasets=("*",), pair_scoring=False, variant_pattern=r"[^:@]+\+[^:@]+:[a-z]+",
               note="variant PART+PART:METHOD, e.g. bm25+minilm:rrf; weights tuned on the dev split"),
    SystemSpec("minilm-pairs", "reranker", "MiniLM bi-encoder pairs (zero-shot reference)", "core.rerank.biencoder",
               "tree-search-bert-guo.md §3.2 representation-based cosine of (query, candidate), no training",
               datasets=("*",), note="untrained reference the cross-encoder must beat", minilm_derived=True),
    SystemSpec("frm", "reranker", "FRM", "core.rerank.frm",
               "frm-multiview-chong.md §3 (keyword importance, multi-level keyword sets, multi-view matching)",
               variants=("-m_mlp", "-m_att", "-m_lm", "FRM-1", "FRM-TFIDF", "one-level", "two-level", "three-level"), minilm_derived=True,
               deviation='project recipe: Eq. (18) plus a keyword-agreement loss that is not in the paper (weight 1), frozen MiniLM, 3 epochs (paper: no such loss, fine-tuned encoder; `--profile paper`)'),
    SystemSpec("cnn-rerank", "reranker", "Severyn-Moschitti CNN", "core.rerank.cnn",
               "cnn-rerank-severyn2015.md §3 (CNN pair reranker with overlap features)",
               variants=("no-features",),
               datasets=("qqp-bimpm", "trecqa")),
    SystemSpec("cross-encoder", "reranker", "MiniLM cross-encoder", "core.rerank.cross_encoder",
               "tree-search-bert-guo.md §3.2 interaction-based; FRM baseline 'BERT' (frm-multiview-chong.md §4)", minilm_derived=True,
               deviation='quick profile: 250 steps of 32 pairs, not trained to convergence (`--profile full`)'),
    SystemSpec("tree-bert-cross", "retriever", "Tree-search BERT (interaction)", "core.retrieval.tree_cross",
               "tree-search-bert-guo.md §3.3-3.4, Algorithm 2 (cross-encoder tree search)",
               note="slow by nature: per-query budget of pair scorings", pair_scoring=False, minilm_derived=True),
)
_BY_NAME = {s.name: s for s in SYSTEMS}


QUORA_NOTE = "all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates"


def contamination_note(name: str, dataset_name: str) -> str | None:
    """The Quora-contamination note for a MiniLM-derived system (a fusion with a MiniLM part too) on a
    Quora dataset, else None: its QQP numbers are not zero-shot."""
    system, _, variant = name.partition("@")
    spec = _BY_NAME.get(system)
    if spec is None or "qqp" not in dataset_name.lower():
        return None
    derived = spec.minilm_derived
    if spec.variant_pattern:  # a fusion: any MiniLM-derived part (the default variant is the first listed)
        parts = (variant or spec.variants[0]).split(":")[0].split("+")
        derived = any(_BY_NAME[p].minilm_derived for p in parts if p in _BY_NAME)
    return f"{name}: {QUORA_NOTE} (its QQP numbers are not zero-shot)" if derived else None


def deviation_note(name: str) -> str | None:
    """How the default build of ``name`` differs from its paper's recipe (None when it follows it)."""
    spec = _BY_NAME.get(name.partition("@")[0])
    return f"{name}: {spec.deviation}" if spec and spec.deviation else None


def list_systems(kind: str | None = None) -> list[SystemSpec]:
    return [s for s in SYSTEMS if kind is None or s.kind == kind]


def get_spec(name: str) -> SystemSpec:
    """The spec of a system; ``SYSTEM@TRAINED_ON`` / ``SYSTEM@VARIANT`` names give SYSTEM's spec."""
    base = name.split("@", 1)[0]
    if base not in _BY_NAME:
        raise UnknownNameError("system", base, list(_BY_NAME))
    return _BY_NAME[base]


@dataclass(frozen=True)
class SystemName:
    """A parsed system name: ``SYSTEM[@VARIANT][@TRAINED_ON]`` (``densetrans@qqp-bimpm``)."""

    system: str
    variant: str | None = None
    trained_on: str | None = None

    def __str__(self) -> str:
        return self.system + (f"@{self.variant}" if self.variant else "") + (f"@{self.trained_on}" if self.trained_on else "")


def parse_name(name: str, variant: str | None = None) -> SystemName:
    """Split ``SYSTEM@X[@Y]``: a part that is one of SYSTEM's variants is the variant, any other part
    names the dataset the model was trained on (dataset names never contain ``@``)."""
    system, *parts = name.strip().split("@")
    spec = get_spec(system)
    if any(not part for part in parts):
        raise UnknownNameError("system name", name, ["SYSTEM", "SYSTEM@VARIANT", "SYSTEM@TRAINED_ON"])
    if variant is None:
        variant = next((part for part in parts if is_variant(spec, part)), None)
    others = [part for part in parts if part != variant]
    check_variant(system, variant)
    if len(others) > 1 or (others and not needs_training(spec, variant)):  # untrained: '@X' can only be a variant
        raise UnknownNameError(f"variant of {system}", others[-1], list(spec.variants))
    return SystemName(system, variant, others[0] if others else None)


def needs_training(spec: SystemSpec, variant: str | None = None) -> bool:
    """Whether a system (variant) is a trained model (portable as ``SYSTEM@TRAINED_ON``)."""
    return "*" not in spec.datasets or (variant is not None and variant in spec.trained_variants)


def system_module(name: str) -> ModuleType:
    """Import the module behind a system (raises ``ModuleNotFoundError`` if it is not implemented)."""
    return importlib.import_module(get_spec(name).module)


def is_variant(spec: SystemSpec, variant: str) -> bool:
    """A listed variant, or one that matches the spec's ``variant_pattern``."""
    return variant in spec.variants or bool(spec.variant_pattern and re.fullmatch(spec.variant_pattern, variant))


def check_variant(name: str, variant: str | None) -> None:
    spec = get_spec(name)
    if variant is not None and not is_variant(spec, variant):
        raise UnknownNameError(f"variant of {name}", variant, list(spec.variants))


def supports(spec: SystemSpec, dataset: Dataset) -> bool:
    """Whether a system applies to a dataset: any system on a collection (trained ones natively or as
    ``SYSTEM@TRAINED_ON``); on candidate lists every system that can score a query's own candidates."""
    return spec.pair_scoring or not dataset.candidates


def default_build(spec: SystemSpec, dataset: Dataset) -> bool:
    """Whether the default build (``build --all``) trains/indexes this system on this dataset."""
    return spec.default_build and supports(spec, dataset) and ("*" in spec.datasets or dataset.name in spec.datasets)


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
