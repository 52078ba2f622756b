"""What a loaded first stage puts into Milvus (``collection_plan``): the collection layout, its rows, the fingerprint that
says whether a stored collection is current, and the query encoder of each searched field (``Route``).

- Dense: the system's own collection vectors (``DenseRetriever.doc_vectors``, same ids and order),
  with the system's metric: inner product (``IP``) for the normalised bi-encoders (= cosine; we never
  ask Milvus for ``COSINE``, which Milvus Lite reports as a distance 1 − cos where a server reports
  the similarity), ``L2`` for SDML. Queries are encoded by the system itself
  (``DenseRetriever.encode_queries``: a collection text reuses its stored vector). Milvus Lite
  reports L2 as ‖q − d‖ where a server reports ‖q − d‖²; scores are put back to the faiss
  convention −‖q − d‖² either way.
- BM25 (system name unchanged, e.g. ``bm25:milvus-flat``): bm25s precomputes, per (term, document),
  the document's BM25 weight of the term (its ``scores`` CSC matrix: ``indptr`` over vocabulary ids,
  ``indices`` = documents, ``data`` = weights), and scores a query as the sum of those weights over
  the query's term ids, a repeated term counted again. Each document is stored as a
  ``SPARSE_FLOAT_VECTOR`` {term id: weight}, and a query as its term-count vector {term id: count};
  the inner product is then exactly bm25s's score. Query terms come from the BM25 system's own
  tokenizer and vocabulary (nothing re-implemented). Milvus's own BM25 function is not used: it
  keeps IDF per segment, so its scores would depend on how the collection happens to be segmented.
- Hybrid (``bm25+glove-mean:milvus-rrf``): one collection holding both fields, searched with
  ``hybrid_search`` and Milvus's ``RRFRanker(k=60)``, each route contributing its top
  ``max(HYBRID_DEPTH, k)``. Unlike ``core.retrieval.fusion`` (ranx RRF, k tuned on dev, each part
  dropping the query's own id before fusing), the own id is dropped after fusing: a separately
  named system.
"""
from __future__ import annotations

import hashlib
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from core.errors import StudioError
from core.retrieval.base import Retriever
from core.retrieval.milvus_collections import Layout

EMPTY_DOC_DIM = 2**32 - 2  # a document without terms (never in a query): Milvus refuses empty sparse rows
NO_TERM_DIM = 2**32 - 3  # a hybrid query without known terms: matches no document, so RRF is dense-only


@dataclass
class Route:
    """One searched field: ``field`` (``dense``/``sparse``), ``metric`` and the query encoder
    (texts -> one vector per text: a float list, a {dim: weight} dict, or None for "no query")."""

    field: str
    metric: str
    encode: Callable[[list[str]], list]


def _is_dense(system: Retriever) -> bool:
    from core.retrieval.dense import DenseRetriever

    return isinstance(system, DenseRetriever)


def _is_bm25(system: Retriever) -> bool:
    from core.retrieval.bm25 import BM25Retriever

    return isinstance(system, BM25Retriever)


def dense_vectors(system) -> np.ndarray:
    """The collection vectors a ``DenseRetriever`` serves (its stored ones, else read back from a flat faiss
    index), float32, in the system's id order."""
    vectors = system.doc_vectors
    if vectors is None:
        if system.index.ntotal != len(system.doc_ids) or not hasattr(system.index, "reconstruct_n"):
            raise StudioError(f"{system.name}: its collection vectors are not available to copy into Milvus")
        vectors = system.index.reconstruct_n(0, system.index.ntotal)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.shape[0] != len(system.doc_ids):
        raise StudioError(f"{system.name}: {vectors.shape[0]:,} vectors for {len(system.doc_ids):,} ids")
    return vectors


def _dense_metric(system) -> str:
    return "L2" if getattr(system.spec, "metric", "ip") == "l2" else "IP"


def bm25_query_terms(system, texts: list[str]) -> list[list[str]]:
    """The BM25 system's own query analysis: its ``tokenize`` method when it has one, else the
    ``tokenize`` of its module (what ``BM25Retriever.retrieve`` applies)."""
    own = getattr(system, "tokenize", None) or getattr(sys.modules[type(system).__module__], "tokenize")
    return own(texts)


def bm25_query_vectors(system, texts: list[str]) -> list[dict[int, float] | None]:
    """Term-count vectors {bm25s term id: count} (None: no term in the vocabulary)."""
    out: list[dict[int, float] | None] = []
    for terms in bm25_query_terms(system, texts):
        counts = Counter(system.model.get_tokens_ids(terms))
        out.append({int(t): float(c) for t, c in counts.items()} or None)
    return out


def bm25_document_weights(system) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """bm25s's per-(term, document) weights transposed to documents: (doc_ptr, term ids, weights)."""
    scores = system.model.scores
    data, indices, indptr = (np.asarray(scores[k]) for k in ("data", "indices", "indptr"))
    n_docs = int(scores["num_docs"])
    if n_docs != len(system.doc_ids):
        raise StudioError(f"{system.name}: the bm25s index holds {n_docs:,} documents for {len(system.doc_ids):,} ids")
    terms = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    order = np.argsort(indices, kind="stable")
    docs = indices[order]
    doc_ptr = np.searchsorted(docs, np.arange(n_docs + 1))
    return doc_ptr, terms[order], data[order].astype(np.float32)


def _fingerprint(*parts: object) -> str:
    h = hashlib.sha1()
    for part in parts:
        if isinstance(part, np.ndarray):
            h.update(str((part.dtype, part.shape)).encode())
            h.update(np.ascontiguousarray(part).tobytes())
        else:
            h.update(repr(part).encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()[:12]


def _ids_digest(doc_ids: Sequence[str]) -> str:
    h = hashlib.sha1()
    for d in doc_ids:
        h.update(str(d).encode("utf-8", "surrogatepass") + b"\x00")
    return h.hexdigest()


@dataclass
class CollectionPlan:
    """Everything needed to build (or reuse) a system's collection and to search it."""

    name: str
    parts: list[str]
    doc_ids: np.ndarray
    layout: Layout
    fingerprint: str
    routes: list[Route]
    row_batches: Callable[[int], Iterator[list[dict]]]


def collection_plan(systems: Sequence[Retriever], name: str | None) -> CollectionPlan:
    """What ``systems`` (a dense retriever, BM25, or BM25 + one dense retriever) store in one collection."""
    dense = [s for s in systems if _is_dense(s)]
    lexical = [s for s in systems if _is_bm25(s)]
    if len(dense) + len(lexical) != len(systems) or len(dense) > 1 or len(lexical) > 1 or not systems:
        kinds = ", ".join(type(s).__name__ for s in systems) or "nothing"
        raise StudioError(f"Milvus serves a dense retriever, BM25, or BM25 + one dense retriever; got {kinds}")
    doc_ids = np.asarray(systems[0].doc_ids)
    digest = _ids_digest(doc_ids.tolist())
    for other in systems[1:]:
        if _ids_digest(np.asarray(other.doc_ids).tolist()) != digest:
            raise StudioError(f"{systems[0].name} and {other.name} index different collections: cannot be hybrid")
    routes: list[Route] = []
    key: list[object] = [digest]
    vectors = weights = None
    metric = "IP"
    if lexical:
        bm25 = lexical[0]
        weights = bm25_document_weights(bm25)
        key += ["bm25", getattr(bm25, "config", None), weights[0], weights[1], weights[2]]
        hybrid = bool(dense)
        if getattr(bm25.model, "nonoccurrence_array", None) is not None:
            raise StudioError(f"{bm25.name}: bm25s method {bm25.model.method!r} adds a score for absent terms, which a "
                              "sparse inner product cannot hold; serve lucene, robertson or atire BM25 from Milvus")

        def encode_sparse(texts: list[str], bm25=bm25, hybrid=hybrid) -> list:
            vecs = bm25_query_vectors(bm25, texts)
            return [v if v is not None else ({NO_TERM_DIM: 1.0} if hybrid else None) for v in vecs]

        routes.append(Route("sparse", "IP", encode_sparse))
    if dense:
        system = dense[0]
        vectors = dense_vectors(system)
        metric = _dense_metric(system)
        key += ["dense", getattr(system.encoder, "encoder_id", system.name), metric, vectors]
        routes.insert(0, Route("dense", metric, lambda texts, s=system: np.asarray(s.encode_queries(texts),
                                                                                  dtype=np.float32).tolist()))
    parts = [s.name for s in lexical + dense]
    if name is None:
        name = f"{parts[0]}+{parts[1]}:milvus-rrf" if len(parts) == 2 else parts[0]
    id_bytes = max((len(str(d).encode("utf-8")) for d in doc_ids.tolist()), default=1)
    layout = Layout(vectors.shape[1] if vectors is not None else None, metric, weights is not None,
                    min(65535, max(64, 2 * id_bytes)))
    ids = doc_ids.tolist()

    def row_batches(batch: int) -> Iterator[list[dict]]:
        for start in range(0, len(ids), batch):
            end = min(len(ids), start + batch)
            rows = [{"pk": i, "doc_id": str(ids[i])} for i in range(start, end)]
            if vectors is not None:
                for row, vec in zip(rows, vectors[start:end].tolist()):
                    row["dense"] = vec
            if weights is not None:
                doc_ptr, terms, vals = weights
                for i, row in enumerate(rows, start=start):
                    a, b = doc_ptr[i], doc_ptr[i + 1]
                    row["sparse"] = dict(zip(terms[a:b].tolist(), vals[a:b].tolist())) or {EMPTY_DOC_DIM: 1.0}
            yield rows

    return CollectionPlan(name, parts, doc_ids, layout, _fingerprint(*key, layout), routes, row_batches)


