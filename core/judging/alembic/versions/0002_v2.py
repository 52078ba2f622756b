"""Schema version 2: judgment notes and systems, the append-only history, per-dataset guidelines.

Existing labels get one ``migrated`` history entry each.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("judgments", sa.Column("note", sa.Text(), nullable=True))
    op.add_column("judgments", sa.Column("systems", sa.JSON(), nullable=True))
    op.create_table(
        "judgment_history",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("annotator_id", sa.Integer(), sa.ForeignKey("annotators.id"), nullable=False),
        sa.Column("query_id", sa.Integer(), sa.ForeignKey("queries.id"), nullable=False),
        sa.Column("document_id", sa.Integer(), sa.ForeignKey("documents.id"), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("label", sa.Integer(), nullable=True),
        sa.Column("previous_label", sa.Integer(), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("systems", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "guidelines",
        sa.Column("dataset", sa.String(300), primary_key=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.execute(
        "INSERT INTO judgment_history (annotator_id, query_id, document_id, action, label, previous_label, "
        "note, systems, created_at) SELECT annotator_id, query_id, document_id, 'migrated', label, NULL, NULL, "
        "NULL, created_at FROM judgments ORDER BY id"
    )
    op.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
