"""Case studies: saved comparisons — reopen, rename, delete, export, re-run today's models beside them.

Layout only; logic in core.judging.compare_state / case_tables / casestudy / casestudy_store. Dataset and user text via st.text / st.dataframe.
"""
from __future__ import annotations

from dataclasses import replace

import pandas as pd
import streamlit as st

from core.judging.case_tables import case_table, to_csv, to_latex, to_markdown
from core.judging.casestudy import change_marks, changes
from core.judging.compare_state import CompareState, StateOptions
from core.analysis.compare import compare
from core.data.datasets import list_datasets
from core.errors import StudioError
from core.judging.database import default_url
from ui.cache import cached_loader, case_store, dataset
from ui.nav import ensure_navigation
from ui.render import error
from ui.state import current_dataset

ensure_navigation()  # through app.py's grouped navigation, also on a first deep link
st.set_page_config(page_title="Case studies · Question Retrieval Studio", page_icon="📚", layout="wide")
st.title("Case studies")
st.caption("Comparisons saved from the Compare page, with the rankings and scores as they were shown.")

try:
    store = case_store(default_url())
except Exception as exc:
    error(exc)
    st.stop()

only_current = st.toggle(f"Only the current dataset ({current_dataset()})", value=False, key="cases.only_current")
cases = store.list(current_dataset() if only_current else None)
if not cases:
    st.info("No saved case studies yet: use “Save this comparison” on the Compare page.")
    st.stop()

st.dataframe(pd.DataFrame([{
    "id": c.id, "title": c.title, "dataset": c.dataset, "query": c.query, "systems": ", ".join(col.system for col in c.table.columns),
    "k": c.table.k, "author": c.author, "saved": c.created_at.strftime("%Y-%m-%d %H:%M"),
} for c in cases]), hide_index=True, width="stretch")

by_id = {c.id: c for c in cases}
if st.session_state.get("cases.selected") not in by_id:
    st.session_state["cases.selected"] = cases[0].id
case_id = st.selectbox("Case study", list(by_id), key="cases.selected",
                       format_func=lambda i: f"#{i} · {by_id[i].title[:80]}")
case = by_id[case_id]
table = case.table

# ----------------------------------------------------------------------------- the saved case
st.subheader(f"Case study #{case.id}")
st.text(f"Title:   {case.title}")
st.text(f"Query:   {case.query}" + (f"   (dataset query {case.query_id})" if case.query_id else ""))
st.text(f"Dataset: {case.dataset} · top-{table.k} · saved by {case.author} on "
        f"{case.created_at:%Y-%m-%d %H:%M} UTC" + (f" · renamed {case.updated_at:%Y-%m-%d %H:%M}"
                                                  if case.updated_at != case.created_at else ""))
if case.note:
    st.text(f"Note:    {case.note}")
if table.ground_truth:
    with st.expander(f"Known paraphrases ({len(table.ground_truth)})"):
        for text in table.ground_truth:
            st.text(f"• {text}")

rerun = st.toggle("Re-run today's models beside the saved rankings", key=f"cases.rerun.{case.id}")
today = None
if rerun:
    try:
        ds = dataset(case.dataset)
        state, notes = CompareState.from_params(case.state, StateOptions.for_dataset(ds, list_datasets()),
                                                ds.display_query)
        for note in notes:
            st.text(f"⚠ {note}")
        if not state.query:
            state = replace(state, query=case.query)
        result = compare(ds, state.query, state.choices(),
                         cached_loader(case.dataset, progress=True),  # the one loader through this process's cache
                         k=state.k, query_id=state.query_id, baseline=state.baseline)
        today = case_table(result, case.dataset)
    except Exception as exc:  # a dataset that is gone, a model that no longer loads
        error(exc)

st.caption("✅ relevant in the dataset's labels, or your label 2 (same question) at save time · related = your "
           "label 1 (related, not the same question) · change = today's rank against the saved one")
diffs = {d.system: d for d in changes(table, today)} if today is not None else {}
now_cols = {c.system: c for c in today.columns} if today is not None else {}
cols = st.columns(len(table.columns))
for col, saved in zip(cols, table.columns):
    with col:
        st.text(saved.system)
        if saved.error:
            st.text(f"error when saved: {saved.error}")
        if saved.metrics:
            st.caption(" · ".join(f"{m} {v:.2f}" for m, v in saved.metrics))
        st.dataframe(pd.DataFrame([{"#": h.rank, "": h.mark, "question": h.text, "score": h.score}
                                   for h in saved.hits]),
                     hide_index=True, width="stretch",
                     column_config={"score": st.column_config.NumberColumn(format="%.3f")})
        if today is None:
            continue
        diff, current = diffs.get(saved.system), now_cols.get(saved.system)
        if current is None or current.error or diff is None or diff.rbo is None:
            st.text("today: " + (current.error if current is not None and current.error else "not available"))
            continue
        st.caption(f"today · RBO vs saved {diff.rbo:.2f} · {len(diff.entered)} new · {len(diff.left)} gone · "
                   f"{len(diff.moves)} moved" + (" · unchanged" if diff.unchanged else ""))
        marks = change_marks(table, today, saved.system)
        st.dataframe(pd.DataFrame([{"#": h.rank, "change": marks.get(h.doc_id, ""), "": h.mark,
                                    "question": h.text, "score": h.score} for h in current.hits]),
                     hide_index=True, width="stretch",
                     column_config={"score": st.column_config.NumberColumn(format="%.3f")})

# ----------------------------------------------------------------------------- export, open, rename, delete
st.subheader("Export")
cut = st.number_input("Cut questions at (characters; 0 = never)", 0, 1000, 80, step=10, key="cases.cut")
mark = st.radio("LaTeX: ground-truth hits in", ["color", "bold"], horizontal=True, key="cases.mark")
c1, c2, c3 = st.columns(3)
name = f"case-study-{case.id}"
c1.download_button("⬇️ Markdown", to_markdown(table, max_chars=cut or None, title=case.title), f"{name}.md",
                   "text/markdown", on_click="ignore")
c2.download_button("⬇️ LaTeX", to_latex(table, max_chars=cut or None, title=case.title, mark=mark,
                                       label=f"tab:case-{case.id}"), f"{name}.tex", "text/x-tex", on_click="ignore")
c3.download_button("⬇️ CSV", to_csv(table), f"{name}.csv", "text/csv", on_click="ignore")

if st.button("🔎 Open in Compare", help="the same dataset, query, systems and settings, run with today's models"):
    st.session_state["compare.open"] = dict(case.state)
    st.switch_page("pages/1_Compare.py", query_params=dict(case.state))

with st.form(f"cases.rename.{case.id}"):
    st.write("Rename or edit the note")
    new_title = st.text_input("Title", value=case.title, max_chars=200)
    new_note = st.text_area("Note", value=case.note or "", max_chars=4000)
    if st.form_submit_button("Save changes"):
        try:
            store.rename(case.id, new_title, new_note)
            st.rerun()
        except StudioError as exc:
            error(exc)

with st.expander("Delete this case study"):
    sure = st.checkbox("Yes, delete it", key=f"cases.sure.{case.id}")
    if st.button("🗑️ Delete", disabled=not sure, key=f"cases.delete.{case.id}"):
        store.delete(case.id)
        st.rerun()
