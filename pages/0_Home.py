"""Home: dataset, collection statistics, which systems are ready, what each page is for.

Run through the navigation in ``app.py`` (``streamlit run app.py``); AppTest may also run it alone.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

import core  # noqa: F401  (offline guards)
from core.build import read_status
from core.data.datasets import list_datasets
from core.registry import list_systems, supports
from ui.cache import autostart_build, dataset
from ui.nav import GROUPS, HOME, ensure_navigation
from ui.render import build_banner, error
from ui.state import DATASET_KEY, current_dataset

ensure_navigation()  # through app.py's grouped navigation, also on a first deep link
st.set_page_config(page_title="Home · Question Retrieval Studio", page_icon="🔎", layout="wide")


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

autostart_build(current)
build_banner(current)
st.text(ds.description)

stats = ds.stats()
cols = st.columns(4)
cols[0].metric("Collection", f"{stats['collection']:,}")
cols[1].metric("Queries", f"{stats['queries']:,}")
cols[2].metric("Judged pairs (qrels)", f"{stats['judged pairs (qrels)']:,}")
cols[3].metric("Query splits", f"{len(ds.query_splits)}")  # the names below: a metric's value is cut at its width
if ds.query_splits:
    st.caption("Query splits: " + ", ".join(f"{name} ({len(ids):,})" for name, ids in ds.query_splits.items()))
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
for group, pages in GROUPS.items():
    st.caption(group.upper())
    for page in pages:
        if page.path != HOME.path:
            st.page_link(page.path, label=f"{page.title} — {page.what}", icon=page.icon)
