"""The CLI end to end, as a user runs it (subprocesses on the tiny fixture)."""
from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT, TINY_DATA


def run_cli(*args: str, var) -> subprocess.CompletedProcess:
    env = {**os.environ, "QRS_VAR": str(var), "QRS_DATA": str(TINY_DATA)}
    return subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_train_eval_and_run_file(tmp_path):
    var = tmp_path / "var"
    out = run_cli("systems", var=var)
    assert out.returncode == 0 and "bm25" in out.stdout and "not built" in out.stdout
    out = run_cli("eval", "--system", "densetrans", var=var)  # an expensive artifact names its build command
    assert out.returncode == 2 and "python -m core train --system densetrans" in out.stderr
    out = run_cli("eval", "--system", "bm25", "--metrics", "map@20", var=var)  # a cheap one is built (issue 15)
    assert out.returncode == 0 and "note: building the bm25 index for qqp-bimpm" in out.stderr, out.stderr
    out = run_cli("train", "--system", "bm25", var=var)
    assert out.returncode == 0, out.stderr
    run_file = tmp_path / "bm25.trec"
    out = run_cli("eval", "--system", "bm25", "--metrics", "map@20,P@1,recall@100", "--run-out", str(run_file), var=var)
    assert out.returncode == 0, out.stderr
    assert "each query removed from its own ranking" in out.stdout and "map@20" in out.stdout
    from_system = [line for line in out.stdout.splitlines() if line.startswith("map@20")]
    out = run_cli("eval", "--run", str(run_file), "--metrics", "map@20,P@1,recall@100", var=var)
    assert out.returncode == 0, out.stderr
    assert [line for line in out.stdout.splitlines() if line.startswith("map@20")] == from_system
    out = run_cli("search", "--system", "bm25", "How do I learn Python fast ?", var=var)
    assert out.returncode == 0 and "learn Python" in out.stdout


def test_bad_input_gives_one_clear_line(tmp_path):
    var = tmp_path / "var"
    out = run_cli("eval", "--system", "nope", var=var)
    assert out.returncode == 2 and "unknown system 'nope'" in out.stderr and "Traceback" not in out.stderr
    out = run_cli("eval", "--system", "bm25", "--metrics", "foo@3", var=var)
    assert out.returncode == 2 and "unknown metric" in out.stderr
    bad = tmp_path / "bad.tsv"
    bad.write_text("1\ta\n", encoding="utf-8")
    out = run_cli("data", "import", "--kind", "pairs", "--name", "x", str(bad), var=var)
    assert out.returncode == 2 and "bad.tsv:1" in out.stderr
