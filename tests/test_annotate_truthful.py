"""Annotate is truthful and manageable: its counters are read from the store (a label sent by the panel counts at
once), and an annotator deletes their own labels on the page with the CLI's typed confirmation, audited."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.panel_driver import annotate_env, label_op, panel_data, send

REPO = Path(__file__).resolve().parent.parent
NAME = f"pairs:{Path(__file__).resolve().parent / 'fixtures' / 'judg_pairs.tsv'}"
PANEL = "annotate.panel"


@pytest.fixture
def page(tmp_path, monkeypatch):
    """Annotate on the judging fixture with one queued query (a fixed pool) and Ada typed in."""
    annotate_env(monkeypatch, tmp_path, REPO)
    from core.data.datasets import load_dataset

    ds = load_dataset(NAME)
    at = AppTest.from_file(str(REPO / "pages" / "4_Annotate.py"), default_timeout=120)
    at.session_state["dataset"] = NAME
    at.session_state["annotate.queue"] = [{"dataset": NAME, "query_id": "q00000", "query": ds.queries["q00000"],
                                           "pool": {"sysA": ["q00001", "q00003"]}}]
    at.run()
    at.text_input(key="annotate.annotator").input("Ada").run()
    assert not at.exception
    return at


def _counters(at) -> tuple[str, str]:
    so_far = next(t.value for t in at.text if "label(s) on" in t.value)
    return so_far, at.get("progress")[0].proto.text


def test_counters_are_read_from_the_store_after_each_label(page):
    at = page
    assert _counters(at) == (f"Ada: 0 label(s) on {NAME} so far", "Query 1 of 1 · 0/2 judged")
    item = next(i for i in panel_data(at, PANEL)["items"])
    send(at, PANEL, "ops", {"ops": [label_op(item, 2)]})
    assert not at.exception
    assert _counters(at) == (f"Ada: 1 label(s) on {NAME} so far", "Query 1 of 1 · 1/2 judged")


def test_delete_my_labels_needs_the_typed_name_and_is_audited(page):
    from core.judging.deletion import deletions
    from core.judging.judgments import JudgmentStore

    at = page
    send(at, PANEL, "ops", {"ops": [label_op(i, 1) for i in panel_data(at, PANEL)["items"]]})
    store = JudgmentStore()
    assert len(store.judgments(annotators=["Ada"])) == 2
    at.text_input(key="annotate.delete.confirm").input("ada lovelace").run()
    at.button(key="annotate.delete.go").click().run()
    assert not at.exception and len(store.judgments(annotators=["Ada"])) == 2  # a wrong name deletes nothing
    assert [e.value for e in at.error if "typed exactly" in e.value and "nothing was deleted" in e.value]
    at.text_input(key="annotate.delete.confirm").input("Ada").run()
    at.button(key="annotate.delete.go").click().run()
    assert not at.exception and store.judgments(annotators=["Ada"]) == []
    assert any("Deleted the labels of Ada" in s.value for s in at.success), [s.value for s in at.success]
    assert [(r.actor, r.kind, r.target) for r in deletions(store)] == [("Ada", "labels", "Ada")]
    assert _counters(at)[0] == f"Ada: 0 label(s) on {NAME} so far"


def test_error_analysis_counts_the_judgments_of_the_chosen_annotators(tmp_path, monkeypatch):
    monkeypatch.setenv("QRS_VAR", str(tmp_path / "var"))
    monkeypatch.setenv("QRS_DB_URL", f"sqlite:///{tmp_path / 'var' / 'j.sqlite'}")
    monkeypatch.chdir(REPO)
    from core.data.datasets import load_dataset
    from core.judging.judgments import JudgmentStore
    from core.retrieval import bm25

    ds = load_dataset(NAME)
    bm25.build(ds)
    store = JudgmentStore()
    for who, qid, doc in (("ann", "q00000", "q00001"), ("bob", "q00002", "q00003"), ("bob", "q00004", "q00005")):
        store.set_label(who, ds.name, ds.queries[qid], doc, ds.corpus[doc], 2, query_id=qid)
    at = AppTest.from_file(str(REPO / "pages" / "5_Error_Analysis.py"), default_timeout=120)
    at.session_state["dataset"] = NAME
    at.run()
    at.multiselect(key="ea.systems").set_value(["bm25"]).run()
    at.radio(key="ea.labels").set_value("judgments").run()
    at.selectbox(key="ea.split").set_value("all").run()
    assert not at.exception
    judges = at.multiselect(key="ea.label_annotators")
    assert judges.options == ["ann", "bob"] and judges.value == ["ann", "bob"]

    def counted() -> str:
        return next(c.value for c in at.caption if "queries with a relevant label" in c.value)

    assert counted().startswith("3 queries") and "(judgments labels)" in counted()
    judges.set_value(["bob"]).run()
    assert not at.exception
    assert counted().startswith("2 queries") and "(judgments of bob labels)" in counted(), counted()
