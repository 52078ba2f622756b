"""End to end in a real browser: `streamlit run app.py` + headless Chromium on the tiny fixture data.

Every check waits for real DOM elements (tests/e2e/page_driver.py): content arrives over a websocket after the
page loads. One screenshot per page goes to ``<QRS_VAR>/screenshots/``.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import TINY_DATA
from tests.e2e.conftest import DATASET

pytest.importorskip("selenium")
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

from tests.e2e.page_driver import (WAIT, aligned_grid, button, cells, css, idle, multiselect_add,  # noqa: E402
                                   open_page, shot, type_into, wait_for)

LAYERS_WAIT = 420  # the first visit computes MiniLM's per-layer curves (7 layers × 2 poolings × 600 texts)


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


def test_compare_aligned_table_readable_at_1400px(browser, app_server):
    from ui.compare_view import MAX_PER_TABLE, RANK_WIDTH, layout

    open_page(browser, app_server, "Compare")
    multiselect_add(browser, "First-stage systems", "minilm")
    multiselect_add(browser, "First-stage systems", "tree-bert")
    multiselect_add(browser, "First-stage systems", "densetrans")  # not built on the fixture: a clear message
    type_into(browser, "Question", "How can I learn Python quickly ?")
    frame, heads = wait_for(browser, aligned_grid, what="the aligned table")
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
    frame, heads = wait_for(browser, lambda d: (g := aligned_grid(d)) and len(g[1]) >= 5 and g, what="the fused column")
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
