"""In a real browser: the judging panel's help overlay, "can't judge" with a reason and the mouse; every answer
the panel showed saved is stored once. (A server killed mid-stream and started again, with the labels not
acknowledged resent from the browser's storage, is test_campaign_browser's, with three annotators at once.)

The annotator is named by a trusted proxy header (``QRS_TRUSTED_HEADER``), which Chromium sends through the
DevTools protocol; the database is SQLite (the PostgreSQL path of the same panel is in test_campaign_browser).
"""
from __future__ import annotations

import subprocess
import time

import pytest

pytest.importorskip("selenium")
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from core.judging.campaign_records import CampaignSpec, ItemSpec, QuerySet  # noqa: E402
from core.judging.campaigns import CampaignStore  # noqa: E402
from tests.e2e.conftest import free_port, new_driver, start_streamlit, stop, wait_healthy  # noqa: E402

HEADER, WHO, OWNER, CAMPAIGN = "X-Test-User", "ann@lab.example", "olivia@lab.example", "panel-e2e"
WAIT = 120


def _start(folder, port: int, db_url: str) -> subprocess.Popen:
    return start_streamlit(folder, port, folder / "streamlit.log",
                           {"QRS_DB_URL": db_url, "QRS_TRUSTED_HEADER": HEADER, "QRS_OWNERS": OWNER}, append=True)


def _state(d):
    roots = d.find_elements(By.CSS_SELECTOR, ".qrs-judge[data-uid]")
    if not roots:
        return None
    return roots[0].get_attribute("data-uid"), int(roots[0].get_attribute("data-unsaved") or 0)


def _wait(d, predicate, what: str):
    try:
        return WebDriverWait(d, WAIT, poll_frequency=0.2).until(lambda x: predicate(x))
    except Exception as exc:  # noqa: BLE001 - name what was awaited
        raise AssertionError(f"timed out waiting for {what}") from exc


def _open(d, url: str) -> None:
    d.get(f"{url}/Annotate")
    choice = _wait(d, lambda x: next((lab for lab in x.find_elements(By.CSS_SELECTOR, '[data-testid="stRadio"] label')
                                      if lab.text.strip() == CAMPAIGN), None), "the campaign in 'Judge'")
    time.sleep(0.5)
    choice.click()
    _wait(d, _state, "the judging panel")


def _press(d, key: str) -> None:
    ActionChains(d).send_keys(key).perform()


def test_panel_help_cant_judge_and_mouse(tmp_path, e2e_var):
    db_url = f"sqlite:///{tmp_path / 'j.sqlite'}"
    queries = ("q1", "q2")
    cs = CampaignStore(db_url)
    cs.create(OWNER, CampaignSpec(CAMPAIGN, "qqp-bimpm", QuerySet("list", ids=queries), ("given",), 5, 1, (OWNER,),
                                  (WHO,)),
              [ItemSpec(q, f"query {q}", f"{q}-d{j}", f"candidate {j} of {q}", {"given": j + 1})
               for q in queries for j in range(5)])
    queue = [it.item_id for it in cs.queue(WHO, CAMPAIGN)]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = _start(tmp_path, port, db_url)
    d = None
    try:
        wait_healthy(url, server)
        d = new_driver(e2e_var, tmp_path, "panel-ann")
        d.execute_cdp_cmd("Network.enable", {})
        d.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {HEADER: WHO}})
        _open(d, url)
        # the help overlay lists the keyboard map; Esc closes it and the keys work again
        _press(d, "?")
        dialog = _wait(d, lambda x: next((e for e in x.find_elements(By.CSS_SELECTOR, '.qrs-judge [role="dialog"]')
                                          if e.is_displayed()), None), "the help overlay")
        for key in ("0 / 1 / 2", "U", "P", "N", "J / K", "S", "R", "L", "?"):
            assert key in [t.text for t in dialog.find_elements(By.CSS_SELECTOR, "dt")], key
        _press(d, "1")  # ignored while the overlay is open
        assert _state(d) == (str(queue[0]), 0)
        ActionChains(d).send_keys("\ue00c").perform()  # Esc
        _wait(d, lambda x: not x.find_element(By.CSS_SELECTOR, '.qrs-judge [role="dialog"]').is_displayed(),
              "the overlay closed")
        # keys, then "can't judge" with a reason (S, type, Enter), then a label with the mouse
        for label in (2, 0):
            _press(d, str(label))
        _press(d, "s")
        box = _wait(d, lambda x: next((b for b in x.find_elements(By.CSS_SELECTOR, ".qrs-judge .qj-cant-box")
                                       if b.is_displayed()), None), "the reason box")
        box.send_keys("the candidate is cut off", "\ue007")  # Enter
        d.find_element(By.CSS_SELECTOR, '.qrs-judge button[aria-label="Label 1"]').click()
        _wait(d, lambda x: _state(x) == (str(queue[4]), 0), "four answers saved")
        got = {it.item_id: (it.label, it.cant_judge) for it in cs.queue(WHO, CAMPAIGN)}
        assert [got[i] for i in queue[:4]] == [(2, None), (0, None), (None, "the candidate is cut off"), (1, None)]
        history = cs.history(OWNER, CAMPAIGN)
        assert len(history) == 4 and len({(h.item_id, h.action) for h in history}) == 4  # each answer once
    finally:
        if d is not None:
            d.quit()
        stop(server)
        cs.close()
