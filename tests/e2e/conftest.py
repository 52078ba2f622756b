"""Real-browser end-to-end fixtures: tiny artifacts, a `streamlit run` server, headless Chromium.

The tests run on the tiny fixture data (``tests/fixtures/data``) with their own artifacts folder,
so CI stays short and ``var/`` is never touched. Without ``chromium``/``chromedriver`` the tests are
skipped, unless ``CI`` is set: then a missing browser is a failure (``.ci/run`` installs both).

Screenshots of every page go to ``<QRS_VAR>/screenshots/`` (``QRS_E2E_VAR`` picks the folder;
default: a pytest temp dir, printed at the end of the session).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT, TINY_DATA, run_main

# Systems built for the e2e run: all of them take seconds on the 244-question fixture.
E2E_SYSTEMS = ("bm25", "minilm", "tree-bert")
DATASET = "qqp-bimpm"  # the dataset the e2e server serves (the tiny fixture's QQP)
CHROME_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                "--window-size=1400,1000", "--disable-dev-shm-usage")
SERVER_TIMEOUT = 90  # seconds until /_stcore/health answers (2 shared cores: imports are slow)
BUILD_TIMEOUT = 600  # the tiny builds plus their stored runs take ~60 s idle, minutes on 2 loaded cores


def browser_binaries() -> tuple[str | None, str | None]:
    chrome = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    return chrome, shutil.which("chromedriver")


def pytest_collection_modifyitems(config, items):  # noqa: ARG001
    """Skip (locally) or fail (CI) every e2e test when the browser is missing."""
    chrome, driver = browser_binaries()
    if chrome and driver:
        return
    missing = ", ".join(n for n, p in (("chromium", chrome), ("chromedriver", driver)) if not p)
    if os.environ.get("CI"):
        return  # the session fixture fails loudly: CI must run the browser tests
    marker = pytest.mark.skip(reason=f"e2e: {missing} not installed (apt-get install chromium chromium-driver; "
                                     "set CI=1 to make this a failure)")
    for item in items:
        if "e2e" in item.nodeid.split("/"):
            item.add_marker(marker)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _health(url: str) -> str:
    try:
        with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:  # noqa: S310 (loopback)
            return r.read().decode().strip()
    except OSError:
        return ""


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = SERVER_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}")
        if _health(url) == "ok":
            return
        time.sleep(0.3)
    raise TimeoutError(f"{url}/_stcore/health did not answer 'ok' within {timeout}s")


def stop(proc: subprocess.Popen) -> None:
    """Stop a process we started, by its PID (TERM, then KILL)."""
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def server_env(var: Path) -> dict[str, str]:
    return {**os.environ, "QRS_DATA": str(TINY_DATA), "QRS_VAR": str(var), "QRS_AUTOBUILD": "0",
            "QRS_DATASET": DATASET, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "2"}


def cli(e2e_var, *argv: str) -> str:
    """Run one CLI verb in this process against the server's artifacts folder (``python -m core`` runs the
    same ``main``; tests/test_cli.py checks the real entry point), so that the imports are paid once."""
    with pytest.MonkeyPatch.context() as mp:
        for key, value in server_env(e2e_var).items():
            if key.startswith("QRS_"):
                mp.setenv(key, value)
        code, out, err = run_main(*argv)
    assert code == 0, f"python -m core {' '.join(argv)} failed:\n{err[-3000:]}"
    return out + err


def start_streamlit(var: Path, port: int, log: Path, env: dict[str, str] | None = None,
                    append: bool = False) -> subprocess.Popen:
    """``serve.py`` on 127.0.0.1:port with var/ as its artifacts folder and ``env`` on top; its output to ``log``
    (appended, for a server restarted on the same log)."""
    cmd = [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.headless", "true",
           "--server.address", "127.0.0.1", "--server.port", str(port), "--server.fileWatcherType", "none",
           "--browser.gatherUsageStats", "false"]
    return subprocess.Popen(cmd, cwd=ROOT, env={**server_env(var), **(env or {})},
                            stdout=log.open("ab" if append else "wb"), stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def e2e_var(tmp_path_factory) -> Path:
    var = Path(os.environ["QRS_E2E_VAR"]) if os.environ.get("QRS_E2E_VAR") else tmp_path_factory.mktemp("e2e_var")
    var.mkdir(parents=True, exist_ok=True)
    (var / "screenshots").mkdir(exist_ok=True)
    return var


@pytest.fixture(autouse=True)
def _screenshots_in_var(e2e_var):
    """Every e2e test's screenshots go to the run's ``<var>/screenshots`` (``page_driver.shot``)."""
    from tests.e2e import page_driver

    page_driver.SCREENS[0] = e2e_var / "screenshots"


@pytest.fixture(scope="session")
def app_server(e2e_var):
    """Build the tiny artifacts (CLI, same code as `make run`) while the server starts; yield its URL."""
    chrome, driver = browser_binaries()
    if not (chrome and driver):
        pytest.fail("CI is set but chromium/chromedriver are missing: .ci/run must install them")
    build_log = e2e_var / "build.log"
    builder = subprocess.Popen(
        [sys.executable, "-m", "core", "build", "--dataset", DATASET, "--systems", ",".join(E2E_SYSTEMS)],
        cwd=ROOT, env=server_env(e2e_var), stdout=build_log.open("wb"), stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_streamlit(e2e_var, port, e2e_var / "streamlit.log")
    try:
        wait_healthy(url, server)
        if builder.wait(timeout=BUILD_TIMEOUT) != 0:
            pytest.fail(f"building {E2E_SYSTEMS} on the tiny data failed:\n{build_log.read_text()[-3000:]}")
        yield url
    finally:
        stop(server)
        stop(builder)
        print(f"\n[e2e] screenshots and logs in {e2e_var}")


@pytest.fixture(scope="session")
def downloads(e2e_var) -> Path:
    path = e2e_var / "downloads"
    path.mkdir(exist_ok=True)
    return path


def new_driver(e2e_var: Path, downloads: Path, profile_name: str):
    """A headless Chromium with a fresh profile (its own cookies and storage: an independent visitor)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chrome, driver_path = browser_binaries()
    options = webdriver.ChromeOptions()
    options.binary_location = chrome
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    profile = e2e_var / profile_name
    shutil.rmtree(profile, ignore_errors=True)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                              "download.prompt_for_download": False})
    driver = webdriver.Chrome(options=options, service=Service(
        executable_path=driver_path, log_output=str(e2e_var / f"chromedriver-{profile_name}.log")))
    driver.set_page_load_timeout(60)
    try:
        driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    except Exception:  # older drivers: the prefs above suffice
        pass
    return driver


@pytest.fixture(scope="session")
def browser(app_server, e2e_var, downloads):
    """One headless Chromium (fresh profile) for the session."""
    driver = new_driver(e2e_var, downloads, "chrome-profile")
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def second_browser(app_server, e2e_var, downloads):
    """A second, independent visitor (own profile, own Streamlit session)."""
    driver = new_driver(e2e_var, downloads, "chrome-profile-2")
    try:
        yield driver
    finally:
        driver.quit()
