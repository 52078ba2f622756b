"""Relevance judgments: a durable SQLAlchemy 2.0 store (SQLite by default, any SQLAlchemy URL).

Tables (schema version ``SCHEMA_VERSION``; ``core.migrations`` upgrades older files in place):

- ``annotators`` (name), ``queries`` (dataset + text, optional dataset query id), ``documents``
  (dataset + doc id + hash of the text that was judged);
- ``judgments``: the *current* label of one annotator for one (query, document): graded label
  (0..``max_label``, 0/1/2 by default), optional note, time, and which systems retrieved the document
  and at what rank (``{"bm25": 3}``). Unique per (annotator, query, document);
- ``judgment_history``: append-only log of every change (set, clear), so an overwritten label is
  never lost;
- ``guidelines``: the judging instructions of each dataset (editable);
- ``meta``: the schema version.

Each label is committed in its own transaction the moment it is given; re-submitting the same label
(and note) changes nothing. SQLite runs in WAL mode with a busy timeout and takes the write lock up
front (``BEGIN IMMEDIATE``); "database is locked" is retried with exponential backoff inside the store,
so concurrent writers (threads or processes) never see it. Other back ends (PostgreSQL) go through the
same ORM code; a lost race on a unique key is retried the same way.

The default database is ``var_dir()/judgments.sqlite``; ``QRS_DB_URL`` overrides it.
"""
from __future__ import annotations

import hashlib
import os
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

from sqlalchemy import (
    JSON,
    DateTime,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    select,
)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship, sessionmaker

from core.errors import StudioError
from core.paths import var_dir

SCHEMA_VERSION = 2
DEFAULT_MAX_LABEL = 2
MAX_NAME_CHARS = 80
MAX_NOTE_CHARS = 4000
DB_ENV = "QRS_DB_URL"
_T = TypeVar("_T")


class JudgmentError(StudioError):
    """A label, annotator name or query that cannot be stored (nothing was written)."""


# ----------------------------------------------------------------------------- ORM models
class Base(DeclarativeBase):
    """Declarative base of the judgment store."""

    type_annotation_map = {dict[str, int]: JSON}


def _now() -> datetime:
    return datetime.now(timezone.utc)


def text_hash(text: str) -> str:
    """SHA-256 of a text (UTF-8), hex: identifies the exact text that was judged."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Meta(Base):
    __tablename__ = "meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class Annotator(Base):
    __tablename__ = "annotators"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(MAX_NAME_CHARS), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class QueryRow(Base):
    __tablename__ = "queries"
    __table_args__ = (UniqueConstraint("dataset", "text_hash", name="uq_query_text"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset: Mapped[str] = mapped_column(String(300))
    text: Mapped[str] = mapped_column(Text)
    text_hash: Mapped[str] = mapped_column(String(64))
    qid: Mapped[str | None] = mapped_column(String(300), nullable=True)


class DocumentRow(Base):
    __tablename__ = "documents"
    __table_args__ = (UniqueConstraint("dataset", "doc_id", "text_hash", name="uq_document"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset: Mapped[str] = mapped_column(String(300))
    doc_id: Mapped[str] = mapped_column(String(300))
    text_hash: Mapped[str] = mapped_column(String(64))


class JudgmentRow(Base):
    __tablename__ = "judgments"
    __table_args__ = (UniqueConstraint("annotator_id", "query_id", "document_id", name="uq_judgment"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id"))
    query_id: Mapped[int] = mapped_column(ForeignKey("queries.id"))
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id"))
    label: Mapped[int] = mapped_column(Integer)
    note: Mapped[str | None] = mapped_column(Text, nullable=True)
    systems: Mapped[dict[str, int] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    annotator: Mapped[Annotator] = relationship()
    query: Mapped[QueryRow] = relationship()
    document: Mapped[DocumentRow] = relationship()


class HistoryRow(Base):
    __tablename__ = "judgment_history"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id"))
    query_id: Mapped[int] = mapped_column(ForeignKey("queries.id"))
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id"))
    action: Mapped[str] = mapped_column(String(16))  # "set" | "clear" | "migrated"
    label: Mapped[int | None] = mapped_column(Integer, nullable=True)
    previous_label: Mapped[int | None] = mapped_column(Integer, nullable=True)
    note: Mapped[str | None] = mapped_column(Text, nullable=True)
    systems: Mapped[dict[str, int] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class GuidelinesRow(Base):
    __tablename__ = "guidelines"
    dataset: Mapped[str] = mapped_column(String(300), primary_key=True)
    text: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


# ----------------------------------------------------------------------------- value objects
@dataclass(frozen=True)
class Judgment:
    """One current label (what exports, agreement and error analysis read)."""

    annotator: str
    dataset: str
    query: str
    query_id: str
    doc_id: str
    label: int
    note: str | None
    systems: dict[str, int]
    time: datetime


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


@dataclass(frozen=True)
class LabelResult:
    """Outcome of ``set_label``: whether anything changed and the label it replaced."""

    changed: bool
    previous: int | None


@dataclass
class StoreStats:
    """Counts for the CLI ``judgments stats`` and the pages."""

    annotators: dict[str, int] = field(default_factory=dict)
    judgments: int = 0
    queries: int = 0
    documents: int = 0
    history: int = 0
    label_counts: dict[int, int] = field(default_factory=dict)


DEFAULT_GUIDELINES = (
    "Is the candidate question asking the same thing as the query?\n"
    "2 = same question (a duplicate: one answer serves both)\n"
    "1 = related (overlapping topic, an answer would partly help)\n"
    "0 = not the same question\n"
    "Judge the meaning, not the wording. Use the note for doubts."
)


def query_key(qid: str | None, text: str) -> str:
    """The query id used in qrels/runs: the dataset id, or ``text:<hash>`` for a typed query."""
    return qid if qid else "text:" + text_hash(text)[:16]


# ----------------------------------------------------------------------------- engine
def default_url() -> str:
    """``QRS_DB_URL`` or a SQLite file in the artifacts folder."""
    return os.environ.get(DB_ENV) or f"sqlite:///{Path(var_dir()) / 'judgments.sqlite'}"


def make_engine(url: str | None = None, busy_timeout_ms: int = 30000) -> Engine:
    """An engine for ``url``; SQLite gets WAL, a busy timeout and ``BEGIN IMMEDIATE`` writes."""
    url = url or default_url()
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True)
    database = make_url(url).database
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": busy_timeout_ms / 1000, "check_same_thread": False})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:  # noqa: ANN001
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (pysqlite recipe)
        cur = dbapi_connection.cursor()
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        if ":memory:" not in url and url not in ("sqlite://", "sqlite:///"):
            cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: committed data survives a killed process
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:  # noqa: ANN001
        write = conn.get_execution_options().get("qrs_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def _is_retryable(exc: Exception) -> bool:
    if isinstance(exc, IntegrityError):
        return True  # a concurrent writer created the same row first: re-read and retry
    text = str(getattr(exc, "orig", exc)).lower()
    return any(s in text for s in ("database is locked", "database is busy", "deadlock", "could not serialize"))


# ----------------------------------------------------------------------------- the store
class JudgmentStore:
    """Judgments in a database: every call is its own short transaction (see module docstring)."""

    def __init__(self, url: str | None = None, max_label: int = DEFAULT_MAX_LABEL, retries: int = 60) -> None:
        from core.migrations import upgrade

        self.url = url or default_url()
        self.max_label = max_label
        self.retries = retries
        self.engine = make_engine(self.url)
        self._read = sessionmaker(bind=self.engine, expire_on_commit=False)
        self._write = sessionmaker(bind=self.engine.execution_options(qrs_write=True), expire_on_commit=False)
        self._retry(lambda: upgrade(self.engine))

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    # -- plumbing
    def _retry(self, fn: Callable[[], _T]) -> _T:
        delay = 0.005
        for attempt in range(self.retries + 1):
            try:
                return fn()
            except (OperationalError, IntegrityError) as exc:
                if attempt == self.retries or not _is_retryable(exc):
                    raise
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.5)
        raise AssertionError("unreachable")

    def schema_version(self) -> int:
        """The schema version recorded in the database."""
        with self._read() as s:
            row = s.get(Meta, "schema_version")
            return int(row.value) if row else 0

    # -- validation
    def _check_label(self, label: int) -> int:
        if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label <= self.max_label:
            raise JudgmentError(f"label must be an integer from 0 to {self.max_label}, got {label!r}")
        return label

    @staticmethod
    def check_annotator(name: str) -> str:
        """A clean annotator name or ``JudgmentError``."""
        cleaned = " ".join(str(name or "").split())
        if not cleaned:
            raise JudgmentError("enter an annotator name first")
        if len(cleaned) > MAX_NAME_CHARS:
            raise JudgmentError(f"the annotator name has {len(cleaned)} characters; the limit is {MAX_NAME_CHARS}")
        return cleaned

    # -- get-or-create (inside a write transaction)
    @staticmethod
    def _annotator(s: Session, name: str) -> Annotator:
        row = s.scalar(select(Annotator).where(Annotator.name == name))
        if row is None:
            row = Annotator(name=name)
            s.add(row)
            s.flush()
        return row

    @staticmethod
    def _query(s: Session, dataset: str, text: str, qid: str | None) -> QueryRow:
        h = text_hash(text)
        row = s.scalar(select(QueryRow).where(QueryRow.dataset == dataset, QueryRow.text_hash == h))
        if row is None:
            row = QueryRow(dataset=dataset, text=text, text_hash=h, qid=qid)
            s.add(row)
            s.flush()
        elif qid and not row.qid:
            row.qid = qid
        return row

    @staticmethod
    def _document(s: Session, dataset: str, doc_id: str, doc_text: str) -> DocumentRow:
        h = text_hash(doc_text)
        row = s.scalar(
            select(DocumentRow).where(
                DocumentRow.dataset == dataset, DocumentRow.doc_id == doc_id, DocumentRow.text_hash == h
            )
        )
        if row is None:
            row = DocumentRow(dataset=dataset, doc_id=doc_id, text_hash=h)
            s.add(row)
            s.flush()
        return row

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
    ) -> LabelResult:
        """Commit one label now. Same label (and no new note) again is a no-op; a change is logged."""
        annotator = self.check_annotator(annotator)
        label = self._check_label(label)
        if not query or not str(query).strip():
            raise JudgmentError("the query is empty")
        if note is not None:
            note = note.strip() or None
            if note and len(note) > MAX_NOTE_CHARS:
                raise JudgmentError(f"the note has {len(note)} characters; the limit is {MAX_NOTE_CHARS}")
        hits = {str(k): int(v) for k, v in (systems or {}).items()}

        def tx() -> LabelResult:
            with self._write() as s, s.begin():
                row = s.scalar(
                    select(JudgmentRow)
                    .join(Annotator, JudgmentRow.annotator_id == Annotator.id)
                    .join(QueryRow, JudgmentRow.query_id == QueryRow.id)
                    .join(DocumentRow, JudgmentRow.document_id == DocumentRow.id)
                    .where(Annotator.name == annotator, QueryRow.dataset == dataset,
                           QueryRow.text_hash == text_hash(query), DocumentRow.doc_id == doc_id,
                           DocumentRow.text_hash == text_hash(doc_text))
                )
                previous = row.label if row is not None else None
                if row is not None and row.label == label and (note is None or note == row.note):
                    return LabelResult(False, previous)  # the common re-submit path: one SELECT
                now = _now()
                if row is None:
                    a = self._annotator(s, annotator)
                    q = self._query(s, dataset, query, query_id)
                    d = self._document(s, dataset, doc_id, doc_text)
                    row = JudgmentRow(annotator_id=a.id, query_id=q.id, document_id=d.id, label=label,
                                      note=note, systems=hits or None, created_at=now)
                    s.add(row)
                else:
                    row.label, row.created_at = label, now
                    if note is not None:
                        row.note = note
                    if hits:
                        row.systems = {**(row.systems or {}), **hits}
                s.add(HistoryRow(annotator_id=row.annotator_id, query_id=row.query_id, document_id=row.document_id,
                                 action="set", label=label, previous_label=previous, note=row.note,
                                 systems=row.systems, created_at=now))
                return LabelResult(True, previous)

        return self._retry(tx)

    def clear_label(self, annotator: str, dataset: str, query: str, doc_id: str) -> LabelResult:
        """Remove the current label (undo of a first label); the history keeps it."""
        annotator = self.check_annotator(annotator)

        def tx() -> LabelResult:
            with self._write() as s, s.begin():
                row = s.scalar(
                    select(JudgmentRow)
                    .join(Annotator).join(QueryRow).join(DocumentRow)
                    .where(Annotator.name == annotator, QueryRow.dataset == dataset,
                           QueryRow.text_hash == text_hash(query), DocumentRow.doc_id == doc_id)
                )
                if row is None:
                    return LabelResult(False, None)
                s.add(HistoryRow(annotator_id=row.annotator_id, query_id=row.query_id, document_id=row.document_id,
                                 action="clear", label=None, previous_label=row.label, note=row.note,
                                 systems=row.systems, created_at=_now()))
                previous = row.label
                s.delete(row)
                return LabelResult(True, previous)

        return self._retry(tx)

    def set_guidelines(self, dataset: str, text: str) -> None:
        """Save the judging guidelines of a dataset."""

        def tx() -> None:
            with self._write() as s, s.begin():
                row = s.get(GuidelinesRow, dataset)
                if row is None:
                    s.add(GuidelinesRow(dataset=dataset, text=text, updated_at=_now()))
                else:
                    row.text, row.updated_at = text, _now()

        self._retry(tx)

    # -- reads
    def guidelines(self, dataset: str) -> str:
        """The guidelines of a dataset (``DEFAULT_GUIDELINES`` until edited)."""
        with self._read() as s:
            row = s.get(GuidelinesRow, dataset)
            return row.text if row else DEFAULT_GUIDELINES

    def judgments(
        self, dataset: str | None = None, annotators: Iterable[str] | None = None, query: str | None = None
    ) -> list[Judgment]:
        """Current labels, optionally for one dataset, some annotators, one query text."""
        stmt = (
            select(JudgmentRow, Annotator.name, QueryRow, DocumentRow)
            .join(Annotator, JudgmentRow.annotator_id == Annotator.id)
            .join(QueryRow, JudgmentRow.query_id == QueryRow.id)
            .join(DocumentRow, JudgmentRow.document_id == DocumentRow.id)
            .order_by(JudgmentRow.id)
        )
        if dataset is not None:
            stmt = stmt.where(QueryRow.dataset == dataset)
        if annotators is not None:
            stmt = stmt.where(Annotator.name.in_(list(annotators)))
        if query is not None:
            stmt = stmt.where(QueryRow.text_hash == text_hash(query))
        with self._read() as s:
            return [
                Judgment(name, q.dataset, q.text, query_key(q.qid, q.text), d.doc_id, j.label, j.note,
                         dict(j.systems or {}), j.created_at)
                for j, name, q, d in s.execute(stmt)
            ]

    def labels_for(self, annotator: str, dataset: str, query: str) -> dict[str, int]:
        """doc id -> label of one annotator for one query (marks already-judged pool items)."""
        return {j.doc_id: j.label for j in self.judgments(dataset, [annotator], query)}

    def history(self, dataset: str | None = None) -> list[HistoryEntry]:
        """Every change, oldest first."""
        stmt = (
            select(HistoryRow, Annotator.name, QueryRow, DocumentRow.doc_id)
            .join(Annotator, HistoryRow.annotator_id == Annotator.id)
            .join(QueryRow, HistoryRow.query_id == QueryRow.id)
            .join(DocumentRow, HistoryRow.document_id == DocumentRow.id)
            .order_by(HistoryRow.id)
        )
        if dataset is not None:
            stmt = stmt.where(QueryRow.dataset == dataset)
        with self._read() as s:
            return [
                HistoryEntry(name, q.dataset, query_key(q.qid, q.text), doc, h.action, h.label, h.previous_label,
                             h.note, h.created_at)
                for h, name, q, doc in s.execute(stmt)
            ]

    def annotators(self) -> list[str]:
        """Annotator names, sorted."""
        with self._read() as s:
            return sorted(s.scalars(select(Annotator.name)))

    def datasets(self) -> list[str]:
        """Datasets that have judged queries."""
        with self._read() as s:
            return sorted(set(s.scalars(select(QueryRow.dataset))))

    def qrels(self, dataset: str, annotators: Iterable[str] | None = None, resolve: str = "majority") -> dict[str, dict[str, int]]:
        """Judgments as qrels (query key -> doc id -> label), one label per pair.

        Several annotators on one pair: ``majority`` (ties -> the most recent label) or ``latest``.
        """
        return resolve_labels(self.judgments(dataset, annotators), resolve)

    def query_texts(self, dataset: str) -> dict[str, str]:
        """query key -> text of every judged query of a dataset."""
        with self._read() as s:
            rows = s.scalars(select(QueryRow).where(QueryRow.dataset == dataset))
            return {query_key(q.qid, q.text): q.text for q in rows}

    def stats(self, dataset: str | None = None) -> StoreStats:
        """Counts of annotators, judgments, labels, history."""
        js = self.judgments(dataset)
        out = StoreStats(judgments=len(js), history=len(self.history(dataset)))
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
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        qrels = self.qrels(dataset, annotators, resolve)
        with path.open("w", encoding="utf-8") as f:
            for qid in sorted(qrels):
                for doc in sorted(qrels[qid]):
                    f.write(f"{qid} 0 {doc} {qrels[qid][doc]}\n")
        return path


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


def read_trec_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Read ``qid 0 docid label`` lines (the format ``export_qrels`` writes)."""
    from core.errors import DataFormatError

    path = Path(path)
    if not path.is_file():
        raise DataFormatError(path, None, "file not found")
    out: dict[str, dict[str, int]] = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        cols = line.split()
        if len(cols) != 4 or not cols[3].lstrip("-").isdigit():
            raise DataFormatError(path, lineno, "expected 'qid 0 docid label'")
        out.setdefault(cols[0], {})[cols[2]] = int(cols[3])
    return out
