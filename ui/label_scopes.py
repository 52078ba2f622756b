"""How the server commits each kind of judging panel, given only its annotator and scope.

A page renders its panel with one of these commits; after a restart the label endpoint rebuilds a panel it
did not render from the same functions (``install`` hands ``commit_for`` to ``ui.label_endpoint``), so a
label the browser still holds is stored without a reload. Scopes: ``free|DATASET|ANNOTATOR`` (free judging:
what a label is about, its text and pool systems included, comes from the server's record of rendered items)
and ``campaign|NAME|ANNOTATOR``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from core.judging.database import JudgmentError
from ui import label_endpoint
from ui.judging_panel import Op, resolver

if TYPE_CHECKING:
    from core.judging.judgments import JudgmentStore


def free_scope(dataset: str, annotator: str) -> str:
    """The scope of free judging on ``dataset`` by ``annotator``."""
    return f"free|{dataset}|{annotator}"


def free_commit(store: JudgmentStore, dataset: str, annotator: str) -> Callable[[Op], object]:
    """Write one free-judging op through ``store`` with its idempotency key; the query, query id, document, its
    text and the pool systems come from the op's ``ref`` (the server's record, never the browser)."""
    def commit(op: Op) -> object:
        query, qid, doc, text = (op.ref.get(f) for f in ("query", "qid", "doc", "text"))
        if not isinstance(query, str) or not isinstance(doc, str) or not isinstance(text, str):
            raise JudgmentError(f"{dataset} has no document {str(doc)[:80]!r}; nothing was changed")
        systems = op.ref.get("systems") if isinstance(op.ref.get("systems"), dict) else None
        qid = qid if isinstance(qid, str) else None
        if op.kind == "undo":
            return store.undo(annotator, dataset, query, doc, request=op.key)
        if op.kind == "cant":  # no label, a reason: as campaigns store it (qrels and agreement skip it)
            return store.cant_judge(annotator, dataset, query, doc, text, op.reason or "", query_id=qid,
                                    note=op.rationale, systems=systems, request=op.key)
        return store.set_label(annotator, dataset, query, doc, text, op.label, query_id=qid, note=op.rationale,
                               systems=systems, request=op.key)

    return commit


def commit_for(annotator: str, scope: str) -> Callable[[Op], object] | None:
    """The commit of a panel of ``scope`` by ``annotator`` (None: not a scope this server renders)."""
    from core.judging.campaigns import CampaignStore
    from core.judging.database import default_url
    from ui.cache import judgment_store
    from ui.campaign_judge import campaign_commit

    kind, _, rest = scope.partition("|")
    name, sep, who = rest.rpartition("|")
    if not sep or who != annotator or not name or kind not in ("free", "campaign"):
        return None
    store = judgment_store(default_url())
    if kind == "free":
        return free_commit(store, name, annotator)
    return campaign_commit(CampaignStore(store=store), annotator, name)


def install() -> None:
    """Let the label endpoint rebuild panels of this server after a restart."""
    label_endpoint.set_resolver(resolver(commit_for))
