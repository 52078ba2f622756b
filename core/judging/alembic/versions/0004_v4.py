"""Schema version 4: judging campaigns.

New tables only (nothing existing changes, so a v3 database keeps every label):

- ``campaigns``: dataset, query set (JSON), pooled systems and depth, overlap r, open or named assignment,
  label scale, guidelines, creator;
- ``campaign_members``: owners and named annotators of a campaign;
- ``campaign_items``: the pooled (query, document) pairs with the text shown and the hidden system ranks;
- ``campaign_slots``: assignment of an item to an annotator, slot 0..r-1 (unique per item and slot, and per
  item and annotator: at most r annotators per item, each once);
- ``campaign_labels``: each annotator's current label (or "can't judge" with a reason) and rationale;
- ``campaign_adjudications``: an owner's decision per item;
- ``campaign_history``: append-only log of labels, "can't judge", adjudications and assignments.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _when() -> sa.Column:
    return sa.Column("created_at", sa.DateTime(timezone=True), nullable=False)


def upgrade() -> None:
    op.create_table(
        "campaigns",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(80), nullable=False, unique=True),
        sa.Column("dataset", sa.String(300), nullable=False),
        sa.Column("query_set", sa.JSON(), nullable=False),
        sa.Column("systems", sa.JSON(), nullable=False),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("overlap", sa.Integer(), nullable=False),
        sa.Column("open", sa.Boolean(), nullable=False),
        sa.Column("max_label", sa.Integer(), nullable=False),
        sa.Column("guidelines", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(80), nullable=False),
        _when(),
    )
    op.create_table(
        "campaign_members",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("campaign_id", sa.Integer(), sa.ForeignKey("campaigns.id"), nullable=False),
        sa.Column("annotator_id", sa.Integer(), sa.ForeignKey("annotators.id"), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.UniqueConstraint("campaign_id", "annotator_id", "role", name="uq_campaign_member"),
    )
    op.create_table(
        "campaign_items",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("campaign_id", sa.Integer(), sa.ForeignKey("campaigns.id"), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("query_id", sa.Integer(), sa.ForeignKey("queries.id"), nullable=False),
        sa.Column("document_id", sa.Integer(), sa.ForeignKey("documents.id"), nullable=False),
        sa.Column("query_text", sa.Text(), nullable=False),
        sa.Column("doc_text", sa.Text(), nullable=False),
        sa.Column("doc_hash", sa.String(64), nullable=False),
        sa.Column("systems", sa.JSON(), nullable=True),
        sa.UniqueConstraint("campaign_id", "query_id", "document_id", name="uq_campaign_item"),
    )
    op.create_index("ix_campaign_items_campaign_id", "campaign_items", ["campaign_id"])
    op.create_table(
        "campaign_slots",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("item_id", sa.Integer(), sa.ForeignKey("campaign_items.id"), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("annotator_id", sa.Integer(), sa.ForeignKey("annotators.id"), nullable=False),
        sa.Column("assigned_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("item_id", "slot", name="uq_campaign_slot"),
        sa.UniqueConstraint("item_id", "annotator_id", name="uq_campaign_slot_annotator"),
    )
    op.create_index("ix_campaign_slots_item_id", "campaign_slots", ["item_id"])
    op.create_index("ix_campaign_slots_annotator_id", "campaign_slots", ["annotator_id"])
    op.create_table(
        "campaign_labels",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("item_id", sa.Integer(), sa.ForeignKey("campaign_items.id"), nullable=False),
        sa.Column("annotator_id", sa.Integer(), sa.ForeignKey("annotators.id"), nullable=False),
        sa.Column("label", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("rationale", sa.Text(), nullable=True),
        _when(),
        sa.UniqueConstraint("item_id", "annotator_id", name="uq_campaign_label"),
    )
    op.create_index("ix_campaign_labels_item_id", "campaign_labels", ["item_id"])
    op.create_table(
        "campaign_adjudications",
        sa.Column("item_id", sa.Integer(), sa.ForeignKey("campaign_items.id"), primary_key=True),
        sa.Column("annotator_id", sa.Integer(), sa.ForeignKey("annotators.id"), nullable=False),
        sa.Column("label", sa.Integer(), nullable=False),
        sa.Column("rationale", sa.Text(), nullable=True),
        _when(),
    )
    op.create_table(
        "campaign_history",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("item_id", sa.Integer(), sa.ForeignKey("campaign_items.id"), nullable=False),
        sa.Column("annotator_id", sa.Integer(), sa.ForeignKey("annotators.id"), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("label", sa.Integer(), nullable=True),
        sa.Column("previous_label", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("rationale", sa.Text(), nullable=True),
        _when(),
    )
    op.create_index("ix_campaign_history_item_id", "campaign_history", ["item_id"])
    op.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
