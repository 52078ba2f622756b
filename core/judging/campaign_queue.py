"""An annotator's side of a campaign: their blind queue (assigned items, their own labels only), claiming work
in an open campaign, and their labels ("can't judge" with a reason, undo), each committed at once with its
idempotency key."""
from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from core.judging.campaign_records import CampaignAuthError, CampaignError, QueueItem
from core.judging.campaign_rows import CampaignRows
from core.judging.label_records import MAX_REASON_CHARS, LabelResult, query_key
from core.judging.schema import (Annotator, CampaignHistoryRow, CampaignItemRow, CampaignLabelRow, CampaignRow,
                                 CampaignSlotRow, DocumentRow, QueryRow, _now)


class CampaignQueue(CampaignRows):
    """What an annotator does in a campaign (``core.judging.campaigns.CampaignStore`` is one)."""

    def _queue_rows(self, s: Session, c: CampaignRow, person_id: int):
        return s.execute(
            select(CampaignItemRow, QueryRow, DocumentRow.doc_id, CampaignLabelRow)
            .join(CampaignSlotRow, CampaignSlotRow.item_id == CampaignItemRow.id)
            .join(QueryRow, QueryRow.id == CampaignItemRow.query_id)
            .join(DocumentRow, DocumentRow.id == CampaignItemRow.document_id)
            .outerjoin(CampaignLabelRow, (CampaignLabelRow.item_id == CampaignItemRow.id)
                       & (CampaignLabelRow.annotator_id == person_id))
            .where(CampaignItemRow.campaign_id == c.id, CampaignSlotRow.annotator_id == person_id)
            .order_by(CampaignItemRow.position)).all()

    @staticmethod
    def _queue_item(c: CampaignRow, item: CampaignItemRow, q: QueryRow, doc_id: str,
                    lab: CampaignLabelRow | None) -> QueueItem:
        return QueueItem(c.name, item.id, item.position, query_key(q.qid, q.text), item.query_text, doc_id,
                         item.doc_text, lab.label if lab else None, lab.reason if lab else None,
                         lab.rationale if lab else None, lab is not None)

    def queue(self, actor: str, name: str) -> list[QueueItem]:
        """Every item assigned to ``actor``, in queue order, with their own label (no one else's)."""
        actor = self._name(actor)

        def read() -> list[QueueItem]:
            with self.store._read() as s:
                c = self._campaign_row(s, name)
                person = s.scalar(select(Annotator).where(Annotator.name == actor))
                if person is None:
                    return []
                return [self._queue_item(c, *row) for row in self._queue_rows(s, c, person.id)]

        return self.store._reading(read)

    def own_labels(self, actor: str, name: str) -> dict[int, tuple[int | None, str | None, str | None]]:
        """item id -> (label, can't-judge reason, rationale) of ``actor``'s labels in campaign ``name``: the
        part of ``queue`` that changes while they judge, in one small read."""
        actor = self._name(actor)

        def read() -> dict[int, tuple[int | None, str | None, str | None]]:
            with self.store._read() as s:
                rows = s.execute(
                    select(CampaignLabelRow.item_id, CampaignLabelRow.label, CampaignLabelRow.reason,
                           CampaignLabelRow.rationale)
                    .join(Annotator, Annotator.id == CampaignLabelRow.annotator_id)
                    .join(CampaignItemRow, CampaignItemRow.id == CampaignLabelRow.item_id)
                    .join(CampaignRow, CampaignRow.id == CampaignItemRow.campaign_id)
                    .where(Annotator.name == actor, CampaignRow.name == name))
                return {int(i): (lab, reason, rationale) for i, lab, reason, rationale in rows}

        return self.store._reading(read)

    def item(self, actor: str, name: str, item_id: int) -> QueueItem:
        """One item assigned to ``actor`` (``CampaignAuthError`` if it is not theirs)."""
        actor = self._name(actor)
        for it in self.queue(actor, name):
            if it.item_id == item_id:
                return it
        raise CampaignAuthError(f"item {item_id!r} of campaign {name!r} is not assigned to {actor}; nothing was shown "
                                "or changed")

    def next_item(self, actor: str, name: str) -> QueueItem | None:
        """The first assigned item ``actor`` has not labelled; in an open campaign, claims the next query
        with fewer than r annotators when nothing is pending. None: nothing left for ``actor``."""
        actor = self._name(actor)
        pending = [it for it in self.queue(actor, name) if not it.judged]
        if pending:
            return pending[0]
        c = self.campaign(name)
        if not c.open:
            return None
        if self._claim(actor, name):
            pending = [it for it in self.queue(actor, name) if not it.judged]
            return pending[0] if pending else None
        return None

    def _claim(self, actor: str, name: str) -> bool:
        """Open campaigns: take a free slot on every item of the first query with room (one transaction)."""
        def tx() -> bool:
            with self.store._write() as s, s.begin():
                c = self._campaign_row(s, name)
                person = self._person(s, actor)
                items = s.scalars(select(CampaignItemRow).where(CampaignItemRow.campaign_id == c.id)
                                  .order_by(CampaignItemRow.position)).all()
                slots: dict[int, dict[int, int]] = {}
                for sl in s.scalars(select(CampaignSlotRow).join(CampaignItemRow, CampaignItemRow.id == CampaignSlotRow.item_id)
                                    .where(CampaignItemRow.campaign_id == c.id)):
                    slots.setdefault(sl.item_id, {})[sl.slot] = sl.annotator_id
                by_query: dict[int, list[CampaignItemRow]] = {}
                for it in items:
                    by_query.setdefault(it.query_id, []).append(it)
                for members in by_query.values():
                    taken = [slots.get(it.id, {}) for it in members]
                    if any(person.id in t.values() for t in taken) or all(len(t) >= c.overlap for t in taken):
                        continue
                    now = _now()
                    for it, t in zip(members, taken):
                        free = [k for k in range(c.overlap) if k not in t]
                        if free and person.id not in t.values():
                            s.add(CampaignSlotRow(item_id=it.id, slot=free[0], annotator_id=person.id, assigned_at=now))
                    s.flush()  # a concurrent claim of the same slot fails here and the whole claim is retried
                    return True
                return False

        return self.store._run(tx)

    def own_progress(self, actor: str, name: str) -> tuple[int, int]:
        """(labelled, assigned) items of ``actor``."""
        q = self.queue(actor, name)
        return sum(it.judged for it in q), len(q)

    # -- labels
    def _write_label(self, actor: str, name: str, item_id: int, label: int | None, reason: str | None,
                     rationale: str | None, annotator: str | None, request: str | None = None) -> LabelResult:
        actor = self._name(actor)
        request = self.store.check_request(request)
        if annotator is not None and self._name(annotator) != actor:
            raise CampaignAuthError(f"{actor} cannot write {self._name(annotator)}'s label: each annotator writes "
                                    "only their own (owners adjudicate instead); nothing was changed")
        rationale = self._text(rationale, "rationale")

        def tx() -> LabelResult:
            with self.store._write() as s, s.begin():
                c = self._campaign_row(s, name)
                item = self._item_row(s, c, item_id)
                if label is not None:
                    self._check_label(c, label)
                person = s.scalar(select(Annotator).where(Annotator.name == actor))
                if person is None or self._slot(s, item.id, person.id) is None:
                    raise CampaignAuthError(f"item {item_id} of campaign {name!r} is not assigned to {actor}; "
                                            "nothing was changed")
                row = s.scalar(select(CampaignLabelRow).where(CampaignLabelRow.item_id == item.id,
                                                              CampaignLabelRow.annotator_id == person.id))
                previous = row.label if row is not None else None
                if not self.store.first_request(s, request, person.id, "label" if label is not None else "cant_judge"):
                    return LabelResult(False, previous, repeated=True)
                if row is not None and (row.label, row.reason, row.rationale) == (label, reason, rationale):
                    return LabelResult(False, previous)
                now = _now()
                if row is None:
                    s.add(CampaignLabelRow(item_id=item.id, annotator_id=person.id, label=label, reason=reason,
                                           rationale=rationale, created_at=now))
                else:
                    row.label, row.reason, row.rationale, row.created_at = label, reason, rationale, now
                s.add(CampaignHistoryRow(item_id=item.id, annotator_id=person.id,
                                         action="label" if label is not None else "cant_judge", label=label,
                                         previous_label=previous, reason=reason, rationale=rationale, created_at=now))
                s.flush()
                return LabelResult(True, previous)

        return self.store._run(tx)

    def judge(self, actor: str, name: str, item_id: int, label: int, *, rationale: str | None = None,
              annotator: str | None = None, request: str | None = None) -> LabelResult:
        """Commit ``actor``'s label on an assigned item now (re-submitting the same is a no-op).

        ``annotator`` other than ``actor`` is refused: nobody writes someone else's label. ``request``: the
        label's idempotency key (the store applies it once, however often it is sent).
        """
        return self._write_label(actor, name, item_id, label, None, rationale, annotator, request)

    def cant_judge(self, actor: str, name: str, item_id: int, reason: str, *, rationale: str | None = None,
                   annotator: str | None = None, request: str | None = None) -> LabelResult:
        """Record "can't judge" with a reason (required) on an assigned item (``request`` as in ``judge``)."""
        reason = self._text(reason, "reason", MAX_REASON_CHARS)
        if not reason:
            raise CampaignError("say why the item cannot be judged (a reason is required); nothing was changed")
        return self._write_label(actor, name, item_id, None, reason, rationale, annotator, request)

    def undo(self, actor: str, name: str, item_id: int, *, request: str | None = None) -> LabelResult:
        """Take back ``actor``'s latest label (or "can't judge") on an item: what they gave before comes
        back, or the item is unjudged again. Logged as ``undo``; repeated undos walk further back.
        ``LabelResult.previous`` is the label taken back. Nothing to undo: ``CampaignError``, nothing changed.
        ``request``: the undo's idempotency key (applied once)."""
        actor = self._name(actor)
        request = self.store.check_request(request)

        def tx() -> LabelResult:
            with self.store._write() as s, s.begin():
                c = self._campaign_row(s, name)
                item = self._item_row(s, c, item_id)
                person = s.scalar(select(Annotator).where(Annotator.name == actor))
                if person is None or self._slot(s, item.id, person.id) is None:
                    raise CampaignAuthError(f"item {item_id} of campaign {name!r} is not assigned to {actor}; "
                                            "nothing was changed")
                if not self.store.first_request(s, request, person.id, "undo"):
                    return LabelResult(False, None, repeated=True)
                stack: list[CampaignHistoryRow] = []
                for h in s.scalars(select(CampaignHistoryRow).where(
                        CampaignHistoryRow.item_id == item.id, CampaignHistoryRow.annotator_id == person.id,
                        CampaignHistoryRow.action.in_(("label", "cant_judge", "undo"))).order_by(CampaignHistoryRow.id)):
                    if h.action != "undo":
                        stack.append(h)
                    elif stack:
                        stack.pop()
                row = s.scalar(select(CampaignLabelRow).where(CampaignLabelRow.item_id == item.id,
                                                              CampaignLabelRow.annotator_id == person.id))
                if not stack or row is None:
                    raise CampaignError(f"nothing to undo on item {item_id} of campaign {name!r}; nothing was changed")
                undone = stack.pop()
                before = stack[-1] if stack else None
                if before is None:
                    s.delete(row)
                else:
                    row.label, row.reason, row.rationale = before.label, before.reason, before.rationale
                    row.created_at = before.created_at
                s.add(CampaignHistoryRow(item_id=item.id, annotator_id=person.id, action="undo",
                                         label=before.label if before else None, previous_label=undone.label,
                                         reason=before.reason if before else None,
                                         rationale=before.rationale if before else None, created_at=_now()))
                s.flush()
                return LabelResult(True, undone.label)

        return self.store._run(tx)
