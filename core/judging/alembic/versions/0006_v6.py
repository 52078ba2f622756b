"""Schema version 6: an automatic judge's labels on campaign items.

One new table (nothing existing changes): ``campaign_judge_labels`` holds, per campaign item and judge
identity (``judge:SYSTEM``), the judge's raw score and its calibrated grade. Human labels stay in
``campaign_labels``; the two never mix (agreement, exports and adjudication read human labels only).
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "campaign_judge_labels",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("item_id", sa.Integer(), sa.ForeignKey("campaign_items.id"), nullable=False),
        sa.Column("judge", sa.String(80), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("label", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("item_id", "judge", name="uq_campaign_judge_label"),
    )
    op.create_index("ix_campaign_judge_labels_item_id", "campaign_judge_labels", ["item_id"])
    op.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
