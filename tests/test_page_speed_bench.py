"""bench.page_speed on the tiny fixture: each page timed cold (a fresh process) and warm (a second visitor), with
the load average and the speed probe beside the figures; a bad page name is one line and exit code 2."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT


def test_page_speed_times_a_page_cold_and_warm(built, tmp_path):
    out = tmp_path / "page_speed.json"
    env = {**os.environ, "QRS_DATA": os.environ["QRS_DATA"]}
    proc = subprocess.run([sys.executable, "-m", "bench.page_speed", "--var", os.environ["QRS_VAR"], "--pages", "Models",
                           "--out", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    (row,) = report["pages"]
    assert row["page"] == "Models" and not row["cold"]["exceptions"] and not row["warm"]["exceptions"], row
    assert row["cold"]["seconds"] > 0 and row["warm"]["seconds"] > 0 and "load_before" in row["warm"]
    assert set(report["python_speed_probe_s"]) == {"start", "end"} and report["commit"]
    bad = subprocess.run([sys.executable, "-m", "bench.page_speed", "--pages", "Nope"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert bad.returncode == 2 and bad.stderr.strip().startswith("error: unknown page(s) Nope")
