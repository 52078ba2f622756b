"""The judgment store under faults, on SQLite and a real PostgreSQL (``db_url``, tests/pg_server.py): concurrent
threads and processes (8 x 500 labels) lose nothing and never see "locked", SIGKILL keeps every committed label, a
held write lock never blocks a reader and bounds a writer, foreign or damaged databases are refused and left
byte-identical, a permanent integrity error is not retried, and bad database URLs say what works."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.judging.database import JudgmentError, StoreBusyError, StoreError
from core.judging.judgments import JudgmentStore
from core.judging.schema import SCHEMA_VERSION
from tests.conftest import ROOT
from tests.judgment_store import DS, label_one, store  # noqa: F401  (store: a fixture)
from tests.side_by_side import side_by_side

WORKER = r"""
import sys
from core.judging.judgments import JudgmentStore
url, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = JudgmentStore(url)
for i in range(n):
    store.set_label(name, "toy", f"query {i % 50}", f"d{i}", f"text {i}", i % 3, query_id=f"q{i % 50}")
    print(i, flush=True)
"""


def test_threads_lose_nothing(store):
    def work(t: int) -> None:
        for i in range(60):
            store.set_label(f"t{t}", DS, f"query {i % 7}", f"d{i}", f"text {i}", (i + t) % 3)
            store.set_label(f"t{t}", DS, f"query {i % 7}", f"d{i}", f"text {i}", (i + t) % 3)  # no-op

    errors = side_by_side(work, [(t,) for t in range(8)])
    assert not errors, errors
    js = store.judgments()
    assert len(js) == 8 * 60
    assert {(j.annotator, j.doc_id, j.label) for j in js} == {(f"t{t}", f"d{i}", (i + t) % 3) for t in range(8) for i in range(60)}
    assert len(store.history()) == 8 * 60


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_processes_lose_nothing_and_never_see_locked(db_url, tmp_path):
    """8 processes x 500 labels on one database, SQLite file and PostgreSQL (the quality-gates figure)."""
    url = db_url
    JudgmentStore(url).close()
    n_proc, n = 8, 500
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, url, f"p{p}", str(n)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env=_env(), cwd=tmp_path) for p in range(n_proc)]
    limit = 400 if url.startswith("sqlite") else 480  # PostgreSQL: ~9 round trips a label (about 45 ms here under load)
    errors = [p.communicate(timeout=limit)[1].decode() for p in procs]
    assert all(p.returncode == 0 for p in procs), errors
    assert not any("locked" in e for e in errors)
    s = JudgmentStore(url)
    js = s.judgments()
    assert len(js) == n_proc * n
    assert {(j.annotator, j.doc_id, j.label) for j in js} == {(f"p{p}", f"d{i}", i % 3) for p in range(n_proc) for i in range(n)}


def test_sigkill_keeps_every_committed_label(db_url, tmp_path):
    url = db_url
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


# ----------------------------------------------------------------------------- faults
SQLITE_LOCKER = r"""
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN IMMEDIATE")
c.execute("INSERT INTO guidelines (dataset, text, updated_at) VALUES ('lock', 'x', '2024-01-01')")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
"""

PG_LOCKER = r"""
import sys, time, psycopg
c = psycopg.connect(sys.argv[1])
c.execute("LOCK TABLE annotators, queries, documents, judgments, judgment_history, guidelines IN EXCLUSIVE MODE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _hold_lock(url: str, seconds: float) -> subprocess.Popen:
    """Another process that takes the database's write lock and sleeps holding it."""
    if url.startswith("sqlite"):
        script, target = SQLITE_LOCKER, url.removeprefix("sqlite:///")
    else:
        script, target = PG_LOCKER, url
    proc = subprocess.Popen([sys.executable, "-c", script, target, str(seconds)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env())
    assert proc.stdout.readline().strip() == "locked", proc.stderr.read()
    return proc


def test_held_write_lock_never_blocks_reads_and_bounds_writes(db_url, capsys):
    """With another process holding the write lock, opening the store and reading answer at
    once (no write lock for a current schema, WAL readers) and a write fails within its bound."""
    from core.cli.main import main
    from core.judging.database import DEFAULT_LOCK_TIMEOUT

    assert DEFAULT_LOCK_TIMEOUT <= 10
    s = JudgmentStore(db_url)
    label_one(s, 2)
    s.close()
    locker = _hold_lock(db_url, 60)
    try:
        start = time.monotonic()
        reader = JudgmentStore(db_url, lock_timeout=3.0, create=False)
        assert reader.stats().judgments == 1 and reader.qrels(DS) == {"q1": {"d1": 2}}
        assert main(["judgments", "stats", "--db", db_url, "--json"]) == 0
        assert time.monotonic() - start < 2.5  # had it waited for the lock it would take >= 3 s
        assert '"judgments": 1' in capsys.readouterr().out
        start = time.monotonic()
        with pytest.raises(StoreBusyError) as err:
            label_one(reader, 1, doc="d9", annotator="zoe")
        waited = time.monotonic() - start
        assert 2.9 <= waited < 8, waited
        message = str(err.value)
        assert "\n" not in message and reader.where in message and "busy" in message
    finally:
        locker.kill()
        locker.wait()
    assert [j.doc_id for j in reader.judgments()] == ["d1"]  # nothing was written
    assert label_one(reader, 1, doc="d9", annotator="zoe").changed  # and the lock is gone
    reader.close()


def test_lock_timeout_is_configurable(monkeypatch, tmp_path):
    monkeypatch.setenv("QRS_DB_LOCK_TIMEOUT", "2.5")
    assert JudgmentStore(f"sqlite:///{tmp_path / 'a.sqlite'}").lock_timeout == 2.5
    monkeypatch.setenv("QRS_DB_LOCK_TIMEOUT", "soon")
    with pytest.raises(JudgmentError, match="QRS_DB_LOCK_TIMEOUT"):
        JudgmentStore(f"sqlite:///{tmp_path / 'b.sqlite'}")


def _digest(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _foreign_sqlite(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.execute("INSERT INTO notes (body) VALUES ('my shopping list')")
    conn.close()


def _studio_file(path: Path, version: str | None = None, truncate: int | None = None) -> None:
    s = JudgmentStore(f"sqlite:///{path}")
    label_one(s, 2)
    s.close()
    conn = sqlite3.connect(path, isolation_level=None)
    if version is not None:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
    conn.execute("PRAGMA journal_mode=DELETE")  # checkpoints the WAL into the file
    conn.close()
    if truncate is not None:
        path.write_bytes(path.read_bytes()[:truncate])


@pytest.mark.parametrize("kind, fragment", [
    ("foreign", "not a Question Retrieval Studio judgments database"),
    ("text", "not a SQLite database file"),
    ("truncated", "judgments database"),
    ("corrupt", "judgments database"),
    ("version_two", "not a number"),
    ("version_99", "newer than this app"),
])
def test_a_database_that_is_not_ours_is_refused_and_left_byte_identical(kind, fragment, tmp_path):
    """No tables added, no version stamped, no WAL switch, one line naming the file."""
    path = tmp_path / "other.db"
    if kind == "foreign":
        _foreign_sqlite(path)
    elif kind == "text":
        path.write_text("name,phone\nalice,555\n", encoding="utf-8")
    elif kind == "truncated":
        _studio_file(path, truncate=1500)
    elif kind == "corrupt":
        _studio_file(path)
        data = bytearray(path.read_bytes())
        data[100:4096] = b"\xff" * (4096 - 100)  # page 1 after the header: the schema table
        path.write_bytes(bytes(data))
    else:
        _studio_file(path, version="two" if kind == "version_two" else "99")
    before = _digest(path)
    listing = sorted(p.name for p in tmp_path.iterdir())
    for create in (True, False):
        with pytest.raises(StoreError) as err:
            JudgmentStore(f"sqlite:///{path}", create=create)
        message = str(err.value)
        assert fragment in message and str(path) in message and "\n" not in message, message
    assert _digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == listing  # no -wal / -shm left behind


def test_a_foreign_postgresql_database_is_refused_untouched(postgres_server):
    import psycopg

    url = postgres_server.database()
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("CREATE TABLE notes (id serial PRIMARY KEY, body text)")
    with pytest.raises(StoreError, match="not a Question Retrieval Studio"):
        JudgmentStore(url)
    with psycopg.connect(url) as c:
        tables = {r[0] for r in c.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert tables == {"notes"}


def test_read_only_opening_never_creates_a_database(tmp_path):
    """A typo in a path is an error, not an empty answer; no file, no folders."""
    missing = tmp_path / "typo" / "judgmnets.sqlite"
    with pytest.raises(StoreError, match="does not exist"):
        JudgmentStore(f"sqlite:///{missing}", create=False)
    assert not (tmp_path / "typo").exists()


def test_a_permanent_integrity_error_is_not_retried(store):
    """Only transient errors are retried; a NOT NULL violation surfaces at once."""
    from sqlalchemy import text

    calls = []

    def broken() -> None:
        calls.append(1)
        with store.engine.execution_options(qrs_write=True).begin() as conn:
            conn.execute(text("INSERT INTO annotators (name, created_at) VALUES (NULL, '2024-01-01')"))

    start = time.monotonic()
    with pytest.raises(StoreError) as err:
        store._run(broken)
    assert len(calls) == 1 and time.monotonic() - start < 2
    assert store.where in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("url, fragment", [
    ("notaurl", "not a database URL"),
    ("mysql://u@h/db", "supported: SQLite and PostgreSQL"),
    ("postgresql+psycopg2://u@h/db", "not installed"),
])
def test_bad_database_urls_say_what_works(url, fragment):
    with pytest.raises(JudgmentError, match=fragment):
        JudgmentStore(url)


def test_postgresql_url_needs_no_driver_name(postgres_server):
    """``postgresql://`` works with the pinned psycopg 3 (no ``No module named`` error)."""
    url = postgres_server.database()
    s = JudgmentStore(url)
    assert s.engine.dialect.driver == "psycopg" and s.schema_version() == SCHEMA_VERSION
    assert label_one(s, 1).changed and s.judgments()[0].time.tzinfo is not None
    s.close()
