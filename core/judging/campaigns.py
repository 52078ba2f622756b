"""Judging campaigns: a team judges one pooled set of (query, document) items with overlap r.

Stored in the judgment database (schema v4, ``core.judging.schema``; SQLite or PostgreSQL) through the
judgment store's engine, bounded locks and one-line errors (``core.judging.judgments.JudgmentStore``):

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

import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core.data.trec import qrels_text
from core.judging.agreement import CampaignLabel
from core.judging.identity import canonical_identity
from core.judging.database import JudgmentError
from core.judging.judgments import MAX_NOTE_CHARS, JudgmentStore
from core.judging.label_records import LabelResult, query_key
from core.judging.schema import (MAX_NAME_CHARS, Annotator, CampaignAdjudicationRow, CampaignHistoryRow,
                                 CampaignItemRow, CampaignLabelRow, CampaignMemberRow, CampaignRow, CampaignSlotRow,
                                 DocumentRow, QueryRow, _now, _utc, text_hash)

OWNER, ANNOTATOR = "owner", "annotator"
QUERY_SET_KINDS = ("split", "list", "sample")
RULES = ("majority", "adjudicated", "mean")
MAX_REASON_CHARS = 1000


class CampaignError(JudgmentError):
    """A campaign request that cannot be carried out (bad input, unknown name); nothing was written."""


class CampaignAuthError(CampaignError):
    """The acting user may not do this (not an owner, not assigned, someone else's label); nothing was written."""


# ----------------------------------------------------------------------------- value objects
@dataclass(frozen=True)
class QuerySet:
    """Which queries a campaign judges: a ``split``, a ``list`` of ids, or a ``sample`` of a split."""

    kind: str = "split"
    split: str = "test"
    ids: tuple[str, ...] = ()
    size: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in QUERY_SET_KINDS:
            raise CampaignError(f"query set kind must be one of {', '.join(QUERY_SET_KINDS)}, got {self.kind!r}")
        if self.kind == "list" and not self.ids:
            raise CampaignError("a query list names no query ids")
        if self.kind == "sample" and self.size < 1:
            raise CampaignError(f"a query sample needs a size of at least 1, got {self.size}")

    def to_dict(self) -> dict:
        """JSON form stored with the campaign."""
        return {"kind": self.kind, "split": self.split, "ids": list(self.ids), "size": self.size, "seed": self.seed}

    @classmethod
    def from_dict(cls, data: Mapping) -> QuerySet:
        """Inverse of ``to_dict``."""
        return cls(data.get("kind", "split"), data.get("split", "test"), tuple(data.get("ids", ())),
                   int(data.get("size", 0)), int(data.get("seed", 0)))

    def select(self, available: Sequence[str]) -> list[str]:
        """The chosen query ids out of ``available`` (the split's ids, in dataset order)."""
        if self.kind == "split":
            return list(available)
        if self.kind == "list":
            known = set(available)
            missing = [q for q in self.ids if q not in known]
            if missing:
                raise CampaignError(f"unknown query id(s) in the list: {', '.join(missing[:5])}"
                                    + (" ..." if len(missing) > 5 else ""))
            return list(dict.fromkeys(self.ids))
        if self.size > len(available):
            raise CampaignError(f"a sample of {self.size} queries asked of {len(available)} available")
        return random.Random(self.seed).sample(sorted(available), self.size)

    def describe(self) -> str:
        """One line for status output."""
        if self.kind == "split":
            return f"split {self.split}"
        if self.kind == "list":
            return f"list of {len(self.ids)} queries"
        return f"sample of {self.size} from split {self.split} (seed {self.seed})"


@dataclass(frozen=True)
class ItemSpec:
    """One (query, document) to judge: ids, the raw texts (keyed/hashed), what is shown, the hidden ranks."""

    query_id: str
    query: str
    doc_id: str
    doc_text: str
    systems: dict[str, int] = field(default_factory=dict)
    query_shown: str | None = None
    doc_shown: str | None = None


@dataclass(frozen=True)
class CampaignSpec:
    """What an owner asks for. ``annotators`` empty: an open campaign (anyone logged in may claim work)."""

    name: str
    dataset: str
    query_set: QuerySet
    systems: tuple[str, ...]
    depth: int
    overlap: int
    owners: tuple[str, ...]
    annotators: tuple[str, ...] = ()
    max_label: int = 2
    guidelines: str = ""


@dataclass(frozen=True)
class Campaign:
    """A stored campaign."""

    name: str
    dataset: str
    query_set: QuerySet
    systems: tuple[str, ...]
    depth: int
    overlap: int
    owners: tuple[str, ...]
    annotators: tuple[str, ...]
    open: bool
    max_label: int
    guidelines: str
    created_by: str
    created_at: datetime
    items: int
    queries: int


@dataclass(frozen=True)
class QueueItem:
    """What an annotator sees of one item: blind (no systems, no one else's labels)."""

    campaign: str
    item_id: int
    position: int
    query_id: str
    query: str
    doc_id: str
    doc_text: str
    label: int | None = None
    cant_judge: str | None = None
    rationale: str | None = None
    judged: bool = False


@dataclass(frozen=True)
class Adjudication:
    """An owner's decision on an item."""

    item_id: int
    query_id: str
    doc_id: str
    owner: str
    label: int
    rationale: str | None
    time: datetime


@dataclass(frozen=True)
class Conflict:
    """An item whose annotators gave different labels (can't-judge left out), with any decision made."""

    item_id: int
    query_id: str
    query: str
    doc_id: str
    doc_text: str
    labels: dict[str, int]
    adjudicated: int | None


@dataclass(frozen=True)
class CampaignHistory:
    """One logged change."""

    item_id: int
    query_id: str
    doc_id: str
    who: str
    action: str
    label: int | None
    previous_label: int | None
    reason: str | None
    rationale: str | None
    time: datetime


@dataclass
class Progress:
    """Per annotator: (labelled, assigned) items; per query: items, ratings given, ratings wanted, items complete."""

    annotators: dict[str, tuple[int, int]] = field(default_factory=dict)
    queries: dict[str, dict[str, int]] = field(default_factory=dict)
    items: int = 0
    complete: int = 0  # items with r ratings (a "can't judge" counts as done)


@dataclass(frozen=True)
class ExportResult:
    """A written qrels file and what the rule did."""

    path: Path
    rule: str
    pairs: int
    queries: int
    skipped: int  # items with no usable label under the rule


# ----------------------------------------------------------------------------- aggregation rules
def rule_name(rule: str, threshold: float = 1.0) -> str:
    """The rule as named in file names and output: ``majority``, ``adjudicated``, ``mean-ge-1.5``."""
    if rule not in RULES:
        raise CampaignError(f"aggregation rule must be one of {', '.join(RULES)}, got {rule!r}")
    return f"mean-ge-{threshold:g}" if rule == "mean" else rule


def rule_description(rule: str, threshold: float = 1.0) -> str:
    """One sentence: what the rule does (printed by the CLI and the page beside the file)."""
    rule_name(rule, threshold)
    return {
        "majority": "majority: the most frequent label of the annotators; a tie goes to the lower label",
        "adjudicated": "adjudicated: the owner's decision where there is one, otherwise the majority "
                       "(a tie goes to the lower label)",
        "mean": f"mean-ge-{threshold:g}: 1 when the mean label is at least {threshold:g}, else 0 (binary)",
    }[rule]


def aggregate(labels: Sequence[int], rule: str, adjudicated: int | None = None, threshold: float = 1.0) -> int | None:
    """One label from an item's ratings under ``rule`` (None: nothing to go on)."""
    rule_name(rule, threshold)
    if rule == "adjudicated" and adjudicated is not None:
        return adjudicated
    if not labels:
        return None
    if rule == "mean":
        return int(sum(labels) / len(labels) >= threshold)
    counts = Counter(labels)
    top = max(counts.values())
    return min(label for label, n in counts.items() if n == top)


# ----------------------------------------------------------------------------- the store
class CampaignStore:
    """Campaigns in the judgment database (see the module docstring). ``actor`` is the logged-in user."""

    def __init__(self, url: str | None = None, *, create: bool = True, lock_timeout: float | None = None,
                 store: JudgmentStore | None = None) -> None:
        self.store = store or JudgmentStore(url, create=create, lock_timeout=lock_timeout)

    def close(self) -> None:
        """Release the connection pool."""
        self.store.close()

    # -- helpers
    @staticmethod
    def _name(value: str, what: str = "user") -> str:
        """A person's canonical name (e-mail lower-cased), or a campaign's name with whitespace collapsed."""
        cleaned = " ".join(str(value or "").replace("\x00", " ").split())
        if what != "campaign":
            cleaned = canonical_identity(cleaned)
        if not cleaned:
            raise CampaignError(f"no {what} name given")
        if len(cleaned) > MAX_NAME_CHARS:
            raise CampaignError(f"the {what} name has {len(cleaned)} characters; the limit is {MAX_NAME_CHARS}")
        return cleaned

    @staticmethod
    def _text(value: str | None, what: str, limit: int = MAX_NOTE_CHARS) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or "\x00" in value:
            raise CampaignError(f"the {what} must be text without NUL characters")
        value = value.strip()
        if len(value) > limit:
            raise CampaignError(f"the {what} has {len(value)} characters; the limit is {limit}")
        return value or None

    def _campaign_row(self, s: Session, name: str) -> CampaignRow:
        row = s.scalar(select(CampaignRow).where(CampaignRow.name == name))
        if row is None:
            known = sorted(s.scalars(select(CampaignRow.name)))
            raise CampaignError(f"unknown campaign {name!r}; known: {', '.join(known) or '(none)'}")
        return row

    @staticmethod
    def _members(s: Session, campaign_id: int, role: str) -> list[str]:
        return sorted(s.scalars(select(Annotator.name).join(CampaignMemberRow, CampaignMemberRow.annotator_id == Annotator.id)
                                .where(CampaignMemberRow.campaign_id == campaign_id, CampaignMemberRow.role == role)))

    def _require_owner(self, s: Session, c: CampaignRow, actor: str, doing: str) -> None:
        if actor not in self._members(s, c.id, OWNER):
            raise CampaignAuthError(f"{actor} is not an owner of campaign {c.name!r}: only owners {doing}; "
                                    "nothing was changed")

    def _person(self, s: Session, name: str) -> Annotator:
        return self.store._annotator(s, name)

    def _item_row(self, s: Session, c: CampaignRow, item_id: int) -> CampaignItemRow:
        item = s.get(CampaignItemRow, int(item_id)) if isinstance(item_id, int) and not isinstance(item_id, bool) else None
        if item is None or item.campaign_id != c.id:
            raise CampaignError(f"campaign {c.name!r} has no item {item_id!r}; nothing was changed")
        return item

    @staticmethod
    def _slot(s: Session, item_id: int, person_id: int) -> CampaignSlotRow | None:
        return s.scalar(select(CampaignSlotRow).where(CampaignSlotRow.item_id == item_id,
                                                      CampaignSlotRow.annotator_id == person_id))

    def _to_campaign(self, s: Session, c: CampaignRow) -> Campaign:
        items = s.scalar(select(func.count()).select_from(CampaignItemRow).where(CampaignItemRow.campaign_id == c.id))
        queries = s.scalar(select(func.count(func.distinct(CampaignItemRow.query_id)))
                           .where(CampaignItemRow.campaign_id == c.id))
        return Campaign(c.name, c.dataset, QuerySet.from_dict(c.query_set), tuple(c.systems), c.depth, c.overlap,
                        tuple(self._members(s, c.id, OWNER)), tuple(self._members(s, c.id, ANNOTATOR)), c.open,
                        c.max_label, c.guidelines, c.created_by, _utc(c.created_at), int(items or 0), int(queries or 0))

    def _check_label(self, c: CampaignRow, label: int) -> int:
        if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label <= c.max_label:
            raise CampaignError(f"label must be an integer from 0 to {c.max_label}, got {label!r}; nothing was changed")
        return label

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

    # -- reads anyone may do
    def campaigns(self, actor: str | None = None) -> list[Campaign]:
        """Campaigns, newest first; with ``actor``: those they own, are named in, or that are open."""
        actor = self._name(actor) if actor is not None else None

        def read() -> list[Campaign]:
            with self.store._read() as s:
                out = [self._to_campaign(s, c) for c in s.scalars(select(CampaignRow).order_by(CampaignRow.id.desc()))]
            if actor is None:
                return out
            return [c for c in out if c.open or actor in c.owners or actor in c.annotators]

        return self.store._reading(read)

    def campaign(self, name: str) -> Campaign:
        """One campaign by name (``CampaignError`` naming the known ones if unknown)."""
        def read() -> Campaign:
            with self.store._read() as s:
                return self._to_campaign(s, self._campaign_row(s, name))

        return self.store._reading(read)

    def is_owner(self, actor: str, name: str) -> bool:
        """Whether ``actor`` owns campaign ``name``."""
        return self._name(actor) in self.campaign(name).owners

    # -- the annotator's queue
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

    # -- owner reads
    def _owner_read(self, actor: str, name: str, doing: str, fn):
        actor = self._name(actor)

        def read():
            with self.store._read() as s:
                c = self._campaign_row(s, name)
                self._require_owner(s, c, actor, doing)
                return fn(s, c)

        return self.store._reading(read)

    @staticmethod
    def _item_keys(s: Session, c: CampaignRow) -> dict[int, tuple[str, str, CampaignItemRow]]:
        rows = s.execute(select(CampaignItemRow, QueryRow, DocumentRow.doc_id)
                         .join(QueryRow, QueryRow.id == CampaignItemRow.query_id)
                         .join(DocumentRow, DocumentRow.id == CampaignItemRow.document_id)
                         .where(CampaignItemRow.campaign_id == c.id).order_by(CampaignItemRow.position)).all()
        return {item.id: (query_key(q.qid, q.text), doc, item) for item, q, doc in rows}

    def labels(self, actor: str, name: str) -> list[CampaignLabel]:
        """Every annotator's current label (owners only), in queue order."""
        def fn(s: Session, c: CampaignRow) -> list[CampaignLabel]:
            keys = self._item_keys(s, c)
            rows = s.execute(select(CampaignLabelRow, Annotator.name)
                             .join(Annotator, Annotator.id == CampaignLabelRow.annotator_id)
                             .join(CampaignItemRow, CampaignItemRow.id == CampaignLabelRow.item_id)
                             .where(CampaignItemRow.campaign_id == c.id)).all()
            out = [CampaignLabel(l.item_id, keys[l.item_id][0], keys[l.item_id][1], who, l.label, l.reason, l.rationale,
                                 _utc(l.created_at)) for l, who in rows]
            return sorted(out, key=lambda x: (keys[x.item_id][2].position, x.annotator))

        return self._owner_read(actor, name, "see everyone's labels", fn)

    def adjudications(self, actor: str, name: str) -> list[Adjudication]:
        """Owners' decisions (owners only)."""
        def fn(s: Session, c: CampaignRow) -> list[Adjudication]:
            keys = self._item_keys(s, c)
            rows = s.execute(select(CampaignAdjudicationRow, Annotator.name)
                             .join(Annotator, Annotator.id == CampaignAdjudicationRow.annotator_id)
                             .where(CampaignAdjudicationRow.item_id.in_(list(keys)))).all()
            return [Adjudication(a.item_id, keys[a.item_id][0], keys[a.item_id][1], who, a.label, a.rationale,
                                 _utc(a.created_at)) for a, who in rows]

        return self._owner_read(actor, name, "see adjudications", fn)

    def conflicts(self, actor: str, name: str) -> list[Conflict]:
        """Items whose annotators disagree (owners only): what the adjudication view lists."""
        labels = self.labels(actor, name)
        decided = {a.item_id: a.label for a in self.adjudications(actor, name)}

        def fn(s: Session, c: CampaignRow) -> dict[int, tuple[str, str, CampaignItemRow]]:
            return self._item_keys(s, c)

        keys = self._owner_read(actor, name, "adjudicate", fn)
        by_item: dict[int, dict[str, int]] = {}
        for lab in labels:
            if lab.label is not None:
                by_item.setdefault(lab.item_id, {})[lab.annotator] = lab.label
        out = []
        for item_id, votes in by_item.items():
            if len(set(votes.values())) > 1:
                qid, doc, row = keys[item_id]
                out.append(Conflict(item_id, qid, row.query_text, doc, row.doc_text, dict(sorted(votes.items())),
                                    decided.get(item_id)))
        return sorted(out, key=lambda x: keys[x.item_id][2].position)

    def history(self, actor: str, name: str) -> list[CampaignHistory]:
        """Every logged change of the campaign, oldest first (owners only)."""
        def fn(s: Session, c: CampaignRow) -> list[CampaignHistory]:
            keys = self._item_keys(s, c)
            rows = s.execute(select(CampaignHistoryRow, Annotator.name)
                             .join(Annotator, Annotator.id == CampaignHistoryRow.annotator_id)
                             .where(CampaignHistoryRow.item_id.in_(list(keys))).order_by(CampaignHistoryRow.id)).all()
            return [CampaignHistory(h.item_id, keys[h.item_id][0], keys[h.item_id][1], who, h.action, h.label,
                                    h.previous_label, h.reason, h.rationale, _utc(h.created_at)) for h, who in rows]

        return self._owner_read(actor, name, "read the history", fn)

    def progress(self, actor: str, name: str) -> Progress:
        """Per-annotator and per-query progress (owners only)."""
        def fn(s: Session, c: CampaignRow) -> Progress:
            keys = self._item_keys(s, c)
            slots = s.execute(select(CampaignSlotRow.item_id, Annotator.name)
                              .join(Annotator, Annotator.id == CampaignSlotRow.annotator_id)
                              .where(CampaignSlotRow.item_id.in_(list(keys)))).all()
            done = set(s.execute(select(CampaignLabelRow.item_id, Annotator.name)
                                 .join(Annotator, Annotator.id == CampaignLabelRow.annotator_id)
                                 .where(CampaignLabelRow.item_id.in_(list(keys)))).all())
            out = Progress(items=len(keys))
            per_item: Counter = Counter()
            for item_id, who in slots:
                labelled = (item_id, who) in done
                d, a = out.annotators.get(who, (0, 0))
                out.annotators[who] = (d + labelled, a + 1)
                per_item[item_id] += labelled
            for item_id, (qid, _, _) in keys.items():
                q = out.queries.setdefault(qid, {"items": 0, "ratings": 0, "wanted": 0, "complete": 0})
                q["items"] += 1
                q["ratings"] += per_item[item_id]
                q["wanted"] += c.overlap
                q["complete"] += per_item[item_id] >= c.overlap
            out.complete = sum(q["complete"] for q in out.queries.values())
            out.annotators = dict(sorted(out.annotators.items()))
            return out

        return self._owner_read(actor, name, "see everyone's progress", fn)

    def agreement(self, actor: str, name: str):
        """Krippendorff's α, Fleiss' and Cohen's κ, per campaign and per query (owners only):
        ``core.judging.agreement.CampaignAgreement``."""
        from core.judging.agreement import campaign_agreement

        return campaign_agreement(self.labels(actor, name), self.campaign(name).max_label)

    # -- export
    def qrels(self, actor: str, name: str, rule: str = "majority", threshold: float = 1.0
              ) -> tuple[dict[str, dict[str, int]], int]:
        """(qrels, items skipped) under ``rule`` (owners only); can't-judge ratings are left out."""
        rule_name(rule, threshold)
        labels = self.labels(actor, name)
        decided = {a.item_id: a.label for a in self.adjudications(actor, name)}
        keys = self._owner_read(actor, name, "export", lambda s, c: self._item_keys(s, c))
        votes: dict[int, list[int]] = {i: [] for i in keys}
        for lab in labels:
            if lab.label is not None:
                votes[lab.item_id].append(lab.label)
        qrels: dict[str, dict[str, int]] = {}
        skipped = 0
        for item_id, (qid, doc, _) in keys.items():
            value = aggregate(votes[item_id], rule, decided.get(item_id), threshold)
            if value is None:
                skipped += 1
            else:
                qrels.setdefault(qid, {})[doc] = value
        return qrels, skipped

    def export_qrels(self, actor: str, name: str, folder: str | Path, rule: str = "majority",
                     threshold: float = 1.0) -> ExportResult:
        """Write TREC qrels (``qid 0 docid label``) to ``folder/<campaign>.<rule>.qrels`` (owners only)."""
        qrels, skipped = self.qrels(actor, name, rule, threshold)
        path = Path(folder) / export_filename(name, rule, threshold)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(qrels_text(qrels), encoding="utf-8")
        return ExportResult(path, rule_name(rule, threshold), sum(len(v) for v in qrels.values()), len(qrels), skipped)


def export_filename(campaign: str, rule: str, threshold: float = 1.0) -> str:
    """``<campaign>.<rule>.qrels`` with the campaign name made file-safe: the rule is in the name."""
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in campaign)
    return f"{safe}.{rule_name(rule, threshold)}.qrels"


