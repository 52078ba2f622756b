"""Schema of the judgment store: inspection (read-only) and upgrades through Alembic.

The Alembic scripts live in ``core/judging/alembic`` (``env.py`` + ``versions/``) and are driven from here
in code; there is no alembic.ini. One revision per schema version:

- ``0001`` v1: ``meta``, ``annotators``, ``queries``, ``documents``, ``judgments`` (label and time).
- ``0002`` v2: judgment notes and systems, the append-only ``judgment_history``, ``guidelines``.
- ``0003`` v3: labels keyed by (dataset, query, document, annotator); the judged text's hash kept
  on the label (``judgments.doc_hash``), ``judgment_history.note_before`` for undo.
- ``0004`` v4: judging campaigns (``campaigns``, ``campaign_members``, ``campaign_items``,
  ``campaign_slots``, ``campaign_labels``, ``campaign_history``; see ``core.judging.campaigns``).
- ``0005`` v5: no table changes; stored e-mail names lower-cased (``core.judging.identity``).
- ``0006`` v6: ``campaign_judge_labels``: an automatic judge's scores and calibrated labels per item,
  under its own identity (``core.judging.auto_judge``).
- ``0007`` v7: ``deletions``: the audit of owners' deletions (an annotator's labels, a campaign;
  ``core.judging.deletion``).
- ``0008`` v8: ``label_requests``: the idempotency key of every label request applied, so a label resent
  after a lost acknowledgement is stored once.
- ``0009`` v9: "can't judge" in free judging: ``judgments.label`` nullable with ``judgments.reason`` (as
  ``campaign_labels``), ``judgment_history.reason`` / ``reason_before`` (``JudgmentStore.cant_judge``).

``meta.schema_version`` is kept in step with the revision (older app builds read it and refuse a
newer database). Databases written before Alembic have ``meta`` but no ``alembic_version``: they are
stamped with the revision of their ``meta.schema_version`` and upgraded from there. A new database is
created from the ORM models and stamped at the newest revision.

Reading the state (``inspect_schema``) never writes and never takes a write lock, so opening a
current database never waits for another writer. Anything that is not a Studio database (tables but
no ``meta.schema_version``, a non-numeric version, a newer version) is refused before anything is
written.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, inspect, text
from sqlalchemy.engine import Engine

from core.judging.schema import SCHEMA_VERSION, Base

SCRIPTS = Path(__file__).resolve().parent / "alembic"
REVISIONS = {1: "0001", 2: "0002", 3: "0003", 4: "0004", 5: "0005", 6: "0006", 7: "0007", 8: "0008", 9: "0009"}
"""Studio schema version -> Alembic revision."""

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
"""The version-1 schema, kept verbatim (SQLite) so the upgrade path can be tested."""


class SchemaError(Exception):
    """The database is not a (readable, supported) Studio judgments database; nothing was written."""


@dataclass(frozen=True)
class SchemaState:
    """What ``inspect_schema`` found: ``empty`` (no tables), or the Studio version and revision."""

    empty: bool
    version: int = 0
    revision: str | None = None

    @property
    def current(self) -> bool:
        return not self.empty and self.version == SCHEMA_VERSION and self.revision == REVISIONS[SCHEMA_VERSION]


def inspect_schema(conn: Connection) -> SchemaState:
    """Read-only look at a database: empty, a Studio schema (version, revision), or ``SchemaError``."""
    tables = set(inspect(conn).get_table_names())
    if not tables:
        return SchemaState(empty=True)
    if "meta" not in tables or "judgments" not in tables:
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise SchemaError(f"not a Question Retrieval Studio judgments database (it has other tables: {shown}); "
                          "nothing was changed")
    value = conn.execute(text("SELECT value FROM meta WHERE key = 'schema_version'")).scalar()
    if value is None:
        raise SchemaError("not a Question Retrieval Studio judgments database (no meta.schema_version); "
                          "nothing was changed")
    try:
        version = int(str(value).strip())
    except ValueError:
        raise SchemaError(f"meta.schema_version is {value!r}, not a number: the database is damaged or not a "
                          "Studio database; nothing was changed") from None
    if version > SCHEMA_VERSION:
        raise SchemaError(f"the judgments database has schema version {version}, newer than this app "
                          f"({SCHEMA_VERSION}); update the app")
    if version not in REVISIONS:
        raise SchemaError(f"unknown judgments schema version {version}; nothing was changed")
    revision = None
    if "alembic_version" in tables:
        revision = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    return SchemaState(empty=False, version=version, revision=revision)


def current_version(conn: Connection) -> int:
    """0 for an empty database, else ``meta.schema_version`` (read-only)."""
    state = inspect_schema(conn)
    return 0 if state.empty else state.version


def _config(conn: Connection):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPTS))
    cfg.attributes["connection"] = conn
    return cfg


def head() -> str:
    """The newest Alembic revision of the scripts folder."""
    from alembic.script import ScriptDirectory

    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPTS))
    return ScriptDirectory.from_config(cfg).get_current_head()


def upgrade_in(conn: Connection) -> int:
    """Create or upgrade inside the caller's write transaction; returns the version before (0: new)."""
    from alembic import command

    state = inspect_schema(conn)
    cfg = _config(conn)
    if state.empty:
        Base.metadata.create_all(conn)
        conn.execute(text("INSERT INTO meta (key, value) VALUES ('schema_version', :v)"), {"v": str(SCHEMA_VERSION)})
        command.stamp(cfg, REVISIONS[SCHEMA_VERSION])
        return 0
    if state.current:
        return state.version
    if state.revision is None:  # written before Alembic: its meta.schema_version names the revision
        command.stamp(cfg, REVISIONS[state.version])
    command.upgrade(cfg, "head")
    return state.version


def upgrade(engine: Engine) -> int:
    """Bring the database to the newest schema in one write transaction; returns the version before."""
    with engine.execution_options(qrs_write=True).begin() as conn:
        return upgrade_in(conn)


def create_v1(engine: Engine) -> None:
    """Create an empty version-1 database (for tests of the upgrade path)."""
    with engine.execution_options(qrs_write=True).begin() as conn:
        for stmt in V1_DDL:
            conn.execute(text(stmt))
