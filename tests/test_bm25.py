"""BM25 (bm25s) against the rank-bm25 oracle with the same (Lucene) variant."""
from __future__ import annotations

import math

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from core.data.loaders import load_qqp_bimpm
from core.errors import MissingArtifactError, QueryError
from core.retrieval import bm25
from core.retrieval.bm25 import BM25Config, BM25Retriever, tokenize


class LuceneBM25Oracle(BM25Okapi):
    """rank-bm25 with Lucene's idf = log(1 + (N - n + 0.5) / (n + 0.5)) (never negative)."""

    def _calc_idf(self, nd):
        for word, freq in nd.items():
            self.idf[word] = math.log(1 + (self.corpus_size - freq + 0.5) / (freq + 0.5))


@pytest.fixture(scope="module")
def sample():
    ds = load_qqp_bimpm()
    ids = list(ds.corpus)[:4000]
    return {i: ds.corpus[i] for i in ids}


@pytest.mark.parametrize("k1,b", [(3.44, 0.87), (0.9, 0.4), (1.2, 0.75)])
def test_same_scores_and_ranking_as_rank_bm25(sample, k1, b):
    ids = list(sample)
    ours = BM25Retriever.index(sample, BM25Config(k1, b))
    oracle = LuceneBM25Oracle(tokenize(list(sample.values())), k1=k1, b=b)
    rng = np.random.default_rng(0)
    for qi in rng.choice(len(ids), 40, replace=False):
        query = sample[ids[qi]]
        expected = oracle.get_scores(tokenize([query])[0])
        hits = ours.retrieve([query], 10)
        # bm25s drops the constant (k1 + 1) factor of the tf part: same ranking, scaled scores
        got = np.asarray(hits.scores[0]) * (k1 + 1)
        want = np.array([expected[ids.index(d)] for d in hits.ids[0]])
        np.testing.assert_allclose(got, want, rtol=1e-4)
        top = np.sort(expected[expected > 0])[::-1][:10]  # documents sharing no term are not retrieved
        np.testing.assert_allclose(np.sort(got)[::-1], top, rtol=1e-4)  # same top-10 (up to ties)


def test_query_is_removed_from_its_own_ranking(sample):
    ret = BM25Retriever.index(sample)
    qid = next(iter(sample))
    assert ret.retrieve([sample[qid]], 1).ids[0] == [qid]
    ranking = ret.search(sample[qid], 5, exclude=[qid])
    assert qid not in ranking.doc_ids and len(ranking) == 5
    many = ret.search_many({qid: sample[qid]}, k=5, ignore_identical_ids=True)
    assert qid not in many[qid].doc_ids and len(many[qid]) == 5


def test_unseen_words_and_bad_queries(sample):
    ret = BM25Retriever.index(sample)
    assert ret.search("zzzqqq xxyyzz", 5).doc_ids == []
    for bad in ("", "   ", "\x00\x01", "x" * 5000):
        with pytest.raises(QueryError):
            ret.search(bad, 5)


def test_build_load_roundtrip_and_missing(tiny_data, fresh_var):
    from core.data.datasets import load_dataset

    ds = load_dataset("qqp-bimpm")
    assert not bm25.is_built(ds)
    with pytest.raises(MissingArtifactError, match="python -m core build --systems bm25"):
        bm25.load(ds)
    bm25.build(ds)
    loaded = bm25.load(ds)
    fresh = BM25Retriever.index(ds.corpus)
    q = next(iter(ds.queries.values()))
    assert loaded.search(q, 5).doc_ids == fresh.search(q, 5).doc_ids


def test_order_ties_orders_a_tie_by_collection_position_and_tolerates_float_noise():
    from core.retrieval.base import order_ties

    # positions 7, 3, 5 tie (one computed with float32 noise), 9 is best, 1 is last
    positions = [7, 9, 3, 1, 5]
    scores = [2.0, 3.0, 2.0 + 1e-6, 1.0, 2.0 - 1e-6]
    picked = order_ties(positions, scores, k=3)
    assert [positions[i] for i in picked] == [9, 3, 5]
    assert [positions[i] for i in order_ties(positions, scores, k=10)] == [9, 3, 5, 7, 1]
    # a real gap is not a tie
    assert order_ties([4, 2], [1.0, 0.9], k=2) == [0, 1]


def test_bm25_top_k_cuts_a_tie_by_collection_position():
    from core.retrieval.bm25 import BM25Retriever

    # twelve identical documents tie for every query; k = 5 takes the first five in collection order
    corpus = {f"d{i:02d}": "how do I learn python fast" for i in range(12)}
    corpus.update({"x": "what is the capital of france", "y": "python snakes in the wild"})
    retriever = BM25Retriever.index(corpus)
    ranking = retriever.search("Learn Python?", k=5)
    assert ranking.doc_ids == ["d00", "d01", "d02", "d03", "d04"]
    assert len(set(ranking.scores)) == 1


def test_candidate_scorer_applies_the_variant():
    """bm25@anserini-default on candidate lists uses its own k1/b (it silently used the default before)."""
    from core.errors import UnknownNameError
    from core.retrieval.bm25 import PRESETS, candidate_scorer

    corpus = {"a": "cheap flights to paris paris paris", "b": "flights", "c": "hotels in rome"}
    default, anserini = candidate_scorer(corpus), candidate_scorer(corpus, "anserini-default")
    assert anserini.name == "bm25@anserini-default"
    assert (anserini.retriever.model.k1, anserini.retriever.model.b) == PRESETS["anserini-default"]
    assert default.retriever.model.k1 != anserini.retriever.model.k1
    docs = list(corpus.values())
    assert not np.allclose(default.score_pairs(["paris flights"] * 3, docs), anserini.score_pairs(["paris flights"] * 3, docs))
    with pytest.raises(UnknownNameError):
        candidate_scorer(corpus, "nonsense")


def test_a_memory_mapped_index_ranks_exactly_as_one_in_memory(tiny_data, fresh_var, monkeypatch):
    """A large archive's index is read memory-mapped (bm25s ``mmap=True``): the same ids and scores, batched (numba)
    and one by one (numpy), and the same statistics; from ``MMAP_FROM`` documents it is the default."""
    from core.data.datasets import load_dataset

    ds = load_dataset("qqp-bimpm")
    bm25.build(ds)
    in_memory, mapped = bm25.load(ds, mmap=False), bm25.load(ds, mmap=True)
    assert isinstance(mapped.model.scores["data"], np.memmap)
    assert not isinstance(in_memory.model.scores["data"], np.memmap)
    queries = list(ds.queries.values()) * 2  # past 64: bm25s's numba backend
    assert len(queries) >= 64
    for batch in (queries, queries[:3]):
        a, b = in_memory.retrieve(batch, 20), mapped.retrieve(batch, 20)
        assert a.ids == b.ids and a.scores == b.scores and any(a.ids)
    assert mapped.lexical_stats().df == in_memory.lexical_stats().df
    monkeypatch.setattr(bm25, "MMAP_FROM", len(ds.corpus))
    assert isinstance(bm25.load(ds).model.scores["data"], np.memmap)
    monkeypatch.setattr(bm25, "MMAP_FROM", len(ds.corpus) + 1)
    assert not isinstance(bm25.load(ds).model.scores["data"], np.memmap)
