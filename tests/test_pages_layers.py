"""AppTest: the Layers page from two independent sessions that share the process-wide caches; the measure it draws,
its exclusion counts and the DenseTrans − (−AllDense) confidence band.

Regression: the per-layer curve was an ``st.cache_data`` function handed the page's
progress bar, so the second session (another browser, a reload) replayed the bar's calls onto a block
that no longer existed and got ``CacheReplayClosureError`` instead of the curve.
"""
from __future__ import annotations

import json

import pytest

from tests.conftest import app_test, wait_for_background_loads


@pytest.fixture
def built_minilm(built):
    """BM25 and the pretrained MiniLM on the tiny fixture (seconds); DenseTrans stays unbuilt."""
    import streamlit as st

    from core.data.datasets import load_dataset
    from core.retrieval import bert

    bert.build(load_dataset("qqp-bimpm"))
    st.cache_resource.clear()
    st.cache_data.clear()
    yield built
    st.cache_resource.clear()
    st.cache_data.clear()


def _layers_session():
    at = app_test("pages/2_Layers.py")
    at.session_state["layers.sources"] = ["MiniLM mean", "DenseTrans"]
    at.session_state["layers.n"] = 40
    return at.run()


def test_layers_second_session_reuses_the_curve_without_replaying_ui(built_minilm):
    from ui.cache import layer_curve_cached

    first = _layers_session()
    assert not first.exception, first.exception
    curve = layer_curve_cached("MiniLM mean", "qqp-bimpm", 40, "random", 13)
    assert curve is not None and curve.n_triples == 40  # computed once, kept for the process
    second = _layers_session()  # a new session: same settings, served from the cache
    assert not second.exception, second.exception
    assert layer_curve_cached("MiniLM mean", "qqp-bimpm", 40, "random", 13) is curve
    charts = second.get("plotly_chart")
    assert charts and "MiniLM mean" in [t.get("name") for t in json.loads(charts[0].proto.spec)["data"]]
    # DenseTrans is not built: a clear note naming the build command, in both sessions
    for at in (first, second):
        assert any("python -m core train --system densetrans" in i.value for i in at.info), [i.value for i in at.info]
    # the page names the measure it draws (AUC by default) and tabulates both measures with the exclusions
    assert any(h.value.startswith("Drawn: AUC") for h in second.subheader), [h.value for h in second.subheader]
    table = second.dataframe[0].value
    assert {"AUC", "paper |Δ log cos|", "excluded (cos ≤ 0)", "excluded %"} <= set(table.columns)
    assert set(table["representation"]) == {"MiniLM mean"} and len(table) == curve.n_layers
    assert table["excluded (cos ≤ 0)"].tolist() == curve.paper.excluded.tolist()


def test_layers_draws_the_chosen_measure_exclusions_and_the_ci_band(built, monkeypatch):
    """Synthetic curves in place of built models (ui.cache patched): the paper's measure drawn on request, its
    per-layer exclusions in a note, the hover and the table, and the paired CI band for DenseTrans − (−AllDense)."""
    import numpy as np

    import ui.cache
    from core.analysis.layers import LayerCurve, bootstrap_ci

    rng = np.random.default_rng(0)
    curves = {label: LayerCurve(label, np.clip(rng.normal(0.5 + shift, 0.3, (4, 40)), -1, 1),
                                np.clip(rng.normal(0.2, 0.3, (4, 40)), -1, 1), "same triples")
              for label, shift in (("DenseTrans", 0.2), ("DenseTrans -AllDense", 0.0))}
    monkeypatch.setattr(ui.cache, "layer_curve_cached", lambda label, *a: curves[label])
    at = app_test("pages/2_Layers.py")
    at.session_state["layers.sources"] = list(curves)
    at.session_state["layers.n"] = 40
    at.session_state["layers.measure"] = "paper"
    at.session_state["layers.query"] = ""  # the one-query section stays quiet
    at.run()
    assert not at.exception, at.exception
    assert any(h.value.startswith("Drawn: paper's mean |log cos") for h in at.subheader)
    excluded = curves["DenseTrans"].paper.excluded
    assert excluded.sum() > 0
    note = next(i.value for i in at.info if i.value.startswith("DenseTrans: the paper's measure excluded"))
    assert ", ".join(str(int(e)) for e in excluded) in note
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    trace = next(t for t in spec["data"] if t.get("name") == "DenseTrans")
    assert [c[0] for c in trace["customdata"]] == excluded.tolist() and "excluded" in trace["hovertemplate"]
    np.testing.assert_allclose(trace["y"], curves["DenseTrans"].paper.mean)
    band = json.loads(at.get("plotly_chart")[1].proto.spec)["data"]
    ci = bootstrap_ci(curves["DenseTrans"], "paper", curves["DenseTrans -AllDense"], n_resamples=1000, seed=13)
    np.testing.assert_allclose(band[0]["y"], list(ci.high) + list(ci.low[::-1]))
    cis = at.dataframe[1].value
    assert len(cis) == 2 * 4 and {"95% CI low", "95% CI high"} <= set(cis.columns)


def test_layers_preselects_only_what_the_default_build_builds(built):
    at = app_test("pages/2_Layers.py")
    at.session_state["layers.query"] = ""
    at.run()
    assert not at.exception, at.exception
    chosen = at.multiselect(key="layers.sources").value
    assert chosen == ["MiniLM [CLS]", "MiniLM mean", "DenseTrans"], chosen  # not the −AllDense ablation
    assert "DenseTrans -AllDense" in at.multiselect(key="layers.sources").options


def test_layers_computes_a_new_curve_in_the_background_and_fills_in(built_minilm, monkeypatch):
    """A visit never waits for a curve: with no wait allowed, the first run says it is computing in the background
    (with its progress below) and draws no chart; once done, the next run draws it from the cache."""
    monkeypatch.setenv("QRS_PAGE_WAIT", "0")
    at = app_test("pages/2_Layers.py")
    at.session_state["layers.sources"] = ["MiniLM mean"]
    at.session_state["layers.n"] = 40
    at.run()
    assert not at.exception, at.exception
    assert any("MiniLM mean: computing its curve in the background" in i.value for i in at.info), \
        [i.value for i in at.info]
    traces = lambda: [t.get("name") for c in at.get("plotly_chart") for t in json.loads(c.proto.spec)["data"]]
    assert "MiniLM mean" not in traces()
    wait_for_background_loads(300)
    at.run()
    assert not at.exception and not any("in the background" in i.value for i in at.info)
    assert "MiniLM mean" in traces()
