"""Page speed: seconds for the server to draw each page, cold and warm, on a built artifacts folder.

    python -m bench.page_speed [--var DIR] [--pages Home,Models,Layers,Compare] [--out bench/reports/page_speed.json]

Each page runs through Streamlit's AppTest (the page's script as ``streamlit run`` runs it, no browser):

- ``cold``: the first visit in a fresh Python process (imports, the dataset, loaded models, Streamlit's caches
  empty): a server's first visitor after a start;
- ``warm``: a second visitor (a new session) in the same process: every later visit.

A page draws what is ready after ``QRS_PAGE_WAIT`` seconds and loads the rest in the background
(``ui.background_loads``): ``seconds`` is the first drawing, ``filled_seconds`` (when something was left loading)
the time until the page's next run after the loads ended, i.e. the visitor's complete page.

Compare opens with every ready first stage and reranker of the build chosen and a dataset query (a shared link);
the other pages open as a visitor finds them. The browser's own drawing is not in these figures
(``bench/error_analysis_speed.py`` times a page in Chromium). Beside each figure: the 1-minute load average before
and after it, and the Python speed probe (``bench.error_analysis_speed.python_speed``) at the start and the end
of the run, since this shared machine's speed drifts. Targets: warm ≤ 3 s, cold ≤ 10 s on the idle 2-core machine.
``QRS_AUTOBUILD=0``: a visit never starts a build.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from bench.reporting import ROOT, head_commit, write_report
from core.paths import var_dir

PAGES = {"Home": "app.py", "Compare": "pages/1_Compare.py", "Layers": "pages/2_Layers.py",
         "Keywords": "pages/3_Keywords.py", "Annotate": "pages/4_Annotate.py",
         "Error Analysis": "pages/5_Error_Analysis.py", "Models": "pages/6_Models.py"}
TIMEOUT = 900  # seconds for one visit (a cold Layers on a loaded machine computes curves)


def link_params(page: str, dataset_name: str) -> dict[str, str]:
    """The URL parameters a page opens with: Compare gets every ready system of the build and a dataset query."""
    if page != "Compare":
        return {}
    from core.build import read_status
    from core.data.datasets import load_dataset
    from core.registry import list_systems, supports

    ds = load_dataset(dataset_name)
    ready = {kind: [s.name for s in list_systems(kind) if supports(s, ds) and read_status(ds, s).state == "ready"]
             for kind in ("retriever", "reranker")}
    params = {"dataset": dataset_name, "qid": next(iter(ds.queries))}
    if ready["retriever"]:
        params["systems"] = ",".join(ready["retriever"])
    if ready["reranker"]:
        params["rerankers"] = ",".join(ready["reranker"])
    return params


def visit(path: str, params: dict[str, str]) -> dict:
    """One visitor: seconds to draw the page, the exceptions and the load average around it; when the page left
    loads running in the background (``ui.background_loads``), also ``filled_seconds``: from the visit's start
    until the page's next run after they ended (what the visitor sees complete)."""
    from streamlit.testing.v1 import AppTest

    from ui.background_loads import loading

    at = AppTest.from_file(str(ROOT / path), default_timeout=TIMEOUT)
    for key, value in params.items():
        at.query_params[key] = value
    before = os.getloadavg()[0]
    start = time.perf_counter()
    at.run()
    seconds = time.perf_counter() - start
    row = {"seconds": round(seconds, 2), "load_before": round(before, 2), "load_after": round(os.getloadavg()[0], 2),
           "exceptions": [e.value[:300] if isinstance(e.value, str) else str(e.value)[:300] for e in at.exception],
           "errors": len(at.error), "background": [load.label for load in loading()]}
    if row["background"]:
        while loading():
            time.sleep(0.1)
        at.run()
        row["filled_seconds"] = round(time.perf_counter() - start, 2)
        row["exceptions"] += [str(e.value)[:300] for e in at.exception]
        row["errors"] = len(at.error)
    return row


def child(page: str, dataset_name: str) -> None:
    """In a fresh process: a cold visit, then a warm one (a new session); prints one JSON line."""
    import core  # noqa: F401 - torch's CPU kernels pinned first, as the app does

    params = link_params(page, dataset_name)
    cold = visit(PAGES[page], params)
    warm = visit(PAGES[page], params)
    print(json.dumps({"page": page, "params": params, "cold": cold, "warm": warm}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--var", default=str(var_dir()), help="the built artifacts folder (default: QRS_VAR's)")
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--pages", default=",".join(PAGES), help=f"comma-separated, of: {', '.join(PAGES)}")
    ap.add_argument("--out", default=str(ROOT / "bench" / "reports" / "page_speed.json"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.dataset)
        return
    pages = [p.strip() for p in args.pages.split(",") if p.strip()]
    unknown = [p for p in pages if p not in PAGES]
    if unknown:
        print(f"error: unknown page(s) {', '.join(unknown)}; known: {', '.join(PAGES)}", file=sys.stderr)
        raise SystemExit(2)
    from bench.error_analysis_speed import python_speed

    env = {**os.environ, "QRS_VAR": args.var, "QRS_AUTOBUILD": "0", "QRS_DATASET": args.dataset}
    probe_start, rows = python_speed(), []
    for page in pages:
        proc = subprocess.run([sys.executable, "-m", "bench.page_speed", "--child", page, "--dataset", args.dataset],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=3 * TIMEOUT)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        row = json.loads(lines[-1]) if proc.returncode == 0 and lines else {
            "page": page, "failed": (proc.stderr or proc.stdout)[-1500:]}
        rows.append(row)
        if "cold" in row:
            filled = f", filled in after {row['cold']['filled_seconds']} s" if "filled_seconds" in row["cold"] else ""
            print(f"{page}: cold {row['cold']['seconds']} s{filled} (load {row['cold']['load_before']}), "
                  f"warm {row['warm']['seconds']} s (load {row['warm']['load_before']})", flush=True)
        else:
            print(f"{page}: failed", flush=True)
    shown = ["$QRS_VAR" if a == args.var else a for a in sys.argv[1:]]  # no machine path in a report
    report = {"command": "python -m bench.page_speed " + " ".join(shown), "commit": head_commit(),
              "var": "$QRS_VAR (a built default-build artifacts folder)", "dataset": args.dataset, "cpus": os.cpu_count(), "python": platform.python_version(),
              "python_speed_probe_s": {"start": probe_start, "end": python_speed()},
              "targets": {"warm_s": 3, "cold_s": 10, "machine": "idle, 2 cores"}, "pages": rows}
    write_report(args.out, report)


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
