"""What a judging campaign is made of (``core.judging.campaigns``): the query set, the pooled items, the
owner's spec, the stored campaign, an annotator's blind queue item, decisions, conflicts, history, progress,
an export; the campaign errors and the two roles."""
from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from core.judging.database import JudgmentError

OWNER, ANNOTATOR = "owner", "annotator"
QUERY_SET_KINDS = ("split", "list", "sample")


class CampaignError(JudgmentError):
    """A campaign request that cannot be carried out (bad input, unknown name); nothing was written."""


class CampaignAuthError(CampaignError):
    """The acting user may not do this (not an owner, not assigned, someone else's label); nothing was written."""


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
