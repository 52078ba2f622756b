"""Error Analysis: a campaign's metrics from humans only, from its automatic judge only, and by
prediction-powered inference (``core.analysis.ppi.campaign_estimates``), per system, with intervals and
the number of human and judge labels behind each. Layout only."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.analysis.ppi import ESTIMATOR, campaign_estimates
from core.errors import StudioError
from core.judging.auto_judge import judges, soft_judge

LEVEL = 0.9


def _ci(iv) -> str:
    return "—" if iv is None else f"{iv.estimate:.4f} [{iv.low:.4f}, {iv.high:.4f}]"


def render_ppi(cstore, actor: str, campaign: str, rule: str, runs, metrics) -> None:
    """The "Humans + judge (PPI)" section for ``campaign`` (owners; shown only when a judge has labelled it)."""
    try:
        found = judges(cstore, actor, campaign)
    except StudioError:
        return
    st.subheader("Humans + automatic judge: prediction-powered estimates")
    if not found:
        st.caption(f"No automatic judge has labelled campaign {campaign!r} yet: "
                   f"`python -m core judge --campaign {campaign} --judge SYSTEM --as {actor}`.")
        return
    identity = st.selectbox("Judge", found, key="ea.ppi_judge") if len(found) > 1 else found[0]
    soft = soft_judge(cstore, actor, campaign, identity, rule)
    human, _ = cstore.qrels(actor, campaign, rule)
    rows = []
    for est in campaign_estimates(human, soft.grade_probs, runs, metrics, level=LEVEL, calibration=soft.calibration,
                                  calibration_probs=soft.calibration_probs):
        for m in est.metrics:
            rows.append({"system": est.system, "metric": m.metric, "humans only": _ci(m.human_only),
                         "judge only": round(m.judge_only, 4), f"PPI ({LEVEL:.0%} CI)": _ci(m.ppi),
                         "queries (human / all)": f"{m.ppi.n_human if m.ppi else 0} / "
                                                  f"{m.ppi.n_total if m.ppi else len(soft.grade_probs)}",
                         "human labels": m.human_labels, "judge labels": m.judge_labels,
                         "judge variance ×κ": round(m.variance_scale, 2)})
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="ea.ppi_table")
    st.caption(f"Judge {identity}; human reference: {rule} rule. The judge's grade probabilities were fitted on "
               f"the human labels of {len(soft.calibration)} calibration queries ({soft.calibration_items} items), "
               "which are left out of the rectifier, from "
               + ("the score and its place among the query's items" if soft.features == "score+query"
                  else "the score alone")
               + " (whichever predicted held-out calibration queries better, by cross-validated log loss). "
               "Queries count as human-labelled when every item the judge scored on them has a human label; they "
               "are taken as a uniform sample of the campaign's queries. κ: how far the judge's errors on calibration "
               "queries it was not fitted on exceed its own predicted variance (1 = not at all); the judge's variance "
               "that floors each interval is multiplied by it. "
               f"Estimator: {ESTIMATOR}. Judge-only values (the soft judge's expected metric) carry no interval: "
               "their bias is unknown until humans check it. Simulated coverage and widths: BENCHMARKS.md, "
               "\"Judging budgets\".")
