"""Schema versions of the judgment store and the explicit upgrade steps between them.

A newer app opens an older database: ``upgrade(engine)`` reads ``meta.schema_version`` and applies
each step in order inside one write transaction (SQLite and PostgreSQL both have transactional DDL),
so a crash mid-upgrade leaves the old schema intact.

History of the schema
- v1: ``meta``, ``annotators``, ``queries``, ``documents``, ``judgments`` (label and time only).
- v2: ``judgments.note`` and ``judgments.systems`` (which systems retrieved the document, at what
  rank), the append-only ``judgment_history`` (seeded with one ``migrated`` entry per existing
  label) and per-dataset ``guidelines``.
"""
from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, inspect, text
from sqlalchemy.engine import Engine

V1_DDL = (
    "CREATE TABLE meta (key VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE annotators (id INTEGER PRIMARY KEY, name VARCHAR(80) NOT NULL UNIQUE, "
    "created_at TIMESTAMP NOT NULL)",
    "CREATE TABLE queries (id INTEGER PRIMARY KEY, dataset VARCHAR(300) NOT NULL, text TEXT NOT NULL, "
    "text_hash VARCHAR(64) NOT NULL, qid VARCHAR(300), CONSTRAINT uq_query_text UNIQUE (dataset, text_hash))",
    "CREATE TABLE documents (id INTEGER PRIMARY KEY, dataset VARCHAR(300) NOT NULL, doc_id VARCHAR(300) NOT NULL, "
    "text_hash VARCHAR(64) NOT NULL, CONSTRAINT uq_document UNIQUE (dataset, doc_id, text_hash))",
    "CREATE TABLE judgments (id INTEGER PRIMARY KEY, annotator_id INTEGER NOT NULL REFERENCES annotators(id), "
    "query_id INTEGER NOT NULL REFERENCES queries(id), document_id INTEGER NOT NULL REFERENCES documents(id), "
    "label INTEGER NOT NULL, created_at TIMESTAMP NOT NULL, "
    "CONSTRAINT uq_judgment UNIQUE (annotator_id, query_id, document_id))",
    "INSERT INTO meta (key, value) VALUES ('schema_version', '1')",
)
"""The version-1 schema, kept verbatim so the upgrade path can be tested (and re-created)."""


def current_version(conn: Connection) -> int:
    """0 for an empty database, else ``meta.schema_version``."""
    tables = set(inspect(conn).get_table_names())
    if "meta" not in tables:
        return 0
    value = conn.execute(text("SELECT value FROM meta WHERE key = 'schema_version'")).scalar()
    return int(value) if value is not None else 0


def _create_latest(conn: Connection) -> None:
    from core.judgments import SCHEMA_VERSION, Base

    Base.metadata.create_all(conn)
    conn.execute(text("DELETE FROM meta WHERE key = 'schema_version'"))
    conn.execute(text("INSERT INTO meta (key, value) VALUES ('schema_version', :v)"), {"v": str(SCHEMA_VERSION)})


def _v1_to_v2(conn: Connection) -> None:
    from core.judgments import GuidelinesRow, HistoryRow

    conn.execute(text("ALTER TABLE judgments ADD COLUMN note TEXT"))
    conn.execute(text("ALTER TABLE judgments ADD COLUMN systems JSON"))
    HistoryRow.__table__.create(conn)
    GuidelinesRow.__table__.create(conn)
    conn.execute(text(
        "INSERT INTO judgment_history (annotator_id, query_id, document_id, action, label, previous_label, "
        "note, systems, created_at) SELECT annotator_id, query_id, document_id, 'migrated', label, NULL, NULL, "
        "NULL, created_at FROM judgments ORDER BY id"
    ))


STEPS: dict[int, Callable[[Connection], None]] = {1: _v1_to_v2}
"""``STEPS[v]`` upgrades a version-``v`` database to ``v + 1``."""


def upgrade(engine: Engine) -> int:
    """Bring the database to the latest schema (creating it if empty); returns the version before."""
    from core.judgments import SCHEMA_VERSION

    with engine.execution_options(qrs_write=True).begin() as conn:
        before = current_version(conn)
        if before == 0:
            _create_latest(conn)
            return 0
        if before > SCHEMA_VERSION:
            from core.judgments import JudgmentError

            raise JudgmentError(
                f"the judgments database has schema version {before}, newer than this app ({SCHEMA_VERSION}); "
                "update the app"
            )
        for version in range(before, SCHEMA_VERSION):
            STEPS[version](conn)
        if before != SCHEMA_VERSION:
            conn.execute(text("UPDATE meta SET value = :v WHERE key = 'schema_version'"), {"v": str(SCHEMA_VERSION)})
        return before


def create_v1(engine: Engine) -> None:
    """Create an empty version-1 database (for tests of the upgrade path)."""
    with engine.execution_options(qrs_write=True).begin() as conn:
        for stmt in V1_DDL:
            conn.execute(text(stmt))
