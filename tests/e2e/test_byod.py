"""Bring your own data in a real browser: both fixture kinds imported and trained with the CLI,
then Compare shows every applicable system (trained-elsewhere models as SYSTEM@TRAINED_ON), Annotate
pools them and Error Analysis computes metrics. Reuses ``tests/e2e/conftest.py``'s server and browser.
"""
from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.conftest import FIXTURES
from tests.e2e.conftest import cli

pytest.importorskip("selenium")
from selenium.webdriver.common.by import By  # noqa: E402

from tests.e2e.page_driver import button, cells, css, idle, nav_to, open_page, shot, wait_for  # noqa: E402

SLOW = 300  # seconds: the first Compare run loads every chosen model on 2 busy cores

BYOD = FIXTURES / "byod"
QID = "test/32.1"  # a question of answers.tsv (TrecQA raw TEST) with correct and wrong candidates


@pytest.fixture(scope="module")
def byod_data(app_server, e2e_var):
    """import -> train (tiny) -> eval, with the CLI against the running server's artifacts folder."""
    if not (e2e_var / "datasets" / "answers").is_dir():
        cli(e2e_var, "data", "import", "--kind", "candidates", "--name", "answers", str(BYOD / "answers.tsv"))
        cli(e2e_var, "data", "import", "--kind", "beir", "--name", "cqa", str(BYOD / "cqa"))
    if not (e2e_var / "systems" / "user_answers" / "cnn-rerank" / "weights.pt").is_file():
        log = cli(e2e_var, "train", "--system", "cnn-rerank", "--dataset", "user/answers")
        assert "candidates split by query" in log
    assert "cnn-rerank on user/answers" in cli(e2e_var, "eval", "--system", "cnn-rerank", "--dataset", "user/answers")
    built = (e2e_var / "systems" / "user_cqa" / "bm25" / "config.json").is_file()
    log = cli(e2e_var, "eval", "--system", "bm25", "--dataset", "user/cqa")
    assert "bm25 on user/cqa" in log and (built or "note: building the bm25 index" in log)
    return app_server


def multiselect_options(driver, label: str) -> list[str]:
    widget = wait_for(driver, lambda d: [w for w in css(d, '[data-testid="stMultiSelect"]') if label in w.text],
                      what=f"multiselect {label!r}")[0]
    widget.find_element(By.CSS_SELECTOR, "input").click()
    def listed(d) -> list[str]:
        # the menu's option elements can exist a frame before their text: wait until every one has its label
        texts = [(o.get_attribute("textContent") or "").strip() for o in css(d, '[role="option"]')]
        return texts if texts and all(texts) else []

    options = wait_for(driver, listed, what="its options")
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    ActionChains(driver).send_keys(Keys.ESCAPE).perform()
    return options


def test_candidate_list_compare_annotate_error_analysis(browser, byod_data):
    url = (f"{byod_data}/Compare?dataset={quote('user/answers', safe='')}&qid={quote(QID, safe='')}"
           "&systems=bm25&rerankers=cnn-rerank")
    browser.get(url)
    wait_for(browser, lambda d: css(d, '[data-testid="stApp"] h1'), what="Compare")
    idle(browser)
    # every system ranks the question's own candidates: one column per system, the candidates' text in it
    frame = wait_for(browser, lambda d: [f for f in css(d, '[data-testid="stDataFrame"]')
                                         if "cnn-rerank" in f.text or "cnn-rerank" in " ".join(
                                             (h.get_attribute("textContent") or "") for h in f.find_elements(By.CSS_SELECTOR, "th"))],
                     timeout=SLOW, what="the aligned table with the CNN column")[0]
    heads = [(h.get_attribute("textContent") or "").strip() for h in frame.find_elements(By.CSS_SELECTOR, "th")]
    assert "bm25" in heads and any(h.startswith("cnn-rerank") for h in heads), heads
    assert "wicca" in " ".join(cells(frame)).lower()
    errors = [a.text for a in css(browser, '[data-testid="stAlert"]') if "error" in a.get_attribute("class").lower()]
    assert not errors, errors
    options = multiselect_options(browser, "First-stage systems")
    names = {o.removesuffix(" — not built") for o in options}  # what cannot rank yet is offered, marked
    assert {"minilm", "glove-mean", "densetrans", "sdml-cnn"} <= names, options  # bm25 is already chosen
    assert "densetrans — not built" in options, options  # nothing trained on the import
    assert not {"tree-bert", "tree-bert-cross"} & names, options
    shot(browser, "byod_1_compare_candidates")

    nav_to(browser, "Annotate")
    pool_options = multiselect_options(browser, "Pool systems")
    assert {"bm25", "minilm", "cnn-rerank"} <= set(pool_options) | {"bm25", "minilm", "glove-mean"}, pool_options
    assert "cnn-rerank" in pool_options, pool_options  # the default pool is the first three; the CNN is offered
    idle(browser)  # the sidebar's button comes after the multiselect in the same run
    button(browser, "Add dataset queries").click()
    idle(browser)
    progress = wait_for(browser, lambda d: [p.text for p in css(d, '[data-testid="stProgress"], [data-testid="stText"]')
                                            if "judged" in p.text or "Query 1 of" in p.text], timeout=SLOW,
                       what="the pooled queue")
    assert progress, "no pooled candidates"
    shot(browser, "byod_2_annotate_pool")

    nav_to(browser, "Error Analysis")
    wait_for(browser, lambda d: "queries with a relevant label" in " ".join(
        c.text for c in css(d, '[data-testid="stCaptionContainer"]')), timeout=SLOW, what="the metrics table")
    # the caption comes with the table, but the grid draws its cells a moment later
    table = wait_for(browser, lambda d: " ".join(t for t in cells(d) if t) if "bm25" in cells(d) else "",
                     timeout=60, what="the metrics table's cells")
    assert "bm25" in table and ("map" in table.lower() or "mrr" in table.lower() or "0." in table), table[:400]
    shot(browser, "byod_3_error_analysis")


def test_beir_collection_offers_the_zero_shot_model(browser, byod_data):
    browser.get(f"{byod_data}/Compare?dataset={quote('user/cqa', safe='')}&qid=q000&systems=bm25"
                f"&rerankers={quote('cnn-rerank@user/answers', safe='')}&first_stage=bm25")
    wait_for(browser, lambda d: css(d, '[data-testid="stApp"] h1'), what="Compare")
    idle(browser)
    chosen = wait_for(browser, lambda d: [w.text for w in css(d, '[data-testid="stMultiSelect"]') if "Rerankers" in w.text],
                      what="the rerankers multiselect")[0]
    assert "cnn-rerank@user/answers" in chosen, chosen  # offered and chosen from the link (SYSTEM@TRAINED_ON)
    frame = wait_for(browser, lambda d: [f for f in css(d, '[data-testid="stDataFrame"]') if "cnn-rerank@user/answers" in
                                         " ".join((h.get_attribute("textContent") or "") for h in f.find_elements(By.CSS_SELECTOR, "th"))],
                     timeout=SLOW, what="the zero-shot CNN column")[0]
    assert "sleep" in " ".join(cells(frame)).lower()  # q000: "What should I do to avoid sleeping in class?"
    shot(browser, "byod_4_compare_zero_shot")
    open_page(browser, byod_data, "Models")
    wait_for(browser, lambda d: "cnn-rerank@user/answers" in " ".join(cells(d)), what="the trained-models table")
