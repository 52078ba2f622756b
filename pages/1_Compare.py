"""Compare: several systems side by side on one query (layout only; logic in core.compare)."""
from __future__ import annotations

import random

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core.compare import SystemChoice, compare, pooled_ids
from core.errors import StudioError
from core.registry import list_systems, supports
from ui.cache import dataset, system
from ui.render import build_banner, error
from ui.state import current_dataset

st.set_page_config(page_title="Compare · Question Retrieval Studio", page_icon="🔎", layout="wide")
st.title("Compare")

ds_name = current_dataset()
params = st.query_params
if params.get("dataset") and params.get("dataset") != ds_name:
    st.session_state["dataset"] = ds_name = params["dataset"]
try:
    ds = dataset(ds_name)
except Exception as exc:
    error(exc)
    st.stop()
build_banner(ds_name)

retrievers = [s.name for s in list_systems("retriever") if supports(s, ds)]
rerankers = [s.name for s in list_systems("reranker") if supports(s, ds)]
if not retrievers:
    st.info("This dataset is a reranking dataset (candidate lists); use the CLI `eval` for it.")
    st.stop()

# ----------------------------------------------------------------------------- query
if "compare.qid" not in st.session_state:
    st.session_state["compare.qid"] = params.get("qid") if params.get("qid") in ds.queries else None
    st.session_state["compare.query"] = (
        ds.display_query(st.session_state["compare.qid"]) if st.session_state["compare.qid"] else params.get("q", "")
    )

pending = st.session_state.pop("compare.pending_qid", None)
if pending in ds.queries:  # chosen by id below on the previous run: apply before the widgets exist
    st.session_state["compare.qid"] = pending
    st.session_state["compare.query"] = ds.display_query(pending)

left, right = st.columns([4, 1])
with right:
    st.write("")
    if st.button("🎲 Random query", width="stretch", help="a dataset query with known paraphrases"):
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
            st.warning(f"No query with id {pick!r} in {ds.name}.")

# ----------------------------------------------------------------------------- systems
with st.sidebar:
    st.header("Systems")
    chosen = st.multiselect("First-stage systems", retrievers, default=[r for r in ("bm25",) if r in retrievers],
                            key="compare.systems")
    chosen_rr = st.multiselect("Rerankers", rerankers, key="compare.rerankers")
    first_stage = st.selectbox("Rerank the top of", retrievers, key="compare.first_stage")
    depth = st.slider("Rerank depth", 5, 100, 20, step=5, key="compare.depth")
    k = st.slider("Top-k shown", 1, 50, 10, key="compare.k")
    with st.expander("Index knobs"):
        ann = st.selectbox("Dense index", ["flat", "ivfpq", "ivf", "hnsw"], index=1,
                           help="faiss index for DenseTrans / SDML / MiniLM; recall vs exact is shown per column")
        nprobe = st.slider("nprobe (IVF)", 1, 128, 10)
        ef = st.slider("efSearch (HNSW)", 8, 512, 64)
        beam = st.slider("Tree beam width", 1, 200, 20)
        branching = st.selectbox("Tree K", [5, 8, 10], index=1)

dense_opts = (("index", ann),) + ((("nprobe", nprobe),) if ann.startswith("ivf") else ()) + (
    (("efSearch", ef),) if ann == "hnsw" else ())
choices = []
for name in chosen:
    opts = dense_opts if name in ("densetrans", "sdml-cnn", "minilm") else ()
    if name == "tree-bert":
        opts = (("beam", beam), ("K", branching))
    choices.append(SystemChoice(name, options=opts))
choices += [SystemChoice(name, first_stage=first_stage, depth=depth) for name in chosen_rr]
labels = [c.label for c in choices]
baseline = st.sidebar.selectbox("Baseline for rank movement", ["(none)"] + labels, key="compare.baseline")

if not typed.strip():
    st.info("Type a question, or pick a random dataset query.")
    st.stop()
if not choices:
    st.info("Choose at least one system in the sidebar.")
    st.stop()


def _load(name, variant, options):
    return system(name, ds_name, variant, tuple(options))


def _user_labels(query: str) -> dict[str, int]:
    try:
        from ui.cache import judgment_labels  # provided by the Annotate feature
    except ImportError:
        return {}
    try:
        return judgment_labels(ds_name, qid, query)
    except Exception:
        return {}


try:
    result = compare(ds, typed, choices, _load, k=k, query_id=qid,
                     baseline=None if baseline == "(none)" else baseline, user_labels=_user_labels(typed))
except StudioError as exc:
    error(exc)
    st.stop()

if qid:
    st.caption(f"Dataset query `{qid}` — it is removed from its own ranking (ignore_identical_ids).")
    with st.expander(f"Known paraphrases ({len(result.known_paraphrases)})"):
        for text in result.known_paraphrases:
            st.text(f"• {text}")

# ----------------------------------------------------------------------------- columns
MARKS = "✅ relevant (qrels) · 👤 user label (0/1/2) · ▫️ unjudged · ◆ in every column · ◇ only here"
st.caption(MARKS)
n_ok = sum(r.ok for r in result.results)
cols = st.columns(len(result.results))
for col, res in zip(cols, result.results):
    with col:
        st.subheader(res.choice.label)
        if not res.ok:
            st.error(res.error, icon="⚠️")
            continue
        stats = [f"{1000 * res.ranking.seconds:.1f} ms"]
        for key in ("distance_computations", "pair_scorings"):
            if key in res.ranking.stats:
                stats.append(f"{res.ranking.stats[key]:,.0f} {key.replace('_', ' ')}")
        if res.recall_vs_exact is not None:
            stats.append(f"recall vs exact {res.recall_vs_exact:.0%}")
        st.caption(" · ".join(stats))
        if res.metrics:
            st.caption(" · ".join(f"{m.replace('precision@1', 'P@1')} {v:.2f}" for m, v in res.metrics.items()))
        rows = []
        for h in res.hits:
            mark = "✅" if (h.qrel or 0) > 0 else ("👤" + str(h.user_label) if h.user_label is not None else "▫️")
            if h.user_label is not None and (h.qrel or 0) > 0:
                mark = f"✅👤{h.user_label}"
            share = "◆" if h.shared_by == n_ok and n_ok > 1 else ("◇" if h.shared_by == 1 and n_ok > 1 else "")
            rows.append({"#": h.rank, "move": h.movement if result.baseline else "", "": mark + share,
                         "question": h.text, "score": h.score})
        frame = pd.DataFrame(rows)
        st.dataframe(frame, hide_index=True, width="stretch",
                     column_config={"score": st.column_config.NumberColumn(format="%.3f"),
                                    "question": st.column_config.TextColumn(width="large")})

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
    st.dataframe(pd.DataFrame([{"pair": f"{a} vs {b}", f"overlap@{k}": result.overlap[(a, b)],
                                "RBO": result.rbo[(a, b)]} for a, b in result.overlap]), hide_index=True)

# ----------------------------------------------------------------------------- judge these
if st.button("📝 Judge these", help="send the pooled results to the Annotate page"):
    queue = st.session_state.setdefault("annotate.queue", [])
    queue.append({"dataset": ds_name, "query_id": qid, "query": result.query, "pool": pooled_ids(result)})
    st.switch_page("pages/4_Annotate.py")
