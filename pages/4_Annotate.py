"""Annotate: pooled, blind, keyboard-first relevance judging; every label is committed at once.

With login configured the annotator is the logged-in user; a campaign's queue (``ui/campaign_judge.py``)
is picked at the top when the user has one. Only owners edit the guidelines when login is on. In
single-user mode the typed annotator name is kept for the browser session (also across pages: a widget's
own state is dropped when another page runs, so the name is kept under its own key). Judging happens in the
judging panel (``ui.judging_panel``): it holds the current query's pooled candidates and the next query's,
answers 0/1/2 in the browser and sends each label with an idempotency key; ``ui.keys`` gives the focus back
after the "Judge" picker and the page's text boxes.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.errors import NotReadyError, StudioError
from core.judging.campaigns import CampaignStore
from core.judging.label_records import query_key
from core.judging.pooling import build_pool, pool_choices
from core.retrieval.base import validate_query
from ui.auth import current_identity
from ui.cache import pool_ids
from ui.campaign_judge import judge_campaign
from ui.judging_panel import PanelItem, judging_panel
from ui.keys import judging_keys
from ui.label_scopes import free_commit, free_scope
from ui.nav import ensure_navigation
from ui.render import error, page_dataset, page_judgment_store, system_problem
from ui.state import current_dataset
from ui.system_picker import system_multiselect

ensure_navigation()  # through app.py's grouped navigation, also on a first deep link
st.set_page_config(page_title="Annotate · Question Retrieval Studio", page_icon="🔎", layout="wide")
st.title("Annotate")

QUEUE, POS, ITEM = "annotate.queue", "annotate.pos", "annotate.item"
NAME, NAME_WIDGET = "annotate.name", "annotate.annotator"  # the kept name; the text box's own key
LABELS = {0: "not the same", 1: "related", 2: "same question"}

ds_name = current_dataset()
ds = page_dataset(ds_name)
store = page_judgment_store()
for key, value in ((QUEUE, []), (POS, 0), (ITEM, 0)):
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
else:  # with login, the annotator is the logged-in subject
    annotator = identity.name or ""
    st.caption("Annotator (logged in)")
    st.text(annotator)

COUNTS_EVERY = 2.0  # seconds between the counters' reads of the store (labels arrive through the endpoint too)


@st.fragment(run_every=COUNTS_EVERY)
def label_counts() -> None:
    """The annotator's counters read from the store (not from the page's last run), refreshed on their own."""
    if annotator:
        st.text(f"{annotator}: {len(store.judgments(ds.name, [annotator]))} label(s) on {ds.name} so far")


def delete_mine(plan) -> None:  # noqa: ANN001 - a DeletionPlan
    """The button's callback (before the page runs again, so every counter below reads the store after it)."""
    from core.judging.deletion import delete_labels

    try:
        record = delete_labels(store, annotator, annotator, ds.name, confirm=st.session_state.get(DELETE_CONFIRM))
    except StudioError as exc:
        st.session_state[DELETED] = ("error", str(exc))
    else:
        st.session_state[DELETED] = ("done", f"Deleted {plan.describe()}; audit: {record.actor} at "
                                              f"{record.at:%Y-%m-%d %H:%M:%S} UTC")


DELETE_CONFIRM, DELETED = "annotate.delete.confirm", "annotate.delete.outcome"
label_counts()
if annotator:
    with st.expander("Delete my labels on this dataset", expanded=DELETED in st.session_state):
        from core.judging.deletion import plan_labels

        outcome = st.session_state.pop(DELETED, None)
        if outcome and outcome[0] == "done":
            st.success(outcome[1])
        elif outcome:
            error(StudioError(outcome[1]))
        try:
            plan = plan_labels(store, annotator, ds.name)
        except StudioError as exc:
            error(exc)
        else:
            st.text(f"Would delete {plan.describe()} (audited, as `python -m core judgments delete` does).")
            st.text_input("Type your annotator name to confirm", key=DELETE_CONFIRM)
            st.button("Delete my labels", key="annotate.delete.go", type="primary", disabled=not plan.total,
                      on_click=delete_mine, args=(plan,))

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
    if identity.sees_rankings:  # owners and researchers (everyone in single-user mode) choose the pool
        chosen = system_multiselect("Pool systems", systems, default=systems[:3], key="annotate.systems",
                                    help="The pool is the union of their top-k, shuffled; system names stay hidden. "
                                         "Only owners and researchers choose them: annotators judge blind.")
        k = st.number_input("Top-k per system", 1, 100, 10, key="annotate.k")
    else:  # blind: an annotator never picks the systems (pooling one at a time would reveal which found what)
        chosen, k = systems[:3], 10
        st.caption("Blind judging: the pool's systems are chosen by the owners and researchers, not shown here.")
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
    if annotator:  # no items, but the browser's unsaved labels of this scope still reach the store (a restart)
        judging_panel("annotate.panel", scope=free_scope(ds.name, annotator), annotator=annotator, items=[],
                      commit=free_commit(store, ds.name, annotator), enabled=False, can_cant=True, labels=LABELS,
                      empty="The queue is empty.")
    st.stop()
pos = min(st.session_state[POS], len(queue) - 1)
keys = [query_key(e.get("query_id"), e["query"]) for e in queue]


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


def _panel_items(at: int) -> list[PanelItem]:
    """The pooled candidates of queue entry ``at`` (blind: the systems stay on the server, in ``ref``)."""
    entry = queue[at]
    query, qid = entry["query"], entry.get("query_id")
    labels = store.judgments(ds.name, [annotator], query) if annotator else []
    mine = {j.doc_id: j for j in labels}
    cant = store.cant_judged(ds.name, annotator, query) if annotator else {}  # doc id -> (reason, note)
    out = []
    for item in (i for i in _pool(entry) if i.doc_id in ds.corpus):
        uid = f"{keys[at]}|{item.doc_id}"
        j, c = mine.get(item.doc_id), cant.get(item.doc_id)
        shown = ds.display_query(qid) if qid in ds.queries else query  # as people wrote it (the models read query)
        out.append(PanelItem(uid, item.doc_id, keys[at], shown, ds.display(item.doc_id), j.label if j else None,
                             c[0] if c else None, j.note if j else c[1] if c else None, j is not None or c is not None,
                             {"query": query, "qid": qid, "doc": item.doc_id, "text": ds.corpus[item.doc_id],
                              "systems": dict(item.systems)}))
    return out


def _nav(value) -> None:
    """The panel went into another query (``group``) or past the loaded ones (``dir`` from ``from``)."""
    if value.get("group") in keys:
        st.session_state[POS] = keys.index(value["group"])
    elif value.get("dir") in (-1, 1) and value.get("from") in keys:
        st.session_state[POS] = max(0, min(len(queue) - 1, keys.index(value["from"]) + value["dir"]))


try:
    items = _panel_items(pos) + (_panel_items(pos + 1) if pos + 1 < len(queue) else [])  # the next query prefetched
except Exception as exc:
    error(exc)
    st.stop()
here = [i for i in items if i.group == keys[pos]]


@st.fragment(run_every=COUNTS_EVERY)
def query_progress() -> None:
    """This query's judged count from the store (a label sent by the panel counts at once, without a page run)."""
    entry = queue[pos]
    done = set()
    if annotator:
        done = {j.doc_id for j in store.judgments(ds.name, [annotator], entry["query"])}
        done |= set(store.cant_judged(ds.name, annotator, entry["query"]))
    judged = sum(i.id in done for i in here)
    st.progress((pos + (judged / len(here) if here else 1)) / len(queue),
                text=f"Query {pos + 1} of {len(queue)} · {judged}/{len(here)} judged")


query_progress()
if not here:
    st.warning("No candidates for this query: pick pool systems in the sidebar (or build one).")
if not annotator:
    st.warning("Enter your annotator name to label.")
start = next((i.uid for i in here if not i.judged), here[0].uid if here else None)
judging_panel("annotate.panel", scope=free_scope(ds.name, annotator), annotator=annotator, items=items,
              commit=free_commit(store, ds.name, annotator), start=start, enabled=bool(annotator), can_cant=True,
              labels=LABELS, group=keys[pos],
              status=f"Query {pos + 1} of {len(queue)}", more={"next": pos + 2 < len(queue), "prev": pos > 0},
              on_nav=_nav)
if here:
    st.dataframe(pd.DataFrame({
        "#": range(1, len(here) + 1),
        "judged": ["can't judge" if i.cant else f"{i.label} · {LABELS[i.label]}" if i.judged else "" for i in here],
        "candidate": [i.text for i in here],
    }), hide_index=True, key="annotate.pool")
