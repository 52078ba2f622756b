"""The Annotate page's campaign mode: the annotator's server-side queue, blind, in the judging panel.

The panel (``ui.judging_panel``) holds the queue around the next unjudged item and answers every key in the
browser; each label, "can't judge" (a reason is required) and undo reaches ``CampaignStore`` with the
idempotency key the browser made, so a resent one is applied once. ``?item=ID`` opens the panel on one of
your items (refused with one line when it is not yours). The panel writes texts with ``textContent``; the
list below uses ``st.dataframe``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pandas as pd
import streamlit as st

from core.errors import StudioError
from core.judging.campaign_records import CampaignError, QueueItem
from core.judging.campaigns import CampaignStore
from ui.judging_panel import Op, PanelItem, judging_panel
from ui.render import error

LABELS = {0: "not the same", 1: "related", 2: "same question"}
BEHIND, AHEAD = 100, 1000  # queue items the panel holds before and after the first one it shows
CACHE = "campaign.queue_texts"


def campaign_commit(cs: CampaignStore, annotator: str, name: str) -> Callable[[Op], object]:
    """Write one op of the panel through the campaign store, with its idempotency key."""
    def commit(op: Op) -> object:
        if isinstance(op.item, bool) or not isinstance(op.item, int):
            raise CampaignError(f"item {op.item!r} is not an item number; nothing was changed")
        if op.kind == "label":
            return cs.judge(annotator, name, op.item, op.label, rationale=op.rationale, request=op.key)
        if op.kind == "cant":
            return cs.cant_judge(annotator, name, op.item, op.reason or "", rationale=op.rationale, request=op.key)
        return cs.undo(annotator, name, op.item, request=op.key)

    return commit


def _start(cs: CampaignStore, annotator: str, name: str) -> tuple[QueueItem | None, list[QueueItem]]:
    """The item to show first (``?item=ID``, one of yours, else the next unjudged, claiming in open campaigns)
    and the queue. The queue's texts are read once per session and campaign (``CACHE``); each run after that
    reads only the annotator's own labels (``CampaignStore.own_labels``), so a label's rerun stays cheap."""
    raw = st.query_params.get("item")
    if raw:
        queue = cs.queue(annotator, name)
        try:
            return cs.item(annotator, name, int(raw)), queue
        except ValueError:
            st.error(f"item {raw!r} is not an item number", icon="⚠️")
        except StudioError as exc:
            error(exc)
        return None, queue
    cache = f"{CACHE}.{name}.{annotator}"
    queue = st.session_state.get(cache)
    if queue is None:
        queue = cs.queue(annotator, name)
    else:
        own = cs.own_labels(annotator, name)
        queue = [replace(q, label=own[q.item_id][0], cant_judge=own[q.item_id][1], rationale=own[q.item_id][2],
                         judged=True) if q.item_id in own else replace(q, label=None, cant_judge=None, rationale=None,
                                                                       judged=False) for q in queue]
    pending = next((q for q in queue if not q.judged), None)
    if pending is None:  # nothing left: an open campaign hands out the next query
        pending = cs.next_item(annotator, name)
        queue = cs.queue(annotator, name) if pending is not None else queue
    st.session_state[cache] = queue
    return pending, queue


def judge_campaign(cs: CampaignStore, annotator: str, name: str) -> None:
    """Render ``annotator``'s queue of campaign ``name`` in the judging panel, then their own list."""
    c = cs.campaign(name)
    with st.expander("Guidelines of this campaign", expanded=False):
        st.text(c.guidelines or "(none written)")
    _queue_view(cs, annotator, name, c.max_label)
    queue = cs.queue(annotator, name)
    if queue:  # outside the fragment: refreshed by a full run of the page, not by each label
        with st.expander("Your whole queue (as of opening the page)", expanded=False):
            st.dataframe(pd.DataFrame({
                "item": [q.item_id for q in queue],
                "query": [q.query for q in queue],
                "candidate": [q.doc_text for q in queue],
                "your label": ["" if not q.judged else str(q.label) if q.label is not None else "can't judge"
                               for q in queue],
            }), hide_index=True, key="campaign.queue")


@st.fragment
def _queue_view(cs: CampaignStore, annotator: str, name: str, max_label: int) -> None:
    """The progress and the panel: a fragment, so a label reruns only this part of the page (the panel last:
    its answer reaches the browser when the run is over, ready for the next request)."""
    first, queue = _start(cs, annotator, name)
    if first is None and st.query_params.get("item"):
        return  # a refused deep link: its one line is shown, nothing else
    done, total = sum(q.judged for q in queue), len(queue)
    st.progress(done / total if total else 1.0, text=f"{done} of {total} assigned items judged")
    if not total:
        st.success("Nothing is assigned to you in this campaign.")
        st.text(f"Queue of {annotator} (the name your login gives)")  # whose queue: as text, never markdown
        return
    if first is None:
        st.success("Nothing left in your queue for this campaign: P, U and the list below still work.")
    ids = [q.item_id for q in queue]
    at = ids.index(first.item_id) if first is not None and first.item_id in ids else len(ids) - 1
    window = queue[max(0, at - BEHIND): at + AHEAD]
    items = [PanelItem(str(q.item_id), q.item_id, q.query_id, q.query, q.doc_text, q.label, q.cant_judge, q.rationale,
                       q.judged) for q in window]
    judging_panel(f"campaign.panel.{name}", scope=f"campaign|{name}|{annotator}", annotator=annotator, items=items,
                  commit=campaign_commit(cs, annotator, name), start=str(ids[at]), can_cant=True, max_label=max_label,
                  labels={v: t for v, t in LABELS.items() if v <= max_label}, status=f"Campaign {name}")
