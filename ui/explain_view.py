"""Word importance drawn the same way on the Keywords page and in Compare's "why": which systems can explain, a
per-pair heatmap on a diverging scale, and the top words named in one line."""
from __future__ import annotations

import weakref

import plotly.graph_objects as go
import streamlit as st

from core.analysis.keywords import METHODS, WordImportance


def explainable_systems(ds) -> list[str]:
    """Every registered system (recipes included) that can score a (query, candidate) pair on ``ds`` and is built
    there (a cheap index counts as built: the loader builds it in seconds)."""
    from core.registry import list_systems, supports, system_module

    out = []
    for spec in list_systems():
        if not spec.pair_scoring or spec.composite or not supports(spec, ds):
            continue
        for variant in (None, *[r.variant for r in spec.recipes]):
            try:
                built = spec.cheap and variant is None or system_module(spec.name).is_built(ds, variant=variant)
            except Exception:  # noqa: BLE001 - a broken plugin is not offered (the Models page says why)
                built = False
            if built:
                out.append(spec.name + (f"@{variant}" if variant else ""))
    return out


WORD_SIZE = 15  # px of the words in a heatmap's cells: legible at a 1,400-px window with two heatmaps side by side
CHART_CONFIG = {"displayModeBar": False}  # no toolbar over the cells (st.plotly_chart(..., config=CHART_CONFIG))


def largest(*results: WordImportance) -> float:
    """The largest |importance| over ``results``: one colour scale for a view that shows several pairs."""
    return max((abs(float(x)) for r in results for side in (r.query, r.candidate) for _, x in side), default=0.0) or 1.0


def heatmap(result: WordImportance, height: int = 190, top: float | None = None) -> go.Figure:
    """Query and candidate words coloured by importance on a diverging scale: 0 is white, ``top`` (default: this
    pair's largest |importance|; a view of several pairs passes their common :func:`largest`) is full red (pulls
    the pair together) or full blue (pushes it apart); exact values on hover."""
    width = max(len(result.query), len(result.candidate), 1)
    z, text, hover = [], [], []
    for pairs in (result.candidate, result.query):  # plotly draws row 0 at the bottom
        pad = width - len(pairs)
        z.append([float(x) for _, x in pairs] + [None] * pad)
        text.append([w for w, _ in pairs] + [""] * pad)
        hover.append([f"{x:+.4f}" for _, x in pairs] + [""] * pad)
    top = top or largest(result)
    fig = go.Figure(go.Heatmap(z=z, text=text, texttemplate="%{text}", textfont={"size": WORD_SIZE}, customdata=hover,
                               zmin=-top, zmax=top, zmid=0.0, colorscale="RdBu_r",
                               hovertemplate="%{text}: %{customdata}<extra></extra>",
                               colorbar={"title": {"text": f"±{top:.3g}"}, "thickness": 12}))
    fig.update_layout(height=height, margin={"l": 10, "r": 10, "t": 10, "b": 10}, xaxis={"showticklabels": False},
                      yaxis={"tickvals": [0, 1], "ticktext": ["candidate", "query"], "tickfont": {"size": 13}})
    return fig


def ranking_heatmap(ranked, height: int = 110) -> go.Figure:
    """One row: the query's words coloured by their importance to the system's own top k (0 white, 1 full red:
    leaving the word out changes every place of the top k); exact values on hover."""
    z = [[float(x) for _, x in ranked.query]]
    words = [[w for w, _ in ranked.query]]
    fig = go.Figure(go.Heatmap(z=z, text=words, texttemplate="%{text}", textfont={"size": WORD_SIZE}, zmin=0.0,
                               zmax=1.0, colorscale="Reds",
                               customdata=[[f"{x:.3f}" for _, x in ranked.query]],
                               hovertemplate="%{text}: 1 − RBO %{customdata}<extra></extra>",
                               colorbar={"title": {"text": "1 − RBO"}}))
    fig.update_layout(height=height, margin={"l": 10, "r": 10, "t": 10, "b": 10}, xaxis={"showticklabels": False},
                      yaxis={"showticklabels": False})
    return fig


def why_line(result: WordImportance, k: int = 3) -> str:
    """The top words named in one line: "bm25 (occlusion): query stop, depression, my; candidate overcome, …"."""
    q = ", ".join(w for w in result.top(k) if dict(result.query).get(w, 0) > 0) or "none raises the score"
    d = ", ".join(w for w in result.top(k, "candidate") if dict(result.candidate).get(w, 0) > 0) or "none raises it"
    return f"{result.system} ({result.method}, score {result.score:.3f}): query words {q}; candidate words {d}"


def measure_caption(method: str, top: float | None = None) -> str:
    """What the colours show, and their scale: ``top`` shared by the view's pairs, else each pair's own."""
    scale = (f"one scale for both candidates: white = 0, full colour = ±{top:.3g}" if top else
             "scale per pair: white = 0, full colour = this pair's largest |importance|")
    return f"Colours: {METHODS[method]}. {scale[0].upper()}{scale[1:]} (red raises the score, blue lowers it); " \
        "exact values on hover."


def render_why(result, ds, query: str, loader, key: str = "compare.why"):
    """Compare's "why": pick a system's row, see which words of the query and of that question drove its score
    (the system's first offered measure: occlusion wherever it scores pairs). One line when it cannot. Returns
    the row's ``CaseExplanation`` (what a saved case study keeps), or None."""

    from core.analysis.keywords import offered_methods, word_importance
    from core.errors import StudioError
    from core.registry import get_spec, parse_name
    from ui.render import error

    ok = [r for r in result.results if r.ok and r.ranking.doc_ids]
    if not ok:
        return None
    labels = [r.choice.label for r in ok]
    c1, c2 = st.columns([1, 2])
    label = c1.selectbox("System", labels, key=f"{key}.system")
    res = ok[labels.index(label)]
    ids = res.ranking.doc_ids
    rank = c2.selectbox("Row", range(len(ids)), key=f"{key}.rank.{label}",
                        format_func=lambda i: f"#{i + 1}: {ds.display(ids[i])[:90]}")
    if not st.checkbox("Explain this row", key=f"{key}.on"):
        return None
    choice = res.choice
    spec = get_spec(parse_name(choice.name).system)
    try:
        loaded = loader(choice.name, choice.variant, choice.options)
        offered = offered_methods(loaded, spec)
        explained = word_importance(loaded, query, ds.corpus[ids[rank]], offered[0] if offered else "occlusion",
                                    corpus=ds.corpus, spec=spec)
    except StudioError as exc:
        error(exc)
        return None
    st.text(why_line(explained))
    st.plotly_chart(heatmap(explained), key=f"{key}.heat", config=CHART_CONFIG)
    st.caption(measure_caption(explained.method) + " Scored on the system's own pair score (a reranker's served "
               "ranking may also mix in its first stage's).")
    for note in explained.notes:
        st.caption(f"Note: {note}")
    from core.judging.case_explanations import CaseExplanation

    return CaseExplanation.of(label, rank + 1, ids[rank], explained)


def ranked_view(explainer, label: str, query: str, ds, first_stage) -> None:
    """The Keywords page's first answer: which query words decide the system's own top 10 (a reranker: over
    ``first_stage()``'s top ``POOL``); one info line where there is no such ranking (one word, a candidate list, a
    system that cannot rank a typed query). Kept per loaded system and query: picking a candidate below does not
    rank the query again."""
    from core.analysis.ranking_importance import POOL
    from core.errors import StudioError
    from core.registry import display_name
    from core.retrieval.base import Reranker

    st.subheader(f"Which query words decide {display_name(label)}'s top 10")
    try:
        ranked = _ranked(explainer, query, ds, first_stage)
    except StudioError as exc:
        st.info(str(exc))
        return
    st.plotly_chart(ranking_heatmap(ranked), key="keywords.ranked", config=CHART_CONFIG)
    reranks = isinstance(explainer, Reranker)
    st.caption(f"Colours: {ranked.measure}" + (f" (reranking BM25's top {POOL} for the query)" if reranks else "")
               + ". The most important: " + ", ".join(ranked.ranked(3)) + ". " + query_view_caption(label, ds.name))


def query_view_caption(label: str, dataset: str) -> str:
    """This view's held-out faithfulness for ``label`` (bench/reports/query_view_faithfulness.json), in one line."""
    from core.analysis.keyword_quality import query_view_row
    from core.registry import display_name

    row = query_view_row(label, dataset)
    if row is None:
        return f"This view of {display_name(label)} is not measured on {dataset} (bench/query_view_faithfulness.py)."
    comp, suff = row["comprehensiveness"], row["sufficiency"]
    return (f"On {row['queries']} held-out {dataset} queries, leaving out its top-k words moves the top 10 by "
            f"{comp['top'][0]:.2f} (random k words: {comp['random'][0]:.2f}); keeping only them, by "
            f"{suff['top'][0]:.2f} (random: {suff['random'][0]:.2f}), in 1 − RBO, k = 1–3: {row['verdict']}. "
            f"Spearman with IDF {row['spearman_idf']:+.2f}, stop words among the top 2: {row['stop_share_top2']:.0%}.")


_RANKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # loaded system -> {(dataset, query): ranking}
RANKED_PER_SYSTEM = 256  # queries kept per loaded system


def _ranked(explainer, query: str, ds, first_stage):
    """``ranking_importance`` once per loaded system, dataset and query in this process: kept beside the loaded
    object, so a rebuilt (reloaded) system is ranked anew and a dropped one takes its entries with it."""
    from core.analysis.ranking_importance import ranking_importance
    from core.retrieval.base import Reranker

    def rank():
        return ranking_importance(explainer, query, ds,
                                  first_stage=first_stage() if isinstance(explainer, Reranker) else None)

    try:
        kept = _RANKED.setdefault(explainer, {})
    except TypeError:  # a system that cannot be weakly referenced or hashed (a plugin's): ranked each time
        return rank()
    if (ds.name, query) not in kept:
        while len(kept) >= RANKED_PER_SYSTEM:
            kept.pop(next(iter(kept)))  # the oldest query first
        kept[(ds.name, query)] = rank()
    return kept[(ds.name, query)]
