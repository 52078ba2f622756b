"""A throw-away ``milvus-lite server`` for the Milvus tests (like ``tests/pg_server.py`` for PostgreSQL).

``milvus-lite server --data-dir <tmp> --host 127.0.0.1 --port <free>``, started once per test session,
ready when a client call answers, stopped at the end. Outside CI a server that cannot start skips the
Milvus tests with the reason; with ``CI`` set they fail instead (milvus-lite is in requirements.txt).
"""
from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"Milvus tests are mandatory in CI: {reason}")
    pytest.skip(f"no Milvus server to test against: {reason} (pip install milvus-lite pymilvus)")


@pytest.fixture(scope="session")
def milvus_uri() -> Iterator[str]:
    """The URI of a Milvus Lite server on 127.0.0.1 for the whole test session."""
    try:
        import pymilvus  # noqa: F401

        from core.errors import StudioError
        from core.retrieval.milvus_server import LocalMilvusServer
    except ImportError as exc:
        _unavailable(f"cannot import {exc.name}")
    server = LocalMilvusServer(ready_timeout=60)
    try:
        uri = server.start()
    except StudioError as exc:
        server.stop()
        _unavailable(str(exc))
    try:
        yield uri
    finally:
        server.stop()
