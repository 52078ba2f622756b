"""The Annotate page's campaign mode: the annotator's server-side queue, blind, keyboard 0/1/2.

Each label is committed through ``CampaignStore.judge`` at once; "can't judge" needs a reason; the
rationale is optional. Previous (P) reopens the item before the one shown; Undo (U) takes back this
session's last label (``CampaignStore.undo``: the label before it comes back, or the item is unjudged
again) and shows that item. Both go through ``?item=ID``, which reopens one item (refused with one line
when it is not yours). Texts are shown with ``st.text`` / ``st.dataframe`` only.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.errors import StudioError
from core.judging.campaigns import CampaignStore, QueueItem
from ui.render import error

LABELS = {0: "0 · not the same", 1: "1 · related", 2: "2 · same question"}
ERR, UNDO = "campaign.error", "campaign.undo"


def _undo_stack(name: str) -> list[int]:
    return st.session_state.setdefault(f"{UNDO}.{name}", [])


def _write(cs: CampaignStore, annotator: str, name: str, item_id: int, label: int | None) -> None:
    """Button callback: commit the label (or can't judge) and move on to the next item."""
    rationale = st.session_state.get(f"campaign.rationale.{item_id}") or None
    try:
        if label is None:
            cs.cant_judge(annotator, name, item_id, st.session_state.get(f"campaign.reason.{item_id}") or "",
                          rationale=rationale)
        else:
            result = cs.judge(annotator, name, item_id, label, rationale=rationale)
            if not result.changed:
                st.query_params.pop("item", None)
                return
    except StudioError as exc:
        st.session_state[ERR] = str(exc)
        return
    _undo_stack(name).append(item_id)
    st.query_params.pop("item", None)


def _undo(cs: CampaignStore, annotator: str, name: str) -> None:
    """Button callback: take back this session's last label and show its item again."""
    stack = _undo_stack(name)
    if not stack:
        return
    item_id = stack.pop()
    try:
        cs.undo(annotator, name, item_id)
    except StudioError as exc:
        st.session_state[ERR] = str(exc)
        return
    st.query_params["item"] = str(item_id)


def _show(item_id: int | None) -> None:
    """Button callback: show this item (Previous), or the next unjudged one (None)."""
    if item_id is None:
        st.query_params.pop("item", None)
    else:
        st.query_params["item"] = str(item_id)


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
    queue = cs.queue(annotator, name)
    done, total = sum(q.judged for q in queue), len(queue)
    st.progress(done / total if total else 1.0, text=f"{done} of {total} assigned items judged")
    ids = [q.item_id for q in queue]
    at = ids.index(item.item_id) if item is not None and item.item_id in ids else len(ids)
    if item is None:
        if not st.query_params.get("item"):
            st.success("Nothing left in your queue for this campaign." if total else
                       "Nothing is assigned to you in this campaign.")
            st.text(f"Queue of {annotator} (the name your login gives)")  # whose queue: as text, never markdown
        nav = st.columns(4)
        nav[0].button("Previous", key="campaign.prev", shortcut="P", on_click=_show,
                      args=(ids[at - 1] if at > 0 else None,), disabled=at == 0)
        nav[1].button("Undo", key="campaign.undo_btn", shortcut="U", on_click=_undo, args=(cs, annotator, name),
                      disabled=not _undo_stack(name))
    else:
        st.caption(f"Query {item.query_id} · item {item.item_id}"
                   + (" · you judged it: " + (LABELS.get(item.label, str(item.label)) if item.label is not None
                                              else f"can't judge ({item.cant_judge})") if item.judged else ""))
        st.text(item.query)
        st.caption("Candidate")
        st.text(item.doc_text)
        st.text_input("Rationale (optional)", key=f"campaign.rationale.{item.item_id}", max_chars=4000,
                      value=item.rationale or "")
        cols = st.columns(7)
        for col, (value, text) in zip(cols[:3], [(v, t) for v, t in LABELS.items() if v <= c.max_label]):
            col.button(text, key=f"campaign.label{value}", shortcut=str(value), on_click=_write,
                       args=(cs, annotator, name, item.item_id, value),
                       type="primary" if item.label == value else "secondary")
        with cols[3].popover("Can't judge"):
            st.text_input("Why not?", key=f"campaign.reason.{item.item_id}", max_chars=1000)
            st.button("Save: can't judge", key="campaign.cant", on_click=_write,
                      args=(cs, annotator, name, item.item_id, None))
        cols[4].button("Previous", key="campaign.prev", shortcut="P", on_click=_show,
                       args=(ids[at - 1] if at > 0 else None,), disabled=at == 0)
        cols[5].button("Next unjudged", key="campaign.next", shortcut="N", on_click=_show, args=(None,),
                       disabled=not st.query_params.get("item"))
        cols[6].button("Undo", key="campaign.undo_btn", shortcut="U", on_click=_undo, args=(cs, annotator, name),
                       disabled=not _undo_stack(name))
        st.caption("Keys: 0 / 1 / 2 label and move on · P previous · N next unjudged · U undo your last label. "
                   "Enter (or Esc) leaves the Rationale box. Your labels are saved on the server: "
                   "you can continue in any browser.")
    if queue:
        st.dataframe(pd.DataFrame({
            "item": [q.item_id for q in queue],
            "query": [q.query for q in queue],
            "candidate": [q.doc_text for q in queue],
            "your label": ["" if not q.judged else str(q.label) if q.label is not None else "can't judge"
                           for q in queue],
        }), hide_index=True, key="campaign.queue")
