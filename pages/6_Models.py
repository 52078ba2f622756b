"""Models: every system's build status, config, checkpoint size and training metrics; build buttons."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.build import build_log_tail, build_running, read_status, start_background_build
from core.models_info import artifact_size, system_config
from core.registry import list_systems, supports
from ui.render import page_dataset

st.set_page_config(page_title="Models · Question Retrieval Studio", page_icon="🔎", layout="wide")
st.title("Models")

ds = page_dataset()


@st.fragment(run_every=3)
def status_table() -> None:
    """Refreshes on its own every 3 s, without blocking other pages."""
    rows = []
    for spec in list_systems():
        if not supports(spec, ds):
            continue
        s = read_status(ds, spec)
        rows.append({"system": spec.name, "kind": spec.kind, "state": s.state, "progress": s.progress,
                     "message": s.message.splitlines()[-1][:120] if s.message else "",
                     "seconds": round(s.seconds, 1) if s.seconds else None,
                     "size (MB)": artifact_size(ds.name, spec.name) / 1e6,
                     "error": s.error})
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch",
                 column_config={"progress": st.column_config.ProgressColumn(min_value=0.0, max_value=1.0),
                                "size (MB)": st.column_config.NumberColumn(format="%.1f")})
    running = build_running(ds.name)
    st.caption("A build is running in the background." if running else "No build running.")
    log = build_log_tail(ds.name)
    if log:
        with st.expander("Build log (last lines)"):
            st.code(log, language=None)


status_table()

left, right = st.columns(2)
with left:
    profile = st.radio("Profile", ["quick", "paper"], horizontal=True,
                       help="quick: the default build (≤ 20 min on 2 CPU cores); paper: the papers' full recipes")
    if st.button("▶ Build everything not built yet", disabled=build_running(ds.name)):
        started = start_background_build(ds.name, profile)
        st.toast("Build started in the background." if started else "A build is already running.")
with right:
    names = [s.name for s in list_systems() if supports(s, ds)]
    pick = st.selectbox("Build one system", names)
    if st.button(f"▶ Build {pick}", disabled=build_running(ds.name)):
        start_background_build(ds.name, profile, systems=[pick])
        st.toast(f"Building {pick} in the background (same code as `python -m core train`).")

st.subheader("Configuration and training metrics")
for spec in list_systems():
    if not supports(spec, ds):
        continue
    with st.expander(f"{spec.name} — {spec.title}"):
        st.text(spec.paper)
        if spec.note:
            st.caption(spec.note)
        status = read_status(ds, spec)
        config = system_config(spec.name, ds.name)
        if config:
            st.json(config, expanded=False)
        if status.metrics:
            st.dataframe(pd.DataFrame(sorted(status.metrics.items()), columns=["metric", "value"]).astype(str),
                         hide_index=True)
        elif status.state != "ready":
            st.caption(f"Not built yet: `python -m core train --system {spec.name} --dataset {ds.name}`")
