"""Schema version 8: idempotency keys of label requests.

One new table (nothing existing changes): ``label_requests`` holds the key the browser made for each label,
undo or "can't judge" it sent, with who and when. A request whose key is already there is not applied again.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "label_requests",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("annotator_id", sa.Integer(), sa.ForeignKey("annotators.id"), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("key", name="uq_label_request"),
    )
    op.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")
