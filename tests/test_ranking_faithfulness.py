"""The query view measured like the pair view (``core.analysis.ranking_faithfulness``): the batched importances
equal the one-query function, a system whose ranking hangs on one word is faithful and a reversed explanation of it
is not, the amended Keywords-default rule weighs both views, the probe gate takes the first of its order that passes,
and the page's caption reads the report."""
from __future__ import annotations

import json

import numpy as np
import pytest

ANDROID = ["How do I root an android phone quickly ?", "Which android tablet is best for reading books ?",
           "Why does my android battery drain so fast ?", "Can I run android apps on a laptop ?",
           "What is the newest android version for old phones ?", "How can I back up android contacts to email ?",
           "Is android better than the iPhone for students ?", "Where do android games store their saved data ?"]
QUERIES = ["How do I root an Android device ?", "What is the best way to learn Python programming ?",
           "How can I lose weight fast without exercise ?", "Why is the sky blue during the day ?"]


def test_batched_importances_equal_one_query_at_a_time(built):
    from core.analysis.ranking_importance import ranking_importance, ranking_importances
    from core.data.datasets import load_dataset
    from core.serving.loader import load

    ds = load_dataset("qqp-bimpm")
    bm25 = load("bm25", ds)
    batched = ranking_importances(bm25, QUERIES, ds)
    for query, got in zip(QUERIES, batched):
        alone = ranking_importance(bm25, query, ds)
        assert got.top == alone.top and got.query == alone.query


def _one_word_retriever(ds, word: str):
    """A retriever whose ranking depends on ``word`` alone: questions containing it first, the rest after,
    each group in one fixed order, so that no other word moves anything."""
    from core.retrieval.base import Hits, Retriever

    ids = sorted(ds.corpus)
    has = {d for d in ids if word in ds.corpus[d].lower().split()}

    class OneWord(Retriever):
        name = "one-word"

        def retrieve(self, texts, k):
            out_ids, out_scores = [], []
            for text in texts:
                present = word in text.lower().split()
                order = sorted(range(len(ids)), key=lambda i: (not (present and ids[i] in has), (i * 7919) % 1009))
                out_ids.append([ids[i] for i in order[:k]])
                out_scores.append([float(k - j) for j in range(min(k, len(order)))])
            return Hits(out_ids, out_scores)

    return OneWord()


def test_a_ranking_that_hangs_on_one_word_is_explained_faithfully(built):
    from core.analysis.ranking_faithfulness import ranking_faithfulness
    from core.data.datasets import load_dataset

    ds = load_dataset("qqp-bimpm")
    system = _one_word_retriever(ds, "android")
    queries = ANDROID
    got = ranking_faithfulness(system, queries, ds)
    assert got.summary["queries"] == len(queries) and len(got.weights) == len(queries)
    assert all(w.ranked(1) == ["android"] or w.ranked(1)[0].lower() == "android" for w in got.weights)
    # without "android" nothing of the top 10 is left; with only it, the same questions come first
    assert got.summary["comprehensiveness"]["top"][0] > got.summary["comprehensiveness"]["random"][0]
    assert got.summary["sufficiency"]["top"][0] < got.summary["sufficiency"]["random"][0]
    assert got.summary["more_faithful_than_random"] and got.summary["gain"] > 0


def test_a_reversed_explanation_is_not_more_faithful_than_random(built, monkeypatch):
    import core.analysis.ranking_faithfulness as rf
    from core.analysis.ranking_importance import RankingImportance
    from core.data.datasets import load_dataset

    ds = load_dataset("qqp-bimpm")
    system = _one_word_retriever(ds, "android")
    real = rf.ranking_importances

    def reversed_weights(*args, **kwargs):  # the word that decides everything weighed least
        return [RankingImportance(r.system, [(w, 1.0 - x) for w, x in r.query], r.top) for r in real(*args, **kwargs)]

    monkeypatch.setattr(rf, "ranking_importances", reversed_weights)
    queries = ANDROID
    got = rf.ranking_faithfulness(system, queries, ds)
    assert not got.summary["more_faithful_than_random"]
    assert got.summary["comprehensiveness"]["top"][0] < got.summary["comprehensiveness"]["random"][0]


def test_queries_too_short_are_skipped_and_nothing_left_is_an_empty_summary(built):
    from core.analysis.ranking_faithfulness import ranking_faithfulness
    from core.data.datasets import load_dataset
    from core.serving.loader import load

    ds = load_dataset("qqp-bimpm")
    got = ranking_faithfulness(load("bm25", ds), ["Android phones ?", "Python"], ds)
    assert got.summary["queries"] == 0 and not got.summary["more_faithful_than_random"] and got.weights == []


def _rows(system, gain, faithful=True, plausible=True, method="occlusion", ms=1.0):
    return {"system": system, "method": method, "gain": gain, "more_faithful_than_random": faithful,
            "plausible": plausible, "median_ms": ms}


def test_the_amended_rule_weighs_both_views():
    from bench.explain_decision import decide, decide_amended

    pair = [_rows("a", 3.0), _rows("b", 2.0), _rows("c", 1.0), _rows("d", 4.0, plausible=False)]
    query = {"a": _rows("a", 0.1), "b": _rows("b", 0.9), "c": _rows("c", 0.8), "d": _rows("d", 0.99)}
    assert decide(pair)["default"]["system"] == "a"  # the first rule: the pair view alone
    # ranks: a 1 + 3, b 2 + 1, c 3 + 2 → b; d is not plausible in the pair view, so it is not first
    assert decide_amended(pair, query)["default"]["system"] == "b"
    query["b"] = _rows("b", 0.9, faithful=False)  # not faithful in the query view: no candidate
    assert decide_amended(pair, query)["default"]["system"] in {"a", "c"}
    assert decide_amended(pair, query)["default"]["system"] == "a"  # a 1 + 2, c 2 + 1: tie, the larger pair gain
    query["a"] = _rows("a", 0.1, plausible=False)  # plausible in both views first
    assert decide_amended(pair, query)["default"]["system"] == "c"
    none = {k: _rows(k, 0.5, faithful=False) for k in query}
    got = decide_amended(pair, none)
    assert got["default"]["system"] == "a" and "first rule's default stands" in got["why"]


def test_the_probe_gate_keeps_the_amended_order_and_asks_no_further_than_the_first_pass():
    from bench.explain_decision import decide_amended, decide_gated

    pair = [_rows("a", 3.0), _rows("b", 2.0), _rows("b", 1.9, method="terms"), _rows("c", 1.0),
            _rows("d", 4.0, faithful=False)]
    query = {"a": _rows("a", 0.9), "b": _rows("b", 0.8), "c": _rows("c", 0.7), "d": _rows("d", 0.99)}
    asked: list[str] = []

    def passes(only: set[str]):
        def ask(name: str) -> bool:
            asked.append(name)
            return name in only
        return ask

    assert decide_amended(pair, query)["default"]["system"] == "a"
    got = decide_gated(pair, query, passes({"a", "b", "c"}))  # the amended rule's pick passes: nothing changes
    assert got["default"] == {"system": "a", "method": "occlusion"} and asked == ["a"] and got["gate"] == {"a": True}
    asked.clear()
    got = decide_gated(pair, query, passes({"c", "b"}))  # a fails: the next in the order, b's best method
    assert got["default"] == {"system": "b", "method": "occlusion"} and asked == ["a", "b"]
    assert got["gate"] == {"a": False, "b": True} and "passes both probes" in got["why"]
    asked.clear()
    got = decide_gated(pair, query, passes({"d"}))  # d passes but is not faithful: no candidate; b asked once
    assert asked == ["a", "b", "c"] and got["default"]["system"] == "a"
    assert "no candidate passes both probes" in got["why"] and got["gate"] == {"a": False, "b": False, "c": False}


def test_the_query_view_report_is_read_per_system_and_dataset(tmp_path):
    from core.analysis.keyword_quality import query_view_row

    path = tmp_path / "q.json"
    row = {"system": "bm25", "queries": 3}
    path.write_text(json.dumps({"dataset": "qqp-bimpm", "test": [row], "dev": []}), encoding="utf-8")
    assert query_view_row("bm25", "qqp-bimpm", path) == row
    assert query_view_row("minilm", "qqp-bimpm", path) is None
    assert query_view_row("bm25", "trecqa", path) is None  # measured on another dataset: not shown as this one's
    assert query_view_row("bm25", "qqp-bimpm", tmp_path / "missing.json") is None


def test_the_committed_report_has_every_system_of_the_pair_view_and_the_decision():
    from bench.explain_decision import AMENDED_RULE, PROBE_GATE_RULE
    from core.analysis.keyword_quality import QUERY_REPORT, REPORT, keywords_default

    query = json.loads(QUERY_REPORT.read_text(encoding="utf-8"))
    pair = json.loads(REPORT.read_text(encoding="utf-8"))
    measured = {r["system"] for r in query["test"]} | set(query["skipped"])
    assert {r["system"] for r in pair["dev"]} <= measured
    assert all(r["queries"] >= 100 and np.isfinite(r["gain"]) for r in query["test"])
    assert pair["decision_rule"] == PROBE_GATE_RULE and pair["first_decision"]["default"]
    assert pair["amended_decision"]["decision_rule"] == AMENDED_RULE
    assert keywords_default().system == pair["default"]["system"]
    assert "Amended" not in pair["first_decision"]["decision_rule"]
    # the gate: every system asked before the default failed a probe, the default passes both
    asked = list(pair["gate"])
    assert asked[-1] == pair["default"]["system"] and pair["gate"][asked[-1]]
    assert not any(pair["gate"][s] for s in asked[:-1])
    assert all(p["passes"] for p in pair["probes"].values())
    amended = pair["amended_decision"]
    assert (amended["default"] == pair["default"]) == all(p["passes"] for p in amended["probes"].values())


def test_the_query_view_latency_report_times_each_system(built, tmp_path):
    from bench.query_view_faithfulness import main

    out = tmp_path / "latency.json"
    assert main(["--systems", "bm25,no-such-system", "--latency-only", str(out), "--latency-queries", "3"]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    (row,) = report["rows"]
    assert row["system"] == "bm25" and row["queries"] == 3 and 0 < row["median_ms"] <= row["p90_ms"]
    assert "no-such-system" in report["skipped"] and report["command"].endswith("--latency-queries 3")
