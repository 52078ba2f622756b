"""The user systems file under concurrent adds (two processes, a file lock), and a bi-encoder added with a dataset
registered as usable only once its encoding is done (an interrupted encoding leaves nothing half-added)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import sys, time
import core  # noqa: F401
import tomli_w
from core import user_systems

slow = tomli_w.dumps
def dumps(table):  # a slow disk: the window between reading the file and replacing it is wide
    time.sleep(0.05)
    return slow(table)
tomli_w.dumps = dumps
user_systems._check_model_folder = lambda path, way: None  # the folder is not what this checks
tag, folder = sys.argv[1], sys.argv[2]
for i in range(8):
    user_systems.add_user_system(f"{tag}-{i}", "cross-encoder", folder)
"""


def test_two_processes_adding_at_once_lose_nothing(fresh_var, tmp_path):
    from core.user_systems import read_user_systems

    folder = tmp_path / "model"
    folder.mkdir()
    env = {**os.environ, "QRS_VAR": str(fresh_var), "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, tag, str(folder)], cwd=ROOT, env=env,
                              stderr=subprocess.PIPE, text=True) for tag in ("a", "b")]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    names = sorted(s.name for s in read_user_systems())
    assert names == sorted(f"{t}-{i}" for t in "ab" for i in range(8))
    assert not list(fresh_var.glob(".user_systems.toml.tmp*"))


@pytest.fixture
def fresh_registry():
    from core import registry

    registry.refresh()
    yield
    registry.refresh()


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "my-model"
    folder.mkdir()
    return folder


def test_an_interrupted_encoding_leaves_nothing_added(built, fresh_registry, tmp_path, monkeypatch):
    from core import build, user_systems
    from core.registry import list_systems
    from tests.conftest import run_main

    monkeypatch.setattr(user_systems, "_check_model_folder", lambda path, way: None)
    seen = {}

    def interrupted(dataset, name, force=False, listener=None):
        seen["state"] = next(s.state for s in user_systems.read_user_systems() if s.name == name)
        raise KeyboardInterrupt

    monkeypatch.setattr(build, "build_system", interrupted)
    try:  # Ctrl-C during the encoding: the CLI stops with its interrupt code
        code = run_main("systems", "add", "my-bi", "--bi-encoder", str(_folder(tmp_path)), "--dataset", "qqp-bimpm")[0]
    except KeyboardInterrupt:
        code = 130
    assert code != 0
    assert seen["state"] == "encoding"  # not usable while it encodes
    assert user_systems.read_user_systems() == [] and "my-bi" not in {s.name for s in list_systems()}


def test_a_killed_encoding_is_listed_as_encoding_and_the_same_add_resumes_it(built, fresh_registry, tmp_path,
                                                                              monkeypatch):
    from core import build, user_systems
    from core.registry import get_spec
    from tests.conftest import run_main

    monkeypatch.setattr(user_systems, "_check_model_folder", lambda path, way: None)
    folder = _folder(tmp_path)
    user_systems.add_user_system("my-bi", "bi-encoder", folder, "qqp-bimpm", state="encoding")  # then killed
    assert "being encoded on qqp-bimpm, not usable yet" in get_spec("my-bi").note

    class Done:
        state, error = "ready", None

    monkeypatch.setattr(build, "build_system", lambda dataset, name, force=False, listener=None: Done())
    code, out, err = run_main("systems", "add", "my-bi", "--bi-encoder", str(folder), "--dataset", "qqp-bimpm")
    assert code == 0, err
    assert "encoded on qqp-bimpm" in out
    (entry,) = user_systems.read_user_systems()
    assert entry.state == "" and "being encoded" not in get_spec("my-bi").note
