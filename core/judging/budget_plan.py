"""A campaign's judging budget: which queries humans label next, and how wide the intervals are.

With an automatic judge's scores on the pool (``core.judging.auto_judge``), turned into grade
probabilities on the calibration queries (``auto_judge.soft_judge``), the queries that humans have not
fully labelled yet are ordered so that each next human label narrows the intervals of the system
comparisons most (``core.analysis.budget``: inclusion probabilities proportional to the judge's predicted
uncertainty of the metric, mixed with a uniform share, in sequential Poisson order). For every pair of
pooled systems the plan gives the PPI estimate of their difference in a per-query metric with its 90 %
interval now (``core.analysis.ppi``, the labelled queries outside the calibration split taken as a
uniform sample; the estimator Error Analysis shows: the variance floored by the judge's own predicted
variance, scaled by its calibration κ) and the width expected once the budget is spent (the same estimator
with today's rectifier variance at n = budget).
Recomputed as labels arrive, the owner sees the widths shrink.
"""
from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field

import numpy as np

from core.analysis.budget import budget_order, inclusion_probabilities, metric_uncertainty
from core.analysis.ppi import (PRIOR_DF, t_quantile, calibration_kappa, moderated_variance, per_query_values,
                               posterior_samples, ppi_mean)
from core.judging.auto_judge import ORDER_METRIC, _runs, judges, pool_items, soft_judge
from core.judging.campaign_records import CampaignError
from core.judging.campaigns import CampaignStore

LEVEL = 0.9


@dataclass
class BudgetPlan:
    """The labelling order of the remaining queries and the interval widths of the system comparisons."""

    judge: str
    metric: str
    budget: int  # queries humans will label in all
    labelled: list[str]
    total: int
    order: list[str]  # remaining queries, in labelling order
    probabilities: dict[str, float]
    comparisons: list[dict] = field(default_factory=list)  # pair, estimate, low, high, width_now, width_at_budget

    def to_dict(self) -> dict:
        """JSON form."""
        return asdict(self)


def budget_plan(store: CampaignStore, actor: str, name: str, budget: int, *, judge: str | None = None,
                rule: str = "adjudicated", metric: str = ORDER_METRIC, seed: int = 0) -> BudgetPlan:
    """The plan for ``budget`` human-labelled queries in all (owners only; needs a judge's labels)."""
    found = judges(store, actor, name)
    if not found:
        raise CampaignError(f"no automatic judge has labelled campaign {name!r}: run python -m core judge first")
    identity = judge or found[0]
    if identity not in found:
        raise CampaignError(f"judge {identity!r} has no labels on campaign {name!r}; judges: {', '.join(found)}")
    items = pool_items(store, actor, name)
    soft = soft_judge(store, actor, name, identity, rule)
    human, _ = store.qrels(actor, name, rule)
    queries = sorted(soft.grade_probs)
    if not 0 < budget <= len(queries):
        raise CampaignError(f"a budget of {budget} queries asked of a campaign with {len(queries)}")
    done = [q for q in queries if set(soft.grade_probs[q]) <= set(human.get(q, {}))]
    held = set(soft.calibration)
    labelled = [q for q in done if q not in held]  # the rectifier's sample
    from ranx import Run

    runs = {s: Run.from_dict(r, name=s) for s, r in _runs(items).items()}
    draws = posterior_samples(soft.grade_probs, runs, metric, queries, seed=seed)
    kappa = calibration_kappa(human, soft.calibration_probs, runs, metric, seed=seed)
    unc = dict(zip(queries, metric_uncertainty(draws)))
    remaining = [q for q in queries if q not in done]
    probs: dict[str, float] = {}
    if remaining:
        left = max(1, min(len(remaining), budget - len(done)))
        pi = inclusion_probabilities([unc[q] for q in remaining], left)
        probs = {q: float(p) for q, p in zip(remaining, pi)}
    order = budget_order(probs, seed) if probs else []
    comparisons = []
    values_h = {s: per_query_values(human, run, metric, labelled) for s, run in runs.items()} if labelled else {}
    at = {q: i for i, q in enumerate(queries)}
    pos = [at[q] for q in labelled]
    for a, b in itertools.combinations(sorted(runs), 2):
        f = draws[a].mean(axis=1) - draws[b].mean(axis=1)
        row = {"pair": f"{a} − {b}", "judge_only": float(f.mean())}
        sigma2 = kappa * (draws[a] - draws[b]).var(axis=1)
        iv = ppi_mean(f, pos, values_h[a] - values_h[b], level=LEVEL, model_var=sigma2) if len(pos) >= 2 else None
        if iv is not None:
            r = (values_h[a] - values_h[b]) - f[pos]
            n_b, big_n = max(budget - len(held), len(pos), 2), len(queries)
            # the same estimator at n_b labelled queries: today's rectifier variance, floored by the judge's
            var_b = moderated_variance((1 - n_b / big_n) * r.var(ddof=1) / n_b,
                                       (1 - n_b / big_n) * float(sigma2.mean()) / n_b, n_b)
            at_budget = 2 * t_quantile(LEVEL, n_b, PRIOR_DF) * float(np.sqrt(max(0.0, var_b)))
            row.update(estimate=iv.estimate, low=iv.low, high=iv.high, width_now=iv.width, width_at_budget=at_budget)
        comparisons.append(row)
    return BudgetPlan(identity, metric, budget, done, len(queries), order, probs, comparisons)
