"""Systems by name: what each one is, where its code lives, how to build and load it.

Each system module (``SystemSpec.module``) provides three functions, so the CLI, the build and the
app treat every system the same way:

- ``build(dataset, profile="quick", progress=..., variant=None) -> dict`` trains/indexes and saves
  the artifacts (config saved beside them); returns measured metrics (dev scores, seconds).
- ``is_built(dataset, variant=None) -> bool``.
- ``load(dataset, variant=None, **options) -> Retriever | Reranker``; raises ``MissingArtifactError``
  naming the build command when an artifact is missing or corrupt.

Optionally ``config_dict(variant=None) -> dict`` (shown on the Models page, paper defaults marked).

Names that say what runs: a system whose default build follows the project's own recipe
says so in its display name (``recipe_label``) and its ``deviation``; a paper's recipe that the project can
build beside the default is a :class:`Recipe` variant (``densetrans@paper-objective``, ``frm@kw-loss``)
with its own artifacts folder, display name and deviation note. :func:`display_name` and
:func:`deviation_note` are what every page and the CLI show.
"""
from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from core.data.datasets import Dataset
from core.errors import StudioError, UnknownNameError
from core.paths import artifact_dir


@dataclass(frozen=True)
class Recipe:
    """A training recipe built beside a system's default: a variant with its own artifacts folder
    (``system_dir(dataset, system, variant)``), so building it never touches the default build's model."""

    variant: str  # the name after '@' (also listed in ``SystemSpec.variants``)
    label: str  # what runs, in the display name: "paper objective: [CLS], τ 1; d 60, 600-step cap"
    deviation: str  # what still differs from the paper ("" = nothing)
    default_build: str = ""  # why the default build builds it too ("" = only on request: build --systems S@V)


FAMILIES = ("sparse", "dense", "tree", "cross-encoder", "reranker", "fusion", "run")  # SystemSpec.family


@dataclass(frozen=True)
class LayerSource:
    """One representation the Layers page reads per layer: ``SYSTEM[@variant]`` with an optional pooling."""

    label: str  # shown on the page ("MiniLM [CLS]")
    variant: str | None = None
    pooling: str | None = None  # passed to ``layer_embeddings(texts, pooling=...)``; None: the system's own
    options: tuple[tuple[str, object], ...] = ()  # loader options (an exact index: the vectors are what is read)


BUILD_THREADS = 1  # torch threads of a build job unless its registration says otherwise (SystemSpec.threads)


@dataclass(frozen=True)
class SystemSpec:
    """A named system: everything a page, the CLI, the build, bench/ or pooling needs to know about it.

    Nobody outside this registry and the system's own module keeps a list of systems or branches on a
    system name: they ask the spec (``family``, ``ann_indexable``, ``composite``, ``reference``...).
    """

    name: str
    kind: str  # "retriever" or "reranker"
    title: str
    module: str  # "pkg.mod" (a module) or "pkg.mod:Factory" (Factory(spec) gives the provider)
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
    recipe_label: str = ""  # what the default build runs, in its display name ("project recipe: mean, τ .05, d 60")
    recipes: tuple[Recipe, ...] = ()  # other recipes (variants with their own folder), e.g. the paper's objective
    family: str = ""  # one of FAMILIES ("" = derived from kind: "reranker" / "dense")
    ann_indexable: bool = False  # dense vectors in a faiss index: the index knobs (presets, nprobe, efSearch) apply
    milvus_servable: bool = False  # its vectors (or BM25 weights) can be served from Milvus
    cheap: bool = False  # untrained: the loader builds it on first use, with progress (an index, a zero-shot encoding)
    default_first_stage: bool = False  # THE first stage of rerankers when none is asked (one system says so)
    rerank_depth: int = 20  # reranker: how many first-stage hits it rescores by default (FRM paper: top 20)
    layer_sources: tuple[LayerSource, ...] = ()  # what the Layers page reads per layer
    reference: str = ""  # the untrained reference a held-out verdict compares it with ("" = none)
    exact_reference: str = ""  # an approximate search's exact counterpart (tree-bert: minilm with a flat index)
    not_stored: str = ""  # why its runs are computed on demand only ("" = the build stores its runs)
    composite: bool = False  # made of other systems: its ``load`` takes ``loader=(part, variant) -> system``
    knobs: tuple[str, ...] = ()  # serving options Compare exposes ("index", "nprobe", "efSearch", "beam", "K")
    explains_keywords: bool = False  # shows keyword importance (the Keywords page)
    origin: str = "built-in"  # "built-in", "user" (core systems add) or "plugin:<distribution>"
    source: str = ""  # where a user or plugin system comes from (a model folder, a run file, a module)
    needs: tuple[str, ...] = ()  # systems whose artifacts its build reads: the build graph's edges (core.build_graph)
    threads: int = BUILD_THREADS  # torch intra-op threads (and CPUs) of its build job on every machine: a training's
    # weights depend on it (fixed: determinism); inference does not (MiniLM's vectors are bit-equal on 1 and 2)

    @property
    def kind_family(self) -> str:
        """``family`` or, when unset, the kind's family."""
        return self.family or ("reranker" if self.kind == "reranker" else "dense")


_DENSE = dict(family="dense", ann_indexable=True, milvus_servable=True, knobs=("index", "nprobe", "efSearch"))


INTERPOLATION_NOTE = ("served ranking: (1 − α) · its score + α · {partner}'s, each min-max normalised over the "
                      "query's candidates (BM25's top 20), α chosen on dev (600 queries, best MRR@100 over "
                      "α = 0 … .9; stored beside the model in interpolation.json; not in the paper)")


SYSTEMS: tuple[SystemSpec, ...] = (
    SystemSpec("bm25", "retriever", "BM25", "core.retrieval.bm25",
               "Okapi BM25 (bm25s, Lucene variant); k1=3.44, b=0.87 tuned for Quora in densetrans-cai2021.md §4.2.3",
               variants=("anserini-default", "classic"), datasets=("*",), family="sparse", milvus_servable=True,
               cheap=True, default_first_stage=True),
    SystemSpec("minilm", "retriever", "MiniLM bi-encoder (compute-all)", "core.retrieval.bert",
               "tree-search-bert-guo.md §3.2 (representation-based, compute-all cosine)",
               variants=("cls", "mean", "max", "finetuned"), datasets=("*",), trained_variants=("finetuned",),
               note="all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates", minilm_derived=True,
               layer_sources=(LayerSource("MiniLM [CLS]", pooling="cls"), LayerSource("MiniLM mean", pooling="mean")),
               **_DENSE,
               threads=2),  # encoding only (its vectors do not depend on the threads): both cores
    SystemSpec("glove-mean", "retriever", "GloVe mean (untrained reference)", "core.retrieval.wordmean",
               "untrained reference: mean of GloVe 6B-50d word vectors, cosine, no training", datasets=("*",),
               note="untrained starting point that DenseTrans and dual-encoder must beat", cheap=True, **_DENSE),
    SystemSpec("dual-encoder", "retriever", "DualEncoder (trained word mean)", "core.retrieval.dual_encoder",
               "densetrans-cai2021.md §4.2.1 DualEncoder baseline (mean of trainable word vectors + linear, Eq. 6-7)",
               note="the DenseTrans paper's own baseline; seconds on a CPU; untrained reference: glove-mean",
               reference="glove-mean", **_DENSE,
               needs=("bm25",),  # its hard negatives come from BM25's index
               threads=2),  # trained on 2 threads: the committed models' weights depend on it
    SystemSpec("tree-bert", "retriever", "Tree-search BERT", "core.retrieval.tree",
               "tree-search-bert-guo.md §3.3-3.4, Algorithm 1 (k-means tree, beam search)", datasets=("*",),
               pair_scoring=False, family="tree", exact_reference="minilm", knobs=("beam", "K"),
               note="all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates", minilm_derived=True,
               needs=("minilm",)),  # the tree is built over minilm's cached collection vectors
    SystemSpec("densetrans", "retriever", "DenseTrans", "core.retrieval.densetrans",
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
               **_DENSE,
               needs=("bm25",),  # hard negatives
               threads=2),  # trained on 2 threads: the committed models' weights depend on it
    SystemSpec("sdml-cnn", "retriever", "SDML-CNN", "core.retrieval.sdml",
               "sdml-bonadiman2019.md §2.1, §3 (CNN encoder, smoothed deep metric loss)",
               variants=("sdml", "tl-euc", "tl-ssd"),
               deviation="project recipe: GloVe 6B-50d input embeddings over every collection word, 450-step cap (paper: random 300-d embeddings, 50k words + hash bins; `--profile paper`); trained on 7,894 pairs (paper: 219k)",
               reference="glove-mean", **_DENSE,
               threads=2),  # trained on 2 threads: the committed models' weights depend on it
    SystemSpec("fusion", "retriever", "Fusion of first stages (ranx)", "core.retrieval.fusion",
               "densetrans-cai2021.md §4.2.1 (hybrids of BM25 and embeddings); ranx fuse: RRF, CombSUM, weighted sum",
               variants=("bm25+minilm:rrf", "bm25+minilm:combsum", "bm25+minilm:wsum", "bm25+densetrans:rrf",
                         "bm25+densetrans:combsum", "bm25+densetrans:wsum"),
               datasets=("*",), variant_pattern=r"[^:@]+\+[^:@]+:[a-z]+",
               note="variant PART+PART:METHOD, e.g. bm25+minilm:rrf; weights tuned on the dev split; on candidate "
                    "lists every part (any system, a run file too) scores the query's own candidates",
               family="fusion", composite=True,
               needs=("bm25", "minilm")),  # the default variant's parts
    SystemSpec("minilm-pairs", "reranker", "MiniLM bi-encoder pairs (zero-shot reference)", "core.rerank.biencoder",
               "tree-search-bert-guo.md §3.2 representation-based cosine of (query, candidate), no training",
               datasets=("*",), note="untrained reference the cross-encoder must beat", minilm_derived=True,
               family="reranker", cheap=True,  # zero-shot: encoded on first use
               needs=("minilm",)),  # minilm's cached collection vectors
    SystemSpec("frm", "reranker", "FRM", "core.rerank.frm",
               "frm-multiview-chong.md §3 (keyword importance, multi-level keyword sets, multi-view matching)",
               variants=("-m_mlp", "-m_att", "-m_lm", "FRM-1", "FRM-TFIDF", "one-level", "two-level", "three-level",
                         "kw-loss"), minilm_derived=True,
               deviation="the paper's loss (Eq. 18 only) at CPU size: all-MiniLM-L6-v2 frozen (paper: BERT "
                         "fine-tuned), new layers at lr 1e-3 (paper: 2e-5), 3-epoch cap with dev ROC AUC early "
                         "stopping on 1,000 dev pairs; on QQP 15,871 training pairs of the cluster-disjoint split "
                         "(the paper's whole recipe: `--profile paper`); "
                         + INTERPOLATION_NOTE.format(partner="the zero-shot MiniLM pair scorer (its reference)"),
               recipe_label="paper loss, Eq. 18",
               recipes=(Recipe("kw-loss", "+ keyword-agreement loss",
                               "the project's earlier recipe: Eq. (18) plus a keyword-agreement loss that is not in "
                               "the paper (weight 1); over five training seeds its mean dev pair AUC is above Eq. "
                               "(18) alone's by a margin the seed-level test does not separate from zero "
                               "(bench/reports/dev_decisions.json); FRM's explanation of choice (its w(k, q) passes the "
                               "held-out faithfulness and plausibility checks, the paper loss's does not: "
                               "bench/reports/keyword_faithfulness.json; the Keywords page's default across every "
                               "system: bench/reports/explain_faithfulness.json); otherwise as the default: all-MiniLM-L6-v2 "
                               "frozen (paper: BERT fine-tuned), new layers at lr 1e-3, 3-epoch cap; "
                               + INTERPOLATION_NOTE.format(partner="the zero-shot MiniLM pair scorer (its reference)"),
                               default_build="FRM's explanation of choice (decision rule of "
                                             "bench/keyword_faithfulness.py, on dev pairs)"),),
               family="reranker", reference="minilm-pairs", explains_keywords=True),
    SystemSpec("cnn-rerank", "reranker", "Severyn-Moschitti CNN", "core.rerank.cnn",
               "cnn-rerank-severyn2015.md §3 (CNN pair reranker with overlap features)",
               variants=("no-features", "train-all"),
               datasets=("qqp-bimpm", "trecqa"), deviation=INTERPOLATION_NOTE.replace("its score", "the CNN's score").format(partner="BM25"),
               recipes=(Recipe("train-all", "TRAIN-ALL (1,229 questions, automatic labels)",
                               "trained on TrecQA's TRAIN-ALL (53,417 pairs with automatic labels, assembled from "
                               "public pieces: data/trecqa/PROVENANCE.md) with overlap features and dev-MAP early "
                               "stopping; still differs: GloVe 6B-50d (paper: word2vec 50-d on Wikipedia + AQUAINT), "
                               "quick profile capped at 6 epochs (paper: 25 with patience 5)"),),
               family="reranker", reference="bm25",
               threads=2),  # trained on 2 threads: the committed models' weights depend on it
    SystemSpec("cross-encoder", "reranker", "MiniLM cross-encoder", "core.rerank.cross_encoder",
               "tree-search-bert-guo.md §3.2 interaction-based; FRM baseline 'BERT' (frm-multiview-chong.md §4)", minilm_derived=True,
               deviation='quick profile: 250 steps of 32 pairs, not trained to convergence (`--profile full`); '
                         + INTERPOLATION_NOTE.format(partner="the zero-shot MiniLM pair scorer (its reference)"),
               family="cross-encoder", reference="minilm-pairs",
               threads=2),  # trained on 2 threads: the committed models' weights depend on it
    SystemSpec("tree-bert-cross", "retriever", "Tree-search BERT (interaction)", "core.rerank.tree_cross",
               "tree-search-bert-guo.md §3.3-3.4, Algorithm 2 (cross-encoder tree search)",
               note="slow by nature: per-query budget of pair scorings", pair_scoring=False, minilm_derived=True,
               family="tree",
               not_stored="seconds per query (a budget of cross-encoder scorings): computed on demand only",
               needs=("tree-bert", "cross-encoder")),
)
_BUILT_IN = {s.name: s for s in SYSTEMS}
_REGISTERED: dict[str, SystemSpec] = {}  # user and plugin systems, in registration order
_PROVIDERS: dict[str, object] = {}  # name -> provider given to register() or made from ``module`` on first use
DISCOVERY_MODULE = "core.user_systems"  # its ``discover()`` registers user and plugin systems (run lazily, once)
_discovery = {"done": False, "running": False}
_UNLOADED: dict[str, str] = {}  # a plugin's entry-point name -> why it did not load (set by discovery)


def note_unloaded(name: str, why: str) -> None:
    """Discovery's record of a plugin that did not load: asking for ``name`` then says ``why``, not "unknown"."""
    _UNLOADED[name] = why


class _Systems(Mapping):
    """Every system by name: the built-in ones, then registered ones (discovered on first use)."""

    def _all(self) -> dict[str, SystemSpec]:
        _discover()
        return {**_BUILT_IN, **_REGISTERED}

    def __getitem__(self, name: str) -> SystemSpec:
        return self._all()[name]

    def __iter__(self):
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


_BY_NAME = _Systems()


def _discover() -> None:
    """Run ``DISCOVERY_MODULE.discover()`` once (user systems file, ``qrs.systems`` plugins); a module that is
    not there means nothing to discover. Re-entrant calls (discovery asking the registry) see built-ins only."""
    if _discovery["done"] or _discovery["running"]:
        return
    _discovery["running"] = True
    try:
        try:
            module = importlib.import_module(DISCOVERY_MODULE)
        except ModuleNotFoundError as exc:
            if exc.name != DISCOVERY_MODULE:
                raise
            return
        module.discover()
    finally:
        _discovery["running"] = False
        _discovery["done"] = True


def refresh() -> None:
    """Forget discovered systems and discover again on next use (after ``core systems add/remove``)."""
    for name in [n for n, s in _REGISTERED.items() if s.origin != "built-in"]:
        unregister(name)
    _UNLOADED.clear()
    _discovery["done"] = False


def register(spec: SystemSpec, provider: object | None = None, replace: bool = False) -> SystemSpec:
    """Add a system: ``spec`` and, optionally, its provider (a module or object with build/is_built/load
    [/config_dict]); without one, :func:`system_module` makes it from ``spec.module``. A built-in name, or a
    registered one without ``replace``, raises ``ValueError``."""
    if spec.name in _BUILT_IN:
        raise ValueError(f"{spec.name} is a built-in system; choose another name")
    if not replace and spec.name in _REGISTERED:
        raise ValueError(f"{spec.name} is registered already ({_REGISTERED[spec.name].origin})")
    if "@" in spec.name or not spec.name.strip():
        raise ValueError(f"a system name is not empty and has no '@': {spec.name!r}")
    if spec.kind not in ("retriever", "reranker"):
        raise ValueError(f"{spec.name}: kind is 'retriever' or 'reranker', not {spec.kind!r}")
    _REGISTERED[spec.name] = spec
    _PROVIDERS.pop(spec.name, None)
    if provider is not None:
        _PROVIDERS[spec.name] = provider
    return spec


def unregister(name: str) -> None:
    """Remove a registered (user or plugin) system; built-in ones stay (``ValueError``)."""
    if name in _BUILT_IN:
        raise ValueError(f"{name} is a built-in system")
    _REGISTERED.pop(name, None)
    _PROVIDERS.pop(name, None)


def default_first_stage() -> str:
    """The first stage rerankers use when none is asked (the build's stored runs use it too)."""
    return next(s.name for s in SYSTEMS if s.default_first_stage)


def rerank_depth(name: str | None = None) -> int:
    """How many first-stage hits a reranker rescores by default (``name``'s own, else the common default)."""
    return get_spec(name).rerank_depth if name else SystemSpec.rerank_depth


def with_family(family: str, kind: str | None = None) -> list[SystemSpec]:
    """Systems of one family (``"fusion"``, ``"tree"``...), in registry order."""
    return [s for s in list_systems(kind) if s.kind_family == family]


def with_knob(knob: str) -> list[SystemSpec]:
    """Systems that take a serving option (``"beam"``: the tree; ``"index"``: the dense first stages)."""
    return [s for s in list_systems() if knob in s.knobs]


def layer_sources() -> dict[str, tuple[str, LayerSource]]:
    """Every Layers-page representation: label -> (system, its :class:`LayerSource`)."""
    return {src.label: (s.name, src) for s in list_systems() for src in s.layer_sources}


def reference_of(name: str) -> str | None:
    """The untrained reference of ``SYSTEM[@...]`` for held-out verdicts (None if it has none or is unknown)."""
    spec = _BY_NAME.get(name.split("@", 1)[0])
    return (spec.reference or None) if spec is not None else None


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


def _loose_parts(name: str) -> tuple[SystemSpec | None, str | None, str | None]:
    """(spec, variant, trained_on) of ``SYSTEM[@VARIANT][@TRAINED_ON]`` without raising (display helpers)."""
    system, *parts = name.strip().split("@")
    spec = _BY_NAME.get(system)
    if spec is None:
        return None, None, None
    variant = next((p for p in parts if p and is_variant(spec, p)), None)
    others = [p for p in parts if p and p != variant]
    return spec, variant, (others[0] if others else None)


def recipe(name: str, variant: str | None = None) -> Recipe | None:
    """The :class:`Recipe` that ``name`` (``SYSTEM@VARIANT``, or ``SYSTEM`` with ``variant``) runs, else None
    (the default build's recipe, or an ablation of it)."""
    spec, parsed, _ = _loose_parts(name)
    variant = variant or parsed
    if spec is None or not variant:
        return None
    return next((r for r in spec.recipes if r.variant == variant), None)


def display_name(name: str, variant: str | None = None) -> str:
    """What runs under ``name``, for people: ``DenseTrans (project recipe: mean, τ .05, d 60)``,
    ``DenseTrans (paper objective: [CLS], τ 1; d 60, 600-step cap)``, ``DenseTrans -AllDense (project
    recipe: ...)``, ``FRM (paper loss, Eq. 18)``; a model trained elsewhere adds ``[trained on X]``."""
    spec, parsed, trained_on = _loose_parts(name)
    if spec is None:
        return name
    variant = variant or parsed
    chosen = recipe(spec.name, variant)
    if chosen is not None:
        text = f"{spec.title} ({chosen.label})"
    else:
        shown = variant if variant and variant != "full" else ""
        text = spec.title + (f" {shown}" if shown else "") + (f" ({spec.recipe_label})" if spec.recipe_label else "")
    return text + (f" [trained on {trained_on}]" if trained_on else "")


def deviation_note(name: str) -> str | None:
    """How ``name`` (``SYSTEM[@VARIANT]``) differs from its paper's recipe: the recipe variant's own note, else
    the default build's (ablations are built with the default recipe); None when it follows the paper."""
    spec, variant, _ = _loose_parts(name)
    if spec is None:
        return None
    chosen = recipe(spec.name, variant)
    text = chosen.deviation if chosen is not None else spec.deviation
    return f"{name}: {text}" if text else None


def recipe_choices(kind: str | None = None) -> list[str]:
    """``SYSTEM@VARIANT`` of every recipe built beside a default (the Models page's build list)."""
    return [f"{s.name}@{r.variant}" for s in list_systems(kind) for r in s.recipes]


def list_systems(kind: str | None = None) -> list[SystemSpec]:
    """Built-in systems, then registered (user, plugin) ones; ``kind`` "retriever" or "reranker" filters."""
    return [s for s in _BY_NAME.values() if kind is None or s.kind == kind]


def get_spec(name: str) -> SystemSpec:
    """The spec of a system; ``SYSTEM@TRAINED_ON`` / ``SYSTEM@VARIANT`` names give SYSTEM's spec."""
    base = name.split("@", 1)[0]
    if base not in _BY_NAME:
        if base in _UNLOADED:
            raise StudioError(f"system {base} is a plugin that did not load: {_UNLOADED[base]}")
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


def system_module(name: str) -> ModuleType | Any:
    """The provider of a system's build/is_built/load[/config_dict]: the one given to :func:`register`, else
    ``spec.module`` imported ("pkg.mod") or made ("pkg.mod:Factory" -> ``Factory(spec)``, made once)."""
    spec = get_spec(name)
    if spec.name in _PROVIDERS:
        return _PROVIDERS[spec.name]
    module_name, _, factory = spec.module.partition(":")
    module = importlib.import_module(module_name)
    if not factory:
        return module
    provider = getattr(module, factory)(spec)
    _PROVIDERS[spec.name] = provider
    return provider


def is_variant(spec: SystemSpec, variant: str) -> bool:
    """A listed variant, or one that matches the spec's ``variant_pattern``."""
    return variant in spec.variants or bool(spec.variant_pattern and re.fullmatch(spec.variant_pattern, variant))


def check_variant(name: str, variant: str | None) -> None:
    spec = get_spec(name)
    if variant is not None and not is_variant(spec, variant):
        raise UnknownNameError(f"variant of {name}", variant, list(spec.variants))


def supports(spec: SystemSpec, dataset: Dataset) -> bool:
    """Whether a system applies to a dataset: any system on a collection (trained ones natively or as
    ``SYSTEM@TRAINED_ON``); on candidate lists every system that can score a query's own candidates. A fixed
    run (family "run") applies to the dataset it ranks only."""
    if spec.kind_family == "run":
        return dataset.name in spec.datasets
    return spec.pair_scoring or not dataset.candidates


def default_build(spec: SystemSpec, dataset: Dataset) -> bool:
    """Whether the default build (``build --all``) trains/indexes this system on this dataset."""
    return spec.default_build and supports(spec, dataset) and ("*" in spec.datasets or dataset.name in spec.datasets)


def default_build_targets(dataset: Dataset) -> list[tuple[SystemSpec, str | None]]:
    """(spec, variant) pairs the default build builds, in registry order: each default-build system, followed by
    its recipes whose registration says why a default rests on them (``Recipe.default_build``)."""
    return [(spec, variant) for spec in list_systems() if default_build(spec, dataset)
            for variant in (None, *(r.variant for r in spec.recipes if r.default_build))]


def slug(text: str) -> str:
    """A file-system-safe name for a dataset or variant."""
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", text).strip("_") or "default"


def system_dir(dataset_name: str, system: str, variant: str | None = None) -> Path:
    """``var/systems/<dataset>/<system>[@variant]/``: where a system keeps its artifacts (created)."""
    leaf = system if not variant else f"{system}@{slug(variant)}"
    return artifact_dir("systems", slug(dataset_name), leaf)


def system_path(dataset_name: str, system: str, variant: str | None = None) -> Path:
    """The folder :func:`system_dir` names, without creating it (for ``is_built``: asking leaves nothing behind)."""
    from core.paths import var_dir

    leaf = system if not variant else f"{system}@{slug(variant)}"
    return var_dir() / "systems" / slug(dataset_name) / leaf


def build_command(system: str, dataset_name: str, variant: str | None = None) -> str:
    cmd = f"python -m core train --system {system} --dataset {dataset_name}"
    return cmd + (f" --variant={variant}" if variant else "")
