"""Fixtures for the team-campaign browser test: a real PostgreSQL server, the local OIDC provider,
one campaign (overlap 2, three named annotators) and a ``streamlit run`` server that logs in through the
provider. The login configuration lives in a temporary secrets file passed with ``--secrets.files``
(Streamlit's own option); the repository's ``.streamlit/secrets.toml`` is never written.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import ROOT, TINY_DATA
from tests.e2e.conftest import free_port, server_env, stop, wait_healthy
from tests.oidc_server import oidc_provider  # noqa: F401  (session fixture)
from tests.pg_server import postgres_server  # noqa: F401  (session fixture)

CAMPAIGN = "team-e2e"
OWNER = "olivia@lab.example"
TEAM = ("ann@lab.example", "bob@lab.example", "cat@lab.example")
SUBS = {who: "u-" + who.split("@")[0] for who in (*TEAM, OWNER)}  # the OIDC subject each one logs in as
N_QUERIES, N_DOCS = 3, 3  # 9 items; overlap 2 of 3 annotators: 6 items each


@dataclass
class TeamApp:
    """The running app and what the test needs to know about its campaign."""

    url: str
    db_url: str
    var: Path
    downloads: Path
    items: dict[int, tuple[str, str, str]] = field(default_factory=dict)  # item id -> (query id, doc id, doc text)
    queues: dict[str, list[int]] = field(default_factory=dict)  # annotator -> assigned item ids
    server: list = field(default_factory=list)  # [the running server process, how to start another]
    restarts: int = 0

    def restart(self) -> None:
        """SIGKILL the server (a crash: nothing flushed, no goodbye to the browsers) and start it again on the
        same port, database and secrets (the login cookies stay valid); back when it answers."""
        proc, start = self.server
        proc.kill()
        proc.wait(timeout=30)
        self.server[0] = start()
        wait_healthy(self.url, self.server[0])
        self.restarts += 1


def _create_campaign(db_url: str, var: Path) -> tuple[dict, dict]:
    from core.data.datasets import load_dataset
    from core.judging.campaign_pool import items_from_pool
    from core.judging.campaign_records import CampaignSpec, QuerySet
    from core.judging.campaigns import CampaignStore

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QRS_DATA", str(TINY_DATA))
        mp.setenv("QRS_VAR", str(var))
        ds = load_dataset("qqp-bimpm")
    qids = list(ds.split_queries("test"))[:N_QUERIES]
    docs = [d for d in ds.corpus if d not in qids]
    pool = {q: docs[i * N_DOCS:(i + 1) * N_DOCS] for i, q in enumerate(qids)}
    (var / "pool.json").write_text(json.dumps(pool))
    spec = CampaignSpec(CAMPAIGN, ds.name, QuerySet("list", ids=tuple(qids)), ("given",), N_DOCS, 2, (OWNER,), TEAM,
                        guidelines="2 = same question, 1 = related, 0 = not the same")
    cs = CampaignStore(db_url)
    try:
        cs.create(OWNER, spec, items_from_pool(ds, pool))
        queues = {who: [it.item_id for it in cs.queue(who, CAMPAIGN)] for who in TEAM}
        items = {it.item_id: (it.query_id, it.doc_id, it.doc_text) for who in TEAM for it in cs.queue(who, CAMPAIGN)}
    finally:
        cs.close()
    return items, queues


@pytest.fixture(scope="module")
def team_app(oidc_provider, postgres_server, e2e_var, tmp_path_factory):  # noqa: F811
    """`streamlit run serve.py` with OIDC login (the local provider), QRS_DB_URL on PostgreSQL, QRS_OWNERS."""
    from tests.e2e.conftest import browser_binaries

    chrome, driver = browser_binaries()
    if not (chrome and driver):
        pytest.fail("chromium/chromedriver are missing: the campaign browser test needs them")
    folder = tmp_path_factory.mktemp("team_app")
    var = folder / "var"
    var.mkdir()
    downloads = folder / "downloads"
    downloads.mkdir()
    for who in (*TEAM, OWNER):
        oidc_provider.add_user(SUBS[who], email=who, name=who.split("@")[0].title())
    db_url = postgres_server.database()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    secrets = oidc_provider.secrets_toml(url, [OWNER], folder / "secrets.toml")
    env = {**server_env(var), "QRS_DB_URL": db_url, "QRS_OWNERS": OWNER}
    for name in ("QRS_TRUSTED_HEADER", "QRS_USER"):
        env.pop(name, None)
    cmd = [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.headless", "true",
           "--server.address", "127.0.0.1", "--server.port", str(port), "--server.fileWatcherType", "none",
           "--browser.gatherUsageStats", "false", "--secrets.files", str(secrets)]
    log = e2e_var / "campaign-streamlit.log"

    def start() -> subprocess.Popen:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)

    server = [start(), start]
    try:
        items, queues = _create_campaign(db_url, var)  # while the server starts
        wait_healthy(url, server[0])
        yield TeamApp(url, db_url, var, downloads, items, queues, server)
    finally:
        stop(server[0])
        print(f"\n[e2e] campaign server log: {log}")


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (read from /proc), children first-level first."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        kids = [p for p, pp in parents.items() if pp in frontier]
        found += kids
        frontier = kids
    return found


def kill_browser(driver) -> list[int]:  # noqa: ANN001
    """SIGKILL the Chromium that ``driver`` started (its browser and helper processes, by PID): a crash, not a
    quit. chromedriver itself is left for ``driver.quit()``."""
    pids = descendants(driver.service.process.pid)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids
