"""Judging campaigns: a team judges one pooled set of (query, document) items with overlap r.

Stored in the judgment database (schema v4, ``core.judging.schema``; SQLite or PostgreSQL) through the
judgment store's engine, bounded locks and one-line errors (``core.judging.judgments.JudgmentStore``).
What a campaign is made of is ``core.judging.campaign_records``; an annotator's side ``campaign_queue``;
the owners' reads and export ``campaign_results``; this module creates campaigns and holds the owners' actions:

- a **campaign** has a dataset, a query set (``QuerySet``: a split, a list, a seeded sample), the pooled
  systems and depth, the overlap r (annotators per item), owners, and either named annotators (each
  query goes to r of them, balanced round-robin) or an open roster (anyone logged in claims the next
  query that has fewer than r annotators);
- **items** are the pooled (query, document) pairs (``ItemSpec``; ``core.judging.campaign_pool`` builds
  them with ``pooling.build_pool``); their order is the queue order;
- **slots** assign an item to an annotator (slot 0..r-1; unique keys cap every item at r annotators and
  let each annotator hold an item once, also under concurrent claims on PostgreSQL);
- **labels**: one current label per (item, annotator), or "can't judge" with a reason, plus an optional
  rationale; every change is appended to ``campaign_history`` (who, when, before, after);
- **adjudications**: an owner's decision per item, stored as such, with its history.

The queue lives in the database: ``next_item`` is the first item assigned to the annotator that they
have not labelled yet, so an annotator resumes in any browser. Annotators see no system names and no
one else's labels (``QueueItem`` carries neither).

People are named in their canonical form (``core.judging.identity.canonical_identity``: e-mail addresses
lower-cased), so ``Bob@Lab.Example`` given to the CLI and ``bob@lab.example`` from the identity provider
are one annotator. Authorisation is checked here, not only in the pages: writing an item not assigned to you, or another
annotator's label, raises ``CampaignAuthError`` (one line; nothing written); only owners assign,
adjudicate, edit the guidelines, read everyone's labels, progress, agreement and exports.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import select

from core.judging.campaign_queue import CampaignQueue
from core.judging.campaign_records import (ANNOTATOR, OWNER, Campaign, CampaignAuthError, CampaignError,
                                           CampaignSpec, ItemSpec)
from core.judging.campaign_results import CampaignResults
from core.judging.label_records import LabelResult, query_key
from core.judging.schema import (Annotator, CampaignAdjudicationRow, CampaignHistoryRow, CampaignItemRow,
                                 CampaignLabelRow, CampaignMemberRow, CampaignRow, CampaignSlotRow, QueryRow, _now,
                                 text_hash)


class CampaignStore(CampaignQueue, CampaignResults):
    """Campaigns in the judgment database (see the module docstring). ``actor`` is the logged-in user."""

    # -- create
    def create(self, actor: str, spec: CampaignSpec, items: Sequence[ItemSpec]) -> Campaign:
        """Store a campaign with its items and (named roster) its balanced assignment; ``actor`` must be an owner."""
        actor = self._name(actor)
        name = self._name(spec.name, "campaign")
        owners = sorted({self._name(o, "owner") for o in spec.owners})
        annotators = sorted({self._name(a, "annotator") for a in spec.annotators})
        if actor not in owners:
            raise CampaignAuthError(f"{actor} is not among the campaign's owners ({', '.join(owners) or 'none'}); "
                                    "only an owner creates a campaign; nothing was changed")
        for what, value in (("overlap", spec.overlap), ("depth", spec.depth), ("max label", spec.max_label)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CampaignError(f"{what} must be a whole number of at least 1, got {value!r}")
        if annotators and spec.overlap > len(annotators):
            raise CampaignError(f"overlap {spec.overlap} needs at least {spec.overlap} annotators; "
                                f"{len(annotators)} named ({', '.join(annotators)})")
        if not items:
            raise CampaignError("the pool is empty: no (query, document) items to judge")
        seen: set[tuple[str, str]] = set()
        for it in items:
            for what, value in (("query", it.query), ("document text", it.doc_text), ("query id", it.query_id),
                                ("document id", it.doc_id)):
                if not isinstance(value, str) or not value.strip() or "\x00" in value:
                    raise CampaignError(f"item ({it.query_id!r}, {it.doc_id!r}): the {what} is empty or not text")
            if (it.query_id, it.doc_id) in seen:
                raise CampaignError(f"item ({it.query_id}, {it.doc_id}) appears twice in the pool")
            seen.add((it.query_id, it.doc_id))
        guidelines = self._text(spec.guidelines, "guidelines", 20_000) or ""

        def tx() -> Campaign:
            with self.store._write() as s, s.begin():
                if s.scalar(select(CampaignRow.id).where(CampaignRow.name == name)) is not None:
                    raise CampaignError(f"a campaign named {name!r} exists already; pick another name")
                c = CampaignRow(name=name, dataset=spec.dataset, query_set=spec.query_set.to_dict(),
                                systems=list(spec.systems), depth=spec.depth, overlap=spec.overlap,
                                open=not annotators, max_label=spec.max_label, guidelines=guidelines,
                                created_by=actor, created_at=_now())
                s.add(c)
                s.flush()
                people = {n: self._person(s, n) for n in set(owners) | set(annotators)}
                for role, names in ((OWNER, owners), (ANNOTATOR, annotators)):
                    for n in names:
                        s.add(CampaignMemberRow(campaign_id=c.id, annotator_id=people[n].id, role=role))
                query_rows: dict[str, QueryRow] = {}
                query_order: list[str] = []
                rows: list[tuple[str, CampaignItemRow]] = []
                for pos, it in enumerate(items):
                    if it.query_id not in query_rows:
                        query_rows[it.query_id] = self.store._query(s, spec.dataset, it.query, it.query_id)
                        query_order.append(it.query_id)
                    d = self.store._document(s, spec.dataset, it.doc_id, text_hash(it.doc_text))
                    row = CampaignItemRow(campaign_id=c.id, position=pos, query_id=query_rows[it.query_id].id,
                                          document_id=d.id, query_text=it.query_shown or it.query,
                                          doc_text=it.doc_shown or it.doc_text, doc_hash=text_hash(it.doc_text),
                                          systems=dict(it.systems) or None)
                    s.add(row)
                    rows.append((it.query_id, row))
                s.flush()
                if annotators:  # query i goes to annotators i*r .. i*r+r-1 (mod n): balanced, all of a query together
                    now = _now()
                    for qi, qid in enumerate(query_order):
                        chosen = [annotators[(qi * spec.overlap + j) % len(annotators)] for j in range(spec.overlap)]
                        for _, row in (r for r in rows if r[0] == qid):
                            for slot, person in enumerate(chosen):
                                s.add(CampaignSlotRow(item_id=row.id, slot=slot, annotator_id=people[person].id,
                                                      assigned_at=now))
                s.flush()
                return self._to_campaign(s, c)

        return self.store._run(tx)

    # -- owner actions
    def set_guidelines(self, actor: str, name: str, text: str) -> None:
        """Replace the campaign's guidelines (owners only)."""
        actor = self._name(actor)
        text = self._text(text, "guidelines", 20_000) or ""

        def tx() -> None:
            with self.store._write() as s, s.begin():
                c = self._campaign_row(s, name)
                self._require_owner(s, c, actor, "edit the guidelines")
                c.guidelines = text

        self.store._run(tx)

    def assign(self, actor: str, name: str, annotator: str, query_ids: Iterable[str], *,
               replace: str | None = None) -> int:
        """Give ``annotator`` every item of these queries (owners only); returns the slots assigned.

        Without ``replace`` a query must have fewer than r annotators. With ``replace``, ``replace``'s
        slots on items they have not labelled move to ``annotator`` (their labels stay theirs).
        """
        actor, annotator = self._name(actor), self._name(annotator, "annotator")
        replace = self._name(replace, "annotator") if replace is not None else None
        wanted = list(dict.fromkeys(str(q) for q in query_ids))
        if not wanted:
            raise CampaignError("name at least one query id to assign")

        def tx() -> int:
            with self.store._write() as s, s.begin():
                c = self._campaign_row(s, name)
                self._require_owner(s, c, actor, "assign work")
                rows = s.execute(select(CampaignItemRow, QueryRow).join(QueryRow, QueryRow.id == CampaignItemRow.query_id)
                                 .where(CampaignItemRow.campaign_id == c.id).order_by(CampaignItemRow.position)).all()
                by_query: dict[str, list[CampaignItemRow]] = {}
                for item, q in rows:
                    by_query.setdefault(query_key(q.qid, q.text), []).append(item)
                missing = [q for q in wanted if q not in by_query]
                if missing:
                    raise CampaignError(f"campaign {name!r} has no query {', '.join(missing[:5])}; nothing was changed")
                person = self._person(s, annotator)
                old = s.scalar(select(Annotator).where(Annotator.name == replace)) if replace else None
                if replace and old is None:
                    raise CampaignError(f"{replace} holds nothing in campaign {name!r}; nothing was changed")
                if s.scalar(select(CampaignMemberRow.id).where(
                        CampaignMemberRow.campaign_id == c.id, CampaignMemberRow.annotator_id == person.id,
                        CampaignMemberRow.role == ANNOTATOR)) is None and not c.open:
                    s.add(CampaignMemberRow(campaign_id=c.id, annotator_id=person.id, role=ANNOTATOR))
                now, count = _now(), 0
                for qid in wanted:
                    for item in by_query[qid]:
                        if self._slot(s, item.id, person.id) is not None:
                            continue
                        if old is not None:
                            slot = self._slot(s, item.id, old.id)
                            labelled = s.scalar(select(CampaignLabelRow.id).where(
                                CampaignLabelRow.item_id == item.id, CampaignLabelRow.annotator_id == old.id))
                            if slot is None or labelled is not None:
                                continue
                            slot.annotator_id, slot.assigned_at = person.id, now
                        else:
                            used = set(s.scalars(select(CampaignSlotRow.slot).where(CampaignSlotRow.item_id == item.id)))
                            free = [k for k in range(c.overlap) if k not in used]
                            if not free:
                                raise CampaignError(f"query {qid} already has {c.overlap} annotator(s) (overlap r = "
                                                    f"{c.overlap}); use replace to hand work over; nothing was changed")
                            s.add(CampaignSlotRow(item_id=item.id, slot=free[0], annotator_id=person.id, assigned_at=now))
                        s.add(CampaignHistoryRow(item_id=item.id, annotator_id=person.id, action="assign",
                                                 reason=f"by {actor}" + (f", from {replace}" if replace else ""),
                                                 created_at=now))
                        count += 1
                s.flush()
                return count

        return self.store._run(tx)

    def adjudicate(self, actor: str, name: str, item_id: int, label: int, *, rationale: str | None = None) -> LabelResult:
        """Store an owner's decision on an item (owners only), with its history."""
        actor = self._name(actor)
        rationale = self._text(rationale, "rationale")

        def tx() -> LabelResult:
            with self.store._write() as s, s.begin():
                c = self._campaign_row(s, name)
                self._require_owner(s, c, actor, "adjudicate")
                item = self._item_row(s, c, item_id)
                self._check_label(c, label)
                person = self._person(s, actor)
                row = s.get(CampaignAdjudicationRow, item.id)
                previous = row.label if row is not None else None
                if row is not None and (row.label, row.rationale) == (label, rationale):
                    return LabelResult(False, previous)
                now = _now()
                if row is None:
                    s.add(CampaignAdjudicationRow(item_id=item.id, annotator_id=person.id, label=label,
                                                  rationale=rationale, created_at=now))
                else:
                    row.annotator_id, row.label, row.rationale, row.created_at = person.id, label, rationale, now
                s.add(CampaignHistoryRow(item_id=item.id, annotator_id=person.id, action="adjudicate", label=label,
                                         previous_label=previous, rationale=rationale, created_at=now))
                s.flush()
                return LabelResult(True, previous)

        return self.store._run(tx)
