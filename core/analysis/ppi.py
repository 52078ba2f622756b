"""Prediction-powered inference (PPI) for IR metrics: few human labels, many judge labels, one interval.

Angelopoulos et al. (2023), "Prediction-powered inference", Science 382; applied to IR metrics by
Oosterhuis et al. (2024), "Reliable confidence intervals for information retrieval evaluation using
generative AI" (KDD). The estimand here is the mean of a per-query metric (P@k, MAP, nDCG@k, or the
per-query difference of two systems) over a fixed set of N queries *as if every item had a human
label*. Every query has judge labels; a sample S of queries also has human labels on all its items.

Estimator (query-level, finite population), with f_q the judge's prediction of the query's metric and
y_q the metric under the humans' labels, r_q = y_q − f_q the rectifier, π_q the probability that q was
sampled:

    θ̂_PPI = (1/N) Σ_{q=1..N} f_q + (1/N) Σ_{q∈S} r_q / π_q

- the prediction f_q is the *soft judge*: the expected metric when every item's label is drawn from the
  judge's calibrated grade distribution P(g | item) (``core.judging.calibration.grade_model``), computed
  by Monte Carlo (``posterior_samples``: K seeded label draws per query, each scored by ranx through
  ``core.evaluation``; the same draws for every system, so differences are paired). On TrecQA it predicts
  the human metric far better than the metric of the thresholded labels (MAP rectifier variance .12 vs
  .24 for BM25), which is what narrows the interval; any fixed function of the judge's scores keeps PPI
  valid, provided the calibration items are not the ones the rectifier is averaged over;
- uniform sampling of n queries without replacement (π_q = n/N): θ̂ = mean_N f + mean_S r,
  Var̂ = (1 − n/N) s_r² / n (s_r² the sample variance of r over S);
- unequal probabilities (sequential Poisson sampling, ``core.analysis.budget``): the inverse-probability
  weighted (Hájek) mean of the rectifier, r̄_π = Σ_S (r_q/π_q) / Σ_S (1/π_q), in place of
  (1/N) Σ_S r_q/π_q, with the linearised variance Var̂ = Σ_S (1 − π_q)(r_q − r̄_π)² / π_q² / (Σ_S 1/π_q)²,
  moderated by the judge's own prediction of it, V_J = Σ_{q=1..N} (1 − π_q) σ_q² / π_q / N² (σ_q² the
  variance of the metric over the judge's label draws);
- the same under uniform sampling, with V_J = (1 − n/N) · mean_q σ_q² / n. *Moderation*: with a handful of
  questions the sample variance V̂ is often near 0 by chance (two systems that differ on few questions) and
  the interval then misses (unmoderated, the TrecQA simulation's intervals of system differences covered
  only .77–.87 below half the questions). The variance used is

      Ṽ = max(V̂, (d₀ · V_J + (n − 1) · V̂) / (d₀ + n − 1)),

  the sample variance pulled up toward the judge's prediction as if the judge had contributed d₀ extra
  questions (the empirical-Bayes moderated variance of Smyth 2004, one-sided: never below V̂), with
  Smyth's moderated degrees of freedom n − 1 + d₀ for the t quantile (the normal quantile at d₀ = ∞, the
  hard floor max(V̂, V_J), where the judge's variance is taken as known);
- *the judge's variance is itself calibrated*: a judge whose grade probabilities are sharper than its
  errors predicts too small a σ_q² (on TrecQA dev, with the CNN judge cross-fitted, the squared rectifier
  was 1.66× the predicted variance for P@5, 1.19× for MAP, 1.03× for nDCG@10), so σ_q² is multiplied by
  κ = max(1, Σ r² / Σ σ²) measured on labelled queries the judge was not calibrated on
  (``variance_scale``; in a campaign, its calibration queries with cross-fitted grade probabilities,
  ``core.judging.calibration.cross_fitted_probs``);
- ``PRIOR_DF`` is chosen on TrecQA *dev* by ``bench.ppi_simulation --choose-prior-df`` (the smallest d₀ of
  1, 2, 4, 8, ∞ whose 90 % intervals cover ≥ .89 in every cell, judge cross-fitted, κ applied;
  bench/reports/ppi_simulation.json "prior_df_choice");
- interval: θ̂ ± q · √Ṽ, q the t quantile above (Student t at n − 1 for humans only).

Power tuning (``tuned=True``; PPI++, Angelopoulos, Duchi & Zrnic 2023, "PPI++: efficient
prediction-powered inference"): the judge's values are scaled by λ̂ = Cov_S(y, f) / Var_S(f) (weighted by
1/π under unequal probabilities), θ̂ = λ̂·mean_N f + mean_S (y − λ̂ f), the variance computed with
r = y − λ̂ f. Not used by the app: λ fitted on the same few queries covered only .60–.85 below half the
questions in the simulation.

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

PRIOR_DF = float("inf")  # d₀: the judge's predicted variance counts as this many questions; ∞: a floor (module docstring)
ESTIMATOR = ("PPI (Angelopoulos et al. 2023), query-level: mean over all N queries of the soft judge's expected "
             "metric (labels drawn from its calibrated grade probabilities, Monte Carlo) + mean over the "
             "human-labelled queries of (human − judge) metric, inverse-probability (Hájek) weighted when queries "
             "were sampled with unequal probabilities; finite-population variance "
             + ("floored by the judge's own predicted variance, max(V, V_judge) (d0 = inf, chosen on dev), with a "
                "normal quantile" if PRIOR_DF == float("inf") else
                f"moderated by the judge's own predicted variance, max(V, (d0 V_judge + (n-1) V) / (d0 + n - 1)), "
                f"d0 = {PRIOR_DF:g} (chosen on dev), with Student t at n - 1 + d0 degrees of freedom")
             + "; the judge's predicted variance scaled by kappa = max(1, sum r^2 / sum sigma^2) on queries it was "
               "not calibrated on")
SAMPLES = 100  # Monte Carlo label draws per query for the soft judge


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
    variance_scale: float = 1.0  # κ applied to the judge's predicted variance (``variance_scale``)

    def to_dict(self) -> dict:
        """JSON form."""
        return {"metric": self.metric, "human_only": self.human_only.to_dict() if self.human_only else None,
                "judge_only": self.judge_only, "ppi": self.ppi.to_dict() if self.ppi else None,
                "human_labels": self.human_labels, "judge_labels": self.judge_labels, "estimator": self.estimator,
                "variance_scale": self.variance_scale}


@functools.lru_cache(maxsize=4096)
def t_quantile(level: float, n: int, prior_df: float = 0.0) -> float:
    """Student t's two-sided ``level`` quantile at n − 1 + d₀ degrees of freedom (the normal one at d₀ = ∞)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if np.isinf(prior_df):
        return float(stats.norm.ppf((1 + level) / 2))
    return float(stats.t.ppf((1 + level) / 2, df=max(1.0, n - 1 + prior_df)))


def _interval(estimate: float, var: float, level: float, n: int, total: int, prior_df: float = 0.0) -> Interval:
    half = t_quantile(level, n, prior_df) * float(np.sqrt(max(var, 0.0)))
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


def moderated_variance(sample: float, judge: float, n: int, prior_df: float = PRIOR_DF) -> float:
    """Ṽ = max(V̂, (d₀·V_J + (n − 1)·V̂) / (d₀ + n − 1)): the sample variance of the estimate pulled up toward
    the judge's prediction V_J with ``prior_df`` = d₀ pseudo-questions (∞: max(V̂, V_J); 0: V̂)."""
    if prior_df < 0 or np.isnan(prior_df):
        raise ValueError(f"prior_df must be ≥ 0, got {prior_df}")
    if np.isinf(prior_df):
        return max(sample, judge)
    return max(sample, (prior_df * judge + (n - 1) * sample) / (prior_df + n - 1))


def variance_scale(human: Sequence[Sequence[float]], judge: Sequence[Sequence[float]],
                   model_var: Sequence[Sequence[float]]) -> float:
    """κ = max(1, Σ r² / Σ σ²) over the given series (systems, or differences of systems) on labelled queries
    the judge was *not* calibrated on: how much the realised squared rectifier r = y − f exceeds the judge's
    own predicted variance σ². The judge's σ² is multiplied by κ before it moderates the sample variance
    (one-sided: a judge that over-predicts its error is not trusted to shrink an interval)."""
    num = den = 0.0
    for y, f, v in zip(human, judge, model_var, strict=True):
        y, f, v = (np.asarray(a, dtype=float) for a in (y, f, v))
        if not (y.shape == f.shape == v.shape):
            raise ValueError("human values, judge values and model variances: one per query, in the same order")
        num += float(((y - f) ** 2).sum())
        den += float(v.sum())
    return max(1.0, num / den) if den > 0 else 1.0


def ppi_mean(judge_all: Sequence[float], sampled: Sequence[int], human: Sequence[float], *, level: float = 0.9,
             probs: Sequence[float] | None = None, population: bool = False, tuned: bool = False,
             model_var: Sequence[float] | None = None, prior_df: float = PRIOR_DF) -> Interval | None:
    """PPI estimate of the mean of y over all N queries (see the module docstring).

    ``judge_all``: f_q for every query; ``sampled``: positions of the human-labelled queries; ``human``:
    y_q for those, in the same order; ``probs``: π_q for every query when sampled with unequal
    probabilities (None: uniform without replacement); ``tuned``: PPI++ power tuning (λ̂); ``model_var``:
    σ_q² for every query, the judge's predicted variance of y_q, which moderates the sample variance with
    weight ``prior_df`` (d₀; ∞: a hard floor; module docstring). None when fewer than two queries are
    labelled.
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
    sigma2 = None
    if model_var is not None:
        sigma2 = np.asarray(model_var, dtype=float)
        if sigma2.shape != f.shape or np.any(sigma2 < 0):
            raise ValueError("model variances: one non-negative value per query")
    if pi is None:
        estimate = f.mean() + r.mean()
        var = (1 - n / big_n) * r.var(ddof=1) / n
        if sigma2 is not None:
            var = moderated_variance(var, (1 - n / big_n) * float(sigma2.mean()) / n, n, prior_df)
    else:
        p = pi[idx]
        mass = (1 / p).sum()
        rbar = (r / p).sum() / mass
        estimate = f.mean() + rbar
        var = ((1 - p) * (r - rbar) ** 2 / p**2).sum() / mass**2
        if sigma2 is not None:
            var = moderated_variance(var, float(((1 - pi) * sigma2 / pi).sum()) / big_n**2, n, prior_df)
    if population:
        var += f.var(ddof=1) / big_n
    return _interval(estimate, var, level, n, big_n, prior_df if sigma2 is not None else 0.0)


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


def _run_dict(run) -> dict[str, dict[str, float]]:
    if hasattr(run, "to_dict"):
        return {q: dict(v) for q, v in run.to_dict().items()}
    return {q: (r.as_dict() if hasattr(r, "as_dict") else dict(r)) for q, r in run.items()}


def posterior_samples(grade_probs: Mapping[str, Mapping[str, Sequence[float]]], runs: Mapping[str, object],
                      metric: str, queries: Sequence[str], *, samples: int = SAMPLES, seed: int = 0
                      ) -> dict[str, np.ndarray]:
    """Per run, an (N, K) array: ``metric`` per query of ``queries`` under K label draws, each item's grade
    drawn from the judge's P(g | item) (``grade_probs[q][doc]``, a row over grades 0..G); the same draws
    for every run. The soft judge's prediction is the row mean, its uncertainty the row variance."""
    from ranx import Run

    if samples < 1:
        raise ValueError(f"samples must be ≥ 1, got {samples}")
    rng = np.random.default_rng(seed)
    drawn: dict[str, dict[str, int]] = {}
    for q in queries:
        docs = sorted(grade_probs.get(q, {}))
        if not docs:
            continue
        rows = np.asarray([grade_probs[q][d] for d in docs], dtype=float)
        cum = np.cumsum(rows / rows.sum(axis=1, keepdims=True), axis=1)
        u = rng.random((samples, len(docs), 1))
        grades = (u > cum[None, :, :]).sum(axis=2)  # (K, docs)
        for k in range(samples):
            drawn[f"{q}\x1f{k}"] = dict(zip(docs, grades[k].tolist()))
    keys = [f"{q}\x1f{k}" for q in queries for k in range(samples)]
    out = {}
    for name, run in runs.items():
        base = _run_dict(run)
        ranked = {key: base[key.split("\x1f")[0]] for key in keys if base.get(key.split("\x1f")[0]) and key in drawn}
        values = per_query_values(drawn, Run.from_dict(ranked), metric, keys) if ranked else np.zeros(len(keys))
        out[name] = values.reshape(len(queries), samples)
    return out


def calibration_kappa(human: Mapping[str, Mapping[str, int]],
                      calibration_probs: Mapping[str, Mapping[str, Sequence[float]]] | None,
                      runs: Mapping[str, object], metric: str, *, samples: int = SAMPLES, seed: int = 0) -> float:
    """κ (``variance_scale``) of ``metric`` over ``runs`` on the calibration queries whose every item has a human
    label, from their cross-fitted grade probabilities; 1 without any."""
    checked = sorted(q for q in (calibration_probs or {}) if calibration_probs[q] and q in human
                     and set(calibration_probs[q]) <= set(human[q]))
    if not checked:
        return 1.0
    held = posterior_samples(calibration_probs, runs, metric, checked, samples=samples, seed=seed)
    return variance_scale([per_query_values(human, run, metric, checked) for run in runs.values()],
                          [held[name].mean(axis=1) for name in runs], [held[name].var(axis=1) for name in runs])


@dataclass(frozen=True)
class SystemEstimates:
    """One system's metrics three ways (humans only, judge only, PPI)."""

    system: str
    metrics: list[MetricEstimates]


def campaign_estimates(human: Mapping[str, Mapping[str, int]], grade_probs: Mapping[str, Mapping[str, Sequence[float]]],
                       runs, metrics: Sequence[str], *, level: float = 0.9, calibration: Sequence[str] = (),
                       probs: Mapping[str, float] | None = None, samples: int = SAMPLES, seed: int = 0,
                       calibration_probs: Mapping[str, Mapping[str, Sequence[float]]] | None = None
                       ) -> list[SystemEstimates]:
    """PPI per run and metric over the queries the judge scored, with the soft judge's prediction.

    ``human``: human qrels; a query counts as human-labelled when every item the judge scored on it has a
    human label; ``grade_probs``: the judge's P(g | item) per query and item (the estimand's queries);
    ``calibration``: the queries whose human labels calibrated the judge; they are left out of the
    rectifier (the judge must be fixed before the sample it is checked on); ``runs``: ranx runs (their
    ``name``); ``probs``: inclusion probabilities when the sample was budget-aware; ``calibration_probs``:
    P(g | item) of the calibration queries' items, cross-fitted (each from a model that did not see its
    query), from which κ = ``variance_scale`` is measured per metric over the runs (κ = 1 without them).
    """
    queries = sorted(q for q in grade_probs if grade_probs[q])
    held = set(calibration)
    sampled = [q for q in queries if q not in held and q in human and set(grade_probs[q]) <= set(human[q])]
    n_human = sum(len(grade_probs[q]) for q in sampled)
    n_judge = sum(len(grade_probs[q]) for q in queries)
    named = {run.name: run for run in runs}
    out: dict[str, list[MetricEstimates]] = {name: [] for name in named}
    pos = {q: i for i, q in enumerate(queries)}
    idx = [pos[q] for q in sampled]
    pi = None if probs is None else [float(probs[q]) for q in queries]
    for m in metrics:
        draws = posterior_samples(grade_probs, named, m, queries, samples=samples, seed=seed)
        kappa = calibration_kappa(human, calibration_probs, named, m, samples=samples, seed=seed)
        for name, run in named.items():
            f = draws[name].mean(axis=1)
            y = per_query_values(human, run, m, sampled)
            est = MetricEstimates(m, human_mean(len(queries), idx, y, level=level, probs=pi), float(f.mean()),
                                  ppi_mean(f, idx, y, level=level, probs=pi,
                                           model_var=kappa * draws[name].var(axis=1)),
                                  n_human, n_judge, variance_scale=kappa)
            out[name].append(est)
    return [SystemEstimates(name, ests) for name, ests in out.items()]
