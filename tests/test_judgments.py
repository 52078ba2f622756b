"""Judgment store: idempotency, history, qrels round-trip, migration, concurrency, durability, injection."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ranx import Qrels

from core.judgments import (
    DEFAULT_GUIDELINES,
    JudgmentError,
    JudgmentStore,
    default_url,
    query_key,
    read_trec_qrels,
    text_hash,
)
from core.migrations import current_version

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
DS = "toy"

WORKER = r"""
import sys
from core.judgments import JudgmentStore
url, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = JudgmentStore(url)
for i in range(n):
    store.set_label(name, "toy", f"query {i % 50}", f"d{i}", f"text {i}", i % 3, query_id=f"q{i % 50}")
    print(i, flush=True)
"""


@pytest.fixture
def store(tmp_path: Path) -> JudgmentStore:
    s = JudgmentStore(f"sqlite:///{tmp_path / 'j.sqlite'}")
    yield s
    s.close()


def _label(store: JudgmentStore, label: int, annotator: str = "alice", doc: str = "d1", **kw):
    return store.set_label(annotator, DS, "How do I learn Python?", doc, f"text of {doc}", label, query_id="q1", **kw)


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
    assert _label(store, 2).changed
    assert not _label(store, 2).changed
    assert not _label(store, 2, systems={"bm25": 1}).changed
    assert len(store.judgments()) == 1
    assert len(store.history()) == 1


def test_overwrite_keeps_history(store):
    _label(store, 2, systems={"bm25": 3})
    first_time = store.judgments()[0].time
    result = _label(store, 0, note="on second thought")
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
    _label(store, 1, annotator="alice")
    _label(store, 2, annotator="bob")
    _label(store, 0, annotator="alice", doc="d2")
    _label(store, 2, annotator="alice")
    got = sorted((j.annotator, j.doc_id, j.label) for j in store.judgments())
    assert got == [("alice", "d1", 2), ("alice", "d2", 0), ("bob", "d1", 2)]
    assert store.labels_for("alice", DS, "How do I learn Python?") == {"d1": 2, "d2": 0}


@pytest.mark.parametrize("bad", [3, -1, True, 1.0, "1"])
def test_bad_label_is_refused_and_nothing_written(store, bad):
    with pytest.raises(JudgmentError):
        _label(store, bad)
    with pytest.raises(JudgmentError):
        store.set_label("  ", DS, "q", "d1", "t", 1)
    assert store.judgments() == [] and store.history() == [] and store.annotators() == []


def test_graded_scale_is_configurable(tmp_path):
    s = JudgmentStore(f"sqlite:///{tmp_path / 'five.sqlite'}", max_label=4)
    assert s.set_label("a", DS, "q", "d", "t", 4).changed
    with pytest.raises(JudgmentError):
        s.set_label("a", DS, "q", "d", "t", 5)


def test_qrels_export_round_trip(store, tmp_path):
    _label(store, 2, annotator="alice", doc="d1")
    _label(store, 1, annotator="bob", doc="d1")
    _label(store, 1, annotator="carol", doc="d1")
    _label(store, 0, annotator="alice", doc="d2")
    store.set_label("alice", DS, "a typed question", "d3", "text of d3", 2)
    expected = {"q1": {"d1": 1, "d2": 0}, query_key(None, "a typed question"): {"d3": 2}}
    assert store.qrels(DS) == expected  # majority: 1 (bob, carol) beats 2 (alice)
    path = store.export_qrels(tmp_path / "out" / "qrels.txt", DS)
    assert read_trec_qrels(path) == expected
    assert Qrels.from_file(str(path), kind="trec").to_dict() == expected
    assert store.qrels(DS, annotators=["alice"]) == {"q1": {"d1": 2, "d2": 0}, query_key(None, "a typed question"): {"d3": 2}}


def test_majority_tie_goes_to_latest(store):
    _label(store, 2, annotator="alice")
    time.sleep(0.01)
    _label(store, 1, annotator="bob")
    assert store.qrels(DS) == {"q1": {"d1": 1}}
    assert store.qrels(DS, resolve="latest") == {"q1": {"d1": 1}}


def test_guidelines_default_and_edit(store):
    assert store.guidelines(DS) == DEFAULT_GUIDELINES
    store.set_guidelines(DS, "Duplicates only.")
    store.set_guidelines("other", "x")
    assert store.guidelines(DS) == "Duplicates only." and store.guidelines("other") == "x"


def test_migration_from_v1(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript((FIXTURES / "judg_schema_v1.sql").read_text())
    s = JudgmentStore(f"sqlite:///{path}")
    assert s.schema_version() == 2
    with s.engine.connect() as conn:
        assert current_version(conn) == 2
    got = sorted((j.annotator, j.query_id, j.doc_id, j.label, j.note) for j in s.judgments())
    assert got == [("alice", "q00000", "q00001", 2, None), ("alice", "q00000", "q00002", 0, None),
                   ("bob", "q00000", "q00001", 1, None)]
    assert [h.action for h in s.history()] == ["migrated"] * 3
    # the upgraded database takes new labels, notes and systems, and keeps the overwritten one
    ds = "pairs:judg_pairs.tsv"
    res = s.set_label("alice", ds, "How do I learn Python?", "q00001", "ignored: new hash", 1, note="n")
    assert res.changed and res.previous is None  # a different text hash is a different document
    s.close()
    again = JudgmentStore(f"sqlite:///{path}")  # reopening is a no-op upgrade
    assert again.schema_version() == 2 and len(again.judgments()) == 4
    again.close()


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "new.sqlite"
    JudgmentStore(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(JudgmentError, match="newer"):
        JudgmentStore(f"sqlite:///{path}")


def test_threads_lose_nothing(store):
    def work(t: int) -> None:
        for i in range(60):
            store.set_label(f"t{t}", DS, f"query {i % 7}", f"d{i}", f"text {i}", (i + t) % 3)
            store.set_label(f"t{t}", DS, f"query {i % 7}", f"d{i}", f"text {i}", (i + t) % 3)  # no-op

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    js = store.judgments()
    assert len(js) == 8 * 60
    assert {(j.annotator, j.doc_id, j.label) for j in js} == {(f"t{t}", f"d{i}", (i + t) % 3) for t in range(8) for i in range(60)}
    assert len(store.history()) == 8 * 60


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def test_processes_lose_nothing_and_never_see_locked(tmp_path):
    """8 processes x 500 labels on one SQLite file (the quality-gates figure)."""
    url = f"sqlite:///{tmp_path / 'multi.sqlite'}"
    JudgmentStore(url).close()
    n_proc, n = 8, 500
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, url, f"p{p}", str(n)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env=_env(), cwd=tmp_path) for p in range(n_proc)]
    errors = [p.communicate(timeout=170)[1].decode() for p in procs]
    assert all(p.returncode == 0 for p in procs), errors
    assert not any("locked" in e for e in errors)
    s = JudgmentStore(url)
    js = s.judgments()
    assert len(js) == n_proc * n
    assert {(j.annotator, j.doc_id, j.label) for j in js} == {(f"p{p}", f"d{i}", i % 3) for p in range(n_proc) for i in range(n)}


def test_sigkill_keeps_every_committed_label(tmp_path):
    url = f"sqlite:///{tmp_path / 'kill.sqlite'}"
    proc = subprocess.Popen([sys.executable, "-c", WORKER, url, "victim", "100000"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env(), cwd=tmp_path, text=True)
    committed = -1
    deadline = time.monotonic() + 60
    while committed < 150 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        committed = int(line)
    os.kill(proc.pid, signal.SIGKILL)
    rest = proc.stdout.read()  # anything printed before the kill was committed too
    proc.wait()
    for line in rest.splitlines():
        committed = max(committed, int(line))
    assert committed >= 150, proc.stderr.read()
    s = JudgmentStore(url)
    got = {int(j.doc_id[1:]) for j in s.judgments()}
    assert set(range(committed + 1)) <= got


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
    store.set_label("u", DS, query, "d", "doc", 2, note=note)
    j = next(j for j in store.judgments(query=query))
    assert j.query == query and j.note == (note.strip() or None)
    assert text_hash(query) == text_hash(j.query)


def test_stats_counts(store):
    _label(store, 2, annotator="alice")
    _label(store, 0, annotator="alice", doc="d2")
    _label(store, 1, annotator="bob")
    st_ = store.stats(DS)
    assert st_.annotators == {"alice": 2, "bob": 1}
    assert st_.label_counts == {0: 1, 1: 1, 2: 1}
    assert (st_.judgments, st_.queries, st_.documents, st_.history) == (3, 1, 2, 3)
