"""Driving Streamlit pages in a real browser (selenium): find elements by their ``data-testid``, wait for a rerun to
settle (an exception box on the page fails at once), type, pick, press buttons, read dataframe cells and take
screenshots. Content arrives over a websocket after the page loads, so every helper waits for real DOM elements,
never for the HTML document alone."""
from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("selenium")
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

__all__ = ["BUSY", "SCREENS", "WAIT", "aligned_grid", "button", "cells", "css", "headings", "idle", "multiselect_add",
           "nav_to", "open_page", "shot", "shot_if_alive", "shown_as", "text_input", "type_into", "wait_for"]

WAIT = 90  # seconds for one page to show its content (first load of MiniLM on 2 busy cores)


def css(driver, selector: str):
    return driver.find_elements(By.CSS_SELECTOR, selector)


def wait_for(driver, predicate, timeout: float = WAIT, what: str = ""):
    """Wait until ``predicate(driver)`` is truthy (stale elements during a rerun are retried)."""

    def safe(d):
        try:
            crashed = d.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
            if crashed:
                shot_if_alive(d, "exception")
                raise AssertionError("the app shows an exception: " + crashed[0].text[:1500])
            return predicate(d)
        except StaleElementReferenceException:
            return False

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.25).until(safe)
    except TimeoutException:
        shot_if_alive(driver, "timeout-" + re.sub(r"\W+", "_", what or "wait")[:40])
        alerts = [a.text for a in css(driver, '[data-testid="stAlert"], [data-testid="stException"]')]
        raise AssertionError(f"timed out waiting for {what or predicate}; alerts on the page: {alerts}") from None


def idle(driver, timeout: float = WAIT) -> None:
    """Wait until the rerun settled: no spinner, no element marked stale by a running script."""
    time.sleep(0.5)
    busy = ", ".join(BUSY)
    try:
        wait_for(driver, lambda d: not css(d, busy), timeout, "the script run to finish")
    except AssertionError as exc:
        still = [s for s in BUSY if css(driver, s)]
        raise AssertionError(f"{exc}; still on the page: {still}") from None


# a script still running: spinner, stale elements, the header's running icon (progress bars can be permanent,
# e.g. Annotate's queue bar, so they are not a sign of work)
BUSY = ('[data-testid="stSpinner"]', '[data-stale="true"]', '[data-testid="stStatusWidgetRunningIcon"]',
        '[data-testid="stStatusWidgetRunningManIcon"]')


def cells(element) -> list[str]:
    """Texts of the visible cells of the dataframes under ``element`` (glide-data-grid's a11y table)."""
    return [(c.get_attribute("textContent") or "").strip()
            for c in element.find_elements(By.CSS_SELECTOR, '[data-testid^="glide-cell-"]')]


def open_page(driver, url: str, path: str = "", timeout: float = WAIT) -> None:
    driver.get(f"{url}/{path}")
    wait_for(driver, lambda d: css(d, '[data-testid="stApp"] h1'), what=f"the title of /{path}")
    idle(driver, timeout)


def shot(driver, name: str) -> Path:
    path = SCREENS[0] / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    return path


def shot_if_alive(driver, name: str) -> Path | None:
    """A screenshot where the browser still answers; None where it is gone (one a test killed on purpose)."""
    try:
        return shot(driver, name)
    except Exception:  # noqa: BLE001 - a dead browser has no screenshot; the caller reports what it waited for
        return None


SCREENS: list[Path] = [Path(tempfile.gettempdir()) / "qrs-e2e-screenshots"]  # tests/e2e/conftest.py points it at the run's var/


def text_input(driver, label: str):
    return wait_for(driver, lambda d: d.find_element(By.CSS_SELECTOR, f'input[aria-label="{label}"]'),
                    what=f"text input {label!r}")


def type_into(driver, label: str, text: str) -> None:
    box = text_input(driver, label)
    box.click()
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)
    box.send_keys(text, Keys.ENTER)
    idle(driver)


def multiselect_add(driver, label: str, value: str) -> None:
    """Pick ``value`` in the multiselect labelled ``label`` (type to filter, Enter to choose)."""
    def find(d):
        for widget in css(d, '[data-testid="stMultiSelect"]'):
            if widget.text.splitlines()[:1] == [label] or label in widget.text:
                return widget
        return None

    def filtered(d):
        # the typed filter has reached the dropdown: every option shown contains ``value``. The exact option is
        # clicked: Enter chooses the highlighted first row, which is Streamlit's "Select N matches" (all of them:
        # "tree-bert" also chose "tree-bert-cross") or, before the filter lands, whatever option comes first.
        options = [o for o in css(d, '[role="option"]')
                   if o.text.strip() and not re.fullmatch(r"Select (all|\d+ match(es)?)", o.text.strip())]
        exact = [o for o in options if shown_as(o.text.strip(), value)]
        return exact[0] if exact and all(value in o.text for o in options) else None

    idle(driver)
    widget = wait_for(driver, find, what=f"multiselect {label!r}")
    before = set(widget.text.splitlines())
    box = widget.find_element(By.CSS_SELECTOR, "input")
    box.click()
    box.send_keys(value)
    wait_for(driver, filtered, what=f"option {value!r} alone in the filtered list").click()
    wait_for(driver, lambda d: any(shown_as(t, value) for t in find(d).text.splitlines()), what=f"{value!r} chosen")
    added = {t for t in set(find(driver).text.splitlines()) - before if not shown_as(t, value)}
    assert not added, f"choosing {value!r} in {label!r} also chose {added}"
    ActionChains(driver).send_keys(Keys.ESCAPE).perform()
    idle(driver)


def shown_as(text: str, value: str) -> bool:
    """An option or chip that shows ``value``: its name, or a user's / plugin's name with its group ("x · yours"),
    either marked " — not built" where it cannot rank yet (picking it shows its build command)."""
    text = text.removesuffix(" — not built")
    return text == value or text.startswith(value + " · ")


def headings(driver, level: str = "h3") -> list[str]:
    return [h.text.strip() for h in css(driver, f'[data-testid="stHeading"] {level}')]


def button(driver, text: str):
    def find(d):
        hits = [b for b in css(d, '[data-testid="stButton"] button, [data-testid="stDownloadButton"] button')
                if text in b.text]
        return hits[0] if hits else None

    return wait_for(driver, find, what=f"button {text!r}")


def aligned_grid(driver):
    """The aligned table: the dataframe whose header has a '#' column followed by system columns."""
    frames = css(driver, '[data-testid="stDataFrame"]')
    for frame in frames:
        heads = [(h.get_attribute("textContent") or "").strip() for h in frame.find_elements(By.CSS_SELECTOR, "th")]
        if heads[:1] == ["#"]:
            return frame, heads
    return None


def nav_to(driver, title: str) -> None:
    """Follow the sidebar link (same Streamlit session, so the chosen dataset stays)."""
    link = wait_for(driver, lambda d: [a for a in css(d, '[data-testid="stSidebarNav"] a') if a.text.strip().endswith(title)],
                    what=f"the {title} link")[0]
    link.click()
    wait_for(driver, lambda d: title.lower() in " ".join(h.text.lower() for h in css(d, '[data-testid="stApp"] h1')),
             what=f"the {title} page")
    idle(driver)
