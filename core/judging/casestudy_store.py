"""Saved case studies, in the same SQLAlchemy database as the judgments (``core.judging.judgments``).

One table, ``case_studies``, declared on the judgment store's ``Base`` (same metadata) and reached
through the judgment store's engine and session factories (WAL readers, ``BEGIN IMMEDIATE`` writes
that give up after the store's lock timeout, one-line ``StoreError`` messages naming the database). A row keeps the title, note, author, time, the dataset and
query, the Compare state as URL parameters (``CompareState.to_params()``) and the rankings and scores
as shown (``CaseTable.to_dict()``, JSON).

Schema: the table is added in a backward-compatible way. The judgment store runs its own upgrade
(``core.judging.migrations``, Alembic) first; then ``upgrade_cases`` reads ``meta.casestudy_schema_version``
without a lock and, only when it is behind, applies this feature's steps in one write transaction and records ``meta.casestudy_schema_version`` in the shared ``meta`` table. The judgment
schema version (``meta.schema_version``) is left as it is, so an app build without case studies still
opens the database (it would refuse a higher judgment schema version) and simply ignores the extra
table.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import JSON, Connection, DateTime, Integer, String, Text, select, text
from sqlalchemy.orm import Mapped, mapped_column

from core.errors import StudioError
from core.judging.case_tables import CaseTable
from core.judging.judgments import JudgmentStore
from core.judging.schema import Base

CASE_SCHEMA_VERSION = 1
CASE_VERSION_KEY = "casestudy_schema_version"
MAX_TITLE_CHARS = 200
MAX_NOTE_CHARS = 4000


class CaseStudyError(StudioError):
    """A case study that cannot be saved, found or changed (nothing was written)."""


def _now() -> datetime:
    return datetime.now(timezone.utc)


class CaseStudyRow(Base):
    __tablename__ = "case_studies"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    title: Mapped[str] = mapped_column(String(MAX_TITLE_CHARS))
    note: Mapped[str | None] = mapped_column(Text, nullable=True)
    author: Mapped[str] = mapped_column(String(80))
    dataset: Mapped[str] = mapped_column(String(300), index=True)
    query: Mapped[str] = mapped_column(Text)
    query_id: Mapped[str | None] = mapped_column(String(300), nullable=True)
    state: Mapped[dict] = mapped_column(JSON)
    rankings: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


def _v0_to_v1(conn: Connection) -> None:
    CaseStudyRow.__table__.create(conn, checkfirst=True)


CASE_STEPS: dict[int, Callable[[Connection], None]] = {0: _v0_to_v1}
"""``CASE_STEPS[v]`` upgrades the case-study tables from version ``v`` to ``v + 1``."""


def _case_version(conn: Connection) -> int:
    value = conn.execute(text("SELECT value FROM meta WHERE key = :k"), {"k": CASE_VERSION_KEY}).scalar()
    try:
        return int(value) if value is not None else 0
    except ValueError:
        raise CaseStudyError(f"meta.{CASE_VERSION_KEY} is {value!r}, not a number: the database is damaged") from None


def upgrade_cases(store: JudgmentStore) -> int:
    """Bring the case-study tables to ``CASE_SCHEMA_VERSION``; returns the version before.

    The version is read first without a write lock: a current database is opened without waiting
    for other writers.
    """
    before = store._reading(lambda: _read_case_version(store))
    if before > CASE_SCHEMA_VERSION:
        raise CaseStudyError(f"the case-study tables have schema version {before}, newer than this app "
                             f"({CASE_SCHEMA_VERSION}); update the app")
    if before == CASE_SCHEMA_VERSION:
        return before

    def tx() -> int:
        with store.engine.execution_options(qrs_write=True).begin() as conn:
            before = _case_version(conn)
            for version in range(before, CASE_SCHEMA_VERSION):
                CASE_STEPS[version](conn)
            if before != CASE_SCHEMA_VERSION:
                conn.execute(text("DELETE FROM meta WHERE key = :k"), {"k": CASE_VERSION_KEY})
                conn.execute(text("INSERT INTO meta (key, value) VALUES (:k, :v)"),
                             {"k": CASE_VERSION_KEY, "v": str(CASE_SCHEMA_VERSION)})
            return before

    return store._run(tx)


def _read_case_version(store: JudgmentStore) -> int:
    with store.engine.connect() as conn:
        return _case_version(conn)


@dataclass(frozen=True)
class SavedCase:
    """A saved comparison: what was shown, by whom, when."""

    id: int
    title: str
    note: str | None
    author: str
    dataset: str
    query: str
    query_id: str | None
    state: dict[str, str]
    table: CaseTable
    created_at: datetime
    updated_at: datetime


def _utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes: they were written in UTC."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


def _record(row: CaseStudyRow) -> SavedCase:
    return SavedCase(row.id, row.title, row.note, row.author, row.dataset, row.query, row.query_id,
                     {str(k): str(v) for k, v in (row.state or {}).items()}, CaseTable.from_dict(row.rankings),
                     _utc(row.created_at), _utc(row.updated_at))


def _check_title(title: str) -> str:
    cleaned = " ".join(str(title or "").split())
    if not cleaned:
        raise CaseStudyError("give the case study a title")
    if len(cleaned) > MAX_TITLE_CHARS:
        raise CaseStudyError(f"the title has {len(cleaned)} characters; the limit is {MAX_TITLE_CHARS}")
    return cleaned


def _check_note(note: str | None) -> str | None:
    note = (note or "").strip() or None
    if note and len(note) > MAX_NOTE_CHARS:
        raise CaseStudyError(f"the note has {len(note)} characters; the limit is {MAX_NOTE_CHARS}")
    return note


class CaseStudyStore:
    """Saved case studies in the judgments database; every call is its own short transaction."""

    def __init__(self, url: str | None = None, *, judgments: JudgmentStore | None = None) -> None:
        self.judgments = judgments or JudgmentStore(url)
        self.url = self.judgments.url
        upgrade_cases(self.judgments)

    def close(self) -> None:
        """Release the connection pool (only when this store opened it)."""
        self.judgments.close()

    def schema_version(self) -> int:
        """``meta.casestudy_schema_version`` (0: never upgraded)."""
        return self.judgments._reading(lambda: _read_case_version(self.judgments))

    def save(self, table: CaseTable, title: str, author: str, note: str | None = None,
             state: Mapping[str, str] | None = None) -> SavedCase:
        """Store a comparison as shown; returns the saved record."""
        title = _check_title(title)
        author = JudgmentStore.check_annotator(author)
        note = _check_note(note)
        if not table.columns:
            raise CaseStudyError("nothing to save: the comparison has no systems")
        params = {str(k): str(v) for k, v in (state or {}).items()}

        def tx() -> SavedCase:
            with self.judgments._write() as s, s.begin():
                now = _now()
                row = CaseStudyRow(title=title, note=note, author=author, dataset=table.dataset, query=table.query,
                                   query_id=table.query_id, state=params, rankings=table.to_dict(),
                                   created_at=now, updated_at=now)
                s.add(row)
                s.flush()
                return _record(row)

        return self.judgments._run(tx)

    def list(self, dataset: str | None = None) -> list[SavedCase]:
        """Saved cases, newest first (optionally of one dataset)."""
        stmt = select(CaseStudyRow).order_by(CaseStudyRow.created_at.desc(), CaseStudyRow.id.desc())
        if dataset is not None:
            stmt = stmt.where(CaseStudyRow.dataset == dataset)
        def read() -> list[SavedCase]:
            with self.judgments._read() as s:
                return [_record(r) for r in s.scalars(stmt)]

        return self.judgments._reading(read)

    def get(self, case_id: int) -> SavedCase:
        """One saved case or ``CaseStudyError``."""
        def read() -> SavedCase:
            with self.judgments._read() as s:
                row = s.get(CaseStudyRow, int(case_id))
                if row is None:
                    raise CaseStudyError(f"no saved case study with id {case_id}")
                return _record(row)

        return self.judgments._reading(read)

    def rename(self, case_id: int, title: str, note: str | None = None) -> SavedCase:
        """New title (and note, when given)."""
        title = _check_title(title)
        new_note = _check_note(note) if note is not None else None

        def tx() -> SavedCase:
            with self.judgments._write() as s, s.begin():
                row = s.get(CaseStudyRow, int(case_id))
                if row is None:
                    raise CaseStudyError(f"no saved case study with id {case_id}")
                row.title, row.updated_at = title, _now()
                if note is not None:
                    row.note = new_note
                s.flush()
                return _record(row)

        return self.judgments._run(tx)

    def delete(self, case_id: int) -> bool:
        """Remove a saved case; False if there was none."""

        def tx() -> bool:
            with self.judgments._write() as s, s.begin():
                row = s.get(CaseStudyRow, int(case_id))
                if row is None:
                    return False
                s.delete(row)
                return True

        return self.judgments._run(tx)
