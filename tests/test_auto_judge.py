"""The automatic judge (core.judging.auto_judge) and ``python -m core judge`` on a fixture campaign:
TrecQA test questions pooled from two systems, two annotators whose labels follow the gold qrels (one
with mistakes), BM25 as the judge (the loader's pair scorer on candidate lists)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from core.judging.campaign_records import CampaignSpec, ItemSpec, QuerySet
from core.judging.campaigns import CampaignStore

OWNER = "olivia@lab"
TEAM = ("ann", "bob")


@pytest.fixture
def trec_campaign(tiny_data, fresh_var, tmp_path):
    from core.data.datasets import load_dataset

    ds = load_dataset("trecqa")
    qrels = ds.split_qrels("test")
    qids = [q for q in ds.split_queries("test") if q in ds.candidates][:24]
    items = []
    for q in qids:
        cands = list(ds.candidates[q])[:8]
        for i, d in enumerate(cands):
            items.append(ItemSpec(q, ds.queries[q], d, ds.corpus[d], {"first-order": i + 1, "reversed": len(cands) - i}))
    db = f"sqlite:///{tmp_path / 'judge.sqlite'}"
    cs = CampaignStore(db)
    spec = CampaignSpec("trec", "trecqa", QuerySet("list", ids=tuple(qids)), ("first-order", "reversed"), 8, 2,
                        (OWNER,), TEAM, max_label=2)
    cs.create(OWNER, spec, items)
    rng = np.random.default_rng(0)
    unlabelled = set(qids[18:])  # humans have not reached the last 6 queries yet
    for who in TEAM:
        for it in cs.queue(who, "trec"):
            if it.query_id in unlabelled:
                continue
            gold = 2 * int(qrels.get(it.query_id, {}).get(it.doc_id, 0))
            label = gold if who == "ann" or rng.random() > 0.2 else int(rng.integers(0, 3))
            cs.judge(who, "trec", it.item_id, label)
    yield cs, db
    cs.close()


def test_judge_report_calibrates_on_one_split_and_reports_on_another(trec_campaign):
    from core.judging.auto_judge import judge_campaign, judge_labels, judges

    cs, _ = trec_campaign
    rep = judge_campaign(cs, OWNER, "trec", "bm25")
    assert set(rep.calibration_queries).isdisjoint(rep.report_queries)
    assert set(rep.holdout_queries).isdisjoint(rep.calibration_queries + rep.report_queries)
    assert len(rep.holdout_queries) >= 1 and rep.items == cs.campaign("trec").items
    assert len(rep.thresholds) == 2 and rep.thresholds[0] <= rep.thresholds[1]
    assert np.array(rep.confusion).sum() == rep.report_items > 0
    assert rep.judge_kappa is not None and -1 <= rep.judge_kappa <= 1
    assert rep.human_alpha_nominal is not None and rep.human_alpha_nominal > 0.4  # bob errs on ~13 % of items
    assert set(rep.human_order) == {"first-order", "reversed"} and rep.tau in (-1.0, 1.0)
    assert rep.circularity == []  # bm25 is not of the MiniLM family
    stored = judge_labels(cs, OWNER, "trec", "judge:bm25")
    assert len(stored) == rep.items and all(g in (0, 1, 2) for _, g in stored.values())
    assert judges(cs, OWNER, "trec") == ["judge:bm25"]
    humans = {lab.annotator for lab in cs.labels(OWNER, "trec")}
    assert humans == set(TEAM)  # judge labels never mix with human labels
    assert cs.agreement(OWNER, "trec").annotators == sorted(TEAM)


def test_circularity_warns_for_the_minilm_family():
    from core.judging.auto_judge import circularity

    warned = circularity("cross-encoder", ["bm25", "minilm", "frm", "my-run-file"])
    assert [w.split(":")[0] for w in warned] == ["minilm", "frm"]
    assert circularity("bm25", ["minilm"]) == []


def test_cli_judge_prints_the_report_and_refuses_non_owners(trec_campaign, tmp_path):
    from tests.conftest import run_main

    _, db = trec_campaign
    code, out, err = run_main("judge", "--db", db, "--campaign", "trec", "--judge", "bm25", "--as", OWNER)
    assert code == 0, err
    assert "stored as 'judge:bm25'" in out and "Cohen's kappa" in out and "Krippendorff's alpha (ordinal)" in out
    assert "human vs human" in out and "confusion (rows: human reference grade" in out and "Kendall tau" in out
    code, out, err = run_main("judge", "--db", db, "--campaign", "trec", "--judge", "bm25", "--as", OWNER, "--json")
    data = json.loads(out)
    assert data["identity"] == "judge:bm25" and len(data["confusion"]) == 3
    code, out, err = run_main("judge", "--db", db, "--campaign", "trec", "--judge", "bm25", "--as", "ann")
    assert code == 2 and "ann is not an owner" in err and err.count("\n") == 1
    code, out, err = run_main("judge", "--db", db, "--campaign", "nope", "--judge", "bm25", "--as", OWNER)
    assert code == 2 and "unknown campaign 'nope'" in err


def test_budget_plan_orders_the_remaining_queries_and_shrinks_the_interval(trec_campaign):
    from core.judging.auto_judge import judge_campaign
    from core.judging.budget_plan import budget_plan
    from core.judging.campaign_records import CampaignError
    from tests.conftest import run_main

    cs, db = trec_campaign
    with pytest.raises(CampaignError, match="no automatic judge"):
        budget_plan(cs, OWNER, "trec", 20)
    judge_campaign(cs, OWNER, "trec", "bm25")
    plan = budget_plan(cs, OWNER, "trec", 20)
    assert len(plan.labelled) == 18 and plan.total == 24 and sorted(plan.order) == sorted(plan.probabilities)
    assert len(plan.order) == 6 and sum(plan.probabilities.values()) == pytest.approx(2)
    (cmp,) = plan.comparisons
    assert cmp["low"] <= cmp["estimate"] <= cmp["high"] and cmp["width_at_budget"] <= cmp["width_now"]
    # the soft judge: grade probabilities fitted on the calibration queries, which PPI leaves out
    from ranx import Run

    from core.analysis.ppi import campaign_estimates
    from core.judging.auto_judge import _runs, judge_identity, pool_items, soft_judge

    soft = soft_judge(cs, OWNER, "trec", judge_identity("bm25"))
    assert len(soft.grade_probs) == 24 and soft.calibration and soft.calibration_items > 0
    assert soft.features in ("score", "score+query")
    rows = [r for q in soft.grade_probs.values() for r in q.values()]
    assert all(len(r) == 3 and abs(sum(r) - 1) < 1e-9 for r in rows)
    human, _ = cs.qrels(OWNER, "trec", "adjudicated")
    runs = [Run.from_dict(r, name=s) for s, r in _runs(pool_items(cs, OWNER, "trec")).items()]
    (first, *_), = [campaign_estimates(human, soft.grade_probs, runs, ["ndcg@10"], calibration=soft.calibration)]
    est = first.metrics[0]
    assert est.ppi.n_human == 18 - len(soft.calibration) and est.ppi.n_total == 24
    assert est.ppi.low <= est.ppi.estimate <= est.ppi.high
    # the judge's own variance is checked on the calibration queries, cross-fitted: κ ≥ 1 only widens
    assert soft.calibration_probs and set(soft.calibration_probs) <= set(soft.calibration)
    assert sum(len(v) for v in soft.calibration_probs.values()) == soft.calibration_items
    (checked, *_), = [campaign_estimates(human, soft.grade_probs, runs, ["ndcg@10"], calibration=soft.calibration,
                                         calibration_probs=soft.calibration_probs)]
    scaled = checked.metrics[0].ppi
    assert checked.metrics[0].variance_scale >= 1.0 and first.metrics[0].variance_scale == 1.0
    assert scaled.estimate == pytest.approx(est.ppi.estimate) and scaled.width >= est.ppi.width - 1e-12
    code, out, err = run_main("campaign", "status", "--db", db, "--name", "trec", "--as", OWNER, "--budget", "20")
    assert code == 0, err
    assert "label next, in this order" in out and "width at budget" in out and plan.order[0] in out
