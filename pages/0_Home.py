"""Home: dataset, collection statistics, which systems are ready, what each page is for.

Run through the navigation in ``app.py`` (``streamlit run app.py``); AppTest may also run it alone.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

import core  # noqa: F401  (offline guards)
from core.build import read_status
from core.build_plan import build_missing, default_build_plan
from core.data.datasets import DEFAULT_DATASET, list_datasets
from core.settings import settings
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

if current == (settings().dataset or DEFAULT_DATASET):  # the server's own dataset only: choosing one never builds
    autostart_build(current)  # its missing default systems (QRS_AUTOBUILD); an up-to-date build is not re-run
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
plan = default_build_plan(ds)
st.caption(f"Default build: {len(plan.ready)} of {len(plan.ready) + len(plan.missing)} systems ready on {current}"
           + (f"; missing: {', '.join(plan.missing)}" if plan.missing else "; nothing to build") + ".")
if plan.missing and plan.running:
    st.caption("A build of this dataset is running; the table shows where it stands.")
elif plan.missing and st.button(plan.offer(), key="home.build"):
    if build_missing(ds):
        st.success(f"Started the background build of {len(plan.missing)} system(s); the table shows its progress.")

st.subheader("Pages")
for group, pages in GROUPS.items():
    st.caption(group.upper())
    for page in pages:
        if page.path != HOME.path:
            st.page_link(page.path, label=f"{page.title} — {page.what}", icon=page.icon)
