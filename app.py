"""Question Retrieval Studio — home: dataset, collection statistics, which systems are ready."""
from __future__ import annotations

import os

import pandas as pd
import streamlit as st

import core  # noqa: F401  (offline guards)
from core.build import read_status, start_background_build
from core.data import list_datasets
from core.registry import list_systems, supports
from ui.cache import dataset
from ui.render import build_banner, error
from ui.state import DATASET_KEY, current_dataset

st.set_page_config(page_title="Question Retrieval Studio", page_icon="🔎", layout="wide")


@st.cache_resource
def _autostart_build(name: str) -> bool:
    """Start the default build once per server process (``QRS_AUTOBUILD=0`` disables it)."""
    if os.environ.get("QRS_AUTOBUILD", "1") == "0":
        return False
    return start_background_build(name)


st.title("🔎 Question Retrieval Studio")
st.caption("Similar-question retrieval: find paraphrases of a question in an archive, "
           "compare first-stage rankers and rerankers, judge results, analyse errors.")

names = list(list_datasets())
current = current_dataset()
if current not in names:
    names.append(current)
choice = st.selectbox("Dataset", names, index=names.index(current), key="home.dataset",
                      help="Bundled: QQP (BiMPM dev+test) and TrecQA. Import your own with "
                           "`python -m core data import`.")
if choice != current:
    st.session_state[DATASET_KEY] = choice
    st.rerun()

try:
    ds = dataset(current)
except Exception as exc:  # a broken imported dataset must not break the home page
    error(exc)
    st.stop()

_autostart_build(current)
build_banner(current)
st.text(ds.description)

stats = ds.stats()
cols = st.columns(4)
cols[0].metric("Collection", f"{stats['collection']:,}")
cols[1].metric("Queries", f"{stats['queries']:,}")
cols[2].metric("Judged pairs (qrels)", f"{stats['judged pairs (qrels)']:,}")
cols[3].metric("Query splits", ", ".join(ds.query_splits) or "—")
with st.expander("All statistics"):
    st.dataframe(pd.DataFrame(list(stats.items()), columns=["what", "count"]), hide_index=True)

st.subheader("Systems")
rows = []
for spec in list_systems():
    if not supports(spec, ds):
        continue
    status = read_status(ds, spec)
    icon = {"ready": "✅", "building": "⏳", "queued": "🕒", "failed": "❌"}.get(status.state, "▫️")
    rows.append({"system": spec.name, "kind": spec.kind, "status": f"{icon} {status.state}",
                 "progress": status.progress, "paper": spec.paper})
st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
             column_config={"progress": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0)})

st.subheader("Pages")
PAGES = [
    ("pages/1_Compare.py", "Compare", "run systems side by side on one query: rankings, scores, latency, agreement"),
    ("pages/2_Layers.py", "Layers", "per-layer discriminativeness of BERT and DenseTrans representations"),
    ("pages/3_Keywords.py", "Keywords", "FRM keyword importance, multi-level keyword sets, comparable pairs"),
    ("pages/4_Annotate.py", "Annotate", "judge pooled, blind results with the keyboard; labels go to SQLite"),
    ("pages/5_Error_Analysis.py", "Error analysis", "metrics, significance, per-query wins and losses"),
    ("pages/6_Models.py", "Models", "build status, configs, training metrics, build buttons"),
]
for path, label, what in PAGES:
    if os.path.exists(os.path.join(os.path.dirname(__file__), path)):
        st.page_link(path, label=f"**{label}** — {what}")
