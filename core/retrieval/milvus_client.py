"""Milvus connection: where the server is (``MilvusConfig``, ``milvus_config``), the dense index presets, a checked
client, one-line errors, and the serving alias names.

Indexes (``MILVUS_INDEXES``): ``flat`` = Milvus ``FLAT`` (exact); ``hnsw`` = ``HNSW`` with M = 32,
efConstruction = 40, search ef = max(64, limit) (faiss's ``HNSW32,Flat`` with its default efConstruction
and the ``hnsw`` preset's efSearch 64). BM25 is always ``SPARSE_INVERTED_INDEX`` with ``IP`` (exact).

Errors: anything from the server or the network becomes ``MilvusError`` (a ``StudioError``) with one
line naming the URI; connecting gives up after ``MilvusConfig.timeout`` seconds (default 5).
"""
from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from core.errors import StudioError
from core.settings import DEFAULT_MILVUS_TIMEOUT, settings

DEFAULT_TIMEOUT = DEFAULT_MILVUS_TIMEOUT
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
def quiet_pymilvus() -> Iterator[None]:
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
        with quiet_pymilvus():
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


def new_stamp() -> str:
    """A build stamp (base-36 nanoseconds) that orders the collections of one alias by time."""
    return np.base_repr(time.time_ns(), 36).lower()


def collection_pattern(alias: str) -> re.Pattern:
    """The names of the collections built for ``alias``: ``<alias>_<fingerprint>_<stamp>``."""
    return re.compile(re.escape(alias) + r"_([0-9a-f]{12})_([0-9a-z]+)$")


