"""Judging in a real browser: keypress -> next item painted, and keypress -> label committed in the database.

    python -m bench.judging_speed [--judgments 200] [--annotators 1 3] [--backends sqlite postgresql]
                                  [--interval 0.25] [--entry serve.py] [--out bench/reports/judging_speed.json]

For each backend and number of annotators: a campaign on the tiny fixture's dataset name with enough items
that every annotator judges ``--judgments`` of them (overlap = the number of annotators), ``streamlit run
ENTRY`` on that database (``serve.py``: the panel commits through the app's commit endpoint; ``app.py``: through
the component's value and a script run) with a trusted identity header (``QRS_TRUSTED_HEADER``; each headless Chromium sends
its annotator's name through the DevTools protocol), and one browser per annotator, all at once. Each
browser opens Annotate, picks the campaign and presses 0/1/2 every ``--interval`` seconds.

- ``paint_ms``: measured in the page: ``performance.now()`` at the start of the key handler to the
  ``requestAnimationFrame`` after the next item was written (the panel's ``window.__qrsJudgeTimings``);
- ``commit_ms``: the key's time in the page (``Date.now()`` of the keydown) to the first time a thread
  polling the store every 20 ms finds the label's idempotency key in ``label_requests`` (committed).

Every label must be stored exactly once (labels = annotators x judgments, one history row each); the report
keeps p50/p95/max per configuration with the load average (1 min) sampled every second while it ran and
the Python speed probe of ``bench.error_analysis_speed``. PostgreSQL is a throwaway server started like the
tests' (``tests/pg_server.py``).
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.reporting import ROOT, head_commit, write_report

HEADER = "X-Bench-User"
CAMPAIGN, OWNER, DOCS_PER_QUERY = "speed", "owner@bench", 10
WAIT = 300


def _quantiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]  # noqa: E731
    return {"n": len(values), "p50": round(statistics.median(values), 1), "p95": round(pick(0.95), 1),
            "max": round(ordered[-1], 1)}


def _campaign(db_url: str, annotators: list[str], judgments: int) -> None:
    from core.judging.campaign_records import CampaignSpec, ItemSpec, QuerySet
    from core.judging.campaigns import CampaignStore

    queries = [f"bq{i:03d}" for i in range(math.ceil(judgments / DOCS_PER_QUERY))]
    items = [ItemSpec(q, f"benchmark query {q}: how do I judge quickly?", f"{q}-d{j}",
                      f"candidate {j} of {q}: a question a person reads before pressing a key", {"bench": j + 1})
             for q in queries for j in range(DOCS_PER_QUERY)]
    cs = CampaignStore(db_url)
    try:
        cs.create(OWNER, CampaignSpec(CAMPAIGN, "qqp-bimpm", QuerySet("list", ids=tuple(queries)), ("bench",),
                                      DOCS_PER_QUERY, len(annotators), (OWNER,), tuple(annotators)), items)
    finally:
        cs.close()


def _open_campaign(driver, url: str, who: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {HEADER: who}})
    driver.get(f"{url}/Annotate")
    wait = WebDriverWait(driver, WAIT, poll_frequency=0.2)
    choice = wait.until(lambda d: next((lab for lab in d.find_elements(By.CSS_SELECTOR, '[data-testid="stRadio"] label')
                                        if lab.text.strip() == CAMPAIGN), None))
    time.sleep(1.0)  # the first run settles
    choice.click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".qrs-judge[data-uid]"))
    time.sleep(1.0)


def _judge(driver, judgments: int, interval: float) -> list[dict]:
    """Press 0/1/2 ``judgments`` times; the page's timings of each key."""
    from selenium.webdriver.common.action_chains import ActionChains

    for i in range(judgments):
        ActionChains(driver).send_keys(str(i % 3)).perform()
        time.sleep(interval)
    return driver.execute_script("return window.__qrsJudgeTimings || []")


def run_config(backend: str, n: int, judgments: int, interval: float, pg=None, entry: str = "serve.py") -> dict:
    """One configuration: ``n`` annotators at once on ``backend``; the figures and the checks."""
    from core.judging.campaigns import CampaignStore
    from tests.e2e.conftest import free_port, new_driver, server_env, stop, wait_healthy

    folder = Path(tempfile.mkdtemp(prefix=f"judging-speed-{backend}-{n}-"))
    db_url = f"sqlite:///{folder / 'j.sqlite'}" if backend == "sqlite" else pg.database()
    annotators = [f"a{i}@bench" for i in range(n)]
    _campaign(db_url, annotators, judgments)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**server_env(folder), "QRS_DB_URL": db_url, "QRS_TRUSTED_HEADER": HEADER, "QRS_OWNERS": OWNER}
    log = folder / "streamlit.log"
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", entry, "--server.headless", "true",
                               "--server.address", "127.0.0.1", "--server.port", str(port),
                               "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"],
                              cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    cs = CampaignStore(db_url)
    drivers: dict[str, object] = {}
    committed: dict[str, float] = {}
    loads: list[float] = []
    stop_polling = threading.Event()
    try:
        wait_healthy(url, server)
        for who in annotators:
            drivers[who] = new_driver(folder, folder, "chrome-" + who.split("@")[0])
        opened = [threading.Thread(target=_open_campaign, args=(drivers[w], url, w)) for w in annotators]
        for t in opened:
            t.start()
        for t in opened:
            t.join()

        def poll() -> None:  # the store as any reader sees it: keys found, and when
            from sqlalchemy import select

            from core.judging.schema import RequestRow

            last_load, last_id = 0.0, 0
            while not stop_polling.is_set():
                with cs.store._read() as s:  # the rows since the last look, and 100 ids back: on PostgreSQL a
                    # lower id can commit after a higher one was seen
                    for row_id, key in s.execute(select(RequestRow.id, RequestRow.key)
                                                 .where(RequestRow.id > last_id - 100)):
                        committed.setdefault(key, time.time() * 1000)
                        last_id = max(last_id, row_id)
                if time.monotonic() - last_load >= 1:
                    loads.append(os.getloadavg()[0])
                    last_load = time.monotonic()
                time.sleep(0.02)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        timings: dict[str, list[dict]] = {}
        workers = [threading.Thread(target=lambda w=w: timings.__setitem__(w, _judge(drivers[w], judgments, interval)))
                   for w in annotators]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        keys = [t["key"] for rows in timings.values() for t in rows]
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline and not all(k in committed for k in keys):
            time.sleep(0.1)
        stop_polling.set()
        poller.join(timeout=5)
        labels = cs.labels(OWNER, CAMPAIGN)
        history = cs.history(OWNER, CAMPAIGN)
        paint = [t["ms"] for rows in timings.values() for t in rows]
        commit = [committed[t["key"]] - t["pressed"] for rows in timings.values() for t in rows if t["key"] in committed]
        return {
            "backend": backend, "entry": entry, "annotators": n, "judgments_per_annotator": judgments, "interval_s": interval,
            "keys_pressed": len(keys), "keys_committed": sum(k in committed for k in keys),
            "labels_stored": len(labels), "history_rows": len(history),
            "stored_once": len(labels) == n * judgments and len(history) == len(labels),
            "paint_ms": _quantiles(paint), "commit_ms": _quantiles(commit),
            "load_avg_1min": {"start": round(loads[0], 2) if loads else None,
                              "mean": round(statistics.fmean(loads), 2) if loads else None,
                              "max": round(max(loads), 2) if loads else None},
        }
    finally:
        stop_polling.set()
        for d in drivers.values():
            try:
                d.quit()
            except Exception:  # noqa: BLE001 - a browser that died is already gone
                pass
        cs.close()
        stop(server)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.judging_speed", description=__doc__.split("\n")[0])
    p.add_argument("--judgments", type=int, default=200, help="labels per annotator (default 200)")
    p.add_argument("--annotators", type=int, nargs="+", default=[1, 3])
    p.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"], choices=["sqlite", "postgresql"])
    p.add_argument("--interval", type=float, default=0.25, help="seconds between key presses (default 0.25)")
    p.add_argument("--entry", default="serve.py", choices=["serve.py", "app.py"],
                   help="the file streamlit runs: serve.py (commit endpoint, default) or app.py (script runs only)")
    p.add_argument("--out", default=str(ROOT / "bench" / "reports" / "judging_speed.json"))
    args = p.parse_args(argv)
    if args.judgments < 1 or any(a < 1 for a in args.annotators) or args.interval < 0:
        print("error: --judgments and --annotators must be positive, --interval not negative", file=sys.stderr)
        return 2
    import core  # noqa: F401  (offline guards)
    from bench.error_analysis_speed import python_speed

    pg = None
    if "postgresql" in args.backends:
        from tests.pg_server import PostgresServer

        pg = PostgresServer()
    runs = []
    try:
        for backend in args.backends:
            for n in args.annotators:
                print(f"[judging-speed] {backend}, {n} annotator(s), {args.judgments} labels each", flush=True)
                runs.append(run_config(backend, n, args.judgments, args.interval, pg, args.entry))
                print(f"  {runs[-1]}", flush=True)
    finally:
        if pg is not None:
            pg.stop()
    write_report(args.out, {
        "command": "python -m bench.judging_speed " + " ".join(argv if argv is not None else sys.argv[1:]),
        "commit": head_commit(), "host": platform.node(), "cpus": os.cpu_count(), "python_speed_s": python_speed(),
        "what": "keypress -> next item painted (in the page: performance.now() around the key handler and the next "
                "requestAnimationFrame) and keypress -> label committed (a thread polling label_requests every 20 ms), "
                "Annotate's campaign mode in headless Chromium, every annotator at once; streamlit run " + args.entry,
        "runs": runs,
    })
    return 0


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
