"""Milvus as a serving backend for an already loaded first stage: dense vectors, BM25, and their RRF hybrid.

One client (``pymilvus``) for Milvus Lite, a standalone server or a cluster: only the URI and the token
change (``QRS_MILVUS_URI``, ``QRS_MILVUS_TOKEN``; ``milvus_config()``). The entry point is

    ``milvus_retriever(system, dataset_name, uri=None, token=None, index="flat", rebuild=False,
    progress=fn) -> MilvusRetriever``

where ``system`` is a loaded ``DenseRetriever`` (any bi-encoder: minilm, densetrans, dual-encoder,
sdml-cnn, glove-mean), a ``BM25Retriever``, or a pair of them (BM25 + dense) for the hybrid.

What is stored
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

Indexes (``MILVUS_INDEXES``): ``flat`` = Milvus ``FLAT`` (exact); ``hnsw`` = ``HNSW`` with M = 32,
efConstruction = 40, search ef = max(64, limit) (faiss's ``HNSW32,Flat`` with its default efConstruction
and the ``hnsw`` preset's efSearch 64). BM25 is always ``SPARSE_INVERTED_INDEX`` with ``IP`` (exact).

Collections and atomic rebuilds
    The alias ``qrs_<system>__<dataset>__<index>`` is what searches use. Each build writes a new
    collection ``<alias>_<fingerprint>_<stamp>`` (fingerprint: sha1 of the encoder id, metric, ids and
    vectors, or of the BM25 parameters and weights), fills it, flushes, indexes, loads and counts it,
    and only then points the alias at it (``create_alias``/``alter_alias``, one call); the previous
    collection is dropped after the switch. A build that fails is dropped (best effort); one that was
    killed is never aliased, so never served, and the next build of the same alias drops it. A
    collection whose name carries the current fingerprint is reused without writing anything.

Errors: anything from the server or the network becomes ``MilvusError`` (a ``StudioError``) with one
line naming the URI; connecting gives up after ``MilvusConfig.timeout`` seconds (default 5).

Ranks, not raw scores, are what carry over between Milvus Lite, a server and faiss; ties (equal scores)
are ordered by collection position (client side), so results are deterministic.
"""
from __future__ import annotations

import hashlib
import logging
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from core.errors import StudioError
from core.retrieval.base import Hits, ProgressFn, Retriever, no_progress, order_ties, tie_depth
from core.settings import DEFAULT_MILVUS_TIMEOUT, settings

DEFAULT_TIMEOUT = DEFAULT_MILVUS_TIMEOUT
HYBRID_DEPTH = 100
RRF_K = 60
EMPTY_DOC_DIM = 2**32 - 2  # a document without terms (never in a query): Milvus refuses empty sparse rows
NO_TERM_DIM = 2**32 - 3  # a hybrid query without known terms: matches no document, so RRF is dense-only
PREFIX = "qrs"
MAX_LIMIT = 16384  # a Milvus server's largest top-k per search
# pymilvus pings every 10 s; a gRPC server with default settings (milvus-lite) answers pings more often than
# every 5 min with GOAWAY "too_many_pings", which cut a long create_index and made pymilvus retry it
GRPC_OPTIONS = {"grpc.keepalive_time_ms": 360_000, "grpc.keepalive_permit_without_calls": False}


class MilvusError(StudioError):
    """A Milvus call failed (server down, unreachable, refused the request); one line naming the URI."""


@dataclass(frozen=True)
class MilvusConfig:
    """Where the Milvus server is: ``uri`` (``http://host:19530``, a cluster's proxy, or a Lite ``.db``
    file), ``token`` (``user:password`` or an API key; empty without authentication), connect/control
    ``timeout`` and ``search_timeout`` in seconds, rows per ``insert`` call."""

    uri: str
    token: str = field(default="", repr=False)
    timeout: float = DEFAULT_TIMEOUT
    search_timeout: float = 120.0
    insert_batch: int = 5000


def milvus_config(uri: str | None = None, token: str | None = None) -> MilvusConfig:
    """The configured server: arguments first, else ``QRS_MILVUS_URI`` / ``QRS_MILVUS_TOKEN`` /
    ``QRS_MILVUS_TIMEOUT``; ``StudioError`` when no URI is set anywhere."""
    uri = (uri or settings().milvus_uri).strip()
    if not uri:
        raise StudioError(f"no Milvus server configured: set QRS_MILVUS_URI (e.g. http://127.0.0.1:19530)")
    token = token if token is not None else settings().milvus_token
    return MilvusConfig(uri, token, settings().milvus_timeout)


@dataclass(frozen=True)
class MilvusIndex:
    """A Milvus dense index: ``flat`` (exact) or ``hnsw`` (M, efConstruction; ef at search time)."""

    name: str
    M: int = 32
    ef_construction: int = 40
    ef: int = 64

    @property
    def index_type(self) -> str:
        return {"flat": "FLAT", "hnsw": "HNSW"}[self.name]

    def build_params(self) -> dict:
        return {"M": self.M, "efConstruction": self.ef_construction} if self.name == "hnsw" else {}

    def search_params(self, metric: str, limit: int) -> dict:
        params = {"ef": max(self.ef, limit)} if self.name == "hnsw" else {}
        return {"metric_type": metric, "params": params}

    def describe(self) -> str:
        if self.name == "hnsw":
            return f"Milvus HNSW (M={self.M}, efConstruction={self.ef_construction}, ef=max({self.ef}, k))"
        return "Milvus FLAT (exact)"


MILVUS_INDEXES = {"flat": MilvusIndex("flat"), "hnsw": MilvusIndex("hnsw")}


def index_spec(index: str | MilvusIndex) -> MilvusIndex:
    """``"flat"``/``"hnsw"`` (or a ``MilvusIndex``) -> ``MilvusIndex``; unknown names list the known ones."""
    if isinstance(index, MilvusIndex):
        return index
    if index not in MILVUS_INDEXES:
        from core.errors import UnknownNameError

        raise UnknownNameError("Milvus index", str(index), list(MILVUS_INDEXES))
    return MILVUS_INDEXES[index]


# ----------------------------------------------------------------------------- connection and errors
def _one_line(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return " ".join(str(message).split())[:300]


_QUIET_LOCK = threading.Lock()
_QUIET = {"depth": 0, "level": logging.NOTSET}


@contextmanager
def _quiet() -> Iterator[None]:
    """pymilvus logs every failed RPC with a traceback; the caller gets one ``MilvusError`` line instead.
    Reference-counted, so overlapping calls from several threads restore the level once, at the end."""
    logger = logging.getLogger("pymilvus")
    with _QUIET_LOCK:
        if _QUIET["depth"] == 0:
            _QUIET["level"] = logger.level
            logger.setLevel(logging.CRITICAL)
        _QUIET["depth"] += 1
    try:
        yield
    finally:
        with _QUIET_LOCK:
            _QUIET["depth"] -= 1
            if _QUIET["depth"] == 0:
                logger.setLevel(_QUIET["level"])


@contextmanager
def calls(config: MilvusConfig, action: str) -> Iterator[None]:
    """Run Milvus calls; any client, RPC or network error becomes one ``MilvusError`` line naming the URI."""
    try:
        with _quiet():
            yield
    except StudioError:
        raise
    except Exception as exc:  # pymilvus raises MilvusException, grpc errors, ConnectionError, ValueError...
        text = _one_line(exc)
        if "connect" in text.lower() or "unavailable" in text.lower() or "UNIMPLEMENTED" in text:
            raise MilvusError(f"Milvus at {config.uri} is unreachable ({action}): {text}") from None
        raise MilvusError(f"Milvus at {config.uri}: {action} failed: {text}") from None


def connect(config: MilvusConfig):
    """A ``MilvusClient`` of its own (not shared), checked with one call; ``MilvusError`` within
    ``config.timeout`` seconds when the server is down or unreachable."""
    from pymilvus import MilvusClient

    with calls(config, "connecting"):
        client = MilvusClient(uri=config.uri, token=config.token, timeout=config.timeout, dedicated=True,
                              grpc_options=GRPC_OPTIONS)
        client.list_collections(timeout=config.timeout)
    return client


def ping(config: MilvusConfig) -> str:
    """The server's version string (``milvus_lite-3.2.2``, ``v2.6.x``); ``MilvusError`` when unreachable."""
    client = connect(config)
    try:
        with calls(config, "asking the server version"):
            return str(client.get_server_version(timeout=config.timeout))
    finally:
        client.close()


# ----------------------------------------------------------------------------- names
def _clean(text: str, limit: int = 60) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:limit] or "x"


def alias_name(system: str, dataset: str, index: str) -> str:
    """The serving alias of (system, dataset, index): ``qrs_<system>__<dataset>__<index>``."""
    return f"{PREFIX}_{_clean(system)}__{_clean(dataset)}__{_clean(index, 16)}"


def _stamp() -> str:
    return np.base_repr(time.time_ns(), 36).lower()


def _collection_pattern(alias: str) -> re.Pattern:
    return re.compile(re.escape(alias) + r"_([0-9a-f]{12})_([0-9a-z]+)$")


# ----------------------------------------------------------------------------- writing collections
@dataclass(frozen=True)
class Layout:
    """The fields of a collection: ``pk`` (INT64, the collection position), ``doc_id`` (VARCHAR), a
    ``dense`` FLOAT_VECTOR of ``dim`` with ``metric`` when ``dim``, a ``sparse`` vector when ``sparse``."""

    dim: int | None
    metric: str = "IP"
    sparse: bool = False
    id_max_length: int = 512


def _schema(layout: Layout):
    from pymilvus import DataType, MilvusClient

    schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("pk", DataType.INT64, is_primary=True)
    schema.add_field("doc_id", DataType.VARCHAR, max_length=layout.id_max_length)
    if layout.dim:
        schema.add_field("dense", DataType.FLOAT_VECTOR, dim=layout.dim)
    if layout.sparse:
        schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    return schema


def _index_params(client, layout: Layout, index: MilvusIndex):
    params = client.prepare_index_params()
    if layout.dim:
        params.add_index("dense", index_type=index.index_type, metric_type=layout.metric,
                         params=index.build_params())
    if layout.sparse:
        params.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="IP", params={})
    return params


def current_collection(client, config: MilvusConfig, alias: str) -> str | None:
    """The collection ``alias`` points at, or None when the alias does not exist."""
    with calls(config, f"listing collections for {alias}"):
        names = client.list_collections(timeout=config.timeout)
    pattern = _collection_pattern(alias)
    for name in names:
        if pattern.match(name):
            with calls(config, f"describing {name}"):
                aliases = client.list_aliases(name, timeout=config.timeout).get("aliases", [])
            if alias in aliases:
                return name
    return None


def _row_count(client, config: MilvusConfig, name: str) -> int:
    with calls(config, f"counting {name}"):
        rows = client.query(name, filter="", output_fields=["count(*)"], timeout=config.search_timeout,
                            consistency_level="Strong")
    return int(rows[0]["count(*)"])


def write_collection(
    config: MilvusConfig,
    alias: str,
    fingerprint: str,
    layout: Layout,
    index: MilvusIndex,
    batches: Iterable[list[dict]],
    expected_rows: int,
    progress: ProgressFn = no_progress,
) -> str:
    """Write a new collection from row batches, then switch ``alias`` to it in one call; returns its name.

    The collection is flushed, indexed, loaded and counted (``expected_rows``) before the switch; on any
    failure it is dropped (best effort) and ``MilvusError`` names the URI. After the switch the
    previous collection of the alias and leftovers of killed builds are dropped.
    """
    client = connect(config)
    name = f"{alias}_{fingerprint}_{_stamp()}"
    try:
        with calls(config, f"creating {name}"):
            client.create_collection(name, schema=_schema(layout), timeout=config.timeout,
                                     consistency_level="Strong")
        written = 0
        for rows in batches:
            with calls(config, f"inserting into {name}"):
                client.insert(name, rows, timeout=config.search_timeout)
            written += len(rows)
            progress(0.9 * written / max(1, expected_rows), f"Milvus: {written:,}/{expected_rows:,} rows written")
        progress(0.9, f"Milvus: indexing {written:,} rows ({index.describe() if layout.dim else 'sparse IP'})")
        with calls(config, f"flushing and indexing {name}"):
            client.flush(name, timeout=config.search_timeout)
            try:
                client.create_index(name, _index_params(client, layout, index), timeout=3600)
            except Exception as exc:  # a retried create_index whose first attempt went through
                if "already exists" not in str(exc):
                    raise
            client.load_collection(name, timeout=3600)
        count = _row_count(client, config, name)
        if count != expected_rows:
            raise MilvusError(f"Milvus at {config.uri}: {name} holds {count:,} rows, expected {expected_rows:,}; "
                              "not served")
        old = current_collection(client, config, alias)
        with calls(config, f"switching alias {alias} to {name}"):
            if old is None:
                client.create_alias(name, alias, timeout=config.timeout)
            else:
                client.alter_alias(name, alias, timeout=config.timeout)
    except BaseException:
        try:
            with _quiet():
                client.drop_collection(name, timeout=config.timeout)
        except Exception:  # noqa: BLE001 - server gone: the unaliased collection is dropped by the next build
            pass
        client.close()
        raise
    try:
        _drop_stale(client, config, alias, keep=name)
    finally:
        client.close()
    progress(1.0, f"Milvus: {alias} -> {name} ({count:,} rows)")
    return name


def _drop_stale(client, config: MilvusConfig, alias: str, keep: str) -> None:
    """Drop this alias's other collections (the one it pointed at before, leftovers of killed builds)."""
    pattern = _collection_pattern(alias)
    with calls(config, f"dropping old collections of {alias}"):
        for other in client.list_collections(timeout=config.timeout):
            if other != keep and pattern.match(other):
                client.drop_collection(other, timeout=config.timeout)


# ----------------------------------------------------------------------------- what a system stores
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
class _Plan:
    """Everything needed to build (or reuse) a system's collection and to search it."""

    name: str
    parts: list[str]
    doc_ids: np.ndarray
    layout: Layout
    fingerprint: str
    routes: list[Route]
    row_batches: Callable[[int], Iterator[list[dict]]]


def _plan(systems: Sequence[Retriever], name: str | None) -> _Plan:
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

    return _Plan(name, parts, doc_ids, layout, _fingerprint(*key, layout), routes, row_batches)


# ----------------------------------------------------------------------------- the retriever
class MilvusRetriever(Retriever):
    """Batched ``retrieve(texts, k) -> Hits`` served by Milvus through the alias (never a collection name),
    so a rebuild switches every retriever over at once. ``doc_ids`` maps ``pk`` (the collection position)
    back to ids locally; without it the ``doc_id`` field is fetched with each hit."""

    def __init__(self, name: str, config: MilvusConfig, alias: str, routes: list[Route], index: MilvusIndex,
                 doc_ids: np.ndarray | None = None, rrf_k: int = RRF_K, hybrid_depth: int = HYBRID_DEPTH) -> None:
        self.name, self.config, self.alias, self.routes, self.index = name, config, alias, routes, index
        self.doc_ids = None if doc_ids is None else np.asarray(doc_ids)
        self.rrf_k, self.hybrid_depth = rrf_k, hybrid_depth
        self.batch_size = 256
        self.client = connect(config)
        with calls(config, "asking the server version"):
            version = str(self.client.get_server_version(timeout=config.timeout))
        self.lite = "lite" in version.lower()  # Milvus Lite reports L2 as ||q-d||, a server as ||q-d||^2
        self.server_version = version

    def describe(self) -> dict:
        """What serves this system (for any output that names a system's index)."""
        collection = current_collection(self.client, self.config, self.alias)
        return {"backend": "milvus", "uri": self.config.uri, "server": self.server_version, "alias": self.alias,
                "collection": collection, "index": self.index.describe(),
                "routes": [f"{r.field}:{r.metric}" for r in self.routes],
                "fusion": f"RRF k={self.rrf_k}, depth {self.hybrid_depth}" if len(self.routes) > 1 else None}

    def close(self) -> None:
        self.client.close()

    def _score(self, route: Route, distance: float) -> float:
        if route.metric == "L2":
            return -(distance * distance if self.lite else distance)  # faiss convention: -||q-d||^2
        return float(distance)

    def retrieve(self, texts: list[str], k: int) -> Hits:
        ids: list[list[str]] = [[] for _ in texts]
        scores: list[list[float]] = [[] for _ in texts]
        if not texts or k <= 0:
            return Hits(ids, scores)
        k = min(k, MAX_LIMIT)
        encoded = [route.encode(texts) for route in self.routes]
        asked = [i for i in range(len(texts)) if all(e[i] is not None for e in encoded)]
        if not asked:
            return Hits(ids, scores)
        fields = ["doc_id"] if self.doc_ids is None else []
        sparse = len(self.routes) == 1 and self.routes[0].field != "dense"
        # BM25: fetch past rank k and order the tie at rank k like BM25Retriever does (base.order_ties)
        limit = min(tie_depth(k), MAX_LIMIT) if sparse else k
        t0 = time.perf_counter()
        with calls(self.config, f"searching {self.alias}"):
            if len(self.routes) == 1:
                route = self.routes[0]
                result = self.client.search(
                    self.alias, data=[encoded[0][i] for i in asked], anns_field=route.field, limit=limit,
                    search_params=self.index.search_params(route.metric, k) if route.field == "dense"
                    else {"metric_type": "IP", "params": {}},
                    output_fields=fields or ["pk"], timeout=self.config.search_timeout)
            else:
                from pymilvus import AnnSearchRequest, RRFRanker

                depth = max(self.hybrid_depth, k)
                requests = [AnnSearchRequest(
                    data=[enc[i] for i in asked], anns_field=route.field,
                    param=self.index.search_params(route.metric, depth) if route.field == "dense"
                    else {"metric_type": "IP", "params": {}}, limit=depth)
                    for route, enc in zip(self.routes, encoded)]
                result = self.client.hybrid_search(self.alias, requests, RRFRanker(self.rrf_k), limit=k,
                                                   output_fields=fields or ["pk"],
                                                   timeout=self.config.search_timeout)
        seconds = (time.perf_counter() - t0) / len(asked)
        single = self.routes[0] if len(self.routes) == 1 else None
        for row, hits in zip(asked, result):
            found = [(self._score(single, h["distance"]) if single else float(h["distance"]), int(h["pk"]),
                      h["entity"].get("doc_id") if fields else None) for h in hits]
            if sparse:
                found = [found[j] for j in order_ties([t[1] for t in found], [t[0] for t in found], k)]
            else:
                found.sort(key=lambda t: (-t[0], t[1]))  # ties: collection order, deterministic
            ids[row] = [str(d) if d is not None else str(self.doc_ids[pk]) for _, pk, d in found]
            scores[row] = [s for s, _, _ in found]
        return Hits(ids, scores, [{"milvus_seconds": seconds}] * len(texts))


def milvus_retriever(
    system: Retriever | Sequence[Retriever],
    dataset_name: str,
    uri: str | None = None,
    token: str | None = None,
    index: str = "flat",
    rebuild: bool = False,
    name: str | None = None,
    progress: ProgressFn = no_progress,
) -> MilvusRetriever:
    """Serve a loaded first stage from Milvus: copy its collection (unless the alias already points at a
    collection with the same fingerprint, or ``rebuild``), then return a retriever over the alias.

    ``system``: a ``DenseRetriever``, a ``BM25Retriever``, or ``[bm25, dense]`` for the RRF hybrid.
    ``uri``/``token`` default to ``QRS_MILVUS_URI``/``QRS_MILVUS_TOKEN``; ``index``: ``flat`` or ``hnsw``
    (dense field; BM25 is always exact). The name is the system's own (``glove-mean``) plus
    ``:milvus-<index>``, or ``bm25+<dense>:milvus-rrf``. ``MilvusError`` (one line naming the URI) when the
    server is down or refuses; nothing half-written is ever served.
    """
    config = milvus_config(uri, token)
    spec = index_spec(index)
    systems = list(system) if isinstance(system, (list, tuple)) else [system]
    plan = _plan(systems, None)
    label = name or (plan.name if ":milvus-rrf" in plan.name else f"{plan.name}:milvus-{spec.name}")
    alias = alias_name("+".join(plan.parts) + ("-rrf" if len(plan.parts) > 1 else ""), dataset_name, spec.name)
    client = connect(config)
    try:
        current = current_collection(client, config, alias)
        fresh = current is not None and current.startswith(f"{alias}_{plan.fingerprint}_")
        if fresh and not rebuild:
            fresh = _row_count(client, config, current) == len(plan.doc_ids)
    finally:
        client.close()
    if rebuild or not fresh:
        write_collection(config, alias, plan.fingerprint, plan.layout, spec,
                         plan.row_batches(config.insert_batch), len(plan.doc_ids), progress)
    else:
        progress(1.0, f"Milvus: {alias} is current ({current})")
    return MilvusRetriever(label, config, alias, plan.routes, spec, plan.doc_ids)
