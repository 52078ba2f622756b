"""Shared fixtures: every test session gets its own artifacts folder; nothing touches var/."""
from __future__ import annotations

from pathlib import Path

import pytest

import core  # noqa: F401  (first: pins torch's CPU kernels before a test module imports torch)
from tests.pg_server import db_url, postgres_server  # noqa: F401  (PostgreSQL fixtures)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
TINY_DATA = FIXTURES / "data"


@pytest.fixture(autouse=True, scope="session")
def _isolated_artifacts(tmp_path_factory):
    """A session-wide QRS_VAR so tests never read or write the real artifacts folder."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QRS_VAR", str(tmp_path_factory.mktemp("var")))
        mp.setenv("QRS_AUTOBUILD", "0")
        mp.setenv("QRS_PAGE_WAIT", "600")  # pages wait for their loads (one test checks the background path with 0)
        yield


@pytest.fixture
def shared_ray():
    """Ray started once per test session (per xdist worker), on the first test that asks for it, and stopped when
    the session ends: the executor joins it (``core.executor.executor``), so a test does not pay Ray's start and
    its workers' imports again. Jobs carry their own settings, so tests with other ``QRS_*`` share it."""
    import ray

    from core.executor import start_ray

    if not ray.is_initialized():
        start_ray()
    return ray


@pytest.fixture(autouse=True, scope="session")
def _stop_shared_ray():
    yield
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


@pytest.fixture
def no_shared_ray():
    """Ray down for a test that checks how the executor starts or joins (a session's Ray would be joined)."""
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


@pytest.fixture
def tiny_data(monkeypatch):
    """Point the bundled-data folder at the tiny QQP fixture (60+63 real pairs)."""
    monkeypatch.setenv("QRS_DATA", str(TINY_DATA))
    return TINY_DATA


@pytest.fixture
def fresh_var(monkeypatch, tmp_path):
    """A private artifacts folder for one test."""
    monkeypatch.setenv("QRS_VAR", str(tmp_path / "var"))
    return tmp_path / "var"


@pytest.fixture
def built(tiny_data, fresh_var):
    """The tiny fixture with BM25 built: what the page tests run against."""
    from core.data.datasets import load_dataset
    from core.retrieval import bm25

    bm25.build(load_dataset("qqp-bimpm"))
    return fresh_var


def app_test(path: str):
    """An ``AppTest`` for a page of this repository (generous timeout for a loaded CI machine)."""
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file(str(ROOT / path), default_timeout=120)


def run_main(*argv: str) -> tuple[int, str, str]:
    """One CLI verb in this process (``core.cli.main.main``, what ``python -m core`` runs): (exit code, stdout, stderr)."""
    import contextlib
    import io

    from core.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def one_torch_thread():
    """One intra-op torch thread for a module's tests, then the count it had: the test machine is shared, and an
    oversubscribed one runs these models about ten times slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def built_frm(tiny_data, fresh_var):
    """FRM trained a few steps on the tiny fixture (one intra-op thread: deterministic), with BM25 for candidates."""
    import torch

    from core.data.datasets import load_dataset
    from core.rerank import frm
    from core.retrieval import bm25

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    ds = load_dataset("qqp-bimpm")
    bm25.build(ds)
    frm.build(ds, train_config=frm.FRMTrainConfig(train_pairs=24, max_epochs=1, batch_size=8, eval_every=3))
    torch.set_num_threads(before)
    return ds


def wait_for_background_loads(seconds: float) -> None:
    """Until nothing runs on the pages' background threads (``ui.background_loads``); fails after ``seconds``."""
    import time

    import ui.background_loads as bg

    deadline = time.monotonic() + seconds
    while bg.loading():
        assert time.monotonic() < deadline, "the background loads did not end"
        time.sleep(0.1)
