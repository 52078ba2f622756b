"""Spending a judging budget: which queries humans label next, with the probabilities PPI needs.

Uniform: n of N queries without replacement (π_q = n/N). Budget-aware: each query q is drawn with a
probability π_q proportional to a mixture of uniform and the judge's uncertainty on it,

    π_q = min(1, c · (λ/N + (1 − λ) · u_q / Σ u)),   c chosen so that Σ π_q = n,

with u_q the judge's predicted standard deviation of the query's metric (``metric_uncertainty``: over the
soft judge's label draws, ``core.analysis.ppi.posterior_samples``, summed in variance over the compared
systems), or, before any system is pooled, √(Σ_i p_i (1 − p_i)) over its items (``query_uncertainty``):
the rectifier of a query whose metric the judge is sure of is near 0, so its human label narrows the
interval least (Neyman allocation). The uniform share λ = .5 keeps every π_q ≥ λ·n/N, so the inverse-
probability weighted rectifier of ``core.analysis.ppi`` stays (approximately: Hájek) unbiased with bounded
weights.

Queries are taken in Ohlsson's sequential Poisson order, keys ξ_q = U_q / π_q (U_q uniform, seeded):
taking the n smallest keys (``sequential_poisson_sample``, what a campaign's queue does) is a fixed-size
πps sample whose inclusion probabilities are π_q up to O(1/n).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

UNIFORM_SHARE = 0.5  # λ: the uniform part of the budget-aware design


def query_uncertainty(item_probs: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """u_q = √(Σ p(1−p)) over each query's items (``item_probs``: the judge's P(relevant) per item)."""
    out = {}
    for qid, probs in item_probs.items():
        p = np.clip(np.asarray(probs, dtype=float), 0.0, 1.0)
        out[qid] = float(np.sqrt((p * (1 - p)).sum())) if len(p) else 0.0
    return out


def metric_uncertainty(draws: Mapping[str, np.ndarray]) -> np.ndarray:
    """u_q = √(Σ_systems Var_k(metric)) per query, from ``posterior_samples``' (N, K) arrays per system."""
    arrays = list(draws.values())
    if not arrays:
        raise ValueError("no systems to measure the judge's uncertainty on")
    return np.sqrt(sum(np.asarray(a, dtype=float).var(axis=1) for a in arrays))


def inclusion_probabilities(uncertainty: Sequence[float], n: float, share: float = UNIFORM_SHARE) -> np.ndarray:
    """π_q summing to ``n`` (capped at 1, the excess spread over the others), mixed with ``share`` uniform."""
    u = np.asarray(uncertainty, dtype=float)
    big_n = len(u)
    if big_n == 0 or not 0 < n <= big_n:
        raise ValueError(f"a budget of {n} queries asked of {big_n}")
    if not 0 <= share <= 1:
        raise ValueError(f"uniform share must be in [0, 1], got {share}")
    weight = np.full(big_n, 1.0 / big_n) if u.sum() <= 0 else share / big_n + (1 - share) * u / u.sum()
    pi = np.zeros(big_n)
    fixed = np.zeros(big_n, dtype=bool)
    for _ in range(big_n):  # cap at 1 and renormalise the rest
        free = ~fixed
        pi[free] = (n - fixed.sum()) * weight[free] / weight[free].sum()
        over = free & (pi >= 1)
        if not over.any():
            break
        fixed |= over
        pi[fixed] = 1.0
    return np.clip(pi, 1e-12, 1.0)


def uniform_sample(total: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """n distinct positions of ``total``, uniformly without replacement (sorted)."""
    return np.sort(rng.choice(total, size=int(n), replace=False))


def poisson_sample(probs: Sequence[float], rng: np.random.Generator) -> np.ndarray:
    """Each position independently with its probability (sorted positions)."""
    pi = np.asarray(probs, dtype=float)
    return np.flatnonzero(rng.random(len(pi)) < pi)


def sequential_poisson_sample(probs: Sequence[float], n: int, rng: np.random.Generator) -> np.ndarray:
    """The n positions with the smallest keys U / π (sorted): a campaign's queue taken n deep."""
    pi = np.asarray(probs, dtype=float)
    keys = rng.random(len(pi)) / np.maximum(pi, 1e-12)
    return np.sort(np.argsort(keys, kind="stable")[: int(n)])


def budget_order(probs: Mapping[str, float], seed: int = 0) -> list[str]:
    """Query ids in labelling order: ascending sequential Poisson keys U_q / π_q (seeded)."""
    rng = np.random.default_rng(seed)
    qids = sorted(probs)
    keys = rng.random(len(qids)) / np.array([max(float(probs[q]), 1e-12) for q in qids])
    return [qids[i] for i in np.argsort(keys, kind="stable")]
