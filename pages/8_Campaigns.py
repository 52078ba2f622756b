"""Campaigns (owners): create a judging campaign, assign work, follow progress per annotator and per
query, adjudicate only the conflicting items, agreement, and TREC qrels export with the rule named."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.errors import StudioError
from core.judging.campaign_pool import choose_queries, items_from_rankings, rank_pool
from core.data.trec import qrels_text
from core.judging.campaign_records import CampaignSpec, QuerySet
from core.judging.campaign_results import RULES, export_filename, rule_description
from core.judging.campaigns import CampaignStore
from core.judging.deletion import delete_campaign, delete_labels, plan_campaign, plan_labels
from core.judging.pooling import available_systems
from ui.auth import current_identity
from ui.budget_view import render_budget
from ui.nav import ensure_navigation
from ui.render import error, literal, page_dataset, page_judgment_store
from ui.state import current_dataset
from ui.system_picker import system_multiselect

ensure_navigation()  # through app.py's navigation; the login gate when login is configured
st.set_page_config(page_title="Campaigns · Question Retrieval Studio", page_icon="🔎", layout="wide")
st.title("Campaigns")

identity = current_identity()
if not identity.is_owner:
    st.info("Only the owners named in the configuration manage campaigns. Your queue is on the Annotate page.")
    st.stop()
actor = identity.name or ""
cs = CampaignStore(store=page_judgment_store())
ds = page_dataset(current_dataset())


def _lines(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(" ".join(line.split()) for line in text.replace(",", "\n").splitlines() if line.strip()))


with st.expander("New campaign", expanded=not cs.campaigns(actor)):
    with st.form("campaigns.create"):
        name = st.text_input("Name", max_chars=80)
        kind = st.radio("Queries", ["split", "list", "sample"], horizontal=True,
                        format_func={"split": "a split", "list": "a list of ids", "sample": "a seeded sample"}.get)
        split = st.selectbox("Split", ["test", "dev", "all", *[s for s in ds.query_splits if s not in ("test", "dev")]])
        ids = st.text_area("Query ids (list)", help="one per line or comma-separated")
        size = st.number_input("Sample size", 1, 10_000, 20)
        seed = st.number_input("Seed", 0, 2**31 - 1, 0)
        systems = system_multiselect("Pooled systems", available_systems(ds), default=available_systems(ds)[:2],
                                     help="never shown to annotators")
        depth = st.number_input("Pool depth (top k per system)", 1, 100, 10)
        overlap = st.number_input("Overlap r (annotators per item)", 1, 10, 2)
        team = st.text_area("Annotators (one per line; empty = open: anyone logged in claims queries)")
        owners = st.text_area("Other owners (one per line)")
        guidelines = st.text_area("Guidelines", "2 = same question, 1 = related, 0 = not the same")
        if st.form_submit_button("Create campaign", type="primary"):
            try:
                qs = QuerySet(kind, split=split, ids=_lines(ids), size=int(size), seed=int(seed))
                with st.spinner("Pooling the systems' top k…"):
                    rankings = rank_pool(ds, choose_queries(ds, qs), systems, int(depth))
                    items = items_from_rankings(ds, rankings, int(depth))
                c = cs.create(actor, CampaignSpec(name, ds.name, qs, tuple(systems), int(depth), int(overlap),
                                                  (actor, *_lines(owners)), _lines(team), guidelines=guidelines),
                              items)
                st.success(f"Campaign {literal(c.name)}: {c.items} items on {c.queries} queries.")
            except StudioError as exc:
                error(exc)

owned = [c.name for c in cs.campaigns() if actor in c.owners]
if not owned:
    st.info("You own no campaign yet: create one above, or with `python -m core campaign create`.")
    st.stop()
name = st.selectbox("Campaign", owned, key="campaigns.name")
c = cs.campaign(name)
st.caption(f"{literal(c.dataset)} · {literal(c.query_set.describe())} · {c.queries} queries, {c.items} items · "
           f"pool depth {c.depth} of {literal(', '.join(c.systems))} · overlap {c.overlap} · "
           + ("open roster" if c.open else f"annotators: {literal(', '.join(c.annotators))}"))
progress, assign, adjudicate, agreement, export, guide, remove = st.tabs(
    ["Progress", "Assign", "Adjudicate", "Agreement", "Export", "Guidelines", "Delete"])

with progress:
    prog = cs.progress(actor, name)
    st.progress(prog.complete / prog.items if prog.items else 1.0,
                text=f"{prog.complete} of {prog.items} items have their {c.overlap} ratings")
    st.dataframe(pd.DataFrame([{"annotator": a, "judged": d, "assigned": n} for a, (d, n) in prog.annotators.items()]),
                 hide_index=True, key="campaigns.by_annotator")
    st.dataframe(pd.DataFrame([{"query": q, **v} for q, v in prog.queries.items()]), hide_index=True,
                 key="campaigns.by_query")
    render_budget(cs, actor, name, c.queries)

with assign:
    queries = list(prog.queries)
    who = st.text_input("Annotator", key="campaigns.assign.who", max_chars=80)
    chosen = st.multiselect("Queries", queries, key="campaigns.assign.queries")
    replace = st.text_input("Hand over from (optional: their unjudged items move)", key="campaigns.assign.replace")
    if st.button("Assign", key="campaigns.assign.go"):
        try:
            n = cs.assign(actor, name, who, chosen, replace=replace.strip() or None)
            st.success(f"{n} item(s) assigned to {literal(who)}.")
        except StudioError as exc:
            error(exc)


def _decide(item_id: int) -> None:
    """Save callback: the owner's decision (refused without a choice), before the page is drawn again."""
    pick = st.session_state.get(f"campaigns.decide.{item_id}")
    if pick is None:
        st.session_state["campaigns.adjudicate.error"] = (f"Item {item_id}: choose a label before saving; "
                                                          "nothing was saved.")
        return
    why = st.session_state.get(f"campaigns.why.{item_id}") or None
    try:
        cs.adjudicate(actor, name, item_id, int(pick), rationale=why)
        st.toast(f"Item {item_id}: adjudicated {pick}")
    except StudioError as exc:
        st.session_state["campaigns.adjudicate.error"] = str(exc)


with adjudicate:
    if st.session_state.get("campaigns.adjudicate.error"):
        st.error(st.session_state.pop("campaigns.adjudicate.error"), icon="⚠️")
    conflicts = cs.conflicts(actor, name)
    decisions = {a.item_id: a for a in cs.adjudications(actor, name)}
    reasons: dict[int, dict[str, str]] = {}
    for lab in cs.labels(actor, name):
        if lab.rationale:
            reasons.setdefault(lab.item_id, {})[lab.annotator] = lab.rationale
    undecided = [k for k in conflicts if k.adjudicated is None]
    shown = st.radio("Show", ["undecided", "all"], horizontal=True, key="campaigns.adjudicate.filter",
                     format_func={"undecided": f"undecided ({len(undecided)})",
                                  "all": f"all conflicts ({len(conflicts)})"}.get)
    st.caption(f"{len(conflicts)} item(s) where the annotators disagree; only these are listed; "
               f"{len(conflicts) - len(undecided)} decided.")
    for k in undecided if shown == "undecided" else conflicts:
        saved = decisions.get(k.item_id)
        with st.container(border=True):
            st.caption(f"Query {literal(k.query_id)} · item {k.item_id}")
            st.text(k.query)
            st.text(k.doc_text)
            st.dataframe(pd.DataFrame([{"annotator": a, "label": v, "rationale": reasons.get(k.item_id, {}).get(a, "")}
                                       for a, v in k.labels.items()]), hide_index=True,
                         key=f"campaigns.conflict.{k.item_id}")
            cols = st.columns([2, 3, 1])
            cols[0].selectbox("Decision", list(range(c.max_label + 1)), key=f"campaigns.decide.{k.item_id}",
                              index=k.adjudicated, placeholder="undecided: choose a label")
            cols[1].text_input("Rationale (optional)", key=f"campaigns.why.{k.item_id}", max_chars=4000,
                               value=(saved.rationale or "") if saved is not None else "")
            cols[2].button("Save", key=f"campaigns.save.{k.item_id}", on_click=_decide, args=(k.item_id,))
            if saved is not None:
                st.caption(f"adjudicated: {saved.label}")
                if saved.rationale:
                    st.caption("saved rationale")
                    st.text(saved.rationale)

with agreement:
    res = cs.agreement(actor, name)

    def fmt(v: float | None) -> str:
        return "undefined" if v is None else f"{v:.3f}"

    st.caption(f"{res.items} items with two or more ratings; can't-judge counts as missing.")
    st.dataframe(pd.DataFrame(
        [{"measure": "Krippendorff's α (nominal)", "value": fmt(res.alpha_nominal), "items": res.items},
         {"measure": "Krippendorff's α (ordinal)", "value": fmt(res.alpha_ordinal), "items": res.items},
         {"measure": f"Fleiss' κ ({res.fleiss_raters} ratings per item)", "value": fmt(res.fleiss),
          "items": res.fleiss_items}]
        + [{"measure": f"Cohen's κ {p['pair']}", "value": fmt(p["kappa"]), "items": p["items"]} for p in res.cohen]),
        hide_index=True, key="campaigns.agreement")
    st.dataframe(pd.DataFrame([{"query": q, "items": v.items, "α nominal": fmt(v.alpha_nominal),
                                "α ordinal": fmt(v.alpha_ordinal)} for q, v in res.per_query.items()]),
                 hide_index=True, key="campaigns.agreement_by_query")

with export:
    rule = st.selectbox("Aggregation rule", RULES, key="campaigns.rule")
    threshold = (st.number_input("Threshold (mean rule)", 0.0, float(c.max_label), 1.0, 0.5, key="campaigns.threshold")
                 if rule == "mean" else 1.0)  # only the mean rule has a threshold
    qrels, skipped = cs.qrels(actor, name, rule, threshold)
    st.caption(f"Rule {rule_description(rule, threshold)}. {sum(len(v) for v in qrels.values())} labels on "
               f"{len(qrels)} queries; {skipped} item(s) without a usable label left out.")
    st.download_button("Download TREC qrels", qrels_text(qrels), file_name=export_filename(name, rule, threshold),
                       mime="text/plain", key="campaigns.download")

with guide:
    text = st.text_area("Guidelines of this campaign", c.guidelines, key="campaigns.guidelines")
    if st.button("Save guidelines", key="campaigns.guidelines.save"):
        try:
            cs.set_guidelines(actor, name, text)
            st.toast("Guidelines saved")
        except StudioError as exc:
            error(exc)

with remove:
    st.caption("Deleting cannot be undone. Each deletion asks for the name typed again and is kept in the audit "
               "(who, what, when, rows per table).")
    st.subheader("This campaign")
    try:
        plan = plan_campaign(cs, actor, name)
        st.text(f"Would delete {plan.describe()}. The store's own labels outside campaigns stay.")
        typed = st.text_input("Type the campaign's name to confirm", key="campaigns.delete.confirm", max_chars=80)
        if st.button("Delete this campaign", key="campaigns.delete.go", type="primary", disabled=typed.strip() != name):
            record = delete_campaign(cs, actor, name, confirm=typed)
            st.toast(f"Deleted {plan.describe()} (audited as {record.actor}).")
            st.rerun()
    except StudioError as exc:
        error(exc)
    st.subheader("An annotator's labels")
    people = cs.store.annotators()
    if not people:
        st.info("No annotator has labels in the store.")
    else:
        who = st.selectbox("Annotator", people, key="campaigns.delete_labels.who")
        only = st.selectbox("Datasets", ["every dataset", *cs.store.datasets()], key="campaigns.delete_labels.dataset")
        scope = None if only == "every dataset" else only
        try:
            plan = plan_labels(cs.store, who, scope)
            st.text(f"Would delete {plan.describe()}. Campaigns, queries and documents stay.")
            typed = st.text_input("Type the annotator's name to confirm", key="campaigns.delete_labels.confirm",
                                  max_chars=80)
            if st.button("Delete these labels", key="campaigns.delete_labels.go", type="primary",
                         disabled=typed.strip() != plan.target or plan.total == 0):
                delete_labels(cs.store, actor, who, scope, confirm=typed)
                st.success(f"Deleted {plan.describe()}.")
        except StudioError as exc:
            error(exc)
