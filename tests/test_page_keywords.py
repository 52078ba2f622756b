"""AppTest: the Keywords page on a tiny trained FRM (tmp QRS_VAR): a system picker over every system that can
explain, its measures, a diverging heatmap on one scale per view, the measured default and what it says when that is missing."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT


def _app() -> AppTest:
    import streamlit as st

    st.cache_resource.clear()  # loaded systems are cached per process; each test has its own QRS_VAR
    return AppTest.from_file(str(ROOT / "pages/3_Keywords.py"), default_timeout=180)


def _page_on_report(report: dict, tmp_path, monkeypatch, name: str = "explain_faithfulness.json") -> AppTest:
    """The page opened on "How can I stop my depression?" with ``report`` as the Keywords default's report."""
    import json

    from core.analysis import keyword_quality

    path = tmp_path / name
    path.write_text(json.dumps(report))
    monkeypatch.setattr(keyword_quality, "REPORT", path)
    at = _app()
    at.query_params["q"] = "How can I stop my depression?"
    at.run()
    assert not at.exception, at.exception
    return at


def test_keywords_page_draws_heatmap(built_frm):
    at = _app()
    qid = next(iter(built_frm.queries))
    at.query_params["qid"] = qid
    at.run()
    assert not at.exception, at.exception
    charts = at.get("plotly_chart")
    assert len(charts) >= 2  # heatmaps for candidates A and B (plus pair matrices and view bars)
    assert any('"type":"heatmap"' in c.proto.spec.replace(" ", "") for c in charts)
    assert at.text_input(key="keywords.query").value == built_frm.display_query(qid)
    assert any("removed from its own BM25 ranking" in c.value for c in at.caption)
    assert not at.error
    # first, the query's words weighed by the shown system's own top 10
    assert any("decide" in h.value and "top 10" in h.value for h in at.subheader)
    assert any("1 − RBO" in c.value and "The most important:" in c.value for c in at.caption)
    ranked = [c for c in charts if '"1 − RBO"' in c.proto.spec or "1 − RBO" in c.proto.spec]
    assert ranked, "the ranking-importance heatmap is drawn"


def test_keywords_page_picks_any_system_and_measure(built_frm, tmp_path, monkeypatch):
    """Every system that can explain is offered (BM25, glove-mean and the fixture's FRM here; never a tree search);
    BM25's exact terms sum to its score; both candidates' heatmaps share one scale (their largest |importance|), diverging at 0."""
    import json

    from core.registry import display_name

    at = _page_on_report({"default": {"system": "frm", "method": "occlusion"}, "test": []}, tmp_path, monkeypatch)
    systems = at.selectbox(key="keywords.system")
    assert systems.value == "frm"
    labels = list(systems.options)
    assert all(any(label.startswith(display_name(n)) for label in labels) for n in ("bm25", "glove-mean", "frm"))
    assert not any(label.startswith(display_name("tree-bert")) for label in labels)
    assert at.selectbox(key="keywords.method.frm").value == "occlusion"
    assert any("Spearman ρ between occlusion and the model's own w(k, q)" in c.value for c in at.caption)
    systems.set_value("bm25").run()
    assert not at.exception, at.exception
    at.selectbox(key="keywords.method.bm25").set_value("terms").run()
    assert not at.exception, at.exception
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert specs[0]["data"][0]["zmin"] == 0 and specs[0]["data"][0]["zmax"] == 1  # the ranking view: 1 − RBO
    traces = [s["data"][0] for s in specs if "zmid" in s["data"][0]]  # candidates A and B: one scale for both
    values = [x for trace in traces for row in trace["z"] for x in row if x is not None]
    assert len(traces) == 2 and all(t["textfont"]["size"] >= 14 for t in traces)  # legible words
    for trace in traces:
        assert trace["zmid"] == 0 and trace["zmax"] == pytest.approx(max(abs(x) for x in values))
        assert trace["zmin"] == pytest.approx(-trace["zmax"])
    assert any("One scale for both candidates" in c.value for c in at.caption)
    assert all(json.loads(c.proto.config or "{}").get("displayModeBar") is False
               for c in at.get("plotly_chart")), "no toolbar over the cells"
    assert any("exact per-term contributions" in c.value for c in at.caption)
    assert any(t.value.startswith("bm25 (terms, score") for t in at.text)


def test_keywords_page_shows_the_measured_default_and_its_figures(built_frm, tmp_path, monkeypatch):
    """The default view and its two held-out figures come from the faithfulness report; when the paper-loss
    FRM's own weights fail there, the page says so and names the view that passes."""
    row = {"system": "frm", "method": "gradient", "faithful": True, "plausible": True, "spearman_idf": 0.41,
           "stop_share_top2": 0.12, "comprehensiveness": {"top": 0.3, "random": 0.1, "bottom": 0.02},
           "sufficiency": {"top": 0.05, "random": 0.2, "bottom": 0.3}}
    at = _page_on_report({"default": {"system": "frm", "method": "gradient"}, "held_out": [row],
                          "paper_loss_note": "The paper-loss FRM's own w(k, q) fails on held-out pairs.",
                          "reduced_training": {"frm": "2,000 training pairs, 2 epochs"},
                          "default_passes_dev": False,
                          "dev_failures": ["frm gradient seed 14: stop words in top-2 30%",
                                           "frm w seed 13: not faithful"]},
                         tmp_path, monkeypatch, "keyword_faithfulness.json")
    assert at.selectbox(key="keywords.system").value == "frm"
    assert at.selectbox(key="keywords.method.frm").value == "gradient"
    caption = " ".join(c.value for c in at.caption)
    assert "Spearman with IDF +0.41" in caption and "0.300" in caption and "12%" in caption
    assert "does not pass for every seed (frm gradient seed 14: stop words in top-2 30%)" in caption, caption
    assert "reduced FRM trainings (2,000 training pairs, 2 epochs), not on this build's model" in caption
    at.selectbox(key="keywords.method.frm").set_value("w").run()
    assert any("fails on held-out pairs" in w.value for w in at.warning)
    assert not at.exception


def test_keywords_page_says_why_the_every_system_report_chose_its_default(built_frm, tmp_path, monkeypatch):
    """The every-system report states why its default was chosen (under which rule); the page's caption says it."""
    ci = lambda m: [m, m - .05, m + .05]  # noqa: E731
    row = {"system": "bm25", "method": "terms", "more_faithful_than_random": True, "plausible": True,
           "verdict": "more faithful than random on both measures", "spearman_idf": 0.26, "stop_share_top2": 0.22,
           "comprehensiveness": {"top": ci(1.06), "random": ci(.42), "top_minus_random": ci(.64)},
           "sufficiency": {"top": ci(.86), "random": ci(1.5), "top_minus_random": ci(-.64)}}
    at = _page_on_report({"default": {"system": "bm25", "method": "terms"}, "test": [row],
                          "why": "the first in the dev order whose query view passes both probes"}, tmp_path, monkeypatch)
    assert at.selectbox(key="keywords.system").value == "bm25"
    caption = " ".join(c.value for c in at.caption)
    assert "The default: chosen on dev: the first in the dev order whose query view passes both probes" in caption
    assert "a rule fixed in advance" not in caption and "1.060" in caption, caption


def test_keywords_page_warns_when_the_measured_default_is_not_built(built_frm, tmp_path, monkeypatch):
    """The report's default (frm@kw-loss here) is not built in this folder: the page shows a built view and says
    which default it is not showing and how to build it, never silently another explanation."""
    at = _page_on_report({"default": {"system": "frm@kw-loss", "method": "w"}, "held_out": []}, tmp_path, monkeypatch,
                         "keyword_faithfulness.json")
    assert at.selectbox(key="keywords.system").value == "bm25"  # the first system that can explain
    warning = " ".join(w.value for w in at.warning)
    assert "is not built" in warning and "--variant=kw-loss" in warning, warning


def _box(at: AppTest, label: str):
    return next(s for s in at.selectbox if s.label == label)


def test_keywords_page_new_query_new_candidates_query_in_url_and_colours_from_zero(built_frm):
    """A new query starts the candidate boxes afresh (BM25 #1 and #2 of the new query, never the previous picks);
    the query is written to the URL, so a reload (a new session on that URL) shows it again; the heatmap's
    colours are anchored at 0, no importance (white), not at the smallest weight shown."""
    import json

    first, second = list(built_frm.queries)[:2]
    at = _app()
    at.query_params["qid"] = first
    at.run()
    assert not at.exception, at.exception
    assert at.query_params.get("qid") in (first, [first])
    _box(at, "Candidate B").set_value(3).run()
    assert _box(at, "Candidate B").value == 3
    at.selectbox(key="keywords.pick").set_value(second).run()
    assert not at.exception, at.exception
    assert (_box(at, "Candidate A").value, _box(at, "Candidate B").value) == (0, 1)
    assert _box(at, "Candidate A").options[0].startswith("BM25 #1: ")
    typed = "How do I learn to cook rice well?"
    at.text_input(key="keywords.query").set_value(typed).run()
    assert not at.exception, at.exception
    params = {k: at.query_params[k] for k in at.query_params}
    assert params.get("q") in (typed, [typed]) and "qid" not in params, params
    reload = _app()
    for k, v in params.items():
        reload.query_params[k] = v
    reload.run()
    assert not reload.exception, reload.exception
    assert reload.text_input(key="keywords.query").value == typed
    heat = [json.loads(c.proto.spec) for c in reload.get("plotly_chart") if '"heatmap"' in c.proto.spec]
    tokens = [t for t in heat if t["data"][0].get("colorscale") and t["data"][0].get("texttemplate") == "%{text}"]
    ranked, tokens = tokens[0], tokens[1:]  # the ranking view comes first: 1 − RBO from 0 (white) to 1
    assert (ranked["data"][0]["zmin"], ranked["data"][0]["zmax"]) == (0.0, 1.0) and tokens
    weights = [w for fig in tokens for row in fig["data"][0]["z"] for w in row if w is not None]
    for fig in tokens:
        # diverging around 0 (white: no importance), one scale for the view's pairs: never the shown minimum to maximum
        assert fig["data"][0]["zmin"] == -fig["data"][0]["zmax"] and fig["data"][0].get("zmid") == 0.0
        assert fig["data"][0]["zmax"] == pytest.approx(max(abs(w) for w in weights))


def test_keywords_page_states_the_query_views_held_out_figures(built_frm, tmp_path, monkeypatch):
    """Above the pairs, the query view says how faithful it was on held-out queries of this dataset (the report of
    bench/query_view_faithfulness.py), and that it was not measured for a system the report lacks."""
    import json

    from core.analysis import keyword_quality

    ci = lambda m: [m, m - .05, m + .05]  # noqa: E731
    row = {"system": "bm25", "queries": 300, "verdict": "more faithful than random on both measures",
           "comprehensiveness": {"top": ci(.71), "random": ci(.37)}, "sufficiency": {"top": ci(.59), "random": ci(.82)},
           "spearman_idf": 0.35, "stop_share_top2": 0.22}
    report = tmp_path / "query_view_faithfulness.json"
    report.write_text(json.dumps({"dataset": built_frm.name, "test": [row], "dev": []}))
    monkeypatch.setattr(keyword_quality, "QUERY_REPORT", report)
    at = _app()
    at.query_params["q"] = "How can I stop my depression?"
    at.run()
    assert not at.exception, at.exception
    at.selectbox(key="keywords.system").set_value("bm25").run()
    assert not at.exception, at.exception
    caption = " ".join(c.value for c in at.caption)
    assert f"On 300 held-out {built_frm.name} queries" in caption and "by 0.71 (random k words: 0.37)" in caption
    assert "more faithful than random on both measures" in caption and "stop words among the top 2: 22%" in caption
    at.selectbox(key="keywords.system").set_value("glove-mean").run()
    assert not at.exception, at.exception
    assert any("This view of" in c.value and "is not measured on" in c.value for c in at.caption)
