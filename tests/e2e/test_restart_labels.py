"""In real browsers: the server is SIGKILLed while an annotator presses 10 keys/s, in free judging and in a
campaign at once, and started again on the same port with the same artifacts folder and database; every key
pressed is stored exactly once within 10 s of the restart, with no reload (the panel keeps its token, which the
new process still verifies, and resends its outbox as soon as the endpoint answers). SQLite and PostgreSQL."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("selenium")
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

from core.judging.campaign_records import CampaignSpec, ItemSpec, QuerySet  # noqa: E402
from core.judging.campaigns import CampaignStore  # noqa: E402
from tests.conftest import ROOT  # noqa: E402
from tests.e2e.conftest import DATASET, free_port, new_driver, server_env, start_streamlit, stop, wait_healthy  # noqa: E402
from tests.pg_server import db_url, postgres_server  # noqa: E402,F401 - fixtures

HEADER, WHO, OWNER, CAMPAIGN = "X-Test-User", "ann@lab.example", "olivia@lab.example", "restart-e2e"
WAIT, BEFORE, AFTER, WITHIN = 120, 3, 3, 10.0  # keys before and after the kill; seconds allowed after the restart


@pytest.fixture(scope="module")
def bm25_var(tmp_path_factory):
    """An artifacts folder with BM25 built on the tiny data (free judging pools it)."""
    var = tmp_path_factory.mktemp("restart_var")
    done = subprocess.run([sys.executable, "-m", "core", "build", "--dataset", DATASET, "--systems", "bm25"], cwd=ROOT,
                          env=server_env(var), capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return var


def _start(var, port: int, url: str) -> subprocess.Popen:
    return start_streamlit(var, port, var / "streamlit.log",
                           {"QRS_DB_URL": url, "QRS_TRUSTED_HEADER": HEADER, "QRS_OWNERS": OWNER}, append=True)


def _wait(d, predicate, what: str):
    try:
        return WebDriverWait(d, WAIT, poll_frequency=0.2).until(lambda x: predicate(x))
    except Exception as exc:  # noqa: BLE001 - name what was awaited
        raise AssertionError(f"timed out waiting for {what}") from exc


def _uid(d) -> str | None:
    roots = d.find_elements(By.CSS_SELECTOR, ".qrs-judge[data-uid]")
    return (roots[0].get_attribute("data-uid") or None) if roots else None


def _browser(var, name: str):
    d = new_driver(var, var, name)
    d.execute_cdp_cmd("Network.enable", {})
    d.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {HEADER: WHO}})
    return d


def _open_free(d, app: str) -> None:
    d.get(f"{app}/Annotate")
    add = _wait(d, lambda x: next((b for b in x.find_elements(By.CSS_SELECTOR, "button")
                                   if b.text.strip() == "Add dataset queries"), None), "'Add dataset queries'")
    time.sleep(0.5)
    add.click()
    _wait(d, _uid, "free judging's panel")


def _open_campaign(d, app: str) -> None:
    d.get(f"{app}/Annotate")
    choice = _wait(d, lambda x: next((lab for lab in x.find_elements(By.CSS_SELECTOR, '[data-testid="stRadio"] label')
                                      if lab.text.strip() == CAMPAIGN), None), "the campaign in 'Judge'")
    time.sleep(0.5)
    choice.click()
    _wait(d, lambda x: (_uid(x) or "").isdigit(), "the campaign's panel")


def _press(browsers: dict, n: int, pressed: dict) -> None:
    """``n`` keys in each browser, 0.1 s apart (10 keys/s each): the label 2, 1, 0, ... on the item shown."""
    for _ in range(n):
        for mode, d in browsers.items():
            uid = _uid(d)
            label = 2 - len(pressed[mode]) % 3
            ActionChains(d).send_keys(str(label)).perform()
            pressed[mode].append((uid, label))
        time.sleep(0.1)


def _stored(engine) -> dict[str, list]:
    """What the store holds of WHO: free judging's history (document, label) and the campaign's (item, label)."""
    with engine.connect() as c:
        free = c.execute(text("SELECT q.text, d.doc_id, h.label FROM judgment_history h "
                              "JOIN annotators a ON a.id = h.annotator_id JOIN queries q ON q.id = h.query_id "
                              "JOIN documents d ON d.id = h.document_id WHERE a.name = :w AND h.action = 'set' "
                              "ORDER BY h.id"), {"w": WHO}).fetchall()
    return {"free": [(doc, label) for _, doc, label in free]}


def _campaign_stored(cs: CampaignStore) -> list[tuple[str, int]]:
    return [(str(h.item_id), h.label) for h in cs.history(OWNER, CAMPAIGN) if h.who == WHO and h.action == "label"]


def test_every_key_pressed_while_the_server_is_killed_is_stored_once_after_the_restart(bm25_var, tmp_path, db_url):
    var = tmp_path / "var"
    shutil.copytree(bm25_var, var)
    cs = CampaignStore(db_url)
    cs.create(OWNER, CampaignSpec(CAMPAIGN, DATASET, QuerySet("list", ids=("q1", "q2")), ("given",), 5, 1, (OWNER,),
                                  (WHO,)),
              [ItemSpec(q, f"query {q}", f"{q}-d{j}", f"candidate {j} of {q}", {"given": j + 1})
               for q in ("q1", "q2") for j in range(5)])
    engine = create_engine(db_url)
    port = free_port()
    app = f"http://127.0.0.1:{port}"
    server = _start(var, port, db_url)
    browsers: dict = {}
    try:
        wait_healthy(app, server)
        browsers = {"free": _browser(var, "restart-free"), "campaign": _browser(var, "restart-campaign")}
        _open_free(browsers["free"], app)
        _open_campaign(browsers["campaign"], app)
        pressed: dict[str, list] = {"free": [], "campaign": []}
        for d in browsers.values():
            d.execute_script("window.__qrsSamePage = true")  # gone if the page were reloaded
        _press(browsers, BEFORE, pressed)
        os.kill(server.pid, signal.SIGKILL)  # mid-stream: some labels in flight, the next ones pressed while down
        server.wait(timeout=10)
        _press(browsers, AFTER, pressed)
        server = _start(var, port, db_url)
        wait_healthy(app, server)
        back = time.monotonic()
        want = {"free": [(uid.rpartition("|")[2], label) for uid, label in pressed["free"]],
                "campaign": pressed["campaign"]}
        assert all(len(set(uid for uid, _ in keys)) == BEFORE + AFTER for keys in want.values()), pressed

        def got() -> dict[str, list]:
            return {**_stored(engine), "campaign": _campaign_stored(cs)}

        while time.monotonic() - back < WITHIN and got() != want:
            time.sleep(0.25)
        took = time.monotonic() - back
        assert got() == want, f"after {took:.1f} s: stored {got()}, pressed {want}"  # each key once, in order
        for d in browsers.values():  # no reload: the page the keys went to still shows nothing unsaved
            _wait(d, lambda x: x.find_element(By.CSS_SELECTOR, ".qrs-judge").get_attribute("data-unsaved") == "0",
                  "the status line's unsaved count back to 0")
            assert d.execute_script("return window.__qrsSamePage === true"), "the page was reloaded"
        print(f"[restart] all {2 * (BEFORE + AFTER)} keys stored {took:.1f} s after the restart")
    finally:
        for d in browsers.values():
            d.quit()
        stop(server)
        engine.dispose()
        cs.close()
