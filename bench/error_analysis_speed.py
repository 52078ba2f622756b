"""Error Analysis in a real browser: seconds to open the page and to apply one widget change.

    python -m bench.error_analysis_speed [--var var] [--out bench/reports/error_analysis_speed.json]

Starts ``streamlit run app.py`` on the artifacts folder ``--var`` (the build whose stored runs the page reads;
``QRS_AUTOBUILD=0``), opens /Error_Analysis in headless Chromium (selenium) and times, from the request to
the settled page (metrics table shown, no spinner, no stale element):

- ``cold_open``: the first visit after the server started (reads the stored runs, computes the per-query
  metrics once for the process);
- ``open``: a second visitor (a fresh browser session) opening the page: what every later visit costs;
- ``widget_change``: in that session, switching the significance test to the randomization test (the runs
  and per-query metrics are reused; only the test is recomputed), then back to the t-test.

The browser test (tests/e2e/test_error_analysis_speed.py) calls the same ``time_page`` on the tiny fixture
with generous bounds; this script records the exact figures of a realistic build.
"""
from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

from bench.reporting import ROOT, head_commit, write_report

PAGE = "Error_Analysis"
WAIT = 600
BUSY = ('[data-testid="stSpinner"]', '[data-stale="true"]', '[data-testid="stStatusWidgetRunningIcon"]',
        '[data-testid="stStatusWidgetRunningManIcon"]', '[data-testid="stProgress"]')


def _settled(driver) -> bool:
    from selenium.webdriver.common.by import By

    if driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]'):
        raise AssertionError("the page shows an exception: "
                             + driver.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')[0].text[:800])
    shown = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stDataFrame"]')
    return bool(shown) and not any(driver.find_elements(By.CSS_SELECTOR, s) for s in BUSY)


def wait_settled(driver, timeout: float = WAIT) -> None:
    """Until the metrics table is shown and nothing is running (checked twice, 0.2 s apart)."""
    from selenium.webdriver.support.ui import WebDriverWait

    def twice(d) -> bool:
        if not _settled(d):
            return False
        time.sleep(0.2)
        return _settled(d)

    WebDriverWait(driver, timeout, poll_frequency=0.1).until(twice)


def open_seconds(driver, url: str, timeout: float = WAIT) -> float:
    """Seconds from requesting the page to the settled page."""
    start = time.perf_counter()
    driver.get(f"{url}/{PAGE}")
    wait_settled(driver, timeout)
    return time.perf_counter() - start


def switch_test_seconds(driver, label: str, timeout: float = WAIT) -> float:
    """Seconds from clicking the significance test ``label`` ("randomization" / "paired t-test") to the settled page."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    radio = WebDriverWait(driver, timeout).until(lambda d: next(
        (r for r in d.find_elements(By.CSS_SELECTOR, '[data-testid="stRadio"] label') if r.text.strip() == label),
        None))
    caption = lambda d: " ".join(c.text for c in d.find_elements(By.CSS_SELECTOR, '[data-testid="stCaptionContainer"]'))  # noqa: E731
    want = "randomization test" if label == "randomization" else "paired t-test"
    start = time.perf_counter()
    radio.click()
    WebDriverWait(driver, timeout, poll_frequency=0.1).until(lambda d: f"Tests against" in caption(d)
                                                             and want in caption(d))
    wait_settled(driver, timeout)
    return time.perf_counter() - start


def time_page(first, second, url: str, timeout: float = WAIT) -> dict[str, float]:
    """cold_open (``first`` browser), open and widget changes (``second``, a fresh session): seconds."""
    out = {"cold_open": open_seconds(first, url, timeout)}
    out["open"] = open_seconds(second, url, timeout)
    out["widget_change"] = switch_test_seconds(second, "randomization", timeout)
    out["widget_change_back"] = switch_test_seconds(second, "paired t-test", timeout)
    return {k: round(v, 2) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    import subprocess
    import sys

    from tests.e2e.conftest import free_port, new_driver, stop, wait_healthy

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--var", default=str(ROOT / "var"), help="artifacts folder with the build (QRS_VAR)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "reports" / "error_analysis_speed.json"))
    args = parser.parse_args(argv)
    var = Path(args.var).resolve()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "QRS_VAR": str(var), "QRS_AUTOBUILD": "0", "PYTHONUNBUFFERED": "1"}
    log = var / "error_analysis_speed.log"
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                              "--server.address", "127.0.0.1", "--server.port", str(port),
                              "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"],
                             cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
    drivers = []
    try:
        wait_healthy(url, server, timeout=300)
        downloads = var / "downloads"
        downloads.mkdir(exist_ok=True)
        drivers = [new_driver(var, downloads, f"speed-profile-{i}") for i in (1, 2)]
        seconds = time_page(drivers[0], drivers[1], url)
    finally:
        for d in drivers:
            d.quit()
        stop(server)
    systems = sorted(p.stem for p in (var / "stored-runs" / "qqp-bimpm").glob("*.trec"))
    load = os.getloadavg()
    report = {
        "command": "python -m bench.error_analysis_speed" + (f" --var {args.var}" if args.var else ""),
        "commit": head_commit(),
        "what": "Error Analysis in headless Chromium on the QQP build: seconds from the request (or the click) to the "
                "settled page (metrics table shown, no spinner, no stale element); defaults: first three systems, "
                "dataset labels, test split (1,781 queries), five metrics, paired t-test",
        "stored_runs": systems,
        "seconds": seconds,
        "targets": {"open": 5.0, "widget_change": 2.0},
        "machine": {"cpus": os.cpu_count(), "load_average_1_5_15": [round(x, 2) for x in load],
                    "python": platform.python_version(),
                    "note": "2 cores shared with other jobs while measured (the load average says how busy)"},
    }
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
