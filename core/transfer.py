"""Portable trained models: a system trained on one dataset applied to any other (zero-shot).

Names: ``SYSTEM@TRAINED_ON`` (``densetrans@qqp-bimpm`` on ``user/cqa``); a plain ``SYSTEM`` on a
dataset means the model trained on that dataset (or, for untrained systems such as BM25 and the
pre-trained MiniLM, the system itself). The same names work in the registry, the CLI and the pages.

How a trained model is applied to a target dataset (the one loader, ``core.serving.loader``, does it):
- a reranker (FRM, CNN, cross-encoder) is loaded from its training dataset's artifacts and scores
  the target's (query, text) pairs as it is;
- a bi-encoder (DenseTrans, SDML-CNN, fine-tuned MiniLM) gives its ``encoder``; the target
  collection's vectors and a faiss index are built on demand (with progress) and cached per
  (model, target dataset) in ``var/portable/<model>/<trained_on>/<target>/``;
- on a candidate-list target every system ranks each query's own candidates (``core.serving.candidates``).

Nothing is written for bad names: an unknown ``@dataset``, a model whose training dataset was
deleted, or a model not trained there each raise one clear ``StudioError``.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from core.data.datasets import Dataset, list_datasets
from core.errors import MissingArtifactError, StudioError, UnknownNameError
from core.paths import artifact_dir, var_dir
from core.registry import (SystemName, build_command, get_spec, list_systems, needs_training, parse_name, slug,
                           supports, system_module, trained_datasets)

FLAT_BELOW = 200_000  # exact search for target collections below this size, HNSW above


def _stub(name: str) -> Dataset:
    """A dataset known by name only (``is_built`` needs nothing else)."""
    return Dataset(name=name, description="", corpus={}, queries={}, qrels={})


def _system_folder_exists(dataset_name: str, system: str, variant: str | None) -> bool:
    root = var_dir() / "systems" / slug(dataset_name)
    leaf = system if not variant else f"{system}@{slug(variant)}"
    return (root / leaf).is_dir() and any((root / leaf).iterdir())


def orphaned_models() -> list[tuple[str, str]]:
    """(folder of var/systems, system leaf) of trained models whose training dataset no longer exists."""
    known = {slug(n) for n in list_datasets()}
    root = var_dir() / "systems"
    out = []
    for folder in sorted(root.glob("*")) if root.is_dir() else []:
        if folder.is_dir() and folder.name not in known:
            out += [(folder.name, leaf.name) for leaf in sorted(folder.iterdir()) if leaf.is_dir()]
    return out


def check_source(name: SystemName) -> None:
    """Raise one clear ``StudioError`` unless ``name.trained_on`` holds a trained ``name.system``."""
    spec = get_spec(name.system)
    if not needs_training(spec, name.variant):
        raise StudioError(f"{name.system} is not a trained model, so it has no '@{name.trained_on}': "
                          f"use {name.system} on any dataset")
    source = name.trained_on
    if source not in list_datasets() and ":" not in source:
        if _system_folder_exists(source, name.system, name.variant):
            raise StudioError(f"{name}: the training dataset {source} was deleted; its model is still in "
                              f"{var_dir() / 'systems' / slug(source)} (re-import {source} to use it, or delete that folder)")
        raise UnknownNameError("training dataset", source, list(list_datasets()))
    if source not in trained_datasets(name.system, name.variant) and (
            ":" not in source or not system_module(name.system).is_built(_stub(source), variant=name.variant)):
        raise MissingArtifactError(f"{name.system} trained on {source}",
                                   build_command(name.system, source, name.variant))


def portable_folder(name: SystemName, target: Dataset) -> Path:
    """``var/portable/<system[@variant]>/<trained_on>/<target>/``: the cached target vectors and index."""
    leaf = name.system if not name.variant else f"{name.system}@{slug(name.variant)}"
    return artifact_dir("portable", leaf, slug(name.trained_on or ""), slug(target.name))


def prepare_command(name: SystemName | str, target: str) -> str:
    return f"python -m core train --system {name} --dataset {target}"


def applicable_systems(dataset: Dataset, kind: str | None = None) -> list[str]:
    """Every system name that can rank ``dataset`` now: untrained systems that are built (BM25 always,
    it builds in seconds; pre-trained encoders always on candidate lists), and every trained model
    as ``SYSTEM`` (trained here) or ``SYSTEM@TRAINED_ON`` (zero-shot); a built recipe variant
    (``registry.Recipe``) as ``SYSTEM@VARIANT`` beside its default."""
    out = []
    for spec in list_systems(kind):
        if not supports(spec, dataset):
            continue
        try:
            module = system_module(spec.name)
        except ModuleNotFoundError:
            continue
        if not needs_training(spec):
            if (spec.cheap or module.is_built(dataset)
                    or (dataset.candidates and hasattr(module, "load_encoder"))):
                out.append(spec.name)
            continue
        for source in trained_datasets(spec.name):
            out.append(spec.name if source == dataset.name else f"{spec.name}@{source}")
        for recipe in spec.recipes:  # a paper's recipe built beside the default: SYSTEM@VARIANT[@TRAINED_ON]
            named = f"{spec.name}@{recipe.variant}"
            out += [named if source == dataset.name else f"{named}@{source}"
                    for source in trained_datasets(spec.name, recipe.variant)]
    return out


@dataclass
class PortableModel:
    """One trained model as the Models page lists it."""

    name: str  # SYSTEM[@VARIANT]@TRAINED_ON
    system: str
    variant: str | None
    trained_on: str
    dataset_exists: bool
    applied_to: list[str] = field(default_factory=list)  # targets with cached vectors + index
    cache_bytes: int = 0


def listing() -> list[PortableModel]:
    """Every trained model (per system, variant and training dataset) and where it has been applied."""
    out = []
    portable_root = var_dir() / "portable"
    for spec in list_systems():
        for variant in (None, *spec.variants):
            if not needs_training(spec, variant):
                continue
            leaf = spec.name if not variant else f"{spec.name}@{slug(variant)}"
            for source in trained_datasets(spec.name, variant):
                name = str(SystemName(spec.name, variant, source))
                folder = portable_root / leaf / slug(source)
                targets, size = [], 0
                for t in sorted(folder.glob("*/model.json")) if folder.is_dir() else []:
                    targets.append(json.loads(t.read_text(encoding="utf-8")).get("target", t.parent.name))
                    size += sum(p.stat().st_size for p in t.parent.rglob("*") if p.is_file())
                out.append(PortableModel(name, spec.name, variant, source, True, targets, size))
    for folder, leaf in orphaned_models():
        system, _, variant = leaf.partition("@")
        out.append(PortableModel(f"{leaf}@{folder}", system, variant or None, folder, False))
    return out


def forget_target(name: str, target_name: str) -> bool:
    """Delete the cached vectors/index of ``name`` on ``target_name`` (rebuilt on next use)."""
    parsed = parse_name(name)
    folder = portable_folder(parsed, _stub(target_name))
    existed = folder.is_dir() and any(folder.iterdir())
    shutil.rmtree(folder, ignore_errors=True)
    return existed


def system_choices(dataset: Dataset, kind: str | None = None) -> list[str]:
    """What a page offers on ``dataset``: every system that applies (built or not: a missing one shows
    its build command) with its recipe variants (``SYSTEM@VARIANT``, e.g. ``densetrans@paper-objective``)
    right after it, then the models trained elsewhere as ``SYSTEM@TRAINED_ON``."""
    names = [n for s in list_systems(kind) if supports(s, dataset)
             for n in (s.name, *(f"{s.name}@{r.variant}" for r in s.recipes))]
    return names + [n for n in applicable_systems(dataset, kind) if "@" in n and n not in names]
