"""The one loader: a system name and a dataset to a loaded system.

Every page, the CLI, the stored runs, pooling and bench/ load systems through :func:`load`:

- ``SYSTEM`` / ``SYSTEM@VARIANT``: the registered system (``core.registry``) built on the dataset; a
  missing cheap index (BM25, glove-mean: seconds) is built first with a one-line ``notice``;
- ``SYSTEM[@VARIANT]@TRAINED_ON``: a model trained on another dataset applied zero-shot
  (``core.transfer`` keeps where it was trained and the cached target vectors);
- on a candidate-list dataset every system comes back as a ``Reranker`` of each query's own candidates.

:func:`serving_defaults` says how a system serves when nothing is asked (index, tree beam and K, a
reranker's first stage and depth): the numbers in BENCHMARKS.md are measured with exactly these, and
Compare's knobs start from them.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from core.serving.candidates import EncoderPairScorer, pair_scorer
from core.data.datasets import Dataset, load_dataset
from core.errors import BuildPendingError, MissingArtifactError, StudioError
from core.transfer import FLAT_BELOW, check_source, portable_folder, prepare_command
from core.registry import (SystemName, default_first_stage, get_spec, needs_training, parse_name, rerank_depth,
                           supports, system_module)
from core.retrieval.base import ProgressFn, Reranker, Retriever, no_progress
from core.settings import settings

BACKENDS = ("faiss", "milvus")  # where a first stage's index is served: in process, or a Milvus server/cluster
FIRST_STAGE = default_first_stage()  # a reranker's default first stage (the build's stored runs use it too)
RERANK_DEPTH = rerank_depth()  # and its default depth (FRM paper: top 20 of BM25)


@dataclass(frozen=True)
class ServingDefaults:
    """How a system serves when a caller asks for nothing else."""

    index: str | None = None  # faiss preset of a dense retriever ("auto" = exact below 1M vectors)
    beam: int | None = None  # tree-bert: beam width (saved with the tree)
    tree_k: int | None = None  # tree-bert: branching factor K (saved with the tree)
    first_stage: str | None = None  # reranker: its first stage
    depth: int | None = None  # reranker: how many first-stage hits it rescores


def serving_defaults(name: str, dataset: Dataset | None = None) -> ServingDefaults:
    """The serving defaults of ``name`` (the tree's saved beam and K when ``dataset`` has one built)."""
    spec = get_spec(name)
    if spec.kind == "reranker":
        return ServingDefaults(first_stage=FIRST_STAGE, depth=spec.rerank_depth)
    module = system_module(spec.name)
    own = getattr(module, "serving_defaults", None)  # a system's own defaults (the tree: its saved beam and K)
    if own is not None:
        return ServingDefaults(**own(dataset))
    return ServingDefaults(index=getattr(module, "DEFAULT_INDEX", None))


def load(name: str, dataset: Dataset, variant: str | None = None, progress: ProgressFn = no_progress,
         notice: Callable[[str], None] | None = None, **options) -> Retriever | Reranker:
    """Load ``name`` (``SYSTEM[@VARIANT][@TRAINED_ON]``) for ``dataset`` (see the module docstring).

    ``options`` go to the system's own ``load`` (``index``, ``search_params``, ``beam``, ``K``...);
    a missing artifact raises ``MissingArtifactError`` naming the command that builds it.
    ``backend="milvus"`` (or ``QRS_BACKEND=milvus``) serves a bi-encoder's vectors or BM25's weights from the
    Milvus at ``QRS_MILVUS_URI`` (``milvus_index``: ``flat`` exact, or ``hnsw``), same ranking code after.
    """
    backend = str(options.pop("backend", None) or settings().backend or "faiss")
    milvus_index = str(options.pop("milvus_index", "flat"))
    if backend not in BACKENDS:
        from core.errors import UnknownNameError

        raise UnknownNameError("backend", backend, list(BACKENDS))
    system = _load(name, dataset, variant, progress, notice, **options)
    if backend == "milvus" and not dataset.candidates:
        return _on_milvus(system, dataset, milvus_index, progress)
    return system


def _on_milvus(system, dataset: Dataset, index: str, progress: ProgressFn) -> Retriever:
    """The loaded first stage served from Milvus (core.retrieval.milvus): its own vectors or BM25 weights,
    in a collection named by (system, dataset, fingerprint), written once and swapped in atomically."""
    from core.retrieval.milvus import milvus_retriever

    if not isinstance(system, Retriever):
        raise StudioError(f"{system.name} is a reranker: only first stages (bi-encoders, BM25) are served from Milvus")
    return milvus_retriever(system, dataset.name, index=index, progress=progress)


def _load(name: str, dataset: Dataset, variant: str | None, progress: ProgressFn,
          notice: Callable[[str], None] | None, **options) -> Retriever | Reranker:
    parsed = parse_name(name, variant)
    spec = get_spec(parsed.system)
    if not supports(spec, dataset):
        raise StudioError(f"{parsed.system} searches a whole collection (a tree over it); {dataset.name} is "
                          "candidate lists, where each question ranks its own candidates")
    if parsed.trained_on == dataset.name:
        parsed = SystemName(parsed.system, parsed.variant)
    if spec.composite and parsed.trained_on is not None:  # settings chosen on another dataset; parts rank this one
        options.setdefault("loader", lambda part, v: load(part, dataset, v, progress, notice))
        system = system_module(parsed.system).load(dataset, variant=parsed.variant, tuned_on=parsed.trained_on, **options)
        system.name = str(parsed)
        return system
    if parsed.trained_on is None:
        _build_cheap(parsed, dataset, notice, options, progress)
        if spec.composite:  # a fusion's parts come through this loader too
            options.setdefault("loader", lambda part, v: load(part, dataset, v, progress, notice))
        if dataset.candidates and not needs_training(spec, parsed.variant):
            return _untrained_on_candidates(parsed, dataset, progress, **options)
        module = system_module(parsed.system)
        try:
            system = module.load(dataset, variant=parsed.variant, **options)
        except MissingArtifactError as exc:
            from core.build_status import pending_note

            note = pending_note(dataset.name, parsed.system, parsed.variant)  # the background build has it
            if note is None or isinstance(exc, BuildPendingError):
                raise
            raise BuildPendingError(exc.what, note) from None
        _interpolate(system, dataset.name, parsed, dataset)
        return pair_scorer(system, dataset, system.name, progress) if dataset.candidates else system
    check_source(parsed)
    base = system_module(parsed.system).load(load_dataset(parsed.trained_on), variant=parsed.variant, **options)
    if isinstance(base, Reranker):
        base.name = str(parsed)
        _interpolate(base, parsed.trained_on, parsed, dataset)
        return base
    if dataset.candidates:
        return pair_scorer(base, dataset, str(parsed), progress)
    return _portable_retriever(parsed, base, dataset, progress)


def _interpolate(system, trained_on: str, name: SystemName, dataset: Dataset | None = None) -> None:
    """A trained reranker gets the interpolation weight chosen on dev at build time, if any, and its partner
    through this loader (``core.rerank.interpolation``; stored in its artifacts folder)."""
    if isinstance(system, Reranker) and needs_training(get_spec(name.system), name.variant):
        from core.registry import system_path
        from core.rerank.interpolation import apply

        apply(system, system_path(trained_on, name.system, None if name.variant in (None, "full") else name.variant),
              partner_loader=None if dataset is None else (lambda partner: load(partner, dataset)))


def _build_cheap(name: SystemName, dataset: Dataset, notice: Callable[[str], None] | None, options: dict,
                 progress: ProgressFn = no_progress) -> None:
    """Build a missing untrained system on first use (``SystemSpec.cheap``: BM25's or glove-mean's index in seconds,
    minilm-pairs' zero-shot encoding of the collection) with a one-line notice and ``progress``."""
    spec = get_spec(name.system)
    if not spec.cheap or options:
        return
    module = system_module(name.system)
    if dataset.candidates and hasattr(module, "candidate_scorer"):  # it indexes the candidates itself
        return
    if module.is_built(dataset, variant=name.variant):
        return
    from core.build_status import building_elsewhere, system_lock

    what = "index" if spec.kind == "retriever" else "zero-shot encoding (no training)"
    elsewhere = building_elsewhere(dataset.name, name.system, name.variant)  # the CLI or the build has it
    if elsewhere is not None:
        raise BuildPendingError(f"the {name.system} {what}", elsewhere)
    with system_lock(dataset.name, name.system, name.variant) as acquired:  # the build's own lock: one encode
        if not acquired:
            raise BuildPendingError(f"the {name.system} {what}", building_elsewhere(dataset.name, name.system,
                                                                                  name.variant) or
                                    f"{name.system}: being built by another process; used from there when done.")
        if module.is_built(dataset, variant=name.variant):  # built while this process waited for the lock
            return
        if notice is not None:
            notice(f"note: building the {name.system} {what} for {dataset.name} first ({len(dataset.corpus):,} texts)")
        module.build(dataset, variant=name.variant, progress=progress)


def _untrained_on_candidates(name: SystemName, target: Dataset, progress: ProgressFn, **options) -> Reranker:
    module = system_module(name.system)
    candidate_scorer = getattr(module, "candidate_scorer", None)
    if candidate_scorer is not None:  # scores the candidate texts itself (BM25: one index over all of them)
        return candidate_scorer(target.corpus, name.variant)
    load_encoder = getattr(module, "load_encoder", None)
    if load_encoder is not None:  # pre-trained encoders need no index over candidate lists
        return EncoderPairScorer(load_encoder(target, name.variant), target.corpus, str(name), "ip", progress)
    return pair_scorer(module.load(target, variant=name.variant, **options), target, str(name), progress)


def _portable_retriever(name: SystemName, base, target: Dataset, progress: ProgressFn = no_progress) -> Retriever:
    """``base``'s encoder over the target collection: vectors + index built once, then cached."""
    from core.retrieval.dense import DenseRetriever, stored_vectors_and_index
    from core.retrieval.indexing import IndexSpec

    encoder = getattr(base, "encoder", None)
    if encoder is None:
        raise StudioError(f"{name.system} cannot be applied to another collection (it has no encoder)")
    metric = getattr(getattr(base, "spec", None), "metric", "ip")
    preset = "flat" if len(target.corpus) < FLAT_BELOW else "hnsw"
    folder = portable_folder(name, target)
    args = (folder, encoder, target.corpus, lambda n, d: IndexSpec.from_preset(preset, n, d, metric=metric), preset,
            f"the vectors of {target.name} for {name}", prepare_command(name, target.name))
    from core.errors import MissingArtifactError

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


def prepare(name: str, target: Dataset, progress: ProgressFn = no_progress) -> dict:
    """Build (or reuse) what ``name`` needs on ``target``: the portable vectors and index, with progress."""
    start = time.perf_counter()
    system = load(name, target, progress=progress)
    progress(1.0, f"{name} ready on {target.name}")
    return {"system": system.name, "target": target.name, "seconds": time.perf_counter() - start,
            "texts": len(target.corpus)}


def part_loader(dataset: Dataset,
                progress: ProgressFn = no_progress) -> Callable[[str, str | None], Retriever | Reranker]:
    """``(system, variant) -> system`` through this loader: how a composite system (fusion) gets its parts."""
    return lambda name, variant: load(name, dataset, variant=variant, progress=progress)
