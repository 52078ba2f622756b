"""Keywords: FRM keyword importance, multi-level keyword sets, comparable pairs and view contributions
for a query and two candidates side by side (layout only; everything is computed by core.rerank.frm)."""
from __future__ import annotations

import dataclasses
import hashlib

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core.analysis.keyword_quality import keywords_default
from core.analysis.keywords import METHODS, word_importance
from core.errors import MissingArtifactError, StudioError
from core.registry import (build_command, default_first_stage, display_name, get_spec, list_systems, parse_name,
                           supports, system_module)
from core.data.text import display_form
from core.retrieval.base import validate_query
from ui.cache import system
from ui.nav import ensure_navigation
from ui.render import error, page_dataset
from ui.state import current_dataset

KEYWORDS = next(s.name for s in list_systems("reranker") if s.explains_keywords)  # FRM: keyword importance
FIRST_STAGE = default_first_stage()  # where the candidates come from

ensure_navigation()  # through app.py's grouped navigation, also on a first deep link
st.set_page_config(page_title="Keywords · Question Retrieval Studio", page_icon="🔑", layout="wide")
st.title("Keywords")
st.caption("FRM (frm-multiview-chong.md §3): keyword importance w(k, q) (Eq. 7), multi-level keyword sets, "
           "comparable keyword-set pairs with weights (Eq. 9), and each matching view's share of the score.")

params = st.query_params.to_dict()
if params.get("dataset") and "keywords.seeded" not in st.session_state:
    st.session_state["dataset"] = params["dataset"]
ds_name = current_dataset()
ds = page_dataset(ds_name)
if not supports(get_spec(KEYWORDS), ds):
    st.info(f"FRM is trained for question-question data (QQP); {ds_name} is not supported. Pick QQP on the home page.")
    st.stop()

# ----------------------------------------------------------------------------- query
if "keywords.seeded" not in st.session_state:
    st.session_state["keywords.seeded"] = True
    if params.get("qid") in ds.queries:
        st.session_state["keywords.qid"] = params["qid"]
        st.session_state["keywords.query"] = ds.display_query(params["qid"])
    elif params.get("q"):
        st.session_state["keywords.query"] = params["q"]
OWN = "(type your own)"
picked = st.selectbox("Dataset query", [OWN, *list(ds.queries)[:500]], key="keywords.pick",
                      format_func=lambda q: q if q == OWN else f"{q}: {ds.display_query(q)[:90]}")
if picked != OWN and st.session_state.get("keywords.qid") != picked:
    st.session_state["keywords.qid"] = picked
    st.session_state["keywords.query"] = ds.display_query(picked)
text = st.text_input("Query", key="keywords.query", placeholder="How can I stop my depression?")
qid = st.session_state.get("keywords.qid")
if qid and (qid not in ds.queries or text != ds.display_query(qid)):
    qid = None  # edited: a typed query
# the query lives in the URL (a reload or a shared link shows the same query, as Compare's links do)
link = {"dataset": ds_name, **({"qid": qid} if qid else {"q": text} if text.strip() else {})}
if link != st.query_params.to_dict():
    st.query_params.from_dict(link)
if not text.strip():
    st.info("Type a question or pick a dataset query.")
    st.stop()
try:
    query = validate_query(ds.queries[qid] if qid else text)
except StudioError as exc:
    error(exc)
    st.stop()

# ----------------------------------------------------------------------------- which explanation
shown = keywords_default()  # measured on held-out pairs (bench/reports/keyword_faithfulness.json)
VIEWS = [(f"{KEYWORDS}@{r}" if r else KEYWORDS, m) for r in (None, *[x.variant for x in get_spec(KEYWORDS).recipes])
         for m in METHODS]
built_views = [v for v in VIEWS if system_module(KEYWORDS).is_built(ds, variant=parse_name(v[0]).variant)]
views = built_views or [(shown.system, shown.method)]
default_view = (shown.system, shown.method) if (shown.system, shown.method) in views else views[0]
if default_view != (shown.system, shown.method):  # never silently another explanation than the measured default
    st.warning(f"The default explanation, {display_name(shown.system)}: {METHODS[shown.method]}, is not built for "
               f"{ds_name}; showing {display_name(default_view[0])}: {METHODS[default_view[1]]}. Build it with "
               f"`{build_command(parse_name(shown.system).system, ds_name, parse_name(shown.system).variant)}`.")
view = st.selectbox("Explanation", views, index=views.index(default_view), key="keywords.view",
                    format_func=lambda v: f"{display_name(v[0])}: {METHODS[v[1]]}"
                    + (" (default: passes the held-out checks)" if v == (shown.system, shown.method)
                       and shown.faithful and shown.plausible else " (default)" if v == (shown.system, shown.method)
                       else ""))
if view == (shown.system, shown.method) and shown.comprehensiveness:
    st.caption(
        f"Shown: {display_name(view[0])}, {METHODS[view[1]]}. On held-out QQP pairs ({shown.report}): "
        f"faithfulness: deleting its top-k words lowers the model's score by {shown.comprehensiveness['top']:.3f} "
        f"(random k: {shown.comprehensiveness['random']:.3f}, bottom-k: {shown.comprehensiveness['bottom']:.3f}; "
        f"{'passes' if shown.faithful else 'fails'}); plausibility: Spearman with IDF {shown.spearman_idf:+.2f}, "
        f"stop words among the top 2: {shown.stop_share_top2:.0%} ({'passes' if shown.plausible else 'fails'})."
        + (f" Measured on reduced FRM trainings ({shown.reduced}), not on this build's model." if shown.reduced else "")
        + ("" if shown.dev_passes is None else " Chosen on dev pairs by a rule fixed in advance; on dev it "
           + ("passes both checks for every seed." if shown.dev_passes else
              "does not pass for every seed (" + "; ".join(shown.dev_failures) + ").")))
elif view != (shown.system, shown.method):
    st.caption(f"Shown: {display_name(view[0])}, {METHODS[view[1]]}. Not the default view "
               f"({display_name(shown.system)}, {METHODS[shown.method]}); see {shown.report or 'bench/reports'} "
               "for each view's held-out figures.")
if shown.paper_loss_note and view[0] == KEYWORDS and view[1] == "w":
    st.warning(f"{shown.paper_loss_note} Pick “{display_name(shown.system)}: {METHODS[shown.method]}” above.")

try:
    frm = system(KEYWORDS, ds_name, parse_name(view[0]).variant, progress=True)
except MissingArtifactError as exc:
    error(exc)
    st.stop()
except Exception as exc:  # noqa: BLE001 - shown, not raised
    error(exc)
    st.stop()

# ----------------------------------------------------------------------------- candidates
candidates: list[str] = []
try:
    ranking = system(FIRST_STAGE, ds_name, progress=True).search(query, k=get_spec(KEYWORDS).rerank_depth, exclude=[qid] if qid else [])
    candidates = list(ranking.doc_ids)
except MissingArtifactError as exc:
    st.warning(f"BM25 is not built, so there are no candidates to pick from; type candidates instead. {exc}")
except StudioError as exc:
    error(exc)
labels = [f"BM25 #{i + 1}: {ds.display(d)[:80]}" for i, d in enumerate(candidates)] + ["(type a candidate)"]
if qid:
    st.caption(f"Dataset query {qid}: it is removed from its own BM25 ranking.")


# the candidate boxes belong to one query: their keys name it, so a new query starts new boxes (BM25 #1 and #2) in
# the server and in the browser alike, never the previous query's picks
FOR_QUERY = hashlib.sha1(f"{qid or ''}\x1f{query}".encode()).hexdigest()[:12]


def pick_candidate(slot: str, default: int) -> str | None:
    choice = st.selectbox(f"Candidate {slot}", range(len(labels)), index=min(default, len(labels) - 1),
                          format_func=lambda i: labels[i], key=f"keywords.cand.{slot}.{FOR_QUERY}")
    if choice < len(candidates):
        return ds.corpus[candidates[choice]]
    typed = st.text_input(f"Candidate {slot} text", key=f"keywords.typed.{slot}")
    if not typed.strip():
        return None
    try:
        return validate_query(typed)
    except StudioError as exc:
        error(exc)
        return None


def importance_range(weights: list[float]) -> tuple[float, float]:
    """The heatmap's colour range: anchored at 0 (no importance) up to the largest weight, or ±the largest
    magnitude when a weight is negative (never the shown minimum to maximum, where 0.49 and 0.63 look opposite)."""
    top = max((abs(w) for w in weights), default=0.0) or 1.0
    return (-top, top) if any(w < 0 for w in weights) else (0.0, top)


def token_heatmap(e) -> go.Figure:
    """Tokens coloured by importance (query row, candidate row) on a scale anchored at 0, no importance: from 0 to
    the largest weight shown (weights ≥ 0, as w(k, q)), or symmetric around 0 when some are negative (a gradient
    attribution), so two similar weights get similar colours; importance, IDF, POS on hover."""
    width = max(len(e.query_keywords), len(e.candidate_keywords), 1)
    z, txt, hover = [], [], []
    for kws, imp, idf, pos in ((e.candidate_keywords, e.candidate_importance, e.candidate_idf, e.candidate_pos),
                               (e.query_keywords, e.query_importance, e.query_idf, e.query_pos)):
        pad = width - len(kws)
        z.append(list(imp) + [None] * pad)
        txt.append(list(kws) + [""] * pad)
        hover.append([f"importance {w:.3f}, IDF {i:.2f}, POS {p}" for w, i, p in zip(imp, idf, pos)] + [""] * pad)
    lo, hi = importance_range([w for row in z for w in row if w is not None])
    fig = go.Figure(go.Heatmap(z=z, text=txt, texttemplate="%{text}", customdata=hover, zmin=lo, zmax=hi,
                               colorscale="RdBu_r" if lo < 0 else "YlOrRd",
                               hovertemplate="%{text}: %{customdata}<extra></extra>",
                               colorbar={"title": {"text": "w(k)"}}))
    fig.update_layout(height=190, margin={"l": 10, "r": 10, "t": 10, "b": 10},
                      yaxis={"tickvals": [0, 1], "ticktext": ["candidate", "query"]}, xaxis={"showticklabels": False})
    return fig


def pair_matrix(e) -> go.Figure:
    """Comparable keyword-set pairs: q level × d level, cell = pair weight (Eq. 9)."""
    z = [[None] * len(e.candidate_levels) for _ in e.query_levels]
    for p in e.pairs:
        z[p["q_level"] - 1][p["d_level"] - 1] = p["weight"]
    fig = go.Figure(go.Heatmap(z=z, x=[f"KS{n + 1}(d)" for n in range(len(e.candidate_levels))],
                               y=[f"KS{m + 1}(q)" for m in range(len(e.query_levels))], colorscale="Blues",
                               texttemplate="%{z:.3f}", hovertemplate="%{y} ↔ %{x}: weight %{z:.4f}<extra></extra>"))
    fig.update_layout(height=120 + 22 * len(e.query_levels), margin={"l": 10, "r": 10, "t": 10, "b": 10},
                      yaxis={"autorange": "reversed"})
    return fig


def show(slot: str, e) -> None:
    st.metric(f"sim(q, d), candidate {slot}", f"{e.score:.3f}")
    st.plotly_chart(token_heatmap(e), key=f"keywords.heat.{slot}")
    st.caption("Colour: 0 (no importance) to the largest weight shown; symmetric around 0 when a weight is "
               "negative. Exact values on hover and in the table below.")
    st.caption("View contributions: score minus the score with that view's vector zeroed.")
    views = go.Figure(go.Bar(x=list(e.view_contributions), y=list(e.view_contributions.values())))
    views.update_layout(height=220, margin={"l": 10, "r": 10, "t": 10, "b": 10})
    st.plotly_chart(views, key=f"keywords.views.{slot}")
    st.caption("Comparable keyword-set pairs (rule of §3.3.1) and their weights (Eq. 9).")
    st.plotly_chart(pair_matrix(e), key=f"keywords.pairs.{slot}")
    st.dataframe(pd.DataFrame([{"KS(q)": p["q_level"], "KS(d)": p["d_level"], "rule": p["rule"],
                                "weight": round(p["weight"], 4), "q keywords": " ".join(p["q_set"]),
                                "d keywords": " ".join(p["d_set"])} for p in e.pairs]), hide_index=True)
    st.caption("Keyword sets by level (least important keyword removed one at a time).")
    c1, c2 = st.columns(2)
    c1.dataframe(pd.DataFrame({"level": range(1, len(e.query_levels) + 1),
                               "query keywords": [" ".join(s) for s in e.query_levels]}), hide_index=True)
    c2.dataframe(pd.DataFrame({"level": range(1, len(e.candidate_levels) + 1),
                               "candidate keywords": [" ".join(s) for s in e.candidate_levels]}), hide_index=True)
    st.caption("EFNN features: IDF (bucketed, K = 100), spaCy POS, stop word.")
    rows = [{"side": side, "keyword": k, "importance": round(w, 3), "IDF": round(i, 2), "POS": p, "stop word": s}
            for side, ks, ws, ids, ps, ss in (
                ("query", e.query_keywords, e.query_importance, e.query_idf, e.query_pos, e.query_stop),
                ("candidate", e.candidate_keywords, e.candidate_importance, e.candidate_idf, e.candidate_pos,
                 e.candidate_stop))
            for k, w, i, p, s in zip(ks, ws, ids, ps, ss)]
    st.dataframe(pd.DataFrame(rows), hide_index=True)


left, right = st.columns(2)
for column, slot, default in ((left, "A", 0), (right, "B", 1)):
    with column:
        cand = pick_candidate(slot, default)
        if cand is None:
            st.info("Type a candidate question.")
            continue
        st.text(display_form(cand) if ds.tokenized else cand)  # as people write it, not "depression ?"
        try:
            e = frm.explain(query, cand)
            if view[1] != "w":  # the same FRM, another attribution of its score: the heatmap shows it
                weights = word_importance(frm, query, cand, view[1])
                e = dataclasses.replace(e, query_importance=[x for _, x in weights.query],
                                        candidate_importance=[x for _, x in weights.candidate])
            show(slot, e)
        except StudioError as exc:
            error(exc)
st.caption(f"Rebuild FRM with: {build_command(KEYWORDS, ds_name, parse_name(view[0]).variant)}")
