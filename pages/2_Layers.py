"""Layers: per-layer discriminativeness (densetrans-cai2021.md Figures 1, 3) and Recall@k curves (Figure 6)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core.errors import StudioError
from core.analysis.layers import MEASURE_NAMES, MEASURES, NEGATIVE_SAMPLERS, bootstrap_ci, query_layer_cosines
from core.registry import default_first_stage, list_systems, supports
from core.serving.runner import SystemChoice, rank_one
from ui.background_loads import LoadingError, in_background, page_deadline, refresh_when_loaded
from ui.cache import (default_layer_sources, layer_curve, layer_curve_cached, layer_fn, layer_source, layer_sources,
                      memo, recall_curve, system)
from ui.nav import ensure_navigation
from ui.render import error, page_dataset
from ui.state import current_dataset
from ui.system_picker import system_multiselect

ensure_navigation()  # through app.py's grouped navigation, also on a first deep link
st.set_page_config(page_title="Layers · Question Retrieval Studio", page_icon="🔎", layout="wide")
st.title("Layers")
st.caption("How well each layer's representation separates a paraphrase q⁺ from a non-paraphrase q⁻ of the same "
           "question q (densetrans-cai2021.md Figures 1 and 3). Two measures: the AUC P(cos(q,q⁺) > cos(q,q⁻)) "
           "(no clipping, any pooling; 0.5 = no separation) and the paper's mean |log cos(q,q⁺) − log cos(q,q⁻)|, "
           "which has no value for a cosine ≤ 0: such triples are excluded and counted, not clipped. "
           "MiniLM was pre-trained on data that includes Quora duplicates.")

ds_name = current_dataset()
ds = page_dataset(ds_name)
if not ds.qrels or ds.candidates:
    st.info("The layer analysis needs a question-retrieval dataset with paraphrase qrels (e.g. qqp-bimpm).")
    st.stop()

with st.sidebar:
    st.header("Sample")
    measure = st.radio("Measure drawn", MEASURES, format_func=lambda m: MEASURE_NAMES[m], key="layers.measure",
                       help="AUC (default): the share of (positive pair, negative pair) combinations of the sample "
                            "where the positive pair has the higher cosine, ties ½. Paper's: Figures 1/3 of the "
                            "paper, over the triples whose two cosines are > 0 (the others are excluded; counts "
                            "in the table below).")
    n = st.slider("Queries sampled", 20, 2000, 200, step=20, key="layers.n")
    negatives = st.selectbox("Negative q⁻", NEGATIVE_SAMPLERS, key="layers.negatives",
                             help="random: a uniformly drawn question outside q's cluster (default; the paper "
                                  "does not say) · bm25: the best BM25 hit outside the cluster (hard) · "
                                  "labelled: a question Quora labelled as not duplicate")
    seed = st.number_input("Seed", 0, 10_000, 13, key="layers.seed")
    chosen = st.multiselect("Representations", layer_sources(),
                            default=default_layer_sources(ds_name),
                            key="layers.sources")

MEASURE_AXIS = {"auc": "AUC P(cos(q,q⁺) > cos(q,q⁻))", "paper": "mean |log cos(q,q⁺) − log cos(q,q⁻)| (cos > 0 only)"}
COLORS = ["#1f6feb", "#8250df", "#d1242f", "#bf8700", "#1a7f37", "#0969da"]
fig = go.Figure()
notes = []
curves = {}
until = page_deadline()  # the visit waits this long for new curves in all, then draws what is ready
for color, label in zip(COLORS, chosen):
    try:  # a curve not computed in this server yet: in the background, the page fills in (ui.background_loads)
        curve = in_background(("layer_curve", label, ds_name, n, negatives, int(seed)), label,
                              lambda p, label=label: layer_curve(label, ds_name, n, negatives, int(seed), progress=p),
                              lambda label=label: layer_curve_cached(label, ds_name, n, negatives, int(seed)),
                              until, doing="computing its curve")
    except LoadingError as exc:
        st.info(str(exc), icon="⏳")
        continue
    except StudioError as exc:
        notes.append(f"{label}: {exc}")
        continue
    curves[label] = curve
    paper = curve.paper
    x = list(range(curve.n_layers))
    y = [None if v != v else float(v) for v in curve.measure(measure)]  # NaN (every triple excluded) -> gap
    fig.add_trace(go.Scatter(
        x=x, y=y, name=label, mode="lines+markers", line=dict(color=color),
        customdata=[[int(e), 100 * float(s), float(g)] for e, s, g in
                    zip(paper.excluded, paper.excluded_share, paper.signed_mean)],
        hovertemplate="layer %{x}: %{y:.3f}<br>excluded from the paper's measure (a cosine ≤ 0): %{customdata[0]} "
                      f"of {curve.n_triples} triples (%{{customdata[1]:.1f}}%)<br>paper's signed mean "
                      "log cos(q,q⁺) − log cos(q,q⁻): %{customdata[2]:.3f}<extra>" + label + "</extra>"))
    if paper.excluded.any():
        notes.append(f"{label}: the paper's measure excluded {int(paper.excluded.sum())} triples in all "
                     f"(per layer: {', '.join(str(int(e)) for e in paper.excluded)} of {curve.n_triples}) "
                     "whose cosine to q⁺ or q⁻ is ≤ 0 (no log)")
st.caption("Layer 0 is the input layer: its [CLS] vector is the same for every question (token + position "
           "embedding only), so [CLS] curves start at AUC 0.5 and a paper gap of 0 by construction. DenseTrans's "
           "layers are pooled the way its model was trained: the mean of the words in the quick and full profiles, "
           "[CLS] in the paper profile (BENCHMARKS.md, \"DenseTrans pooling\").")
fig.update_layout(xaxis_title="layer (0 = input embeddings)", yaxis_title=MEASURE_AXIS[measure],
                  height=430, margin=dict(l=10, r=10, t=40, b=10),
                  title=f"{MEASURE_NAMES[measure]} — {n} queries, {negatives} negatives")
if measure == "auc":
    fig.add_hline(y=0.5, line=dict(color="#8c959f", dash="dot"))
st.subheader(f"Drawn: {MEASURE_NAMES[measure]}")
if fig.data:
    st.plotly_chart(fig, width="stretch")
for note in notes:
    st.info(note)

if curves:
    st.markdown("**Per layer: both measures and the triples the paper's measure excluded**")
    rows = []
    for label, curve in curves.items():
        paper = curve.paper
        for layer in range(curve.n_layers):
            rows.append({"representation": label, "layer": layer, "AUC": float(curve.auc[layer]),
                         "paper |Δ log cos|": float(paper.mean[layer]),
                         "excluded (cos ≤ 0)": int(paper.excluded[layer]),
                         "excluded %": round(100 * float(paper.excluded_share[layer]), 1),
                         "triples": curve.n_triples})
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")

# DenseTrans against its −AllDense ablation (Figure 3): paired bootstrap over the same triples
A, B = "DenseTrans", "DenseTrans -AllDense"
if A in curves and B in curves:
    st.subheader("DenseTrans − (−AllDense) per layer, 95% paired bootstrap CI (Figure 3)")
    key = (ds_name, n, negatives, int(seed), curves[A].digest, curves[B].digest, curves[A].n_layers)

    def _cis():  # once per process for these curves (a later visitor reuses it)
        try:
            return {m: bootstrap_ci(curves[A], m, curves[B], n_resamples=1000, seed=int(seed)) for m in MEASURES}
        except StudioError as exc:
            return exc

    cis = memo("layers_ci", key, _cis)
    if isinstance(cis, StudioError):
        error(cis)
    else:
        ci = cis[measure]
        x = list(range(len(ci.estimate)))
        num = lambda a: [None if v != v else float(v) for v in a]  # noqa: E731
        dfig = go.Figure([
            go.Scatter(x=x + x[::-1], y=num(ci.high) + num(ci.low)[::-1], fill="toself", fillcolor="#d1242f",
                       opacity=0.15, line=dict(width=0), hoverinfo="skip", name="95% CI"),
            go.Scatter(x=x, y=num(ci.estimate), name="DenseTrans − (−AllDense)", mode="lines+markers",
                       line=dict(color="#d1242f"), customdata=list(zip(num(ci.low), num(ci.high))),
                       hovertemplate="layer %{x}: %{y:.3f} [%{customdata[0]:.3f}, %{customdata[1]:.3f}]"
                                     "<extra></extra>"),
        ])
        dfig.add_hline(y=0.0, line=dict(color="#8c959f", dash="dot"))
        dfig.update_layout(xaxis_title="layer", yaxis_title=f"difference in {MEASURE_AXIS[measure]}", height=360,
                           margin=dict(l=10, r=10, t=30, b=10),
                           title=f"{ci.n_resamples} resamples of the {n} queries (seed {ci.seed}); band = 95% CI")
        st.plotly_chart(dfig, width="stretch")
        st.dataframe(pd.DataFrame([
            {"measure": MEASURE_NAMES[m], "layer": layer, "DenseTrans − (−AllDense)": float(c.estimate[layer]),
             "95% CI low": float(c.low[layer]), "95% CI high": float(c.high[layer]),
             "CI excludes 0": bool(c.low[layer] > 0 or c.high[layer] < 0)}
            for m, c in cis.items() for layer in range(len(c.estimate))]), hide_index=True, width="stretch")
elif A in chosen or B in chosen:
    st.info("The confidence band for DenseTrans against −AllDense needs both built and selected.")

# ----------------------------------------------------------------------------- one query
st.subheader("One query through the layers")
default_query = st.session_state.get("compare.query") or (ds.display_query(next(iter(ds.queries))) if ds.queries else "")
query = st.text_input("Question", value=default_query, key="layers.query")
source = st.selectbox("Representation", chosen or layer_sources(), key="layers.one_source")
if query.strip():
    try:
        name, variant, options = layer_source(source)
        retriever = system(name, ds_name, variant, options, background=until)
        qid = next((q for q, t in ds.queries.items() if ds.display_query(q) == query.strip()), None)
        if ds.candidates and qid not in ds.candidates:  # a candidate list ranks a dataset question's own answers
            raise StudioError(f"{ds_name} ranks each question's own answers: type or pick one of its questions")
        hits = rank_one(SystemChoice(name, variant, options=options), ds, query, 5, query_id=qid,
                        load=lambda n, v=None, o=(): retriever)
        targets = {f"hit {i + 1}: {ds.display(d)[:60]}": ds.corpus[d] for i, d in enumerate(hits.doc_ids[:3])}
        if qid and ds.qrels.get(qid):
            para = sorted(ds.qrels[qid])[0]
            targets[f"paraphrase: {ds.display(para)[:60]}"] = ds.corpus[para]
        cos = query_layer_cosines(layer_fn(source, ds_name), query, targets)
        qfig = go.Figure([go.Scatter(y=v, name=k, mode="lines+markers") for k, v in cos.items()])
        qfig.update_layout(xaxis_title="layer", yaxis_title="cosine to the query", height=360,
                           margin=dict(l=10, r=10, t=30, b=10), legend=dict(orientation="h", y=-0.25))
        st.plotly_chart(qfig, width="stretch")
    except LoadingError as exc:
        st.info(str(exc), icon="⏳")
    except StudioError as exc:
        error(exc)

# ----------------------------------------------------------------------------- recall curves
st.subheader("Recall@k per system (Figure 6)")
split = "test" if "test" in ds.query_splits else "all"
# systems whose runs are too slow to store (seconds per query) are too slow for a curve over many queries too
retrievers = [s.name for s in list_systems("retriever") if supports(s, ds) and not s.not_stored]
picked = system_multiselect("Systems", retrievers, default=[r for r in (default_first_stage(),) if r in retrievers],
                        key="layers.recall")
max_q = st.slider("Held-out queries", 100, 2000, 300, step=100, key="layers.recall_n")
rfig = go.Figure()
for name in picked:
    try:
        curve = recall_curve(name, ds_name, split, max_q, until)
    except StudioError as exc:  # still computing (its line names the system), or it cannot be drawn
        st.info(str(exc) if isinstance(exc, LoadingError) else f"{name}: {exc}")
        continue
    rfig.add_trace(go.Scatter(x=list(curve), y=list(curve.values()), name=name, mode="lines+markers"))
rfig.update_layout(xaxis_title="cutoff k", yaxis_title="Recall@k", xaxis_type="log", height=380,
                   margin=dict(l=10, r=10, t=30, b=10),
                   title=f"{split} queries, each removed from its own ranking")
if rfig.data:
    st.plotly_chart(rfig, width="stretch")
refresh_when_loaded()  # what is still loading or computing: its progress, and the page redrawn when it is done
