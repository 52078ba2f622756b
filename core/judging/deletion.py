"""Owners delete: an annotator's labels, or a whole campaign, after a typed confirmation, with an audit record.

Two steps, so neither the CLI nor a page deletes on one click:

1. ``plan_labels`` / ``plan_campaign`` read what would go (rows per table) and change nothing;
2. ``delete_labels`` / ``delete_campaign`` delete exactly that, in one transaction, only when ``confirm`` repeats
   the target's name, and write one ``deletions`` row (who, what, when, rows per table) in the same transaction.

Labels of an annotator: their ``judgments`` and ``judgment_history`` rows (one dataset, or every one); the
annotator, queries, documents, guidelines and campaigns stay. A campaign: its items, slots, labels,
adjudications, history, automatic-judge labels and members, and the campaign; the store's own judgments stay.
Who may: labels, an owner of the configuration (``core.judging.identity``: none configured is the single-user
tool, everyone is an owner); a campaign, one of its owners. Anything else: one line, nothing changed.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from core.judging.campaign_records import CampaignAuthError, CampaignError
from core.judging.campaigns import CampaignStore
from core.judging.identity import canonical_identity, configured_people
from core.judging.database import JudgmentError
from core.judging.judgments import JudgmentStore
from core.judging.schema import (Annotator, CampaignAdjudicationRow, CampaignHistoryRow, CampaignItemRow,
                                 CampaignJudgeLabelRow, CampaignLabelRow, CampaignMemberRow, CampaignRow,
                                 CampaignSlotRow, DeletionRow, HistoryRow, JudgmentRow, QueryRow, _now, _utc)


@dataclass(frozen=True)
class DeletionPlan:
    """What a deletion removes: rows per table (``rows``), for ``kind`` ``labels`` or ``campaign``."""

    kind: str
    target: str
    dataset: str | None
    rows: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.rows.values())

    def describe(self) -> str:
        """One line: what would go, table by table."""
        where = f" on {self.dataset}" if self.dataset else ""
        what = f"the labels of {self.target}{where}" if self.kind == "labels" else f"campaign {self.target!r}"
        parts = ", ".join(f"{n} {table}" for table, n in self.rows.items() if n) or "nothing"
        return f"{what}: {parts}"


@dataclass(frozen=True)
class DeletionRecord:
    """One audit row: who deleted what, when, and the rows per table."""

    actor: str
    kind: str
    target: str
    dataset: str | None
    rows: dict[str, int]
    at: datetime


def _judgment_filter(s: Session, model, annotator_id: int, dataset: str | None):  # noqa: ANN001
    where = [model.annotator_id == annotator_id]
    if dataset is not None:
        where.append(model.query_id.in_(select(QueryRow.id).where(QueryRow.dataset == dataset)))
    return where


def _annotator_id(s: Session, annotator: str) -> int:
    name = canonical_identity(annotator)
    row = s.scalar(select(Annotator.id).where(Annotator.name.in_({name, str(annotator).strip()})))
    if row is None:
        known = sorted(s.scalars(select(Annotator.name)))
        raise JudgmentError(f"unknown annotator {annotator!r}; known: {', '.join(known) or '(none)'}; nothing was deleted")
    return row


def _count_labels(s: Session, annotator_id: int, dataset: str | None) -> dict[str, int]:
    return {model.__tablename__: int(s.scalar(select(func.count()).select_from(model)
                                              .where(*_judgment_filter(s, model, annotator_id, dataset))) or 0)
            for model in (JudgmentRow, HistoryRow)}


def _campaign_tables(c_id: int):
    """(model, where-clause) of every row a campaign owns, children first (the delete order)."""
    items = select(CampaignItemRow.id).where(CampaignItemRow.campaign_id == c_id)
    return [(CampaignJudgeLabelRow, CampaignJudgeLabelRow.item_id.in_(items)),
            (CampaignHistoryRow, CampaignHistoryRow.item_id.in_(items)),
            (CampaignAdjudicationRow, CampaignAdjudicationRow.item_id.in_(items)),
            (CampaignLabelRow, CampaignLabelRow.item_id.in_(items)),
            (CampaignSlotRow, CampaignSlotRow.item_id.in_(items)),
            (CampaignItemRow, CampaignItemRow.campaign_id == c_id),
            (CampaignMemberRow, CampaignMemberRow.campaign_id == c_id),
            (CampaignRow, CampaignRow.id == c_id)]


def _check_confirm(confirm: str | None, target: str, what: str) -> None:
    if confirm is None or " ".join(str(confirm).split()) != target:
        raise JudgmentError(f"deleting {what} needs the confirmation {target!r} typed exactly; nothing was deleted")


def _require_configured_owner(actor: str) -> str:
    name = canonical_identity(actor)
    owners = configured_people("owners")
    if not name or (owners and name not in owners):
        raise CampaignAuthError(f"{name or '(no name)'} is not an owner in the configuration; only owners delete "
                                "labels; nothing was deleted")
    return name


def plan_labels(store: JudgmentStore, annotator: str, dataset: str | None = None) -> DeletionPlan:
    """What ``delete_labels`` would remove (reads only)."""
    def read() -> DeletionPlan:
        with store._read() as s:
            rows = _count_labels(s, _annotator_id(s, annotator), dataset)
        return DeletionPlan("labels", canonical_identity(annotator) or annotator, dataset, rows)

    return store._reading(read)


def delete_labels(store: JudgmentStore, actor: str, annotator: str, dataset: str | None = None, *,
                  confirm: str | None) -> DeletionRecord:
    """Delete ``annotator``'s labels and label history (of ``dataset``, or all) as owner ``actor``; ``confirm`` must
    repeat the annotator's name. Writes the audit row in the same transaction."""
    who = _require_configured_owner(actor)
    target = canonical_identity(annotator) or str(annotator).strip()
    _check_confirm(confirm, target, f"the labels of {target}")

    def tx() -> DeletionRecord:
        with store._write() as s, s.begin():
            annotator_id = _annotator_id(s, annotator)
            rows = _count_labels(s, annotator_id, dataset)
            for model in (HistoryRow, JudgmentRow):
                s.execute(delete(model).where(*_judgment_filter(s, model, annotator_id, dataset)),
                          execution_options={"synchronize_session": False})
            return _audit(s, who, "labels", target, dataset, rows)

    return store._run(tx)


def plan_campaign(cs: CampaignStore, actor: str, name: str) -> DeletionPlan:
    """What ``delete_campaign`` would remove (reads only; owners of the campaign)."""
    def read() -> DeletionPlan:
        with cs.store._read() as s:
            c = cs._campaign_row(s, name)
            cs._require_owner(s, c, canonical_identity(actor), "delete a campaign")
            rows = {model.__tablename__: int(s.scalar(select(func.count()).select_from(model).where(where)) or 0)
                    for model, where in _campaign_tables(c.id)}
        return DeletionPlan("campaign", name, c.dataset, rows)

    return cs.store._reading(read)


def delete_campaign(cs: CampaignStore, actor: str, name: str, *, confirm: str | None) -> DeletionRecord:
    """Delete campaign ``name`` and every row it owns as one of its owners; ``confirm`` must repeat its name."""
    who = canonical_identity(actor)
    _check_confirm(confirm, name, f"campaign {name!r}")

    def tx() -> DeletionRecord:
        with cs.store._write() as s, s.begin():
            c = cs._campaign_row(s, name)
            cs._require_owner(s, c, who, "delete a campaign")
            rows = {}
            for model, where in _campaign_tables(c.id):
                rows[model.__tablename__] = int(s.execute(delete(model).where(where),
                                                          execution_options={"synchronize_session": False}).rowcount)
            return _audit(s, who, "campaign", name, c.dataset, rows)

    return cs.store._run(tx)


def _audit(s: Session, actor: str, kind: str, target: str, dataset: str | None, rows: dict[str, int]) -> DeletionRecord:
    row = DeletionRow(actor=actor, kind=kind, target=target, dataset=dataset, rows=dict(rows), created_at=_now())
    s.add(row)
    return DeletionRecord(actor, kind, target, dataset, dict(rows), _utc(row.created_at))


def deletions(store: JudgmentStore) -> list[DeletionRecord]:
    """The audit, oldest first."""
    def read() -> list[DeletionRecord]:
        with store._read() as s:
            return [DeletionRecord(r.actor, r.kind, r.target, r.dataset, dict(r.rows), _utc(r.created_at))
                    for r in s.scalars(select(DeletionRow).order_by(DeletionRow.id))]

    return store._reading(read)


__all__ = ["CampaignError", "DeletionPlan", "DeletionRecord", "delete_campaign", "delete_labels", "deletions",
           "plan_campaign", "plan_labels"]
