"""Schema version 1: meta, annotators, queries, documents, judgments (label and time only).

Only databases written before Alembic have this revision (they are stamped with it, never created by
it); a new database is created from the ORM models at the newest revision.
"""
from __future__ import annotations

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    from core.judging.migrations import V1_DDL

    for stmt in V1_DDL:
        op.execute(stmt)
