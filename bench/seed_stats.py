"""Seed spread and paired tests for comparisons whose margin is below .01: mean ± sd over
training or k-means seeds, each query's metric averaged over the seeds, and a paired randomization test
(``core.analysis.significance.randomization_test``) with Student's t beside it."""
from __future__ import annotations

import numpy as np


def p_value(p: float) -> float:
    """A p-value for a report: two significant digits, never rounded to 0 (5e-05 stays 5e-05)."""
    return float(f"{float(p):.2g}")


def spread(values: list[float]) -> dict:
    """Mean ± sample sd over seeds (sd 0 for a single value)."""
    arr = np.asarray(values, dtype=float)
    return {"mean": round(float(arr.mean()), 5), "sd": round(float(arr.std(ddof=1)) if arr.size > 1 else 0.0, 5),
            "values": [round(float(v), 5) for v in arr]}


def paired(control: dict[str, float], treatment: dict[str, float], label: str) -> dict:
    """Paired tests over the queries both score: randomization (10,000 sign flips, seed 42) and Student's t."""
    from scipy.stats import ttest_rel

    from core.analysis.significance import randomization_test

    qids = sorted(set(control) & set(treatment))
    a = np.array([control[q] for q in qids])
    b = np.array([treatment[q] for q in qids])
    t = ttest_rel(b, a)
    return {"comparison": label, "queries": len(qids), "mean_difference": round(float((b - a).mean()), 5),
            "randomization_p": p_value(randomization_test(a, b, n_permutations=10_000)),
            "t_test_p": p_value(t.pvalue) if np.isfinite(t.pvalue) else 1.0,
            "wins_ties_losses": [int((b > a).sum()), int((b == a).sum()), int((b < a).sum())]}


def seed_mean(per_seed: list[dict[str, float]]) -> dict[str, float]:
    """Each query's metric averaged over the seeds' runs."""
    qids = set().union(*per_seed)
    return {q: float(np.mean([run.get(q, 0.0) for run in per_seed])) for q in qids}
