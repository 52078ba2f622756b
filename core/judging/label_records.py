"""What the judgments store returns: a current label (``Judgment``), a history entry, the outcome of a write,
counts; the key a query goes by in qrels and runs (``query_key``), and one label per pair from several
annotators (``resolve_labels``)."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from core.judging.database import JudgmentError
from core.judging.schema import text_hash

MAX_REASON_CHARS = 1000  # a "can't judge" reason, in a campaign or free judging


@dataclass(frozen=True)
class Judgment:
    """One current label (what exports, agreement and error analysis read).

    ``stale``: the document's text changed since this label was given (re-judge it).
    """

    annotator: str
    dataset: str
    query: str
    query_id: str
    doc_id: str
    label: int
    note: str | None
    systems: dict[str, int]
    time: datetime
    doc_hash: str = ""
    stale: bool = False


@dataclass(frozen=True)
class HistoryEntry:
    """One change in the append-only history."""

    annotator: str
    dataset: str
    query_id: str
    doc_id: str
    action: str
    label: int | None
    previous_label: int | None
    note: str | None
    time: datetime
    note_before: str | None = None


@dataclass(frozen=True)
class LabelResult:
    """Outcome of ``set_label`` / ``clear_label`` / ``undo``: whether anything changed, the label before;
    ``repeated``: the request's idempotency key was applied before, so nothing was done now."""

    changed: bool
    previous: int | None
    repeated: bool = False


@dataclass
class StoreStats:
    """Counts for the CLI ``judgments stats`` and the pages."""

    annotators: dict[str, int] = field(default_factory=dict)
    judgments: int = 0
    queries: int = 0
    documents: int = 0
    history: int = 0
    label_counts: dict[int, int] = field(default_factory=dict)
    stale: int = 0


def query_match_form(text: str) -> str:
    """The form two typed queries are compared in: the text pipeline's terms (lower case, punctuation dropped),
    so "How can I stop my depression?" and "how can i stop my depression" are one query; a text without any
    term keeps its own stripped form."""
    from core.data.pipeline import terms

    return " ".join(terms(text)) or text.strip()


def query_key(qid: str | None, text: str) -> str:
    """The query id used in qrels/runs: the dataset id, or ``text:<hash>`` of a typed query's match form
    (``query_match_form``: the same key however the question is cased or punctuated)."""
    return qid if qid else "text:" + text_hash(query_match_form(text))[:16]


def resolve_labels(judgments: Iterable[Judgment], resolve: str = "majority") -> dict[str, dict[str, int]]:
    """One label per (query, doc): ``majority`` vote (ties -> most recent) or ``latest``."""
    if resolve not in ("majority", "latest"):
        raise JudgmentError(f"resolve must be 'majority' or 'latest', got {resolve!r}")
    votes: dict[tuple[str, str], list[Judgment]] = {}
    for j in judgments:
        votes.setdefault((j.query_id, j.doc_id), []).append(j)
    out: dict[str, dict[str, int]] = {}
    for (qid, doc), js in votes.items():
        js = sorted(js, key=lambda j: j.time)
        if resolve == "latest":
            label = js[-1].label
        else:
            counts: dict[int, int] = {}
            for j in js:
                counts[j.label] = counts.get(j.label, 0) + 1
            top = max(counts.values())
            label = next(j.label for j in reversed(js) if counts[j.label] == top)
        out.setdefault(qid, {})[doc] = label
    return out
