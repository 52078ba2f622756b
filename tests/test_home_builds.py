"""Builds only when asked: choosing a dataset on Home never starts a build; Home offers the default build's missing
systems with an estimate and starts exactly those on a click; an up-to-date build is never started."""
from __future__ import annotations

import pytest

from tests.byod_env import byod  # noqa: F401  (user/cqa and user/answers imported in a private var)
from tests.conftest import app_test


@pytest.fixture
def starts(monkeypatch):
    """Every background build Home would start, recorded instead of started."""
    import core.build_plan

    calls: list[tuple[str, list[str] | None]] = []
    monkeypatch.setattr(core.build_plan, "start_background_build",
                        lambda name, profile="quick", systems=None: calls.append((name, systems)) or True)
    return calls


def test_choosing_a_dataset_never_starts_a_build(byod, tiny_data, starts, monkeypatch):  # noqa: F811
    monkeypatch.setenv("QRS_AUTOBUILD", "1")
    monkeypatch.setenv("QRS_DATASET", "user/cqa")  # the server's own dataset (its build is make run's)
    at = app_test("app.py")
    at.session_state["dataset"] = "user/answers"
    at.run()
    assert not at.exception
    at.selectbox(key="home.dataset").set_value("qqp-bimpm").run()
    assert not at.exception
    assert [name for name, _ in starts if name != "user/cqa"] == []  # neither the first nor the chosen dataset
    assert any("Default build:" in c.value and "ready on qqp-bimpm" in c.value for c in at.caption)
    # the click, on Home run alone (AppTest does not pass a click through app.py's navigation; its page links
    # need that navigation, so they are left out here)
    import streamlit

    monkeypatch.setattr(streamlit, "page_link", lambda *a, **k: None)
    home = app_test("pages/0_Home.py")
    home.session_state["dataset"] = "qqp-bimpm"
    home.run()
    button = home.button(key="home.build")
    assert button.label.startswith("Build the default systems for this dataset (") and "missing" in button.label
    assert not starts
    button.click().run()
    assert not home.exception, home.exception
    assert any("Started the background build" in s.value for s in home.success)
    from core.build_plan import default_build_plan
    from core.data.datasets import load_dataset

    plan = default_build_plan(load_dataset("qqp-bimpm"))
    assert starts[-1] == ("qqp-bimpm", list(plan.missing)) and plan.missing  # exactly the missing ones


def test_an_up_to_date_build_is_never_started(byod, starts, monkeypatch):  # noqa: F811
    import core.build_plan
    from core.build_plan import build_missing, default_build_plan
    from core.registry import get_spec
    from core.retrieval import bm25

    cqa, _ = byod
    monkeypatch.setattr(core.build_plan, "default_build_targets", lambda ds: [(get_spec("bm25"), None)])
    plan = default_build_plan(cqa)
    assert plan.missing == ("bm25",) and plan.untimed == ("bm25",) and "time unknown" in plan.offer()
    bm25.build(cqa)
    plan = default_build_plan(cqa)
    assert plan.up_to_date and plan.ready == ("bm25",) and plan.offer().startswith("Nothing to build")
    assert build_missing(cqa) is False and starts == []
