"""Dense retrieval shared by every bi-encoder: encoder protocol, embedding cache, faiss retriever.

An ``Encoder`` maps texts to an L2-normalised float32 matrix (batched, ``torch.inference_mode``,
CUDA if present). Collection embeddings are cached in ``var/cache/embeddings`` keyed by the encoder id
and a fingerprint of the collection, so a second build or a second app start does not re-encode.

``DenseRetriever`` searches a faiss index built by ``core.retrieval.indexing``. Because every bi-encoder here is
siamese (one encoder for queries and questions), a query whose text is a collection text reuses its
stored vector instead of being encoded again (exactly the same vector; this makes dataset-wide
evaluation cost one encoding pass).
"""
from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Protocol

import numpy as np

from core.artifacts import save_json
from core.retrieval.indexing import IndexSpec, build_index, distance_counter, set_search_params
from core.paths import artifact_dir
from core.retrieval.base import Hits, ProgressFn, Retriever, no_progress
from core.retrieval.vector_shards import l2_normalize  # noqa: F401 - imported from here by the dense systems


class Encoder(Protocol):
    """Texts -> L2-normalised float32 matrix (n, dim)."""

    encoder_id: str  # names model + weights version; part of the embedding cache key

    def encode(self, texts: list[str], batch_size: int = 128, progress: ProgressFn = no_progress) -> np.ndarray: ...


def corpus_fingerprint(corpus: dict[str, str]) -> str:
    h = hashlib.sha1()
    for doc_id, text in corpus.items():
        h.update(doc_id.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
        h.update(text.encode("utf-8", "surrogatepass"))
        h.update(b"\x01")
    return h.hexdigest()[:16]


def cached_embeddings(
    encoder: Encoder,
    corpus: dict[str, str],
    progress: ProgressFn = no_progress,
    batch_size: int = 128,
    normalize: bool = True,
) -> np.ndarray:
    """Embeddings of ``corpus`` (in its key order), computed once per (encoder, collection).

    ``normalize=False`` keeps the encoder's raw vectors (for squared-Euclidean indexes, e.g. SDML).
    """
    raw = "" if normalize else "|raw"
    key = hashlib.sha1(f"{encoder.encoder_id}|{corpus_fingerprint(corpus)}{raw}".encode()).hexdigest()[:20]
    folder = artifact_dir("cache", "embeddings")
    path = folder / f"{key}.npy"
    if path.is_file():
        try:
            emb = np.load(path)
            if emb.shape[0] == len(corpus):
                progress(1.0, "embeddings loaded from cache")
                return emb
        except (ValueError, OSError):
            pass  # corrupt cache entry: recompute
    from core.retrieval.encoding import encode_collection

    emb = encode_collection(encoder, list(corpus.values()), batch_size=batch_size, progress=progress)
    emb = l2_normalize(emb) if normalize else np.asarray(emb, dtype=np.float32)
    tmp = folder / f".{key}.tmp.npy"
    np.save(tmp, emb)
    tmp.replace(path)
    save_json(folder / f"{key}.json", {"encoder": encoder.encoder_id, "count": len(corpus)})
    return emb


class DenseRetriever(Retriever):
    """Cosine search over a faiss index; counts distance computations per query.

    With an ``l2`` index (``spec.metric``) vectors are not normalised and scores are −‖q − d‖².
    """

    def __init__(
        self,
        name: str,
        encoder: Encoder,
        doc_ids: list[str],
        index,
        spec: IndexSpec,
        doc_vectors: np.ndarray | None = None,
        doc_texts: list[str] | None = None,
    ) -> None:
        self.name, self.encoder, self.index, self.spec = name, encoder, index, spec
        self.doc_ids = np.asarray(doc_ids)
        self.doc_vectors = doc_vectors
        self._row_of_text = (
            {t: i for i, t in enumerate(doc_texts)} if doc_texts is not None and doc_vectors is not None else {}
        )
        self._reset, self._read = distance_counter(index)
        self.batch_size = 512
        self.normalize = getattr(spec, "metric", "ip") != "l2"

    @classmethod
    def from_vectors(
        cls, name: str, encoder: Encoder, corpus: dict[str, str], vectors: np.ndarray, spec: IndexSpec
    ) -> DenseRetriever:
        return cls(name, encoder, list(corpus), build_index(vectors, spec), spec, vectors, list(corpus.values()))

    def set_params(self, params: str) -> None:
        """Change search parameters live (``"nprobe=20"``, ``"efSearch=128"``)."""
        set_search_params(self.index, params)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        rows = [self._row_of_text.get(t) for t in texts]
        missing = [i for i, r in enumerate(rows) if r is None]
        out = np.empty((len(texts), self.index.d), dtype=np.float32)
        if len(missing) < len(texts):
            known = [i for i, r in enumerate(rows) if r is not None]
            out[known] = self.doc_vectors[[rows[i] for i in known]]
        if missing:
            vecs = self.encoder.encode([texts[i] for i in missing])
            out[missing] = l2_normalize(vecs) if self.normalize else vecs
        return out

    def retrieve_vectors(self, queries: np.ndarray, k: int) -> Hits:
        k = min(k, self.index.ntotal)
        self._reset()
        scores, rows = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
        per_query = self._read(len(queries))
        if not self.normalize:
            scores = -scores  # faiss returns squared L2 distances: higher score = closer
        ids, vals = [], []
        for r, s in zip(rows, scores):
            keep = r >= 0
            ids.append(self.doc_ids[r[keep]].tolist())
            vals.append(s[keep].astype(float).tolist())
        return Hits(ids, vals, [{"distance_computations": per_query}] * len(queries))

    def retrieve(self, texts: list[str], k: int) -> Hits:
        return self.retrieve_vectors(self.encode_queries(texts), k)


def timed(fn: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def stored_vectors_and_index(
    folder,
    encoder: Encoder,
    corpus: dict[str, str],
    spec: IndexSpec | Callable[[int, int], IndexSpec],
    index_name: str,
    what: str,
    command: str,
    fresh: bool = False,
    progress: ProgressFn = no_progress,
    batch_size: int = 256,
    normalize: bool = True,
):
    """A trained system's collection vectors (``folder/embeddings.npy``) and its faiss index.

    Vectors are computed once (through the embedding cache) and saved beside the checkpoint; the
    index is loaded from ``folder/index-<name>/`` when it matches the encoder, else built (and saved,
    except for ``flat``, which is cheaper to rebuild than to read). ``spec`` may be a function of
    (count, dim). Returns ``(vectors, index, spec, encode_seconds)``.
    """
    from core.errors import MissingArtifactError
    from core.retrieval.indexing import load_index, save_index

    emb_path = folder / "embeddings.npy"
    t0 = time.perf_counter()
    vectors = None
    if emb_path.is_file() and not fresh:
        try:
            vectors = np.load(emb_path)
        except (ValueError, OSError):
            raise MissingArtifactError(what, command, "corrupt") from None
        if vectors.shape[0] != len(corpus):
            raise MissingArtifactError(what, command, "stale (collection changed)")
    if vectors is None:
        vectors = cached_embeddings(encoder, corpus, progress=progress, batch_size=batch_size, normalize=normalize)
        tmp = folder / ".embeddings.tmp.npy"
        np.save(tmp, vectors)
        tmp.replace(emb_path)
    encode_seconds = time.perf_counter() - t0
    if callable(spec):
        spec = spec(len(vectors), vectors.shape[1])
    index_dir = folder / f"index-{index_name}"
    index = None
    if not fresh and (index_dir / "index.json").is_file():
        index, spec, meta = load_index(index_dir, command)
        if meta.get("encoder") != encoder.encoder_id or index.ntotal != len(vectors):
            index = None
    if index is None:
        index = build_index(vectors, spec)
        if index_name != "flat" and spec.factory != "Flat":  # exact: cheaper to rebuild than to read
            save_index(index_dir, index, spec, encoder.encoder_id, len(vectors))
    return vectors, index, spec, encode_seconds
