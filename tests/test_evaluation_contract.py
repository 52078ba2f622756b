"""The evaluation contract against trec_eval itself: pytrec_eval is the oracle.

Measured facts these tests pin down (pytrec_eval = trec_eval 9 internals):
- trec_eval orders by score descending, scores compared as 32-bit floats, then doc id descending.
- A query judged with only 0 labels is scored 0 and kept; a query absent from the run (or from the
  qrels) is left out of pytrec_eval's answer. The oracle for ``all`` adds those as 0.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import pytrec_eval
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ranx import Qrels, Run, evaluate

from core.evaluation import evaluate_run, ordered_ids, rescored_run
from core.evaluation_contract import evaluate_contract, headline_convention, trec_eval_name
from core.errors import UnknownNameError
from core.retrieval.base import Ranking

# ranx metric -> trec_eval measure (mrr@k: recip_rank of the run cut at k, see _oracle)
TREC = {
    "map": "map", "map@5": "map_cut_5", "map@100": "map_cut_100", "mrr@3": "recip_rank",
    "mrr@100": "recip_rank", "precision@1": "P_1", "precision@5": "P_5", "ndcg": "ndcg",
    "ndcg@3": "ndcg_cut_3", "ndcg@10": "ndcg_cut_10", "recall@5": "recall_5", "recall@20": "recall_20",
    "hit_rate@1": "success_1", "hit_rate@5": "success_5",
}
MEASURES = {"map", "map_cut.5,100", "recip_rank", "P.1,5", "ndcg", "ndcg_cut.3,10", "recall.5,20", "success.1,5"}
METRICS = list(TREC)

_rng = np.random.default_rng(0)
QRELS = {
    "q1": {"d1": 1, "d2": 0, "d3": 2, "d10": 0},  # graded labels, four tied scores in the run
    "q2": {"a": 1, "b": 1},  # every candidate relevant
    "q3": {"x": 0, "y": 0},  # unanswerable: judged, no positive label
    "q4": {"m1": 1},  # answerable, missed by the run entirely
    "q5": {f"p{i:02d}": int(i % 7 == 0) + int(i % 11 == 0) for i in range(30)},  # long, graded, ties
}
RUN = {
    "q1": {"d1": 0.5, "d2": 0.5, "d3": 0.5, "d10": 0.5, "d4": 0.2},
    "q2": {"a": 0.9, "b": 0.9},
    "q3": {"x": 1.0, "y": 0.3},
    "q5": {f"p{i:02d}": float(np.round(_rng.random(), 1)) for i in range(30)} | {"u1": 0.5, "u2": 0.5},
    "q6": {"z": 1.0},  # in the evaluated set without any qrels: unanswerable
    "q7": {"w": 1.0},  # outside the evaluated set: ignored
}
QUERIES = ["q1", "q2", "q3", "q4", "q5", "q6"]


def _oracle(qrels, run, metrics, queries):
    """Per-query trec_eval values (0 where pytrec_eval leaves a query out), then both means."""
    judged = {q: dict(r) for q, r in qrels.items() if r}
    result = pytrec_eval.RelevanceEvaluator(judged, MEASURES).evaluate({q: dict(r) for q, r in run.items() if r})
    answerable = [q for q in queries if any(v > 0 for v in qrels.get(q, {}).values())]
    out = {}
    for m in metrics:
        per = {q: result.get(q, {}).get(TREC[m], 0.0) for q in queries}
        if m.startswith("mrr@"):  # recip_rank on the run cut at k
            k = int(m.split("@")[1])
            per = {q: v if v >= 1 / k - 1e-12 else 0.0 for q, v in per.items()}
        out[m] = (sum(per.values()) / len(queries), sum(per[q] for q in answerable) / len(answerable) if answerable else math.nan, per)
    return out


def _assert_equal_to_oracle(ev, oracle):
    for m, (all_, answerable, per) in oracle.items():
        assert ev.all[m] == pytest.approx(all_, abs=1e-4), m
        if math.isnan(answerable):
            assert math.isnan(ev.answerable[m])
        else:
            assert ev.answerable[m] == pytest.approx(answerable, abs=1e-4), m
        assert ev.per_query[m] == pytest.approx(per, abs=1e-4), m


def test_trec_eval_breaks_ties_by_doc_id_descending_and_so_does_the_contract():
    run = {"a": {"d1": 1.0, "d2": 1.0, "d3": 1.0, "d10": 1.0}}
    ranks = {}
    for doc in run["a"]:
        rr = pytrec_eval.RelevanceEvaluator({"a": {doc: 1}}, {"recip_rank"}).evaluate(run)["a"]["recip_rank"]
        ranks[doc] = round(1 / rr)
    trec_order = sorted(ranks, key=ranks.get)
    assert trec_order == ["d3", "d2", "d10", "d1"]  # descending string order, not numeric, not run order
    assert ordered_ids(run, "trec_eval")["a"] == trec_order
    assert ordered_ids(run, "run_order")["a"] == ["d1", "d2", "d3", "d10"]
    # ranx itself keeps ties in insertion order: its MRR differs from trec_eval's on raw scores
    assert evaluate(Qrels.from_dict({"a": {"d1": 1}}), Run.from_dict(run), "mrr") == 1.0
    assert list(rescored_run(run).to_dict()["a"]) == trec_order


def test_trec_eval_compares_scores_as_32_bit_floats():
    run = {"a": {"a": 1.0 + 1e-9, "b": 1.0}}  # equal as float32: the tie goes to "b" (descending id)
    rr = pytrec_eval.RelevanceEvaluator({"a": {"b": 1}}, {"recip_rank"}).evaluate(run)["a"]["recip_rank"]
    assert rr == 1.0
    assert ordered_ids(run)["a"] == ["b", "a"]
    assert evaluate_contract({"a": {"b": 1}}, run, ["mrr@10"]).all["mrr@10"] == 1.0


def test_pytrec_eval_keeps_zero_label_queries_at_0_and_leaves_out_missing_ones():
    result = pytrec_eval.RelevanceEvaluator({q: r for q, r in QRELS.items()}, MEASURES).evaluate(RUN)
    assert set(result) == {"q1", "q2", "q3", "q5"}  # q4 (not in the run), q6/q7 (no qrels): absent
    assert all(v == 0.0 for k, v in result["q3"].items() if not k.startswith("num_"))


def test_contract_equals_trec_eval_in_both_conventions():
    ev = evaluate_contract(QRELS, RUN, METRICS, queries=QUERIES)
    _assert_equal_to_oracle(ev, _oracle(QRELS, RUN, METRICS, QUERIES))
    assert (ev.n_queries, ev.n_answerable, ev.n_unanswerable, ev.n_missing) == (6, 4, 2, 1)
    assert ev.unanswerable == ("q3", "q6")
    assert ev.n_all_relevant == 1  # q2: every retrieved item relevant


def test_default_query_set_is_the_qrels_and_rankings_are_accepted():
    ev = evaluate_contract(QRELS, RUN, METRICS)
    _assert_equal_to_oracle(ev, _oracle(QRELS, RUN, METRICS, list(QRELS)))
    rankings = {q: Ranking("x", list(r), list(r.values())) for q, r in RUN.items()}
    assert evaluate_contract(QRELS, rankings, METRICS).all == ev.all
    assert evaluate_contract(QRELS, Run.from_dict(RUN), METRICS).all == pytest.approx(ev.all)


def test_run_order_ties_follow_the_ranking_order():
    """run_order = trec_eval on a tie-free copy whose scores follow the Ranking's doc_ids."""
    rankings = {q: Ranking("x", list(r)[::-1], sorted(r.values(), reverse=True)) for q, r in RUN.items()}
    tie_free = {q: {d: float(len(r) - i) for i, d in enumerate(r.doc_ids)} for q, r in rankings.items()}
    ev = evaluate_contract(QRELS, rankings, METRICS, queries=QUERIES, ties="run_order")
    assert ev.ties == "run_order"
    _assert_equal_to_oracle(ev, _oracle(QRELS, tie_free, METRICS, QUERIES))
    assert ev.all["mrr@100"] != evaluate_contract(QRELS, rankings, METRICS, queries=QUERIES).all["mrr@100"]


def test_old_evaluate_run_is_not_the_answerable_convention():
    """evaluate_run keeps judged queries with no positive label (scored 0): it is the ``all`` mean
    over the queries with qrels rows, not the answerable-only mean candidate-list papers publish."""
    run = {q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in RUN.items()}  # no ties
    old = evaluate_run(QRELS, Run.from_dict(run), ["map@100", "mrr@100"])
    ev = evaluate_contract(QRELS, run, ["map@100", "mrr@100"], candidates=True)
    assert ev.headline == "answerable" and ev.n_unanswerable == 1
    assert old["map@100"] == pytest.approx(ev.all["map@100"])
    assert old["map@100"] < ev.answerable["map@100"] - 0.05
    assert old["mrr@100"] != pytest.approx(ev.headline_values["mrr@100"])


def test_ranx_ndcg_has_trec_eval_linear_gain_and_ndcg_burges_does_not():
    qrels, run = {"q5": QRELS["q5"]}, {"q5": RUN["q5"]}
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(rescored_run(run).to_dict())["q5"]["ndcg_cut_10"]
    ranx_run, ranx_qrels = rescored_run(run), Qrels.from_dict(qrels)
    assert evaluate(ranx_qrels, ranx_run, "ndcg@10") == pytest.approx(trec, abs=1e-6)
    assert abs(evaluate(ranx_qrels, ranx_run, "ndcg_burges@10") - trec) > 1e-3


def test_names_headline_describe_and_json():
    assert {m: trec_eval_name(m) for m in METRICS} == TREC
    assert trec_eval_name("P@3") == "P_3" and trec_eval_name("H@10") == "success_10"
    assert headline_convention(candidates=True) == "answerable" and headline_convention(False) == "all"
    with pytest.raises(UnknownNameError):
        evaluate_contract(QRELS, RUN, ["map@100"], ties="random")
    ev = evaluate_contract(QRELS, RUN, ["map@100"], queries=QUERIES, candidates=True)
    text = ev.describe()
    assert text.splitlines()[0].startswith(f"map@100 {ev.answerable['map@100']:.4f} over 4 answerable queries (headline); ")
    assert "over all 6 with 2 unanswerable scored 0" in text
    assert "ties: trec_eval order (score desc, then doc id desc)" in text
    assert "all 6" in evaluate_contract(QRELS, RUN, ["map@100"], queries=QUERIES).describe().split("(headline)")[0]
    data = json.loads(json.dumps(ev.to_dict(per_query=True), allow_nan=False))
    assert data["n_unanswerable"] == 2 and data["headline"] == "answerable" and data["per_query"]["map@100"]["q3"] == 0
    nothing = evaluate_contract({"u": {"x": 0}}, {"u": {"x": 1.0}}, ["map@100"])
    assert nothing.all["map@100"] == 0.0 and nothing.to_dict()["answerable"]["map@100"] is None


_DOCS = [f"d{i}" for i in range(12)]


@st.composite
def _cases(draw):
    queries = [f"q{i}" for i in range(draw(st.integers(1, 5)))]
    qrels, run = {}, {}
    for q in queries:
        judged = draw(st.dictionaries(st.sampled_from(_DOCS), st.integers(0, 2), max_size=6))
        if judged or draw(st.booleans()):
            qrels[q] = judged
        retrieved = draw(st.dictionaries(st.sampled_from(_DOCS), st.sampled_from([0.0, 0.5, 1.0, 2.0]), max_size=10))
        if retrieved:
            run[q] = retrieved
    return qrels, run, queries


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_property_random_runs_with_ties_equal_trec_eval(case):
    qrels, run, queries = case
    ev = evaluate_contract(qrels, run, METRICS, queries=queries)
    _assert_equal_to_oracle(ev, _oracle(qrels, run, METRICS, queries))
