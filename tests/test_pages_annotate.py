"""Pages (AppTest): labelling on Annotate lands in the database; Error Analysis numbers equal the CLI's."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.data.datasets import load_dataset
from core.judging.judgments import JudgmentStore

REPO = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "judg_pairs.tsv"
NAME = f"pairs:{FIXTURE}"


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("QRS_VAR", str(tmp_path / "var"))
    monkeypatch.setenv("QRS_DB_URL", f"sqlite:///{tmp_path / 'var' / 'j.sqlite'}")
    monkeypatch.setenv("QRS_AUTOBUILD", "0")
    monkeypatch.chdir(REPO)
    from core.retrieval import bm25

    ds = load_dataset(NAME)
    bm25.build(ds)
    return ds


def _page(name: str) -> AppTest:
    at = AppTest.from_file(str(REPO / "pages" / name), default_timeout=120)
    at.session_state["dataset"] = NAME
    return at


def test_annotate_labels_a_result_into_the_database(env):
    ds = env
    qid = "q00000"
    at = _page("4_Annotate.py")
    at.session_state["annotate.queue"] = [
        {"dataset": NAME, "query_id": qid, "query": ds.queries[qid], "pool": {"sysA": ["q00001", "q00003"],
                                                                               "sysB": ["q00003", qid]}},
        {"dataset": NAME, "query_id": None, "query": "<b>typed</b> python question", "pool": {"sysA": ["q00002"]}},
    ]
    at.run()
    assert not at.exception
    assert at.button(key="annotate.label2").disabled  # no annotator yet
    at.text_input(key="annotate.annotator").input("  Ada  Lovelace ").run()
    pool_table = at.dataframe[0].value
    assert len(pool_table) == 2 and "sysA" not in pool_table.to_string()  # self-match dropped; blind
    shown = [t.value for t in at.text]
    assert ds.queries[qid] in shown
    first_doc = next(d for d in ("q00001", "q00003") if ds.display(d) in shown)  # the current candidate
    first_doc_text = ds.display(first_doc)
    at.text_input(key=f"annotate.note.0.{first_doc}").input("'); DROP TABLE judgments;--").run()
    at.button(key="annotate.label2").click().run()
    assert not at.exception
    store = JudgmentStore()
    (j,) = store.judgments()
    assert (j.annotator, j.query_id, j.label, j.note) == ("Ada Lovelace", qid, 2, "'); DROP TABLE judgments;--")
    assert ds.display(j.doc_id) == first_doc_text
    assert j.systems == ({"sysA": 2, "sysB": 1} if j.doc_id == "q00003" else {"sysA": 1})
    # the cursor moved on; label 0 on the second candidate, then undo it
    at.button(key="annotate.label0").click().run()
    assert sorted(x.label for x in store.judgments()) == [0, 2]
    at.button(key="annotate.undo_btn").click().run()
    assert [x.label for x in store.judgments()] == [2]
    assert [h.action for h in store.history()] == ["set", "set", "undo"]  # undo reverts the label and its note
    # next query: the typed one (text shown verbatim, not as HTML)
    at.button(key="annotate.next").click().run()
    at.button(key="annotate.next").click().run()
    assert "<b>typed</b> python question" in [t.value for t in at.text]
    at.button(key="annotate.label1").click().run()
    assert not at.exception
    assert {x.query for x in store.judgments()} == {ds.queries[qid], "<b>typed</b> python question"}


def test_annotate_empty_queue_and_dataset_queries(env):
    at = _page("4_Annotate.py")
    at.run()
    assert not at.exception and at.info
    at.sidebar.button[0].click().run()  # "Add dataset queries" (pool from the built BM25)
    assert not at.exception
    assert len(at.session_state["annotate.queue"]) == 10
    assert len(at.dataframe[0].value) >= 1


def _cli_compare(argv: list[str]) -> dict:
    from core.cli.judgments import add_commands, compare_from_args

    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers(dest="verb", required=True))
    return compare_from_args(parser.parse_args(argv)).to_dict()


def test_error_analysis_numbers_equal_the_cli(env, tmp_path):
    from core.analysis.error_analysis import format_p, import_run, label_set, system_runs
    from core.data.trec import run_text

    ds = env
    store = JudgmentStore()
    for doc, label in (("q00001", 2), ("q00003", 1), ("q00008", 0)):
        store.set_label("ann", ds.name, ds.queries["q00000"], doc, ds.corpus[doc], label, query_id="q00000")
    (bm25,) = system_runs(["bm25"], ds, label_set(ds, None).queries, k=100)
    rev = tmp_path / "rev.trec"
    rev.write_text("".join(line.replace(" bm25\n", " rev\n") for line in run_text(bm25.to_dict(), bm25.name).splitlines(True)))
    text = rev.read_text().splitlines()
    rev.write_text("".join(f"{' '.join(c[:4])} {-float(c[4])} rev\n" for c in (line.split() for line in text)))
    import_run(rev, ds, "rev")
    at = _page("5_Error_Analysis.py")
    at.run()
    assert not at.exception
    assert {"bm25", "run:rev"} <= set(at.multiselect(key="ea.systems").options)
    at.multiselect(key="ea.systems").set_value(["bm25", "run:rev"]).run()
    assert not at.exception
    for source, test in (("both", "student"), ("dataset", "fisher")):
        at.radio(key="ea.labels").set_value(source).run()
        at.radio(key="ea.test").set_value(test).run()
        assert not at.exception
        page = at.dataframe[0].value
        cli = _cli_compare(["compare", "--dataset", NAME, "--systems", "bm25", "--runs", "rev", "--labels", source,
                            "--stat-test", test, "--json"])
        assert len(page) == len(cli["table"]) == 2
        for row, (_, got) in zip(cli["table"], page.iterrows()):
            assert got["system"] == ("run:" + row["system"] if row["system"] == "rev" else row["system"])
            for metric in cli["metrics"]:
                assert got[metric] == row[metric]
                if row[f"{metric} p"] is not None:  # shown formatted: "0.034", "7.7e-05", "< 1e-10"
                    assert got[f"{metric} p"] == format_p(row[f"{metric} p"])
                    assert got[f"{metric} p (Holm)"] == format_p(row[f"{metric} p (Holm)"])
                    assert got[f"{metric} W/T/L"] == row[f"{metric} W/T/L"]
                else:  # the baseline: no test against itself, and no "None" cell
                    assert got[f"{metric} p"] == got[f"{metric} p (Holm)"] == "baseline"
            assert "None" not in page.astype(str).to_string()
    # "Open on Compare", in two halves: AppTest drops a button's click when the run goes through
    # app.py's st.navigation (Streamlit 1.67), and a page run alone cannot switch pages. The page
    # hands the query to Compare through the session; Compare opens it from there.
    qid = at.selectbox(key="ea.open_q").value
    at.button(key="ea.open").click().run()
    assert [e.message for e in at.exception] and "Could not find page" in at.exception[0].message
    link = at.session_state["compare.open"]
    assert link == {"dataset": NAME, "qid": qid}
    cmp = AppTest.from_file(str(REPO / "pages" / "1_Compare.py"), default_timeout=120)
    cmp.session_state["dataset"] = NAME
    cmp.session_state["compare.open"] = dict(link)
    cmp.run()
    assert not cmp.exception
    assert cmp.session_state["compare.qid"] == qid  # the Compare page opened this query
    assert cmp.text_input(key="compare.query").value == ds.display_query(qid)
