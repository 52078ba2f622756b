"""Every benchmark script under bench/ compiles (a script that only `make reproduce` runs would otherwise break
unseen), and the ones `make reproduce` calls answer --help without building anything."""
from __future__ import annotations

import py_compile
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SCRIPTS = sorted((ROOT / "bench").glob("*.py"))


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_bench_script_compiles(path, tmp_path):
    py_compile.compile(str(path), cfile=str(tmp_path / "out.pyc"), doraise=True)


@pytest.mark.parametrize("command", [
    ["bench/layers_curves.py"], ["bench/first_stage_train.py"], ["-m", "bench.dev_decisions"], ["-m", "bench.frm_pairs"], ["-m", "bench.densetrans_ablations"],
    ["-m", "bench.query_forms"], ["-m", "bench.tables"], ["-m", "bench.determinism"], ["-m", "bench.milvus_parity"],
])
def test_reproduce_steps_answer_help(command):
    result = subprocess.run([sys.executable, *command, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage" in result.stdout.lower()
