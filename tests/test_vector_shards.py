"""A collection encoded to on-disk shards: the workers write the vectors, the driver gets a manifest of files (never
the vectors), the shards put back in collection order are the in-process encoder's vectors bit for bit, and a faiss
index is filled from them a shard at a time (rows as ids; IVF trained on a sample, with its recall against exact)."""
from __future__ import annotations

import dataclasses

import faiss
import numpy as np
import pytest

from core.retrieval import encoding
from core.retrieval.encoding import encode_to_shards
from core.retrieval.indexing import IndexSpec, build_index, build_index_from_shards, recall_at_k
from core.retrieval.vector_shards import ShardManifest, l2_normalize
from tests.ray_cluster import two_node_cluster  # noqa: F401 - a fixture


class Hashed:
    """A deterministic toy encoder: a text's vector depends on the text alone."""

    encoder_id = "hashed-8"

    def encode(self, texts, batch_size=128, progress=None):
        return np.stack([np.random.default_rng(sum(map(ord, t))).standard_normal(8) for t in texts]).astype(np.float32)


def _no_arrays(manifest: ShardManifest) -> bool:
    values = [getattr(manifest, f.name) for f in dataclasses.fields(manifest)]
    values += [getattr(s, f.name) for s in manifest.shards for f in dataclasses.fields(s)]
    return not any(isinstance(v, np.ndarray) for v in values)


def test_shards_in_process_hold_every_row_once_and_assemble_to_the_encoders_vectors(tmp_path):
    texts = [f"question number {i} about {i % 7}" for i in range(203)]
    manifest = encode_to_shards(Hashed(), texts, tmp_path / "s", normalize=True)
    assert _no_arrays(manifest) and manifest.count == 203 and manifest.dim == 8 and len(manifest.shards) > 1
    manifest.check()
    again = ShardManifest.load(tmp_path / "s")
    assert again == manifest
    expected = l2_normalize(Hashed().encode(texts))
    assert np.array_equal(again.assemble(), expected)
    on_disk = again.assemble(tmp_path / "all.npy")
    assert isinstance(on_disk, np.memmap) and np.array_equal(np.asarray(on_disk), expected)
    rows = np.array([5, 200, 17])
    assert np.array_equal(again.gather(rows), expected[rows])


def test_a_shard_missing_a_row_is_refused(tmp_path):
    manifest = encode_to_shards(Hashed(), [f"t {i}" for i in range(20)], tmp_path)
    broken = dataclasses.replace(manifest, shards=manifest.shards[1:])
    with pytest.raises(ValueError, match="do not cover"):
        broken.check()


def test_what_an_actor_sends_back_is_a_shards_number_and_size_not_its_vectors(tmp_path, fresh_var):
    from core.retrieval.bert import MiniLMEncoder

    encoder = MiniLMEncoder.pretrained("mean", 64)
    actor = encoding._ShardActor(encoder.recipe, {}, str(tmp_path), False, 128)
    texts = ["How do I learn Python?", "What is the capital of France?", "Why is the sky blue?"]
    out = actor({"number": [3], "rows": [[7, 8, 9]], "texts": [texts]})
    assert set(out) == {"number", "count", "dim"} and out["count"].tolist() == [3] and out["dim"].tolist() == [384]
    assert np.array_equal(np.load(tmp_path / "shard-00003.npy"), encoder.encode(texts))
    assert np.load(tmp_path / "shard-00003.rows.npy").tolist() == [7, 8, 9]


@pytest.fixture
def texts(tiny_data):
    from core.data.datasets import load_dataset

    return list(load_dataset("qqp-bimpm").corpus.values())[:96]


def test_minilm_shards_from_the_actor_pool_are_bit_identical(shared_ray, texts, fresh_var, tmp_path, monkeypatch):
    from core.retrieval.bert import MiniLMEncoder

    monkeypatch.setattr(encoding, "RAY_MIN_TEXTS", 0)
    encoder = MiniLMEncoder.pretrained("mean", 64)
    seen = []
    manifest = encode_to_shards(encoder, texts, tmp_path / "pool", progress=lambda f, m: seen.append((f, m)))
    assert _no_arrays(manifest) and seen[-1][0] == 1.0 and "on the pool" in seen[-1][1]
    manifest.check()
    assert np.array_equal(manifest.assemble(), encoder.encode(texts))


def test_an_index_from_shards_searches_as_one_built_in_memory(tmp_path):
    rng = np.random.default_rng(0)
    texts = [f"text {i}" for i in range(2000)]
    manifest = encode_to_shards(Hashed(), texts, tmp_path, normalize=True)
    vectors = manifest.assemble()
    queries = vectors[rng.choice(len(vectors), 50, replace=False)] + 0.01 * rng.standard_normal((50, 8)).astype(np.float32)
    exact = build_index(vectors, IndexSpec("Flat"))
    sharded = build_index_from_shards(manifest, IndexSpec("Flat"))
    assert np.array_equal(sharded.search(queries, 10)[1], exact.search(queries, 10)[1])
    assert recall_at_k(sharded, exact, queries) == 1.0
    ivf = build_index_from_shards(manifest, IndexSpec.from_preset("ivf", 2000, 8), train_sample=500)
    assert ivf.ntotal == 2000 and 0.3 <= recall_at_k(ivf, exact, queries) <= 1.0
    hnsw = build_index_from_shards(manifest, IndexSpec.from_preset("hnsw", 2000, 8))
    assert recall_at_k(hnsw, exact, queries) >= 0.6  # toy 8-d vectors; efSearch 64 reaches it through the id map
    same = build_index_from_shards(manifest, IndexSpec.from_preset("ivf", 2000, 8), train_sample=500)
    assert np.array_equal(same.search(queries, 10)[1], ivf.search(queries, 10)[1])  # seeded sample: same index
    assert isinstance(faiss.downcast_index(ivf.index), faiss.IndexIVFFlat)


def test_on_a_two_node_cluster_the_shards_are_the_single_process_vectors(two_node_cluster, texts, fresh_var, tmp_path,
                                                                         monkeypatch):
    """One actor per node (one CPU each), each writing its shards to the shared folder; the driver gets the manifest."""
    from core.retrieval.bert import MiniLMEncoder

    monkeypatch.setattr(encoding, "RAY_MIN_TEXTS", 0)
    encoder = MiniLMEncoder.pretrained("mean", 64)
    manifest = encode_to_shards(encoder, texts, tmp_path / "two-nodes", normalize=True)
    assert _no_arrays(manifest) and len(manifest.shards) == 2 * encoding.SHARDS_PER_ACTOR
    manifest.check()
    assert np.array_equal(manifest.assemble(), l2_normalize(encoder.encode(texts)))


def test_the_driver_tokenizes_a_chunk_at_a_time_for_the_same_lengths(monkeypatch):
    """The shards' token lengths are asked ``LENGTH_CHUNK`` texts at a time (a whole archive's tokenizer output
    grew the driver with the archive), and are the lengths of the whole list."""
    asked = []

    class Lengths:
        def token_lengths(self, texts):
            asked.append(len(texts))
            return np.asarray([len(t) for t in texts])

    monkeypatch.setattr(encoding, "LENGTH_CHUNK", 7)
    texts = [f"text {'x' * (i % 5)}" for i in range(30)]
    assert np.array_equal(encoding.token_lengths(Lengths(), texts), [len(t) for t in texts])
    assert asked == [7, 7, 7, 7, 2]
    assert encoding.token_lengths(Hashed(), texts) is None
    assert encoding.token_lengths(Lengths(), []).shape == (0,)
