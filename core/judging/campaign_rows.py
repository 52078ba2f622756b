"""The rows of a campaign and who may act on them: what every part of ``core.judging.campaigns.CampaignStore``
shares (names and texts checked, a campaign's row, its members, an item and its slots, owners-only reads),
and the reads anyone may do (the campaigns, one campaign)."""
from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from core.judging.campaign_records import ANNOTATOR, OWNER, Campaign, CampaignAuthError, CampaignError, QuerySet
from core.judging.identity import canonical_identity
from core.judging.judgments import MAX_NOTE_CHARS, JudgmentStore
from core.judging.label_records import query_key
from core.judging.schema import (MAX_NAME_CHARS, Annotator, CampaignItemRow, CampaignMemberRow, CampaignRow,
                                 CampaignSlotRow, DocumentRow, QueryRow, _utc)


class CampaignRows:
    """Campaigns in the judgment database: the shared lookups and checks (``actor`` is the logged-in user)."""

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
