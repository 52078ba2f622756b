"""`make run`'s build on the executor, timed from a fresh artifacts folder, and compared with the committed
sequential build (bench/reports/default_build.json) system by system.

Runs make run's two build commands (``core build --systems bm25``, then ``core build --all``: the graph of Ray
jobs) with ``QRS_VAR`` on an empty folder, the load average and the Python speed probe beside the figures; then
checks every training curve, best dev, stopping step and held-out score against the committed report (equal
curves are the evidence that the parallel build trained the same models). Usage:

    python -m bench.parallel_build [--var DIR] [--out bench/reports/parallel_build.json]
"""
from __future__ import annotations

import argparse
import tempfile
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.error_analysis_speed import python_speed
from bench.reporting import head_commit, write_report

REPORTS = Path(__file__).resolve().parent / "reports"
COMPARED = ("training", "held_out", "test")  # what a model's build measured; build_seconds differ by design


def _timed(command: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True)
    return time.perf_counter() - start


FLOAT_TOLERANCE = 1e-9  # a mean of per-query metrics summed in another order differs in its 16th digit


def largest_gap(a, b) -> float:
    """The largest |a − b| over two reports' numbers at the same places (inf where their shapes or texts differ)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return float("inf")
        return max([largest_gap(a[k], b[k]) for k in a] or [0.0])
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return float("inf")
        return max([largest_gap(x, y) for x, y in zip(a, b)] or [0.0])
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(float(a) - float(b))
    return 0.0 if a == b else float("inf")


def compare(rows: list[dict], committed: list[dict]) -> list[dict]:
    """Per system: equal in every measured field to the committed sequential build's row (numbers within
    ``FLOAT_TOLERANCE``), or what differs and by how much (a system still building when a build was stopped: its
    training alone, when it finished training)."""
    before = {r["system"]: r for r in committed}
    out = []
    for row in rows:
        old = before.get(row["system"])
        fields = COMPARED if row["state"] == "ready" else ("training",)
        gaps = {k: largest_gap(old.get(k), row.get(k)) for k in fields} if old is not None else {}
        differs = [k for k, gap in gaps.items() if gap > FLOAT_TOLERANCE]
        out.append({"system": row["system"], "state": row["state"], "build_seconds": row["build_seconds"],
                    "compared": list(fields), "equal_to_sequential": None if old is None else not differs,
                    "differs": differs, "largest_gap": {k: (None if gap == float("inf") else gap)
                                                        for k, gap in gaps.items() if gap > 0}})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--var", default=str(Path(tempfile.gettempdir()) / "qrs-parallel-build"))
    ap.add_argument("--out", default=str(REPORTS / "parallel_build.json"))
    ap.add_argument("--stopped", metavar="NOTE",
                    help="report a build that was stopped before it finished (its folder as it is, what ran beside "
                         "it in NOTE): the systems it finished, compared; no wall time")
    args = ap.parse_args()
    var = Path(args.var)
    committed = json.loads((REPORTS / "default_build.json").read_text(encoding="utf-8"))
    if args.stopped:
        os.environ["QRS_VAR"] = str(var)
        from bench.default_build_report import system_rows

        rows = [r for r in system_rows(args.dataset) if r["state"] == "ready" or r.get("training")]
        write_report(args.out, {
            "command": "python -m bench.parallel_build --stopped NOTE", "commit": head_commit(),
            "machine": platform.platform(), "cores": os.cpu_count(), "complete": False, "note": args.stopped,
            "sequential_reference": {"report": "bench/reports/default_build.json", "commit": committed.get("commit")},
            "systems": compare(rows, committed.get("systems", []))})
        return
    shutil.rmtree(var, ignore_errors=True)
    env = {**os.environ, "QRS_VAR": str(var), "PYTHONUNBUFFERED": "1"}
    probe_before, load_before = python_speed(), os.getloadavg()
    bm25 = _timed([sys.executable, "-m", "core", "build", "--dataset", args.dataset, "--systems", "bm25"], env)
    everything = _timed([sys.executable, "-m", "core", "build", "--dataset", args.dataset, "--all"], env)
    load_after, probe_after = os.getloadavg(), python_speed()
    os.environ["QRS_VAR"] = str(var)
    from bench.default_build_report import system_rows

    rows = system_rows(args.dataset)
    report = {
        "command": "python -m bench.parallel_build", "commit": head_commit(), "machine": platform.platform(),
        "complete": True,
        "cores": os.cpu_count(), "what": "make run's two build commands from an empty artifacts folder: "
                                         "`core build --systems bm25` (in process), then `core build --all` "
                                         "(the build graph on the embedded Ray, one CPU per job)",
        "wall_seconds": round(bm25 + everything, 1), "bm25_seconds": round(bm25, 1),
        "graph_seconds": round(everything, 1), "budget_seconds": 1800,
        "within_budget": bm25 + everything <= 1800,
        "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in load_after],
        "python_speed_before": probe_before, "python_speed_after": probe_after,
        "speed_probe": "bench.error_analysis_speed.python_speed: seconds for 10M Python additions, best of 3",
        "sequential_reference": {"report": "bench/reports/default_build.json", "commit": committed.get("commit"),
                                 "wall": committed.get("wall")},
        "systems": compare(rows, committed.get("systems", [])),
    }
    write_report(args.out, report)


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
