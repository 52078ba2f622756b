"""Layers: per-layer discriminativeness (densetrans-cai2021.md Figures 1, 3) and Recall@k curves (Figure 6)."""
from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from core.errors import StudioError
from core.analysis.layers import NEGATIVE_SAMPLERS, query_layer_cosines
from core.registry import list_systems, supports
from ui.cache import LAYER_SOURCES, layer_curve, layer_curve_cached, layer_fn, recall_curve, system
from ui.nav import ensure_navigation
from ui.render import error, page_dataset
from ui.state import current_dataset

ensure_navigation()  # through app.py's grouped navigation, also on a first deep link
st.set_page_config(page_title="Layers · Question Retrieval Studio", page_icon="🔎", layout="wide")
st.title("Layers")
st.caption("Mean over dataset queries of |log cos(q, q⁺) − log cos(q, q⁻)| for each layer's representation "
           "(densetrans-cai2021.md Figures 1 and 3). Higher = the layer separates paraphrases from "
           "non-paraphrases better. MiniLM was pre-trained on data that includes Quora duplicates.")

ds_name = current_dataset()
ds = page_dataset(ds_name)
if not ds.qrels or ds.candidates:
    st.info("The layer analysis needs a question-retrieval dataset with paraphrase qrels (e.g. qqp-bimpm).")
    st.stop()

with st.sidebar:
    st.header("Sample")
    n = st.slider("Queries sampled", 20, 2000, 200, step=20, key="layers.n")
    negatives = st.selectbox("Negative q⁻", NEGATIVE_SAMPLERS, key="layers.negatives",
                             help="random: a uniformly drawn question outside q's cluster (default; the paper "
                                  "does not say) · bm25: the best BM25 hit outside the cluster (hard) · "
                                  "labelled: a question Quora labelled as not duplicate")
    seed = st.number_input("Seed", 0, 10_000, 13, key="layers.seed")
    chosen = st.multiselect("Representations", list(LAYER_SOURCES),
                            default=["MiniLM [CLS]", "MiniLM mean", "DenseTrans", "DenseTrans -AllDense"],
                            key="layers.sources")

COLORS = ["#1f6feb", "#8250df", "#d1242f", "#bf8700", "#1a7f37", "#0969da"]
fig = go.Figure()
notes = []
for color, label in zip(COLORS, chosen):
    curve = layer_curve_cached(label, ds_name, n, negatives, int(seed))
    if curve is None:  # computed here, with this session's own progress bar (never inside a st.cache_*)
        bar = st.progress(0.0, text=f"{label}: 0/{n} queries")
        try:
            curve = layer_curve(label, ds_name, n, negatives, int(seed),
                                progress=lambda f, m, bar=bar: bar.progress(min(1.0, f), text=m))
        except StudioError as exc:
            notes.append(f"{label}: {exc}")
            continue
        finally:
            bar.empty()
    x = list(range(curve.values.shape[0]))
    low, high = curve.quantiles()
    fig.add_trace(go.Scatter(x=x + x[::-1], y=list(high) + list(low[::-1]), fill="toself", fillcolor=color,
                             opacity=0.15, line=dict(width=0), hoverinfo="skip", showlegend=False))
    fig.add_trace(go.Scatter(x=x, y=curve.mean, name=label, mode="lines+markers", line=dict(color=color),
                             customdata=curve.signed_mean,
                             hovertemplate="layer %{x}: %{y:.3f} (signed log cos(q,q⁺) − log cos(q,q⁻): "
                                           "%{customdata:.3f})<extra>" + label + "</extra>"))
    if curve.clipped:
        notes.append(f"{label}: {curve.clipped} cosines ≤ 0.001 were clipped before the log")
st.caption("Layer 0 is the input layer: its [CLS] vector is the same for every question (token + position "
           "embedding only), so [CLS] curves start at 0 by construction. DenseTrans's layers are pooled the way "
           "its model was trained: the mean of the words in the quick and full profiles, [CLS] in the paper "
           "profile (BENCHMARKS.md, \"DenseTrans pooling\").")
fig.update_layout(xaxis_title="layer (0 = input embeddings)", yaxis_title="mean |log cos(q,q⁺) − log cos(q,q⁻)|",
                  height=430, margin=dict(l=10, r=10, t=40, b=10),
                  title=f"Discriminativeness per layer — {n} queries, {negatives} negatives; band = 25–75% of queries")
if fig.data:
    st.plotly_chart(fig, width="stretch")
for note in notes:
    st.info(note)

# ----------------------------------------------------------------------------- one query
st.subheader("One query through the layers")
default_query = st.session_state.get("compare.query") or (ds.display_query(next(iter(ds.queries))) if ds.queries else "")
query = st.text_input("Question", value=default_query, key="layers.query")
source = st.selectbox("Representation", chosen or list(LAYER_SOURCES), key="layers.one_source")
if query.strip():
    try:
        name = LAYER_SOURCES[source][0]
        retriever = system(name, ds_name, LAYER_SOURCES[source][1],
                           (("index", "flat"),) if name == "densetrans" else ())
        hits = retriever.search(query, 5)
        targets = {f"hit {i + 1}: {ds.display(d)[:60]}": ds.corpus[d] for i, d in enumerate(hits.doc_ids[:3])}
        qid = next((q for q, t in ds.queries.items() if ds.display_query(q) == query.strip()), None)
        if qid and ds.qrels.get(qid):
            para = sorted(ds.qrels[qid])[0]
            targets[f"paraphrase: {ds.display(para)[:60]}"] = ds.corpus[para]
        cos = query_layer_cosines(layer_fn(source, ds_name), query, targets)
        qfig = go.Figure([go.Scatter(y=v, name=k, mode="lines+markers") for k, v in cos.items()])
        qfig.update_layout(xaxis_title="layer", yaxis_title="cosine to the query", height=360,
                           margin=dict(l=10, r=10, t=30, b=10), legend=dict(orientation="h", y=-0.25))
        st.plotly_chart(qfig, width="stretch")
    except StudioError as exc:
        error(exc)

# ----------------------------------------------------------------------------- recall curves
st.subheader("Recall@k per system (Figure 6)")
split = "test" if "test" in ds.query_splits else "all"
retrievers = [s.name for s in list_systems("retriever") if supports(s, ds) and s.name != "tree-bert-cross"]
picked = st.multiselect("Systems", retrievers, default=[r for r in ("bm25",) if r in retrievers], key="layers.recall")
max_q = st.slider("Held-out queries", 100, 2000, 300, step=100, key="layers.recall_n")
rfig = go.Figure()
for name in picked:
    try:
        curve = recall_curve(name, ds_name, split, max_q)
    except StudioError as exc:
        st.info(f"{name}: {exc}")
        continue
    rfig.add_trace(go.Scatter(x=list(curve), y=list(curve.values()), name=name, mode="lines+markers"))
rfig.update_layout(xaxis_title="cutoff k", yaxis_title="Recall@k", xaxis_type="log", height=380,
                   margin=dict(l=10, r=10, t=30, b=10),
                   title=f"{split} queries, each removed from its own ranking")
if rfig.data:
    st.plotly_chart(rfig, width="stretch")
