"""Error analysis, pooling and the judgments CLI on a tiny pairs dataset (BM25 built in a temp QRS_VAR)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from ranx import Qrels, Run, compare

from core.data.datasets import load_dataset
from core.analysis.compared_runs import import_run, imported_runs, load_run_file, run_from_dict, system_runs
from core.analysis.error_analysis import ANALYSIS_METRICS, analyze, query_deltas, rows_to_csv
from core.analysis.error_buckets import (
    jaccard,
    length_bucket,
    most_unjudged,
    pair_bucket,
    pair_bucket_counts,
    query_buckets,
    unjudged_rate,
)
from core.analysis.label_sources import label_set, merge_qrels
from core.analysis.significance import holm, randomization_test
from core.data.trec import run_text
from core.errors import DataFormatError, StudioError
from core.evaluation import evaluate_run
from core.judging.judgments import JudgmentStore
from core.judging.label_records import query_key
from core.judging.pooling import build_pool, shuffle_seed
from core.retrieval.base import Ranking

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "judg_pairs.tsv"


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("QRS_VAR", str(tmp_path / "var"))
    monkeypatch.setenv("QRS_DB_URL", f"sqlite:///{tmp_path / 'var' / 'j.sqlite'}")
    from core.retrieval import bm25

    ds = load_dataset(f"pairs:{FIXTURE}")
    bm25.build(ds)
    return ds


def _reversed_run(run: Run, name: str) -> Run:
    out = Run.from_dict({q: {d: -s for d, s in docs.items()} for q, docs in run.to_dict().items()}, name=name)
    out.name = name
    return out


# ----------------------------------------------------------------------------- pooling
def test_pool_is_union_dedup_blind_and_deterministic():
    rankings = {
        "b": Ranking("b", ["d1", "d2", "d3", "d4"], [4, 3, 2, 1]),
        "a": ["d3", "self", "d5", "d1"],
    }
    pool = build_pool(rankings, 3, "toy", "some query", exclude=["self"])
    assert sorted(p.doc_id for p in pool) == ["d1", "d2", "d3", "d5"]
    by_doc = {p.doc_id: p.systems for p in pool}
    assert by_doc == {"d1": {"b": 1, "a": 3}, "d2": {"b": 2}, "d3": {"b": 3, "a": 1}, "d5": {"a": 2}}
    assert build_pool(rankings, 3, "toy", "some query", exclude=["self"]) == pool
    orders = {tuple(p.doc_id for p in build_pool({"x": [f"d{i}" for i in range(12)]}, 12, "toy", f"q{j}"))
              for j in range(6)}
    assert len(orders) > 1  # the shuffle depends on the query
    assert shuffle_seed("toy", "q") != shuffle_seed("toy2", "q")
    with pytest.raises(ValueError):
        build_pool(rankings, 0, "toy", "q")


# ----------------------------------------------------------------------------- labels
def test_merge_user_judgments_win():
    assert merge_qrels({"q": {"a": 1, "b": 0}}, {"q": {"b": 2, "c": 0}, "r": {"x": 1}}) == {
        "q": {"a": 1, "b": 2, "c": 0}, "r": {"x": 1}}


def test_label_sources(env, tmp_path):
    ds = env
    store = JudgmentStore()
    q0 = "q00000"
    store.set_label("ann", ds.name, ds.queries[q0], "q00003", ds.corpus["q00003"], 2, query_id=q0)  # overrides 0
    store.set_label("ann", ds.name, "a typed question about python", "q00001", ds.corpus["q00001"], 1)
    data = label_set(ds, store, "dataset")
    assert data.qrels[q0] == {"q00001": 1, "q00002": 1, "q00003": 0}  # negative pair = judged 0
    both = label_set(ds, store, "both")
    assert both.qrels[q0]["q00003"] == 2
    typed = query_key(None, "a typed question about python")
    assert both.queries[typed] == "a typed question about python"
    user = label_set(ds, store, "judgments")
    assert set(user.qrels) == {q0, typed}
    with pytest.raises(StudioError):
        label_set(ds, store, "nope")


# ----------------------------------------------------------------------------- statistics
def test_holm_textbook():
    # p = 0.01, 0.04, 0.03 -> 3*0.01 = 0.03, max(0.03, 2*0.03) = 0.06, max(0.06, 1*0.04) = 0.06
    assert holm({"a": 0.01, "b": 0.04, "c": 0.03}) == pytest.approx({"a": 0.03, "c": 0.06, "b": 0.06})
    assert holm({"a": 0.6, "b": 0.9}) == {"a": 1.0, "b": 1.0}
    assert holm({}) == {}


@pytest.mark.parametrize("stat_test", ["student", "fisher"])
def test_analyze_matches_ranx(env, stat_test):
    ds = env
    labels = label_set(ds, None, "dataset")
    (bm25,) = system_runs(["bm25"], ds, labels.queries, k=10)
    worse = _reversed_run(bm25, "reversed")
    res = analyze(labels, [worse, bm25], baseline="bm25", metrics=["ndcg@10", "mrr@10"], stat_test=stat_test)
    assert res.systems == ["bm25", "reversed"] and res.queries == len(labels.qrels)
    assert res.scores["bm25"] == pytest.approx(evaluate_run(labels.qrels, bm25, ["ndcg@10", "mrr@10"]))
    qrels = Qrels.from_dict(labels.qrels)
    report = compare(qrels, [bm25, worse], ["ndcg@10", "mrr@10"], stat_test=stat_test, make_comparable=True, max_p=0.05)
    again = analyze(labels, [worse, bm25], baseline="bm25", metrics=["ndcg@10", "mrr@10"], stat_test=stat_test)
    for m in ("ndcg@10", "mrr@10"):
        p = report.comparisons["reversed", "bm25"][m]["p_value"]
        # student: ranx's p exactly; fisher: ranx's statistic, Monte-Carlo noise only (ranx's is unseeded)
        assert res.pvalues["reversed"][m] == pytest.approx(p, abs=0 if stat_test == "student" else 0.05)
        assert again.pvalues["reversed"][m] == res.pvalues["reversed"][m]  # reproducible
        assert res.holm["reversed"][m] == pytest.approx(res.pvalues["reversed"][m])  # one comparison
    deltas = query_deltas(res, "reversed", "ndcg@10")
    assert [d for _, d in deltas] == sorted(d for _, d in deltas)
    wtl = res.win_tie_loss["reversed"]["ndcg@10"]
    assert (wtl["W"], wtl["T"], wtl["L"]) == (sum(d > 1e-9 for _, d in deltas), sum(abs(d) <= 1e-9 for _, d in deltas),
                                              sum(d < -1e-9 for _, d in deltas))
    assert wtl["L"] >= 1
    table = res.table()
    assert table[0]["ndcg@10 p"] is None and table[1]["ndcg@10 W/T/L"] == f"{wtl['W']}/{wtl['T']}/{wtl['L']}"
    assert rows_to_csv(table).splitlines()[0].startswith("system,ndcg@10,mrr@10")


def test_randomization_test_matches_exact_enumeration():
    import itertools

    import numpy as np

    control = [0.1, 0.5, 0.3, 0.9, 0.2, 0.4, 0.8]
    treatment = [0.3, 0.6, 0.6, 1.0, 0.1, 0.7, 0.9]
    diff = np.subtract(treatment, control)
    exact = np.mean([abs((np.array(s) * diff).mean()) >= abs(diff.mean()) - 1e-12
                     for s in itertools.product([-1, 1], repeat=len(diff))])
    p = randomization_test(control, treatment, n_permutations=4000)
    assert p == pytest.approx(exact, abs=0.03)
    assert randomization_test(control, treatment) == randomization_test(control, treatment)
    assert randomization_test(control, control) == 1.0
    # a difference no permutation reaches: p is 1 / (m + 1), never 0 (Phipson & Smyth 2010)
    assert randomization_test([0.0] * 30, [1.0] * 30, n_permutations=999) == pytest.approx(1 / 1000)


def test_holm_over_three_systems(env):
    ds = env
    labels = label_set(ds, None, "dataset")
    (bm25,) = system_runs(["bm25"], ds, labels.queries, k=10)
    runs = [bm25, _reversed_run(bm25, "rev1"), _reversed_run(bm25, "rev2")]
    res = analyze(labels, runs, metrics=["ndcg@10"])
    raw = {s: res.pvalues[s]["ndcg@10"] for s in ("rev1", "rev2")}
    assert {s: res.holm[s]["ndcg@10"] for s in raw} == pytest.approx(holm(raw))
    with pytest.raises(StudioError):
        analyze(labels, [bm25, bm25], metrics=["ndcg@10"])  # duplicate names


def test_unjudged_rate_and_most_unjudged():
    run = Run.from_dict({"q1": {"a": 3, "b": 2, "c": 1}, "q2": {"x": 2, "y": 1}}, name="s")
    run.name = "s"
    judged = {"q1": {"a": 1, "c": 0}, "q2": {}}
    r = unjudged_rate(run, judged, k=2)
    assert (r.retrieved, r.unjudged, r.rate) == (4, 3, 0.75)
    assert unjudged_rate(run, judged, k=3, queries=["q1"]).unjudged == 1
    top = most_unjudged([run], judged, k=2)
    assert [(q, n) for q, n, _ in top] == [("q2", 2), ("q1", 1)]
    assert top[0][2] == {"s": ["x", "y"]}


# ----------------------------------------------------------------------------- buckets
@pytest.mark.parametrize("sim, relevant, bucket", [
    (0.0, True, "hard"), (0.2, True, "hard"), (0.5, True, "middle"), (0.7, True, "easy"), (1.0, True, "easy"),
    (0.0, False, "easy"), (0.2, False, "easy"), (0.5, False, "middle"), (0.7, False, "hard"), (1.0, False, "hard"),
])
def test_pair_bucket_thresholds(sim, relevant, bucket):
    assert pair_bucket(sim, relevant) == bucket


def test_query_buckets_and_lengths():
    corpus = {"p1": "how to cook rice", "p2": "best pasta recipe", "p3": "how to cook rice well"}
    queries = {"q": "how to cook rice", "r": "an entirely different thing", "s": "how to cook rice"}
    assert jaccard("how to cook rice", "how to cook rice well") == pytest.approx(0.8)
    qrels = {"q": {"p1": 1, "p3": 1, "p2": 0}, "r": {"p2": 1}, "s": {"p1": 1, "p2": 1}}
    assert query_buckets(qrels, queries, corpus) == {"q": "easy", "r": "hard", "s": "middle"}
    counts = pair_bucket_counts(qrels, queries, corpus)
    assert counts["easy"] == {"positive": 3, "negative": 1}  # p2 is a negative with Jaccard 0 for q
    assert counts["hard"] == {"positive": 2, "negative": 0}
    assert [length_bucket(t) for t in ("one", "a b c d e f", "w " * 30)] == ["1-5", "6-10", "21+"]


# ----------------------------------------------------------------------------- imports / exports
def test_import_run_round_trip(env, tmp_path):
    ds = env
    labels = label_set(ds, None, "dataset")
    (bm25,) = system_runs(["bm25"], ds, labels.queries, k=10)
    path = tmp_path / "outside.trec"
    path.write_text(run_text(_reversed_run(bm25, "outside sys").to_dict(), "outside sys").replace("outside sys", "outside"))
    name, stored = import_run(path, ds)
    assert name == "outside" and imported_runs(ds.name) == {"outside": stored}
    back = load_run_file(stored, "outside")
    want = _reversed_run(bm25, "x").to_dict()
    got = back.to_dict()
    assert got.keys() == want.keys()
    for q in want:
        assert got[q] == pytest.approx(want[q], abs=1e-6)
    bad = tmp_path / "bad.trec"
    bad.write_text("q1 Q0 nothere 1 1.0 t\n")
    with pytest.raises(DataFormatError):
        import_run(bad, ds)
    bad.write_text("q1 Q0 d 1\n")
    with pytest.raises(DataFormatError, match=":1"):
        import_run(bad, ds)


# ----------------------------------------------------------------------------- CLI
def _cli(argv: list[str]) -> int:
    from core.cli.judgments import add_commands

    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers(dest="verb", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_compare_equals_core(env, capsys, tmp_path):
    ds = env
    labels = label_set(ds, None, "dataset")
    (bm25,) = system_runs(["bm25"], ds, labels.queries, k=100)
    path = tmp_path / "rev.trec"
    path.write_text(run_text(_reversed_run(bm25, "rev").to_dict(), "rev"))
    name = f"pairs:{FIXTURE}"  # loadable name; ds.name ("pairs:judg_pairs.tsv") keys runs and judgments
    assert _cli(["judgments", "import-run", str(path), "--dataset", name]) == 0
    capsys.readouterr()
    assert _cli(["compare", "--dataset", name, "--systems", "bm25", "--runs", "rev", "--metrics",
                 "ndcg@10,mrr@100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    res = analyze(labels, [bm25, load_run_file(path, "rev")], "bm25", ["ndcg@10", "mrr@100"])
    assert out["table"] == json.loads(json.dumps(res.table()))
    assert _cli(["compare", "--dataset", name, "--systems", "bm25", "--runs", str(path)]) == 0
    assert "bm25" in capsys.readouterr().out


def test_cli_judgments_export_stats_agreement(env, capsys, tmp_path):
    ds = env
    store = JudgmentStore()
    for name, labels in (("ann", (2, 0)), ("bob", (2, 1))):
        for doc, label in zip(("q00001", "q00003"), labels):
            store.set_label(name, ds.name, ds.queries["q00000"], doc, ds.corpus[doc], label, query_id="q00000")
    out = tmp_path / "qrels.txt"
    assert _cli(["judgments", "export-qrels", "--dataset", ds.name, "--out", str(out)]) == 0
    assert Qrels.from_file(str(out), kind="trec").to_dict() == store.qrels(ds.name)
    capsys.readouterr()
    assert _cli(["judgments", "export-qrels", "--dataset", ds.name, "--annotator", "ann"]) == 0
    assert capsys.readouterr().out == "q00000 0 q00001 2\nq00000 0 q00003 0\n"
    assert _cli(["judgments", "stats", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["judgments"] == 4 and stats["annotators"] == {"ann": 2, "bob": 2}
    assert _cli(["judgments", "agreement", "--dataset", ds.name, "--json"]) == 0
    agr = json.loads(capsys.readouterr().out)
    assert agr["method"] == "cohen" and agr["items"] == 2 and len(agr["disagreements"]) == 1


def test_p_values_are_readable_and_the_baseline_row_has_no_none():
    from core.analysis.error_analysis import format_p

    assert format_p(7.7e-62) == "< 1e-10" and format_p(3.2e-11) == "< 1e-10"
    assert format_p(7.7e-5) == "7.7e-05" and format_p(0.0342) == "0.034" and format_p(1.0) == "1.000"
    assert format_p(None) == "—"


def test_analysis_from_values_equals_ranx_compare(env):
    """The page's analysis from cached per-query values gives ranx compare's t-test p-values and the same means."""
    from core.analysis.compared_runs import system_runs
    from core.analysis.error_analysis import analysis_from_values
    from core.evaluation import compare_runs, per_query

    ds = env
    labels = label_set(ds, None, "dataset")
    runs = system_runs(["bm25"], ds, labels.queries, k=100)
    shuffled = run_from_dict({q: {d: -s for d, s in docs.items()} for q, docs in runs[0].to_dict().items()}, "rev")
    runs.append(shuffled)
    values = {r.name: {m: per_query(labels.qrels, r, m) for m in ("ndcg@10", "mrr@100")} for r in runs}
    res = analysis_from_values(labels, ["bm25", "rev"], values, "bm25", ["ndcg@10", "mrr@100"], "student")
    report = compare_runs(labels.qrels, runs, ["ndcg@10", "mrr@100"])
    for m in ("ndcg@10", "mrr@100"):
        assert res.pvalues["rev"][m] == pytest.approx(float(report.comparisons["rev", "bm25"][m]["p_value"]), rel=1e-9)
        assert res.scores["rev"][m] == pytest.approx(report.results["rev"][m])
    rows = res.display_table()
    assert rows[0]["system"] == "bm25" and rows[0]["ndcg@10 p"] == "baseline" and rows[0]["ndcg@10 W/T/L"] == "baseline"
    assert all(v is not None for row in rows for v in row.values())


def test_the_build_stores_per_query_metrics_the_page_reads(built):
    """The build stores per-query metrics on the default labels beside a stored run; they equal ranx on the stored
    run, and are refused for other labels, another depth, or after the model changed."""
    from core.analysis import runs
    from core.analysis.error_analysis import write_per_query
    from core.evaluation import per_query

    ds = load_dataset("qqp-bimpm")
    runs.write_run(ds, "bm25")
    write_per_query(ds, "bm25")
    labels = label_set(ds, None, "dataset", runs.default_split(ds))
    saved = runs.stored_per_query(ds, "bm25", labels.qrels, runs.STORED_DEPTH)
    assert saved is not None and set(saved) == set(ANALYSIS_METRICS)
    (run,) = runs.load_runs(ds, ["bm25"], labels.queries, runs.STORED_DEPTH)
    for m in ANALYSIS_METRICS:
        assert saved[m] == pytest.approx(per_query(labels.qrels, run, m))
    other = {q: dict(v) for q, v in list(labels.qrels.items())[1:]}
    assert runs.stored_per_query(ds, "bm25", other, runs.STORED_DEPTH) is None
    assert runs.stored_per_query(ds, "bm25", labels.qrels, 10) is None
    from core.registry import system_dir

    (system_dir(ds.name, "bm25") / "metrics.json").write_text('{"changed": true}', encoding="utf-8")
    assert runs.stored_per_query(ds, "bm25", labels.qrels, runs.STORED_DEPTH) is None
