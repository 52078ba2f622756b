"""System "tree-bert": MiniLM embeddings searched with the k-means beam tree (tree-search-bert-guo.md
§3.3-3.4, Algorithm 1).

The tree is built from the cached collection embeddings of ``minilm`` (mean pooling by default), so a
build costs k-means only (seconds). ``load(dataset, K=10, beam=20, probes=None, leaf_size=0,
balanced=False)``: a K / leaf size / balance different from the saved tree is rebuilt in memory from
the saved vectors (seconds); ``set_params(beam=..., probes=...)`` changes the search live.
``Ranking.stats["distance_computations"]`` counts the vector distances computed for each query
(centroids + questions), as in the paper's Table 4. all-MiniLM-L6-v2 was pre-trained on data that
includes Quora duplicates.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace

import numpy as np

from core.data.pipeline import check_stamp, is_current, stamped
from core.artifacts import config_from_dict, load_json, save_json
from core.data.datasets import Dataset
from core.errors import MissingArtifactError, StudioError
from core.registry import build_command, system_dir
from core.retrieval.base import Hits, ProgressFn, Retriever, no_progress
from core.retrieval.tree_search import KMeansTree, TreeConfig
from core.systems import registration_for

REGISTRATION = registration_for(__name__)  # this system's SystemSpec (its module in core.systems)


@dataclass(frozen=True)
class TreeBertConfig:
    """beam = N = 20 as in the paper (§3.4); K = 10 of the paper's 5/8/10 (§4.3) because it gave the best
    MAP per distance computation on our curve (bench/reports/tree_bert.md)."""

    branching: int = 10
    leaf_size: int = 0  # 0 = K
    balanced: bool = False
    beam: int = 20
    probes: int = 0  # 0 = every child may enter the beam (paper)
    encoder_variant: str = "mean"  # which minilm variant's embeddings the tree is built on
    seed: int = 13

    def tree_config(self) -> TreeConfig:
        return TreeConfig(branching=self.branching, leaf_size=self.leaf_size, balanced=self.balanced, seed=self.seed)


QUORA_NOTE = "all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates"


class TreeRetriever(Retriever):
    """Beam search over a ``KMeansTree``; queries that are collection texts reuse their stored vector."""

    def __init__(self, tree: KMeansTree, doc_ids: list[str], texts: list[str], encoder_factory,
                 beam: int = 20, probes: int | None = None, name: str = "tree-bert") -> None:
        self.tree, self.doc_ids, self.name = tree, np.asarray(doc_ids), name
        self._row_of_text = {t: i for i, t in enumerate(texts)}
        self._encoder_factory, self._encoder = encoder_factory, None
        self.beam, self.probes = beam, probes
        self.batch_size = 512

    @property
    def encoder(self):
        if self._encoder is None:
            self._encoder = self._encoder_factory()
        return self._encoder

    def set_params(self, beam: int | None = None, probes: int | None = None) -> None:
        """Change the search live: beam width (nodes kept per level) and probes (children per node, 0 = all)."""
        if beam is not None:
            if int(beam) < 1:
                raise ValueError("beam must be at least 1")
            self.beam = int(beam)
        if probes is not None:
            self.probes = int(probes) or None

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        rows = [self._row_of_text.get(t) for t in texts]
        out = np.empty((len(texts), self.tree.vectors.shape[1]), dtype=np.float32)
        known = [i for i, r in enumerate(rows) if r is not None]
        missing = [i for i, r in enumerate(rows) if r is None]
        if known:
            out[known] = self.tree.vectors[[rows[i] for i in known]]
        if missing:
            out[missing] = self.encoder.encode([texts[i] for i in missing])
        return out

    def retrieve_vectors(self, queries: np.ndarray, k: int) -> Hits:
        result = self.tree.search(queries, n=k, beam=max(self.beam, 1), probes=self.probes)
        ids, scores = [], []
        for rows, vals in zip(result.rows, result.scores):
            keep = rows >= 0
            ids.append(self.doc_ids[rows[keep]].tolist())
            scores.append(vals[keep].astype(float).tolist())
        return Hits(ids, scores, [{"distance_computations": float(c)} for c in result.computations])

    def retrieve(self, texts: list[str], k: int) -> Hits:
        return self.retrieve_vectors(self.encode_queries(texts), k)


def _folder(dataset: Dataset):
    return system_dir(dataset.name, "tree-bert")


def build(dataset: Dataset, profile: str = "quick", progress: ProgressFn = no_progress,
          variant: str | None = None, config: TreeBertConfig | None = None) -> dict:
    """k-means tree over the (cached) MiniLM collection embeddings; the same recipe in both profiles."""
    from core.retrieval import bert

    config = config or TreeBertConfig()
    progress(0.0, "tree-bert: collection embeddings (cached by minilm)")
    vectors = bert.collection_embeddings(dataset, config.encoder_variant, lambda f, m: progress(0.8 * f, m))
    progress(0.8, f"tree-bert: recursive k-means, K={config.branching}")
    t0 = time.perf_counter()
    tree = KMeansTree.build(vectors, config.tree_config())
    seconds = time.perf_counter() - t0
    folder = _folder(dataset)
    tree.save(folder)
    save_json(folder / "doc_ids.json", list(dataset.corpus))
    save_json(folder / "config.json", stamped(config))
    metrics = {"tree_build_seconds": seconds, **tree.stats(), "note": QUORA_NOTE}
    save_json(folder / "metrics.json", metrics)
    progress(1.0, f"tree-bert: {tree.n_nodes:,} nodes in {seconds:.1f}s")
    return metrics


def is_built(dataset: Dataset, variant: str | None = None) -> bool:
    folder = _folder(dataset)
    return (folder / "tree.npz").is_file() and is_current(folder / "config.json")


def _flag(value) -> bool:
    """A boolean option that may arrive as text from the CLI (``balanced=true``)."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def saved_config(dataset: Dataset) -> TreeBertConfig | None:
    """The built tree's config (its serving beam and K), or None when no tree is built."""
    path = _folder(dataset) / "config.json"
    if not path.is_file():
        return None
    try:
        return config_from_dict(TreeBertConfig, load_json(path, "the tree-bert tree", build_command("tree-bert", dataset.name)))
    except (StudioError, TypeError):
        return None


def serving_defaults(dataset: Dataset | None = None) -> dict:
    """How the tree serves when nothing is asked: the built tree's saved beam and K (else the config's)."""
    cfg = (saved_config(dataset) if dataset is not None else None) or TreeBertConfig()
    return {"beam": cfg.beam, "tree_k": cfg.branching}


def load_tree(dataset: Dataset, **options) -> tuple[KMeansTree, TreeBertConfig, list[str]]:
    """The saved tree, rebuilt in memory when ``K``/``leaf_size``/``balanced``/``seed`` (k-means init) differ from
    the saved one."""
    folder = _folder(dataset)
    command = build_command("tree-bert", dataset.name)
    raw = load_json(folder / "config.json", "the tree-bert tree", command)
    check_stamp(raw, "the tree-bert tree", command)
    saved = config_from_dict(TreeBertConfig, raw)
    doc_ids = load_json(folder / "doc_ids.json", "the tree-bert tree", command)
    tree = KMeansTree.load(folder, command)
    if len(doc_ids) != len(dataset.corpus) or tree.n_items != len(doc_ids):
        raise MissingArtifactError("the tree-bert tree", command, "stale (collection changed)")
    wanted = replace(
        saved,
        branching=int(options.get("K", options.get("branching", saved.branching))),
        leaf_size=int(options.get("leaf_size", saved.leaf_size)),
        balanced=_flag(options.get("balanced", saved.balanced)),
        beam=int(options.get("beam", saved.beam)),
        probes=int(options.get("probes", saved.probes) or 0),
        seed=int(options.get("seed", saved.seed)),
    )
    if wanted.tree_config() != saved.tree_config():
        tree = KMeansTree.build(tree.vectors, wanted.tree_config())
    return tree, wanted, doc_ids


def load(dataset: Dataset, variant: str | None = None, **options) -> TreeRetriever:
    """Options: ``K`` (branching), ``beam``, ``probes``, ``leaf_size``, ``balanced``, ``seed`` (k-means)."""
    from core.retrieval import bert

    tree, config, doc_ids = load_tree(dataset, **options)
    name = "tree-bert" if not options else (
        f"tree-bert(K={config.branching},beam={config.beam}"
        + (f",probes={config.probes}" if config.probes else "")
        + (f",leaf={config.leaf_size}" if config.leaf_size else "")
        + (",balanced" if config.balanced else "")
        + (f",seed={config.seed}" if "seed" in options else "") + ")"
    )
    return TreeRetriever(tree, doc_ids, [dataset.corpus[d] for d in doc_ids],
                         lambda: bert.load_encoder(dataset, config.encoder_variant),
                         beam=config.beam, probes=config.probes or None, name=name)


def config_dict(variant: str | None = None) -> dict:
    return {**asdict(TreeBertConfig()), "paper defaults": "K ∈ {5, 8, 10}, beam = N = 20 (§3.4, §4.3)",
            "recommended": "K=10, beam=40: 99% of compute-all MAP@20 at 3% of the distance computations",
            "note": QUORA_NOTE}
