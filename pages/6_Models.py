"""Models: every system's build status, config, checkpoint size and training metrics; build buttons; per
learned model its learning curve (dev metric against steps and seconds), its untrained reference side by
side, whether it converged, and a longer resumable run (``--profile full``) with progress."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from core.build import (
    build_log_tail,
    cancel_build,
    build_running,
    pending_note,
    percent,
    progress_line,
    read_status,
    start_background_build,
)
from core.model_cards import (
    artifact_size,
    below_reference,
    convergence_note,
    longer_run_command,
    needs_longer_run,
    start_longer_run,
    system_config,
    training_log,
)
from core.system_notes import system_notes
from core.registry import deviation_note, display_name, list_systems, supports
from core.errors import StudioError
from core.transfer import listing as portable_listing
from core.user_systems import FOLDER_WAYS, add_user_system, problems as user_problems, read_user_systems, remove_user_system
from core.user_systems import refresh_if_changed
from ui.nav import ensure_navigation
from ui.render import MISSING, page_dataset
from ui.system_picker import system_selectbox

ensure_navigation()  # through app.py's grouped navigation, also on a first deep link
st.set_page_config(page_title="Models · Question Retrieval Studio", page_icon="🔎", layout="wide")
st.title("Models")

ds = page_dataset(banner=False)  # the build line is drawn with the status table below (same numbers)


def read_user_systems_or_none() -> list:
    """The user systems file's entries (a broken file is already one warning line: none here)."""
    try:
        return read_user_systems()
    except StudioError:
        return []


def _buildable() -> list[tuple]:
    """(spec, variant) of every system that applies here, each followed by its recipes (``registry.Recipe``:
    a paper's recipe built in its own folder beside the default, e.g. densetrans@paper-objective)."""
    return [(spec, variant) for spec in list_systems() if supports(spec, ds)
            for variant in (None, *(r.variant for r in spec.recipes))]


def _label(spec, variant) -> str:
    return spec.name + (f"@{variant}" if variant else "")


def status_table() -> None:
    """The build line and every system's status, read together so the line and the table agree."""
    line = progress_line(ds)
    if line:
        st.caption(line)
    rows = []
    for spec, variant in _buildable():
        s = read_status(ds, spec, variant)
        name = _label(spec, variant)
        rows.append({"system": name, "what runs": display_name(name), "kind": spec.kind, "state": s.state,
                     "progress": percent(s.progress), "message": s.message.splitlines()[-1][:120] if s.message else "",
                     "seconds": round(s.seconds, 1) if s.seconds else None,
                     "size (MB)": artifact_size(ds.name, spec.name, variant) / 1e6,
                     "error": s.error})
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", placeholder=MISSING,
                 column_config={"progress": st.column_config.ProgressColumn(min_value=0, max_value=100, format="%d %%"),
                                "message": st.column_config.TextColumn(width="large"),
                                "size (MB)": st.column_config.NumberColumn(format="%.1f")})
    running = build_running(ds.name)
    st.caption("A build is running in the background." if running else "No build running.")
    log = build_log_tail(ds.name)
    if log:
        with st.expander("Build log (last lines)"):
            st.code(log, language=None)
    if running != RUNNING:  # the build started or ended: redraw the page (polling only while one runs)
        st.rerun(scope="app")


RUNNING = build_running(ds.name)
# refreshes on its own every 3 s while a build runs, without blocking other pages; idle, it does not rerun
status_table = st.fragment(status_table, run_every=3 if RUNNING else None)
status_table()

left, right = st.columns(2)
with left:
    profile = st.radio("Profile", ["quick", "full", "paper"], horizontal=True,
                       help="quick: the default build (its time on 2 cores: BENCHMARKS.md); full: train until converged "
                            "(resumes a checkpoint); paper: the papers' full recipes")
    if st.button("▶ Build everything not built yet", disabled=build_running(ds.name)):
        started = start_background_build(ds.name, profile)
        st.toast("Build started in the background." if started else "A build is already running.")
    if build_running(ds.name) and st.button("■ Cancel the build", key="models.cancel",
                                            help="Stops the running build's jobs; systems it finished stay built, "
                                                 "the others are left not built (nothing half-written)"):
        st.toast("Cancelling the build: its running jobs stop, finished systems stay built."
                 if cancel_build(ds.name) else "No build was running.")
with right:
    names = [_label(spec, variant) for spec, variant in _buildable()]
    pick = system_selectbox("Build one system", names, key="models.build_one",
                        help="SYSTEM@VARIANT (e.g. densetrans@paper-objective, frm@kw-loss) is a paper's recipe "
                             "built in its own folder beside the default build, which it never overwrites")
    st.caption(f"{pick}: {display_name(pick)}")
    if st.button(f"▶ Build {pick}", disabled=build_running(ds.name)):
        start_background_build(ds.name, profile, systems=[pick])
        st.toast(f"Building {pick} in the background (same code as `python -m core train`).")

# ----------------------------------------------------------------------------- models trained on another dataset
st.subheader("Trained models on any dataset")
st.caption("A model trained on one dataset ranks any other as SYSTEM@TRAINED_ON (zero-shot); its vectors and "
           "index for a new collection are built on first use and cached per (model, dataset).")
_models = portable_listing()
if _models:
    st.dataframe(pd.DataFrame([{"model": m.name, "trained on": m.trained_on + ("" if m.dataset_exists else " (deleted)"),
                                "applied to (cached)": ", ".join(m.applied_to) or "-",
                                "cache (MB)": round(m.cache_bytes / 1e6, 1)} for m in _models]),
                 hide_index=True, width="stretch")
else:
    st.caption("No trained model yet.")
if not ds.pairs.get("train") and ds.qrels:  # imported data: "Build one system" trains on its labels
    sizes = ", ".join(f"{k} {len(v):,}" for k, v in ds.query_splits.items())
    st.caption(f"Training here uses the dataset's labels (core.training_data), queries split by a stable hash: {sizes}.")

# ----------------------------------------------------------------------------- your own systems
st.subheader("Your own systems")
st.caption("A sentence-transformers model folder as a bi-encoder (encoded on first use, again whenever the folder "
           "changes) or as a cross-encoder reranker; a TREC run file (`python -m core systems add NAME --run FILE "
           "--dataset D`); or a plugin: an installed package with an entry point in the group `qrs.systems`. They "
           "appear on every page beside the papers' systems.")
refresh_if_changed(force=True)  # a plugin installed while the app runs appears here without a restart
done = st.session_state.pop("models.own_done", None)  # what the last Add / Remove did (it reran the page)
if done:
    st.success(done, icon="✅")
for line in user_problems():  # a plugin or user entry that could not be registered: one line, never a crash
    st.warning(f"Not loaded: {line}", icon="⚠️")
_own = [s for s in list_systems() if s.origin != "built-in"]
if _own:
    st.dataframe(pd.DataFrame([{"system": s.name, "kind": s.kind, "origin": s.origin, "source": s.source,
                                "applies here": supports(s, ds)} for s in _own]), hide_index=True, width="stretch")
with st.form("models.add_own", clear_on_submit=False):
    st.markdown("**Add your own system**")
    own_left, own_mid, own_right = st.columns([1, 1, 2])
    own_name = own_left.text_input("Name", key="models.own_name", placeholder="my-model")
    own_way = own_mid.radio("It is a", list(FOLDER_WAYS), key="models.own_way", format_func=FOLDER_WAYS.get)
    own_path = own_right.text_input("Model folder on this machine", key="models.own_path",
                                    placeholder="/path/to/sentence-transformers/model")
    if st.form_submit_button("Add"):
        try:
            added = add_user_system(own_name.strip(), own_way, own_path.strip())
        except StudioError as exc:
            st.error(" ".join(str(exc).split()))
        else:  # rerun: the table above lists it at once; the message survives the rerun
            st.session_state["models.own_done"] = (f"Added {added.name} ({added.way}); build it here with the button "
                                                   "above or use it on any page.")
            st.rerun()
_removable = [s.name for s in read_user_systems_or_none()]
if _removable:
    rm_left, rm_right = st.columns([3, 1])
    to_remove = rm_left.selectbox("Remove one of your systems", _removable, key="models.own_remove")
    if rm_right.button(f"Remove {to_remove}", key="models.own_remove_button"):
        try:
            remove_user_system(to_remove)
        except StudioError as exc:
            st.error(" ".join(str(exc).split()))
        else:
            st.session_state["models.own_done"] = (f"Removed {to_remove} (its built files stay in the artifacts "
                                                   "folder).")
            st.rerun()


# ----------------------------------------------------------------------------- learned models: curves and references
def _learned() -> list[tuple]:
    """(spec, variant, status, training log) of every built variant that saved a learning curve."""
    out = []
    for spec in list_systems():
        if not supports(spec, ds):
            continue
        for variant in (None, *spec.variants):
            status = read_status(ds, spec, variant)
            log = training_log(ds.name, spec.name, variant, status.metrics)
            if log is not None:
                out.append((spec, variant, status, log))
    return out


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def curve_figure(log: dict, title: str) -> go.Figure:
    """Dev metric against training steps (left) and seconds (right); the untrained reference dashed."""
    points = log["curve"]
    metric = log.get("dev_metric", "dev")
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.04,
                        subplot_titles=("against steps", "against seconds"))
    for col, key in ((1, "step"), (2, "seconds")):
        fig.add_trace(go.Scatter(x=[p[key] for p in points], y=[p["dev"] for p in points], mode="lines+markers",
                                 name=f"dev {metric}", showlegend=col == 1, line=dict(color="#1f6feb"),
                                 hovertemplate=f"{key} %{{x}}: %{{y:.4f}}<extra></extra>"), row=1, col=col)
        best = [p for p in points if p["step"] == log.get("best_step")]
        if best:
            fig.add_trace(go.Scatter(x=[best[0][key]], y=[best[0]["dev"]], mode="markers", name="kept (best dev)",
                                     marker=dict(size=12, symbol="star", color="#1a7f37"), showlegend=col == 1),
                          row=1, col=col)
    ref = log.get("reference") or {}
    ref_dev = _number(ref.get("dev"))
    if ref_dev is not None:
        fig.add_hline(y=ref_dev, line_dash="dash", line_color="#d1242f",
                      annotation_text=f"untrained {ref.get('system', 'reference')}: {ref_dev:.3f}",
                      annotation_position="bottom right")
    fig.update_layout(height=320, margin=dict(l=10, r=10, t=50, b=10), title=title, yaxis_title=f"dev {metric}",
                      legend=dict(orientation="h", y=-0.2))
    fig.update_xaxes(title_text="steps", row=1, col=1)
    fig.update_xaxes(title_text="seconds", row=1, col=2)
    return fig


st.subheader("Learned models: learning curves and untrained references")
learned = _learned()
if not learned:
    st.caption("No learned model with a saved learning curve yet: the default build trains them after BM25 and "
               "MiniLM (see the status above).")
else:
    rows = []
    for spec, variant, status, log in learned:
        ref = log.get("reference") or {}
        rows.append({"model": _label(spec, variant), "what runs": display_name(_label(spec, variant)),
                     "dev metric": log.get("dev_metric", ""),
                     "best dev": _number(log.get("best_dev")),
                     "untrained reference": ref.get("system", "") + (f"@{ref['variant']}" if ref.get("variant") else ""),
                     "reference dev": _number(ref.get("dev")), "reference test": _number(ref.get("test")),
                     "evaluations": len(log["curve"]),
                     "state": ("below its reference; " if below_reference(log) else "") + (
                         "converged" if log.get("stopped") == "patience" else
                         ("still improving at its cap" if needs_longer_run(log) else log.get("stopped") or "?"))})
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", placeholder=MISSING,
                 column_config={c: st.column_config.NumberColumn(format="%.4f")
                                for c in ("best dev", "reference dev", "reference test")})
    for spec, variant, status, log in learned:  # each variant's own note: a recipe says what still differs
        name = _label(spec, variant)
        for note in system_notes(ds, name):
            st.caption(f"⚠️ {note}")
    st.caption("Reference numbers: the untrained model each learned system must beat, on the same dev queries "
               "(QQP: each query removed from its own ranking).")
    for spec, variant, status, log in learned:
        label = _label(spec, variant)
        with st.expander(f"{label} — {convergence_note(log)}", expanded=needs_longer_run(log)):
            below = below_reference(log)
            if below:
                st.warning(f"{label}: {below}")
            left, right = st.columns(2)
            metric = log.get("dev_metric", "dev")
            best = _number(log.get("best_dev"))
            ref = log.get("reference") or {}
            left.metric(f"{label}: best dev {metric}", "—" if best is None else f"{best:.4f}")
            ref_dev = _number(ref.get("dev"))
            ref_name = ref.get("system", "untrained reference")
            delta = None if best is None or ref_dev is None else f"{best - ref_dev:+.4f} for {label}"
            right.metric(f"untrained {ref_name}: dev {ref.get('metric', metric)}",
                         "—" if ref_dev is None else f"{ref_dev:.4f}", delta=delta, delta_color="off")
            if _number(ref.get("test")) is not None:
                right.caption(f"{ref_name} on the test split: {float(ref['test']):.4f}")
            if log["curve"]:
                st.plotly_chart(curve_figure(log, f"{label}: dev {metric} while training"), width="stretch",
                                key=f"models.curve.{label}")
            else:
                st.caption("No dev evaluation was recorded.")
            command = " ".join(longer_run_command(ds.name, spec.name, variant)[1:])
            if needs_longer_run(log):
                st.caption("Still improving when training stopped: a longer run continues from the saved "
                           "checkpoint until the dev metric stops improving.")
                st.code(f"python {command}", language="bash")
                busy = status.state == "building"
                if st.button(f"▶ Train {label} longer (full profile)", key=f"models.longer.{label}", disabled=busy):
                    started = start_longer_run(ds.name, spec.name, variant)
                    st.toast(f"Training {label} in the background; progress in the status table above."
                             if started else f"{label} is already training.")

st.subheader("Configuration and training metrics")
for spec, variant in _buildable():
    name = _label(spec, variant)
    with st.expander(f"{name} — {display_name(name)}"):
        st.text(spec.paper)
        if spec.note:
            st.caption(spec.note)
        note = deviation_note(name)
        if note:
            st.caption(note)
        status = read_status(ds, spec, variant)
        config = system_config(spec.name, ds.name, variant)
        if config:
            st.json(config, expanded=False)
        if status.metrics:
            st.dataframe(pd.DataFrame(sorted(status.metrics.items()), columns=["metric", "value"]).astype(str),
                         hide_index=True)
        elif status.state != "ready":
            st.caption(pending_note(ds.name, spec.name, variant)
                       or f"Not built yet: `python -m core train --system {spec.name} --dataset {ds.name}"
                       + (f" --variant {variant}`" if variant else "`"))
