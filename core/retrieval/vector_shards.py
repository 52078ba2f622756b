"""A collection's vectors as on-disk shards: each shard two ``.npy`` files (its collection rows and their float32
vectors), written by the worker that encoded it, and ``manifest.json`` naming them.

What grows with the archive stays on disk: the process that asks for an encoding gets a :class:`ShardManifest`
(file names and counts), never the vectors; a reader maps one shard at a time (``np.load(mmap_mode="r")``).
``assemble`` writes the vectors in collection order into one ``.npy`` a shard at a time (a memory-mapped output),
``gather`` reads the vectors of some rows (a training sample for an IVF or HNSW index). Files are written under a
temporary name and renamed, so a killed writer leaves whole shards only.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

__all__ = ["ShardManifest", "VectorShard", "l2_normalize", "write_shard"]

MANIFEST = "manifest.json"


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero): the one normalisation of every dense system."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


@dataclass(frozen=True)
class VectorShard:
    """One shard: its files (names inside the manifest's folder) and how many rows it holds."""

    vectors: str
    rows: str
    count: int

    @classmethod
    def numbered(cls, number: int, count: int) -> VectorShard:
        """Shard ``number``'s files: ``shard-NNNNN.npy`` (vectors) and ``shard-NNNNN.rows.npy``."""
        return cls(f"shard-{number:05d}.npy", f"shard-{number:05d}.rows.npy", count)


def _save(path: Path, array: np.ndarray) -> None:
    tmp = path.with_name(f".{path.name}.tmp.npy")
    np.save(tmp, array)
    os.replace(tmp, path)


def write_shard(folder: str | Path, number: int, rows: np.ndarray, vectors: np.ndarray) -> VectorShard:
    """Save shard ``number``: its collection ``rows`` (int64) and ``vectors`` (float32), each atomically."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rows, vectors = np.asarray(rows, dtype=np.int64), np.asarray(vectors, dtype=np.float32)
    if len(rows) != len(vectors):
        raise ValueError(f"shard {number}: {len(rows)} rows but {len(vectors)} vectors")
    shard = VectorShard.numbered(number, len(rows))
    _save(folder / shard.vectors, vectors)
    _save(folder / shard.rows, rows)
    return shard


@dataclass(frozen=True)
class ShardManifest:
    """The shards of one encoded collection (``count`` rows of ``dim`` floats), by file name, and the encoder."""

    folder: Path
    shards: tuple[VectorShard, ...]
    count: int
    dim: int
    encoder_id: str = ""

    def save(self) -> Path:
        """Write ``manifest.json`` beside the shards (atomically); returns its path."""
        path = self.folder / MANIFEST
        tmp = path.with_name(f".{MANIFEST}.tmp")
        tmp.write_text(json.dumps({"count": self.count, "dim": self.dim, "encoder": self.encoder_id,
                                   "shards": [asdict(s) for s in self.shards]}, indent=1), encoding="utf-8")
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, folder: str | Path) -> ShardManifest:
        """The manifest saved in ``folder``."""
        folder = Path(folder)
        raw = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        return cls(folder, tuple(VectorShard(**s) for s in raw["shards"]), int(raw["count"]), int(raw["dim"]),
                   raw.get("encoder", ""))

    @property
    def bytes(self) -> int:
        """Bytes of the vectors' files on disk."""
        return sum((self.folder / s.vectors).stat().st_size for s in self.shards)

    def iter_shards(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(rows, vectors) of each shard in turn, memory-mapped: one shard's pages at a time."""
        for shard in self.shards:
            yield (np.load(self.folder / shard.rows), np.load(self.folder / shard.vectors, mmap_mode="r"))

    def check(self) -> None:
        """Every row of the collection is in exactly one shard (``ValueError`` otherwise)."""
        seen = np.zeros(self.count, dtype=np.int8)
        for rows, vectors in self.iter_shards():
            if vectors.shape[1:] != (self.dim,):
                raise ValueError(f"a shard of {self.folder} holds {vectors.shape[1:]} vectors, not ({self.dim},)")
            np.add.at(seen, rows, 1)
        if not np.all(seen == 1):
            raise ValueError(f"the shards of {self.folder} do not cover each of {self.count:,} rows once")

    def assemble(self, out: str | Path | None = None) -> np.ndarray:
        """The vectors in collection order: written into the new ``.npy`` file ``out`` a shard at a time (returned
        memory-mapped, so memory holds one shard), or, without ``out``, an array in memory."""
        if out is None:
            vectors = np.empty((self.count, self.dim), dtype=np.float32)
        else:
            out = Path(out)
            tmp = out.with_name(f".{out.name}.tmp.npy")
            vectors = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(self.count, self.dim))
        for rows, shard in self.iter_shards():
            vectors[rows] = shard
        if out is None:
            return vectors
        vectors.flush()
        del vectors
        os.replace(tmp, out)
        return np.load(out, mmap_mode="r")

    def gather(self, rows: np.ndarray) -> np.ndarray:
        """The vectors of ``rows`` (in that order), read shard by shard: a sample, not the collection."""
        rows = np.asarray(rows, dtype=np.int64)
        out = np.empty((len(rows), self.dim), dtype=np.float32)
        where = {int(r): i for i, r in enumerate(rows)}
        for shard_rows, vectors in self.iter_shards():
            hit = np.flatnonzero(np.isin(shard_rows, rows))
            if len(hit):
                out[[where[int(r)] for r in shard_rows[hit]]] = vectors[hit]
        return out
