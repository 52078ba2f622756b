"""Keywords: why a system scores a (query, candidate) pair as it does, word by word, for two candidates side by
side: any system that scores pairs (occlusion; BM25's exact terms; FRM's own w(k, q) and its keyword sets, pairs
and views). Layout only: the weights come from core.analysis.keywords."""
from __future__ import annotations

import hashlib

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from core.analysis.keyword_quality import keywords_default
from core.analysis.keywords import METHODS, offered_methods, word_importance
from core.errors import MissingArtifactError, StudioError
from core.registry import build_command, default_first_stage, display_name, get_spec, parse_name
from core.data.text import display_form
from core.retrieval.base import validate_query
from core.serving.runner import SystemChoice, rank_one
from core.user_systems import source_key
from ui.cache import system
from ui.explain_view import (CHART_CONFIG, explainable_systems, heatmap, largest, measure_caption, ranked_view,
                             why_line)
from ui.nav import ensure_navigation
from ui.render import error, literal, page_dataset
from ui.state import current_dataset

FIRST_STAGE = default_first_stage()  # where the candidates come from

ensure_navigation()  # through app.py's grouped navigation, also on a first deep link
st.set_page_config(page_title="Keywords · Question Retrieval Studio", page_icon="🔑", layout="wide")
st.title("Keywords")
st.caption("Which words made a system score this pair as it did: occlusion (the score minus the score with the "
           "word left out) for every system that scores pairs, BM25's exact per-term contributions, and FRM's own "
           "keyword importance w(k, q) (frm-multiview-chong.md §3, Eq. 7) with its keyword sets, pairs and views.")

params = st.query_params.to_dict()
if params.get("dataset") and "keywords.seeded" not in st.session_state:
    st.session_state["dataset"] = params["dataset"]
ds_name = current_dataset()
ds = page_dataset(ds_name)

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

# ----------------------------------------------------------------------------- which system, which measure
shown = keywords_default()  # chosen on dev pairs, figures on held-out pairs (bench/reports/explain_faithfulness.json)
choices = explainable_systems(ds)
if shown.system not in choices:  # never silently another explanation than the measured default
    base = parse_name(shown.system)
    st.warning(f"The default explanation, {display_name(shown.system)}: {METHODS[shown.method]}, is not built for "
               f"{ds_name}" + (f"; showing {display_name(choices[0])} instead" if choices else "")
               + f". Build it with `{build_command(base.system, ds_name, base.variant)}`.")
if not choices:
    st.stop()
picked_system = st.selectbox("System", choices, index=choices.index(shown.system) if shown.system in choices else 0,
                             key="keywords.system",
                             format_func=lambda n: display_name(n) + (" (default)" if n == shown.system else ""))
name = parse_name(picked_system)
spec = get_spec(name.system)
try:
    explainer = system(name.system, ds_name, name.variant, source=source_key(name.system))
    offered = offered_methods(explainer, spec)
except Exception as exc:  # noqa: BLE001 - shown, not raised (a missing artifact names its build command)
    error(exc)
    st.stop()
if not offered:
    st.info(f"{display_name(picked_system)} cannot score a (query, candidate) pair, so it has no word importance.")
    st.stop()
start = shown.method if picked_system == shown.system and shown.method in offered else offered[0]
method = st.selectbox("Measure", offered, index=offered.index(start), key=f"keywords.method.{picked_system}",
                      format_func=lambda m: METHODS[m])
if (picked_system, method) == (shown.system, shown.method) and shown.comprehensiveness:
    ci = shown.comprehensiveness_ci or {}
    st.caption(
        f"Shown: {display_name(picked_system)}, {METHODS[method]}. The default: "
        + (f"chosen on dev: {shown.why} (the rule: {shown.report}). "
           if shown.why else f"chosen on dev pairs by a rule fixed in advance ({shown.report}). ")
        + f"On held-out QQP pairs: deleting its top-k query words lowers the score by "
        f"{shown.comprehensiveness['top']:.3f} (random k: {shown.comprehensiveness['random']:.3f}"
        + (f", bottom-k: {shown.comprehensiveness['bottom']:.3f}" if "bottom" in shown.comprehensiveness else "")
        + ("; difference CI " + "[{:.3f}, {:.3f}]".format(*ci["top_minus_random"][1:]) if ci else "")
        + f"); {shown.verdict or ('passes' if shown.faithful else 'fails')}; plausibility: Spearman with IDF "
        f"{shown.spearman_idf:+.2f}, stop words among the top 2: {shown.stop_share_top2:.0%} "
        f"({'passes' if shown.plausible else 'fails'})."
        + (f" Measured on reduced FRM trainings ({shown.reduced}), not on this build's model." if shown.reduced else "")
        + ("" if shown.dev_passes is None else " On dev it "
           + ("passes both checks for every seed." if shown.dev_passes else
              "does not pass for every seed (" + "; ".join(shown.dev_failures) + ").")))
else:
    st.caption(f"Shown: {display_name(picked_system)}, {METHODS[method]}. Not the default view "
               f"({display_name(shown.system)}, {METHODS[shown.method]}); see {shown.report or 'bench/reports'} "
               "for each system's held-out faithfulness figures.")
if shown.paper_loss_note and method == "w" and spec.recipes and name.variant is None:
    st.warning(f"{shown.paper_loss_note} Pick “{display_name(shown.system)}: {METHODS[shown.method]}” above.")

# ----------------------------------------------------------------------------- the query's words, for its ranking
ranked_view(explainer, picked_system, query, ds, lambda: system(FIRST_STAGE, ds_name, progress=True))

# ----------------------------------------------------------------------------- candidates
candidates: list[str] = []
if ds.candidates and not qid:  # a candidate list is a dataset question's own: a typed query has none
    st.info(f"{ds_name} ranks each question's own answers: pick a dataset query above for its candidates, or type "
            "a candidate below.")
else:
    try:  # through the one runner: BM25's top 20, or on a candidate list the question's own answers by BM25
        ranking = rank_one(SystemChoice(FIRST_STAGE), ds, query, k=20, query_id=qid,
                           load=lambda n, v=None, o=(): system(n, ds_name, v, progress=True))
        candidates = list(ranking.doc_ids)
    except MissingArtifactError as exc:
        st.warning(f"BM25 is not built, so there are no candidates to pick from; type candidates instead. {exc}")
    except StudioError as exc:
        error(exc)
labels = [f"BM25 #{i + 1}: {ds.display(d)[:80]}" for i, d in enumerate(candidates)] + ["(type a candidate)"]
if qid and ds.candidates:
    st.caption(f"Dataset query {literal(qid)}: its own answers, in BM25's order.")
elif qid and ds.ignore_identical_ids:
    st.caption(f"Dataset query {literal(qid)}: it is removed from its own BM25 ranking.")
elif qid:
    st.caption(f"Dataset query {literal(qid)}: BM25's top 20 from the collection.")


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
    """FRM's own parts of the score: view contributions, keyword-set pairs and levels, EFNN features."""
    st.caption("View contributions: score minus the score with that view's vector zeroed.")
    views = go.Figure(go.Bar(x=list(e.view_contributions), y=list(e.view_contributions.values())))
    views.update_layout(height=220, margin={"l": 10, "r": 10, "t": 10, "b": 10})
    st.plotly_chart(views, key=f"keywords.views.{slot}", config=CHART_CONFIG)
    st.caption("Comparable keyword-set pairs (rule of §3.3.1) and their weights (Eq. 9).")
    st.plotly_chart(pair_matrix(e), key=f"keywords.pairs.{slot}", config=CHART_CONFIG)
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
shown_pairs: dict[str, tuple] = {}  # slot -> (column, candidate text, WordImportance): both drawn on one scale
for column, slot, default in ((left, "A", 0), (right, "B", 1)):
    with column:
        cand = pick_candidate(slot, default)
        if cand is None:
            st.info("Type a candidate question.")
            continue
        st.text(display_form(cand) if ds.tokenized else cand)  # as people write it, not "depression ?"
        try:
            shown_pairs[slot] = (column, cand, word_importance(explainer, query, cand, method, corpus=ds.corpus,
                                                               spec=spec))
        except StudioError as exc:
            error(exc)
top = largest(*(r for _, _, r in shown_pairs.values())) if shown_pairs else None
for slot, (column, cand, result) in shown_pairs.items():
    with column:
        st.metric(f"score(q, d), candidate {slot}", f"{result.score:.3f}")
        st.plotly_chart(heatmap(result, top=top), key=f"keywords.heat.{slot}", config=CHART_CONFIG)
        st.caption(measure_caption(method, top))
        st.text(why_line(result))
        for note in result.notes:
            st.caption(f"Note: {note}")
        if result.agreement is not None:
            st.caption(f"Spearman ρ between occlusion and the model's own w(k, q) over the query words: "
                       f"{result.agreement:+.2f}")
        if callable(getattr(explainer, "explain", None)):  # a keyword model (FRM): its own sets, pairs and views
            try:
                show(slot, explainer.explain(query, cand))
            except StudioError as exc:
                error(exc)
st.caption(f"Rebuild it with: {build_command(name.system, ds_name, name.variant)}")
