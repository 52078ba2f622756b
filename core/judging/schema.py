"""The judgment store's tables (SQLAlchemy 2.0 ORM) and schema version.

Shared by ``core.judging.judgments`` (the store) and ``core.judging.migrations`` (Alembic), so neither
imports the other's module to learn the schema.
"""
from __future__ import annotations

import hashlib
from datetime import datetime, timezone

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

SCHEMA_VERSION = 9
MAX_REQUEST_CHARS = 64
MAX_NAME_CHARS = 80


class Base(DeclarativeBase):
    """Declarative base of the judgment store."""

    type_annotation_map = {dict[str, int]: JSON}


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes: they were written in UTC."""
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


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
    __table_args__ = (
        UniqueConstraint("dataset", "doc_id", "text_hash", name="uq_document"),  # v1/v2; implied by the next
        Index("uq_document_id", "dataset", "doc_id", unique=True),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset: Mapped[str] = mapped_column(String(300))
    doc_id: Mapped[str] = mapped_column(String(300))
    text_hash: Mapped[str] = mapped_column(String(64))  # the newest text seen for this id


class JudgmentRow(Base):
    __tablename__ = "judgments"
    __table_args__ = (UniqueConstraint("annotator_id", "query_id", "document_id", name="uq_judgment"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id"))
    query_id: Mapped[int] = mapped_column(ForeignKey("queries.id"))
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id"))
    label: Mapped[int | None] = mapped_column(Integer, nullable=True)  # None: "can't judge" (v9), see reason
    note: Mapped[str | None] = mapped_column(Text, nullable=True)
    systems: Mapped[dict[str, int] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    doc_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)  # the text this label was given on
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)  # why it cannot be judged (label None)
    annotator: Mapped[Annotator] = relationship()
    query: Mapped[QueryRow] = relationship()
    document: Mapped[DocumentRow] = relationship()


class HistoryRow(Base):
    __tablename__ = "judgment_history"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id"))
    query_id: Mapped[int] = mapped_column(ForeignKey("queries.id"))
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id"))
    action: Mapped[str] = mapped_column(String(16))  # "set" | "cant_judge" | "clear" | "undo" | "migrated"
    label: Mapped[int | None] = mapped_column(Integer, nullable=True)
    previous_label: Mapped[int | None] = mapped_column(Integer, nullable=True)
    note: Mapped[str | None] = mapped_column(Text, nullable=True)
    systems: Mapped[dict[str, int] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    note_before: Mapped[str | None] = mapped_column(Text, nullable=True)
    doc_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)  # v9: the "can't judge" reason given
    reason_before: Mapped[str | None] = mapped_column(Text, nullable=True)  # v9: the one the change replaced


class GuidelinesRow(Base):
    __tablename__ = "guidelines"
    dataset: Mapped[str] = mapped_column(String(300), primary_key=True)
    text: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


# ----------------------------------------------------------------------------- campaigns (schema v4)
class CampaignRow(Base):
    """A judging campaign: dataset, query set, pooled systems and depth, overlap, open or named."""

    __tablename__ = "campaigns"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(MAX_NAME_CHARS), unique=True)
    dataset: Mapped[str] = mapped_column(String(300))
    query_set: Mapped[dict] = mapped_column(JSON)  # {"kind": "split"|"list"|"sample", ...}
    systems: Mapped[list] = mapped_column(JSON)  # pooled system names (never shown to annotators)
    depth: Mapped[int] = mapped_column(Integer)
    overlap: Mapped[int] = mapped_column(Integer)  # r: annotators per item
    open: Mapped[bool] = mapped_column(Boolean)  # True: any logged-in annotator claims work
    max_label: Mapped[int] = mapped_column(Integer)
    guidelines: Mapped[str] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(String(MAX_NAME_CHARS))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class CampaignMemberRow(Base):
    """Who may do what in a campaign: ``owner`` or ``annotator``."""

    __tablename__ = "campaign_members"
    __table_args__ = (UniqueConstraint("campaign_id", "annotator_id", "role", name="uq_campaign_member"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id"))
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id"))
    role: Mapped[str] = mapped_column(String(16))


class CampaignItemRow(Base):
    """One (query, document) of a campaign's pool, with the text shown and the hidden system ranks."""

    __tablename__ = "campaign_items"
    __table_args__ = (UniqueConstraint("campaign_id", "query_id", "document_id", name="uq_campaign_item"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaigns.id"), index=True)
    position: Mapped[int] = mapped_column(Integer)  # queue order: query order, then the blind pool order
    query_id: Mapped[int] = mapped_column(ForeignKey("queries.id"))
    document_id: Mapped[int] = mapped_column(ForeignKey("documents.id"))
    query_text: Mapped[str] = mapped_column(Text)  # the query as shown
    doc_text: Mapped[str] = mapped_column(Text)  # the document as shown
    doc_hash: Mapped[str] = mapped_column(String(64))
    systems: Mapped[dict[str, int] | None] = mapped_column(JSON, nullable=True)


class CampaignSlotRow(Base):
    """Assignment: slot ``slot`` (0..r-1) of an item belongs to one annotator (the unique keys cap it at r)."""

    __tablename__ = "campaign_slots"
    __table_args__ = (UniqueConstraint("item_id", "slot", name="uq_campaign_slot"),
                      UniqueConstraint("item_id", "annotator_id", name="uq_campaign_slot_annotator"))
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("campaign_items.id"), index=True)
    slot: Mapped[int] = mapped_column(Integer)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id"), index=True)
    assigned_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class CampaignLabelRow(Base):
    """The current label of one annotator on one item (``label`` None: "can't judge", with ``reason``)."""

    __tablename__ = "campaign_labels"
    __table_args__ = (UniqueConstraint("item_id", "annotator_id", name="uq_campaign_label"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("campaign_items.id"), index=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id"))
    label: Mapped[int | None] = mapped_column(Integer, nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    rationale: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class CampaignAdjudicationRow(Base):
    """An owner's decision on an item (one per item; changes go to the history)."""

    __tablename__ = "campaign_adjudications"
    item_id: Mapped[int] = mapped_column(ForeignKey("campaign_items.id"), primary_key=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id"))  # the owner who decided
    label: Mapped[int] = mapped_column(Integer)
    rationale: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class CampaignHistoryRow(Base):
    """Append-only log of every campaign label and adjudication change."""

    __tablename__ = "campaign_history"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("campaign_items.id"), index=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id"))
    action: Mapped[str] = mapped_column(String(16))  # "label" | "cant_judge" | "adjudicate" | "assign" | ...
    label: Mapped[int | None] = mapped_column(Integer, nullable=True)
    previous_label: Mapped[int | None] = mapped_column(Integer, nullable=True)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    rationale: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class CampaignJudgeLabelRow(Base):
    """An automatic judge's score and calibrated label on a campaign item, under its own identity
    (``judge:SYSTEM``): kept apart from ``campaign_labels`` so judge labels never mix with human ones."""

    __tablename__ = "campaign_judge_labels"
    __table_args__ = (UniqueConstraint("item_id", "judge", name="uq_campaign_judge_label"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("campaign_items.id"), index=True)
    judge: Mapped[str] = mapped_column(String(MAX_NAME_CHARS))  # "judge:cross-encoder"
    score: Mapped[float] = mapped_column(Float)
    label: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


# ----------------------------------------------------------------------------- deletions (schema v7)
class DeletionRow(Base):
    """Append-only audit of an owner's deletion: who deleted what (an annotator's labels, a campaign), when, and
    how many rows of each table went (``core.judging.deletion``)."""

    __tablename__ = "deletions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    actor: Mapped[str] = mapped_column(String(MAX_NAME_CHARS))
    kind: Mapped[str] = mapped_column(String(16))  # "labels" | "campaign"
    target: Mapped[str] = mapped_column(String(MAX_NAME_CHARS))  # the annotator or the campaign
    dataset: Mapped[str | None] = mapped_column(String(300), nullable=True)  # labels: one dataset, or all
    rows: Mapped[dict] = mapped_column(JSON)  # table -> rows deleted
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


# ----------------------------------------------------------------------------- label requests (schema v8)
class RequestRow(Base):
    """One label request already applied (schema v8): its idempotency key, made by the browser. A request
    resent after a lost acknowledgement finds its key here and changes nothing (the unique key makes two
    concurrent resends one)."""

    __tablename__ = "label_requests"
    __table_args__ = (UniqueConstraint("key", name="uq_label_request"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(MAX_REQUEST_CHARS))
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id"))
    action: Mapped[str] = mapped_column(String(16))  # "set" | "undo" | "label" | "cant_judge"
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
