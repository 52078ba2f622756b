"""A collection encoded on the executor: Ray Data ``map_batches`` over an actor pool, the model loaded once per
actor, each shard's vectors written to disk by the actor that encoded it (``encode_to_shards``: the driver gets a
manifest of files, never the vectors; ``core.retrieval.vector_shards``).

``encode_collection`` is what the embedding cache (``core.retrieval.dense.cached_embeddings``) calls for every
bi-encoder. It goes to Ray Data when the encoder can be rebuilt in a worker (its ``recipe``: a module-level
factory and its arguments), the collection is large enough for the pool to pay for Ray's start
(``RAY_MIN_TEXTS``, or always when ``QRS_RAY_ADDRESS`` names a cluster), and it is not already running inside an
executor job (a build job is itself the unit of parallel work: its encoding stays in its process) nor in a
page's script thread. Else the encoder runs here, as before. ``encode_collection`` reads the shards back into one
array a shard at a time; a caller that must not hold the collection (an index built from shards,
``core.retrieval.indexing.build_index_from_shards``) keeps the manifest.

Same vectors either way. An encoder that batches texts by token length (``token_lengths``: MiniLM's same-length
batches, no padding) is sharded by length, each shard holding whole length groups in collection order, or pieces
of a group cut at its batch boundaries (``batch_rows``) so that no shard is left with most of the work (a million
questions have length groups of 100,000 rows), and each actor runs on the encoder's own thread count: every
forward pass is the one the single process makes, so the vectors are bit-identical. Other encoders (sentence-transformers' padded batches) are cut into contiguous shards;
their vectors equal the single process's within float rounding (tests check max |Δ| ≤ 1e-5).
"""
from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.executor import cluster_cpus, executor, in_job, job_environment, worker_setup
from core.paths import artifact_dir
from core.progress import ProgressFn, no_progress
from core.retrieval.vector_shards import ShardManifest, VectorShard, l2_normalize, write_shard
from core.settings import settings

__all__ = ["EncoderRecipe", "RAY_MIN_TEXTS", "encode_collection", "encode_to_shards", "shards"]

RAY_MIN_TEXTS = 20_000  # below this an actor pool costs more (Ray's start, a model per actor) than it saves
SHARDS_PER_ACTOR = 4  # shards stream back as they finish: progress, and no actor idles on the last big one
LENGTH_CHUNK = 10_000  # texts tokenized at a time in the driver to find the shards' lengths


@dataclass(frozen=True)
class EncoderRecipe:
    """How a worker rebuilds an encoder: ``factory(*args)`` (a module-level callable: Ray pickles it by name)
    and the torch threads it encodes on (the single process's, so the vectors are the same)."""

    factory: Callable[..., Any]
    args: tuple = ()
    threads: int = 2


def shards(n: int, parts: int, lengths: np.ndarray | None = None,
           batch_rows: Callable[[int], int] | None = None) -> list[np.ndarray]:
    """Row indices of ``n`` texts in about ``parts`` shards, each in collection order. With ``lengths`` (the
    encoder's token lengths) a shard holds whole length groups, so its same-length batches are the single
    process's; with ``batch_rows`` too (rows per batch of a length) a group larger than a shard's share is cut into
    pieces of whole batches, so the batches are still the single process's and the shards carry even work
    (tokens: rows × length); else contiguous slices."""
    parts = max(1, min(parts, n))
    if lengths is None:
        return [s for s in np.array_split(np.arange(n), parts) if len(s)]
    share = float(np.sum(lengths)) / parts
    pieces = []  # (tokens, rows) of each piece: a whole length group, or whole batches of one
    order = np.argsort(lengths, kind="stable")  # by length, collection order inside a length
    values, starts = np.unique(lengths[order], return_index=True)
    for value, rows in zip(values, np.split(order, starts[1:])):
        step = len(rows)
        if batch_rows is not None and value * len(rows) > share / 2:
            per_batch = batch_rows(int(value))
            step = max(per_batch, int(share / 2 / max(1, value)) // per_batch * per_batch)
        pieces += [(float(value) * len(rows[s:s + step]), rows[s:s + step]) for s in range(0, len(rows), step)]
    load, owned = np.zeros(parts), [[] for _ in range(parts)]
    for tokens, rows in sorted(pieces, key=lambda p: -p[0]):  # largest first, each to the lightest shard
        target = int(np.argmin(load))
        load[target] += tokens
        owned[target].append(rows)
    return [np.sort(np.concatenate(o)) for o in owned if o]


class _ShardActor:
    """One model per actor (Ray Data's actor pool): encodes a shard per call and writes its vectors to the shards'
    folder itself; what goes back to the driver is the shard's number and size, never its vectors."""

    def __init__(self, recipe: EncoderRecipe, env: Mapping[str, str], folder: str, normalize: bool,
                 batch_size: int) -> None:
        worker_setup(env, recipe.threads)
        self.encoder, self.folder, self.normalize = recipe.factory(*recipe.args), folder, normalize
        self.batch_size = batch_size

    def __call__(self, batch: dict) -> dict:
        """A batch of shards in (``number``, ``rows``, ``texts``), one small record per shard out."""
        out: dict[str, list] = {"number": [], "count": [], "dim": []}
        for number, rows, texts in zip(batch["number"], batch["rows"], batch["texts"]):
            shard = _write(self.encoder, int(number), np.asarray(rows, dtype=np.int64), [str(t) for t in texts],
                           self.folder, self.normalize, self.batch_size)
            out["number"].append(int(number))
            out["count"].append(shard[0])
            out["dim"].append(shard[1])
        return {k: np.asarray(v, dtype=np.int64) for k, v in out.items()}


def _write(encoder: Any, number: int, rows: np.ndarray, texts: list[str], folder: str | Path,
           normalize: bool, batch_size: int = 128) -> tuple[int, int]:
    """Encode one shard's texts and save it (``write_shard``); (rows, dimension)."""
    vectors = np.asarray(encoder.encode(texts, batch_size=batch_size), dtype=np.float32)
    vectors = l2_normalize(vectors) if normalize else vectors
    write_shard(folder, number, rows, vectors)
    return len(rows), int(vectors.shape[1])


def _use_ray(encoder: Any, n: int) -> bool:
    """A recipe, not inside a job, large enough (or a cluster named), and the main thread (a page's script thread
    encodes in its process: Ray installs signal handlers, which only the main thread may)."""
    if getattr(encoder, "recipe", None) is None or in_job():
        return False
    if threading.current_thread() is not threading.main_thread():
        return False
    return n >= RAY_MIN_TEXTS or bool(settings().ray_address)


def token_lengths(encoder: Any, texts: list[str]) -> np.ndarray | None:
    """``encoder.token_lengths`` of ``texts``, asked ``LENGTH_CHUNK`` texts at a time (a tokenizer's output for a
    whole archive would grow the driver with the archive; the lengths alone are eight bytes a text); None when the
    encoder does not batch by length."""
    if not hasattr(encoder, "token_lengths"):
        return None
    chunks = [np.asarray(encoder.token_lengths(texts[s:s + LENGTH_CHUNK]), dtype=np.int64)
              for s in range(0, len(texts), LENGTH_CHUNK)]
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)


def _parts(encoder: Any, texts: list[str], parts: int) -> list[np.ndarray]:
    """The shards' rows: by token length when the encoder batches by it (its batches kept whole), else contiguous."""
    lengths = token_lengths(encoder, texts)
    batch_rows = getattr(encoder, "batch_rows", None) if lengths is not None else None
    return shards(len(texts), parts, lengths, batch_rows)


def encode_to_shards(encoder: Any, texts: list[str], folder: str | Path, batch_size: int = 128,
                     normalize: bool = False, progress: ProgressFn = no_progress) -> ShardManifest:
    """``encoder.encode(texts)`` written to on-disk shards in ``folder`` (``core.retrieval.vector_shards``), each by
    the worker that encoded it; returns the saved manifest (file names, counts), never the vectors. On Ray Data's
    actor pool when it pays (module docstring), else here one shard at a time; ``normalize``: unit-length rows."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    encoder_id = str(getattr(encoder, "encoder_id", ""))
    sizes: dict[int, tuple[int, int]] = {}
    start = time.perf_counter()

    def tell(done: int, where: str) -> None:
        left = (time.perf_counter() - start) / max(1, done) * (len(texts) - done)
        progress(done / max(1, len(texts)), f"{done:,}/{len(texts):,} texts encoded {where}· about {left:.0f} s left")

    if not _use_ray(encoder, len(texts)):
        for number, rows in enumerate(_parts(encoder, texts, SHARDS_PER_ACTOR)):
            sizes[number] = _write(encoder, number, rows, [texts[i] for i in rows], folder, normalize, batch_size)
            tell(sum(c for c, _ in sizes.values()), "")
    else:
        import ray

        with executor():
            actors = max(1, int(ray.cluster_resources().get("CPU", cluster_cpus())))
            parts = _parts(encoder, texts, actors * SHARDS_PER_ACTOR)
            items = [{"number": n, "rows": rows.tolist(), "texts": [texts[i] for i in rows]}
                     for n, rows in enumerate(parts)]
            ray.data.DataContext.get_current().enable_progress_bars = False
            written = ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
                _ShardActor, batch_size=1, batch_format="numpy", num_cpus=1, concurrency=min(actors, len(items)),
                fn_constructor_args=(encoder.recipe, job_environment(), str(folder), normalize, batch_size))
            del items
            progress(0.0, f"encoding {len(texts):,} texts on {min(actors, len(parts))} Ray actors")
            for batch in written.iter_batches(batch_size=None, batch_format="numpy"):
                for number, count, dim in zip(batch["number"], batch["count"], batch["dim"]):
                    sizes[int(number)] = (int(count), int(dim))
                tell(sum(c for c, _ in sizes.values()), "on the pool ")
    shards_ = tuple(VectorShard.numbered(n, sizes[n][0]) for n in sorted(sizes))
    dims = {d for _, d in sizes.values()}
    manifest = ShardManifest(folder, shards_, sum(s.count for s in shards_), dims.pop() if dims else 0, encoder_id)
    if manifest.count != len(texts):
        raise RuntimeError(f"the shards hold {manifest.count:,} rows of {len(texts):,}")
    manifest.save()
    return manifest


def encode_collection(encoder: Any, texts: list[str], batch_size: int = 128,
                      progress: ProgressFn = no_progress) -> np.ndarray:
    """``encoder.encode(texts)`` (rows in the order of ``texts``), on Ray Data's actor pool when it pays
    (module docstring); ``progress`` counts the texts encoded, with the time left. The pool's workers write
    their vectors to shards in a temporary folder under ``var/cache/shards``, read back here a shard at a time
    into the one array returned (no copy of the vectors passes through Ray's object store)."""
    if not _use_ray(encoder, len(texts)):
        return encoder.encode(texts, batch_size=batch_size, progress=progress)
    with tempfile.TemporaryDirectory(dir=artifact_dir("cache", "shards")) as tmp:
        manifest = encode_to_shards(encoder, texts, tmp, batch_size=batch_size, progress=progress)
        return manifest.assemble()
