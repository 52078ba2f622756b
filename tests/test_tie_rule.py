"""One tie rule everywhere: Error Analysis, ``core compare`` and ``core eval`` score equal scores the same way (the
evaluation contract's default), say which rule they used, and a run compared with its own TREC file is all ties."""
from __future__ import annotations

from pathlib import Path

import pytest
from ranx import Run

from core.analysis.compared_runs import load_run_file, system_runs
from core.analysis.error_analysis import analyze
from core.analysis.label_sources import label_set
from core.data.datasets import load_dataset
from core.evaluation import DEFAULT_TIES, TIE_RULES, per_query, per_query_metrics
from core.evaluation_contract import evaluate_contract
from core.retrieval.base import Ranking

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "judg_pairs.tsv"


def test_per_query_breaks_ties_as_the_contract_does():
    """Scores equal as trec_eval stores them (32-bit) are a tie broken by doc id descending, in ``per_query`` too."""
    qrels = {"q1": {"a": 1}, "q2": {"z": 1}, "q3": {"b": 1}}
    run = {"q1": {"a": 1.0 + 1e-9, "b": 1.0},   # a 32-bit tie: "b" ranks first, P@1 = 0
           "q2": {"z": 2.0, "y": 2.0},            # an exact tie: "z" ranks first, P@1 = 1
           "q3": {"a": 3.0, "b": 3.0 - 1e-10}}    # a 32-bit tie: "b" ranks first, P@1 = 1
    contract = evaluate_contract(qrels, run, ["precision@1", "mrr@10"])
    assert DEFAULT_TIES == "trec_eval"
    for m in ("precision@1", "mrr@10"):
        assert per_query(qrels, run, m) == pytest.approx(contract.per_query[m])
    assert per_query(qrels, Run.from_dict(run), "precision@1") == {"q1": 0.0, "q2": 1.0, "q3": 1.0}
    assert per_query_metrics(qrels, run, ["P@1"], "run_order")["precision@1"] == {"q1": 1.0, "q2": 1.0, "q3": 0.0}


@pytest.fixture
def ds(tmp_path, monkeypatch):
    monkeypatch.setenv("QRS_VAR", str(tmp_path / "var"))
    from core.retrieval import bm25

    data = load_dataset(f"pairs:{FIXTURE}")
    bm25.build(data)
    return data


def write_trec(rankings: dict, path, tag: str):
    """A stored run's TREC file, written as ``core.analysis.runs.write_run`` writes it (exact scores)."""
    from core.data import trec

    return trec.write_text(path, trec.ranked_text({q: zip(r.doc_ids, map(float, r.scores))
                                                   for q, r in rankings.items()}, tag, score_format=None))


def test_a_run_against_its_own_trec_file_is_all_ties_and_the_rule_is_stated(ds, tmp_path):
    labels = label_set(ds, None, "dataset")
    (bm25,) = system_runs(["bm25"], ds, labels.queries, k=10)
    # scores that 8 significant digits would merge or reorder (BM25 scores of 10-16 are such)
    data = {q: {d: s + 12.0 + 1e-7 * i for i, (d, s) in enumerate(docs.items())} for q, docs in bm25.to_dict().items()}
    rankings = {q: Ranking("bm25", list(v), list(v.values())) for q, v in data.items()}
    path = write_trec(rankings, tmp_path / "own.trec", "own")
    own = load_run_file(path, "own")
    assert own.to_dict() == data  # the stored text gives back the very scores
    mine = Run.from_dict(data, name="bm25")
    mine.name = "bm25"
    res = analyze(labels, [mine, own], "bm25", ["precision@1", "ndcg@10"])
    for m in ("precision@1", "ndcg@10"):
        assert res.win_tie_loss["own"][m] == {"W": 0, "T": res.queries, "L": 0}
        assert res.scores["own"][m] == res.scores["bm25"][m]
    assert res.ties == DEFAULT_TIES and res.to_dict()["tie_rule"] == TIE_RULES[DEFAULT_TIES]


def test_cli_eval_and_error_analysis_report_one_p_at_1(ds, tmp_path, capsys):
    """The same run file: ``core eval --run`` and the analysis (``core compare``) print the same P@1 and the rule."""
    from core.cli.main import main

    labels = label_set(ds, None, "dataset")
    (bm25,) = system_runs(["bm25"], ds, labels.queries, k=10)
    # every query's top two tied: the rule decides P@1
    tied = {q: {d: (1.0 if i < 2 else 0.5 / i) for i, d in enumerate(docs)} for q, docs in bm25.to_dict().items()}
    path = write_trec({q: Ranking("t", list(v), list(v.values())) for q, v in tied.items()}, tmp_path / "t.trec", "t")
    res = analyze(labels, [load_run_file(path, "t")], "t", ["precision@1"])
    contract = evaluate_contract(labels.qrels, tied, ["precision@1"], queries=list(labels.qrels))
    assert res.scores["t"]["precision@1"] == pytest.approx(contract.all["precision@1"])
    capsys.readouterr()
    assert main(["eval", "--dataset", f"pairs:{FIXTURE}", "--run", str(path), "--metrics", "P@1",
                 "--split", "all"]) == 0
    out = capsys.readouterr().out
    assert f"{res.scores['t']['precision@1']:.4f}" in out and TIE_RULES[DEFAULT_TIES] in out
