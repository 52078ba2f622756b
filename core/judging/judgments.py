"""Relevance judgments: a durable SQLAlchemy 2.0 store on SQLite (default) or PostgreSQL.

Tables (schema version ``SCHEMA_VERSION``; ``core.judging.migrations`` creates and upgrades them through
Alembic):

- ``annotators`` (name), ``queries`` (dataset + text, optional dataset query id), ``documents``
  (dataset + doc id, and the hash of the newest text seen for that id);
- ``judgments``: the *current* label of one annotator for one (dataset, query, document): graded
  label (0..``max_label``, 0/1/2 by default), optional note, time, the hash of the text it was given
  on (``doc_hash``) and which systems retrieved the document at what rank (``{SYSTEM: 3}``). When a
  document's text changes, its labels are not duplicated: they are flagged ``stale`` (to be
  re-judged) until the annotator labels the new text. A row without a label is "can't judge" with its
  ``reason`` (``cant_judge``; as campaigns store it): label readers (``judgments``, qrels) skip it;
- ``judgment_history``: append-only log of every change (set, clear, undo) with the note before and
  after, so an overwritten label is never lost and undo restores the previous label and note;
- ``guidelines``: the judging instructions of each dataset (editable);
- ``meta``: the schema version (plus Alembic's ``alembic_version``).

Concurrency and faults
- Each label is committed in its own transaction the moment it is given; re-submitting the same
  label (and note) changes nothing. A write given ``request=KEY`` (an idempotency key the browser made)
  records the key in ``label_requests`` in the same transaction; the same key again applies nothing
  (``LabelResult.repeated``), so a label resent after a lost acknowledgement is stored once.
- Reads never wait for writers: SQLite runs in WAL mode and opening a database whose schema is
  current takes no write lock (``core.judging.migrations.inspect_schema`` is read-only).
- A write that cannot get the lock fails after ``lock_timeout`` seconds (default
  ``DEFAULT_LOCK_TIMEOUT``, env ``QRS_DB_LOCK_TIMEOUT``) with ``StoreBusyError`` naming the database.
  SQLite takes the write lock up front (``BEGIN IMMEDIATE``, busy timeout = the time left); PostgreSQL
  gets ``lock_timeout`` per transaction.
- Only transient errors are retried, within the same bound: a lost race on a unique key, a
  serialization failure or a deadlock on PostgreSQL. Anything else surfaces at once as one
  ``StoreError`` line naming the database.
- A database that is not a Studio database (other tables, a non-numeric or newer schema version, a
  corrupt or plain-text file) is refused and left byte-identical: nothing is written (not even the
  WAL switch) before the schema is recognised.
- ``JudgmentStore(url, create=False)`` (the CLI's read commands) refuses a missing database instead
  of creating it and its folders.

The default database is ``var_dir()/judgments.sqlite``; ``QRS_DB_URL`` overrides it. Supported URLs:
``sqlite:///PATH`` and ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DB`` (driver psycopg 3;
``postgresql+psycopg://`` is the same).
"""
from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from sqlalchemy import create_engine, event, select
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from core.errors import StudioError
from core.judging.migrations import SchemaError, inspect_schema, upgrade_in
from core.judging.schema import (MAX_NAME_CHARS, MAX_REQUEST_CHARS, SCHEMA_VERSION, Annotator, Base,  # noqa: F401
                                 DocumentRow, GuidelinesRow, HistoryRow, JudgmentRow, Meta, QueryRow, RequestRow,
                                 _now, _utc, text_hash)
from core.paths import var_dir
from core.settings import DEFAULT_DB_LOCK_TIMEOUT, SettingsError, settings

DEFAULT_MAX_LABEL = 2
MAX_NOTE_CHARS = 4000
MAX_REASON_CHARS = 1000  # a "can't judge" reason (as campaigns')
DEFAULT_LOCK_TIMEOUT = DEFAULT_DB_LOCK_TIMEOUT
SQLITE_HEADER = b"SQLite format 3\x00"
_T = TypeVar("_T")
_local = threading.local()  # the write deadline of the transaction this thread is starting


class JudgmentError(StudioError):
    """A label, annotator name, query or database that cannot be used (nothing was written)."""


class StoreError(JudgmentError):
    """The database failed or is not a Studio database; the message names the database."""


class StoreBusyError(StoreError):
    """Another process held the write lock for longer than the store's lock timeout."""


# ----------------------------------------------------------------------------- value objects
@dataclass(frozen=True)
class Judgment:
    """One current label (what exports, agreement and error analysis read).

    ``stale``: the document's text changed since this label was given (re-judge it).
    """

    annotator: str
    dataset: str
    query: str
    query_id: str
    doc_id: str
    label: int
    note: str | None
    systems: dict[str, int]
    time: datetime
    doc_hash: str = ""
    stale: bool = False


@dataclass(frozen=True)
class HistoryEntry:
    """One change in the append-only history."""

    annotator: str
    dataset: str
    query_id: str
    doc_id: str
    action: str
    label: int | None
    previous_label: int | None
    note: str | None
    time: datetime
    note_before: str | None = None


@dataclass(frozen=True)
class LabelResult:
    """Outcome of ``set_label`` / ``clear_label`` / ``undo``: whether anything changed, the label before;
    ``repeated``: the request's idempotency key was applied before, so nothing was done now."""

    changed: bool
    previous: int | None
    repeated: bool = False


@dataclass
class StoreStats:
    """Counts for the CLI ``judgments stats`` and the pages."""

    annotators: dict[str, int] = field(default_factory=dict)
    judgments: int = 0
    queries: int = 0
    documents: int = 0
    history: int = 0
    label_counts: dict[int, int] = field(default_factory=dict)
    stale: int = 0


DEFAULT_GUIDELINES = (
    "Is the candidate question asking the same thing as the query?\n"
    "2 = same question (a duplicate: one answer serves both)\n"
    "1 = related (overlapping topic, an answer would partly help)\n"
    "0 = not the same question\n"
    "Judge the meaning, not the wording. Use the note for doubts."
)


def query_match_form(text: str) -> str:
    """The form two typed queries are compared in: the text pipeline's terms (lower case, punctuation dropped),
    so "How can I stop my depression?" and "how can i stop my depression" are one query; a text without any
    term keeps its own stripped form."""
    from core.data.pipeline import terms

    return " ".join(terms(text)) or text.strip()


def query_key(qid: str | None, text: str) -> str:
    """The query id used in qrels/runs: the dataset id, or ``text:<hash>`` of a typed query's match form
    (``query_match_form``: the same key however the question is cased or punctuated)."""
    return qid if qid else "text:" + text_hash(query_match_form(text))[:16]


# ----------------------------------------------------------------------------- engine
def default_url() -> str:
    """``QRS_DB_URL`` or a SQLite file in the artifacts folder."""
    return settings().db_url or f"sqlite:///{Path(var_dir()) / 'judgments.sqlite'}"


def default_lock_timeout() -> float:
    """Seconds a write waits for the lock: ``QRS_DB_LOCK_TIMEOUT`` or ``DEFAULT_LOCK_TIMEOUT``."""
    try:
        return settings().db_lock_timeout
    except SettingsError as exc:
        raise JudgmentError(str(exc)) from None


SUPPORTED = "sqlite:///PATH/judgments.sqlite or postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE"


def parse_url(url: str) -> URL:
    """A checked SQLAlchemy URL: SQLite, or PostgreSQL through psycopg 3 (``postgresql://`` means that)."""
    try:
        parsed = make_url(str(url))
    except ArgumentError:
        raise JudgmentError(f"{str(url)[:200]!r} is not a database URL; use {SUPPORTED}") from None
    backend = parsed.get_backend_name()
    if backend == "postgresql" or parsed.drivername == "postgres":
        if parsed.drivername in ("postgresql", "postgres"):
            parsed = parsed.set(drivername="postgresql+psycopg")
        if parsed.drivername != "postgresql+psycopg":
            raise JudgmentError(f"database driver {parsed.drivername!r} is not installed; use postgresql:// "
                                "(psycopg 3, pinned in requirements.txt)")
        if not parsed.database:
            raise JudgmentError(f"{parsed.render_as_string(hide_password=True)!r} names no database; use {SUPPORTED}")
        return parsed
    if backend != "sqlite":
        raise JudgmentError(f"unsupported database {parsed.drivername!r}; supported: SQLite and PostgreSQL "
                            f"({SUPPORTED})")
    return parsed


def describe_url(url: str | URL) -> str:
    """How messages name a database: the SQLite file, or the URL without its password."""
    parsed = url if isinstance(url, URL) else parse_url(url)
    if parsed.get_backend_name() == "sqlite":
        return parsed.database or ":memory:"
    return parsed.render_as_string(hide_password=True)


def _sqlite_file(parsed: URL) -> Path | None:
    db = parsed.database
    if not db or db == ":memory:" or db.startswith("file:"):
        return None
    return Path(db)


def make_engine(url: str | None = None, lock_timeout: float | None = None) -> Engine:
    """An engine for ``url`` with bounded lock waits (see module docstring); creates nothing on disk."""
    parsed = parse_url(url or default_url())
    timeout = default_lock_timeout() if lock_timeout is None else float(lock_timeout)
    if parsed.get_backend_name() == "postgresql":
        # lock_timeout bounds every lock wait of the session; ``JudgmentStore._run`` bounds the retries.
        return create_engine(parsed, pool_pre_ping=True, connect_args={
            "connect_timeout": max(1, int(round(timeout))), "options": f"-c lock_timeout={int(timeout * 1000)}"})
    engine = create_engine(parsed, connect_args={"timeout": timeout, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:  # noqa: ANN001
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (pysqlite recipe)
        cur = dbapi_connection.cursor()
        cur.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        cur.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: committed data survives a killed process
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:  # noqa: ANN001
        if conn.get_execution_options().get("qrs_write", False):
            conn.exec_driver_sql(f"PRAGMA busy_timeout={_remaining_ms(timeout)}")
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")

    return engine


def _remaining_ms(timeout: float) -> int:
    deadline = getattr(_local, "deadline", None)
    left = timeout if deadline is None else deadline - time.monotonic()
    return max(1, int(left * 1000))


def _sqlstate(exc: DBAPIError) -> str:
    return str(getattr(exc.orig, "sqlstate", "") or "")


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return (text.splitlines() or [type(exc).__name__])[0][:300]


def _with_context(row, document, dataset: str | None):
    """``select`` of judgment or history rows with their annotator name, query row and ``document`` (the
    document row or one of its columns), in insertion order, optionally for one dataset."""
    stmt = (
        select(row, Annotator.name, QueryRow, document)
        .join(Annotator, row.annotator_id == Annotator.id)
        .join(QueryRow, row.query_id == QueryRow.id)
        .join(DocumentRow, row.document_id == DocumentRow.id)
        .order_by(row.id)
    )
    return stmt if dataset is None else stmt.where(QueryRow.dataset == dataset)


# ----------------------------------------------------------------------------- the store
class JudgmentStore:
    """Judgments in a database: every call is its own short transaction (see module docstring).

    ``create=False``: refuse a database that does not exist yet (read-only callers) instead of
    creating it. ``lock_timeout``: seconds a write may wait for the lock (default 10 s or
    ``QRS_DB_LOCK_TIMEOUT``).
    """

    def __init__(self, url: str | None = None, max_label: int = DEFAULT_MAX_LABEL, *,
                 lock_timeout: float | None = None, create: bool = True) -> None:
        self.parsed = parse_url(url or default_url())
        self.url = self.parsed.render_as_string(hide_password=False)
        self.where = describe_url(self.parsed)
        self.max_label = max_label
        self.lock_timeout = default_lock_timeout() if lock_timeout is None else float(lock_timeout)
        if not self.lock_timeout > 0:
            raise JudgmentError(f"lock_timeout must be positive, got {lock_timeout!r}")
        self.backend = self.parsed.get_backend_name()
        self.engine = make_engine(self.url, self.lock_timeout)
        self._read = sessionmaker(bind=self.engine, expire_on_commit=False)
        self._write = sessionmaker(bind=self.engine.execution_options(qrs_write=True), expire_on_commit=False)
        try:
            self._open(create)
        except BaseException:
            self.engine.dispose()
            raise

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    # -- opening: read-only inspection first, a write only to create or upgrade
    def _probe(self):
        """``None`` for a missing SQLite file, else ``migrations.SchemaState`` (read-only)."""

        path = _sqlite_file(self.parsed) if self.backend == "sqlite" else None
        if path is not None:
            if not path.exists():
                return None
            if path.is_dir():
                raise StoreError(f"judgments database {self.where} is a folder, not a SQLite file")
            try:
                with path.open("rb") as f:
                    header = f.read(len(SQLITE_HEADER))
            except OSError as exc:
                raise StoreError(f"judgments database {self.where} cannot be read: {exc.strerror}") from None
            if header and header != SQLITE_HEADER:
                raise StoreError(f"judgments database {self.where} is not a SQLite database file; nothing was changed")
        try:
            with self.engine.connect() as conn:
                return inspect_schema(conn)
        except SchemaError as exc:
            raise StoreError(f"judgments database {self.where}: {exc}") from None
        except DBAPIError as exc:
            raise self._wrap(exc) from None

    def _open(self, create: bool) -> None:

        state = self._probe()
        if state is not None and state.current:
            return  # the common case: no write, no lock
        if not create and (state is None or state.empty):
            what = "does not exist" if state is None else "is empty"
            raise StoreError(f"judgments database {self.where} {what}; nothing to read (label something on the "
                             "Annotate page first, or check --db / QRS_DB_URL)")
        path = _sqlite_file(self.parsed) if self.backend == "sqlite" else None
        if path is not None and (state is None or state.empty):
            path.parent.mkdir(parents=True, exist_ok=True)
            self._set_wal()  # before any table exists: the new file is in WAL mode from its first write

        def tx() -> int:

            try:
                with self.engine.execution_options(qrs_write=True).begin() as conn:
                    return upgrade_in(conn)
            except SchemaError as exc:
                raise StoreError(f"judgments database {self.where}: {exc}") from None

        self._run(tx)
        if path is not None:
            self._set_wal()  # an upgraded pre-WAL file

    def _set_wal(self) -> None:
        raw = self.engine.raw_connection()
        try:
            mode = raw.driver_connection.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() != "wal":
                raw.driver_connection.execute("PRAGMA journal_mode=WAL")
        except Exception as exc:  # noqa: BLE001 - sqlite3 errors become one line naming the file
            raise StoreError(f"judgments database {self.where}: {_first_line(exc)}") from None
        finally:
            raw.close()

    # -- plumbing
    def _wrap(self, exc: DBAPIError) -> StoreError:
        if self._busy(exc):
            return StoreBusyError(
                f"judgments database {self.where} is busy: another process holds its write lock; gave up after "
                f"{self.lock_timeout:g} s (QRS_DB_LOCK_TIMEOUT sets the limit); nothing was written")
        return StoreError(f"judgments database {self.where}: {_first_line(exc)}")

    def _busy(self, exc: DBAPIError) -> bool:
        if self.backend == "postgresql":
            return _sqlstate(exc) == "55P03"  # lock_not_available (lock_timeout)
        text = _first_line(exc).lower()
        return "database is locked" in text or "database is busy" in text

    def _transient(self, exc: DBAPIError) -> bool:
        """Worth another try: a lost race on a unique key, a serialization failure, a deadlock (PostgreSQL)."""
        if self.backend == "postgresql":
            return _sqlstate(exc) in ("23505", "40001", "40P01")
        return False  # SQLite writers are serialized by BEGIN IMMEDIATE: nothing else is transient

    def _run(self, fn: Callable[[], _T]) -> _T:
        """Run one transaction; retry only transient errors and only until the lock deadline."""
        deadline = time.monotonic() + self.lock_timeout
        delay = 0.005
        while True:
            _local.deadline = deadline
            try:
                return fn()
            except DBAPIError as exc:
                left = deadline - time.monotonic()
                retry = self._transient(exc) or (self._busy(exc) and self.backend == "sqlite" and left > 0.05)
                if not retry or left <= 0:
                    raise self._wrap(exc) from None
                time.sleep(min(left, delay * (0.5 + random.random())))
                delay = min(delay * 2, 0.25)
            finally:
                _local.deadline = None

    _retry = _run  # the name core.judging.casestudy_store uses

    def _reading(self, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except DBAPIError as exc:
            raise self._wrap(exc) from None

    def schema_version(self) -> int:
        """The schema version recorded in the database."""
        def read() -> int:
            with self._read() as s:
                row = s.get(Meta, "schema_version")
                return int(row.value) if row else 0

        return self._reading(read)

    # -- validation
    def _check_label(self, label: int) -> int:
        if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label <= self.max_label:
            raise JudgmentError(f"label must be an integer from 0 to {self.max_label}, got {label!r}")
        return label

    @staticmethod
    def check_annotator(name: str) -> str:
        """A clean annotator name (canonical: e-mail addresses lower-cased) or ``JudgmentError``."""
        from core.judging.identity import canonical_identity

        cleaned = canonical_identity(name)
        if not cleaned:
            raise JudgmentError("enter an annotator name first")
        if len(cleaned) > MAX_NAME_CHARS:
            raise JudgmentError(f"the annotator name has {len(cleaned)} characters; the limit is {MAX_NAME_CHARS}")
        return cleaned

    @staticmethod
    def check_request(key: str | None) -> str | None:
        """A clean idempotency key (1..64 printable ASCII characters) or ``JudgmentError``; None stays None."""
        if key is None:
            return None
        if not isinstance(key, str) or not 0 < len(key) <= MAX_REQUEST_CHARS or not key.isascii() \
                or not key.isprintable() or key != key.strip():
            raise JudgmentError(f"a request key is 1 to {MAX_REQUEST_CHARS} printable ASCII characters, "
                                f"got {str(key)[:80]!r}; nothing was changed")
        return key

    @staticmethod
    def first_request(s: Session, key: str | None, annotator_id: int, action: str) -> bool:
        """Inside a write transaction: True when ``key`` is new (recorded now, committed with the write) or
        None; False when that request was applied before. A concurrent insert of the same key loses on the
        unique key and its transaction is retried (``_run``), then finds the key."""
        if key is None:
            return True
        if s.scalar(select(RequestRow.id).where(RequestRow.key == key)) is not None:
            return False
        s.add(RequestRow(key=key, annotator_id=annotator_id, action=action, created_at=_now()))
        s.flush()
        return True

    def requests_applied(self, keys: Iterable[str]) -> set[str]:
        """Which of these idempotency keys were applied (read-only)."""
        wanted = [k for k in keys if isinstance(k, str)]

        def read() -> set[str]:
            with self._read() as s:
                return set(s.scalars(select(RequestRow.key).where(RequestRow.key.in_(wanted)))) if wanted else set()

        return self._reading(read)

    @staticmethod
    def _check_text(what: str, value: str) -> str:
        if not isinstance(value, str):
            raise JudgmentError(f"the {what} must be text, got {type(value).__name__}")
        if "\x00" in value:
            raise JudgmentError(f"the {what} contains a NUL character")
        return value

    # -- get-or-create (inside a write transaction; a concurrent insert of the same key is not an error)
    @staticmethod
    def _get_or_insert(s: Session, model, stmt, values: dict):
        """The row ``stmt`` selects, inserted first when missing (a concurrent insert is not an error)."""
        row = s.scalar(stmt)
        if row is not None:
            return row
        if s.get_bind().dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        else:
            from sqlalchemy.dialects.sqlite import insert as dialect_insert
        s.execute(dialect_insert(model).values(**values).on_conflict_do_nothing())
        return s.scalar(stmt)

    def _annotator(self, s: Session, name: str) -> Annotator:
        return self._get_or_insert(s, Annotator, select(Annotator).where(Annotator.name == name),
                                   {"name": name, "created_at": _now()})

    def _query(self, s: Session, dataset: str, text: str, qid: str | None) -> QueryRow:
        h = text_hash(text)
        row = self._get_or_insert(s, QueryRow, select(QueryRow).where(QueryRow.dataset == dataset, QueryRow.text_hash == h),
                                  {"dataset": dataset, "text": text, "text_hash": h, "qid": qid})
        if qid and not row.qid:
            row.qid = qid
        return row

    def _document(self, s: Session, dataset: str, doc_id: str, doc_hash: str) -> DocumentRow:
        row = self._get_or_insert(
            s, DocumentRow, select(DocumentRow).where(DocumentRow.dataset == dataset, DocumentRow.doc_id == doc_id),
            {"dataset": dataset, "doc_id": doc_id, "text_hash": doc_hash})
        if row.text_hash != doc_hash:
            row.text_hash = doc_hash  # the text changed: labels given on the old text become stale
        return row

    @staticmethod
    def _current(s: Session, annotator: str, dataset: str, query: str, doc_id: str) -> JudgmentRow | None:
        return s.scalar(
            select(JudgmentRow)
            .join(Annotator, JudgmentRow.annotator_id == Annotator.id)
            .join(QueryRow, JudgmentRow.query_id == QueryRow.id)
            .join(DocumentRow, JudgmentRow.document_id == DocumentRow.id)
            .where(Annotator.name == annotator, QueryRow.dataset == dataset, QueryRow.text_hash == text_hash(query),
                   DocumentRow.dataset == dataset, DocumentRow.doc_id == doc_id)
        )

    # -- writes
    def set_label(
        self,
        annotator: str,
        dataset: str,
        query: str,
        doc_id: str,
        doc_text: str,
        label: int,
        *,
        query_id: str | None = None,
        note: str | None = None,
        systems: Mapping[str, int] | None = None,
        request: str | None = None,
    ) -> LabelResult:
        """Commit one label now, keyed by (dataset, query, document, annotator).

        ``note=None`` keeps the current note, ``note=""`` clears it. The same label, note and text
        again is a no-op; a label on a changed document text replaces the old one (no second label).
        ``request``: the idempotency key of this label; applied once, however often it is sent.
        """
        return self._write_judgment(annotator, dataset, query, doc_id, doc_text, self._check_label(label), None,
                                    query_id=query_id, note=note, systems=systems, request=request)

    def cant_judge(
        self,
        annotator: str,
        dataset: str,
        query: str,
        doc_id: str,
        doc_text: str,
        reason: str,
        *,
        query_id: str | None = None,
        note: str | None = None,
        systems: Mapping[str, int] | None = None,
        request: str | None = None,
    ) -> LabelResult:
        """Record "can't judge" with a reason (required) in place of a label, as campaigns do: the row keeps
        no label, so qrels and agreement skip it; undo brings back what was there. Arguments as ``set_label``."""
        reason = self._check_text("reason", reason if isinstance(reason, str) else "").strip()
        if not reason:
            raise JudgmentError("say why the item cannot be judged (a reason is required); nothing was changed")
        if len(reason) > MAX_REASON_CHARS:
            raise JudgmentError(f"the reason has {len(reason)} characters; the limit is {MAX_REASON_CHARS}")
        return self._write_judgment(annotator, dataset, query, doc_id, doc_text, None, reason,
                                    query_id=query_id, note=note, systems=systems, request=request)

    def _write_judgment(self, annotator: str, dataset: str, query: str, doc_id: str, doc_text: str,
                        label: int | None, reason: str | None, *, query_id: str | None, note: str | None,
                        systems: Mapping[str, int] | None, request: str | None) -> LabelResult:
        """A label (``reason`` None) or a "can't judge" (``label`` None) in one transaction, with its history."""
        annotator = self.check_annotator(annotator)
        request = self.check_request(request)
        for what, value in (("dataset", dataset), ("query", query), ("document id", doc_id), ("document text", doc_text)):
            self._check_text(what, value)
        if not query.strip():
            raise JudgmentError("the query is empty")
        if not doc_id.strip():
            raise JudgmentError("the document id is empty")
        keep_note = note is None  # None keeps the current note; "" clears it
        if note is not None:
            note = self._check_text("note", note).strip() or None
            if note and len(note) > MAX_NOTE_CHARS:
                raise JudgmentError(f"the note has {len(note)} characters; the limit is {MAX_NOTE_CHARS}")
        hits = {str(k): int(v) for k, v in (systems or {}).items()}
        d_hash = text_hash(doc_text)
        action = "set" if label is not None else "cant_judge"

        def tx() -> LabelResult:
            with self._write() as s, s.begin():
                row = self._current(s, annotator, dataset, query, doc_id)
                previous = row.label if row is not None else None
                if request is not None and not self.first_request(s, request, self._annotator(s, annotator).id, action):
                    return LabelResult(False, previous, repeated=True)
                new_note = (row.note if row is not None else None) if keep_note else note
                if (row is not None and row.label == label and row.reason == reason and row.note == new_note
                        and row.doc_hash == d_hash and row.document.text_hash == d_hash):
                    return LabelResult(False, previous)  # the common re-submit path: one SELECT
                now = _now()
                d = self._document(s, dataset, doc_id, d_hash)
                note_before = row.note if row is not None else None
                reason_before = row.reason if row is not None else None
                if row is None:
                    a = self._annotator(s, annotator)
                    q = self._query(s, dataset, query, query_id)
                    row = JudgmentRow(annotator_id=a.id, query_id=q.id, document_id=d.id, label=label, reason=reason,
                                      note=new_note, systems=hits or None, created_at=now, doc_hash=d_hash)
                    s.add(row)
                else:
                    row.label, row.reason, row.created_at, row.note, row.doc_hash = label, reason, now, new_note, d_hash
                    if hits:
                        row.systems = {**(row.systems or {}), **hits}
                s.flush()
                s.add(HistoryRow(annotator_id=row.annotator_id, query_id=row.query_id, document_id=row.document_id,
                                 action=action, label=label, previous_label=previous, note=row.note,
                                 note_before=note_before, systems=row.systems, created_at=now, doc_hash=d_hash,
                                 reason=reason, reason_before=reason_before))
                return LabelResult(True, previous)

        return self._run(tx)

    def clear_label(self, annotator: str, dataset: str, query: str, doc_id: str) -> LabelResult:
        """Remove the current label; the history keeps it (and its note)."""
        annotator = self.check_annotator(annotator)

        def tx() -> LabelResult:
            with self._write() as s, s.begin():
                row = self._current(s, annotator, dataset, query, doc_id)
                if row is None:
                    return LabelResult(False, None)
                s.add(HistoryRow(annotator_id=row.annotator_id, query_id=row.query_id, document_id=row.document_id,
                                 action="clear", label=None, previous_label=row.label, note=None,
                                 note_before=row.note, systems=row.systems, created_at=_now(),
                                 doc_hash=row.doc_hash, reason_before=row.reason))
                previous = row.label
                s.delete(row)
                return LabelResult(True, previous)

        return self._run(tx)

    def undo(self, annotator: str, dataset: str, query: str, doc_id: str, *, request: str | None = None) -> LabelResult:
        """Revert the newest not-yet-undone change of this label: previous label (or "can't judge" and its
        reason) *and* previous note.

        A first label is removed; a cleared label comes back. Logged as an ``undo`` history entry.
        ``request``: the idempotency key of this undo (applied once).
        """
        annotator = self.check_annotator(annotator)
        request = self.check_request(request)

        def tx() -> LabelResult:
            with self._write() as s, s.begin():
                if request is not None and not self.first_request(s, request, self._annotator(s, annotator).id, "undo"):
                    return LabelResult(False, None, repeated=True)
                a = s.scalar(select(Annotator).where(Annotator.name == annotator))
                q = s.scalar(select(QueryRow).where(QueryRow.dataset == dataset, QueryRow.text_hash == text_hash(query)))
                d = s.scalar(select(DocumentRow).where(DocumentRow.dataset == dataset, DocumentRow.doc_id == doc_id))
                if a is None or q is None or d is None:
                    return LabelResult(False, None)
                entries = s.scalars(select(HistoryRow).where(
                    HistoryRow.annotator_id == a.id, HistoryRow.query_id == q.id, HistoryRow.document_id == d.id,
                ).order_by(HistoryRow.id.desc())).all()
                pending = 0
                target = None
                for h in entries:
                    if h.action == "undo":
                        pending += 1
                    elif h.action in ("set", "cant_judge", "clear"):
                        if pending:
                            pending -= 1
                        else:
                            target = h
                            break
                    else:
                        break  # "migrated": nothing older to go back to
                if target is None:
                    return LabelResult(False, None)
                row = s.scalar(select(JudgmentRow).where(JudgmentRow.annotator_id == a.id,
                                                         JudgmentRow.query_id == q.id, JudgmentRow.document_id == d.id))
                current = row.label if row is not None else None
                current_note = row.note if row is not None else None
                current_reason = row.reason if row is not None else None
                now = _now()
                if target.previous_label is None and target.reason_before is None:
                    if row is not None:
                        s.delete(row)
                elif row is None:
                    s.add(JudgmentRow(annotator_id=a.id, query_id=q.id, document_id=d.id, label=target.previous_label,
                                      reason=target.reason_before, note=target.note_before, systems=target.systems,
                                      created_at=now, doc_hash=target.doc_hash))
                else:
                    row.label, row.reason, row.note, row.created_at = (target.previous_label, target.reason_before,
                                                                       target.note_before, now)
                s.add(HistoryRow(annotator_id=a.id, query_id=q.id, document_id=d.id, action="undo",
                                 label=target.previous_label, previous_label=current, note=target.note_before,
                                 note_before=current_note, reason=target.reason_before, reason_before=current_reason,
                                 systems=target.systems, created_at=now, doc_hash=target.doc_hash))
                return LabelResult(True, current)

        return self._run(tx)

    def set_guidelines(self, dataset: str, text: str) -> None:
        """Save the judging guidelines of a dataset."""
        self._check_text("guidelines", text)

        def tx() -> None:
            with self._write() as s, s.begin():
                row = s.get(GuidelinesRow, dataset)
                if row is None:
                    s.add(GuidelinesRow(dataset=dataset, text=text, updated_at=_now()))
                else:
                    row.text, row.updated_at = text, _now()

        self._run(tx)

    # -- reads (never take a write lock; WAL readers do not wait for writers)
    def guidelines(self, dataset: str) -> str:
        """The guidelines of a dataset (``DEFAULT_GUIDELINES`` until edited)."""
        def read() -> str:
            with self._read() as s:
                row = s.get(GuidelinesRow, dataset)
                return row.text if row else DEFAULT_GUIDELINES

        return self._reading(read)

    def judgments(
        self, dataset: str | None = None, annotators: Iterable[str] | None = None, query: str | None = None
    ) -> list[Judgment]:
        """Current labels, optionally for one dataset, some annotators, one query text ("can't judge" rows,
        which hold no label, are not labels: ``cant_judged`` reads them)."""
        stmt = _with_context(JudgmentRow, DocumentRow, dataset).where(JudgmentRow.label.is_not(None))
        if annotators is not None:
            from core.judging.identity import canonical_identity

            stmt = stmt.where(Annotator.name.in_([canonical_identity(a) for a in annotators]))
        if query is not None:
            stmt = stmt.where(QueryRow.text_hash == text_hash(query))

        def read() -> list[Judgment]:
            with self._read() as s:
                return [
                    Judgment(name, q.dataset, q.text, query_key(q.qid, q.text), d.doc_id, j.label, j.note,
                             dict(j.systems or {}), _utc(j.created_at), j.doc_hash or "",
                             bool(j.doc_hash) and j.doc_hash != d.text_hash)
                    for j, name, q, d in s.execute(stmt)
                ]

        return self._reading(read)

    def cant_judged(self, dataset: str, annotator: str, query: str) -> dict[str, tuple[str, str | None]]:
        """doc id -> (reason, note) of one annotator's "can't judge" answers on one query."""
        from core.judging.identity import canonical_identity

        stmt = (_with_context(JudgmentRow, DocumentRow, dataset)
                .where(JudgmentRow.label.is_(None), Annotator.name == canonical_identity(annotator),
                       QueryRow.text_hash == text_hash(query)))

        def read() -> dict[str, tuple[str, str | None]]:
            with self._read() as s:
                return {d.doc_id: (j.reason or "", j.note) for j, _, _, d in s.execute(stmt)}

        return self._reading(read)

    def labels_for(self, annotator: str, dataset: str, query: str) -> dict[str, int]:
        """doc id -> label of one annotator for one query (marks already-judged pool items)."""
        return {j.doc_id: j.label for j in self.judgments(dataset, [annotator], query)}

    def stale(self, dataset: str | None = None) -> list[Judgment]:
        """Labels whose document text changed since they were given (to be re-judged)."""
        return [j for j in self.judgments(dataset) if j.stale]

    def history(self, dataset: str | None = None) -> list[HistoryEntry]:
        """Every change, oldest first."""
        stmt = _with_context(HistoryRow, DocumentRow.doc_id, dataset)

        def read() -> list[HistoryEntry]:
            with self._read() as s:
                return [
                    HistoryEntry(name, q.dataset, query_key(q.qid, q.text), doc, h.action, h.label, h.previous_label,
                                 h.note, _utc(h.created_at), h.note_before)
                    for h, name, q, doc in s.execute(stmt)
                ]

        return self._reading(read)

    def annotators(self) -> list[str]:
        """Annotator names, sorted."""
        def read() -> list[str]:
            with self._read() as s:
                return sorted(s.scalars(select(Annotator.name)))

        return self._reading(read)

    def datasets(self) -> list[str]:
        """Datasets that have judged queries."""
        def read() -> list[str]:
            with self._read() as s:
                return sorted(set(s.scalars(select(QueryRow.dataset))))

        return self._reading(read)

    def qrels(self, dataset: str, annotators: Iterable[str] | None = None, resolve: str = "majority") -> dict[str, dict[str, int]]:
        """Judgments as qrels (query key -> doc id -> label), one label per pair.

        Several annotators on one pair: ``majority`` (ties -> the most recent label) or ``latest``.
        """
        return resolve_labels(self.judgments(dataset, annotators), resolve)

    def query_texts(self, dataset: str) -> dict[str, str]:
        """query key -> text of every judged query of a dataset."""
        def read() -> dict[str, str]:
            with self._read() as s:
                rows = s.scalars(select(QueryRow).where(QueryRow.dataset == dataset))
                return {query_key(q.qid, q.text): q.text for q in rows}

        return self._reading(read)

    def stats(self, dataset: str | None = None) -> StoreStats:
        """Counts of annotators, judgments, labels, stale labels, history."""
        js = self.judgments(dataset)
        out = StoreStats(judgments=len(js), history=len(self.history(dataset)), stale=sum(j.stale for j in js))
        for j in js:
            out.annotators[j.annotator] = out.annotators.get(j.annotator, 0) + 1
            out.label_counts[j.label] = out.label_counts.get(j.label, 0) + 1
        out.queries = len({(j.dataset, j.query_id) for j in js})
        out.documents = len({(j.dataset, j.doc_id) for j in js})
        out.label_counts = dict(sorted(out.label_counts.items()))
        return out

    def export_qrels(self, path: str | Path, dataset: str, annotators: Iterable[str] | None = None,
                     resolve: str = "majority") -> Path:
        """Write ``qid 0 docid label`` lines (TREC qrels), sorted."""
        from core.data.trec import qrels_text, write_text

        return write_text(path, qrels_text(self.qrels(dataset, annotators, resolve)))


def resolve_labels(judgments: Iterable[Judgment], resolve: str = "majority") -> dict[str, dict[str, int]]:
    """One label per (query, doc): ``majority`` vote (ties -> most recent) or ``latest``."""
    if resolve not in ("majority", "latest"):
        raise JudgmentError(f"resolve must be 'majority' or 'latest', got {resolve!r}")
    votes: dict[tuple[str, str], list[Judgment]] = {}
    for j in judgments:
        votes.setdefault((j.query_id, j.doc_id), []).append(j)
    out: dict[str, dict[str, int]] = {}
    for (qid, doc), js in votes.items():
        js = sorted(js, key=lambda j: j.time)
        if resolve == "latest":
            label = js[-1].label
        else:
            counts: dict[int, int] = {}
            for j in js:
                counts[j.label] = counts.get(j.label, 0) + 1
            top = max(counts.values())
            label = next(j.label for j in reversed(js) if counts[j.label] == top)
        out.setdefault(qid, {})[doc] = label
    return out


