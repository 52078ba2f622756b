"""Turning a judge's scores into graded labels, calibrated on human labels.

- ``fit_thresholds``: grade g is given when the score is at least t_g (t_1 ≤ … ≤ t_G); the thresholds
  maximise Cohen's κ against the human labels of the calibration items (linearly weighted κ when there
  are three or more grades), searched over score quantiles;
- ``relevance_model``: P(label ≥ 1 | score) by logistic regression on the same items (scikit-learn);
- ``grade_model``: P(label = g | score) for every grade g (multinomial logistic regression, scikit-learn),
  the "soft judge" whose expected metric ``core.analysis.ppi`` uses as its prediction;
- ``calibration_split``: a seeded split of query ids into the calibration half and the half where
  agreement is reported (never the items the thresholds were fitted on).
"""
from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import cohen_kappa_score

GRID = 48  # candidate thresholds: score quantiles


@dataclass(frozen=True)
class Thresholds:
    """Grade g ≥ 1 when score ≥ ``cuts[g-1]``; fitted on ``items`` calibration items with κ ``kappa``."""

    cuts: tuple[float, ...]
    kappa: float
    items: int

    def grade(self, scores: Sequence[float]) -> np.ndarray:
        """Graded labels 0..len(cuts) of ``scores``."""
        s = np.asarray(scores, dtype=float)
        return (s[:, None] >= np.asarray(self.cuts)[None, :]).sum(axis=1).astype(int)


def _kappa(a: np.ndarray, b: np.ndarray, grades: list[int]) -> float:
    if len(set(a.tolist()) | set(b.tolist())) < 2:
        return 0.0
    value = cohen_kappa_score(a, b, labels=grades, weights="linear" if len(grades) > 2 else None)
    return 0.0 if np.isnan(value) else float(value)


def fit_thresholds(scores: Sequence[float], labels: Sequence[int], max_label: int) -> Thresholds:
    """Thresholds maximising κ of the graded scores against ``labels`` (0..max_label)."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=int)
    if len(s) != len(y) or len(s) < 2:
        raise ValueError("two or more calibration items with one score and one label each are needed")
    if max_label < 1 or y.min() < 0 or y.max() > max_label:
        raise ValueError(f"labels must be integers from 0 to {max_label}")
    grades = list(range(max_label + 1))
    grid = np.unique(np.quantile(s, np.linspace(0, 1, GRID + 1)))
    grid = np.append(grid, np.inf)  # a grade nobody reaches
    best: tuple[float, tuple[float, ...]] = (-np.inf, ())
    for cuts in itertools.combinations_with_replacement(grid, max_label):
        pred = (s[:, None] >= np.asarray(cuts)[None, :]).sum(axis=1)
        k = _kappa(y, pred, grades)
        if k > best[0]:
            best = (k, tuple(float(c) for c in cuts))
    return Thresholds(best[1], float(best[0]), len(s))


def relevance_model(scores: Sequence[float], labels: Sequence[int]) -> Callable[[Sequence[float]], np.ndarray]:
    """P(label ≥ 1 | score), logistic regression fitted on calibration items."""
    s = np.asarray(scores, dtype=float).reshape(-1, 1)
    y = (np.asarray(labels, dtype=int) >= 1).astype(int)
    if len(set(y.tolist())) < 2:
        rate = float(y.mean()) if len(y) else 0.5
        return lambda new: np.full(len(new), rate)
    model = LogisticRegression().fit(s, y)
    return lambda new: model.predict_proba(np.asarray(new, dtype=float).reshape(-1, 1))[:, 1]


def grade_model(scores: Sequence[float], labels: Sequence[int], max_label: int
                ) -> Callable[[Sequence[float]], np.ndarray]:
    """P(label = g | score) for g = 0..max_label (rows sum to 1), multinomial logistic regression on the
    calibration items; a grade never seen gets probability 0, a single seen grade probability 1."""
    s = np.asarray(scores, dtype=float).reshape(-1, 1)
    y = np.asarray(labels, dtype=int)
    if len(s) != len(y) or not len(y):
        raise ValueError("one label per calibration score, at least one item")
    if max_label < 1 or y.min() < 0 or y.max() > max_label:
        raise ValueError(f"labels must be integers from 0 to {max_label}")
    seen = sorted(set(y.tolist()))
    if len(seen) == 1:
        def constant(new: Sequence[float]) -> np.ndarray:
            out = np.zeros((len(new), max_label + 1))
            out[:, seen[0]] = 1.0
            return out
        return constant
    model = LogisticRegression().fit(s, y)

    def predict(new: Sequence[float]) -> np.ndarray:
        out = np.zeros((len(new), max_label + 1))
        out[:, model.classes_] = model.predict_proba(np.asarray(new, dtype=float).reshape(-1, 1))
        return out
    return predict


def calibration_split(query_ids: Sequence[str], share: float = 0.5, seed: int = 0) -> tuple[list[str], list[str]]:
    """(calibration, report) query ids: a seeded, order-free split by hash of (seed, id)."""
    if not 0 < share < 1:
        raise ValueError(f"calibration share must be in (0, 1), got {share}")
    ranked = sorted(set(query_ids), key=lambda q: hashlib.sha256(f"{seed}:{q}".encode()).hexdigest())
    cut = max(1, min(len(ranked) - 1, round(share * len(ranked)))) if len(ranked) > 1 else len(ranked)
    return sorted(ranked[:cut]), sorted(ranked[cut:])
