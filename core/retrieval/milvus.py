"""Milvus as a serving backend for an already loaded first stage: dense vectors, BM25, and their RRF hybrid.

One client (``pymilvus``) for Milvus Lite, a standalone server or a cluster: only the URI and the token
change (``QRS_MILVUS_URI``, ``QRS_MILVUS_TOKEN``; ``milvus_config()``). The entry point is

    ``milvus_retriever(system, dataset_name, uri=None, token=None, index="flat", rebuild=False,
    progress=fn) -> MilvusRetriever``

where ``system`` is a loaded ``DenseRetriever`` (any bi-encoder: minilm, densetrans, dual-encoder,
sdml-cnn, glove-mean), a ``BM25Retriever``, or a pair of them (BM25 + dense) for the hybrid.

What is stored: ``core.retrieval.milvus_plan``; the connection, index presets and errors:
``core.retrieval.milvus_client``; atomic rebuilds behind the alias: ``core.retrieval.milvus_collections``.

Ranks, not raw scores, are what carry over between Milvus Lite, a server and faiss; ties (equal scores)
are ordered by collection position (client side), so results are deterministic.
"""
from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from core.retrieval.base import Hits, ProgressFn, Retriever, no_progress, order_ties, tie_depth
from core.retrieval.milvus_client import (MAX_LIMIT, MilvusConfig, MilvusIndex, alias_name, calls, connect, index_spec,
                                          milvus_config)
from core.retrieval.milvus_collections import current_collection, row_count, write_collection
from core.retrieval.milvus_plan import Route, collection_plan

HYBRID_DEPTH = 100
RRF_K = 60


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
    plan = collection_plan(systems, None)
    label = name or (plan.name if ":milvus-rrf" in plan.name else f"{plan.name}:milvus-{spec.name}")
    alias = alias_name("+".join(plan.parts) + ("-rrf" if len(plan.parts) > 1 else ""), dataset_name, spec.name)
    client = connect(config)
    try:
        current = current_collection(client, config, alias)
        fresh = current is not None and current.startswith(f"{alias}_{plan.fingerprint}_")
        if fresh and not rebuild:
            fresh = row_count(client, config, current) == len(plan.doc_ids)
    finally:
        client.close()
    if rebuild or not fresh:
        write_collection(config, alias, plan.fingerprint, plan.layout, spec,
                         plan.row_batches(config.insert_batch), len(plan.doc_ids), progress)
    else:
        progress(1.0, f"Milvus: {alias} is current ({current})")
    return MilvusRetriever(label, config, alias, plan.routes, spec, plan.doc_ids)
