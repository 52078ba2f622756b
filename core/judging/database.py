"""A Studio database on SQLite (default) or PostgreSQL: its URL, an engine with bounded lock waits, opening it
without writing, one transaction at a time with bounded retries, and the idempotency keys of requests.
``core.judging.judgments.JudgmentStore`` (labels), campaigns and case studies are kept in it.

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
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from sqlalchemy import create_engine, event, select
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from core.errors import StudioError
from core.judging.migrations import SchemaError, inspect_schema, upgrade_in
from core.judging.schema import MAX_REQUEST_CHARS, Meta, RequestRow, _now
from core.paths import var_dir
from core.settings import DEFAULT_DB_LOCK_TIMEOUT, SettingsError, settings

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


# ----------------------------------------------------------------------------- the database
class StudioDatabase:
    """A Studio database: every call is its own short transaction (see module docstring).

    ``create=False``: refuse a database that does not exist yet (read-only callers) instead of
    creating it. ``lock_timeout``: seconds a write may wait for the lock (default 10 s or
    ``QRS_DB_LOCK_TIMEOUT``).
    """

    def __init__(self, url: str | None = None, *, lock_timeout: float | None = None, create: bool = True) -> None:
        self.parsed = parse_url(url or default_url())
        self.url = self.parsed.render_as_string(hide_password=False)
        self.where = describe_url(self.parsed)
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

    # -- idempotency keys of requests
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

    # -- inside a write transaction
    @staticmethod
    def _check_text(what: str, value: str) -> str:
        if not isinstance(value, str):
            raise JudgmentError(f"the {what} must be text, got {type(value).__name__}")
        if "\x00" in value:
            raise JudgmentError(f"the {what} contains a NUL character")
        return value

    @staticmethod
    def get_or_insert(s: Session, model, stmt, values: dict):
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
