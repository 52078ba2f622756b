"""A query's words weighed by what they do to a system's own top 10 (``core.analysis.ranking_importance``):
rank-biased overlap against hand values, a word the collection never uses weighs 0, the word every hit shares
weighs most, a reranker reorders one fixed pool, and ``core explain`` without a candidate prints it."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import run_main


def test_rank_biased_overlap_against_hand_values():
    from core.analysis.ranking_importance import rank_biased_overlap

    assert rank_biased_overlap(list("abcde"), list("abcde")) == pytest.approx(1.0)
    assert rank_biased_overlap(list("abc"), list("xyz")) == 0.0
    # depth 1: no overlap; depth 2: both: (1 − .9)(.9 · 2/2) / (1 − .9²)
    assert rank_biased_overlap(["x", "y"], ["y", "x"]) == pytest.approx(0.1 * 0.9 / 0.19)
    # the top weighs more than the tail: swapping the first two costs more than swapping the last two
    assert rank_biased_overlap(list("abcde"), list("bacde")) < rank_biased_overlap(list("abcde"), list("abced"))


def test_bm25_a_word_no_question_uses_weighs_nothing_and_the_topic_word_weighs_most(built):
    from core.analysis.ranking_importance import ranking_importance
    from core.data.datasets import load_dataset
    from core.data.pipeline import terms
    from core.serving.loader import load

    ds = load_dataset("qqp-bimpm")
    query = "How do I root an Android device zqxjw?"  # as a person types it: punctuation attached
    got = ranking_importance(load("bm25", ds), query, ds)
    weights = dict(got.query)
    assert weights["zqxjw"] == pytest.approx(0.0)  # in no question: BM25 scores nothing differently
    assert max(weights, key=weights.get) in {"root", "Android", "device"}
    assert len(got.top) == 10 and all(terms(ds.corpus[d]) != terms(query) for d in got.top)
    assert got.ranked(1)[0] == max(weights, key=weights.get)


def test_the_query_itself_is_left_out_of_every_ranking(built):
    from core.analysis.ranking_importance import ranking_importance
    from core.data.datasets import load_dataset
    from core.data.pipeline import terms
    from core.serving.loader import load

    ds = load_dataset("qqp-bimpm")
    qid = next(q for q in ds.queries if len(terms(ds.queries[q])) >= 4)
    got = ranking_importance(load("bm25", ds), ds.queries[qid], ds)
    assert qid not in got.top


def _toy_reranker():
    """A toy reranker: the number of the query's words a candidate contains, "android" counted ten times."""
    from core.retrieval.base import Reranker

    class Toy(Reranker):
        name = "toy"

        def score_pairs(self, queries, docs):
            return np.asarray([sum(10.0 if w == "android" else 1.0
                                   for w in set(q.lower().split()) if w in set(d.lower().split()))
                               for q, d in zip(queries, docs)])

    return Toy()


def test_a_reranker_reorders_one_fixed_pool(built):
    from core.analysis.ranking_importance import ranking_importance
    from core.data.datasets import load_dataset
    from core.serving.loader import load

    ds = load_dataset("qqp-bimpm")
    bm25 = load("bm25", ds)
    got = ranking_importance(_toy_reranker(), "How do I root an Android device ?", ds, first_stage=bm25, depth=20)
    weights = dict(got.query)
    assert max(weights, key=weights.get) == "Android"
    assert set(got.top) <= set(bm25.search("How do I root an Android device ?", 25).doc_ids)


def test_one_word_a_reranker_without_first_stage_and_a_candidate_list_are_one_line(built):
    from core.analysis.ranking_importance import ranking_importance
    from core.data.datasets import load_dataset
    from core.errors import StudioError
    from core.serving.loader import load

    ds = load_dataset("qqp-bimpm")
    with pytest.raises(StudioError, match="one word"):
        ranking_importance(load("bm25", ds), "Android", ds)
    with pytest.raises(StudioError, match="first stage"):
        ranking_importance(_toy_reranker(), "How do I root an Android device ?", ds)

    class Lists:
        name, candidates = "trecqa-like", {"q1": ["a1"]}

    with pytest.raises(StudioError, match="own candidate list"):
        ranking_importance(load("bm25", ds), "How do I root an Android device ?", Lists())


def test_cli_without_a_candidate_weighs_the_query_by_the_systems_top_10(built):
    from core.analysis.ranking_importance import MEASURE, ranking_importance
    from core.data.datasets import load_dataset
    from core.serving.loader import load

    query = "How do I root an Android device ?"
    code, out, err = run_main("explain", "--system", "bm25", query, "--json")
    assert code == 0, err
    got = json.loads(out)
    ds = load_dataset("qqp-bimpm")
    expected = ranking_importance(load("bm25", ds), query, ds)
    assert got["query_measure"] == MEASURE and got["top"] == expected.top
    assert got["query"] == [[w, pytest.approx(x, abs=1e-6)] for w, x in expected.query]
    assert got["candidate_text"] == ds.corpus[expected.top[0]]  # the system's own top hit, weighed as a pair
    assert [w for w, _ in got["pair_query"]] == [w for w, _ in got["query"]]
    code, out, err = run_main("explain", "--system", "bm25", query, "--candidate", "How to root my phone ?", "--json")
    assert code == 0 and "top" not in json.loads(out) and "the pair's" in json.loads(out)["query_measure"]


def test_the_benchmarks_probes_are_what_core_explain_answers(built):
    from bench.explain_decision import PROBES
    from bench.explain_faithfulness import probes
    from core.analysis.ranking_importance import MEASURE, ranking_importance
    from core.data.datasets import load_dataset
    from core.registry import get_spec
    from core.serving.loader import load

    ds = load_dataset("qqp-bimpm")
    bm25 = load("bm25", ds)
    got = probes(bm25, get_spec("bm25"), "terms", ds, bm25)
    assert set(got) == set(PROBES)
    for query, probe in got.items():
        expected = ranking_importance(bm25, query, ds)
        assert probe["measure"] == MEASURE and probe["top4"] == expected.ranked(4)
        assert probe["candidate"] == ds.corpus[expected.top[0]] and isinstance(probe["passes"], bool)


def test_an_imported_raw_text_file_is_weighed_as_typed(tmp_path, fresh_var):
    """Raw questions as people write them (punctuation attached, capitals), imported as a pairs file: the query
    typed the same way finds its words through the one text pipeline, and its own question is left out."""
    from core.analysis.ranking_importance import ranking_importance
    from core.data.datasets import load_dataset
    from core.data.imports import import_dataset
    from core.serving.loader import load

    rows = ["1\tHow can I stop my depression?\tHow do I beat depression?",
            "0\tHow can I stop smoking?\tWhat is the capital of France?",
            "1\tWhat's the best way to stop snoring?\tHow can I stop snoring at night?",
            "0\tWhy do people get depressed in winter?\tHow do I cook rice?",
            "1\tIs depression curable?\tCan depression be cured?"]
    path = tmp_path / "raw.tsv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    ds = load_dataset(import_dataset("pairs", path, "raw"))
    got = ranking_importance(load("bm25", ds), "How can I stop my depression?", ds, k=3)
    assert ds.corpus[got.top[0]] != "How can I stop my depression?"  # the query's own question is dropped
    weights = dict(got.query)
    assert set(weights) == {"How", "can", "I", "stop", "my", "depression"}  # "depression?" split by the pipeline
    assert all(0.0 <= x <= 1.0 for x in weights.values())
    assert weights["stop"] > weights["my"]  # "stop" reorders the top 3 of this small archive; "my" changes nothing
