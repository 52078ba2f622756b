"""Portable trained models: a system trained on one dataset applied to any other (zero-shot).

Names: ``SYSTEM@TRAINED_ON`` (``densetrans@qqp-bimpm`` on ``user/cqa``); a plain ``SYSTEM`` on a
dataset means the model trained on that dataset (or, for untrained systems such as BM25 and the
pre-trained MiniLM, the system itself). The same names work in the registry, the CLI and the pages.

How a trained model is applied to a target dataset, generically through each module's ``load``:
- a reranker (FRM, CNN, cross-encoder) is loaded from its training dataset's artifacts and scores
  the target's (query, text) pairs as it is;
- a bi-encoder (DenseTrans, SDML-CNN, fine-tuned MiniLM) gives its ``encoder``; the target
  collection's vectors and a faiss index are built on demand (with progress) and cached per
  (model, target dataset) in ``var/portable/<model>/<trained_on>/<target>/``;
- on a candidate-list target every system ranks each query's own candidates (``core.data.candidates``).

Nothing is written for bad names: an unknown ``@dataset``, a model whose training dataset was
deleted, or a model not trained there each raise one clear ``StudioError``.
"""
from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.data.datasets import Dataset, list_datasets, load_dataset
from core.errors import MissingArtifactError, StudioError, UnknownNameError
from core.paths import artifact_dir, var_dir
from core.registry import (SystemName, build_command, get_spec, list_systems, needs_training, parse_name, slug,
                           supports, system_module)
from core.retrieval.base import ProgressFn, Reranker, Retriever, _no_progress

CHEAP = ("bm25", "glove-mean")  # untrained artifacts the CLI builds itself (seconds on a user collection)
FLAT_BELOW = 200_000  # exact search for target collections below this size, HNSW above


def _stub(name: str) -> Dataset:
    """A dataset known by name only (``is_built`` needs nothing else)."""
    return Dataset(name=name, description="", corpus={}, queries={}, qrels={})


def _system_folder_exists(dataset_name: str, system: str, variant: str | None) -> bool:
    root = var_dir() / "systems" / slug(dataset_name)
    leaf = system if not variant else f"{system}@{slug(variant)}"
    return (root / leaf).is_dir() and any((root / leaf).iterdir())


def trained_datasets(system: str, variant: str | None = None) -> list[str]:
    """Known datasets on which ``system`` (variant) is trained (artifacts complete)."""
    spec = get_spec(system)
    if not needs_training(spec, variant):
        return []
    try:
        module = system_module(system)
    except ModuleNotFoundError:
        return []
    leaf = system if not variant else f"{system}@{slug(variant)}"
    root = var_dir() / "systems"  # look before asking is_built: system_dir() creates the folder it names
    return [name for name in list_datasets()
            if (root / slug(name) / leaf).is_dir() and module.is_built(_stub(name), variant=variant)]


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


def _source_system(name: SystemName, **options):
    """The model as loaded on its training dataset (its own collection's artifacts)."""
    source = load_dataset(name.trained_on)
    return system_module(name.system).load(source, variant=name.variant, **options)


def _portable_retriever(name: SystemName, base, target: Dataset, progress: ProgressFn = _no_progress) -> Retriever:
    """``base``'s encoder over the target collection: vectors + index built once, then cached."""
    from core.retrieval.indexing import IndexSpec
    from core.retrieval.dense import DenseRetriever, stored_vectors_and_index

    encoder = getattr(base, "encoder", None)
    if encoder is None:
        raise StudioError(f"{name.system} cannot be applied to another collection (it has no encoder)")
    metric = getattr(getattr(base, "spec", None), "metric", "ip")
    preset = "flat" if len(target.corpus) < FLAT_BELOW else "hnsw"
    folder = portable_folder(name, target)
    args = (folder, encoder, target.corpus, lambda n, d: IndexSpec.from_preset(preset, n, d, metric=metric), preset,
            f"the vectors of {target.name} for {name}", prepare_command(name, target.name))
    try:
        vectors, index, spec, _ = stored_vectors_and_index(*args, progress=progress, normalize=metric != "l2")
    except MissingArtifactError:  # stale or corrupt cache (the collection changed): rebuild it
        vectors, index, spec, _ = stored_vectors_and_index(*args, progress=progress, normalize=metric != "l2",
                                                           fresh=True)
    (folder / "model.json").write_text(json.dumps({"system": str(name), "target": target.name,
                                                   "encoder": encoder.encoder_id, "count": len(vectors)}),
                                       encoding="utf-8")
    cls = type(base) if isinstance(base, DenseRetriever) else DenseRetriever
    return cls(str(name), encoder, list(target.corpus), index, spec, vectors, list(target.corpus.values()))


def _untrained_on_candidates(name: SystemName, target: Dataset, progress: ProgressFn, **options) -> Reranker:
    from core.data.candidates import BM25PairScorer, EncoderPairScorer, pair_scorer

    if name.system == "bm25":
        return BM25PairScorer(target.corpus)
    module = system_module(name.system)
    load_encoder = getattr(module, "load_encoder", None)
    if load_encoder is not None:  # pre-trained encoders need no index over candidate lists
        return EncoderPairScorer(load_encoder(target, name.variant), target.corpus, str(name), "ip", progress)
    return pair_scorer(module.load(target, variant=name.variant, **options), target, str(name), progress)


def load_named(name: str, target: Dataset, variant: str | None = None, progress: ProgressFn = _no_progress,
               **options):
    """Load ``name`` (``SYSTEM[@VARIANT][@TRAINED_ON]``) for ``target`` (see module docstring).

    On a candidate-list dataset the result is always a ``Reranker`` of each query's own candidates.
    """
    from core.data.candidates import pair_scorer

    parsed = parse_name(name, variant)
    spec = get_spec(parsed.system)
    if not supports(spec, target):
        raise StudioError(f"{parsed.system} searches a whole collection (a tree over it); {target.name} is "
                          "candidate lists, where each question ranks its own candidates")
    if parsed.trained_on == target.name:
        parsed = SystemName(parsed.system, parsed.variant)
    if parsed.trained_on is None:
        if target.candidates and not needs_training(spec, parsed.variant):
            return _untrained_on_candidates(parsed, target, progress, **options)
        system = system_module(parsed.system).load(target, variant=parsed.variant, **options)
        return pair_scorer(system, target, system.name, progress) if target.candidates else system
    check_source(parsed)
    base = _source_system(parsed, **options)
    if isinstance(base, Reranker):
        base.name = str(parsed)
        return base
    if target.candidates:
        return pair_scorer(base, target, str(parsed), progress)
    return _portable_retriever(parsed, base, target, progress)


def prepare(name: str, target: Dataset, progress: ProgressFn = _no_progress) -> dict:
    """Build (or reuse) what ``name`` needs on ``target``: the portable vectors and index, with progress."""
    import time

    start = time.perf_counter()
    system = load_named(name, target, progress=progress)
    progress(1.0, f"{name} ready on {target.name}")
    return {"system": system.name, "target": target.name, "seconds": time.perf_counter() - start,
            "texts": len(target.corpus)}


def ensure_cheap(name: str, dataset: Dataset, notice: Callable[[str], None] | None = None):
    """Load ``name``; a missing cheap artifact (BM25: seconds) is built first with a one-line notice.

    An expensive artifact still raises ``MissingArtifactError`` naming its build command.
    """
    parsed = parse_name(name)
    in_memory = dataset.candidates and parsed.system == "bm25"  # BM25PairScorer indexes the candidates itself
    if parsed.system in CHEAP and parsed.trained_on is None and not in_memory:
        module = system_module(parsed.system)
        if not module.is_built(dataset, variant=parsed.variant):
            if notice is not None:
                notice(f"note: building the {parsed.system} index for {dataset.name} first "
                       f"({len(dataset.corpus):,} texts, a few seconds)")
            module.build(dataset, variant=parsed.variant)
    return load_named(name, dataset)


def applicable_systems(dataset: Dataset, kind: str | None = None) -> list[str]:
    """Every system name that can rank ``dataset`` now: untrained systems that are built (BM25 always,
    it builds in seconds; pre-trained encoders always on candidate lists), and every trained model
    as ``SYSTEM`` (trained here) or ``SYSTEM@TRAINED_ON`` (zero-shot)."""
    out = []
    for spec in list_systems(kind):
        if not supports(spec, dataset):
            continue
        try:
            module = system_module(spec.name)
        except ModuleNotFoundError:
            continue
        if not needs_training(spec):
            if (spec.name in CHEAP or module.is_built(dataset)
                    or (dataset.candidates and hasattr(module, "load_encoder"))):
                out.append(spec.name)
            continue
        for source in trained_datasets(spec.name):
            out.append(spec.name if source == dataset.name else f"{spec.name}@{source}")
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
    its build command), then the models trained elsewhere as ``SYSTEM@TRAINED_ON``."""
    names = [s.name for s in list_systems(kind) if supports(s, dataset)]
    return names + [n for n in applicable_systems(dataset, kind) if "@" in n and n not in names]
