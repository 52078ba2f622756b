"""Campaigns page: the judging budget (``core.judging.budget_plan``): the owner sets how many queries humans
will label, sees the order to label the rest in and each system comparison's interval now and at the
budget. Layout only."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from core.errors import StudioError
from core.judging.auto_judge import judges
from core.judging.budget_plan import budget_plan


def render_budget(cs, actor: str, name: str, queries: int) -> None:
    """The "Judging budget" section of the Progress tab (shown once an automatic judge has labelled the pool)."""
    st.subheader("Judging budget")
    found = judges(cs, actor, name)
    if not found:
        st.caption(f"Run an automatic judge first (`python -m core judge --campaign {name} --judge SYSTEM "
                   f"--as {actor}`): its uncertainty orders the remaining queries and PPI puts intervals on the "
                   "system comparisons.")
        return
    c1, c2 = st.columns(2)
    judge = c1.selectbox("Judge", found, key="campaigns.budget.judge")
    budget = int(c2.number_input("Queries humans will label in all", 1, max(1, queries), max(1, queries // 4),
                                 key="campaigns.budget.n"))
    try:
        plan = budget_plan(cs, actor, name, budget, judge=judge)
    except StudioError as exc:
        st.error(str(exc))
        return
    st.caption(f"{len(plan.labelled)} of {plan.total} queries fully labelled by humans. Label next, in this order "
               "(drawn with probability rising with the judge's uncertainty; PPI weights keep the estimate unbiased):")
    st.text(", ".join(plan.order[:30]) + (" ..." if len(plan.order) > 30 else "") or "(none left)")
    st.dataframe(pd.DataFrame([{"systems": c["pair"], "judge only": c["judge_only"], "PPI": c.get("estimate"),
                                "90% CI low": c.get("low"), "90% CI high": c.get("high"),
                                "width now": c.get("width_now"), "width at budget": c.get("width_at_budget")}
                               for c in plan.comparisons],
                              columns=["systems", "judge only", "PPI", "90% CI low", "90% CI high", "width now",
                                       "width at budget"]), hide_index=True, key="campaigns.budget.table")
    if not plan.comparisons:
        st.caption("One pooled system: no comparison to put an interval on.")
