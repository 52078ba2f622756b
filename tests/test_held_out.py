"""Held-out verdicts: a learned system against its reference on the test split's queries, from the same
runs and evaluation module as the tables, cached by both runs' fingerprints, read-only for pages."""
from __future__ import annotations

import pytest


@pytest.fixture
def tiny(built, monkeypatch):
    from core.data.datasets import load_dataset
    from core.retrieval import wordmean

    dataset = load_dataset("qqp-bimpm")
    wordmean.build(dataset)
    # two untrained systems stand in for a learned one and its reference (seconds instead of a training)
    from dataclasses import replace

    from core import registry

    monkeypatch.setitem(registry._BUILT_IN, "glove-mean", replace(registry.get_spec("glove-mean"), reference="bm25"))
    return dataset


def test_verdict_equals_the_evaluation_of_both_runs_and_is_cached(tiny):
    from core.evaluation import evaluate_run
    from core.analysis.held_out import held_out_verdict
    from core.serving.loader import load

    dataset = tiny
    assert dataset.query_splits.get("test")
    assert held_out_verdict(dataset, "glove-mean", compute=False) is None  # pages never compute
    verdict = held_out_verdict(dataset, "glove-mean")
    qrels = dataset.split_qrels("test")
    queries = {q: dataset.queries[q] for q in qrels}
    expected = {}
    for name in ("glove-mean", "bm25"):
        run = load(name, dataset).search_many(queries, k=100, ignore_identical_ids=True)
        expected[name] = evaluate_run(qrels, run, ["hit_rate@1", "mrr@100"])
    assert verdict.queries == len(qrels) and verdict.split == "test" and verdict.reference == "bm25"
    assert verdict.scores["hit_rate@1"] == pytest.approx(expected["glove-mean"]["hit_rate@1"], abs=1e-4)
    assert verdict.reference_scores["mrr@100"] == pytest.approx(expected["bm25"]["mrr@100"], abs=1e-4)
    assert verdict.below == any(round(expected["glove-mean"][m], 4) < round(expected["bm25"][m], 4)
                                for m in ("hit_rate@1", "mrr@100"))  # it must beat its reference on both
    line = verdict.line()
    assert ("BELOW ITS REFERENCE" in line) == verdict.below and "held-out test queries" in line
    assert held_out_verdict(dataset, "glove-mean", compute=False) == verdict


def test_a_rebuilt_model_makes_the_cached_verdict_stale(tiny):
    from core.analysis.held_out import held_out_verdict
    from core.retrieval import bm25

    dataset = tiny
    held_out_verdict(dataset, "glove-mean")
    bm25.build(dataset, config=bm25.BM25Config(k1=0.9, b=0.4))  # the reference changed
    assert held_out_verdict(dataset, "glove-mean", compute=False) is None


def test_systems_without_a_reference_have_no_verdict(tiny):
    from core.analysis.held_out import held_out_verdict, reference_of

    assert reference_of("bm25") is None and reference_of("minilm") is None
    assert reference_of("frm") == "minilm-pairs" and reference_of("cross-encoder") == "minilm-pairs"
    assert held_out_verdict(tiny, "bm25") is None


def _force_below(monkeypatch):
    """Make glove-mean's cached verdict say 'below' whatever the tiny numbers are (the pages only read it)."""
    from core.analysis import held_out

    monkeypatch.setattr(held_out.HeldOutVerdict, "below", property(lambda self: True))


def test_cli_eval_and_compare_say_below_reference(tiny, monkeypatch):
    from core.analysis.held_out import held_out_verdict
    from tests.conftest import app_test, run_main

    verdict = held_out_verdict(tiny, "glove-mean")
    _force_below(monkeypatch)
    code, out, err = run_main("eval", "--system", "glove-mean", "--split", "test", "--metrics", "hit_rate@1")
    assert code == 0, err
    assert f"note: glove-mean: {verdict.line()}" in out and "BELOW ITS REFERENCE" in out
    at = app_test("pages/1_Compare.py").run()
    at.multiselect(key="compare.systems").set_value(["bm25", "glove-mean"]).run()
    at.text_input(key="compare.query").input("How do I learn Python fast?").run()
    assert not at.exception
    assert any("BELOW ITS REFERENCE" in c.value and "glove-mean" in c.value for c in at.caption), \
        [c.value for c in at.caption]
