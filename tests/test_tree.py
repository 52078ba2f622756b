"""k-means tree + beam search (core/retrieval/tree_search.py) and the tree-bert retriever (core/retrieval/tree.py)."""
from __future__ import annotations

import faiss
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import MissingArtifactError
from core.retrieval.tree_search import KMeansTree, TreeConfig


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    return unit(np.random.default_rng(0).standard_normal((400, 16)))


@pytest.fixture(scope="module")
def tree(vectors) -> KMeansTree:
    return KMeansTree.build(vectors, TreeConfig(branching=5))


def exact_top(vectors: np.ndarray, queries: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    scores, rows = index.search(queries, n)
    return rows, scores


def test_every_question_is_in_exactly_one_leaf(tree, vectors):
    items = tree.children[tree.children >= tree.n_nodes] - tree.n_nodes
    assert sorted(items.tolist()) == list(range(len(vectors)))
    nodes = tree.children[(tree.children >= 0) & (tree.children < tree.n_nodes)]
    assert sorted(nodes.tolist()) == list(range(1, tree.n_nodes))  # every node but the root has one parent
    assert tree.children.shape[1] <= 5


def test_returns_exactly_n_distinct_ids(tree, vectors):
    result = tree.search(vectors[:50], n=20, beam=20)
    assert result.rows.shape == (50, 20)
    for row in result.rows:
        assert (row >= 0).all() and len(set(row.tolist())) == 20
    assert (np.diff(result.scores, axis=1) <= 1e-6).all()  # best first


def test_beam_as_wide_as_collection_equals_exact_search(tree, vectors):
    queries = unit(np.random.default_rng(1).standard_normal((30, 16)))
    result = tree.search(queries, n=10, beam=len(vectors))
    rows, scores = exact_top(vectors, queries, 10)
    np.testing.assert_allclose(result.scores, scores, rtol=1e-5, atol=1e-5)
    # ids may differ only between tied scores
    same = result.rows == rows
    assert same.all() or np.allclose(result.scores[~same], scores[~same], atol=1e-6)
    assert (result.computations == tree.n_nodes - 1 + len(vectors)).all()  # every node and question once


def test_narrow_beam_computes_less_than_everything(tree, vectors):
    result = tree.search(vectors[:20], n=10, beam=3)
    assert (result.computations < len(vectors)).all()


def toy_tree() -> KMeansTree:
    """root -> A (items 0-3), B; B -> C (items 4, 5), items 6, 7. Entries: nodes 0..3, items 4 + row."""
    vectors = unit(np.array([[1, 0.1], [1, 0.2], [1, 0.3], [1, 0.4], [0.1, 1], [0.2, 1], [0.5, 1], [0.6, 1]]))
    centroids = unit(np.array([[1, 1], [1, 0.25], [0.35, 1], [0.15, 1]]))
    n_nodes = 4
    children = np.array([
        [1, 2, -1, -1],  # root: A, B
        [n_nodes + 0, n_nodes + 1, n_nodes + 2, n_nodes + 3],  # A
        [3, n_nodes + 6, n_nodes + 7, -1],  # B: C, items 6, 7
        [n_nodes + 4, n_nodes + 5, -1, -1],  # C
    ])
    reps = np.full((4, 5), -1)
    return KMeansTree(TreeConfig(branching=2, leaf_size=4), centroids, children, reps, np.array([0, 1, 1, 2]), vectors)


def test_distance_computations_are_exact_on_a_toy_tree():
    t = toy_tree()
    q = unit(np.array([[1.0, 0.11], [0.1, 1.0]]))
    r1 = t.search(q, n=2, beam=1)
    # query 0: root children A, B (2) -> A's 4 items = 6; query 1: 2 -> B's 3 children = 5 -> C's 2 = 7
    assert r1.computations.tolist() == [6, 7]
    assert r1.rows[0].tolist() == [0, 1]
    assert r1.rows[1].tolist() == [4, 5]
    r2 = t.search(q, n=2, beam=2)
    assert r2.computations.tolist() == [11, 11]  # 2 + (4 + 3) + 2: the whole tree


def test_probes_limit_children_per_node():
    t = toy_tree()
    q = unit(np.array([[0.1, 1.0]]))
    # the root passes only its best child (B) although the beam has room for 2: 2 + 3 + 2
    assert t.search(q, n=2, beam=2, probes=1).computations.tolist() == [7]
    assert t.search(q, n=2, beam=2, probes=2).computations.tolist() == [11]


def test_balanced_tree_caps_cluster_sizes(vectors):
    t = KMeansTree.build(vectors, TreeConfig(branching=4, leaf_size=8, balanced=True))
    is_item = t.children >= t.n_nodes
    assert is_item.sum(1).max() <= 8
    result = t.search(vectors[:40], n=5, beam=20, probes=2)
    assert (result.rows[:, 0] == np.arange(40)).mean() >= 0.9  # a question nearly always finds itself first


def test_build_is_deterministic(vectors):
    a = KMeansTree.build(vectors, TreeConfig(branching=8))
    b = KMeansTree.build(vectors, TreeConfig(branching=8))
    assert np.array_equal(a.children, b.children)


def test_save_load_round_trips(tree, vectors, tmp_path):
    tree.save(tmp_path / "t")
    loaded = KMeansTree.load(tmp_path / "t")
    assert loaded.config == tree.config
    for name in ("centroids", "children", "reps", "depth", "vectors"):
        assert np.array_equal(getattr(loaded, name), getattr(tree, name))
    a, b = tree.search(vectors[:20], 10, 7), loaded.search(vectors[:20], 10, 7)
    assert np.array_equal(a.rows, b.rows) and np.array_equal(a.computations, b.computations)


def test_load_missing_or_corrupt_raises(tmp_path):
    with pytest.raises(MissingArtifactError):
        KMeansTree.load(tmp_path / "nothing")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "tree.json").write_text("{}")
    (tmp_path / "bad" / "tree.npz").write_bytes(b"garbage")
    with pytest.raises(MissingArtifactError):
        KMeansTree.load(tmp_path / "bad")


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 30), beam=st.integers(1, 40), seed=st.integers(0, 10))
def test_top_n_prefix_stable(tree, vectors, n, beam, seed):
    q = unit(np.random.default_rng(seed).standard_normal((3, 16)))
    small, large = tree.search(q, n=n, beam=beam), tree.search(q, n=n + 5, beam=beam)
    k = (small.rows >= 0).sum(1)
    for i in range(3):
        assert small.rows[i, : k[i]].tolist() == large.rows[i, : k[i]].tolist()


# ----------------------------------------------------------------------------- tree-bert system
class FakeEncoder:
    encoder_id = "fake-16"

    def encode(self, texts, batch_size=128, progress=None):
        rng = [np.random.default_rng(abs(hash(t)) % 2**32).standard_normal(16) for t in texts]
        return unit(np.asarray(rng))


def test_tree_retriever_drops_self_and_counts(vectors):
    from core.retrieval.tree import TreeRetriever

    ids = [f"q{i}" for i in range(len(vectors))]
    texts = [f"question {i}" for i in range(len(vectors))]
    retriever = TreeRetriever(KMeansTree.build(vectors, TreeConfig(branching=5)), ids, texts, FakeEncoder)
    run = retriever.search_many({"q3": texts[3], "q7": texts[7]}, k=10, ignore_identical_ids=True)
    assert "q3" not in run["q3"].doc_ids and len(run["q3"].doc_ids) == 10
    assert 0 < run["q3"].stats["distance_computations"] < len(vectors) + 200
    retriever.set_params(beam=len(vectors))
    wide = retriever.search_many({"q3": texts[3]}, k=10)
    rows, _ = exact_top(vectors, vectors[3:4], 11)
    assert wide["q3"].doc_ids == [ids[r] for r in rows[0] if r != 3][:10]
    free = retriever.search("a text not in the collection", k=5)  # encoded by the (fake) encoder
    assert len(free.doc_ids) == 5


def test_tree_bert_load_without_build_names_command(tmp_path, monkeypatch):
    monkeypatch.setenv("QRS_VAR", str(tmp_path))
    from core.data.clusters import dataset_from_pairs
    from core.retrieval import tree

    ds = dataset_from_pairs("toy", "toy", [(1, "a b", "a c", "1"), (0, "d e", "f g", "2")])
    assert not tree.is_built(ds)
    with pytest.raises(MissingArtifactError, match="python -m core build --systems tree-bert"):
        tree.load(ds)


# ----------------------------------------------------------------------------- tree-bert-cross
class DotReranker:
    """A stand-in cross-encoder: the cosine of the two texts' vectors (texts are 'question <row>')."""

    def __init__(self, vectors):
        self.vectors, self.calls = vectors, 0

    def score_pairs(self, queries, docs):
        self.calls += 1
        q = self.vectors[[int(t.split()[1]) for t in queries]]
        d = self.vectors[[int(t.split()[1]) for t in docs]]
        return (q * d).sum(1)


def test_tree_cross_counts_pairs_respects_budget_and_is_exact_when_wide(vectors):
    from core.rerank.tree_cross import TreeCrossConfig, TreeCrossRetriever

    tree = KMeansTree.build(vectors, TreeConfig(branching=5))
    ids = [f"q{i}" for i in range(len(vectors))]
    texts = [f"question {i}" for i in range(len(vectors))]
    reranker = DotReranker(vectors)
    wide = TreeCrossRetriever(tree, ids, texts, reranker, TreeCrossConfig(beam=len(vectors), reps=1, budget=10**6))
    run = wide.search_many({"q5": texts[5], "q9": texts[9]}, k=10)
    rows, _ = exact_top(vectors, vectors[[5]], 11)
    assert run["q5"].doc_ids == [ids[r] for r in rows[0] if r != 5][:10]
    assert run["q5"].stats["pair_scorings"] == len(vectors)  # every question scored exactly once
    narrow = TreeCrossRetriever(tree, ids, texts, reranker, TreeCrossConfig(beam=20, reps=3, budget=150))
    out = narrow.search_many({"q5": texts[5], "q9": texts[9]}, k=20)
    for r in out.values():
        assert 0 < r.stats["pair_scorings"] <= 150 and len(set(r.doc_ids)) == len(r.doc_ids)
    assert all(len(r.doc_ids) == 20 for r in out.values())  # node representatives are candidates too
    with pytest.raises(ValueError):
        narrow.set_params(reps=6)


def test_load_tree_rebuilds_for_another_kmeans_seed(tmp_path, monkeypatch, vectors):
    """``seed`` is a load option (bench/dev_decisions.py runs K over three k-means seeds): the saved seed serves the
    saved tree; another seed rebuilds it in memory, deterministically, with different clusters."""
    monkeypatch.setenv("QRS_VAR", str(tmp_path))
    from core.artifacts import save_json
    from core.data.clusters import dataset_from_pairs
    from core.data.pipeline import stamped
    from core.retrieval import tree as T

    ds = dataset_from_pairs("toy", "toy", [(1, f"question {2 * i}", f"question {2 * i + 1}", str(i)) for i in range(150)])
    n = len(ds.corpus)
    config = T.TreeBertConfig(branching=5)
    saved = KMeansTree.build(vectors[:n], config.tree_config())
    folder = T._folder(ds)
    saved.save(folder)
    save_json(folder / "doc_ids.json", list(ds.corpus))
    save_json(folder / "config.json", stamped(config))

    same, same_config, _ = T.load_tree(ds)
    assert same_config.seed == config.seed and np.array_equal(same.centroids, saved.centroids)
    other, other_config, _ = T.load_tree(ds, seed=config.seed + 1)
    again, _, _ = T.load_tree(ds, seed=config.seed + 1)
    assert other_config.seed == config.seed + 1
    assert np.array_equal(other.centroids, again.centroids)
    assert other.centroids.shape != saved.centroids.shape or not np.allclose(other.centroids, saved.centroids)
    assert T.load(ds, seed=config.seed + 1).name.endswith(f"seed={config.seed + 1})")


def test_tree_bert_reuses_minilms_embeddings_on_the_fixture(tiny_data, fresh_var, monkeypatch):
    """minilm's build and tree-bert share one cache file per collection, stamped with the pipeline version."""
    import json

    import torch

    from core.data.datasets import load_dataset
    from core.data.pipeline import PIPELINE_VERSION
    from core.retrieval import bert, tree

    ds = load_dataset("qqp-bimpm")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        bert.build(ds)
    finally:
        torch.set_num_threads(threads)
    cache = fresh_var / "cache" / "embeddings"
    assert len(list(cache.glob("*.npy"))) == 1

    def no_second_encoding(*args, **kwargs):
        raise AssertionError("tree-bert loaded MiniLM to encode the collection a second time")

    monkeypatch.setattr(bert.MiniLMEncoder, "pretrained", no_second_encoding)
    assert tree.build(ds)["items"] == len(ds.corpus)
    files = list(cache.glob("*.npy"))
    assert len(files) == 1
    meta = json.loads(files[0].with_suffix(".json").read_text())
    assert meta["encoder"].endswith(f"|{PIPELINE_VERSION}") and meta["count"] == len(ds.corpus)
