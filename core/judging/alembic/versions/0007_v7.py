"""Schema version 7: the audit of owners' deletions.

One new table (nothing existing changes): ``deletions`` records who deleted an annotator's labels or a
campaign, when, and how many rows of each table went (``core.judging.deletion``).
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "deletions",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("actor", sa.String(80), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("target", sa.String(80), nullable=False),
        sa.Column("dataset", sa.String(300), nullable=True),
        sa.Column("rows", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
