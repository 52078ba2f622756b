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
        with pytest.raises(RuntimeError, match="another build"):
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
