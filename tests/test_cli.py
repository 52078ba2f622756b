"""The CLI end to end, as a user runs it on the tiny fixture.

The verbs run in-process through ``core.cli.main.main`` (the code ``python -m core`` runs) so that ranx's
numba containers compile once per test session, not once per verb; one real ``python -m core``
subprocess per test checks the entry point, its output streams and its exit codes.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, TINY_DATA, run_main


def run_cli(*args: str, var) -> subprocess.CompletedProcess:
    """``python -m core ARGS`` in a real process."""
    env = {**os.environ, "QRS_VAR": str(var), "QRS_DATA": str(TINY_DATA)}
    return subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def cli(tiny_data, fresh_var):
    """Run one verb in-process; returns (exit code, stdout, stderr)."""
    return run_main


def test_train_eval_and_run_file(cli, fresh_var, tmp_path):
    code, out, _ = cli("systems")
    assert code == 0 and "bm25" in out and "not built" in out
    code, _, err = cli("eval", "--system", "densetrans")  # an expensive artifact names its build command
    assert code == 2 and "python -m core train --system densetrans" in err
    code, _, err = cli("eval", "--system", "bm25", "--metrics", "map@20")  # a cheap one is built
    assert code == 0 and "note: building the bm25 index for qqp-bimpm" in err, err
    code, _, err = cli("train", "--system", "bm25")
    assert code == 0, err
    run_file = tmp_path / "bm25.trec"
    code, out, err = cli("eval", "--system", "bm25", "--metrics", "map@20,P@1,recall@100", "--run-out", str(run_file))
    assert code == 0, err
    assert "each query removed from its own ranking" in out and "map@20" in out
    from_system = [line for line in out.splitlines() if line.startswith("map@20")]
    code, out, err = cli("eval", "--run", str(run_file), "--metrics", "map@20,P@1,recall@100")
    assert code == 0, err
    assert [line for line in out.splitlines() if line.startswith("map@20")] == from_system
    real = run_cli("search", "--system", "bm25", "How do I learn Python fast ?", var=fresh_var)
    assert real.returncode == 0 and "learn Python" in real.stdout, real.stderr


def test_bad_input_gives_one_clear_line(cli, fresh_var, tmp_path):
    real = run_cli("eval", "--system", "nope", var=fresh_var)
    assert real.returncode == 2 and "unknown system 'nope'" in real.stderr and "Traceback" not in real.stderr
    code, _, err = cli("eval", "--system", "bm25", "--metrics", "foo@3")
    assert code == 2 and "unknown metric" in err and "Traceback" not in err
    bad = tmp_path / "bad.tsv"
    bad.write_text("1\ta\n", encoding="utf-8")
    code, _, err = cli("data", "import", "--kind", "pairs", "--name", "x", str(bad))
    assert code == 2 and "bad.tsv:1" in err
    assert not [p for p in fresh_var.rglob("*") if p.name == "x"]  # nothing of the broken file is kept
