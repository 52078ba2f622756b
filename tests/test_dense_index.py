"""faiss presets (inner product and squared L2), ANN vs exact, DenseRetriever scores, index artifacts."""
from __future__ import annotations

import faiss
import numpy as np
import pytest

from core.errors import MissingArtifactError
from core.retrieval.indexing import IndexSpec, build_index, load_index, save_index
from core.retrieval.dense import DenseRetriever, cached_embeddings, l2_normalize

faiss.omp_set_num_threads(1)  # small indexes; avoids OpenMP spinning on a loaded machine


class FixedEncoder:
    """Texts are ``"v<i>"``; the encoder returns row i of a fixed matrix (scaled, so norms differ)."""

    encoder_id = "fixed-test"

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix = matrix
        self.calls = 0

    def encode(self, texts, batch_size=128, progress=None):
        self.calls += 1
        return self.matrix[[int(t[1:]) for t in texts]] * 3.0


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(40, 16))
    x = (centers[rng.integers(0, 40, 4000)] + 0.3 * rng.normal(size=(4000, 16))).astype(np.float32)
    return x


def _exact(x: np.ndarray, q: np.ndarray, k: int, metric: str) -> np.ndarray:
    if metric == "ip":
        return np.argsort(-(q @ x.T), axis=1, kind="stable")[:, :k]
    d = (q * q).sum(1)[:, None] - 2 * q @ x.T + (x * x).sum(1)[None]
    return np.argsort(d, axis=1, kind="stable")[:, :k]


@pytest.mark.parametrize("metric", ["ip", "l2"])
@pytest.mark.parametrize("preset", ["flat", "ivf", "ivfpq", "hnsw"])
def test_presets_build_and_return_k(data, preset, metric):
    x = l2_normalize(data) if metric == "ip" else data
    if preset == "ivfpq":
        x = x[:1000]  # PQ codebook training is the slow part; a smaller set keeps the test short
    spec = IndexSpec.from_preset(preset, len(x), x.shape[1], metric=metric)
    assert spec.metric == metric
    index = build_index(x, spec)
    assert index.ntotal == len(x) and index.metric_type == (faiss.METRIC_L2 if metric == "l2" else faiss.METRIC_INNER_PRODUCT)
    q = x[:50]
    _, rows = index.search(q, 10)
    assert (rows >= 0).all() and rows.shape == (50, 10)
    exact = _exact(x, q, 10, metric)
    # ANN vs exact with tie tolerance (faiss contrib/evaluation.py spirit): overlap of top-10 sets
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(rows, exact)])
    floor = {"flat": 0.999, "ivf": 0.8, "hnsw": 0.8, "ivfpq": 0.3}[preset]
    assert overlap >= floor, (preset, metric, overlap)


def test_small_collections_get_fewer_pq_bits():
    assert IndexSpec.from_preset("ivfpq", 300, 24).factory == "IVF7,PQ12x2"
    assert IndexSpec.from_preset("ivfpq", 36737, 240).factory == "IVF767,PQ16x8"


def test_l2_retriever_scores_are_negative_squared_distances(data, tmp_path, monkeypatch):
    monkeypatch.setenv("QRS_VAR", str(tmp_path))
    corpus = {f"d{i}": f"v{i}" for i in range(len(data))}
    enc = FixedEncoder(data)
    raw = cached_embeddings(enc, corpus, normalize=False)
    assert np.allclose(raw, data * 3.0)
    unit = cached_embeddings(enc, corpus)  # a different cache entry
    assert np.allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-5) and enc.calls == 2
    cached_embeddings(enc, corpus, normalize=False)
    assert enc.calls == 2  # served from the cache
    spec = IndexSpec.from_preset("flat", len(raw), raw.shape[1], metric="l2")
    retriever = DenseRetriever.from_vectors("l2", enc, corpus, raw, spec)
    hits = retriever.retrieve(["v5"], 4)
    assert hits.ids[0][0] == "d5" and hits.scores[0][0] == pytest.approx(0.0, abs=1e-3)
    expected = -((raw[[int(i[1:]) for i in hits.ids[0]]] - raw[5]) ** 2).sum(1)
    assert np.allclose(hits.scores[0], expected, rtol=1e-4, atol=1e-3)
    ranking = retriever.search("v5", k=3, exclude=["d5"])
    assert "d5" not in ranking.doc_ids and len(ranking.doc_ids) == 3
    # live search parameters and distance counting on IVF
    ivf = DenseRetriever.from_vectors("l2ivf", enc, corpus, raw, IndexSpec.from_preset("ivf", len(raw), 16, "l2"))
    ivf.set_params("nprobe=1")
    few = ivf.retrieve(["v7"], 10).stats[0]["distance_computations"]
    ivf.set_params("nprobe=20")
    many = ivf.retrieve(["v7"], 10).stats[0]["distance_computations"]
    assert 0 < few < many <= len(raw)


def test_index_roundtrip_keeps_metric_and_corrupt_index_is_reported(data, tmp_path):
    spec = IndexSpec.from_preset("hnsw", len(data), 16, metric="l2")
    index = build_index(data, spec)
    save_index(tmp_path / "idx", index, spec, "enc", len(data))
    loaded, spec2, meta = load_index(tmp_path / "idx", "python -m core train --system sdml-cnn")
    assert spec2 == spec and meta["metric"] == "l2" and loaded.ntotal == len(data)
    (tmp_path / "idx" / "index.faiss").write_bytes(b"garbage")
    with pytest.raises(MissingArtifactError, match="python -m core train --system sdml-cnn"):
        load_index(tmp_path / "idx", "python -m core train --system sdml-cnn")
