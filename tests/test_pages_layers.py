"""AppTest: the Layers page from two independent sessions that share the process-wide caches.

Regression for issue 14: the per-layer curve was an ``st.cache_data`` function handed the page's
progress bar, so the second session (another browser, a reload) replayed the bar's calls onto a block
that no longer existed and got ``CacheReplayClosureError`` instead of the curve.
"""
from __future__ import annotations

import json

import pytest

from tests.conftest import app_test


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
    assert curve is not None and curve.values.shape[1] == 40  # computed once, kept for the process
    second = _layers_session()  # a new session: same settings, served from the cache
    assert not second.exception, second.exception
    assert layer_curve_cached("MiniLM mean", "qqp-bimpm", 40, "random", 13) is curve
    charts = second.get("plotly_chart")
    assert charts and "MiniLM mean" in [t.get("name") for t in json.loads(charts[0].proto.spec)["data"]]
    # DenseTrans is not built: a clear note naming the build command, in both sessions
    for at in (first, second):
        assert any("python -m core train --system densetrans" in i.value for i in at.info), [i.value for i in at.info]
