"""A campaign's judging budget: which queries humans label next, and how wide the intervals are.

With an automatic judge's labels on the pool (``core.judging.auto_judge``), the queries that humans have
not fully labelled yet are ordered so that each next human label narrows the intervals of the system
comparisons most (``core.analysis.budget``: inclusion probabilities proportional to the judge's
uncertainty, mixed with a uniform share, in sequential Poisson order; P(relevant | score) is a logistic fit
on the items humans have already labelled). For every pair of pooled systems the plan gives the PPI
estimate of their difference in a per-query metric with its 90 % interval now (``core.analysis.ppi``, the
labelled queries taken as a uniform sample) and the width expected once the budget is spent (same
rectifier variance, n = budget). Recomputed as labels arrive, the owner sees the widths shrink.
"""
from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field

import numpy as np

from core.analysis.budget import budget_order, inclusion_probabilities, query_uncertainty
from core.analysis.ppi import _quantile, per_query_values, ppi_mean
from core.judging.auto_judge import ORDER_METRIC, _runs, judge_labels, judges, pool_items
from core.judging.calibration import relevance_model
from core.judging.campaigns import CampaignError, CampaignStore

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
    stored = judge_labels(store, actor, name, identity)
    human, _ = store.qrels(actor, name, rule)
    queries = sorted({it.query_id for it in items})
    if not 0 < budget <= len(queries):
        raise CampaignError(f"a budget of {budget} queries asked of a campaign with {len(queries)}")
    judged = {q: {} for q in queries}
    for it in items:
        if it.item_id in stored:
            judged[it.query_id][it.doc_id] = stored[it.item_id][1]
    labelled = [q for q in queries if judged[q] and set(judged[q]) <= set(human.get(q, {}))]
    pairs = [(stored[it.item_id][0], human[it.query_id][it.doc_id]) for it in items
             if it.item_id in stored and it.doc_id in human.get(it.query_id, {})]
    prob = relevance_model([s for s, _ in pairs], [y for _, y in pairs]) if pairs else (lambda s: np.full(len(s), .5))
    scores = {q: [stored[it.item_id][0] for it in items if it.query_id == q and it.item_id in stored] for q in queries}
    unc = query_uncertainty({q: prob(v) if v else [] for q, v in scores.items()})
    remaining = [q for q in queries if q not in labelled]
    probs: dict[str, float] = {}
    if remaining:
        left = max(1, min(len(remaining), budget - len(labelled)))
        pi = inclusion_probabilities([unc[q] for q in remaining], left)
        probs = {q: float(p) for q, p in zip(remaining, pi)}
    order = budget_order(probs, seed) if probs else []
    comparisons = []
    runs = _runs(items)
    from ranx import Run

    values_j = {s: per_query_values(judged, Run.from_dict(r), metric, queries) for s, r in runs.items()}
    values_h = {s: per_query_values(human, Run.from_dict(r), metric, labelled) for s, r in runs.items()} \
        if labelled else {}
    pos = [queries.index(q) for q in labelled]
    for a, b in itertools.combinations(sorted(runs), 2):
        row = {"pair": f"{a} − {b}", "judge_only": float((values_j[a] - values_j[b]).mean())}
        iv = ppi_mean(values_j[a] - values_j[b], pos, values_h[a] - values_h[b]) if len(pos) >= 2 else None
        if iv is not None:
            r = (values_h[a] - values_h[b]) - (values_j[a] - values_j[b])[pos]
            n_b, big_n = max(budget, len(pos)), len(queries)
            at_budget = 2 * _quantile(LEVEL, n_b) * float(np.sqrt(max(0.0, (1 - n_b / big_n) * r.var(ddof=1) / n_b)))
            row.update(estimate=iv.estimate, low=iv.low, high=iv.high, width_now=iv.width, width_at_budget=at_budget)
        comparisons.append(row)
    return BudgetPlan(identity, metric, budget, labelled, len(queries), order, probs, comparisons)
