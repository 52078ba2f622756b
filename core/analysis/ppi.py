"""Prediction-powered inference (PPI) for IR metrics: few human labels, many judge labels, one interval.

Angelopoulos et al. (2023), "Prediction-powered inference", Science 382; applied to IR metrics by
Oosterhuis et al. (2024), "Reliable confidence intervals for information retrieval evaluation using
generative AI" (KDD). The estimand here is the mean of a per-query metric (P@k, MAP, nDCG@k, or the
per-query difference of two systems) over a fixed set of N queries *as if every item had a human
label*. Every query has judge labels; a sample S of queries also has human labels on all its items.

Estimator (query-level, finite population), with f_q the metric under the judge's labels and y_q
under the humans' labels, r_q = y_q − f_q the rectifier, π_q the probability that q was sampled:

    θ̂_PPI = (1/N) Σ_{q=1..N} f_q + (1/N) Σ_{q∈S} r_q / π_q

- uniform sampling of n queries without replacement (π_q = n/N): θ̂ = mean_N f + mean_S r,
  Var̂ = (1 − n/N) s_r² / n (s_r² the sample variance of r over S);
- unequal probabilities (Poisson sampling, ``core.analysis.budget``): the inverse-probability weighted
  (Hájek) mean of the rectifier, r̄_π = Σ_S (r_q/π_q) / Σ_S (1/π_q), in place of (1/N) Σ_S r_q/π_q
  (Horvitz–Thompson, exactly unbiased but its variance grows with the judge's mean bias; Hájek's bias
  is O(1/n)), with the linearised variance Var̂ = Σ_S (1 − π_q)(r_q − r̄_π)² / π_q² / (Σ_S 1/π_q)²;
- interval: θ̂ ± t_{n−1, (1+level)/2} · √Var̂ (Student t for the small samples of a budget).

Power tuning (``tuned=True``; PPI++, Angelopoulos, Duchi & Zrnic 2023, "PPI++: efficient
prediction-powered inference"): the judge's values are scaled by λ̂ = Cov_S(y, f) / Var_S(f) (weighted by
1/π under unequal probabilities), θ̂ = λ̂·mean_N f + mean_S (y − λ̂ f), the variance computed with
r = y − λ̂ f. λ = 0 is humans only and λ = 1 classical PPI, so a weak judge cannot widen the interval much;
estimating λ on S adds a bias of order 1/n (the survey-sampling regression estimator).

The human-only estimate is the same with f ≡ 0 (mean over S of y, or its weighted form).
``population=True`` gives the classical superpopulation interval of Angelopoulos et al. (queries an iid
sample of a larger population): it adds s_f² / N, the variance of the judge's mean.

``ppi-python`` (the authors' package) was considered: its mean estimator assumes iid labelled and
unlabelled samples (no finite-population correction, no unequal inclusion probabilities) and it pulls
``gdown`` for its example data, so the estimator is written out here with scipy's t quantile.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

ESTIMATOR = ("PPI (Angelopoulos et al. 2023), query-level: mean over all N queries of the metric under judge "
             "labels + mean over the human-labelled queries of (human − judge) metric, inverse-probability "
             "(Hájek) weighted when queries were sampled with unequal probabilities; finite-population variance; "
             "Student-t interval with n−1 degrees of freedom")


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided ``level`` interval and the labels behind it."""

    estimate: float
    low: float
    high: float
    level: float
    n_human: int  # queries with human labels
    n_total: int  # queries in the estimand

    @property
    def width(self) -> float:
        """high − low."""
        return self.high - self.low

    def covers(self, value: float) -> bool:
        """Whether ``value`` lies in [low, high]."""
        return self.low <= value <= self.high

    def to_dict(self) -> dict:
        """JSON form (with the width)."""
        return {**asdict(self), "width": self.width}


@dataclass(frozen=True)
class MetricEstimates:
    """One metric three ways: humans only, judge only (no interval: its bias is unknown), and PPI."""

    metric: str
    human_only: Interval | None
    judge_only: float
    ppi: Interval | None
    human_labels: int
    judge_labels: int
    estimator: str = ESTIMATOR

    def to_dict(self) -> dict:
        """JSON form."""
        return {"metric": self.metric, "human_only": self.human_only.to_dict() if self.human_only else None,
                "judge_only": self.judge_only, "ppi": self.ppi.to_dict() if self.ppi else None,
                "human_labels": self.human_labels, "judge_labels": self.judge_labels, "estimator": self.estimator}


@functools.lru_cache(maxsize=4096)
def _quantile(level: float, n: int) -> float:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return float(stats.t.ppf((1 + level) / 2, df=max(1, n - 1)))


def _interval(estimate: float, var: float, level: float, n: int, total: int) -> Interval:
    half = _quantile(level, n) * float(np.sqrt(max(var, 0.0)))
    return Interval(float(estimate), float(estimate - half), float(estimate + half), level, n, total)


def _check(judge_all: np.ndarray, sampled: np.ndarray, human: np.ndarray, probs: np.ndarray | None) -> None:
    if judge_all.ndim != 1 or not len(judge_all):
        raise ValueError("judge values: a non-empty 1-d array over every query")
    if len(sampled) != len(human):
        raise ValueError("one human value per sampled query")
    if len(sampled) and (sampled.min() < 0 or sampled.max() >= len(judge_all)):
        raise ValueError("sampled query positions out of range")
    if len(np.unique(sampled)) != len(sampled):
        raise ValueError("a query is sampled at most once")
    if probs is not None and (len(probs) != len(judge_all) or np.any(probs <= 0) or np.any(probs > 1)):
        raise ValueError("inclusion probabilities: one in (0, 1] per query")


def ppi_mean(judge_all: Sequence[float], sampled: Sequence[int], human: Sequence[float], *, level: float = 0.9,
             probs: Sequence[float] | None = None, population: bool = False, tuned: bool = False) -> Interval | None:
    """PPI estimate of the mean of y over all N queries (see the module docstring).

    ``judge_all``: f_q for every query; ``sampled``: positions of the human-labelled queries; ``human``:
    y_q for those, in the same order; ``probs``: π_q for every query when sampled with unequal
    probabilities (None: uniform without replacement); ``tuned``: PPI++ power tuning (λ̂). None when fewer
    than two queries are labelled.
    """
    f = np.asarray(judge_all, dtype=float)
    idx = np.asarray(sampled, dtype=int)
    y = np.asarray(human, dtype=float)
    pi = None if probs is None else np.asarray(probs, dtype=float)
    _check(f, idx, y, pi)
    n, big_n = len(idx), len(f)
    if n < 2:
        return None
    if tuned:
        w = np.ones(n) if pi is None else 1 / pi[idx]
        fs = f[idx]
        fm, ym = np.average(fs, weights=w), np.average(y, weights=w)
        var_f = np.average((fs - fm) ** 2, weights=w)
        lam = float(np.average((fs - fm) * (y - ym), weights=w) / var_f) if var_f > 0 else 0.0
        f = lam * f
    r = y - f[idx]
    if pi is None:
        estimate = f.mean() + r.mean()
        var = (1 - n / big_n) * r.var(ddof=1) / n
    else:
        p = pi[idx]
        mass = (1 / p).sum()
        rbar = (r / p).sum() / mass
        estimate = f.mean() + rbar
        var = ((1 - p) * (r - rbar) ** 2 / p**2).sum() / mass**2
    if population:
        var += f.var(ddof=1) / big_n
    return _interval(estimate, var, level, n, big_n)


def human_mean(total: int, sampled: Sequence[int], human: Sequence[float], *, level: float = 0.9,
               probs: Sequence[float] | None = None, population: bool = False) -> Interval | None:
    """Humans-only estimate of the same mean from the same sample (PPI with a judge that always says 0)."""
    return ppi_mean(np.zeros(int(total)), sampled, human, level=level, probs=probs, population=population)


def metric_estimates(metric: str, judge: Mapping[str, float], human: Mapping[str, float], *, level: float = 0.9,
                     probs: Mapping[str, float] | None = None, human_labels: int = 0, judge_labels: int = 0,
                     tuned: bool = False) -> MetricEstimates:
    """Humans only, judge only and PPI for one metric from per-query values.

    ``judge``: the metric under judge labels for every query of the estimand; ``human``: under human
    labels, for the human-labelled queries (a subset of ``judge``'s keys); ``probs``: inclusion
    probabilities per query (None: a uniform sample).
    """
    qids = list(judge)
    pos = {q: i for i, q in enumerate(qids)}
    unknown = [q for q in human if q not in pos]
    if unknown:
        raise ValueError(f"human-labelled queries without judge values: {', '.join(unknown[:5])}")
    sampled = [pos[q] for q in human]
    pi = None if probs is None else [float(probs[q]) for q in qids]
    f = [float(judge[q]) for q in qids]
    y = [float(v) for v in human.values()]
    return MetricEstimates(metric, human_mean(len(qids), sampled, y, level=level, probs=pi),
                           float(np.mean(f)), ppi_mean(f, sampled, y, level=level, probs=pi, tuned=tuned),
                           human_labels, judge_labels, ESTIMATOR + ("; PPI++ power tuning" if tuned else ""))


# ----------------------------------------------------------------------------- a campaign's estimates
def per_query_values(qrels: Mapping[str, Mapping[str, int]], run, metric: str, queries: Sequence[str]) -> np.ndarray:
    """``metric`` per query of ``queries`` through ``core.evaluation.per_query`` (ranx); a query
    without a label > 0 scores 0 (the "all" convention)."""
    from core.evaluation import per_query

    judged = {q: dict(qrels[q]) for q in queries if any(v > 0 for v in qrels.get(q, {}).values())}
    values = per_query(judged, run, metric) if judged else {}
    return np.array([values.get(q, 0.0) for q in queries])


@dataclass(frozen=True)
class SystemEstimates:
    """One system's metrics three ways (humans only, judge only, PPI)."""

    system: str
    metrics: list[MetricEstimates]


def campaign_estimates(human: Mapping[str, Mapping[str, int]], judge: Mapping[str, Mapping[str, int]], runs,
                       metrics: Sequence[str], *, level: float = 0.9,
                       probs: Mapping[str, float] | None = None, tuned: bool = False) -> list[SystemEstimates]:
    """PPI per run and metric over the queries the judge labelled.

    ``human``: qrels of the queries whose every judge-labelled item also has a human label (the
    human-labelled sample); ``judge``: the judge's qrels on every query of the estimand; ``runs``: ranx
    runs (their ``name``); ``probs``: inclusion probabilities when the sample was budget-aware; ``tuned``:
    PPI++ power tuning (off by default: in the TrecQA simulation it narrowed the intervals but covered
    only .60–.85 below half the questions, λ being fitted on the same few questions).
    """
    queries = sorted(q for q in judge if judge[q])
    sampled = [q for q in queries if q in human and set(judge[q]) <= set(human[q])]
    n_human = sum(len(judge[q]) for q in sampled)
    n_judge = sum(len(judge[q]) for q in queries)
    out = []
    for run in runs:
        ests = []
        for m in metrics:
            f = per_query_values(judge, run, m, queries)
            y = per_query_values(human, run, m, sampled)
            ests.append(metric_estimates(m, dict(zip(queries, f)), dict(zip(sampled, y)), level=level, probs=probs,
                                         human_labels=n_human, judge_labels=n_judge, tuned=tuned))
        out.append(SystemEstimates(run.name, ests))
    return out
