"""A first use that builds or encodes shows its progress with counts and time left on the pages (the loader gets
a progress callback through ``ui.cache``: a bar, or Compare's background load line), never a bare spinner."""
from __future__ import annotations

from tests.conftest import app_test, wait_for_background_loads


def test_compare_never_waits_for_a_first_use_build_it_loads_in_the_background(tiny_data, fresh_var, monkeypatch):
    """Compare's first visit draws at once: a system this process has not loaded says so as information, with
    the load's progress (counts, time left) refreshed below; once the load ends, the next run shows its results
    and no loading line; the load reported its indexing to the end."""
    import threading

    import streamlit as st

    import core.serving.loader
    import ui.background_loads as bg

    monkeypatch.setenv("QRS_PAGE_WAIT", "0")
    st.cache_resource.clear()
    gate, reports, real = threading.Event(), [], core.serving.loader.load

    def held(*args, **kwargs):  # the load waits until the page has drawn once
        gate.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(core.serving.loader, "load", held)
    monkeypatch.setattr(bg.Load, "progress", lambda self, f, m: (reports.append((f, m)), setattr(self, "message", m)))
    at = app_test("pages/1_Compare.py").run()
    at.multiselect(key="compare.systems").set_value(["bm25"]).run()
    at.text_input(key="compare.query").input("How do I learn Python fast ?").run()
    assert not at.exception and not at.error, (at.exception, at.error)
    assert any("bm25: loading in the background" in i.value for i in at.info), [i.value for i in at.info]
    assert any("Loading in the background" in c.value and "bm25" in c.value for c in at.caption)
    gate.set()
    wait_for_background_loads(120)
    at.run()
    assert not at.exception and not any("loading in the background" in i.value for i in at.info)
    assert any("bm25" in d.value.columns.tolist() or "system" in d.value.columns for d in at.dataframe)
    assert any("indexing" in m for _, m in reports) and reports[-1][0] == 1.0
    st.cache_resource.clear()


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
