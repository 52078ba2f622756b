"""Relevance judgments: a durable SQLAlchemy 2.0 store of labels in a Studio database (SQLite or PostgreSQL).

Tables (schema version ``SCHEMA_VERSION``; ``core.judging.migrations`` creates and upgrades them through
Alembic):

- ``annotators`` (name), ``queries`` (dataset + text, optional dataset query id), ``documents``
  (dataset + doc id, and the hash of the newest text seen for that id);
- ``judgments``: the *current* label of one annotator for one (dataset, query, document): graded
  label (0..``max_label``, 0/1/2 by default), optional note, time, the hash of the text it was given
  on (``doc_hash``) and which systems retrieved the document at what rank (``{SYSTEM: 3}``). When a
  document's text changes, its labels are not duplicated: they are flagged ``stale`` (to be
  re-judged) until the annotator labels the new text. A row without a label is "can't judge" with its
  ``reason`` (``cant_judge``; as campaigns store it): label readers (``judgments``, qrels) skip it;
- ``judgment_history``: append-only log of every change (set, clear, undo) with the note before and
  after, so an overwritten label is never lost and undo restores the previous label and note;
- ``guidelines``: the judging instructions of each dataset (editable);
- ``meta``: the schema version (plus Alembic's ``alembic_version``).

Each label is committed in its own transaction the moment it is given; re-submitting the same label (and note)
changes nothing. A write given ``request=KEY`` (an idempotency key the browser made) records the key in
``label_requests`` in the same transaction; the same key again applies nothing (``LabelResult.repeated``), so a
label resent after a lost acknowledgement is stored once. Opening, locks, retries and errors are
``core.judging.database``'s; the records it returns are ``core.judging.label_records``'s.
"""
from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from core.judging.database import JudgmentError
from core.judging.label_reads import LabelReads
from core.judging.label_records import MAX_REASON_CHARS, LabelResult
from core.judging.schema import (MAX_NAME_CHARS, Annotator, DocumentRow, GuidelinesRow, HistoryRow, JudgmentRow,
                                 QueryRow, _now, text_hash)

DEFAULT_MAX_LABEL = 2
MAX_NOTE_CHARS = 4000


# ----------------------------------------------------------------------------- the store
class JudgmentStore(LabelReads):
    """Judgments in a Studio database: every call is its own short transaction (``core.judging.database``).

    ``max_label``: the highest graded label (0..2 by default). ``create`` and ``lock_timeout``: as
    ``StudioDatabase``.
    """

    def __init__(self, url: str | None = None, max_label: int = DEFAULT_MAX_LABEL, *,
                 lock_timeout: float | None = None, create: bool = True) -> None:
        self.max_label = max_label
        super().__init__(url, lock_timeout=lock_timeout, create=create)

    # -- validation
    def _check_label(self, label: int) -> int:
        if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label <= self.max_label:
            raise JudgmentError(f"label must be an integer from 0 to {self.max_label}, got {label!r}")
        return label

    @staticmethod
    def check_annotator(name: str) -> str:
        """A clean annotator name (canonical: e-mail addresses lower-cased) or ``JudgmentError``."""
        from core.judging.identity import canonical_identity

        cleaned = canonical_identity(name)
        if not cleaned:
            raise JudgmentError("enter an annotator name first")
        if len(cleaned) > MAX_NAME_CHARS:
            raise JudgmentError(f"the annotator name has {len(cleaned)} characters; the limit is {MAX_NAME_CHARS}")
        return cleaned

    def _annotator(self, s: Session, name: str) -> Annotator:
        return self.get_or_insert(s, Annotator, select(Annotator).where(Annotator.name == name),
                                   {"name": name, "created_at": _now()})

    def _query(self, s: Session, dataset: str, text: str, qid: str | None) -> QueryRow:
        h = text_hash(text)
        row = self.get_or_insert(s, QueryRow, select(QueryRow).where(QueryRow.dataset == dataset, QueryRow.text_hash == h),
                                  {"dataset": dataset, "text": text, "text_hash": h, "qid": qid})
        if qid and not row.qid:
            row.qid = qid
        return row

    def _document(self, s: Session, dataset: str, doc_id: str, doc_hash: str) -> DocumentRow:
        row = self.get_or_insert(
            s, DocumentRow, select(DocumentRow).where(DocumentRow.dataset == dataset, DocumentRow.doc_id == doc_id),
            {"dataset": dataset, "doc_id": doc_id, "text_hash": doc_hash})
        if row.text_hash != doc_hash:
            row.text_hash = doc_hash  # the text changed: labels given on the old text become stale
        return row

    @staticmethod
    def _current(s: Session, annotator: str, dataset: str, query: str, doc_id: str) -> JudgmentRow | None:
        return s.scalar(
            select(JudgmentRow)
            .join(Annotator, JudgmentRow.annotator_id == Annotator.id)
            .join(QueryRow, JudgmentRow.query_id == QueryRow.id)
            .join(DocumentRow, JudgmentRow.document_id == DocumentRow.id)
            .where(Annotator.name == annotator, QueryRow.dataset == dataset, QueryRow.text_hash == text_hash(query),
                   DocumentRow.dataset == dataset, DocumentRow.doc_id == doc_id)
        )

    # -- writes
    def set_label(
        self,
        annotator: str,
        dataset: str,
        query: str,
        doc_id: str,
        doc_text: str,
        label: int,
        *,
        query_id: str | None = None,
        note: str | None = None,
        systems: Mapping[str, int] | None = None,
        request: str | None = None,
    ) -> LabelResult:
        """Commit one label now, keyed by (dataset, query, document, annotator).

        ``note=None`` keeps the current note, ``note=""`` clears it. The same label, note and text
        again is a no-op; a label on a changed document text replaces the old one (no second label).
        ``request``: the idempotency key of this label; applied once, however often it is sent.
        """
        return self._write_judgment(annotator, dataset, query, doc_id, doc_text, self._check_label(label), None,
                                    query_id=query_id, note=note, systems=systems, request=request)

    def cant_judge(
        self,
        annotator: str,
        dataset: str,
        query: str,
        doc_id: str,
        doc_text: str,
        reason: str,
        *,
        query_id: str | None = None,
        note: str | None = None,
        systems: Mapping[str, int] | None = None,
        request: str | None = None,
    ) -> LabelResult:
        """Record "can't judge" with a reason (required) in place of a label, as campaigns do: the row keeps
        no label, so qrels and agreement skip it; undo brings back what was there. Arguments as ``set_label``."""
        reason = self._check_text("reason", reason if isinstance(reason, str) else "").strip()
        if not reason:
            raise JudgmentError("say why the item cannot be judged (a reason is required); nothing was changed")
        if len(reason) > MAX_REASON_CHARS:
            raise JudgmentError(f"the reason has {len(reason)} characters; the limit is {MAX_REASON_CHARS}")
        return self._write_judgment(annotator, dataset, query, doc_id, doc_text, None, reason,
                                    query_id=query_id, note=note, systems=systems, request=request)

    def _write_judgment(self, annotator: str, dataset: str, query: str, doc_id: str, doc_text: str,
                        label: int | None, reason: str | None, *, query_id: str | None, note: str | None,
                        systems: Mapping[str, int] | None, request: str | None) -> LabelResult:
        """A label (``reason`` None) or a "can't judge" (``label`` None) in one transaction, with its history."""
        annotator = self.check_annotator(annotator)
        request = self.check_request(request)
        for what, value in (("dataset", dataset), ("query", query), ("document id", doc_id), ("document text", doc_text)):
            self._check_text(what, value)
        if not query.strip():
            raise JudgmentError("the query is empty")
        if not doc_id.strip():
            raise JudgmentError("the document id is empty")
        keep_note = note is None  # None keeps the current note; "" clears it
        if note is not None:
            note = self._check_text("note", note).strip() or None
            if note and len(note) > MAX_NOTE_CHARS:
                raise JudgmentError(f"the note has {len(note)} characters; the limit is {MAX_NOTE_CHARS}")
        hits = {str(k): int(v) for k, v in (systems or {}).items()}
        d_hash = text_hash(doc_text)
        action = "set" if label is not None else "cant_judge"

        def tx() -> LabelResult:
            with self._write() as s, s.begin():
                row = self._current(s, annotator, dataset, query, doc_id)
                previous = row.label if row is not None else None
                if request is not None and not self.first_request(s, request, self._annotator(s, annotator).id, action):
                    return LabelResult(False, previous, repeated=True)
                new_note = (row.note if row is not None else None) if keep_note else note
                if (row is not None and row.label == label and row.reason == reason and row.note == new_note
                        and row.doc_hash == d_hash and row.document.text_hash == d_hash):
                    return LabelResult(False, previous)  # the common re-submit path: one SELECT
                now = _now()
                d = self._document(s, dataset, doc_id, d_hash)
                note_before = row.note if row is not None else None
                reason_before = row.reason if row is not None else None
                if row is None:
                    a = self._annotator(s, annotator)
                    q = self._query(s, dataset, query, query_id)
                    row = JudgmentRow(annotator_id=a.id, query_id=q.id, document_id=d.id, label=label, reason=reason,
                                      note=new_note, systems=hits or None, created_at=now, doc_hash=d_hash)
                    s.add(row)
                else:
                    row.label, row.reason, row.created_at, row.note, row.doc_hash = label, reason, now, new_note, d_hash
                    if hits:
                        row.systems = {**(row.systems or {}), **hits}
                s.flush()
                s.add(HistoryRow(annotator_id=row.annotator_id, query_id=row.query_id, document_id=row.document_id,
                                 action=action, label=label, previous_label=previous, note=row.note,
                                 note_before=note_before, systems=row.systems, created_at=now, doc_hash=d_hash,
                                 reason=reason, reason_before=reason_before))
                return LabelResult(True, previous)

        return self._run(tx)

    def clear_label(self, annotator: str, dataset: str, query: str, doc_id: str) -> LabelResult:
        """Remove the current label; the history keeps it (and its note)."""
        annotator = self.check_annotator(annotator)

        def tx() -> LabelResult:
            with self._write() as s, s.begin():
                row = self._current(s, annotator, dataset, query, doc_id)
                if row is None:
                    return LabelResult(False, None)
                s.add(HistoryRow(annotator_id=row.annotator_id, query_id=row.query_id, document_id=row.document_id,
                                 action="clear", label=None, previous_label=row.label, note=None,
                                 note_before=row.note, systems=row.systems, created_at=_now(),
                                 doc_hash=row.doc_hash, reason_before=row.reason))
                previous = row.label
                s.delete(row)
                return LabelResult(True, previous)

        return self._run(tx)

    def undo(self, annotator: str, dataset: str, query: str, doc_id: str, *, request: str | None = None) -> LabelResult:
        """Revert the newest not-yet-undone change of this label: previous label (or "can't judge" and its
        reason) *and* previous note.

        A first label is removed; a cleared label comes back. Logged as an ``undo`` history entry.
        ``request``: the idempotency key of this undo (applied once).
        """
        annotator = self.check_annotator(annotator)
        request = self.check_request(request)

        def tx() -> LabelResult:
            with self._write() as s, s.begin():
                if request is not None and not self.first_request(s, request, self._annotator(s, annotator).id, "undo"):
                    return LabelResult(False, None, repeated=True)
                a = s.scalar(select(Annotator).where(Annotator.name == annotator))
                q = s.scalar(select(QueryRow).where(QueryRow.dataset == dataset, QueryRow.text_hash == text_hash(query)))
                d = s.scalar(select(DocumentRow).where(DocumentRow.dataset == dataset, DocumentRow.doc_id == doc_id))
                if a is None or q is None or d is None:
                    return LabelResult(False, None)
                entries = s.scalars(select(HistoryRow).where(
                    HistoryRow.annotator_id == a.id, HistoryRow.query_id == q.id, HistoryRow.document_id == d.id,
                ).order_by(HistoryRow.id.desc())).all()
                pending = 0
                target = None
                for h in entries:
                    if h.action == "undo":
                        pending += 1
                    elif h.action in ("set", "cant_judge", "clear"):
                        if pending:
                            pending -= 1
                        else:
                            target = h
                            break
                    else:
                        break  # "migrated": nothing older to go back to
                if target is None:
                    return LabelResult(False, None)
                row = s.scalar(select(JudgmentRow).where(JudgmentRow.annotator_id == a.id,
                                                         JudgmentRow.query_id == q.id, JudgmentRow.document_id == d.id))
                current = row.label if row is not None else None
                current_note = row.note if row is not None else None
                current_reason = row.reason if row is not None else None
                now = _now()
                if target.previous_label is None and target.reason_before is None:
                    if row is not None:
                        s.delete(row)
                elif row is None:
                    s.add(JudgmentRow(annotator_id=a.id, query_id=q.id, document_id=d.id, label=target.previous_label,
                                      reason=target.reason_before, note=target.note_before, systems=target.systems,
                                      created_at=now, doc_hash=target.doc_hash))
                else:
                    row.label, row.reason, row.note, row.created_at = (target.previous_label, target.reason_before,
                                                                       target.note_before, now)
                s.add(HistoryRow(annotator_id=a.id, query_id=q.id, document_id=d.id, action="undo",
                                 label=target.previous_label, previous_label=current, note=target.note_before,
                                 note_before=current_note, reason=target.reason_before, reason_before=current_reason,
                                 systems=target.systems, created_at=now, doc_hash=target.doc_hash))
                return LabelResult(True, current)

        return self._run(tx)

    def set_guidelines(self, dataset: str, text: str) -> None:
        """Save the judging guidelines of a dataset."""
        self._check_text("guidelines", text)

        def tx() -> None:
            with self._write() as s, s.begin():
                row = s.get(GuidelinesRow, dataset)
                if row is None:
                    s.add(GuidelinesRow(dataset=dataset, text=text, updated_at=_now()))
                else:
                    row.text, row.updated_at = text, _now()

        self._run(tx)
