"""Our adapters around ranx on a hand-made run (values computed by hand)."""
from __future__ import annotations

import pytest

from core.errors import DataFormatError, UnknownNameError
from core.analysis.evaluation import check_metrics, evaluate_run, per_query, read_trec_run, write_trec_run
from core.retrieval.base import Ranking

QRELS = {"a": {"d1": 1, "d2": 1}, "b": {"d3": 1}, "c": {"d9": 1}}
RUN = {"a": Ranking("x", ["d1", "d5", "d2"], [3, 2, 1]), "b": Ranking("x", ["d4", "d3"], [2, 1])}


def test_metrics_by_hand():
    m = evaluate_run(QRELS, RUN, ["mrr@10", "recall@2", "map@10", "P@1", "H@1", "H@10", "ndcg@10"])
    assert m["mrr@10"] == pytest.approx((1 + 0.5 + 0) / 3)  # query c is missing from the run: 0
    assert m["recall@2"] == pytest.approx((0.5 + 1 + 0) / 3)
    assert m["map@10"] == pytest.approx(((1 + 2 / 3) / 2 + 0.5 + 0) / 3)
    assert m["precision@1"] == pytest.approx(1 / 3)
    assert m["hit_rate@1"] == pytest.approx(1 / 3) and m["hit_rate@10"] == pytest.approx(2 / 3)
    import math
    idcg_a = 1 + 1 / math.log2(3)
    dcg_a = 1 + 1 / math.log2(4)
    assert m["ndcg@10"] == pytest.approx((dcg_a / idcg_a + (1 / math.log2(3)) + 0) / 3)


def test_per_query_and_names():
    assert per_query(QRELS, RUN, "mrr@10") == {"a": 1.0, "b": 0.5, "c": 0.0}
    assert check_metrics(["H@10", "P@1"]) == ["hit_rate@10", "precision@1"]
    with pytest.raises(UnknownNameError):
        check_metrics(["bogus@3"])


def test_trec_run_roundtrip_and_errors(tmp_path):
    path = write_trec_run(RUN, tmp_path / "x.trec", "x")
    again = read_trec_run(path)
    assert evaluate_run(QRELS, again, ["map@10"]) == evaluate_run(QRELS, RUN, ["map@10"])
    bad = tmp_path / "bad.trec"
    bad.write_text("a Q0 d1 1 3.0 x\na Q0 d2 one 2.0 x\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="bad.trec:2"):
        read_trec_run(bad)
    bad.write_text("a Q0 d1 1\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="bad.trec:1: expected 6 columns"):
        read_trec_run(bad)
