"""System "tree-bert-cross": the tree-bert k-means tree searched with the cross-encoder (tree-search-bert-guo.md
§3.3-3.4, Algorithm 2, interaction-based method).

Every visited node is scored by the cross-encoder against the query: a question (leaf) directly, a
non-leaf node through the ``reps`` (1-5) questions nearest to its k-means centre, taking the max
(§3.3-3.4). The best ``beam`` nodes per level are expanded. Every question whose pair was scored
(leaves and node representatives) is a candidate; the top-N by cross-encoder score is returned.
Pairs are scored once per query (a representative met again as a leaf is not rescored);
``Ranking.stats["pair_scorings"]`` counts them. It is slow by nature: ``budget`` caps the pair
scorings per query (a level that would exceed it expands only the best beam nodes that fit).
Queries of one batch descend in lock-step so that the cross-encoder scores their pairs together.
No extra training: it reuses the ``cross-encoder`` weights and the ``tree-bert`` tree (hence in core.rerank, the
layer above core.retrieval: it needs both).
all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

from core.data.pipeline import check_stamp, is_current, stamped
from core.artifacts import config_from_dict, load_json, save_json
from core.data.datasets import Dataset
from core.errors import MissingArtifactError
from core.registry import build_command, system_dir
from core.retrieval.base import Hits, ProgressFn, Retriever, no_progress
from core.retrieval.tree_search import KMeansTree
from core.systems import registration_for

REGISTRATION = registration_for(__name__)  # this system's SystemSpec (its module in core.systems)

QUORA_NOTE = "all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates"


@dataclass(frozen=True)
class TreeCrossConfig:
    """Paper: beam = N = 20 (§3.4), 1-5 questions per non-leaf node (§3.3); budget is ours."""

    beam: int = 20
    reps: int = 1
    budget: int = 1500  # pair scorings per query


class TreeCrossRetriever(Retriever):
    """Beam search over a ``KMeansTree`` scoring nodes with a cross-encoder (see module docstring)."""

    def __init__(self, tree: KMeansTree, doc_ids: list[str], texts: list[str], reranker,
                 config: TreeCrossConfig = TreeCrossConfig(), name: str = "tree-bert-cross") -> None:
        self.tree, self.doc_ids, self.texts, self.reranker = tree, np.asarray(doc_ids), list(texts), reranker
        self.config, self.name = config, name
        self.batch_size = 8

    def set_params(self, beam: int | None = None, reps: int | None = None, budget: int | None = None) -> None:
        """Change beam width, representatives per node (1-5) or the per-query budget live."""
        changes = {k: int(v) for k, v in (("beam", beam), ("reps", reps), ("budget", budget)) if v is not None}
        if changes.get("reps", 1) not in range(1, 6):
            raise ValueError("reps must be between 1 and 5")
        if changes.get("beam", 1) < 1 or changes.get("budget", 1) < 1:
            raise ValueError("beam and budget must be at least 1")
        self.config = replace(self.config, **changes)

    def _needed(self, entries: np.ndarray) -> list[np.ndarray]:
        """Question rows whose pair scores decide each entry (a question itself, or a node's reps)."""
        n_nodes, reps = self.tree.n_nodes, self.tree.reps[:, : self.config.reps]
        return [np.array([e - n_nodes]) if e >= n_nodes else reps[e][reps[e] >= 0] for e in entries]

    def retrieve(self, texts: list[str], k: int) -> Hits:
        tree, cfg = self.tree, self.config
        B = len(texts)
        frontier = [np.zeros(1, dtype=np.int64) for _ in range(B)]  # node ids, best first
        scored: list[dict[int, float]] = [{} for _ in range(B)]
        while any(len(f) for f in frontier):
            plan = []  # per query: (entries, needed rows per entry)
            pair_q, pair_rows, owner = [], [], []
            for b in range(B):
                entries, needed, new_rows = np.zeros(0, np.int64), [], set()
                for cut in range(len(frontier[b]), 0, -1):  # keep the best beam nodes that fit the budget
                    kids = tree.children[frontier[b][:cut]].ravel()
                    entries = kids[kids >= 0]
                    needed = self._needed(entries)
                    new_rows = {int(r) for rows in needed for r in rows} - scored[b].keys()
                    if len(scored[b]) + len(new_rows) <= cfg.budget:
                        break
                else:
                    entries, needed, new_rows = np.zeros(0, np.int64), [], set()
                plan.append((entries, needed))
                for r in sorted(new_rows):
                    pair_q.append(texts[b])
                    pair_rows.append(r)
                    owner.append(b)
            if pair_rows:
                values = self.reranker.score_pairs(pair_q, [self.texts[r] for r in pair_rows])
                for b, r, v in zip(owner, pair_rows, values):
                    scored[b][r] = float(v)
            for b, (entries, needed) in enumerate(plan):
                is_node = entries < tree.n_nodes
                if not is_node.any():
                    frontier[b] = np.zeros(0, np.int64)
                    continue
                node_ids = entries[is_node]
                node_scores = np.array([max(scored[b][int(r)] for r in rows) for rows, n in zip(needed, is_node) if n])
                order = np.argsort(-node_scores, kind="stable")[: cfg.beam]
                frontier[b] = node_ids[order]
        ids, vals, stats = [], [], []
        for b in range(B):
            rows = np.fromiter(scored[b].keys(), dtype=np.int64, count=len(scored[b]))
            s = np.fromiter(scored[b].values(), dtype=np.float64, count=len(scored[b]))
            top = np.argsort(-s, kind="stable")[:k]
            ids.append(self.doc_ids[rows[top]].tolist())
            vals.append(s[top].tolist())
            stats.append({"pair_scorings": float(len(scored[b]))})
        return Hits(ids, vals, stats)


def _folder(dataset: Dataset):
    return system_dir(dataset.name, "tree-bert-cross")


def build(dataset: Dataset, profile: str = "quick", progress: ProgressFn = no_progress,
          variant: str | None = None, config: TreeCrossConfig | None = None) -> dict:
    """No training: makes sure ``tree-bert`` and ``cross-encoder`` are built, then saves the search config."""
    from core.rerank import cross_encoder
    from core.retrieval import tree

    metrics: dict = {"note": QUORA_NOTE}
    if not tree.is_built(dataset):
        metrics["tree-bert"] = tree.build(dataset, profile, lambda f, m: progress(0.2 * f, m))
    if not cross_encoder.is_built(dataset):
        metrics["cross-encoder"] = cross_encoder.build(dataset, profile, lambda f, m: progress(0.2 + 0.8 * f, m))
    folder = _folder(dataset)
    save_json(folder / "config.json", stamped(config or TreeCrossConfig()))
    save_json(folder / "metrics.json", metrics)
    progress(1.0, "tree-bert-cross: ready (reuses tree-bert and cross-encoder)")
    return metrics


def is_built(dataset: Dataset, variant: str | None = None) -> bool:
    from core.rerank import cross_encoder
    from core.retrieval import tree

    return is_current(_folder(dataset) / "config.json") and tree.is_built(dataset) and cross_encoder.is_built(dataset)


def load(dataset: Dataset, variant: str | None = None, **options) -> TreeCrossRetriever:
    """Options: ``beam``, ``reps`` (1-5), ``budget`` (pair scorings per query), ``K`` (tree shape)."""
    from core.rerank import cross_encoder
    from core.retrieval import tree

    command = build_command("tree-bert-cross", dataset.name)
    raw = load_json(_folder(dataset) / "config.json", "tree-bert-cross", command)
    check_stamp(raw, "tree-bert-cross", command)
    saved = config_from_dict(TreeCrossConfig, raw)
    shape = {k: options[k] for k in ("K", "branching", "leaf_size", "balanced") if k in options}
    try:
        kmeans_tree, _, doc_ids = tree.load_tree(dataset, **shape)
        reranker = cross_encoder.load(dataset)
    except MissingArtifactError as exc:
        raise MissingArtifactError(f"tree-bert-cross ({exc.what})", command) from None
    retriever = TreeCrossRetriever(kmeans_tree, doc_ids, [dataset.corpus[d] for d in doc_ids], reranker, saved)
    retriever.set_params(**{k: options[k] for k in ("beam", "reps", "budget") if k in options})
    return retriever


def config_dict(variant: str | None = None) -> dict:
    return {**asdict(TreeCrossConfig()), "paper defaults": "beam = N = 20; 1-5 questions per non-leaf node",
            "note": QUORA_NOTE}
