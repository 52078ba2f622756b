"""Systems by name: every registration (built-in, user, plugin), its provider, and the names people read.

A system is one registration: its :class:`SystemSpec` (``core.system_spec``) and its module, which exports it as
``REGISTRATION`` and provides ``build`` / ``is_built`` / ``load`` [/ ``config_dict``] (:class:`SystemProvider`).
No list of systems is kept here: the built-in registrations are the modules of ``core.systems`` (read with
``pkgutil``, listed in their ``order``); a researcher's model folders and run files (``core.user_systems_file``) and
``qrs.systems`` plugins (``core.plugins``) are registered on the first lookup, after the built-in ones. Every
provider passes the same checks when it is registered or first loaded (``check_provider``): a module that is not a
system is refused in one line naming it and what it lacks.

:func:`display_name` and :func:`deviation_note` are what every page and the CLI show (a :class:`Recipe` variant
has its own label and note).
"""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from core.data.datasets import Dataset, list_datasets
from core.errors import StudioError, UnknownNameError
from core.paths import artifact_dir, var_dir
from core.system_spec import (BUILD_THREADS, FAMILIES, LayerSource, Recipe, RegistrationError,  # noqa: F401
                              SystemProvider, SystemSpec, check_provider, check_registration)

_BUILT_IN: dict[str, SystemSpec] = {}  # the built-in registrations by name, in their order (read on first use)
_REGISTERED: dict[str, SystemSpec] = {}  # user and plugin systems, in registration order
_PROVIDERS: dict[str, object] = {}  # name -> provider given to register() or made from ``module`` on first use
_UNLOADED: dict[str, str] = {}  # a plugin's entry-point name -> why it did not load (set by discovery)


@dataclass
class Discovery:
    """What the last discovery of user and plugin systems read, and what it could not register (one line each)."""

    done: bool = False
    running: bool = False
    problems: list[str] = field(default_factory=list)
    file_state: tuple | None = None  # the user systems file's (size, mtime) it read
    plugin_state: tuple = ()  # the ``qrs.systems`` entry points it read


_DISCOVERY = Discovery()


def _built_in() -> dict[str, SystemSpec]:
    """The built-in systems (``core.systems``' registrations), read once."""
    if not _BUILT_IN:
        from core.systems import builtin_registrations

        _BUILT_IN.update((spec.name, spec) for spec in builtin_registrations())
    return _BUILT_IN


def note_unloaded(name: str, why: str) -> None:
    """A plugin that did not load: asking for ``name`` then says ``why``, not "unknown"."""
    _UNLOADED[name] = why


def _all() -> dict[str, SystemSpec]:
    """Every system by name: the built-in ones, then registered ones (discovered on first use)."""
    _discover()
    return {**_built_in(), **_REGISTERED}


def _discover() -> None:
    """Register the user systems file's systems and the ``qrs.systems`` plugins, once (again after
    :func:`refresh`). Re-entrant calls (discovery asking the registry) see built-ins only."""
    if _DISCOVERY.done or _DISCOVERY.running:
        return
    from core.plugins import discover_plugins
    from core.user_systems_file import discover_user_systems

    _DISCOVERY.running = True
    problems: list[str] = []
    try:
        file_state = discover_user_systems(register, problems)
        plugin_state = discover_plugins(register, problems, _UNLOADED)
    finally:
        _DISCOVERY.running = False
        _DISCOVERY.done = True
    _DISCOVERY.problems, _DISCOVERY.file_state, _DISCOVERY.plugin_state = problems, file_state, plugin_state


def discovery() -> Discovery:
    """What discovery read and could not register (it runs first if it has not yet)."""
    _discover()
    return _DISCOVERY


def refresh() -> None:
    """Forget discovered systems and discover again on next use (after ``core systems add/remove``)."""
    for name in [n for n, s in _REGISTERED.items() if s.origin != "built-in"]:
        unregister(name)
    _UNLOADED.clear()
    _DISCOVERY.done = False


def register(spec: SystemSpec, provider: object | None = None, replace: bool = False) -> SystemSpec:
    """Add a system: ``spec`` and, optionally, its provider (a module or object with build/is_built/load
    [/config_dict], checked here); without one, :func:`system_module` makes it from ``spec.module`` and checks it
    then. A spec that is not a ``SystemSpec`` or a provider that is not one is a ``RegistrationError``; a built-in
    name, or a registered one without ``replace``, raises ``ValueError``."""
    if not isinstance(spec, SystemSpec):
        raise RegistrationError(f"{spec!r}: a {type(spec).__name__}, not a core.registry.SystemSpec")
    if spec.name in _built_in():
        raise ValueError(f"{spec.name} is a built-in system; choose another name")
    if not replace and spec.name in _REGISTERED:
        raise ValueError(f"{spec.name} is registered already ({_REGISTERED[spec.name].origin})")
    if "@" in spec.name or not spec.name.strip():
        raise ValueError(f"a system name is not empty and has no '@': {spec.name!r}")
    if spec.kind not in ("retriever", "reranker"):
        raise ValueError(f"{spec.name}: kind is 'retriever' or 'reranker', not {spec.kind!r}")
    if provider is not None:
        check_provider(spec.source or spec.module or spec.name, provider)
    _REGISTERED[spec.name] = spec
    _PROVIDERS.pop(spec.name, None)
    if provider is not None:
        _PROVIDERS[spec.name] = provider
    return spec


def unregister(name: str) -> None:
    """Remove a registered (user or plugin) system; built-in ones stay (``ValueError``)."""
    if name in _built_in():
        raise ValueError(f"{name} is a built-in system")
    _REGISTERED.pop(name, None)
    _PROVIDERS.pop(name, None)


def default_first_stage() -> str:
    """The first stage rerankers use when none is asked (the build's stored runs use it too)."""
    return next(s.name for s in _built_in().values() if s.default_first_stage)


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
    spec = _all().get(name.split("@", 1)[0])
    return (spec.reference or None) if spec is not None else None


QUORA_NOTE = "all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates"


def contamination_note(name: str, dataset_name: str) -> str | None:
    """The Quora-contamination note for a MiniLM-derived system (a fusion with a MiniLM part too) on a
    Quora dataset, else None: its QQP numbers are not zero-shot."""
    system, _, variant = name.partition("@")
    spec = _all().get(system)
    if spec is None or "qqp" not in dataset_name.lower():
        return None
    derived = spec.minilm_derived
    if spec.variant_pattern:  # a fusion: any MiniLM-derived part (the default variant is the first listed)
        parts = (variant or spec.variants[0]).split(":")[0].split("+")
        systems = _all()
        derived = any(systems[p].minilm_derived for p in parts if p in systems)
    return f"{name}: {QUORA_NOTE} (its QQP numbers are not zero-shot)" if derived else None


def _loose_parts(name: str) -> tuple[SystemSpec | None, str | None, str | None]:
    """(spec, variant, trained_on) of ``SYSTEM[@VARIANT][@TRAINED_ON]`` without raising (display helpers)."""
    system, *parts = name.strip().split("@")
    spec = _all().get(system)
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
    return [s for s in _all().values() if kind is None or s.kind == kind]


def get_spec(name: str) -> SystemSpec:
    """The spec of a system; ``SYSTEM@TRAINED_ON`` / ``SYSTEM@VARIANT`` names give SYSTEM's spec."""
    base = name.split("@", 1)[0]
    systems = _all()
    if base not in systems:
        if base in _UNLOADED:
            raise StudioError(f"system {base} is a plugin that did not load: {_UNLOADED[base]}")
        raise UnknownNameError("system", base, list(systems))
    return systems[base]


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
    names the dataset the model was trained on (dataset names never contain ``@``). A composite system's variant may
    name systems with ``@`` (``fusion@run+cross-encoder@qqp-bimpm:rrf``); ``@DATASET`` after it: chosen on DATASET."""
    system, *parts = name.strip().split("@")
    spec = get_spec(system)
    whole = re.fullmatch(f"({spec.variant_pattern})(?:@([^@]+))?", name.strip()[len(system) + 1:]) if (
        spec.composite and parts and variant is None) else None
    if whole:  # the variant matched the spec's own pattern
        return SystemName(system, whole.group(1), whole.group(2))
    if any(not part for part in parts):
        raise UnknownNameError("system name", name, ["SYSTEM", "SYSTEM@VARIANT", "SYSTEM@TRAINED_ON"])
    if variant is None:
        variant = next((part for part in parts if is_variant(spec, part)), None)
    others = [part for part in parts if part != variant]
    check_variant(system, variant)
    if len(others) > 1 or (others and not needs_training(spec, variant) and not spec.composite):  # untrained: a variant
        raise UnknownNameError(f"variant of {system}", others[-1], list(spec.variants))
    return SystemName(system, variant, others[0] if others else None)


def needs_training(spec: SystemSpec, variant: str | None = None) -> bool:
    """Whether a system (variant) is a trained model (portable as ``SYSTEM@TRAINED_ON``)."""
    return "*" not in spec.datasets or (variant is not None and variant in spec.trained_variants)


def system_module(name: str) -> ModuleType | Any:
    """The provider of a system's build/is_built/load[/config_dict]: the one given to :func:`register`, else
    ``spec.module`` imported ("pkg.mod", which exports the system's ``REGISTRATION``) or made ("pkg.mod:Factory" ->
    ``Factory(spec)``), checked (``check_provider``) and kept. A module that is not the system's provider is a
    ``RegistrationError`` naming it and what it lacks."""
    spec = get_spec(name)
    if spec.name in _PROVIDERS:
        return _PROVIDERS[spec.name]
    module_name, _, factory = spec.module.partition(":")
    module = importlib.import_module(module_name)
    if factory:
        provider = check_provider(spec.module, getattr(module, factory)(spec))
    else:
        provider = check_provider(module_name, module)
        exported = check_registration(module_name, getattr(module, "REGISTRATION", None))
        if exported.name != spec.name:
            raise RegistrationError(f"{module_name}: exports the REGISTRATION of {exported.name}, not {spec.name}")
    _PROVIDERS[spec.name] = provider
    return provider


def is_variant(spec: SystemSpec, variant: str) -> bool:
    """A listed variant, or one that matches the spec's ``variant_pattern``."""
    return spec.is_variant(variant)


def check_variant(name: str, variant: str | None) -> None:
    """``UnknownNameError`` unless ``variant`` is None or a variant of system ``name``."""
    get_spec(name).check_variant(variant)


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
    leaf = system if not variant else f"{system}@{slug(variant)}"
    return var_dir() / "systems" / slug(dataset_name) / leaf


def learns_from_labels(spec: SystemSpec, variant: str | None = None) -> bool:
    """Whether building ``spec`` (variant) reads labels: a trained model (a fixed run reads none), or a composite
    choosing on dev (its provider's ``chooses_on_dev(variant)``; a fusion left untuned chooses nothing)."""
    return (needs_training(spec, variant) and spec.kind_family != "run") or (spec.composite and bool(
        getattr(system_module(spec.name), "chooses_on_dev", lambda v: True)(variant)))


def trained_datasets(system: str, variant: str | None = None) -> list[str]:
    """Known datasets on which ``system`` (variant) is trained (artifacts complete)."""
    if not needs_training(get_spec(system), variant):
        return []
    leaf = system if not variant else f"{system}@{slug(variant)}"
    root = var_dir() / "systems"  # look before asking is_built: system_dir() creates the folder it names
    found = [name for name in list_datasets() if (root / slug(name) / leaf).is_dir()]
    if not found:  # nothing to ask: the system's module (torch and its model code) is not even imported
        return []
    try:
        module = system_module(system)
    except ModuleNotFoundError:
        return []
    return [name for name in found
            if module.is_built(Dataset(name=name, description="", corpus={}, queries={}, qrels={}), variant=variant)]


def build_command(system: str, dataset_name: str, variant: str | None = None) -> str:
    """How to get ``system`` (variant) on ``dataset_name``, honest choices first: the models trained on other datasets
    that apply (``SYSTEM@DATASET``), then training on this dataset's train split, never a command that trains on a
    dataset marked test (``core.data.final_test``); ``build`` for a system with nothing to learn."""
    from core.data.final_test import is_marked_test

    spec = get_spec(system)
    named = system + (f"@{variant}" if variant else "")
    if not learns_from_labels(spec, variant):
        return f"python -m core build --systems {named} --dataset {dataset_name}"
    train = f"python -m core train --system {system} --dataset {{}}" + (f" --variant={variant}" if variant else "")
    elsewhere = [f"{named}@{d}" for d in trained_datasets(system, variant) if d != dataset_name]
    use = f"Use a model trained elsewhere: {', '.join(elsewhere)}; or t" if elsewhere else "T"
    if is_marked_test(dataset_name):
        return (f"{use}rain on another dataset ({train.format('DATASET')}) and use {named}@DATASET "
                f"({dataset_name} is marked test: nothing trains or tunes on its labels)")
    return f"{use}rain on its own train split: {train.format(dataset_name)}" if elsewhere else train.format(dataset_name)
