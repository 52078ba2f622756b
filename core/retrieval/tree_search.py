"""The k-means tree of tree-search-bert-guo.md §3.3-3.4 with batched top-down beam search.

Build (§3.3): the collection embeddings are clustered recursively with faiss k-means (branching factor
K). Every cluster is a node whose vector is its k-means centre (spherical k-means: the centres are
L2-normalised, so inner product ranks them like cosine/Euclidean distance); a cluster of at most
``leaf_size`` vectors stops the recursion and its questions become the node's children (the leaves
hold question rows). ``balanced=True`` caps each child at ⌈n/K⌉ members (capacity-constrained
reassignment after k-means) so leaves stay small and the tree stays shallow — one of our extensions.

Search (§3.4): from the root, every child of the nodes in the beam is scored (one distance computation
each); questions reached are scored and kept as candidates; the best ``beam`` child nodes form the next
level's beam (the paper uses beam = N = 20). ``probes`` (an extension, default K = off) lets each beam
node pass at most ``probes`` of its children to the next level, which spreads the beam over more
branches. The top-N candidates are returned with their scores and the exact number of distance
computations per query (Table 4).

Layout: nodes are rows of ``centroids``; ``children[node]`` lists entries padded with -1, where an entry
``e < n_nodes`` is a node and ``e >= n_nodes`` is question row ``e - n_nodes``. ``reps[node]`` holds the
(up to 5) question rows nearest to the node's centre (interaction-based search, §3.3).
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import faiss
import numpy as np

from core.artifacts import config_from_dict
from core.errors import MissingArtifactError

MAX_REPS = 5


@dataclass(frozen=True)
class TreeConfig:
    """Tree shape; paper defaults: K ∈ {5, 8, 10} (§4.3), leaves of at most K questions."""

    branching: int = 8
    leaf_size: int = 0  # 0 = K (a cluster no larger than K is not split again)
    balanced: bool = False
    niter: int = 20
    seed: int = 13

    @property
    def leaf_cap(self) -> int:
        return self.leaf_size or self.branching


@dataclass
class TreeResult:
    """Beam-search output: question rows (-1 padded), scores, distance computations per query."""

    rows: np.ndarray  # (B, N) int64
    scores: np.ndarray  # (B, N) float32
    computations: np.ndarray  # (B,) int64


def _kmeans_assign(x: np.ndarray, k: int, niter: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """faiss spherical k-means on ``x``: (centres (k, d), assignment (n,)).

    Small clusters run single-threaded: OpenMP start-up costs ~100x the work below a few thousand points.
    """
    threads = faiss.omp_get_max_threads()
    if len(x) < 20000:
        faiss.omp_set_num_threads(1)
    try:
        return _kmeans(x, k, niter, seed)
    finally:
        faiss.omp_set_num_threads(threads)


def _kmeans(x: np.ndarray, k: int, niter: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    km = faiss.Kmeans(x.shape[1], k, niter=niter, seed=seed, spherical=True, verbose=False,
                      min_points_per_centroid=1, max_points_per_centroid=1 << 30)
    km.train(x)
    _, assign = km.index.search(x, 1)
    return km.centroids.copy(), assign[:, 0].astype(np.int64)


def _balance(x: np.ndarray, centres: np.ndarray, cap: int) -> np.ndarray:
    """Capacity-constrained assignment: each centre keeps at most ``cap`` points, overflow goes to the
    next-best centre with room (rounds over centres; vectorised)."""
    n, k = len(x), len(centres)
    sims = x @ centres.T
    assign = np.full(n, -1, dtype=np.int64)
    load = np.zeros(k, dtype=np.int64)
    blocked = np.zeros((n, k), dtype=bool)
    for _ in range(k):
        todo = np.flatnonzero(assign < 0)
        if len(todo) == 0:
            break
        s = np.where(blocked[todo] | (load >= cap)[None, :], -np.inf, sims[todo])
        best = s.argmax(1)
        for c in np.unique(best):
            members = todo[best == c]
            room = cap - load[c]
            keep = members[np.argsort(-sims[members, c], kind="stable")[:room]]
            assign[keep] = c
            load[c] += len(keep)
            blocked[members, c] = True
    return assign


class KMeansTree:
    """Recursive k-means tree over L2-normalised vectors with beam search (see module docstring)."""

    def __init__(self, config: TreeConfig, centroids: np.ndarray, children: np.ndarray, reps: np.ndarray,
                 depth: np.ndarray, vectors: np.ndarray) -> None:
        self.config = config
        self.centroids = np.ascontiguousarray(centroids, dtype=np.float32)
        self.children = children
        self.reps = reps
        self.depth = depth
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.n_nodes = len(centroids)
        self.table = np.concatenate([self.centroids, self.vectors])  # entry -> vector

    # ------------------------------------------------------------------ build
    @classmethod
    def build(cls, vectors: np.ndarray, config: TreeConfig = TreeConfig()) -> KMeansTree:
        """Cluster ``vectors`` (n, d) recursively (faiss k-means); deterministic for a seed."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        n = len(vectors)
        if n == 0:
            raise ValueError("cannot build a tree over an empty collection")
        K, cap = config.branching, config.leaf_cap
        if K < 2:
            raise ValueError("branching factor K must be at least 2")
        centroids: list[np.ndarray] = []
        node_children: list[list[tuple[str, int]]] = []
        reps: list[np.ndarray] = []
        depth: list[int] = []

        def new_node(members: np.ndarray, centre: np.ndarray, level: int) -> int:
            node = len(centroids)
            centroids.append(centre)
            node_children.append([])
            sims = vectors[members] @ centre
            reps.append(members[np.argsort(-sims, kind="stable")[:MAX_REPS]])
            depth.append(level)
            return node

        root_centre = vectors.mean(0)
        root_centre /= max(float(np.linalg.norm(root_centre)), 1e-12)
        stack = [(new_node(np.arange(n), root_centre, 0), np.arange(n))]
        while stack:
            node, members = stack.pop()
            level = depth[node]
            if len(members) <= cap:
                node_children[node] = [("item", int(r)) for r in members]
                continue
            k = min(K, len(members))
            x = vectors[members]
            centres, assign = _kmeans_assign(x, k, config.niter, config.seed + node)
            if config.balanced:
                assign = _balance(x, centres, math.ceil(len(members) / k))
            groups = [members[assign == c] for c in range(k)]
            if max(len(g) for g in groups) == len(members):  # degenerate (identical vectors): split evenly
                groups = np.array_split(members, k)
                centres = np.stack([vectors[g].mean(0) for g in groups])
            for c, group in enumerate(groups):
                if len(group) == 0:
                    continue
                if len(group) == 1:
                    node_children[node].append(("item", int(group[0])))
                    continue
                centre = centres[c] / max(float(np.linalg.norm(centres[c])), 1e-12)
                child = new_node(group, centre.astype(np.float32), level + 1)
                node_children[node].append(("node", child))
                stack.append((child, group))
        n_nodes = len(centroids)
        width = max(len(c) for c in node_children)
        children = np.full((n_nodes, width), -1, dtype=np.int64)
        for i, kids in enumerate(node_children):
            children[i, : len(kids)] = [e if kind == "node" else n_nodes + e for kind, e in kids]
        rep = np.full((n_nodes, MAX_REPS), -1, dtype=np.int64)
        for i, r in enumerate(reps):
            rep[i, : len(r)] = r
        return cls(config, np.stack(centroids), children, rep, np.asarray(depth, dtype=np.int64), vectors)

    # ------------------------------------------------------------------ stats
    @property
    def n_items(self) -> int:
        return len(self.vectors)

    def stats(self) -> dict[str, float]:
        """Shape of the tree: nodes, depth, leaf sizes."""
        is_item = self.children >= self.n_nodes
        items_per_node = is_item.sum(1)
        leafy = items_per_node > 0
        return {"nodes": int(self.n_nodes), "items": int(self.n_items), "max_depth": int(self.depth.max()) + 1,
                "max_children": int(self.children.shape[1]),
                "mean_items_per_leaf_node": float(items_per_node[leafy].mean()) if leafy.any() else 0.0}

    # ------------------------------------------------------------------ search
    def search(self, queries: np.ndarray, n: int = 20, beam: int = 20, probes: int | None = None,
               chunk_bytes: int = 64 << 20) -> TreeResult:
        """Top-``n`` question rows for each query vector by beam search (batched over queries)."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if queries.ndim != 2 or queries.shape[1] != self.vectors.shape[1]:
            raise ValueError(f"queries must be (B, {self.vectors.shape[1]}), got {queries.shape}")
        width = self.children.shape[1]
        per_query = max(1, beam) * width * queries.shape[1] * 4
        step = max(1, chunk_bytes // per_query)
        parts = [self._search_chunk(queries[s : s + step], n, beam, probes) for s in range(0, len(queries), step)]
        if not parts:
            return TreeResult(np.zeros((0, n), np.int64), np.zeros((0, n), np.float32), np.zeros(0, np.int64))
        return TreeResult(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("rows", "scores", "computations")))

    def _search_chunk(self, q: np.ndarray, n: int, beam: int, probes: int | None) -> TreeResult:
        B = len(q)
        frontier = np.zeros((B, 1), dtype=np.int64)  # the root
        count = np.zeros(B, dtype=np.int64)
        pool_rows: list[np.ndarray] = []
        pool_scores: list[np.ndarray] = []
        while (frontier >= 0).any():
            entries = np.where(frontier[..., None] >= 0, self.children[frontier.clip(0)], -1)  # (B, W, C)
            valid = entries >= 0
            scores = np.einsum("bd,bwcd->bwc", q, self.table[entries.clip(0)], optimize=True)
            scores = np.where(valid, scores, -np.inf).astype(np.float32)
            count += valid.sum((1, 2))
            is_item = entries >= self.n_nodes
            flat_entries = entries.reshape(B, -1)
            item_mask = (valid & is_item).reshape(B, -1)
            pool_rows.append(np.where(item_mask, flat_entries - self.n_nodes, -1))
            pool_scores.append(np.where(item_mask, scores.reshape(B, -1), -np.inf))
            node_scores = np.where(valid & ~is_item, scores, -np.inf)
            frontier = select_beam(node_scores, entries, beam, probes)
        rows = np.concatenate(pool_rows, 1)
        vals = np.concatenate(pool_scores, 1)
        top_rows, top_scores = top_n(rows, vals, n)
        return TreeResult(top_rows, top_scores, count)

    # ------------------------------------------------------------------ persistence
    def save(self, folder: str | Path) -> None:
        """Atomic save: ``tree.npz`` (arrays) + ``tree.json`` (config); vectors are stored too."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tree.", suffix=".npz")
        os.close(fd)
        np.savez(tmp, centroids=self.centroids, children=self.children, reps=self.reps, depth=self.depth,
                 vectors=self.vectors)
        os.replace(tmp, folder / "tree.npz")
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tree.", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(asdict(self.config), fh, indent=2)
        os.replace(tmp, folder / "tree.json")

    @classmethod
    def load(cls, folder: str | Path, command: str = "rebuild the tree") -> KMeansTree:
        folder = Path(folder)
        if not (folder / "tree.npz").is_file() or not (folder / "tree.json").is_file():
            raise MissingArtifactError(f"the k-means tree in {folder.name}", command)
        try:
            config = config_from_dict(TreeConfig, json.loads((folder / "tree.json").read_text(encoding="utf-8")))
            with np.load(folder / "tree.npz", allow_pickle=False) as z:
                return cls(config, z["centroids"], z["children"], z["reps"], z["depth"], z["vectors"])
        except (OSError, ValueError, KeyError, json.JSONDecodeError) as exc:
            raise MissingArtifactError(f"the k-means tree in {folder.name}", command, f"corrupt ({exc})") from None


def select_beam(node_scores: np.ndarray, entries: np.ndarray, beam: int, probes: int | None) -> np.ndarray:
    """Next beam: the best ``beam`` child nodes per query (each parent passes ≤ ``probes`` children).

    ``node_scores`` (B, W, C) with -inf for non-nodes; returns node ids (B, ≤beam), -1 padded.
    """
    B, W, C = node_scores.shape
    if probes is not None and probes < C:
        rank = np.argsort(np.argsort(-node_scores, axis=2, kind="stable"), axis=2, kind="stable")
        node_scores = np.where(rank < probes, node_scores, -np.inf)
    flat = node_scores.reshape(B, -1)
    ids = entries.reshape(B, -1)
    m = min(beam, flat.shape[1])
    if m <= 0:
        return np.full((B, 1), -1, dtype=np.int64)
    part = np.argpartition(-flat, m - 1, axis=1)[:, :m] if m < flat.shape[1] else np.tile(np.arange(flat.shape[1]), (B, 1))
    chosen = np.take_along_axis(flat, part, 1)
    out = np.where(np.isfinite(chosen), np.take_along_axis(ids, part, 1), -1)
    keep = (out >= 0).any(0)
    return out[:, keep] if keep.any() else np.full((B, 1), -1, dtype=np.int64)


def top_n(rows: np.ndarray, scores: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Best ``n`` (row, score) per query, sorted; -1 / -inf padding where fewer were reached."""
    B, M = scores.shape
    if M < n:
        rows = np.concatenate([rows, np.full((B, n - M), -1, dtype=rows.dtype)], 1)
        scores = np.concatenate([scores, np.full((B, n - M), -np.inf, dtype=scores.dtype)], 1)
        M = n
    part = np.argpartition(-scores, n - 1, axis=1)[:, :n] if n < M else np.tile(np.arange(M), (B, 1))
    s = np.take_along_axis(scores, part, 1)
    order = np.argsort(-s, axis=1, kind="stable")
    part = np.take_along_axis(part, order, 1)
    out_rows = np.take_along_axis(rows, part, 1)
    out_scores = np.take_along_axis(scores, part, 1).astype(np.float32)
    out_rows = np.where(np.isfinite(out_scores), out_rows, -1)
    return out_rows, out_scores
