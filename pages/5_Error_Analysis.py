"""Error analysis: metrics with Holm-corrected tests, per-query deltas, unjudged rates, buckets, agreement,
exports. Layout only: every number comes from ``core.analysis.error_analysis`` (the same code as
``python -m core compare``). Built systems' runs are the stored TREC runs the build writes
(``core.analysis.runs``); only what is missing or stale is computed here, behind a progress bar with counts."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

from core.judging.agreement import agreement
from core.analysis import LABEL_SOURCES
from core.analysis.compared_runs import RunData, import_run, imported_runs, run_from_dict
from core.analysis.error_analysis import (
    ANALYSIS_METRICS,
    analysis_from_values,
    per_query_rows,
    query_deltas,
    rows_to_csv,
)
from core.analysis.error_buckets import (
    length_bucket,
    metric_by_group,
    most_unjudged,
    pair_bucket_counts,
    query_buckets,
    unjudged_rate,
)
from core.analysis.label_sources import PRECEDENCE, label_set, qrels_label_set
from core.data.trec import qrels_text, run_text
from core.errors import NotReadyError, StudioError
from core.evaluation import DEFAULT_METRICS as ALL_METRICS
from core.evaluation import check_metrics
from core.judging.pooling import pool_choices
from core.analysis.runs import STORED_DEPTH, default_split, labels_digest, run_status, stored_per_query
from core.data.dataset_model import QUERY_FORMS
from core.judging.campaigns import CampaignStore
from core.system_notes import system_notes
from core.registry import display_name
from ui.auth import current_identity
from ui.cache import digest, imported_run, memo, per_query_values, stored_run_keys, stored_runs
from ui.nav import ensure_navigation
from ui.ppi_view import render_ppi
from ui.charts import delta_png
from ui.render import MISSING, error, page_dataset, page_judgment_store, system_problem
from ui.state import current_dataset
from ui.system_picker import system_multiselect

ensure_navigation()  # through app.py's grouped navigation, also on a first deep link
st.set_page_config(page_title="Error Analysis · Question Retrieval Studio", page_icon="🔎", layout="wide")
st.title("Error analysis")

ds_name = current_dataset()
ds = page_dataset(ds_name)
store = page_judgment_store()

# ----------------------------------------------------------------------------- choices
imported = imported_runs(ds.name)
with st.sidebar:
    st.header("Runs")
    upload = st.file_uploader("Import a TREC run file (qid Q0 docid rank score tag)", key="ea.upload")
    run_name = st.text_input("Name of the imported run", key="ea.upload_name")
    if upload is not None and st.button("Import run"):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "run.trec"
            path.write_bytes(upload.getvalue())
            try:
                name, _ = import_run(path, ds, run_name or Path(upload.name).stem)
                st.toast(f"Imported run {name}")
                imported = imported_runs(ds.name)
            except StudioError as exc:
                error(exc)

built = pool_choices(ds)
options = built + [f"run:{n}" for n in imported]
c1, c2, c3 = st.columns(3)
chosen = system_multiselect("Systems and imported runs", options, where=c1, default=options[:3], key="ea.systems")
source = c2.radio("Labels", LABEL_SOURCES, index=0, key="ea.labels", horizontal=True,
                  help=f"dataset qrels, user judgments, or both: {PRECEDENCE}.")
c2.caption(f"With both: {PRECEDENCE}.")
annotators = None  # every annotator's judgments (majority vote on a pair several labelled)
if source in ("judgments", "both"):
    try:
        judges = sorted({j.annotator for j in store.judgments(ds.name)})
    except StudioError as exc:
        error(exc)
        judges = []
    if judges:
        picked_judges = c2.multiselect("Judgments of", judges, default=judges, key="ea.label_annotators",
                                       help="whose judgments count (several on one pair: majority vote)")
        annotators = None if set(picked_judges) == set(judges) else picked_judges
identity = current_identity()
campaign, rule = None, "majority"
if identity.is_owner:  # a judging campaign's qrels, rescored at once (judge -> rescore)
    try:
        cstore = CampaignStore(store=store)
        own = [c.name for c in cstore.campaigns(identity.name or "") if c.dataset == ds.name]
    except StudioError:
        own = []
    if own:
        campaign = c2.selectbox("…or a judging campaign's labels", ["(none)", *own], key="ea.campaign")
        campaign = None if campaign == "(none)" else campaign
        if campaign:
            rule = c2.radio("Aggregation rule", ["majority", "adjudicated"], key="ea.campaign_rule", horizontal=True,
                            help="majority of the annotators (ties: no label), or the owner's adjudication where "
                                 "there is one")
stat_test = c3.radio("Significance test", ["student", "fisher"], key="ea.test", horizontal=True,
                     format_func={"student": "paired t-test", "fisher": "randomization"}.get)
c4, c5, c6 = st.columns(3)
metrics = c4.multiselect("Metrics", sorted(set(ALL_METRICS) | set(ANALYSIS_METRICS)), default=list(ANALYSIS_METRICS),
                         key="ea.metrics")
splits = ["all", *ds.query_splits]
split = c5.selectbox("Query split", splits, index=splits.index(default_split(ds)), key="ea.split",
                     help="opens on the held-out test split where the dataset has one")
k = int(c6.number_input("Depth k of built-in systems", 10, 1000, STORED_DEPTH, key="ea.k",
                        help=f"stored runs hold the top {STORED_DEPTH}; a deeper k computes the runs here"))
query_form = "tokenized"
if ds.tokenized:
    query_form = c6.radio("Queries", QUERY_FORMS, key="ea.query_form", horizontal=True,
                          format_func={"tokenized": "as stored (tokenized)", "typed": "as people type them"}.get,
                          help="typed: each dataset query in its display form (\"stop my depression?\"), ranked here, "
                               "never from the stored runs; the gap to the stored form is then a number you can see")
if not chosen or not metrics:
    st.info("Pick at least one system (or imported run) and one metric.")
    st.stop()
baseline = st.selectbox("Baseline", chosen, key="ea.baseline")

try:
    if campaign:
        campaign_qrels, _skipped = cstore.qrels(identity.name or "", campaign, rule)
        split_ids = set(ds.split_queries(split)) if split != "all" else None
        labels = qrels_label_set(ds, {q: v for q, v in campaign_qrels.items()
                                      if split_ids is None or q in split_ids}, f"campaign {campaign} ({rule})")
        source = f"campaign {campaign}, {rule} rule"
    else:
        labels = label_set(ds, store, source, split, annotators=annotators)
        if annotators is not None:
            source = f"{source} of {', '.join(annotators) or 'nobody'}"
    if not labels.queries:
        st.info(f"No query of the split {split!r} has relevance labels from this source: pick another split "
                "or source.")
        st.stop()
    systems = [name for name in chosen if not name.startswith("run:")]
    bar = st.progress(0.0, text=f"reading runs: 0 / {len(systems)} systems") if systems else None

    def _report(fraction: float, message: str) -> None:
        bar.progress(min(1.0, max(0.0, fraction)), text=message)

    computed, failed = {}, {}
    try:
        for i, name in enumerate(systems):  # one system that cannot run is reported; the others are analysed
            try:
                (computed[name],) = stored_runs(ds_name, [name], labels.queries, k, progress=lambda f, m, i=i: _report(
                    (i + f) / len(systems), f"{m} · system {i + 1} / {len(systems)}"), query_form=query_form)
            except StudioError as exc:
                failed[name] = exc
    finally:
        if bar is not None:
            bar.empty()
    for name, why in failed.items():
        system_problem(name, str(why), isinstance(why, NotReadyError), "Left out")
    chosen = [name for name in chosen if name not in failed]
    if not chosen:
        st.stop()
    if baseline in failed:
        baseline = chosen[0]
    # per-query metrics are kept per run fingerprint and labels: a widget that changes neither reuses them
    run_keys = stored_run_keys(ds_name, list(computed), labels.queries, k, query_form)
    for name in chosen:
        if name.startswith("run:"):
            run_keys[name], computed[name] = imported_run(imported[name[4:]], name)
    labels_key = digest([labels.source, labels.qrels])
    qrels_digest = labels_digest(labels.qrels)

    def _stored(name: str):
        return None if name.startswith("run:") or query_form != "tokenized" else \
            stored_per_query(ds, name, labels.qrels, k, qrels_digest)

    values = {name: per_query_values(run_keys[name], name, lambda name=name: computed[name], labels.qrels, labels_key,
                                     check_metrics(metrics), stored=lambda name=name: _stored(name))
              for name in chosen}
    res = memo("ea.analysis", (tuple(run_keys[n] for n in chosen), labels_key, tuple(metrics), stat_test, baseline),
               lambda: analysis_from_values(labels, chosen, values, baseline, metrics, stat_test))
    runs = [RunData(name, computed[name]) for name in chosen]
    judged_key = digest(labels.judged)
except StudioError as exc:
    error(exc)
    st.stop()

note = " Each query is removed from its own ranking." if ds.ignore_identical_ids else ""
if query_form == "typed":
    note += " Queries ranked as people type them (their display form)."
st.caption(f"{res.queries:,} queries with a relevant label ({source} labels). Tests against {baseline}: "
           f"{'paired t-test' if stat_test == 'student' else 'randomization test (1000 permutations, seed 42)'}, "
           f"Holm-corrected over {max(0, len(res.systems) - 1)} system(s).{note} Score ties: {res.tie_rule}, "
           "the rule `python -m core eval` uses by default.")
# two narrow tables instead of one as wide as 1 + 4 columns per metric: the means, then one row per system and metric
# for the tests (metric names are cells, never clipped headers)
shown = res.display_table()
st.dataframe(pd.DataFrame([{k: row[k] for k in ("system", *res.metrics)} for row in shown]), hide_index=True,
             key="ea.table", width="stretch", placeholder=MISSING,
             column_config={"system": st.column_config.TextColumn(width="medium", pinned=True)})
tests = [{"system": row["system"], "metric": m, "p": row[f"{m} p"], "p (Holm)": row[f"{m} p (Holm)"],
          "W/T/L": row[f"{m} W/T/L"]} for row in shown if row["system"] != res.baseline for m in res.metrics]
if tests:
    st.dataframe(pd.DataFrame(tests), hide_index=True, key="ea.tests", width="stretch", placeholder=MISSING,
                 column_config={"system": st.column_config.TextColumn(width="medium")})
    st.caption(f"Tests against the baseline, {res.baseline}. p: three decimals down to 0.001, scientific notation "
               "below, \"< 1e-10\" under that.")
what = [f"{n} = {display_name(n)}" for n in chosen if not n.startswith("run:") and display_name(n).lower() != n.lower()]
if what:
    st.caption("What runs: " + "; ".join(what) + ".")
for name in chosen:
    for note in system_notes(ds, name):
        st.caption(f"⚠️ {note}")
sources = {name: run_status(ds, *(name.split("@", 1) if "@" in name else (name, None))) for name in computed
           if not name.startswith("run:")}  # an imported run is not stored by the build
live = [n for n, state in sources.items() if state != "fresh" or query_form == "typed"]
st.caption("Runs: stored by the build" + (f"; computed here (no fresh stored run): {', '.join(live)}" if live else "")
           + (f"; imported: {', '.join(n[4:] for n in chosen if n.startswith('run:'))}"
              if any(n.startswith("run:") for n in chosen) else "") + ".")

if campaign:
    render_ppi(cstore, identity.name or "", campaign, rule, [run_from_dict(r.data, r.name) for r in runs], res.metrics)

# lazy tabs: only the open tab is computed and sent (the browser draws one tab's charts and tables, not five)
tab_q, tab_j, tab_b, tab_a, tab_x = st.tabs(["Per query", "Unjudged", "Buckets", "Agreement", "Export"], key="ea.tab",
                                            on_change="rerun")


# ----------------------------------------------------------------------------- per-query deltas
@st.fragment
def per_query_tab() -> None:
    """The Δ curve, its rank slider and the query list: their widgets rerun only this part of the page."""
    others = [s for s in res.systems if s != baseline]
    if not others:
        st.info("Pick a second system to see per-query differences against the baseline.")
    else:
        a, b = st.columns(2)
        sys_pick = a.selectbox("System", others, key="ea.delta_system")
        metric = b.selectbox("Metric", res.metrics, key="ea.delta_metric")
        deltas = query_deltas(res, sys_pick, metric)
        wtl = res.win_tie_loss[sys_pick][metric]
        w, t, l_ = st.columns(3)
        w.metric("Wins", wtl["W"])
        t.metric("Ties", wtl["T"])
        l_.metric("Losses", wtl["L"])
        qids = [q for q, _ in deltas]
        n = len(qids)
        span = (1, n) if n < 2 else st.slider("Ranks listed below (1 = the largest gain)", 1, n, (1, n),
                                             key=f"ea.rank_span.{sys_pick}.{metric}.{n}")
        st.image(memo("ea.delta_png", (run_keys[sys_pick], run_keys[baseline], labels_key, metric, span),
                      lambda: delta_png([d for _, d in deltas], f"{metric}: {sys_pick} − {baseline}", span)),
                 width="stretch", alt=f"{metric} of {sys_pick} minus {baseline} per query, sorted: "
                                      f"{wtl['W']} wins, {wtl['T']} ties, {wtl['L']} losses")
        if span != (1, n):
            qids = qids[span[0] - 1:span[1]]
            st.caption(f"Ranks {span[0]:,}–{span[1]:,}: {len(qids):,} queries.")
        delta_of = dict(deltas)  # built once: the label of each of the (thousands of) options reads it
        open_q = st.selectbox("Query", qids, key="ea.open_q",
                              format_func=lambda q: f"{q} · Δ {delta_of[q]:+.3f}")
        st.text(labels.queries.get(open_q, ""))
        if st.button("Open on Compare", key="ea.open"):
            link = {"dataset": ds.name, **({"qid": open_q} if open_q in ds.queries else {"q": labels.queries[open_q]})}
            st.session_state["compare.open"] = dict(link)  # seeds Compare even if it was visited before
            st.switch_page("pages/1_Compare.py", query_params=link)


with tab_q:
    if tab_q.open:
        per_query_tab()

# ----------------------------------------------------------------------------- unjudged
with tab_j:
    if tab_j.open:
        depth = int(st.number_input("Top-k to check", 1, 100, 10, key="ea.unjudged_k"))
        qids = list(labels.qrels)
        rates = memo("ea.unjudged", (tuple(run_keys[r.name] for r in runs), judged_key, labels_key, depth),
                     lambda: [unjudged_rate(r, labels.judged, depth, qids) for r in runs])
        st.dataframe(pd.DataFrame([{"system": r.system, "top-k items": r.retrieved, "unjudged": r.unjudged,
                                    f"judged@{depth}": 1.0 - r.rate, "unjudged rate": r.rate} for r in rates]),
                     hide_index=True)
        todo = memo("ea.most_unjudged", (tuple(run_keys[r.name] for r in runs), judged_key, depth),
                    lambda: most_unjudged(runs, labels.judged, depth, limit=20))
        if todo:
            st.dataframe(pd.DataFrame([{"query_id": q, "unjudged in pool": n, "query": labels.queries.get(q, "")}
                                       for q, n, _ in todo]), hide_index=True)
            if st.button("Judge these on Annotate", key="ea.judge"):
                st.session_state["annotate.queue"] = [
                    {"dataset": ds_name, "query_id": q if q in ds.queries else None, "query": labels.queries[q],
                     "pool": {name.removeprefix("run:"): ids for name, ids in pool.items()}}
                    for q, _, pool in todo
                ]
                st.switch_page("pages/4_Annotate.py")

# ----------------------------------------------------------------------------- buckets
with tab_b:
    if tab_b.open:
        metric_b = st.selectbox("Metric", res.metrics, key="ea.bucket_metric")
        buckets = memo("ea.buckets", (ds_name, labels_key, digest(labels.queries)),
                       lambda: query_buckets(labels.qrels, labels.queries, ds.corpus))
        st.caption("Hard / easy / middle by word Jaccard of query and positives (frm-multiview-chong.md §4.2): "
                   "a query is hard if all its positives have Jaccard ≤ 0.2, easy if all ≥ 0.7, else middle.")
        st.dataframe(pd.DataFrame(metric_by_group(res, metric_b, buckets, ["hard", "middle", "easy"])), hide_index=True)
        counts = memo("ea.pair_buckets", (ds_name, judged_key, digest(labels.queries)),
                      lambda: pair_bucket_counts(labels.judged, labels.queries, ds.corpus))
        st.dataframe(pd.DataFrame([{"bucket": b, **c} for b, c in counts.items()]), hide_index=True)
        lengths = memo("ea.lengths", (ds_name, digest(labels.queries)),
                       lambda: {q: length_bucket(t) for q, t in labels.queries.items()})
        st.caption("Metric by query length (words)")
        order = ["1-5", "6-10", "11-15", "16-20", "21+"]
        st.dataframe(pd.DataFrame(metric_by_group(res, metric_b, lengths, order)), hide_index=True)

# ----------------------------------------------------------------------------- agreement
with tab_a:
    if tab_a.open:
        judgments = store.judgments(ds.name)
        names = sorted({j.annotator for j in judgments})
        pick = st.multiselect("Annotators", names, default=names, key="ea.annotators")
        agr = agreement(judgments, pick, store.max_label)
        if agr.kappa is None:
            st.info("Agreement needs two or more annotators who labelled the same items.")
        else:
            label = "Cohen's κ" if agr.method == "cohen" else "Fleiss' κ"
            st.metric(label, f"{agr.kappa:.3f}", help=f"over {agr.items} items labelled by every chosen annotator; "
                                                       f"raw agreement {agr.observed:.1%}")
        if agr.disagreements:
            st.caption(f"{len(agr.disagreements)} disagreement(s) to resolve")
            st.dataframe(pd.DataFrame(agr.disagreements), hide_index=True)

# ----------------------------------------------------------------------------- export
with tab_x:
    if tab_x.open:
        # files are written when their button is clicked (callables), never on a rerun that does not download them
        st.download_button("User judgments (TREC qrels)", lambda: qrels_text(store.qrels(ds.name)),
                           file_name="judgments.qrels", key="ea.dl_qrels")
        metric_x = res.metrics[0]
        st.download_button(f"Per-query {metric_x} (CSV)",
                           lambda: rows_to_csv(per_query_rows(res, metric_x, labels.queries)),
                           file_name="per_query.csv", key="ea.dl_csv")
        st.download_button("Metrics table (CSV)", lambda: rows_to_csv(res.table()), file_name="metrics.csv",
                           key="ea.dl_table")
        for run in runs:
            st.download_button(f"Run {run.name} (TREC)", lambda run=run: run_text(run.to_dict(), run.name),
                               file_name=f"{run.name.replace(':', '_')}.trec", key=f"ea.dl_run.{run.name}")

