"""Compare: several systems side by side on one query (layout only; logic in core.analysis.compare)."""
from __future__ import annotations

import random
import time
from dataclasses import replace

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core.judging.case_tables import case_table, rows_csv, to_csv, to_latex, to_markdown, truncate
from core.judging.casestudy import figure_html, figure_image
from core.judging.compare_state import INDEXES, TREE_BRANCHING, CompareState, StateOptions, resolve_dataset
from core.analysis.compare import SystemChoice, compare, pooled_ids
from core.retrieval.fusion import FUSION_METHODS, parse_variant
from core.data.datasets import list_datasets
from core.data.pipeline import terms
from core.errors import StudioError
from core.evaluation import tie_note
from core.retrieval.base import validate_query
from core.judging.database import default_url
from core.transfer import applicable_systems, system_choices
from core.system_notes import system_notes
from core.registry import get_spec, list_systems, with_knob
from core.serving.loader import ServingDefaults, serving_defaults
from core.settings import settings
from ui.background_loads import page_deadline, refresh_when_loaded
from ui.cache import cached_loader, case_store, composite_system, judgment_labels, warm_evaluation
from ui.compare_view import (MARKS, MAX_SYSTEMS, RANK_WIDTH, aligned_table, detail_rows, layout, longest_cell, stacks,
                             summary_rows)
from ui.explain_view import render_why
from ui.nav import ensure_navigation
from ui.render import MISSING, error, literal, page_dataset, system_problem
from ui.state import current_dataset
from ui.system_picker import not_built, select_ready, system_multiselect, system_selectbox

FUSION = next(s.name for s in list_systems("retriever") if s.composite)  # the fused column (variant: parts, method)
TREES = with_knob("beam")  # the systems the tree knobs (beam, K) apply to
FUSION_LABELS = {"rrf": "RRF (reciprocal rank)", "combsum": "CombSUM (min-max)", "wsum": "weighted sum (min-max)"}

ensure_navigation()  # through app.py's grouped navigation, also on a first deep link
st.set_page_config(page_title="Compare · Question Retrieval Studio", page_icon="🔎", layout="wide")
st.title("Compare")

ds_name = current_dataset()
# The comparison lives in the URL: a link (first run of the session) or "Open in Compare" on the Case
# Studies page seeds the widgets; afterwards every change is written back to st.query_params.
# Each change of the link is a browser history entry (Streamlit pushes it); Back and Forward rerun the page with that
# entry's URL, which then differs from the link this page wrote last: the URL is the source again, as on a first run.
opened = st.session_state.pop("compare.open", None)
url_now = st.query_params.to_dict()
navigated = bool(url_now) and url_now != st.session_state.get("compare.url_state", url_now)
fresh = opened is not None or "compare.url_state" not in st.session_state or navigated
source = dict(opened) if opened is not None else (
    url_now if fresh else dict(st.session_state["compare.url_state"]))
fuse_link = source.pop("fuse", None)  # the fused column's name (Compare's own link parameter)
if fresh:
    wanted = resolve_dataset(source, list_datasets(), ds_name)
    if wanted != ds_name:
        st.session_state["dataset"] = ds_name = wanted
ds = page_dataset(ds_name)

# every applicable system, models trained on another dataset as SYSTEM@TRAINED_ON (core.transfer)
retrievers = system_choices(ds, "retriever")
rerankers = system_choices(ds, "reranker")
if ds.candidates:
    st.info("Candidate lists: every system ranks the chosen question's own candidates (pick a dataset question).")

# Compare's knobs start from the systems' serving defaults
tree_defaults = serving_defaults(TREES[0].name, ds) if TREES else ServingDefaults()
WIDGETS = {"compare.systems": "systems", "compare.rerankers": "rerankers", "compare.first_stage": "first_stage",
           "compare.depth": "depth", "compare.k": "k", "compare.index": "index", "compare.nprobe": "nprobe",
           "compare.ef": "ef_search", "compare.beam": "beam", "compare.tree_k": "tree_k"}
if fresh or any(key not in st.session_state for key in [*WIDGETS, "compare.query", "compare.baseline"]):
    seed, notes = CompareState.from_params(source, StateOptions.for_dataset(ds, list_datasets()), ds.display_query)
    for key, name in WIDGETS.items():
        if fresh or key not in st.session_state:
            value = getattr(seed, name)
            if value is None and name in ("beam", "tree_k"):  # the built tree's own settings
                value = getattr(tree_defaults, name)
            st.session_state[key] = list(value) if isinstance(value, tuple) else value
    if fresh or "compare.query" not in st.session_state:
        st.session_state["compare.qid"] = seed.query_id
        st.session_state["compare.query"] = seed.query
    if fresh or "compare.baseline" not in st.session_state:
        st.session_state["compare.baseline"] = seed.baseline or "(none)"
    if fresh:
        try:
            fused_seed = parse_variant(fuse_link) if fuse_link else None
        except StudioError as exc:
            fused_seed = None
            notes.append(f"fusion {fuse_link!r} ignored: {exc}")
        if fused_seed and all(name in retrievers and not v for name, v in fused_seed.parts):
            st.session_state["compare.fuse_parts"] = [name for name, _ in fused_seed.parts]
            st.session_state["compare.fuse_method"] = fused_seed.method
        else:
            st.session_state["compare.fuse_parts"] = []
        st.session_state["compare.url_notes"] = (notes, {**seed.to_params(), **({"fuse": fuse_link} if fused_seed else {})})
url_notes = st.container()

# ----------------------------------------------------------------------------- query
pending = st.session_state.pop("compare.pending_qid", None)
if pending in ds.queries:  # chosen by id below on the previous run: apply before the widgets exist
    st.session_state["compare.qid"] = pending
    st.session_state["compare.query"] = ds.display_query(pending)

left, right = st.columns([4, 1])
with right:
    st.write("")
    if st.button("🎲 Random query", width="stretch", help="a dataset question with known answers" if ds.candidates else "a dataset query with known paraphrases"):
        qid = random.Random().choice(list(ds.queries))
        st.session_state["compare.qid"] = qid
        st.session_state["compare.query"] = ds.display_query(qid)
with left:
    typed = st.text_input("Question", key="compare.query", placeholder="e.g. How can I stop my depression?")
qid = st.session_state.get("compare.qid")
if qid and typed != ds.display_query(qid):
    qid = st.session_state["compare.qid"] = None  # the user edited the text: a free query
with st.expander("Pick a dataset query by id"):
    pick = st.text_input("Query id", value=qid or "", placeholder=next(iter(ds.queries), ""))
    if pick and pick != qid:
        if pick in ds.queries:
            st.session_state["compare.pending_qid"] = pick
            st.rerun()
        else:
            st.warning(f"No query with id {literal(pick)} in {literal(ds.name)}.")

# ----------------------------------------------------------------------------- systems
ready = set(applicable_systems(ds))  # what ranks now; the rest is offered marked "not built"
for key in ("compare.systems", "compare.rerankers"):  # a link may name more than a picker takes
    if len(st.session_state.get(key) or []) > MAX_SYSTEMS:
        st.session_state[key] = list(st.session_state[key])[:MAX_SYSTEMS]
with st.sidebar:
    st.header("Systems")
    st.caption(f"Up to {MAX_SYSTEMS} first stages and {MAX_SYSTEMS} rerankers.")
    chosen = system_multiselect("First-stage systems", retrievers, key="compare.systems", ready=ready,
                                limit=MAX_SYSTEMS)
    st.button(f"Select all built (up to {MAX_SYSTEMS})", key="compare.select_ready", on_click=select_ready,
              args=("compare.systems", retrievers, ready, MAX_SYSTEMS))
    chosen_rr = system_multiselect("Rerankers", rerankers, key="compare.rerankers", ready=ready, limit=MAX_SYSTEMS)
    unbuilt = not_built([*retrievers, *rerankers], ready)
    if unbuilt:
        st.caption("Not built — build on the Models page or with `python -m core build --dataset "
                   f"{ds_name} --systems NAME`: " + ", ".join(unbuilt))
    first_stage = system_selectbox("Rerank the top of", retrievers, key="compare.first_stage")
    depth = st.slider("Rerank depth", 5, 100, step=5, key="compare.depth")
    k = st.slider("Top-k shown", 1, 50, key="compare.k")
    with st.expander("Index knobs"):
        ann = st.selectbox("Dense index", list(INDEXES), key="compare.index",
                           help="faiss index of the dense systems; 'auto' is each system's serving default (exact "
                                "below 1M vectors), what the evaluation and BENCHMARKS.md measure; for any other "
                                "index the column shows its recall against exact search")
        nprobe = st.slider("nprobe (IVF)", 1, 128, key="compare.nprobe")
        ef = st.slider("efSearch (HNSW)", 8, 512, key="compare.ef")
        beam = st.slider("Tree beam width", 1, 200, key="compare.beam")
        branching = st.selectbox("Tree K", list(TREE_BRANCHING), key="compare.tree_k")
    st.session_state.setdefault("compare.fuse_parts", [])
    with st.expander("Fusion (ranx)", expanded=bool(st.session_state["compare.fuse_parts"])):
        fuse_parts = system_multiselect("Fuse these first stages", [r for r in retrievers if not get_spec(r).composite],
                                    key="compare.fuse_parts",
                                    help="two or more: adds a fused column (ranx fuse of each part's top 100)")
        fuse_method = st.selectbox("Fusion method", FUSION_METHODS, key="compare.fuse_method",
                                   format_func=FUSION_LABELS.get)
    milvus_uri = settings().milvus_uri
    on_milvus = st.toggle("Also serve from Milvus", key="compare.milvus", disabled=not milvus_uri,
                          help=f"a second column per first stage (BM25 and the bi-encoders) served from {milvus_uri}"
                          if milvus_uri else "set QRS_MILVUS_URI to a Milvus server or cluster (README: Scale: Milvus)")

state = CompareState(ds_name, typed, qid, tuple(chosen), tuple(chosen_rr), first_stage, depth, k, None, ann, nprobe,
                     ef, None if beam == tree_defaults.beam else beam,
                     None if branching == tree_defaults.tree_k else branching)
choices = state.choices()
if on_milvus and milvus_uri:  # Milvus-served columns beside the faiss-served ones
    choices += [SystemChoice(c.name, c.variant, options=(("backend", "milvus"),)) for c in state.choices()
                if not c.first_stage and "@" not in c.name and get_spec(c.name).milvus_servable]
labels = [c.label for c in choices]  # baselines: the chosen systems (the fused column is compared against them)
fused = f"{'+'.join(fuse_parts)}:{fuse_method}" if len(fuse_parts) >= 2 else None
if fused:
    choices.append(SystemChoice(FUSION, variant=fused))
if st.session_state.get("compare.baseline") not in ["(none)"] + labels:
    st.session_state["compare.baseline"] = "(none)"
baseline = st.sidebar.selectbox("Baseline for rank movement", ["(none)"] + labels, key="compare.baseline")
state = replace(state, baseline=None if baseline == "(none)" else baseline)

# ----------------------------------------------------------------------------- URL sync
link = state.to_params()
if fused:
    link["fuse"] = fused
st.session_state["compare.url_state"] = link
if link != st.query_params.to_dict():
    st.query_params.from_dict(link)
notes, loaded = st.session_state.get("compare.url_notes") or ([], None)
if notes and link == loaded:
    with url_notes:
        st.warning("Some parts of the link were not valid; defaults are used for them:", icon="🔗")
        for note in notes:
            st.text(f"• {note}")
elif notes:
    st.session_state.pop("compare.url_notes", None)

if not typed.strip():
    st.info("Type a question, or pick a random dataset query.")
    st.stop()
if not choices:
    st.info("Choose at least one system in the sidebar.")
    st.stop()


def _user_labels(query: str) -> dict[str, int]:
    try:
        return judgment_labels(ds_name, qid, query)
    except StudioError as exc:  # an unreachable or foreign judgments database: say so, rank anyway
        st.caption(f"👤 user labels unavailable: {exc}")
        return {}


try:
    until = page_deadline()  # this run waits for first loads (systems, the evaluation) this long in all
    evaluation = warm_evaluation(ds_name) if qid else None
    result = compare(ds, typed, choices, cached_loader(ds_name, until=until), k=k, query_id=qid,
                     baseline=None if baseline == "(none)" else baseline, user_labels=_user_labels(typed),
                     metrics=evaluation is not None and evaluation.finished.wait(max(0.0, until - time.monotonic())))
except StudioError as exc:
    error(exc)
    st.stop()

if qid and ds.candidates:
    st.caption(f"Dataset question {literal(qid)} — every system ranks its own candidate answers.")
    with st.expander(f"Known answers ({len(result.known_paraphrases)})"):
        for text in result.known_paraphrases:
            st.text(f"• {text}")
elif qid:
    st.caption(f"Dataset query {literal(qid)} — it is removed from its own ranking (ignore_identical_ids).")
    with st.expander(f"Known paraphrases ({len(result.known_paraphrases)})"):
        for text in result.known_paraphrases:
            st.text(f"• {text}")

# ----------------------------------------------------------------------------- rankings side by side
# One aligned table (a row per rank, a column per system, wrapped question text with the marks) stays
# readable with one to eight systems at 1,400 px; st.dataframe renders every cell as plain text.
st.caption(MARKS)
for res in result.results:
    if not res.ok:
        system_problem(res.choice.label, res.error, res.not_ready)
    elif not res.ranking.doc_ids and not ds.candidates:  # a normal state: say why the column is empty
        words = terms(typed)
        st.info(f"{res.choice.label} found nothing: " + (
            f"none of the query's words as its tokenizer reads them ({', '.join(literal(w) for w in words[:8])}) occurs in "
            f"{ds_name}" if words else "its tokenizer finds no word in the query (e.g. a script it does not "
            "split, as Chinese for BM25)") + ".", icon="ℹ️")
refresh_when_loaded()  # systems this server has not loaded yet fill in when their background loads end
summary = summary_rows(result)
st.dataframe(pd.DataFrame(summary), hide_index=True, width="stretch", height="content", placeholder=MISSING,
             column_config={"ms": st.column_config.NumberColumn("ms", format="%.1f"),
                            "status": st.column_config.TextColumn("status", width="medium")})
if any(r.metrics for r in result.results if r.ok):
    st.caption(f"Per-query metrics against the dataset's qrels; {tie_note()}, as in `core eval` and Error Analysis.")
for r in result.results:
    full_name = r.choice.name + (f"@{r.choice.variant}" if r.choice.variant else "")
    for note in system_notes(ds, full_name):
        st.caption(f"⚠️ {note}")
if fused and any(r.ok and r.choice.name == FUSION for r in result.results):
    fuser = composite_system(FUSION, fused, ds_name)
    how = "parameters tuned on the dev split" if fuser.tuned else (
        f"untuned defaults; tune on dev with `python -m core train --system {FUSION} --variant {fused}`")
    over = "whole candidate list" if fuser.depth is None else f"top {fuser.depth}"
    st.caption(f"{FUSION}@{fused}: {FUSION_LABELS[fuse_method]} over each part's {over}, "
               f"{fuser.params or 'no parameters'} ({how}).")
ok = [r for r in result.results if r.ok]
for group in stacks(len(ok)):  # one aligned table, or balanced stacked tables past MAX_PER_TABLE systems
    table = aligned_table(result, group)
    size = layout(len(group), len(table), longest_cell(table))
    config = {"#": st.column_config.NumberColumn("#", width=RANK_WIDTH)}
    for label in table.columns[1:]:
        config[label] = st.column_config.TextColumn(label, width=size.column_width)
    st.dataframe(table, hide_index=True, width="stretch", height=size.height, row_height=size.row_height,
                 column_config=config)
if ok:
    with st.expander("Per system: ranks, movement, scores (sortable)"):
        for tab, res in zip(st.tabs([r.choice.label for r in ok]), ok):
            with tab:
                st.dataframe(detail_rows(res, len(ok), bool(result.baseline)), hide_index=True, width="stretch",
                             column_config={"#": st.column_config.NumberColumn(width="small"),
                                            "": st.column_config.TextColumn(width="small"),
                                            "score": st.column_config.NumberColumn(format="%.3f", width="small"),
                                            "question": st.column_config.TextColumn(width="large")})

# ----------------------------------------------------------------------------- why did it rank that?
if ok:
    with st.expander("Why did it rank that? Word importance for any row of any system"):
        try:
            why_query = validate_query(typed)
        except StudioError as exc:
            error(exc)
        else:
            why = render_why(result, ds, why_query, cached_loader(ds_name))
            if why is not None:  # kept for this query's case study (saved and exported with it)
                kept = st.session_state.setdefault("compare.why.kept", {})
                kept[(ds_name, typed, why.system, why.rank, why.doc_id)] = why

# ----------------------------------------------------------------------------- agreement
if len(result.rbo) >= 1:
    st.subheader("Agreement")
    names = [r.choice.label for r in result.results if r.ok]
    matrix = [[1.0 if a == b else result.rbo.get((a, b), result.rbo.get((b, a), 0.0)) for b in names] for a in names]
    fig = go.Figure(go.Heatmap(z=matrix, x=names, y=names, zmin=0, zmax=1, colorscale="Blues",
                               text=[[f"{v:.2f}" for v in row] for row in matrix], texttemplate="%{text}",
                               hovertemplate="%{y} vs %{x}: RBO %{z:.3f}<extra></extra>"))
    fig.update_layout(height=120 + 40 * len(names), margin=dict(l=10, r=10, t=30, b=10),
                      title=f"Rank-biased overlap of the top-{k} (p = 0.9)")
    st.plotly_chart(fig, width="stretch")
    chart_rows = [{"system": a, "vs": b, "rbo": v} for a, row in zip(names, matrix) for b, v in zip(names, row)]
    e1, e2, e3 = st.columns(3)
    e1.download_button("⬇️ Chart data (CSV)", rows_csv(chart_rows), "agreement-rbo.csv", "text/csv", on_click="ignore")
    if e2.checkbox("Prepare chart files (HTML, PNG, SVG)", key="compare.chart_files"):
        e2.download_button("⬇️ Chart (HTML, works offline)", figure_html(fig), "agreement-rbo.html", "text/html",
                           on_click="ignore")
        for fmt in ("png", "svg"):
            image = figure_image(fig, fmt)
            if image.data is not None:
                e3.download_button(f"⬇️ Chart ({fmt.upper()})", image.data, f"agreement-rbo.{fmt}", image.mime,
                                   on_click="ignore")
        if image.data is None:
            e3.caption(image.reason)
    st.dataframe(pd.DataFrame([{"pair": f"{a} vs {b}", f"overlap@{k}": result.overlap[(a, b)],
                                "RBO": result.rbo[(a, b)]} for a, b in result.overlap]), hide_index=True)

# ----------------------------------------------------------------------------- case study: save, export
st.subheader("Case study")
table = case_table(result, ds_name)
explained = tuple(e for (d, q, *_), e in st.session_state.get("compare.why.kept", {}).items()
                  if (d, q) == (ds_name, typed))
if explained:
    table = replace(table, explanations=explained)
    st.caption(f"This case study keeps {len(explained)} explained row(s) (“why”) in its save and exports.")
slug = (qid or "query").replace("/", "_")
with st.expander("Export this comparison (Markdown, LaTeX, CSV)"):
    cut = st.number_input("Cut questions at (characters; 0 = never)", 0, 1000, 80, step=10, key="compare.export_cut")
    mark = st.radio("LaTeX: ground-truth hits in", ["color", "bold"], horizontal=True, key="compare.export_mark")
    c1, c2, c3 = st.columns(3)
    c1.download_button("⬇️ Markdown", to_markdown(table, max_chars=cut or None), f"case-{slug}.md", "text/markdown",
                       on_click="ignore")
    c2.download_button("⬇️ LaTeX", to_latex(table, max_chars=cut or None, mark=mark), f"case-{slug}.tex",
                       "text/x-tex", on_click="ignore")
    c3.download_button("⬇️ CSV", to_csv(table), f"case-{slug}.csv", "text/csv", on_click="ignore")
    st.caption("Link to this comparison: copy the address bar (it holds dataset, query, systems, k and knobs).")

with st.form("compare.save_form", clear_on_submit=True):
    st.write("Save this comparison (the rankings and scores as shown, with the settings)")
    title = st.text_input("Title", max_chars=200, placeholder="default: the question", key="compare.save_title")
    note = st.text_area("Note", max_chars=4000, key="compare.save_note")
    author = st.text_input("Author", max_chars=80, key="compare.save_author",
                           placeholder=st.session_state.get("annotate.annotator") or "your name")
    if st.form_submit_button("💾 Save this comparison"):
        try:
            saved = case_store(default_url()).save(
                table, title or truncate(result.query, 120), author or st.session_state.get("annotate.annotator", ""),
                note, state.to_params())
            st.session_state["compare.saved"] = saved.id
        except StudioError as exc:
            error(exc)
saved_id = st.session_state.pop("compare.saved", None)
if saved_id:
    st.success(f"Saved as case study #{saved_id}.", icon="💾")
if st.button("📚 Saved case studies", help="reopen, rename, delete, export, re-run saved comparisons"):
    st.switch_page("pages/7_Case_Studies.py")

# ----------------------------------------------------------------------------- judge these
if st.button("📝 Judge these", help="send the pooled results to the Annotate page"):
    queue = st.session_state.setdefault("annotate.queue", [])
    queue.append({"dataset": ds_name, "query_id": qid, "query": result.query, "pool": pooled_ids(result)})
    st.switch_page("pages/4_Annotate.py")
