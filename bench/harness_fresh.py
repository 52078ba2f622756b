"""The harness's sections measured in fresh processes: the app's cold start in a real browser, today's code
against this checkout (A/B, alternating rounds), and Error Analysis's first view."""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from bench.harness import Settings, built_systems
from bench.measure import percentiles

__all__ = ["AB_CHOICES", "section_ab", "section_coldstart", "section_first_view"]


def section_coldstart(s: Settings, ds) -> dict:  # noqa: ARG001
    """Seconds from `streamlit run` to the Compare page showing BM25's ranking in headless Chromium."""
    import shutil
    import tempfile
    import urllib.parse

    from core.paths import var_dir
    from tests.e2e.conftest import CHROME_FLAGS, browser_binaries, free_port, stop

    chrome, driver_path = browser_binaries()
    if not (chrome and driver_path):
        return {"skipped": "chromium/chromedriver not installed"}
    from core.registry import system_module
    if not system_module("bm25").is_built(ds):
        return {"skipped": "bm25 is not built"}
    import subprocess
    import sys

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from core.paths import REPO_ROOT

    profile = Path(tempfile.mkdtemp(prefix="qrs-bench-chrome-"))
    options = webdriver.ChromeOptions()
    options.binary_location = chrome
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))  # browser start not timed
    port = free_port()
    env = {**os.environ, "QRS_VAR": str(var_dir()), "QRS_AUTOBUILD": "0", "QRS_DATASET": ds.name}
    log = open(Path(tempfile.gettempdir()) / f"qrs-bench-streamlit-{port}.log", "wb")
    query = "How can I improve my English speaking skills ?"
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                             "--server.address", "127.0.0.1", "--server.port", str(port),
                             "--server.fileWatcherType", "none"], cwd=REPO_ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    marks = {}
    try:
        import urllib.request
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:  # noqa: S310
                    if r.read().decode().strip() == "ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.perf_counter() - t0 > 120:
                raise RuntimeError("streamlit did not start")
            time.sleep(0.1)
        marks["server_healthy_s"] = round(time.perf_counter() - t0, 2)
        driver.get(f"http://127.0.0.1:{port}/Compare?q={urllib.parse.quote(query)}")
        WebDriverWait(driver, 180, poll_frequency=0.1).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="stDataFrame"] [data-testid^="glide-cell-"]'))
        marks["compare_result_s"] = round(time.perf_counter() - t0, 2)
        # a second query in the same (now warm) session
        t1 = time.perf_counter()
        driver.get(f"http://127.0.0.1:{port}/Compare?q={urllib.parse.quote('What is the best way to learn Python ?')}")
        WebDriverWait(driver, 120, poll_frequency=0.1).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="stDataFrame"] [data-testid^="glide-cell-"]'))
        marks["warm_page_load_s"] = round(time.perf_counter() - t1, 2)
    finally:
        stop(proc)
        driver.quit()
        log.close()
        shutil.rmtree(profile, ignore_errors=True)
    return {**marks, "goal_s": 10, "meets_goal": marks.get("compare_result_s", 1e9) <= 10,
            "what": "process start → /_stcore/health ok → Compare page (?q=…, BM25 default) shows its table",
            "artifacts": _shown(var_dir())}


# ----------------------------------------------------------------------------- today's code vs this code
AB_CHOICES = [
    {"name": "bm25"},
    {"name": "minilm"},
    {"name": "tree-bert", "options": [["beam", 20], ["K", 8]]},
    {"name": "densetrans", "options": [["index", "ivfpq"], ["nprobe", 10]]},
    {"name": "sdml-cnn", "options": [["index", "ivfpq"], ["nprobe", 10]]},
    {"name": "frm", "first_stage": "bm25", "depth": 20},
]


def _child(root: str, task: str, args: dict, timeout: int = 1800, env: dict | None = None) -> dict:
    """Run ``bench/ab_child.py`` of this checkout against the code tree ``root`` in a fresh process."""
    import json
    import subprocess
    import sys

    script = Path(__file__).resolve().parent / "ab_child.py"
    env = {**os.environ, "PYTHONPATH": root, "OMP_WAIT_POLICY": "PASSIVE", **(env or {})}
    proc = subprocess.run([sys.executable, str(script), root, task, json.dumps(args)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": (proc.stderr or proc.stdout)[-600:]}


def _built_choices(ds) -> list[dict]:
    built, _ = built_systems(ds)
    return [c for c in AB_CHOICES if c["name"] in built and c.get("first_stage", "bm25") in built]


def _shown(folder: Path) -> str:
    """An artifacts folder as a report may name it: relative to the repository, never this machine's path."""
    from core.paths import REPO_ROOT

    folder = folder.resolve()
    return str(folder.relative_to(REPO_ROOT)) if folder.is_relative_to(REPO_ROOT) else "a folder outside the repository"


def _commit(root: str) -> str:
    """The short commit a code tree is at (reports name commits, not this machine's paths)."""
    import subprocess

    out = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return f"commit {out.stdout.strip()}" if out.returncode == 0 else "a tree outside git"


def section_ab(s: Settings, ds, baseline: str, baseline_var: str | None = None) -> dict:
    """Today's code (a git worktree at ``baseline``) against this checkout, in one run on the same machine.

    The Compare query runs with each tree's own page defaults (``CompareState().choices()``: today's ivfpq
    nprobe 10 and tree K 8 against the systems' serving defaults, exact). Each measurement runs in a fresh
    process per tree, the two trees alternating (base, new, base,
    new, ...) so that a change of the machine's load hits both sides alike; the ratio is of the
    medians over rounds. Same sampled queries/questions, same choices (the Compare page with the five
    first stages and FRM on BM25's top 20; each query removed from its own ranking). Same artifacts
    folder, or with ``baseline_var`` the base tree reads the artifacts its own build wrote there (needed
    where the newer build's checkpoints are not readable by the older code, FRM's for one).
    """
    from core.paths import REPO_ROOT

    new_root, base_root = str(REPO_ROOT), str(Path(baseline).resolve())
    rounds = s.pick(1, 3)
    choices = _built_choices(ds)
    env_of = {"base": {"QRS_VAR": str(Path(baseline_var).resolve())} if baseline_var else {}, "new": {}}
    out: dict = {"baseline_tree": _commit(base_root), "current_tree": _commit(new_root), "rounds": rounds,
                 "baseline_artifacts": "the base tree's own build" if baseline_var else "shared",
                 "compare": {"choices": [c["name"] for c in choices], "base": [], "new": []},
                 "encode": {"base": [], "new": [], "new_int8": []}}
    for r in range(rounds):
        for side, root in (("base", base_root), ("new", new_root)):
            res = _child(root, "encode", {"dataset": ds.name, "n": s.pick(512, 3000), "seed": 20 + r}, env=env_of[side])
            out["encode"][side].append(res)
            print(f"[bench] ab encode round {r + 1} {side}: {res.get('questions_per_s', res.get('error'))}", flush=True)
        res = _child(new_root, "encode", {"dataset": ds.name, "n": s.pick(512, 3000), "seed": 20 + r},
                     env={"QRS_MINILM_BACKEND": "onnx-int8"})  # the opt-in quantized backend
        out["encode"]["new_int8"].append(res)
        for side, root in (("base", base_root), ("new", new_root)):
            res = _child(root, "compare", {"dataset": ds.name, "n": s.pick(10, 40), "seed": 30 + r,
                                           "choices": choices, "page_defaults": True}, env=env_of[side])
            if "seconds" in res:
                res = {**percentiles(res.pop("seconds")), **res}
            out["compare"][side].append(res)
            print(f"[bench] ab compare round {r + 1} {side}: {res.get('p50_ms', res.get('error'))}", flush=True)

    def median(rows, key):
        vals = [row[key] for row in rows if key in row]
        return round(float(np.median(vals)), 2) if vals else None

    enc_base, enc_new = median(out["encode"]["base"], "questions_per_s"), median(out["encode"]["new"], "questions_per_s")
    cmp_base, cmp_new = median(out["compare"]["base"], "p50_ms"), median(out["compare"]["new"], "p50_ms")
    out["summary"] = {
        "encode_qps_base": enc_base, "encode_qps_new": enc_new,
        "encode_speedup": round(enc_new / enc_base, 2) if enc_base and enc_new else None,
        "encode_qps_new_int8": median(out["encode"]["new_int8"], "questions_per_s"),
        "compare_p50_ms_base": cmp_base, "compare_p50_ms_new": cmp_new,
        "compare_speedup": round(cmp_base / cmp_new, 2) if cmp_base and cmp_new else None,
        "goals": {"encode_speedup": 2.0, "compare_speedup": 1.7},
    }
    return out


def section_first_view(s: Settings, ds) -> dict:  # noqa: ARG001
    """Error Analysis's default first view from a fresh process (imports, data, stored runs, ranx analysis)."""
    from core.analysis.runs import run_status
    from core.judging.pooling import available_systems

    available = available_systems(ds)
    fresh = [n for n in available if "@" not in n and run_status(ds, n) == "fresh"]
    names = (fresh or available)[:3]  # the first three systems with a stored run (bm25, minilm, tree-bert)
    root = str(__import__("core.paths", fromlist=["REPO_ROOT"]).REPO_ROOT)
    res = _child(root, "first_view", {"dataset": ds.name, "systems": names})
    # on a started server: imports, the dataset and ranx's numba warm-up (app.py, background) are done
    warm = _child(root, "first_view", {"dataset": ds.name, "systems": names, "warm": True})
    return {**res, "goal_s": 10, "meets_goal": bool(res.get("total_s", 1e9) <= 10),
            "started_server": {k: warm.get(k) for k in ("warm_up_s", "runs_s", "view_s", "error") if k in warm},
            "started_server_meets_goal": bool((warm.get("view_s") or 1e9) <= 10),
            "what": "fresh process: import core, load the dataset, labels of the default split, the default "
                    "systems' stored runs (core.analysis.runs.load_runs), core.analysis.error_analysis.analyze with the default "
                    "metrics; the page's drawing is not included"}
