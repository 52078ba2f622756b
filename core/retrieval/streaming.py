"""Import a large BEIR corpus into Milvus: streamed, encoded in chunks with progress, resumable, batched writes.

``load_beir_folder`` reads a whole corpus into a dict; for a collection of millions of texts this module
instead reads ``corpus.jsonl`` line by line (same rules: ``_id`` required and unique, ``title`` +
``text`` joined by a space, non-empty, at most ``QRS_MAX_TEXT_CHARS``), so memory holds one chunk of
texts and its vectors at a time (plus the set of ids seen, to refuse duplicates).

Resumable: chunk ``i`` (texts ``i·C … (i+1)·C − 1``) is encoded and saved as ``chunk-00000i.npz`` (ids +
float32 vectors), written to a temporary name and renamed, so a killed run leaves only whole chunks.
A rerun streams the file again and skips every chunk whose file holds exactly the ids of that slice;
only the missing ones are encoded. The work folder is keyed by the source file (path, size, mtime),
the encoder id and the chunk size (``var/cache/streaming/<key>/`` unless given).

Then the chunks are written to Milvus in insert batches through ``core.retrieval.milvus.write_collection``
(new collection, alias switched when complete: a killed write is never served, and the rerun writes it
again from the chunk files without encoding anything).
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from core.data.readers import parse_jsonl_line
from core.errors import DataFormatError, StudioError
from core.progress import ProgressFn, no_progress

DEFAULT_CHUNK = 10_000


@dataclass(frozen=True)
class StreamConfig:
    """Chunking: ``chunk_size`` texts per saved chunk (the memory bound), ``encode_batch`` per encoder call."""

    chunk_size: int = DEFAULT_CHUNK
    encode_batch: int = 256
    normalize: bool = True  # L2-normalise vectors (inner product = cosine), as the dense systems do


@dataclass
class EncodedCorpus:
    """The chunk files of one encoded corpus, in order, and what a run did (``encoded`` = texts encoded
    now, ``reused`` = texts whose chunk was already on disk)."""

    folder: Path
    chunks: list[Path]
    count: int
    dim: int
    encoder_id: str
    id_max_bytes: int
    encoded: int = 0
    reused: int = 0
    digests: list[str] = field(default_factory=list)

    @property
    def fingerprint(self) -> str:
        """sha1 of the encoder id and every chunk's content (12 hex digits)."""
        h = hashlib.sha1(self.encoder_id.encode())
        for digest in self.digests:
            h.update(digest.encode())
        return h.hexdigest()[:12]


def iter_beir_corpus(folder: str | Path) -> Iterator[tuple[str, str, int]]:
    """``(doc_id, text, bytes read so far)`` for each document of ``folder/corpus.jsonl``, streamed.

    ``DataFormatError`` names the file and line of the first malformed document.
    """
    from core.data.readers import beir_id, check_text

    path = Path(folder) / "corpus.jsonl"
    if not path.is_file():
        raise DataFormatError(path, None, "missing: a BEIR folder holds corpus.jsonl")
    seen: set[str] = set()
    consumed = 0
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            consumed += len(raw)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise DataFormatError(path, lineno, "not UTF-8 text") from None
            obj = parse_jsonl_line(path, lineno, line)
            if obj is None:
                continue
            doc_id = beir_id(obj, path, lineno, seen)
            seen.add(doc_id)
            parts = []
            for key in ("title", "text"):
                value = obj.get(key)
                if value is not None and not isinstance(value, str):
                    raise DataFormatError(path, lineno, f'"{key}" of document {doc_id!r} must be a string, '
                                                        f"got {type(value).__name__}")
                if value:
                    parts.append(value)
            text = " ".join(parts).strip()
            if not text:
                raise DataFormatError(path, lineno, f"document {doc_id!r} has no title or text")
            yield doc_id, check_text(text, path, lineno, "document"), consumed


def _chunks(folder: str | Path, size: int) -> Iterator[tuple[list[str], list[str], int]]:
    ids: list[str] = []
    texts: list[str] = []
    consumed = 0
    for doc_id, text, consumed in iter_beir_corpus(folder):
        ids.append(doc_id)
        texts.append(text)
        if len(ids) == size:
            yield ids, texts, consumed
            ids, texts = [], []
    if ids:
        yield ids, texts, consumed


def work_folder(source: str | Path, encoder_id: str, chunk_size: int) -> Path:
    """``var/cache/streaming/<key>``: key = sha1(source path, size, mtime, encoder id, chunk size)."""
    from core.paths import artifact_dir

    path = (Path(source) / "corpus.jsonl").resolve()
    stat = path.stat()
    key = hashlib.sha1(f"{path}|{stat.st_size}|{stat.st_mtime_ns}|{encoder_id}|{chunk_size}".encode()).hexdigest()[:16]
    return artifact_dir("cache", "streaming", key)


def _read_chunk(path: Path) -> tuple[np.ndarray, np.ndarray] | None:
    try:
        with np.load(path, allow_pickle=False) as data:
            return data["ids"], data["vectors"]
    except (OSError, ValueError, KeyError, EOFError):
        return None  # unreadable: encode again


def _write_chunk(path: Path, ids: list[str], vectors: np.ndarray) -> None:
    tmp = path.with_name(f".{path.stem}.tmp.npz")
    with open(tmp, "wb") as handle:
        np.savez(handle, ids=np.asarray(ids, dtype=str), vectors=vectors)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)


def _digest(path: Path) -> str:
    h = hashlib.sha1()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def encode_beir_corpus(
    folder: str | Path,
    encoder,
    work_dir: str | Path | None = None,
    config: StreamConfig = StreamConfig(),
    progress: ProgressFn = no_progress,
) -> EncodedCorpus:
    """Encode ``folder/corpus.jsonl`` chunk by chunk into ``work_dir`` (resumable); see the module doc.

    ``encoder``: ``encode(texts, batch_size=..., progress=...) -> (n, dim)`` with an ``encoder_id``.
    Progress is the fraction of the file's bytes read.
    """
    from core.retrieval.dense import l2_normalize

    if config.chunk_size < 1:
        raise StudioError(f"chunk size must be at least 1, got {config.chunk_size}")
    encoder_id = str(getattr(encoder, "encoder_id", type(encoder).__name__))
    out = Path(work_dir) if work_dir is not None else work_folder(folder, encoder_id, config.chunk_size)
    out.mkdir(parents=True, exist_ok=True)
    total = max(1, (Path(folder) / "corpus.jsonl").stat().st_size)
    result = EncodedCorpus(out, [], 0, 0, encoder_id, 1)
    for number, (ids, texts, consumed) in enumerate(_chunks(folder, config.chunk_size)):
        path = out / f"chunk-{number:06d}.npz"
        stored = _read_chunk(path) if path.is_file() else None
        if stored is not None and stored[0].tolist() == ids and stored[1].shape[0] == len(ids):
            vectors = stored[1]
            result.reused += len(ids)
            what = "already encoded"
        else:
            vectors = np.asarray(encoder.encode(texts, batch_size=config.encode_batch), dtype=np.float32)
            if vectors.ndim != 2 or vectors.shape[0] != len(texts):
                raise StudioError(f"the encoder returned {vectors.shape} for {len(texts)} texts")
            vectors = l2_normalize(vectors) if config.normalize else vectors
            _write_chunk(path, ids, vectors)
            result.encoded += len(ids)
            what = "encoded"
        if result.dim and vectors.shape[1] != result.dim:
            raise StudioError(f"{path.name}: dimension {vectors.shape[1]}, earlier chunks {result.dim}")
        result.dim = int(vectors.shape[1])
        result.chunks.append(path)
        result.digests.append(_digest(path))
        result.count += len(ids)
        result.id_max_bytes = max(result.id_max_bytes, *(len(i.encode("utf-8")) for i in ids))
        progress(consumed / total, f"chunk {number + 1} {what}: {result.count:,} texts")
    if result.count == 0:
        raise DataFormatError(Path(folder) / "corpus.jsonl", None, "holds no documents")
    for stale in sorted(out.glob("chunk-*.npz"))[len(result.chunks):]:
        stale.unlink()  # from a longer earlier version of the file
    progress(1.0, f"{result.count:,} texts encoded ({result.encoded:,} now, {result.reused:,} resumed)")
    return result


def _row_batches(corpus: EncodedCorpus, batch: int) -> Iterator[list[dict]]:
    pk = 0
    for path in corpus.chunks:
        stored = _read_chunk(path)
        if stored is None:
            raise StudioError(f"{path} became unreadable during the import; run it again")
        ids, vectors = stored
        ids = ids.tolist()
        for start in range(0, len(ids), batch):
            rows = vectors[start : start + batch].tolist()
            yield [{"pk": pk + i, "doc_id": d, "dense": v}
                   for i, (d, v) in enumerate(zip(ids[start : start + batch], rows), start=start)]
        pk += len(ids)


def import_beir_to_milvus(
    folder: str | Path,
    encoder,
    dataset_name: str,
    system: str,
    uri: str | None = None,
    token: str | None = None,
    index: str = "flat",
    work_dir: str | Path | None = None,
    config: StreamConfig = StreamConfig(),
    progress: ProgressFn = no_progress,
):
    """Encode ``folder``'s corpus (resumable) and serve it from Milvus as ``<system>:milvus-<index>``.

    Connects first (``MilvusError`` before any encoding when the server is unreachable); returns a
    ``MilvusRetriever`` whose hits carry the BEIR ids, queries encoded by ``encoder``.
    """
    from core.retrieval.dense import l2_normalize
    from core.retrieval.milvus import MilvusRetriever
    from core.retrieval.milvus_client import alias_name, index_spec, milvus_config, ping
    from core.retrieval.milvus_collections import Layout, write_collection
    from core.retrieval.milvus_plan import Route

    settings = milvus_config(uri, token)
    spec = index_spec(index)
    ping(settings)
    corpus = encode_beir_corpus(folder, encoder, work_dir, config, lambda f, m: progress(0.6 * f, m))
    alias = alias_name(system, dataset_name, spec.name)
    layout = Layout(corpus.dim, "IP", False, min(65535, max(64, 2 * corpus.id_max_bytes)))
    write_collection(settings, alias, corpus.fingerprint, layout, spec, _row_batches(corpus, settings.insert_batch),
                     corpus.count, lambda f, m: progress(0.6 + 0.4 * f, m))

    def encode(texts: list[str]) -> list:
        vectors = np.asarray(encoder.encode(texts, batch_size=config.encode_batch), dtype=np.float32)
        return (l2_normalize(vectors) if config.normalize else vectors).tolist()

    return MilvusRetriever(f"{system}:milvus-{spec.name}", settings, alias, [Route("dense", "IP", encode)], spec)
