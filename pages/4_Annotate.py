"""Annotate: pooled, blind, keyboard-first relevance judging; every label is committed at once.

With login configured the annotator is the logged-in user; a campaign's queue (``ui/campaign_judge.py``)
is picked at the top when the user has one. Only owners edit the guidelines when login is on. In
single-user mode the typed annotator name is kept for the browser session (also across pages: a widget's
own state is dropped when another page runs, so the name is kept under its own key). ``ui.keys`` keeps
the 0/1/2 keys working after the "Judge" picker and after typing a note or rationale.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.errors import NotReadyError, StudioError
from core.judging.campaigns import CampaignStore
from core.judging.judgments import default_url
from core.judging.pooling import build_pool, pool_choices
from core.retrieval.base import validate_query
from ui.auth import current_identity
from ui.cache import judgment_store, pool_ids
from ui.campaign_judge import judge_campaign
from ui.keys import judging_keys
from ui.nav import ensure_navigation
from ui.render import error, page_dataset, system_problem
from ui.state import current_dataset
from ui.system_picker import system_multiselect

ensure_navigation()  # through app.py's grouped navigation, also on a first deep link
st.set_page_config(page_title="Annotate · Question Retrieval Studio", page_icon="🔎", layout="wide")
st.title("Annotate")

QUEUE, POS, ITEM, UNDO = "annotate.queue", "annotate.pos", "annotate.item", "annotate.undo"
NAME, NAME_WIDGET = "annotate.name", "annotate.annotator"  # the kept name; the text box's own key
LABELS = {0: "0 · not the same", 1: "1 · related", 2: "2 · same question"}

ds_name = current_dataset()
ds = page_dataset(ds_name)
try:
    store = judgment_store(default_url())
except Exception as exc:
    error(exc)
    st.stop()
for key, value in ((QUEUE, []), (POS, 0), (ITEM, 0), (UNDO, [])):
    st.session_state.setdefault(key, value)

judging_keys()
identity = current_identity()
if identity.mode == "none":  # single-user mode: the name is typed (no login configured)
    if NAME_WIDGET not in st.session_state and st.session_state.get(NAME):
        st.session_state[NAME_WIDGET] = st.session_state[NAME]  # back on this page: the name typed before
    typed = st.text_input("Annotator", key=NAME_WIDGET, max_chars=80,
                          help="Your name; remembered for this browser session. Labels are stored per annotator.")
    annotator = store.check_annotator(typed) if typed.strip() else ""
    st.session_state[NAME] = annotator
    if annotator:
        st.text(f"{annotator}: {len(store.judgments(ds.name, [annotator]))} label(s) on {ds.name} so far")
else:  # with login, the annotator is the logged-in subject
    annotator = identity.name or ""
    st.caption("Annotator (logged in)")
    st.text(annotator)

with st.expander("Guidelines", expanded=False):
    st.text(store.guidelines(ds.name))
    if identity.is_owner:
        edited = st.text_area("Edit the guidelines of this dataset", store.guidelines(ds.name),
                              key="annotate.guidelines")
        if st.button("Save guidelines"):
            store.set_guidelines(ds.name, edited)
            st.toast("Guidelines saved")

campaigns = CampaignStore(store=store)
try:
    mine = [c.name for c in campaigns.campaigns(annotator)] if annotator else []
except StudioError as exc:
    error(exc)
    mine = []
if annotator and identity.mode != "none" and not mine:
    st.text(f"No judging campaign names {annotator} (the name your login gives); free judging below.")
if mine:
    work = st.radio("Judge", ["Free judging", *mine], key="annotate.work", horizontal=True,
                    help="A campaign's queue is kept on the server: continue in any browser.")
    if work != "Free judging":
        judge_campaign(campaigns, annotator, work)
        st.stop()

# ----------------------------------------------------------------------------- queue
with st.sidebar:
    st.header("Queue")
    systems = pool_choices(ds)
    chosen = system_multiselect("Pool systems", systems, default=systems[:3], key="annotate.systems",
                            help="The pool is the union of their top-k, shuffled; system names stay hidden.")
    k = st.number_input("Top-k per system", 1, 100, 10, key="annotate.k")
    split = st.selectbox("Dataset queries", ["all", *ds.query_splits], key="annotate.split")
    n_add = st.number_input("How many", 1, 500, 10, key="annotate.n")
    if st.button("Add dataset queries"):
        queued = {e.get("query_id") for e in st.session_state[QUEUE]}
        qids = [q for q in ds.split_queries(split) if q not in queued][: int(n_add)]
        st.session_state[QUEUE] += [{"dataset": ds_name, "query_id": q, "query": ds.queries[q], "pool": None}
                                    for q in qids]
    typed = st.text_input("Or type a query", key="annotate.typed")
    if st.button("Add typed query"):
        try:
            st.session_state[QUEUE] += [{"dataset": ds_name, "query_id": None, "query": validate_query(typed), "pool": None}]
        except StudioError as exc:
            error(exc)
    if st.button("Clear queue"):
        st.session_state[QUEUE], st.session_state[POS], st.session_state[ITEM] = [], 0, 0

queue = [e for e in st.session_state[QUEUE] if e.get("dataset") in (ds_name, ds.name)]
if not queue:
    st.info("The queue is empty: add dataset queries or a typed query in the sidebar, or send queries "
            "from the Compare or Error Analysis page.")
    st.stop()
pos = min(st.session_state[POS], len(queue) - 1)
entry = queue[pos]
query, qid = entry["query"], entry.get("query_id")


def _pool(entry: dict) -> list:
    if entry.get("pool"):
        rankings = {name: list(ids) for name, ids in entry["pool"].items()}
    else:
        rankings = {}
        for name in chosen:  # a pool system that cannot run is named and left out; the others still pool
            try:
                rankings[name] = pool_ids(name, ds_name, entry["query"], entry.get("query_id"), int(k))
            except StudioError as exc:
                system_problem(name, str(exc), isinstance(exc, NotReadyError), "Left out of the pool")
    exclude = [entry["query_id"]] if entry.get("query_id") and ds.ignore_identical_ids else []
    return build_pool(rankings, int(k), ds.name, entry["query"], exclude=exclude) if rankings else []


try:
    items = [i for i in _pool(entry) if i.doc_id in ds.corpus]
except Exception as exc:
    error(exc)
    st.stop()
labels = store.labels_for(annotator, ds.name, query) if annotator else {}

st.progress((pos + (len(labels) / len(items) if items else 1)) / len(queue),
            text=f"Query {pos + 1} of {len(queue)} · {sum(i.doc_id in labels for i in items)}/{len(items)} judged")
st.caption("Query" + (f" ({qid})" if qid else " (typed)"))
st.text(ds.display_query(qid) if qid in ds.queries else query)  # as people wrote it; the stored form is the models'
if not items:
    st.warning("No candidates for this query: pick pool systems in the sidebar (or build one).")
item_pos = min(st.session_state[ITEM], max(0, len(items) - 1))


def _move(step: int) -> None:
    """Next/previous item; past either end moves to the neighbouring query."""
    i = st.session_state[ITEM] + step
    if i >= len(items) and pos + 1 < len(queue):
        st.session_state[POS], st.session_state[ITEM] = pos + 1, 0
    elif i < 0 and pos > 0:
        st.session_state[POS], st.session_state[ITEM] = pos - 1, 0
    else:
        st.session_state[ITEM] = max(0, min(i, len(items) - 1))


def _label(label: int) -> None:
    if not items:
        return
    item = items[item_pos]
    try:
        note = st.session_state.get(f"annotate.note.{pos}.{item.doc_id}") or None
        result = store.set_label(annotator, ds.name, query, item.doc_id, ds.corpus[item.doc_id], label,
                                 query_id=qid, note=note, systems=item.systems)
    except StudioError as exc:
        st.session_state["annotate.error"] = str(exc)
        return
    if result.changed:
        st.session_state[UNDO].append({"pos": pos, "item": item_pos, "query": query, "doc": item.doc_id,
                                       "previous": result.previous, "query_id": qid, "systems": item.systems})
    _move(+1)


def _undo() -> None:
    if not st.session_state[UNDO]:
        return
    last = st.session_state[UNDO].pop()
    try:  # restores the previous label and its note (or removes a first label)
        store.undo(annotator, ds.name, last["query"], last["doc"])
    except StudioError as exc:
        st.session_state["annotate.error"] = str(exc)
        return
    st.session_state[POS], st.session_state[ITEM] = last["pos"], last["item"]


if st.session_state.get("annotate.error"):
    st.error(st.session_state.pop("annotate.error"), icon="⚠️")

if items:
    item = items[item_pos]
    current = labels.get(item.doc_id)
    st.caption(f"Candidate {item_pos + 1} of {len(items)}"
               + (f" · already judged: {LABELS[current]}" if current is not None else " · not judged yet"))
    st.text(ds.display(item.doc_id))
    st.text_input("Note (optional)", key=f"annotate.note.{pos}.{item.doc_id}", max_chars=4000)
    cols = st.columns(6)
    for col, (value, text) in zip(cols[:3], LABELS.items()):
        col.button(text, key=f"annotate.label{value}", shortcut=str(value), on_click=_label, args=(value,),
                   disabled=not annotator, type="primary" if current == value else "secondary")
    cols[3].button("Previous", key="annotate.prev", shortcut="P", on_click=_move, args=(-1,))
    cols[4].button("Next", key="annotate.next", shortcut="N", on_click=_move, args=(+1,))
    cols[5].button("Undo", key="annotate.undo_btn", shortcut="U", on_click=_undo, disabled=not st.session_state[UNDO])
    if not annotator:
        st.warning("Enter your annotator name to label.")
    st.caption("Keys: 0 / 1 / 2 label and move on · N next · P previous · U undo.")

    table = pd.DataFrame({
        "#": range(1, len(items) + 1),
        "judged": [LABELS.get(labels.get(i.doc_id), "") for i in items],
        "candidate": [ds.display(i.doc_id) for i in items],
    })
    st.dataframe(table, hide_index=True, key="annotate.pool")
