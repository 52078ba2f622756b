"""Driving the judging pages in real browsers for the campaign tests: the Streamlit page helpers of
``page_driver`` with the campaign tests' longer wait (three browsers and the server on 2 shared cores), logging in
through the OIDC provider, opening a campaign's queue, reading the judging panel's state, sending keys to whatever
has the focus, picking in a selectbox, opening a tab and starting several independent browsers at once."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("selenium")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

from tests.e2e import page_driver  # noqa: E402
from tests.e2e.campaign_fixtures import CAMPAIGN, SUBS  # noqa: E402
from tests.e2e.conftest import new_driver  # noqa: E402
from tests.e2e.page_driver import BUSY, css  # noqa: E402
from tests.side_by_side import side_by_side  # noqa: E402

__all__ = ["WAIT", "button", "click_settled", "css", "fresh", "idle", "keyed", "login", "open_campaign", "open_tab",
           "panel_state", "pick", "press", "quit_quietly", "shot", "start_drivers", "texts", "wait_for"]

WAIT = 120  # seconds for one step (2 shared, loaded cores; three browsers and the server on them)


def shot(driver, name: str) -> None:
    """``campaign-<name>.png`` among the run's screenshots, where the browser still answers."""
    page_driver.shot_if_alive(driver, f"campaign-{name}")


def wait_for(driver, predicate, what: str, timeout: float = WAIT):
    """``page_driver.wait_for`` with the campaign tests' wait: until ``predicate(driver)`` is truthy; an exception
    box on the page fails at once."""
    return page_driver.wait_for(driver, predicate, timeout, what)


def idle(driver) -> None:
    """The script run has finished: nothing stale, no spinner, no running icon (checked twice, 0.3 s apart)."""
    import time

    for _ in range(2):
        time.sleep(0.3)
        wait_for(driver, lambda d: not css(d, ", ".join(BUSY)), "the script run to finish")


def texts(driver, selector: str) -> list[str]:
    return [e.text.strip() for e in css(driver, selector)]


def keyed(driver, key: str, inner: str = ""):
    """The element of the widget with Streamlit key ``key`` (its ``st-key-*`` class), or what ``inner`` selects in it."""
    cls = "st-key-" + re.sub(r"[^a-zA-Z0-9_-]", "-", key)
    return css(driver, f".{cls} {inner}".strip())


def button(driver, text: str):
    return wait_for(driver, lambda d: next((b for b in css(d, '[data-testid="stButton"] button, '
                                                              '[data-testid="stDownloadButton"] button')
                                            if b.text.strip() == text and b.is_enabled()), None), f"button {text!r}")


def fresh(read, attempts: int = 5):
    """``read()``, again when it met an element a rerun had replaced (``StaleElementReferenceException``)."""
    for attempt in range(attempts):
        try:
            return read()
        except StaleElementReferenceException:
            if attempt == attempts - 1:
                raise


def click_settled(driver, find, what: str) -> None:
    """Click what ``find(driver)`` returns once the script run has finished; found again when a rerun replaced it
    between finding and clicking."""
    def settle_and_click() -> None:
        idle(driver)
        wait_for(driver, find, what).click()

    fresh(settle_and_click)


def login(driver, app: str, who: str) -> None:
    """The app's login page -> Log in -> the provider's form (subject) -> back in the app, signed in as ``who``."""
    driver.get(app + "/")
    wait_for(driver, lambda d: css(d, '[data-testid="stApp"] h1'), "the login page")
    idle(driver)
    button(driver, "Log in").click()
    box = wait_for(driver, lambda d: next(iter(css(d, 'input[name="sub"]')), None), "the provider's login form")
    box.send_keys(SUBS[who], Keys.ENTER)
    wait_for(driver, lambda d: who in texts(d, '[data-testid="stSidebar"] [data-testid="stText"]'),
             f"signed in as {who}")
    idle(driver)


def open_campaign(driver, app: str, path: str = "Annotate") -> None:
    """Annotate (or ``path``), then the campaign's queue in the "Judge" radio."""
    driver.get(f"{app}/{path}")
    wait_for(driver, lambda d: css(d, '[data-testid="stRadio"] label'), "the 'Judge' picker")
    click_settled(driver, lambda d: next((lab for lab in css(d, '[data-testid="stRadio"] label')
                                          if lab.text.strip() == CAMPAIGN), None), "the campaign in 'Judge'")
    # the campaign view starts with its guidelines (free judging's own messages must not count as the queue)
    wait_for(driver, lambda d: any("Guidelines of this campaign" in e.text for e in css(d, '[data-testid="stExpander"]')),
             "the campaign queue")
    idle(driver)


def panel_state(driver):
    """(uid shown, unsaved labels, mode) of the judging panel, or None before it is there. The panel repaints when
    an answer of the server arrives; a read that meets the old panel reads the new one."""
    def read():
        roots = css(driver, ".qrs-judge")
        if not roots:
            return None
        r = roots[0]
        return r.get_attribute("data-uid"), int(r.get_attribute("data-unsaved") or 0), r.get_attribute("data-mode")

    return fresh(read)


def press(driver, key: str) -> None:
    """One key press sent to the element that has the focus (not to a chosen element)."""
    ActionChains(driver).send_keys(key).perform()


def pick(driver, key: str, value: str) -> None:
    """Choose ``value`` in the selectbox with Streamlit key ``key`` (a react-aria combobox: its "Open" button, then
    the option; the input's value shows the choice)."""
    opener = wait_for(driver, lambda d: next(iter(keyed(d, key, 'button[aria-haspopup="listbox"]')), None),
                      f"selectbox {key}")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", opener)
    opener.click()
    option = wait_for(driver, lambda d: next((o for o in css(d, '[role="option"]') if o.text.strip() == value), None),
                      f"option {value!r} of {key}")
    option.click()
    wait_for(driver, lambda d: [i.get_attribute("value") for i in keyed(d, key, 'input[role="combobox"]')] == [value],
             f"{value!r} chosen in {key}")
    idle(driver)


def open_tab(driver, name: str) -> None:
    tab = wait_for(driver, lambda d: next((t for t in css(d, '[role="tab"]') if t.text.strip() == name), None),
                   f"the {name} tab")
    tab.click()
    wait_for(driver, lambda d: any(t.text.strip() == name and t.get_attribute("aria-selected") == "true"
                                   for t in css(d, '[role="tab"]')), f"the {name} tab open")


def start_drivers(e2e_var: Path, downloads: Path, names: list[str]) -> dict:
    """Start several Chromium sessions at once (each its own profile: independent visitors)."""
    drivers: dict = {}

    def start(name: str) -> None:
        drivers[name] = new_driver(e2e_var, downloads, f"campaign-{name}")

    errors = side_by_side(start, [(n,) for n in names], what="browser start")
    if errors:
        for d in drivers.values():
            d.quit()
        raise errors[0]
    return drivers


def quit_quietly(driver) -> None:
    try:
        driver.quit()
    except Exception:  # noqa: BLE001 - a killed browser's driver may complain on the way out
        pass
