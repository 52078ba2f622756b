"""What a system is: its registration (:class:`SystemSpec`) and what its module provides (:class:`SystemProvider`).

A system module provides three functions, so the CLI, the build and the app treat every system the same way:

- ``build(dataset, profile="quick", progress=..., variant=None) -> dict`` trains/indexes and saves
  the artifacts (config saved beside them); returns measured metrics (dev scores, seconds).
- ``is_built(dataset, variant=None) -> bool``.
- ``load(dataset, variant=None, **options) -> Retriever | Reranker``; raises ``MissingArtifactError``
  naming the build command when an artifact is missing or corrupt.

Optionally ``config_dict(variant=None) -> dict`` (shown on the Models page, paper defaults marked). It exports
its registration as ``REGISTRATION``. :func:`check_provider` and :func:`check_registration` are the checks every
system passes when it is registered or loaded (built-in, user or plugin alike): a broken one is refused in one
line naming the module and what it lacks.

Names that say what runs: a system whose default build follows the project's own recipe says so in its display
name (``recipe_label``) and its ``deviation``; a paper's recipe that the project can build beside the default is a
:class:`Recipe` variant (``densetrans@paper-objective``, ``frm@kw-loss``) with its own artifacts folder, display
name and deviation note.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from core.errors import StudioError, UnknownNameError


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

    Nobody outside the system's registration and its own module keeps a list of systems or branches on a
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
    order: int = 0  # where it is listed among the built-in systems (pages show them in this order; cheapest first)

    @property
    def kind_family(self) -> str:
        """``family`` or, when unset, the kind's family."""
        return self.family or ("reranker" if self.kind == "reranker" else "dense")

    def is_variant(self, variant: str) -> bool:
        """A listed variant, or one that matches ``variant_pattern``."""
        return variant in self.variants or bool(self.variant_pattern and re.fullmatch(self.variant_pattern, variant))

    def check_variant(self, variant: str | None) -> None:
        """``UnknownNameError`` listing the variants unless ``variant`` is None or one of them."""
        if variant is not None and not self.is_variant(variant):
            raise UnknownNameError(f"variant of {self.name}", variant, list(self.variants))


@runtime_checkable
class SystemProvider(Protocol):
    """What a system module (or the object a ``pkg.mod:Factory`` makes) provides; ``config_dict`` is optional."""

    def build(self, dataset: Any, profile: str = "quick", progress: Any = None, variant: str | None = None) -> dict:
        """Train/index and save the artifacts; the measured metrics."""

    def is_built(self, dataset: Any, variant: str | None = None) -> bool:
        """Whether its artifacts for ``dataset`` are there and current."""

    def load(self, dataset: Any, variant: str | None = None, **options: Any) -> Any:
        """The loaded ``Retriever`` or ``Reranker``."""


PROVIDES = tuple(name for name in vars(SystemProvider) if not name.startswith("_"))  # build, is_built, load
OPTIONAL = ("config_dict",)


class RegistrationError(StudioError, TypeError):
    """A system module (or provider) that is not a system: one line naming it and what it lacks."""


def check_registration(where: str, value: object) -> SystemSpec:
    """``value`` (a module's ``REGISTRATION``) if it is a :class:`SystemSpec`, else ``RegistrationError``."""
    if not isinstance(value, SystemSpec):
        what = "no REGISTRATION" if value is None else f"REGISTRATION is a {type(value).__name__}"
        raise RegistrationError(f"{where}: {what}, not a core.registry.SystemSpec")
    if value.kind not in ("retriever", "reranker"):
        raise RegistrationError(f"{where}: {value.name}'s kind is 'retriever' or 'reranker', not {value.kind!r}")
    return value


def check_provider(where: str, provider: object) -> object:
    """``provider`` if it provides :class:`SystemProvider` (``build``, ``is_built``, ``load`` callables; a
    ``config_dict`` callable if it has one), else ``RegistrationError`` naming ``where`` and what is missing."""
    missing = [name for name in PROVIDES if not callable(getattr(provider, name, None))]
    missing += [name for name in OPTIONAL if getattr(provider, name, None) is not None
                and not callable(getattr(provider, name))]
    if missing or not isinstance(provider, SystemProvider):
        raise RegistrationError(f"{where}: no {', '.join(missing)} (a system module provides "
                                f"{', '.join(PROVIDES)} [, {', '.join(OPTIONAL)}])")
    return provider
