"""The judging-budget simulation's draws (``bench.ppi_simulation`` runs it on TrecQA): per budget and design, a
cell of ``draws`` samples of human-labelled questions, each scored by the PPI interval and by humans only.

Coverage of the full-judgment value by the nominal 90 % interval, mean widths, Kendall τ of the system ordering
and the significant pairs kept, per metric; every cell seeds its own generator, so cells run as executor jobs
side by side and give the numbers of one loop. The variance moderation d₀ is chosen on dev
(:func:`choose_prior_df`).
"""
from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats

from core.analysis.budget import inclusion_probabilities, metric_uncertainty, sequential_poisson_sample, uniform_sample
from core.analysis.ppi import PRIOR_DF, human_mean, posterior_samples, ppi_mean, variance_scale
from core.evaluation import per_query
from core.judging.auto_judge import ORDER_METRIC

__all__ = ["BUDGETS", "DESIGNS", "DEV_DRAWS", "LEVEL", "METRICS", "PRIOR_DF_GRID", "SimulationInputs", "choose_prior_df",
           "d0_value", "dev_variance_scale", "kendall_tau", "metric_table", "scaled", "simulate", "simulate_cell",
           "simulation_inputs"]

BUDGETS = (0.05, 0.10, 0.25, 0.50)
METRICS = ("precision@5", "map@100", "ndcg@10")
LEVEL = 0.9


def metric_table(qrels: Mapping[str, Mapping[str, int]], run, metric: str, qids: list[str]) -> np.ndarray:
    """Per-query metric over ``qids`` (0 for a question without a relevant candidate)."""
    values = per_query({q: qrels.get(q, {}) for q in qids if qrels.get(q)}, run, metric)
    return np.array([values.get(q, 0.0) for q in qids])


def kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall τ of two orderings (scipy); 0 where it is undefined (a constant side)."""
    tau = stats.kendalltau(a, b).statistic
    return float(tau) if np.isfinite(tau) else 0.0


def simulate(human: dict, soft: dict, model_var: dict, uncertainty: np.ndarray, budgets, draws: int, seed: int,
             systems: list[str], n_labels: np.ndarray, prior_df: float = PRIOR_DF) -> dict:
    """Coverage, width and τ per budget and design (see the module docstring): each (budget, design) cell a job on
    the executor (``core.executor``; every cell seeds its own generator, so the cells run side by side and give
    the numbers of one loop).

    ``human[m]``: per system, the per-query metric under full human labels; ``soft[m]``: the soft judge's
    prediction; ``model_var[m]``: per system index and per pair (i, j), the judge's predicted variance per
    query; ``uncertainty``: u_q for the budget-aware design."""
    from core.executor import Job, run_jobs

    cells = [(budget, design) for budget in budgets for design in DESIGNS]
    jobs = [Job(f"{budget:.2f}/{design}", simulate_cell,
                (human, soft, model_var, uncertainty, budget, design, draws, seed, systems, n_labels, prior_df))
            for budget, design in cells]
    done = run_jobs(jobs)
    failed = [r.error for r in done.values() if r.error]
    if failed:
        raise RuntimeError(f"a simulation cell failed: {failed[0]}")
    out: dict = {}
    for (budget, design), job in zip(cells, jobs):
        out.setdefault(f"{budget:.2f}", {})[design] = done[job.key].value
    return out


DESIGNS = ("uniform", "budget-aware")


def simulate_cell(human: dict, soft: dict, model_var: dict, uncertainty: np.ndarray, budget: float, design: str,
                  draws: int, seed: int, systems: list[str], n_labels: np.ndarray, prior_df: float) -> dict:
    """One budget and design of :func:`simulate`: ``draws`` samples from a generator seeded with ``seed``."""
    big_n = len(n_labels)
    pairs = list(itertools.combinations(range(len(systems)), 2))
    significant = {(m, i, j): bool(np.any(human[m][i] != human[m][j])
                                   and stats.ttest_rel(human[m][i], human[m][j]).pvalue < 0.05)
                   for m in METRICS for i, j in pairs}
    keys = ("ppi_cover", "human_cover", "ppi_width", "human_width", "diff_ppi_cover", "diff_human_cover",
            "diff_ppi_width", "diff_human_width", "tau_ppi", "tau_human", "sig_kept", "sig_kept_human", "labels")
    n = max(2, round(budget * big_n))
    rng = np.random.default_rng(seed)
    pi = inclusion_probabilities(uncertainty, n) if design == "budget-aware" else None
    acc: dict = {m: {k: [] for k in keys} for m in METRICS}
    for _ in range(draws):
        idx = uniform_sample(big_n, n, rng) if pi is None else sequential_poisson_sample(pi, n, rng)
        for m in METRICS:
            a = acc[m]
            a["labels"].append(int(n_labels[idx].sum()))
            truth, f = human[m], soft[m]
            est_p, est_h = [], []
            for s in range(len(systems)):
                t = truth[s].mean()
                ip = ppi_mean(f[s], idx, truth[s][idx], level=LEVEL, probs=pi, model_var=model_var[m][s],
                              prior_df=prior_df)
                ih = human_mean(big_n, idx, truth[s][idx], level=LEVEL, probs=pi)
                a["ppi_cover"].append(ip.covers(t))
                a["human_cover"].append(ih.covers(t))
                a["ppi_width"].append(ip.width)
                a["human_width"].append(ih.width)
                est_p.append(ip.estimate)
                est_h.append(ih.estimate)
            full = np.array([truth[s].mean() for s in range(len(systems))])
            a["tau_ppi"].append(kendall_tau(np.array(est_p), full))
            a["tau_human"].append(kendall_tau(np.array(est_h), full))
            kept, kept_h = [], []
            for i, j in pairs:
                d_true = truth[i] - truth[j]
                ip = ppi_mean(f[i] - f[j], idx, d_true[idx], level=LEVEL, probs=pi,
                              model_var=model_var[m][(i, j)], prior_df=prior_df)
                ih = human_mean(big_n, idx, d_true[idx], level=LEVEL, probs=pi)
                a["diff_ppi_cover"].append(ip.covers(d_true.mean()))
                a["diff_human_cover"].append(ih.covers(d_true.mean()))
                a["diff_ppi_width"].append(ip.width)
                a["diff_human_width"].append(ih.width)
                if significant[(m, i, j)]:
                    sign = np.sign(d_true.mean())
                    kept.append(bool(ip.low > 0) if sign > 0 else bool(ip.high < 0))
                    kept_h.append(bool(ih.low > 0) if sign > 0 else bool(ih.high < 0))
            if kept:
                a["sig_kept"].append(float(np.mean(kept)))
                a["sig_kept_human"].append(float(np.mean(kept_h)))
    return {
        m: {"draws": len(a["labels"]), "queries": n,
            "significant_pairs_full": sum(significant[(m, i, j)] for i, j in pairs),
            "human_labels_mean": float(np.mean(a["labels"])),
            "coverage_ppi": float(np.mean(a["ppi_cover"])), "coverage_human": float(np.mean(a["human_cover"])),
            "width_ppi": float(np.mean(a["ppi_width"])), "width_human": float(np.mean(a["human_width"])),
            "diff_coverage_ppi": float(np.mean(a["diff_ppi_cover"])),
            "diff_coverage_human": float(np.mean(a["diff_human_cover"])),
            "diff_width_ppi": float(np.mean(a["diff_ppi_width"])),
            "diff_width_human": float(np.mean(a["diff_human_width"])),
            "tau_ppi": float(np.mean(a["tau_ppi"])), "tau_human": float(np.mean(a["tau_human"])),
            "significant_pairs_kept": float(np.mean(a["sig_kept"])) if a["sig_kept"] else None,
            "significant_pairs_kept_human": float(np.mean(a["sig_kept_human"])) if a["sig_kept_human"] else None}
        for m, a in acc.items()}


PRIOR_DF_GRID = (1.0, 2.0, 4.0, 8.0, float("inf"))  # d₀ candidates, narrowest first; ∞: the hard floor
DEV_DRAWS = 300
DEV_BAR = 0.89  # every dev cell's coverage of a nominal 90 % interval must reach this


@dataclass
class SimulationInputs:
    """Per metric and system, per-query values on one split: full human labels, the soft judge's
    prediction and its predicted variance (systems and pairs), the budget-aware uncertainty, items per query."""

    human: dict
    soft: dict
    model_var: dict
    uncertainty: np.ndarray
    n_labels: np.ndarray


def simulation_inputs(ds, queries: list[str], qrels, grade_probs, runs: dict, systems: list[str], samples: int,
                      seed: int) -> SimulationInputs:
    """The arrays ``simulate`` needs, from the human qrels and the soft judge's grade probabilities."""
    human = {m: [metric_table(qrels, runs[s], m, queries) for s in systems] for m in METRICS}
    soft: dict = {}
    model_var: dict = {}
    order_draws: dict = {}
    for m in METRICS:
        draws = posterior_samples(grade_probs, runs, m, queries, samples=samples, seed=seed)
        soft[m] = [draws[s].mean(axis=1) for s in systems]
        model_var[m] = {i: draws[s].var(axis=1) for i, s in enumerate(systems)}
        model_var[m].update({(i, j): (draws[systems[i]] - draws[systems[j]]).var(axis=1)
                             for i, j in itertools.combinations(range(len(systems)), 2)})
        if m == ORDER_METRIC:
            order_draws = draws
    if not order_draws:
        order_draws = posterior_samples(grade_probs, runs, ORDER_METRIC, queries, samples=samples, seed=seed)
    return SimulationInputs(human, soft, model_var, metric_uncertainty(order_draws),
                            np.array([len(ds.candidates[q]) for q in queries]))


def scaled(inputs: SimulationInputs, kappa: Mapping[str, float]) -> SimulationInputs:
    """``inputs`` with the judge's predicted variances multiplied by κ per metric."""
    mv = {m: {key: v * kappa[m] for key, v in inputs.model_var[m].items()} for m in METRICS}
    return SimulationInputs(inputs.human, inputs.soft, mv, inputs.uncertainty, inputs.n_labels)


def dev_variance_scale(inputs: SimulationInputs, systems: list[str]) -> dict[str, float]:
    """κ per metric (``core.analysis.ppi.variance_scale``) over every system and pairwise difference of a split
    whose judge was cross-fitted (dev): how far the judge under-predicts its own rectifier's variance."""
    pairs = list(itertools.combinations(range(len(systems)), 2))
    out = {}
    for m in METRICS:
        h, f = inputs.human[m], inputs.soft[m]
        ys = [h[i] for i in range(len(systems))] + [h[i] - h[j] for i, j in pairs]
        fs = [f[i] for i in range(len(systems))] + [f[i] - f[j] for i, j in pairs]
        vs = [inputs.model_var[m][i] for i in range(len(systems))] + [inputs.model_var[m][p] for p in pairs]
        out[m] = variance_scale(ys, fs, vs)
    return out


def _d0_key(d0: float) -> str:
    """d₀ as a report key ("inf" for the hard floor)."""
    return "inf" if np.isinf(d0) else f"{d0:g}"


def d0_value(d0: float) -> float | str:
    """d₀ as a JSON value (JSON has no infinity: "inf")."""
    return "inf" if np.isinf(d0) else d0


def choose_prior_df(inputs: SimulationInputs, systems: list[str], seed: int, draws: int = DEV_DRAWS) -> dict:
    """The smallest d₀ of ``PRIOR_DF_GRID`` whose coverage reaches ``DEV_BAR`` in every cell (systems and
    differences, both designs, every budget) of the dev simulation; every candidate's worst cell recorded."""
    worst = {}
    for d0 in PRIOR_DF_GRID:
        res = simulate(inputs.human, inputs.soft, inputs.model_var, inputs.uncertainty, BUDGETS, draws, seed,
                       systems, inputs.n_labels, prior_df=d0)
        cells = [r[k] for ds_ in res.values() for per in ds_.values() for r in per.values()
                 for k in ("coverage_ppi", "diff_coverage_ppi")]
        widths = [r["width_ppi"] for ds_ in res.values() for per in ds_.values() for r in per.values()]
        worst[_d0_key(d0)] = {"min_coverage": float(min(cells)),
                                                        "mean_width": float(np.mean(widths))}
    passing = [d0 for d0 in PRIOR_DF_GRID if worst[_d0_key(d0)]["min_coverage"] >= DEV_BAR]
    chosen = passing[0] if passing else float("inf")
    return {"rule": f"smallest d0 of {[str(d) for d in PRIOR_DF_GRID]} whose dev coverage is >= {DEV_BAR} in every "
                    f"cell (systems and differences, both designs, every budget; {draws} draws; judge cross-fitted "
                    "in 5 folds by question)",
            "candidates": worst, "chosen": d0_value(chosen), "core_prior_df": d0_value(PRIOR_DF),
            "matches_core": bool(chosen == PRIOR_DF)}
