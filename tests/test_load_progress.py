"""A first use that builds or encodes shows a progress bar with counts and time left on the pages (the loader gets
the page's progress callback through ``ui.cache``), never a bare spinner."""
from __future__ import annotations

import pytest

from tests.conftest import app_test


class _Recorder:
    """Stands in for ``ui.cache.LoadBar``: keeps every report."""

    made: list["_Recorder"] = []

    def __init__(self, title: str) -> None:
        self.title, self.reports, self.closed = title, [], False
        _Recorder.made.append(self)

    def __call__(self, fraction: float, message: str) -> None:
        self.reports.append((fraction, message))

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def recorder(monkeypatch):
    import streamlit as st

    import ui.cache

    st.cache_resource.clear()
    _Recorder.made = []
    monkeypatch.setattr(ui.cache, "LoadBar", _Recorder)
    yield _Recorder
    st.cache_resource.clear()


def test_compare_draws_the_first_use_build_of_a_system(tiny_data, fresh_var, recorder):
    at = app_test("pages/1_Compare.py").run()
    at.multiselect(key="compare.systems").set_value(["bm25"]).run()
    at.text_input(key="compare.query").input("How do I learn Python fast ?").run()
    assert not at.exception
    bars = [r for r in recorder.made if r.reports]
    assert bars and bars[0].title == "Loading bm25" and bars[0].closed
    assert any("indexing" in m for _, m in bars[0].reports) and bars[0].reports[-1][0] == 1.0


def test_load_bar_says_counts_and_time_left(monkeypatch):
    import ui.cache

    drawn = []

    class Bar:
        def progress(self, fraction, text):
            drawn.append((fraction, text))

        def empty(self):
            drawn.append("empty")

    monkeypatch.setattr(ui.cache.st, "progress", lambda fraction, text: (drawn.append((fraction, text)), Bar())[1])
    ticks = iter([10.0, 20.0])
    bar = ui.cache.LoadBar("Loading my-minilm")
    bar._clock = lambda: next(ticks)
    bar.start = 0.0
    bar(0.25, "250/1,000 texts encoded")
    bar(1.0, "1,000/1,000 texts encoded")
    bar.close()
    assert drawn[0] == (0.25, "Loading my-minilm: 250/1,000 texts encoded · about 30 s left")
    assert drawn[1] == (1.0, "Loading my-minilm: 1,000/1,000 texts encoded") and drawn[-1] == "empty"
