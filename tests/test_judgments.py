"""Judgment store on SQLite and a real PostgreSQL (``db_url``, tests/pg_server.py): idempotency, history, label
identity, notes and undo, qrels round-trip, Alembic migration, injection strings and any Unicode stored verbatim.
Under faults (concurrency, SIGKILL, locks, foreign databases): tests/test_judgment_faults.py."""
from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ranx import Qrels

from core.data.trec import read_qrels as read_trec_qrels
from core.judging.database import JudgmentError, StoreError, default_url
from core.judging.judgments import JudgmentStore
from core.judging.label_reads import DEFAULT_GUIDELINES
from core.judging.label_records import LabelResult, query_key
from core.judging.migrations import current_version
from core.judging.schema import SCHEMA_VERSION, text_hash
from tests.judgment_store import DS, label_one, store  # noqa: F401  (store: a fixture)

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_default_url_is_sqlite_in_var_and_env_overrides(tmp_path, monkeypatch):
    monkeypatch.setenv("QRS_VAR", str(tmp_path / "var"))
    monkeypatch.delenv("QRS_DB_URL", raising=False)
    assert default_url() == f"sqlite:///{tmp_path / 'var' / 'judgments.sqlite'}"
    monkeypatch.setenv("QRS_DB_URL", f"sqlite:///{tmp_path / 'other.db'}")
    s = JudgmentStore()
    assert s.url.endswith("other.db") and (tmp_path / "other.db").exists()
    with sqlite3.connect(tmp_path / "other.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    s.close()


def test_same_label_twice_is_a_noop(store):
    assert label_one(store, 2).changed
    assert not label_one(store, 2).changed
    assert not label_one(store, 2, systems={"bm25": 1}).changed
    assert len(store.judgments()) == 1
    assert len(store.history()) == 1


def test_overwrite_keeps_history(store):
    label_one(store, 2, systems={"bm25": 3})
    first_time = store.judgments()[0].time
    result = label_one(store, 0, note="on second thought")
    assert result.changed and result.previous == 2
    (current,) = store.judgments()
    assert current.label == 0 and current.note == "on second thought" and current.systems == {"bm25": 3}
    assert current.time >= first_time
    hist = store.history()
    assert [(h.action, h.label, h.previous_label) for h in hist] == [("set", 2, None), ("set", 0, 2)]
    cleared = store.clear_label("alice", DS, "How do I learn Python?", "d1")
    assert cleared.changed and cleared.previous == 0
    assert store.judgments() == []
    assert [h.action for h in store.history()] == ["set", "set", "clear"]
    assert not store.clear_label("alice", DS, "How do I learn Python?", "d1").changed


def test_one_current_label_per_annotator_query_doc(store):
    label_one(store, 1, annotator="alice")
    label_one(store, 2, annotator="bob")
    label_one(store, 0, annotator="alice", doc="d2")
    label_one(store, 2, annotator="alice")
    got = sorted((j.annotator, j.doc_id, j.label) for j in store.judgments())
    assert got == [("alice", "d1", 2), ("alice", "d2", 0), ("bob", "d1", 2)]
    assert store.labels_for("alice", DS, "How do I learn Python?") == {"d1": 2, "d2": 0}


@pytest.mark.parametrize("bad", [3, -1, True, 1.0, "1"])
def test_bad_label_is_refused_and_nothing_written(store, bad):
    with pytest.raises(JudgmentError):
        label_one(store, bad)
    with pytest.raises(JudgmentError):
        store.set_label("  ", DS, "q", "d1", "t", 1)
    assert store.judgments() == [] and store.history() == [] and store.annotators() == []


def test_graded_scale_is_configurable(tmp_path):
    s = JudgmentStore(f"sqlite:///{tmp_path / 'five.sqlite'}", max_label=4)
    assert s.set_label("a", DS, "q", "d", "t", 4).changed
    with pytest.raises(JudgmentError):
        s.set_label("a", DS, "q", "d", "t", 5)


def test_qrels_export_round_trip(store, tmp_path):
    label_one(store, 2, annotator="alice", doc="d1")
    label_one(store, 1, annotator="bob", doc="d1")
    label_one(store, 1, annotator="carol", doc="d1")
    label_one(store, 0, annotator="alice", doc="d2")
    store.set_label("alice", DS, "a typed question", "d3", "text of d3", 2)
    expected = {"q1": {"d1": 1, "d2": 0}, query_key(None, "a typed question"): {"d3": 2}}
    assert store.qrels(DS) == expected  # majority: 1 (bob, carol) beats 2 (alice)
    path = store.export_qrels(tmp_path / "out" / "qrels.txt", DS)
    assert read_trec_qrels(path) == expected
    assert Qrels.from_file(str(path), kind="trec").to_dict() == expected
    assert store.qrels(DS, annotators=["alice"]) == {"q1": {"d1": 2, "d2": 0}, query_key(None, "a typed question"): {"d3": 2}}


def test_majority_tie_goes_to_latest(store):
    label_one(store, 2, annotator="alice")
    time.sleep(0.01)
    label_one(store, 1, annotator="bob")
    assert store.qrels(DS) == {"q1": {"d1": 1}}
    assert store.qrels(DS, resolve="latest") == {"q1": {"d1": 1}}


def test_guidelines_default_and_edit(store):
    assert store.guidelines(DS) == DEFAULT_GUIDELINES
    store.set_guidelines(DS, "Duplicates only.")
    store.set_guidelines("other", "x")
    assert store.guidelines(DS) == "Duplicates only." and store.guidelines("other") == "x"


def _v1_file(path: Path, extra: str = "") -> Path:
    with sqlite3.connect(path) as conn:
        conn.executescript((FIXTURES / "judg_schema_v1.sql").read_text() + extra)
    return path


def test_migration_from_v1(tmp_path):
    """Alembic upgrades the v1 fixture (stamped 0001 from meta.schema_version) to the newest revision."""
    from core.judging.migrations import REVISIONS, head

    path = _v1_file(tmp_path / "old.sqlite")
    s = JudgmentStore(f"sqlite:///{path}")
    assert s.schema_version() == SCHEMA_VERSION and head() == REVISIONS[SCHEMA_VERSION]
    with s.engine.connect() as conn:
        assert current_version(conn) == SCHEMA_VERSION
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == head()
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    got = sorted((j.annotator, j.query_id, j.doc_id, j.label, j.note, j.stale) for j in s.judgments())
    assert got == [("alice", "q00000", "q00001", 2, None, False), ("alice", "q00000", "q00002", 0, None, False),
                   ("bob", "q00000", "q00001", 1, None, False)]
    assert [h.action for h in s.history()] == ["migrated"] * 3
    # the upgraded database takes new labels, notes and systems
    ds = "pairs:judg_pairs.tsv"
    res = s.set_label("alice", ds, "typed question", "q00001", "new text", 1, note="n")
    assert res.changed and res.previous is None
    s.close()
    again = JudgmentStore(f"sqlite:///{path}")  # reopening is a no-op upgrade
    assert again.schema_version() == SCHEMA_VERSION and len(again.judgments()) == 4
    again.close()


def test_migration_merges_documents_whose_text_changed(tmp_path):
    """v1/v2 keyed documents by text hash: alice held two labels on q00001. After the upgrade one stays
    (the newer), the document carries the newest hash and bob's label on the old text is stale."""
    extra = ("INSERT INTO documents (id, dataset, doc_id, text_hash) VALUES (3, 'pairs:judg_pairs.tsv', 'q00001', "
             "'d0c0000b');\nINSERT INTO judgments (id, annotator_id, query_id, document_id, label, created_at) "
             "VALUES (4, 1, 1, 3, 0, '2024-05-02 09:00:00.000000');\n")
    path = _v1_file(tmp_path / "two.sqlite", extra)
    s = JudgmentStore(f"sqlite:///{path}")
    got = sorted((j.annotator, j.doc_id, j.label, j.doc_hash, j.stale) for j in s.judgments())
    assert got == [("alice", "q00001", 0, "d0c0000b", False), ("alice", "q00002", 0, "d0c00002", False),
                   ("bob", "q00001", 1, "d0c00001", True)]
    assert len(s.history()) == 4  # the dropped duplicate is still in the history
    with s.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM documents").scalar() == 2
    s.close()


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "new.sqlite"
    JudgmentStore(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="newer"):
        JudgmentStore(f"sqlite:///{path}")


INJECTION = ["'); DROP TABLE judgments;--", "<script>alert('x')</script>", "Robert'); --", "$\\frac{1}{2}$ **b** [l](http://x)"]


@pytest.mark.parametrize("text", INJECTION)
def test_injection_strings_are_stored_verbatim(store, text):
    store.set_label(text[:80], DS, text, text, text, 1, query_id=text, note=text)
    (j,) = store.judgments()
    assert (j.annotator, j.query, j.query_id, j.doc_id, j.note) == (text[:80].strip(), text, text, text, text)
    store.set_guidelines(text, text)
    assert store.guidelines(text) == text
    assert store.stats().judgments == 1  # tables intact


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(min_size=1, max_size=200).filter(str.strip), note=st.text(max_size=200))
def test_store_round_trips_any_unicode(store, query, note):
    if "\x00" in query + note:  # PostgreSQL text cannot hold NUL: refused on every backend, nothing written
        before = len(store.history())
        with pytest.raises(JudgmentError, match="NUL"):
            store.set_label("u", DS, query, "d", "doc", 2, note=note)
        assert len(store.history()) == before
        return
    store.set_label("u", DS, query, "d", "doc", 2, note=note)
    j = next(j for j in store.judgments(query=query))
    assert j.query == query and j.note == (note.strip() or None)
    assert text_hash(query) == text_hash(j.query)


def test_stats_counts(store):
    label_one(store, 2, annotator="alice")
    label_one(store, 0, annotator="alice", doc="d2")
    label_one(store, 1, annotator="bob")
    st_ = store.stats(DS)
    assert st_.annotators == {"alice": 2, "bob": 1}
    assert st_.label_counts == {0: 1, 1: 1, 2: 1}
    assert (st_.judgments, st_.queries, st_.documents, st_.history) == (3, 1, 2, 3)


def test_a_changed_text_flags_the_label_instead_of_adding_one(store):
    """Identity is (dataset, query, document, annotator); the text hash is a property."""
    q = "How do I learn Python?"
    store.set_label("alice", DS, q, "d1", "old text", 2, query_id="q1")
    store.set_label("bob", DS, q, "d1", "new text", 1, query_id="q1")  # bob sees the edited text
    js = {j.annotator: j for j in store.judgments()}
    assert len(js) == 2 and js["alice"].stale and not js["bob"].stale
    assert js["alice"].doc_hash == text_hash("old text") and store.stats().stale == 1
    assert [j.annotator for j in store.stale(DS)] == ["alice"]
    res = store.set_label("alice", DS, q, "d1", "new text", 1, query_id="q1")  # re-judged on the new text
    assert res.changed and res.previous == 2
    assert sorted((j.annotator, j.label, j.stale) for j in store.judgments()) == [("alice", 1, False), ("bob", 1, False)]
    assert store.qrels(DS) == {"q1": {"d1": 1}}
    assert store.undo("alice", DS, q, "d1").changed  # undo goes back to alice's label on the old text
    assert {j.annotator: j.label for j in store.judgments()} == {"alice": 2, "bob": 1}


def test_notes_can_be_cleared_and_undo_restores_the_previous_note(store):
    label_one(store, 2, note="first thought")
    assert label_one(store, 2).changed is False  # note=None keeps the note
    assert store.judgments()[0].note == "first thought"
    label_one(store, 0, note="second thought")
    assert store.undo("alice", DS, "How do I learn Python?", "d1") == LabelResult(True, 0)
    (j,) = store.judgments()
    assert (j.label, j.note) == (2, "first thought")
    assert label_one(store, 2, note="").changed  # "" clears the note
    assert store.judgments()[0].note is None
    store.undo("alice", DS, "How do I learn Python?", "d1")  # undo the clearing
    assert store.judgments()[0].note == "first thought"
    store.undo("alice", DS, "How do I learn Python?", "d1")  # undo the first label: gone
    assert store.judgments() == []
    assert not store.undo("alice", DS, "How do I learn Python?", "d1").changed
    store.set_label("alice", DS, "How do I learn Python?", "d1", "text of d1", 1, query_id="q1", note="n")
    store.clear_label("alice", DS, "How do I learn Python?", "d1")
    store.undo("alice", DS, "How do I learn Python?", "d1")  # a cleared label comes back with its note
    assert [(j.label, j.note) for j in store.judgments()] == [(1, "n")]
    assert [h.action for h in store.history()][-3:] == ["set", "clear", "undo"]


def test_cant_judge_in_free_judging_is_stored_as_campaigns_store_it(store):
    """No label and a reason (as ``campaign_labels``): qrels, statistics and agreement skip it; a label after
    it clears the reason; undo walks back through both; an empty reason is refused, nothing written."""
    q, cant = "How do I learn Python?", lambda reason, **kw: store.cant_judge("alice", DS, q, "d1", "text of d1",
                                                                            reason, query_id="q1", **kw)
    label_one(store, 2, doc="d2")
    assert cant("  the text is cut off ", note="half a line", request="k1").changed
    assert cant("the text is cut off", request="k1").repeated  # the same request again: nothing
    assert [j.doc_id for j in store.judgments()] == ["d2"] and store.qrels(DS) == {"q1": {"d2": 2}}
    assert store.stats(DS).judgments == 1
    assert store.cant_judged(DS, "alice", q) == {"d1": ("the text is cut off", "half a line")}
    assert store.cant_judged(DS, "bob", q) == {}
    for bad in ("", "   ", None):
        with pytest.raises(JudgmentError, match="a reason is required"):
            cant(bad)
    with pytest.raises(JudgmentError, match="limit"):
        cant("x" * 1001)
    label_one(store, 1)  # a label replaces the "can't judge"
    assert store.cant_judged(DS, "alice", q) == {} and store.qrels(DS) == {"q1": {"d1": 1, "d2": 2}}
    assert store.undo("alice", DS, q, "d1").changed  # the "can't judge" comes back, with its reason
    assert store.cant_judged(DS, "alice", q) == {"d1": ("the text is cut off", "half a line")}
    assert store.qrels(DS) == {"q1": {"d2": 2}}
    store.undo("alice", DS, q, "d1")  # and before it: nothing
    assert store.cant_judged(DS, "alice", q) == {} and len(store.judgments()) == 1
    assert [h.action for h in store.history()] == ["set", "cant_judge", "set", "undo", "undo"]
    assert [h.label for h in store.history()][1] is None


def test_typed_query_key_is_the_same_however_the_question_is_typed():
    same = {query_key(None, t) for t in ("How can I stop my depression?", "how can i stop my depression",
                                            "How can I stop my depression ?", "  HOW can I stop my depression!! ")}
    assert len(same) == 1
    assert query_key(None, "How can I stop my anxiety?") not in same
    assert query_key("q1", "anything") == "q1"
