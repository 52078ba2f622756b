"""core.data.trec: the one TREC run/qrels reader and writer; core.evaluation.roc_auc: the one pair AUC."""
from __future__ import annotations

import math

import numpy as np
import pytest

from core.data import trec
from core.errors import DataFormatError


def test_run_text_is_best_first_and_reads_back(tmp_path):
    run = {"q2": {"b": 0.5, "a": 0.5, "c": 0.9}, "q1": {"x": 1.25}}
    text = trec.run_text(run, "sys")
    assert text.splitlines() == ["q1 Q0 x 1 1.250000 sys", "q2 Q0 c 1 0.900000 sys", "q2 Q0 a 2 0.500000 sys",
                                 "q2 Q0 b 3 0.500000 sys"]
    path = trec.write_text(tmp_path / "sub" / "r.trec", text)
    assert trec.read_run(path) == (run, "sys")


def test_ranked_text_keeps_the_given_order_and_score_format():
    ranked = {"q": [("d2", 0.123456789), ("d1", 1.0)]}
    assert trec.ranked_text(ranked, "t") == "q Q0 d2 1 0.12345679 t\nq Q0 d1 2 1 t\n"
    assert trec.ranked_text(ranked, "t", None) == "q Q0 d2 1 0.123456789 t\nq Q0 d1 2 1.0 t\n"


def test_qrels_round_trip_and_errors(tmp_path):
    qrels = {"q2": {"b": 0, "a": 2}, "q1": {"z": 1}}
    path = trec.write_text(tmp_path / "x.qrels", trec.qrels_text(qrels))
    assert path.read_text(encoding="utf-8") == "q1 0 z 1\nq2 0 a 2\nq2 0 b 0\n"
    assert trec.read_qrels(path) == qrels
    (tmp_path / "bad.qrels").write_text("q1 0 z one\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="bad.qrels:1: expected"):
        trec.read_qrels(tmp_path / "bad.qrels")
    (tmp_path / "bad.trec").write_text("q1 Q0 z 1 0.5\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="6 columns"):
        trec.read_run(tmp_path / "bad.trec")
    with pytest.raises(DataFormatError, match="not found"):
        trec.read_run(tmp_path / "absent.trec")


def test_roc_auc_is_sklearns_and_nan_on_one_class():
    from sklearn.metrics import roc_auc_score

    from core.evaluation import roc_auc

    rng = np.random.default_rng(0)
    labels, scores = rng.integers(0, 2, 200), rng.random(200)
    assert roc_auc(labels, scores) == pytest.approx(roc_auc_score(labels, scores))
    assert roc_auc([0, 1, 1], [0.1, 0.5, 0.5]) == 1.0 and roc_auc([1, 0], [0.5, 0.5]) == 0.5  # ties count ½
    assert math.isnan(roc_auc([1, 1], [0.2, 0.3])) and math.isnan(roc_auc([], []))
