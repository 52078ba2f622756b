"""Bench commands fail as the CLI does: bad input or an unbuilt system is one ``error:`` line and exit code 2."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ppi_simulation_with_an_unbuilt_judge_is_one_line(tiny_data, fresh_var):
    env = {**os.environ, "QRS_VAR": str(fresh_var), "QRS_DATA": str(tiny_data), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "bench.ppi_simulation", "--dataset", "qqp-bimpm", "--judge",
                           "cross-encoder", "--out", str(fresh_var / "r.json")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and lines[-1].startswith("error: ")
    assert "cross-encoder on qqp-bimpm is not built yet" in lines[-1]
    assert "python -m core train --system cross-encoder --dataset qqp-bimpm" in lines[-1]
    assert not (fresh_var / "r.json").exists()


def test_every_bench_command_runs_guarded():
    """Each ``python -m bench.X`` entry goes through the CLI's ``guarded`` (one line, exit 2 on a StudioError)."""
    for path in sorted((ROOT / "bench").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        mains = [node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)]
        for node in mains:
            assert "guarded(main)" in ast.unparse(node), f"{path.name}: its __main__ does not run main guarded"


def test_guarded_is_one_line_and_exit_2(capsys):
    from core.cli.main import guarded
    from core.errors import StudioError

    def bad() -> int:
        raise StudioError("no such thing\nsecond line")

    assert guarded(bad) == 2
    assert capsys.readouterr().err == "error: no such thing second line\n"
    assert guarded(lambda: None) == 0 and guarded(lambda: 3) == 3
