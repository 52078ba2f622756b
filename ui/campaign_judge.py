"""The Annotate page's campaign mode: the annotator's server-side queue, blind, keyboard 0/1/2.

Each label is committed through ``CampaignStore.judge`` at once; "can't judge" needs a reason; the
rationale is optional. ``?item=ID`` reopens one item (refused with one line when it is not yours).
Texts are shown with ``st.text`` / ``st.dataframe`` only.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.errors import StudioError
from core.judging.campaigns import CampaignStore, QueueItem
from ui.render import error

LABELS = {0: "0 · not the same", 1: "1 · related", 2: "2 · same question"}
ERR = "campaign.error"


def _write(cs: CampaignStore, annotator: str, name: str, item_id: int, label: int | None) -> None:
    """Button callback: commit the label (or can't judge) and move on to the next item."""
    rationale = st.session_state.get(f"campaign.rationale.{item_id}") or None
    try:
        if label is None:
            cs.cant_judge(annotator, name, item_id, st.session_state.get(f"campaign.reason.{item_id}") or "",
                          rationale=rationale)
        else:
            cs.judge(annotator, name, item_id, label, rationale=rationale)
    except StudioError as exc:
        st.session_state[ERR] = str(exc)
        return
    st.query_params.pop("item", None)


def _current(cs: CampaignStore, annotator: str, name: str) -> QueueItem | None:
    raw = st.query_params.get("item")
    if raw:
        try:
            return cs.item(annotator, name, int(raw))
        except ValueError:
            st.error(f"item {raw!r} is not an item number", icon="⚠️")
        except StudioError as exc:
            error(exc)
        return None
    return cs.next_item(annotator, name)


def judge_campaign(cs: CampaignStore, annotator: str, name: str) -> None:
    """Render ``annotator``'s queue of campaign ``name``: one item, its label buttons, their own list."""
    c = cs.campaign(name)
    with st.expander("Guidelines of this campaign", expanded=False):
        st.text(c.guidelines or "(none written)")
    if st.session_state.get(ERR):
        st.error(st.session_state.pop(ERR), icon="⚠️")
    item = _current(cs, annotator, name)
    done, total = cs.own_progress(annotator, name)
    st.progress(done / total if total else 1.0, text=f"{done} of {total} assigned items judged")
    if item is None:
        if not st.query_params.get("item"):
            st.success("Nothing left in your queue for this campaign." if total else
                       "Nothing is assigned to you in this campaign.")
    else:
        st.caption(f"Query {item.query_id} · item {item.item_id}"
                   + (" · you judged it: " + (LABELS.get(item.label, str(item.label)) if item.label is not None
                                              else f"can't judge ({item.cant_judge})") if item.judged else ""))
        st.text(item.query)
        st.caption("Candidate")
        st.text(item.doc_text)
        st.text_input("Rationale (optional)", key=f"campaign.rationale.{item.item_id}", max_chars=4000,
                      value=item.rationale or "")
        cols = st.columns(4)
        for col, (value, text) in zip(cols[:3], [(v, t) for v, t in LABELS.items() if v <= c.max_label]):
            col.button(text, key=f"campaign.label{value}", shortcut=str(value), on_click=_write,
                       args=(cs, annotator, name, item.item_id, value),
                       type="primary" if item.label == value else "secondary")
        with cols[3].popover("Can't judge"):
            st.text_input("Why not?", key=f"campaign.reason.{item.item_id}", max_chars=1000)
            st.button("Save: can't judge", key="campaign.cant", on_click=_write,
                      args=(cs, annotator, name, item.item_id, None))
        st.caption("Keys: 0 / 1 / 2 label and move on. Your labels are saved on the server: "
                   "you can continue in any browser.")
    queue = cs.queue(annotator, name)
    if queue:
        st.dataframe(pd.DataFrame({
            "item": [q.item_id for q in queue],
            "query": [q.query for q in queue],
            "candidate": [q.doc_text for q in queue],
            "your label": ["" if not q.judged else str(q.label) if q.label is not None else "can't judge"
                           for q in queue],
        }), hide_index=True, key="campaign.queue")
