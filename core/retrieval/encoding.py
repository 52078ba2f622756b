"""A collection encoded on the executor: Ray Data ``map_batches`` over an actor pool, the model loaded once per
actor, shards streamed back and put in collection order.

``encode_collection`` is what the embedding cache (``core.retrieval.dense.cached_embeddings``) calls for every
bi-encoder. It goes to Ray Data when the encoder can be rebuilt in a worker (its ``recipe``: a module-level
factory and its arguments), the collection is large enough for the pool to pay for Ray's start
(``RAY_MIN_TEXTS``, or always when ``QRS_RAY_ADDRESS`` names a cluster), and it is not already running inside an
executor job (a build job is itself the unit of parallel work: its encoding stays in its process) nor in a
page's script thread. Else the encoder runs here, as before.

Same vectors either way. An encoder that batches texts by token length (``token_lengths``: MiniLM's same-length
batches, no padding) is sharded by length, each shard holding whole length groups in collection order, or pieces
of a group cut at its batch boundaries (``batch_rows``) so that no shard is left with most of the work (a million
questions have length groups of 100,000 rows), and each actor runs on the encoder's own thread count: every
forward pass is the one the single process makes, so the vectors are bit-identical. Other encoders (sentence-transformers' padded batches) are cut into contiguous shards;
their vectors equal the single process's within float rounding (tests check max |Δ| ≤ 1e-5).
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.executor import cluster_cpus, executor, in_job, job_environment, worker_setup
from core.progress import ProgressFn, no_progress
from core.settings import settings

__all__ = ["EncoderRecipe", "RAY_MIN_TEXTS", "encode_collection", "shards"]

RAY_MIN_TEXTS = 20_000  # below this an actor pool costs more (Ray's start, a model per actor) than it saves
SHARDS_PER_ACTOR = 4  # shards stream back as they finish: progress, and no actor idles on the last big one


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


class _EncodeActor:
    """One model per actor (Ray Data's actor pool): encodes a shard of rows per call."""

    def __init__(self, recipe: EncoderRecipe, env: Mapping[str, str]) -> None:
        worker_setup(env, recipe.threads)
        self.encoder = recipe.factory(*recipe.args)

    def __call__(self, batch: dict) -> dict:
        """A batch of shards in, one row per text out: ``row`` (its collection index) and ``vector``."""
        rows = [np.asarray(r, dtype=np.int64) for r in batch["rows"]]
        vectors = [np.asarray(self.encoder.encode([str(t) for t in texts]), dtype=np.float32)
                   for texts in batch["texts"]]
        return {"row": np.concatenate(rows), "vector": np.concatenate(vectors)}


def _use_ray(encoder: Any, n: int) -> bool:
    """A recipe, not inside a job, large enough (or a cluster named), and the main thread (a page's script thread
    encodes in its process: Ray installs signal handlers, which only the main thread may)."""
    if getattr(encoder, "recipe", None) is None or in_job():
        return False
    if threading.current_thread() is not threading.main_thread():
        return False
    return n >= RAY_MIN_TEXTS or bool(settings().ray_address)


def encode_collection(encoder: Any, texts: list[str], batch_size: int = 128,
                      progress: ProgressFn = no_progress) -> np.ndarray:
    """``encoder.encode(texts)`` (rows in the order of ``texts``), on Ray Data's actor pool when it pays
    (module docstring); ``progress`` counts the texts encoded, with the time left."""
    if not _use_ray(encoder, len(texts)):
        return encoder.encode(texts, batch_size=batch_size, progress=progress)
    import ray

    lengths = encoder.token_lengths(texts) if hasattr(encoder, "token_lengths") else None  # None: contiguous
    with executor():
        actors = max(1, int(ray.cluster_resources().get("CPU", cluster_cpus())))
        batch_rows = getattr(encoder, "batch_rows", None) if lengths is not None else None
        parts = shards(len(texts), actors * SHARDS_PER_ACTOR, lengths, batch_rows)
        items = [{"rows": rows.tolist(), "texts": [texts[i] for i in rows]} for rows in parts]
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        data = ray.data.from_items(items, override_num_blocks=len(items))
        encoded = data.map_batches(_EncodeActor, batch_size=1, batch_format="numpy", num_cpus=1,
                                   concurrency=min(actors, len(items)),
                                   fn_constructor_args=(encoder.recipe, job_environment()))
        out: np.ndarray | None = None
        done, start = 0, time.perf_counter()
        progress(0.0, f"encoding {len(texts):,} texts on {min(actors, len(items))} Ray actors")
        for batch in encoded.iter_batches(batch_size=None, batch_format="numpy"):
            rows, vectors = batch["row"], batch["vector"]
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[rows] = vectors
            done += len(rows)
            elapsed = time.perf_counter() - start
            left = elapsed / max(1, done) * (len(texts) - done)
            progress(done / len(texts), f"{done:,}/{len(texts):,} texts encoded · about {left:.0f} s left")
    assert out is not None and done == len(texts), "every row comes back once"
    return out
