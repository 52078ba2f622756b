"""The default build: status files, reuse of built systems, failures recorded, background process."""
from __future__ import annotations

import os
import time

import pytest

from core import build
from core.data.datasets import load_dataset
from core.registry import get_spec


def test_build_writes_status_and_reuses(tiny_data, fresh_var):
    (status,) = build.build_all("qqp-bimpm", ["bm25"], echo=False)
    assert status.state == "ready" and status.metrics["index_seconds"] >= 0
    ds = load_dataset("qqp-bimpm")
    assert build.read_status(ds, get_spec("bm25")).state == "ready"
    (again,) = build.build_all("qqp-bimpm", ["bm25"], echo=False)
    assert again.message == "already built"
    assert again.metrics == status.metrics and again.seconds is not None  # the record survives


def test_failure_is_recorded_not_raised(tiny_data, fresh_var, monkeypatch):
    from core.retrieval import bm25

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(bm25, "build", broken)
    (status,) = build.build_all("qqp-bimpm", ["bm25"], echo=False)
    assert status.state == "failed" and "disk full" in status.error
    assert build.read_status(load_dataset("qqp-bimpm"), get_spec("bm25")).state == "failed"


def test_one_build_at_a_time(tiny_data, fresh_var):
    with build.build_lock("qqp-bimpm") as first:
        assert first and build.build_running("qqp-bimpm")
        with pytest.raises(build.BuildRunningError, match="another build"):
            build.build_all("qqp-bimpm", ["bm25"], echo=False)
    assert not build.build_running("qqp-bimpm")


def test_background_build_runs_detached(tiny_data, fresh_var):
    assert build.start_background_build("qqp-bimpm", systems=["bm25"])
    ds = load_dataset("qqp-bimpm")
    deadline = time.time() + 120
    while time.time() < deadline and build.read_status(ds, get_spec("bm25")).state != "ready":
        time.sleep(0.5)
    assert build.read_status(ds, get_spec("bm25")).state == "ready"
    assert "bm25" in build.build_log_tail("qqp-bimpm")
    # detached: another process (its pid is in the lock file) built it, and it let go of the lock
    lock = build._status_dir("qqp-bimpm") / "build.lock"
    builder = int(lock.read_text().strip())
    assert builder != os.getpid()
    while time.time() < deadline and build.build_running("qqp-bimpm"):
        time.sleep(0.2)
    assert not build.build_running("qqp-bimpm")


def _queue(ds_name: str, states: dict[str, str]) -> None:
    from core.artifacts import save_json

    save_json(build._status_dir(ds_name) / build.QUEUE_FILE, list(states))
    for label, state in states.items():
        system, _, variant = label.partition("@")
        build.write_status(ds_name, build.BuildStatus(system, state, progress=0.4 if state == "building" else 0.0,
                                                      message="epoch 2/6" if state == "building" else "waiting"),
                           variant or None)


def test_a_system_the_background_build_has_says_queued_or_building_not_a_command(tiny_data, fresh_var):
    """While the build runs, loading a queued system names its place in the queue, never `python -m core ...`."""
    from core.errors import BuildPendingError, MissingArtifactError
    from core.serving.loader import load

    ds = load_dataset("qqp-bimpm")
    with pytest.raises(MissingArtifactError, match="python -m core"):  # no build running: the command
        load("dual-encoder", ds)
    with build.build_lock(ds.name) as acquired:
        assert acquired and build.build_running(ds.name)
        _queue(ds.name, {"glove-mean": "ready", "dual-encoder": "building", "densetrans": "queued",
                         "sdml-cnn": "queued"})
        with pytest.raises(BuildPendingError) as building:
            load("dual-encoder", ds)
        assert "dual-encoder: building: step 2/4" in str(building.value)
        assert "epoch 2/6" in str(building.value) and "python -m core" not in str(building.value)
        with pytest.raises(BuildPendingError) as queued:
            load("sdml-cnn", ds)
        assert "queued (position 2)" in str(queued.value) and "python -m core" not in str(queued.value)
        assert "dual-encoder is building now" in str(queued.value)
        assert build.pending_note(ds.name, "densetrans").count("position 1") == 1
        assert build.pending_note(ds.name, "frm") is None  # not in this build: the usual message and command
    assert build.pending_note(ds.name, "sdml-cnn") is None  # the build stopped


def test_compare_shows_the_queue_position_for_a_system_being_built(built):
    from tests.conftest import app_test

    ds = load_dataset("qqp-bimpm")
    with build.build_lock(ds.name):
        _queue(ds.name, {"dual-encoder": "building", "densetrans": "queued"})
        at = app_test("pages/1_Compare.py").run()
        at.multiselect(key="compare.systems").set_value(["bm25", "dual-encoder", "densetrans"]).run()
        at.text_input(key="compare.query").input("How do I learn Python fast?").run()
        assert not at.exception
        # a normal state, not a failure: an info box naming the system once, no red error box
        assert not at.error, [e.value for e in at.error]
        notes = [e.value for e in at.info]
        assert any(e.startswith("dual-encoder: building: step 1/2") for e in notes), notes
        assert any(e.startswith("densetrans: queued (position 1)") for e in notes), notes
        for system in ("dual-encoder", "densetrans"):
            assert all(e.count(f"{system}:") <= 1 for e in notes), notes
        assert not any("python -m core" in e or "Build it with" in e for e in notes), notes


def test_a_fixed_run_asked_for_a_typed_query_is_a_normal_state_named_once():
    """A fixed run cannot rank a typed query: that is what it is (information, not an error), and the line
    that names the system is not prefixed with its name again."""
    from core.errors import NotReadyError, QueryError
    from core.retrieval.fixed_run import typed_query_error
    from ui.render import system_line

    exc = typed_query_error("my-run")
    assert isinstance(exc, NotReadyError) and isinstance(exc, QueryError)  # the CLI still exits 2 on it
    assert system_line("my-run", str(exc)) == "my-run is a fixed run: it cannot rank a typed query"
    assert system_line("tree-bert-cross", "tree-bert-cross: queued (position 4) in the background build") \
        == "tree-bert-cross: queued (position 4) in the background build"
    assert system_line("minilm (k=10)", "index missing") == "minilm (k=10): index missing"


def test_default_build_builds_the_recipes_a_default_rests_on(tiny_data):
    """``Recipe.default_build``: frm@kw-loss (the Keywords page's measured default explanation) is built by
    ``build --all`` right after frm; a recipe without a reason (densetrans@paper-objective) is not."""
    from core.registry import default_build_targets

    ds = load_dataset("qqp-bimpm")
    targets = [(s.name, v) for s, v in default_build_targets(ds)]
    assert ("frm", "kw-loss") in targets and targets.index(("frm", "kw-loss")) == targets.index(("frm", None)) + 1
    assert ("densetrans", "paper-objective") not in targets
    assert all(get_spec(s).recipes and any(r.variant == v and r.default_build for r in get_spec(s).recipes)
               for s, v in targets if v is not None)
