"""Writing a Milvus collection atomically behind its serving alias.

Collections and atomic rebuilds
The alias ``qrs_<system>__<dataset>__<index>`` is what searches use. Each build writes a new
collection ``<alias>_<fingerprint>_<stamp>`` (fingerprint: sha1 of the encoder id, metric, ids and
vectors, or of the BM25 parameters and weights), fills it, flushes, indexes, loads and counts it,
and only then points the alias at it (``create_alias``/``alter_alias``, one call); the previous
collection is dropped after the switch. A build that fails is dropped (best effort); one that was
killed is never aliased, so never served, and the next build of the same alias drops it. A
collection whose name carries the current fingerprint is reused without writing anything.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from core.retrieval.base import ProgressFn, no_progress
from core.retrieval.milvus_client import (MilvusConfig, MilvusError, MilvusIndex, calls, collection_pattern, connect,
                                          new_stamp, quiet_pymilvus)


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
    pattern = collection_pattern(alias)
    for name in names:
        if pattern.match(name):
            with calls(config, f"describing {name}"):
                aliases = client.list_aliases(name, timeout=config.timeout).get("aliases", [])
            if alias in aliases:
                return name
    return None


def row_count(client, config: MilvusConfig, name: str) -> int:
    """The rows collection ``name`` holds (``count(*)``)."""
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
    name = f"{alias}_{fingerprint}_{new_stamp()}"
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
        count = row_count(client, config, name)
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
            with quiet_pymilvus():
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
    pattern = collection_pattern(alias)
    with calls(config, f"dropping old collections of {alias}"):
        for other in client.list_collections(timeout=config.timeout):
            if other != keep and pattern.match(other):
                client.drop_collection(other, timeout=config.timeout)


