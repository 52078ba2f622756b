"""Owners delete an annotator's labels or a campaign: a typed confirmation, one audit row, nothing else touched;
from the store's API, the CLI (exit 2 without the confirmation) and the Campaigns page (a confirm step)."""
from __future__ import annotations

import pytest

from core.judging.campaign_records import CampaignAuthError
from core.judging.campaigns import CampaignStore
from core.judging.deletion import delete_campaign, delete_labels, deletions, plan_campaign, plan_labels
from core.judging.database import JudgmentError
from core.judging.judgments import JudgmentStore
from tests.campaign_env import OWNER, app_page, campaign_items, campaign_spec, page_env  # noqa: F401  (page_env: a fixture)


def _fill(store: JudgmentStore) -> None:
    for i in range(20):
        store.set_label("tester", "toy", f"query {i % 4}", f"d{i}", f"doc {i}", i % 3)
    store.set_label("tester", "other", "a query", "d1", "doc", 1)
    for i in range(3):
        store.set_label("ann", "toy", f"query {i}", f"d{i}", f"doc {i}", 2)


@pytest.fixture
def db(tmp_path, monkeypatch):
    monkeypatch.setenv("QRS_OWNERS", OWNER)
    url = f"sqlite:///{tmp_path / 'j.sqlite'}"
    cs = CampaignStore(url)
    _fill(cs.store)
    cs.create(OWNER, campaign_spec("c1"), campaign_items())
    cs.create(OWNER, campaign_spec("c2"), campaign_items())
    for who in ("ann", "bob"):
        while (it := cs.next_item(who, "c1")) is not None:
            cs.judge(who, "c1", it.item_id, 1)
    yield url, cs
    cs.close()


def test_an_annotators_labels_go_only_with_the_confirmation_and_are_audited(db):
    _, cs = db
    store = cs.store
    plan = plan_labels(store, "tester", "toy")
    assert plan.rows == {"judgments": 20, "judgment_history": 20} and "20 judgments" in plan.describe()
    before, campaign_labels = len(store.judgments()), len(cs.labels(OWNER, "c1"))
    for confirm in (None, "someone else"):
        with pytest.raises(JudgmentError, match="nothing was deleted"):
            delete_labels(store, OWNER, "tester", "toy", confirm=confirm)
    with pytest.raises(CampaignAuthError, match="nothing was deleted"):
        delete_labels(store, "ann", "tester", "toy", confirm="tester")
    assert len(store.judgments()) == before and deletions(store) == []
    record = delete_labels(store, OWNER, "tester", "toy", confirm="tester")
    assert record.rows == {"judgments": 20, "judgment_history": 20} and record.actor == OWNER
    left = store.judgments()
    assert sorted({(j.annotator, j.dataset) for j in left}) == [("ann", "toy"), ("tester", "other")]
    assert len(left) == before - 20 and "tester" in store.annotators()  # the person and other datasets stay
    assert len(cs.labels(OWNER, "c1")) == campaign_labels == 8  # campaigns untouched
    (audit,) = deletions(store)
    assert (audit.actor, audit.kind, audit.target, audit.dataset) == (OWNER, "labels", "tester", "toy")


def test_a_campaign_goes_whole_and_nothing_else(db):
    _, cs = db
    judgments = len(cs.store.judgments())
    with pytest.raises(CampaignAuthError):
        plan_campaign(cs, "ann", "c1")
    plan = plan_campaign(cs, OWNER, "c1")
    assert plan.rows["campaign_labels"] == 8 and plan.rows["campaign_items"] == 6 and plan.rows["campaigns"] == 1
    with pytest.raises(JudgmentError, match="nothing was deleted"):
        delete_campaign(cs, OWNER, "c1", confirm="c2")
    with pytest.raises(CampaignAuthError):
        delete_campaign(cs, "ann", "c1", confirm="c1")
    assert [c.name for c in cs.campaigns()].count("c1") == 1
    record = delete_campaign(cs, OWNER, "c1", confirm="c1")
    assert record.rows == plan.rows
    assert [c.name for c in cs.campaigns()] == ["c2"] and cs.campaign("c2").items == 6
    assert len(cs.store.judgments()) == judgments
    assert [(a.kind, a.target) for a in deletions(cs.store)] == [("campaign", "c1")]


def test_cli_deletes_only_with_confirm_and_says_what_goes(db):
    from tests.conftest import run_main

    url, cs = db
    code, out, err = run_main("judgments", "delete", "--db", url, "--annotator", "tester", "--as", OWNER)
    assert code == 2 and "would delete the labels of tester: 21 judgments" in out and "--confirm 'tester'" in err
    assert len(cs.store.judgments()) == 24
    code, out, err = run_main("judgments", "delete", "--db", url, "--annotator", "tester", "--as", OWNER,
                              "--confirm", "tester")
    assert code == 0, err
    assert [j.annotator for j in cs.store.judgments()] == ["ann"] * 3
    code, out, err = run_main("campaign", "delete", "--db", url, "--name", "c2", "--as", "ann", "--confirm", "c2")
    assert code == 2 and "not an owner" in err
    code, out, err = run_main("campaign", "delete", "--db", url, "--name", "c2", "--as", OWNER)
    assert code == 2 and "would delete campaign 'c2'" in out
    code, out, err = run_main("campaign", "delete", "--db", url, "--name", "c2", "--as", OWNER, "--confirm", "c2")
    assert code == 0, err
    assert [c.name for c in cs.campaigns()] == ["c1"]
    assert [(a.kind, a.target) for a in deletions(cs.store)] == [("labels", "tester"), ("campaign", "c2")]


def test_campaigns_page_deletes_after_the_confirm_step(page_env):
    cs = page_env
    at = app_page("8_Campaigns.py", {"is_logged_in": True, "email": OWNER}).run()
    assert not at.exception
    go = at.button(key="campaigns.delete.go")
    assert go.disabled  # nothing typed yet
    at.text_input(key="campaigns.delete.confirm").set_value("team").run()
    assert not at.button(key="campaigns.delete.go").disabled
    at.button(key="campaigns.delete.go").click().run()
    assert not at.exception
    assert cs.campaigns() == [] and [(a.kind, a.target) for a in deletions(cs.store)] == [("campaign", "team")]
