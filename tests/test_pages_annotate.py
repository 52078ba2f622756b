"""Pages (AppTest): labelling on Annotate lands in the database; Error Analysis numbers equal the CLI's."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.data.datasets import load_dataset
from core.judging.judgments import JudgmentStore
from tests.panel_driver import annotate_env, label_op, panel_data, send, undo_op

REPO = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "judg_pairs.tsv"
NAME = f"pairs:{FIXTURE}"
PANEL = "annotate.panel"


@pytest.fixture
def env(tmp_path, monkeypatch):
    annotate_env(monkeypatch, tmp_path, REPO)
    from core.retrieval import bm25

    ds = load_dataset(NAME)
    bm25.build(ds)
    return ds


def _page(name: str) -> AppTest:
    at = AppTest.from_file(str(REPO / "pages" / name), default_timeout=120)
    at.session_state["dataset"] = NAME
    return at


def test_annotate_labels_a_result_into_the_database(env):
    """The judging panel gets the pool blind; its ops land in the store once (a resend changes nothing),
    undo takes one back, the next query is prefetched and typed text is handed over verbatim."""
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
    assert not panel_data(at, PANEL)["enabled"]  # no annotator yet
    at.text_input(key="annotate.annotator").input("  Ada  Lovelace ").run()
    data = panel_data(at, PANEL)
    assert data["enabled"] and data["annotator"] == "Ada Lovelace"
    pool_table = at.dataframe[0].value
    assert len(pool_table) == 2 and "sysA" not in pool_table.to_string()  # self-match dropped; blind
    assert "sysA" not in json.dumps(data) and "sysB" not in json.dumps(data)  # the browser never sees systems
    here = [i for i in data["items"] if i["group"] == qid]
    typed = [i for i in data["items"] if i["group"] != qid]
    assert len(here) == 2 and [i["query"] for i in typed] == ["<b>typed</b> python question"]  # prefetched
    assert data["start"] == here[0]["uid"]
    first = here[0]
    op = label_op(first, 2, rationale="'); DROP TABLE judgments;--")
    send(at, PANEL, "ops", {"ops": [op]})
    assert not at.exception and op["key"] in panel_data(at, PANEL)["acked"]
    send(at, PANEL, "ops", {"ops": [op]})  # the acknowledgement was lost: the same op again
    store = JudgmentStore()
    (j,) = store.judgments()
    assert (j.annotator, j.query_id, j.label, j.note) == ("Ada Lovelace", qid, 2, "'); DROP TABLE judgments;--")
    assert j.doc_id == first["id"] and len(store.history()) == 1
    assert j.systems == ({"sysA": 2, "sysB": 1} if j.doc_id == "q00003" else {"sysA": 1})
    # label 0 on the second candidate, then undo it (each op once, however often it is sent)
    zero, undo = label_op(here[1], 0), undo_op(here[1])
    send(at, PANEL, "ops", {"ops": [op, zero]})
    assert sorted(x.label for x in store.judgments()) == [0, 2]
    send(at, PANEL, "ops", {"ops": [zero, undo]})
    send(at, PANEL, "ops", {"ops": [undo]})
    assert [x.label for x in store.judgments()] == [2]
    assert [h.action for h in store.history()] == ["set", "set", "undo"]  # undo reverts the label and its note
    # "can't judge" with a reason (S in the panel), as campaigns store it: no label, so qrels skip it
    assert data["can_cant"]
    cant = {**undo_op(here[1]), "kind": "cant", "reason": "the candidate is cut off", "rationale": "half a line"}
    send(at, PANEL, "ops", {"ops": [cant]})
    send(at, PANEL, "ops", {"ops": [cant]})  # resent: applied once
    assert not at.exception and cant["key"] in panel_data(at, PANEL)["acked"]
    assert [x.label for x in store.judgments()] == [2] and store.qrels(ds.name) == {qid: {first["id"]: 2}}
    assert store.cant_judged(ds.name, "Ada Lovelace", ds.queries[qid]) == {
        here[1]["id"]: ("the candidate is cut off", "half a line")}
    shown = next(i for i in panel_data(at, PANEL)["items"] if i["uid"] == here[1]["uid"])
    assert (shown["cant"], shown["label"], shown["judged"]) == ("the candidate is cut off", None, True)
    assert "can't judge" in at.dataframe[0].value["judged"].tolist()
    assert [h.action for h in store.history()][-1] == "cant_judge" and len(store.history()) == 4
    send(at, PANEL, "ops", {"ops": [{**cant, "key": "no-reason", "reason": "  "}]})
    assert "a reason is required" in panel_data(at, PANEL)["failed"]["no-reason"] and len(store.history()) == 4
    send(at, PANEL, "ops", {"ops": [undo_op(here[1])]})
    assert store.cant_judged(ds.name, "Ada Lovelace", ds.queries[qid]) == {}
    # into the next query: the panel says so and the server moves its window
    send(at, PANEL, "nav", {"group": typed[0]["group"]})
    data = panel_data(at, PANEL)
    assert data["group"] == typed[0]["group"] and data["more"] == {"next": False, "prev": True}
    send(at, PANEL, "ops", {"ops": [label_op(typed[0], 1)]})
    assert not at.exception
    assert {x.query for x in store.judgments()} == {ds.queries[qid], "<b>typed</b> python question"}
    # a browser's ref (another document, another query) is ignored: the label is about the item shown
    bad = {**label_op(typed[0], 2), "ref": {"query": "forged", "qid": None, "doc": "no-such-doc"}}
    send(at, PANEL, "ops", {"ops": [bad]})
    assert bad["key"] in panel_data(at, PANEL)["acked"] and len(store.judgments()) == 2
    assert {(x.query, x.doc_id) for x in store.judgments() if x.label == 2} >= {
        ("<b>typed</b> python question", typed[0]["id"])}


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
    from core.analysis.compared_runs import import_run, system_runs
    from core.analysis.error_analysis import format_p
    from core.analysis.label_sources import label_set
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
        page, tests = at.dataframe[0].value, at.dataframe[1].value  # the means; the tests, a row per system and metric
        # narrow tables: no column per metric and test (the one wide table was wider than the page)
        assert [c for c in page.columns if c != "system"] == list(at.multiselect(key="ea.metrics").value)
        assert list(tests.columns) == ["system", "metric", "p", "p (Holm)", "W/T/L"]
        assert all(d.proto.placeholder == "—" for d in at.dataframe[:2])  # a missing cell never reads "None"
        cli = _cli_compare(["compare", "--dataset", NAME, "--systems", "bm25", "--runs", "rev", "--labels", source,
                            "--stat-test", test, "--json"])
        assert len(page) == len(cli["table"]) == 2
        for row, (_, got) in zip(cli["table"], page.iterrows()):
            assert got["system"] == ("run:" + row["system"] if row["system"] == "rev" else row["system"])
            for metric in cli["metrics"]:
                assert got[metric] == row[metric]
                tested = tests[(tests["system"] == got["system"]) & (tests["metric"] == metric)]
                if row[f"{metric} p"] is not None:  # shown formatted: "0.034", "7.7e-05", "< 1e-10"
                    (one,) = tested.to_dict("records")
                    assert one["p"] == format_p(row[f"{metric} p"])
                    assert one["p (Holm)"] == format_p(row[f"{metric} p (Holm)"])
                    assert one["W/T/L"] == row[f"{metric} W/T/L"]
                else:  # the baseline: no test against itself, so no row in the tests table
                    assert tested.empty
        assert "None" not in page.astype(str).to_string() + tests.astype(str).to_string()
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


def test_annotate_shows_a_tokenized_dataset_query_as_people_wrote_it(built, tmp_path, monkeypatch):
    """QQP stores its questions tokenized ("startup idea ?"); Annotate shows the display form, as every other page
    does (the stored form is what the models read), and labels still land under the stored query."""
    monkeypatch.setenv("QRS_DB_URL", f"sqlite:///{tmp_path / 'j.sqlite'}")
    monkeypatch.setenv("QRS_AUTOBUILD", "0")
    ds = load_dataset("qqp-bimpm")
    qid = next(q for q in ds.queries if ds.display_query(q) != ds.queries[q])
    at = AppTest.from_file(str(REPO / "pages" / "4_Annotate.py"), default_timeout=120)
    at.session_state["dataset"] = "qqp-bimpm"
    at.session_state["annotate.queue"] = [{"dataset": "qqp-bimpm", "query_id": qid, "query": ds.queries[qid],
                                           "pool": {"sysA": [d for d in ds.corpus if d != qid][:2]}}]
    at.run()
    assert not at.exception, at.exception
    from tests.panel_driver import panel_data

    shown = [t.value for t in at.text] + [i["query"] for i in panel_data(at, "annotate.panel")["items"]]
    assert ds.display_query(qid) in shown and ds.queries[qid] not in shown, (ds.queries[qid], shown)
