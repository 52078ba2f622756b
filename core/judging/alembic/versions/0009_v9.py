"""Schema version 9: "can't judge" in free judging, stored the way campaigns store it.

A judgment row may hold no label and a reason instead (``judgments.label`` nullable, ``judgments.reason``),
as ``campaign_labels`` does; the history keeps the reason given and the one a change replaced
(``judgment_history.reason``, ``reason_before``), so undo brings back a "can't judge". Existing rows keep
their labels; readers of labels (qrels, agreement, statistics) skip rows without one.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("judgments") as batch:  # SQLite rebuilds the table; PostgreSQL alters it
        batch.alter_column("label", existing_type=sa.Integer(), nullable=True)
        batch.add_column(sa.Column("reason", sa.Text(), nullable=True))
    op.add_column("judgment_history", sa.Column("reason", sa.Text(), nullable=True))
    op.add_column("judgment_history", sa.Column("reason_before", sa.Text(), nullable=True))
    op.execute("UPDATE meta SET value = '9' WHERE key = 'schema_version'")
