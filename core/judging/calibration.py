"""Turning a judge's scores into graded labels, calibrated on human labels.

- ``fit_thresholds``: grade g is given when the score is at least t_g (t_1 ≤ … ≤ t_G); the thresholds
  maximise Cohen's κ against the human labels of the calibration items (linearly weighted κ when there
  are three or more grades), searched over score quantiles;
- ``relevance_model``: P(label ≥ 1 | score) by logistic regression on the same items (scikit-learn);
- ``grade_model``: P(label = g | item) for every grade g (multinomial logistic regression, scikit-learn),
  the "soft judge" whose expected metric ``core.analysis.ppi`` uses as its prediction; from the score alone,
  or (given each item's query) also from where the score stands among its query's candidates
  (``query_features``), compared on the calibration items by ``grouped_log_loss``;
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


def query_features(scores: Sequence[float], groups: Sequence[str] | None) -> np.ndarray:
    """The calibration features of each item: its score alone (``groups`` None), or with ``groups`` (the
    query of each item) also where it stands among its query's candidates: score − the query's best score,
    log(1 + rank) and the score's z-score within the query. A judge's scores are often comparable within a
    query far better than across queries (a question-answering CNN's MAP is high while one global threshold
    agrees with humans only moderately); these features let P(g | item) use that."""
    s = np.asarray(scores, dtype=float)
    if groups is None:
        return s.reshape(-1, 1)
    g = np.asarray(groups, dtype=object)
    if len(g) != len(s):
        raise ValueError("one query id per score")
    out = np.zeros((len(s), 4))
    out[:, 0] = s
    for q in dict.fromkeys(g.tolist()):
        at = np.flatnonzero(g == q)
        v = s[at]
        rank = (-v).argsort(kind="stable").argsort()
        out[at, 1] = v - v.max()
        out[at, 2] = np.log1p(rank)
        out[at, 3] = (v - v.mean()) / v.std() if v.std() > 0 else 0.0
    return out


@dataclass(frozen=True)
class GradeModel:
    """P(label = g | item) for g = 0..max_label: multinomial logistic regression (scikit-learn, standardised
    features) on the calibration items' ``query_features``; ``by_query``: fitted with the within-query
    features, so every prediction needs the query of each item."""

    model: object | None  # sklearn pipeline; None: a single grade was seen
    max_label: int
    by_query: bool
    constant: int = 0  # the one grade seen, when ``model`` is None

    def __call__(self, scores: Sequence[float], groups: Sequence[str] | None = None) -> np.ndarray:
        """Rows over grades 0..max_label, one per score (``groups``: each item's query, needed when
        ``by_query``)."""
        out = np.zeros((len(scores), self.max_label + 1))
        if self.model is None:
            out[:, self.constant] = 1.0
            return out
        if self.by_query and groups is None:
            raise ValueError("this grade model uses within-query features: give the query of every item")
        x = query_features(scores, groups if self.by_query else None)
        out[:, self.model.classes_] = self.model.predict_proba(x)
        return out


def grade_model(scores: Sequence[float], labels: Sequence[int], max_label: int,
                groups: Sequence[str] | None = None) -> GradeModel:
    """P(label = g | item) for g = 0..max_label (rows sum to 1), multinomial logistic regression on the
    calibration items (``GradeModel``); with ``groups`` (each item's query) the within-query features of
    ``query_features`` join the score. A grade never seen gets probability 0, a single seen grade
    probability 1."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=int)
    if len(s) != len(y) or not len(y):
        raise ValueError("one label per calibration score, at least one item")
    if max_label < 1 or y.min() < 0 or y.max() > max_label:
        raise ValueError(f"labels must be integers from 0 to {max_label}")
    seen = sorted(set(y.tolist()))
    if len(seen) == 1:
        return GradeModel(None, max_label, groups is not None, seen[0])
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(query_features(s, groups), y)
    return GradeModel(model, max_label, groups is not None)


def grouped_log_loss(scores: Sequence[float], labels: Sequence[int], max_label: int, groups: Sequence[str],
                     by_query: bool, folds: int = 5) -> float:
    """Cross-validated log loss of ``grade_model`` on calibration items, folds by query (scikit-learn's
    GroupKFold): how the score-only and the within-query calibrations are compared on dev."""
    from sklearn.metrics import log_loss
    from sklearn.model_selection import GroupKFold

    s, y, g = np.asarray(scores, dtype=float), np.asarray(labels, dtype=int), np.asarray(groups, dtype=object)
    losses, weights = [], []
    for fit, held in GroupKFold(n_splits=min(folds, len(set(g.tolist())))).split(s, y, g):
        model = grade_model(s[fit], y[fit], max_label, g[fit].tolist() if by_query else None)
        p = np.clip(model(s[held], g[held].tolist() if by_query else None), 1e-12, 1)
        losses.append(log_loss(y[held], p / p.sum(axis=1, keepdims=True), labels=list(range(max_label + 1))))
        weights.append(len(held))
    return float(np.average(losses, weights=weights))


@dataclass(frozen=True)
class CalibrationChoice:
    """The grade model chosen on the calibration items and the cross-validated log loss of each option."""

    model: GradeModel
    log_loss: dict[str, float]  # "score" and, when compared, "score+query"

    @property
    def features(self) -> str:
        """The chosen features: "score" or "score+query"."""
        return "score+query" if self.model.by_query else "score"


MIN_GROUPS = 4  # calibration queries needed before the within-query features are compared


def choose_grade_model(scores: Sequence[float], labels: Sequence[int], max_label: int,
                       groups: Sequence[str]) -> CalibrationChoice:
    """The score-only or the within-query ``grade_model``, whichever has the lower ``grouped_log_loss`` on the
    calibration items (score only when fewer than ``MIN_GROUPS`` queries or a single grade was seen)."""
    if len(set(groups)) < MIN_GROUPS or len(set(labels)) < 2:
        return CalibrationChoice(grade_model(scores, labels, max_label), {})
    losses = {name: grouped_log_loss(scores, labels, max_label, groups, by_query)
              for name, by_query in (("score", False), ("score+query", True))}
    by_query = losses["score+query"] < losses["score"]
    return CalibrationChoice(grade_model(scores, labels, max_label, groups if by_query else None), losses)


def cross_fitted_probs(scores: Sequence[float], labels: Sequence[int], max_label: int, groups: Sequence[str],
                       folds: int = 5) -> np.ndarray:
    """P(g | item) for every calibration item from a model chosen and fitted (``choose_grade_model``) on the
    *other* folds (GroupKFold by query): the judge as it would predict items it was not calibrated on, which
    is what ``core.analysis.ppi.variance_scale`` compares the human labels with."""
    from sklearn.model_selection import GroupKFold

    s, y, g = np.asarray(scores, dtype=float), np.asarray(labels, dtype=int), np.asarray(groups, dtype=object)
    out = np.zeros((len(s), max_label + 1))
    n_groups = len(set(g.tolist()))
    if n_groups < 2:
        raise ValueError("cross-fitting needs items of at least two queries")
    for fit, held in GroupKFold(n_splits=min(folds, n_groups)).split(s, y, g):
        out[held] = choose_grade_model(s[fit], y[fit], max_label, g[fit].tolist()).model(s[held], g[held].tolist())
    return out


def calibration_split(query_ids: Sequence[str], share: float = 0.5, seed: int = 0) -> tuple[list[str], list[str]]:
    """(calibration, report) query ids: a seeded, order-free split by hash of (seed, id)."""
    if not 0 < share < 1:
        raise ValueError(f"calibration share must be in (0, 1), got {share}")
    ranked = sorted(set(query_ids), key=lambda q: hashlib.sha256(f"{seed}:{q}".encode()).hexdigest())
    cut = max(1, min(len(ranked) - 1, round(share * len(ranked)))) if len(ranked) > 1 else len(ranked)
    return sorted(ranked[:cut]), sorted(ranked[cut:])
