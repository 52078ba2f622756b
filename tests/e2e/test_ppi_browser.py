"""Error Analysis in a real browser shows a campaign's prediction-powered estimates: the owner (the local
user: no login configured) picks a campaign that humans labelled in part and an automatic judge labelled
in full, and sees the "Humans + automatic judge" section with the estimator stated."""
from __future__ import annotations

import pytest

from tests.conftest import TINY_DATA
from tests.e2e.conftest import DATASET

pytest.importorskip("selenium")
from tests.e2e.page_driver import css, idle, open_page, shot, wait_for  # noqa: E402
from tests.e2e.campaign_driver import pick  # noqa: E402

CAMPAIGN = "ppi-e2e"


def _campaign(var) -> None:
    from core.data.datasets import load_dataset
    from core.judging.auto_judge import pool_items, save_judge_labels
    from core.judging.campaign_pool import items_from_pool
    from core.judging.campaign_records import CampaignSpec, QuerySet
    from core.judging.campaigns import CampaignStore
    from ui.auth import local_user

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QRS_DATA", str(TINY_DATA))
        ds = load_dataset(DATASET)
    qids = list(ds.split_queries("test"))[:6]
    docs = [d for d in ds.corpus if d not in qids]
    pool = {q: docs[i * 3:(i + 1) * 3] for i, q in enumerate(qids)}
    owner = local_user()
    cs = CampaignStore(f"sqlite:///{var / 'judgments.sqlite'}")
    try:
        cs.create(owner, CampaignSpec(CAMPAIGN, ds.name, QuerySet("list", ids=tuple(qids)), ("given",), 3, 1,
                                      (owner,), ("ann",)), items_from_pool(ds, pool))
        for it in cs.queue("ann", CAMPAIGN):
            if it.query_id in qids[:4]:  # humans labelled four of six queries
                cs.judge("ann", CAMPAIGN, it.item_id, 2 if it.position % 2 else 0)
        items = pool_items(cs, owner, CAMPAIGN)
        save_judge_labels(cs, owner, CAMPAIGN, "judge:e2e", [(it.item_id, 0.5, 2 * (i % 2)) for i, it in enumerate(items)])
    finally:
        cs.close()


def test_error_analysis_shows_ppi_estimates_in_the_browser(browser, app_server, e2e_var):
    _campaign(e2e_var)
    open_page(browser, app_server, "Error_Analysis")
    pick(browser, "ea.campaign", CAMPAIGN)
    heading = "Humans + automatic judge: prediction-powered estimates"
    wait_for(browser, lambda d: any(heading in h.text for h in css(d, "h3")), what="the PPI section")
    idle(browser)
    captions = [c.text for c in css(browser, '[data-testid="stCaptionContainer"]')]
    assert any("Estimator: PPI" in c and "judge:e2e" in c for c in captions), captions
    # which inputs the calibration used is said beside the numbers
    assert any("from the score alone" in c or "from the score and its place among the query's items" in c
               for c in captions), captions
    # and how far the judge's variance was scaled up by its errors on held-out calibration queries
    assert any("κ: how far the judge's errors" in c for c in captions), captions
    grids = css(browser, '[data-testid="stDataFrame"]')
    assert len(grids) >= 2  # the metrics table and the PPI table
    shot(browser, "5_error_analysis_ppi")
