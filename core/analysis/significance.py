"""Significance over paired per-query (or per-seed) scores: the one Holm correction and the one randomization
test of the project, and the paired bootstrap of an AUC difference (error analysis, Compare, the CLI and bench/
all call these)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
import numpy as np


def holm(pvalues: Mapping[str, float] | Sequence[float]) -> dict[str, float] | list[float]:
    """Holm–Bonferroni adjusted p-values (step-down, monotone, capped at 1; Holm 1979).

    A mapping gives a mapping of the same names (smallest p first), a sequence a list in the order given."""
    named = isinstance(pvalues, Mapping)
    keys = list(pvalues) if named else list(range(len(pvalues)))
    order = sorted(keys, key=lambda k: pvalues[k])
    m, running, adjusted = len(keys), 0.0, {}
    for rank, key in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(pvalues[key])))
        adjusted[key] = running
    return adjusted if named else [adjusted[k] for k in keys]


def randomization_test(control: Sequence[float], treatment: Sequence[float], n_permutations: int = 1000,
                       seed: int = 42) -> float:
    """Paired two-sided Fisher randomization test (Smucker et al., CIKM'07), as ranx computes it.

    Each permutation swaps the two systems' scores of a query with probability 1/2 (a sign flip of the
    per-query difference); p = (b + 1) / (m + 1) with b of the m permutations whose |mean difference|
    reaches the observed one: the observed assignment counts as one of them (Phipson & Smyth 2010), so a
    Monte Carlo p is never 0 and never below 1 / (m + 1) (ranx reports b / m, which can be 0).
    ranx's ``fisher_randomization_test`` runs this loop in numba ``prange`` threads whose random streams
    ignore the seed, so its p-value changes from call to call; this version draws from a seeded
    ``numpy.random.Generator`` so the page and the CLI report the same number.
    """
    a, b = np.asarray(control, dtype=float), np.asarray(treatment, dtype=float)
    if a.shape != b.shape or a.size == 0:
        raise ValueError("two equally long, non-empty score lists are needed")
    diff = b - a
    observed = abs(diff.mean())
    permuted = np.abs(sign_flips(n_permutations, diff.size, seed) @ diff) / diff.size
    return float((np.count_nonzero(permuted >= observed - 1e-12) + 1) / (n_permutations + 1))


@lru_cache(maxsize=4)
def sign_flips(n_permutations: int, size: int, seed: int) -> np.ndarray:
    """The seeded ±1 matrix (permutations × queries) of ``randomization_test``: drawn once per shape and seed,
    shared by every system and metric of an analysis (the same draws, a tenth of the time); read-only."""
    signs = np.random.default_rng(seed).choice(np.array([-1.0, 1.0]), size=(n_permutations, size))
    signs.flags.writeable = False
    return signs


def paired_bootstrap_auc(labels: np.ndarray, a: np.ndarray, b: np.ndarray, n: int = 2000, seed: int = 0) -> dict:
    """Paired bootstrap over test pairs (the same resample for both models) of AUC(a) − AUC(b); two-sided p."""
    from core.evaluation import roc_auc

    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(n):
        idx = rng.integers(0, len(labels), len(labels))
        if 0 < labels[idx].sum() < len(idx):
            diffs.append(roc_auc(labels[idx], a[idx]) - roc_auc(labels[idx], b[idx]))
    diffs = np.asarray(diffs)
    p = 2 * min((diffs <= 0).mean(), (diffs >= 0).mean())
    return {"auc_diff": float(roc_auc(labels, a) - roc_auc(labels, b)),
            "ci95": [float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))], "p": float(min(1.0, p)),
            "resamples": int(len(diffs))}
