"""End to end in a real browser: `streamlit run app.py` + headless Chromium on the tiny fixture data.

Content arrives over a websocket after the page loads, so every check waits for real DOM elements
(``data-testid`` of Streamlit's elements), never for the HTML document alone. One screenshot per page
goes to ``<QRS_VAR>/screenshots/``.
"""
from __future__ import annotations

import re
import time
import tempfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, TINY_DATA

pytest.importorskip("selenium")
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

WAIT = 90  # seconds for one page to show its content (first load of MiniLM on 2 busy cores)
LAYERS_WAIT = 420  # the first visit computes MiniLM's per-layer curves (7 layers × 2 poolings × 600 texts)
DATASET = "qqp-bimpm"


# ----------------------------------------------------------------------------- helpers
def css(driver, selector: str):
    return driver.find_elements(By.CSS_SELECTOR, selector)


def wait_for(driver, predicate, timeout: float = WAIT, what: str = ""):
    """Wait until ``predicate(driver)`` is truthy (stale elements during a rerun are retried)."""

    def safe(d):
        try:
            crashed = d.find_elements(By.CSS_SELECTOR, '[data-testid="stException"]')
            if crashed:
                shot(d, "exception")
                raise AssertionError("the app shows an exception: " + crashed[0].text[:1500])
            return predicate(d)
        except StaleElementReferenceException:
            return False

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.25).until(safe)
    except TimeoutException:
        shot(driver, "timeout-" + (what or "wait").replace(" ", "_")[:40])
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
    path = _SCREENS[0] / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    return path


_SCREENS: list[Path] = [Path(tempfile.gettempdir()) / "qrs-e2e-screenshots"]  # a test module may point it elsewhere


@pytest.fixture(autouse=True)
def _screens_folder(e2e_var):
    _SCREENS[0] = e2e_var / "screenshots"


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
    """An option or chip that shows ``value``: its name, or a user's / plugin's name with its group ("x · yours")."""
    return text == value or text.startswith(value + " · ")


def headings(driver, level: str = "h3") -> list[str]:
    return [h.text.strip() for h in css(driver, f'[data-testid="stHeading"] {level}')]


def button(driver, text: str):
    def find(d):
        hits = [b for b in css(d, '[data-testid="stButton"] button, [data-testid="stDownloadButton"] button')
                if text in b.text]
        return hits[0] if hits else None

    return wait_for(driver, find, what=f"button {text!r}")


# ----------------------------------------------------------------------------- flows
def test_home_shows_dataset_and_ready_systems(browser, app_server):
    open_page(browser, app_server)
    wait_for(browser, lambda d: css(d, '[data-testid="stMetric"]'), what="collection metrics")
    wait_for(browser, lambda d: {"bm25", "minilm", "tree-bert", "densetrans"} <= set(cells(d)), what="systems table")
    statuses = cells(browser)
    assert statuses[statuses.index("bm25") + 2].endswith("ready"), statuses[:12]
    assert statuses[statuses.index("densetrans") + 2].endswith("not built"), statuses
    metrics = " ".join(m.text for m in css(browser, '[data-testid="stMetric"]'))
    assert "244" in metrics and "123" in metrics, metrics  # tiny fixture: 244 questions, 123 queries
    shot(browser, "0_home")


def test_navigation_named_and_grouped(browser, app_server):
    open_page(browser, app_server)
    nav = wait_for(browser, lambda d: css(d, '[data-testid="stSidebarNav"]'), what="the sidebar navigation")[0]
    links = [a.text.strip() for a in nav.find_elements(By.CSS_SELECTOR, "a") if a.text.strip()]
    assert links[0].endswith("Home") and not any(t.endswith("app") for t in links), links
    text = nav.text
    positions = [text.find(w) for w in ("Explore", "Compare", "Layers", "Keywords", "Judge", "Annotate",
                                        "Error Analysis", "Case Studies", "Build", "Models")]
    assert -1 not in positions and positions == sorted(positions), (positions, text)


def _aligned_grid(driver):
    """The aligned table: the dataframe whose header has a '#' column followed by system columns."""
    frames = css(driver, '[data-testid="stDataFrame"]')
    for frame in frames:
        heads = [(h.get_attribute("textContent") or "").strip() for h in frame.find_elements(By.CSS_SELECTOR, "th")]
        if heads[:1] == ["#"]:
            return frame, heads
    return None


def test_compare_aligned_table_readable_at_1400px(browser, app_server):
    from ui.compare_view import MAX_PER_TABLE, RANK_WIDTH, layout

    open_page(browser, app_server, "Compare")
    multiselect_add(browser, "First-stage systems", "minilm")
    multiselect_add(browser, "First-stage systems", "tree-bert")
    multiselect_add(browser, "First-stage systems", "densetrans")  # not built on the fixture: a clear message
    type_into(browser, "Question", "How can I learn Python quickly ?")
    frame, heads = wait_for(browser, _aligned_grid, what="the aligned table")
    assert heads[1:4] == ["bm25", "minilm", "tree-bert"], heads  # a column per system that ran
    errors = " ".join(a.text for a in css(browser, '[data-testid="stAlert"]'))
    assert "densetrans" in errors and "python -m core train --system densetrans" in errors, errors
    # both bm25 and MiniLM rank the fixture's Python questions first (cells hold marks + question + score)
    rows = cells(frame)
    assert "Python" in " ".join(rows[:8]), rows[:8]
    wait_for(browser, lambda d: css(d, '[data-testid="stPlotlyChart"] .main-svg'), what="agreement heatmap")
    # a fused column when asked: RRF of bm25 and MiniLM (untuned defaults on the fixture: nothing built for it)
    expander = wait_for(browser, lambda d: [e for e in css(d, '[data-testid="stSidebar"] [data-testid="stExpander"]')
                                            if "Fusion (ranx)" in e.text], what="the fusion expander")[0]
    expander.find_element(By.CSS_SELECTOR, "summary").click()
    multiselect_add(browser, "Fuse these first stages", "bm25")
    multiselect_add(browser, "Fuse these first stages", "minilm")
    frame, heads = wait_for(browser, lambda d: (g := _aligned_grid(d)) and len(g[1]) >= 5 and g, what="the fused column")
    assert heads[1:5] == ["bm25", "minilm", "tree-bert", "fusion@bm25+minilm:rrf"], heads
    assert "Python" in " ".join(cells(frame)[:10])
    captions = " ".join(c.text for c in css(browser, '[data-testid="stCaptionContainer"]'))
    assert "fusion@bm25+minilm:rrf: RRF" in captions and "untuned defaults" in captions, captions
    browser.execute_script("arguments[0].scrollIntoView()", frame)
    shot(browser, "1_compare_aligned")
    # measured at a 1,400-px window: a full table (MAX_PER_TABLE systems; more are stacked) fits, no sideways
    # scroll, and every system column keeps ≥ 200 px for the wrapped question
    width = browser.execute_script("return arguments[0].getBoundingClientRect().width", frame)
    need = RANK_WIDTH + MAX_PER_TABLE * layout(MAX_PER_TABLE, 10).column_width
    assert width >= need and layout(MAX_PER_TABLE, 10).column_width >= 200, (width, need)
    scroller = frame.find_elements(By.CSS_SELECTOR, ".dvn-scroller")
    if scroller:
        overflow = browser.execute_script("return arguments[0].scrollWidth - arguments[0].clientWidth", scroller[0])
        assert overflow <= 2, f"the aligned table scrolls sideways by {overflow}px"
    browser.execute_script("arguments[0].scrollIntoView()", frame)
    path = shot(browser, "1_compare_aligned")
    assert path.stat().st_size > 10_000


def test_layers_page_draws_its_charts(browser, app_server):
    open_page(browser, app_server, "Layers", LAYERS_WAIT)
    # MiniLM is built on the fixture; DenseTrans is not, so its curves are replaced by a clear note.
    wait_for(browser, lambda d: len(css(d, '[data-testid="stPlotlyChart"] .main-svg')) >= 2, LAYERS_WAIT,
             what="per-layer and recall charts")
    idle(browser)
    notes = " ".join(a.text for a in css(browser, '[data-testid="stAlert"]'))
    assert "DenseTrans" in notes and "python -m core train --system densetrans" in notes, notes
    traces = css(browser, '[data-testid="stPlotlyChart"] .scatterlayer .trace')
    assert traces, "the charts have no traces"
    assert not css(browser, '[data-testid="stException"]')
    shot(browser, "2_layers")


def _click_text(driver, selector: str, text: str) -> None:
    """Click the first element matching ``selector`` whose text contains ``text`` (an expander, a checkbox)."""
    el = wait_for(driver, lambda d: next((e for e in css(d, selector) if text in e.text), None), what=repr(text))
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", el)
    el.click()
    idle(driver)


def _no_exception(driver, who: str) -> None:
    time.sleep(0.5)
    crashed = css(driver, '[data-testid="stException"]')
    if crashed:
        shot(driver, f"exception-{who}")
    assert not crashed, f"{who}: " + crashed[0].text[:1500]


def test_keywords_picker_and_compare_why_from_two_sessions_and_a_reload(browser, second_browser, app_server):
    """The Keywords page explains with a system it can load (its system picker; the measured default or, when that
    is not built here, a clear note naming it and its build command), and Compare's "why" explains a row of BM25:
    heatmap and top words in one line. Two visitors at once, then a reload: no exception box."""
    open_page(browser, app_server, "Keywords?q=How%20can%20I%20learn%20Python%20quickly%20%3F")
    wait_for(browser, lambda d: css(d, '[data-testid="stPlotlyChart"] .main-svg'), what="the word heatmap")
    assert any("System" in s.text for s in css(browser, '[data-testid="stSelectbox"]'))
    captions = " ".join(c.text for c in css(browser, '[data-testid="stCaptionContainer"]'))
    assert "exact values on hover" in captions and "Shown:" in captions, captions
    # the query view says how faithful it was on held-out queries (bench/reports/query_view_faithfulness.json)
    assert "held-out qqp-bimpm queries, leaving out its top-k words" in captions or "is not measured on" in captions
    alerts = " ".join(a.text for a in css(browser, '[data-testid="stAlert"]'))
    assert not alerts or "not built" in alerts and "python -m core" in alerts, alerts
    shot(browser, "3_keywords")

    second_browser.get(f"{app_server}/Compare?q=How%20can%20I%20learn%20Python%20quickly%20%3F&systems=bm25&k=3")
    wait_for(second_browser, lambda d: css(d, '[data-testid="stApp"] h1'), what="Compare's title")
    idle(second_browser)
    _click_text(second_browser, '[data-testid="stExpander"] summary', "Why did it rank that?")
    _click_text(second_browser, '[data-testid="stCheckbox"] label', "Explain this row")
    wait_for(second_browser, lambda d: any("(occlusion, score" in t.text for t in css(d, '[data-testid="stText"]')),
             what="the row's top words")
    wait_for(second_browser, lambda d: css(d, '[data-testid="stPlotlyChart"]'), what="the row's heatmap")  # one system: no other chart
    shot(second_browser, "1_compare_why")
    browser.refresh()
    second_browser.refresh()
    for driver, who in ((browser, "keywords after a reload"), (second_browser, "compare after a reload")):
        wait_for(driver, lambda d: css(d, '[data-testid="stApp"] h1'), what=who)
        idle(driver)
        _no_exception(driver, who)


def _store(var: Path):
    from core.judging.judgments import JudgmentStore

    return JudgmentStore(f"sqlite:///{var / 'judgments.sqlite'}")


def store_history(var: Path) -> list:
    store = _store(var)
    try:
        return [h for h in store.history(DATASET) if h.annotator == "E2E Tester"]
    finally:
        store.close()


def test_annotate_labels_a_pooled_result_with_the_keyboard(browser, app_server, e2e_var):
    open_page(browser, app_server, "Annotate")
    type_into(browser, "Annotator", "E2E Tester")
    button(browser, "Add dataset queries").click()
    idle(browser)
    panel = lambda d: next(iter(css(d, ".qrs-judge[data-uid]")), None)  # noqa: E731
    wait_for(browser, lambda d: (p := panel(d)) is not None and any(
        b.is_enabled() for b in css(d, '.qrs-judge button[aria-label="Label 2"]')), what="the judging panel, enabled")
    idle(browser)
    first = panel(browser).get_attribute("data-uid")
    texts = [e.text.strip() for e in css(browser, ".qrs-judge .qj-query, .qrs-judge .qj-doc")]  # what was judged
    # the key goes to the panel from anywhere on the page (here: after clicking the title)
    browser.find_element(By.CSS_SELECTOR, '[data-testid="stApp"] h1').click()
    ActionChains(browser).send_keys("2").perform()
    assert panel(browser).get_attribute("data-uid") != first  # the next candidate is painted at once
    wait_for(browser, lambda d: panel(d).get_attribute("data-unsaved") == "0", what="the label to be saved")
    # list mode: L shows the query's candidates, J moves, 1 labels; the labelled rows are marked
    ActionChains(browser).send_keys("l").perform()
    wait_for(browser, lambda d: panel(d).get_attribute("data-mode") == "list", what="list mode")
    rows = css(browser, '.qrs-judge [role="option"]')
    assert rows and rows[0].get_attribute("data-label") == "2"
    ActionChains(browser).send_keys("j", "1").perform()
    wait_for(browser, lambda d: panel(d).get_attribute("data-unsaved") == "0"
             and [r.get_attribute("data-label") for r in css(d, '.qrs-judge [role="option"]')][:3] == ["2", "", "1"],
             what="the list-mode label saved and marked")
    ActionChains(browser).send_keys("l").perform()  # back to item mode for the next visitor of this profile
    shot(browser, "4_annotate")
    store = _store(e2e_var)
    mine = [j for j in store.judgments(DATASET) if j.annotator == "E2E Tester"]
    store.close()
    assert sorted(j.label for j in mine) == [1, 2], mine
    assert all(j.query_id and j.doc_id != j.query_id for j in mine)
    assert len(store_history(e2e_var)) == 2  # each label stored once
    from core.data.datasets import load_dataset

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QRS_DATA", str(TINY_DATA))
        ds = load_dataset(DATASET)
    two = next(j for j in mine if j.label == 2)  # the item judged in item mode: its query (as people wrote it,
    # not the stored tokenized form) and its text were shown
    assert texts == [ds.display_query(two.query_id).strip(), ds.display(two.doc_id).strip()], texts


def test_error_analysis_exports_the_judgments_as_qrels(browser, app_server, e2e_var, downloads):
    store = _store(e2e_var)
    store.set_label("E2E Exporter", DATASET, "How do I export qrels ?", "q00007", "a text", 1, query_id="q00005")
    expected = {(j.query_id, j.doc_id) for j in store.judgments(DATASET)}
    store.close()
    open_page(browser, app_server, "Error_Analysis")
    tab = wait_for(browser, lambda d: [t for t in css(d, '[role="tab"]') if "Export" in t.text],
                   what="the Export tab")[0]
    tab.click()
    idle(browser)  # a button clicked while the rerun replaces it starts no download
    for old in downloads.glob("judgments*.qrels"):
        old.unlink()
    button(browser, "User judgments (TREC qrels)").click()
    path = wait_for(browser, lambda d: next(iter(downloads.glob("judgments*.qrels")), None), 60, "the qrels download")
    shot(browser, "5_error_analysis_export")
    lines = {tuple(line.split()) for line in path.read_text().splitlines() if line.strip()}
    assert ("q00005", "0", "q00007", "1") in lines, lines
    assert {(q, d) for q, _, d, _ in lines} == expected


def test_models_page_lists_the_built_systems(browser, app_server):
    open_page(browser, app_server, "Models")
    wait_for(browser, lambda d: css(d, '[data-testid="stDataFrame"]'), what="the status table")
    assert any("bm25" in e.text for e in css(browser, '[data-testid="stExpander"]'))
    shot(browser, "6_models")


# ----------------------------------------------------------------------------- every page, every visitor
PAGES = {"": "Question Retrieval Studio", "Compare": "Compare", "Layers": "Layers", "Keywords": "Keywords",
         "Annotate": "Annotate", "Error_Analysis": "Error analysis", "Case_Studies": "Case studies",
         "Models": "Models"}


def _check_page(driver, path: str, title: str, who: str) -> None:
    wait_for(driver, lambda d: any(title in h.text for h in css(d, '[data-testid="stApp"] h1')),
             what=f"the title of /{path} ({who})")
    idle(driver, LAYERS_WAIT if path == "Layers" else WAIT)
    time.sleep(0.5)  # late messages (a second script run) would show here
    crashed = css(driver, '[data-testid="stException"]')
    if crashed:
        shot(driver, f"exception-{path or 'home'}-{who}")
    assert not crashed, f"/{path} ({who}): " + (crashed[0].text[:1500] if crashed else "")


def test_every_page_from_two_sessions_and_after_a_reload(browser, second_browser, app_server):
    """Every page opened by two independent visitors and reloaded: no exception box anywhere.

    The second visitor gets what the first one cached (Layers' curves, Error Analysis's runs, loaded
    models): a cached result that carried a UI element raised CacheReplayClosureError here.
    """
    for path, title in PAGES.items():
        browser.get(f"{app_server}/{path}")
        _check_page(browser, path, title, "first visitor")
        # then, at the same time, a second visitor and a reload (a new session too): both replay the cache
        second_browser.get(f"{app_server}/{path}")
        browser.refresh()
        _check_page(second_browser, path, title, "second visitor")
        _check_page(browser, path, title, "after a reload")
    shot(second_browser, "9_second_visitor_last_page")
