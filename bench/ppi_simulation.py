"""Simulated judging budgets on fully judged data: PPI intervals vs humans only, uniform vs budget-aware.

TrecQA's test questions have every candidate judged: the full human labels give the "true" metric of
every system. A judge (a registered reranker) scores every test candidate; its grade probabilities
P(g | item) and its thresholds are fitted on the dev split's human labels (never on test); P(g | item)
uses the score alone or also its place among the question's candidates, whichever has the lower
cross-validated log loss on dev (``core.judging.calibration.choose_grade_model``). The judge's predicted variance
of each question's metric is scaled by κ measured on dev with the judge cross-fitted
(``core.analysis.ppi.variance_scale``). The PPI prediction is the
soft judge (``core.analysis.ppi``): the expected per-query metric under label draws from P(g | item). For each budget (a share of the test questions whose candidates humans label) and each draw,
the human-labelled questions are sampled uniformly or budget-aware (``core.analysis.budget``: π_q from the
judge's predicted uncertainty of nDCG@10, the campaign's ordering metric, taken in sequential Poisson order
as a campaign's queue takes them), and per system and metric we compute the humans-only interval (same
sample, same design), the judge-only values and the PPI interval, and the same for every pairwise
difference. Reported: coverage of the full-judgment value by the nominal 90 % interval, mean widths,
Kendall τ (scipy) of the system ordering against the full-judgment ordering, and the share of pairs
significantly different under full judgments (paired t-test, p < .05) whose interval of the difference
excludes 0 on the same side.

Per-query metrics come from ranx through ``core.evaluation.per_query`` (the run's own order
breaks ties); a question with no correct candidate scores 0 (the "all" convention).

    python -m bench.ppi_simulation [--systems bm25,glove-mean,minilm-pairs] [--judge minilm-pairs]
"""
from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from bench.reporting import ROOT, head_commit, write_report
from core.analysis.budget import (UNIFORM_SHARE, inclusion_probabilities, metric_uncertainty,
                                  sequential_poisson_sample, uniform_sample)
from core.analysis.ppi import (ESTIMATOR, PRIOR_DF, SAMPLES, human_mean, posterior_samples, ppi_mean,
                               variance_scale)
from core.data.datasets import load_dataset
from core.evaluation import per_query
from core.judging.auto_judge import ORDER_METRIC
from core.judging.calibration import choose_grade_model, cross_fitted_probs, fit_thresholds
from core.registry import get_spec
from core.serving.loader import load
from core.serving.runner import SystemChoice, rank_many

BUDGETS = (0.05, 0.10, 0.25, 0.50)
METRICS = ("precision@5", "map@100", "ndcg@10")
LEVEL = 0.9


def ready_or_one_line(dataset, names: list[str]) -> None:  # noqa: ANN001
    """Refuse, in one line naming the command that builds it, a trained judge or system not built on ``dataset``
    (``MissingArtifactError``), before any simulation starts; untrained ones build on first use."""
    from core.errors import MissingArtifactError
    from core.registry import build_command, get_spec, needs_training, parse_name, system_module

    for name in [n.strip() for n in names if n.strip()]:
        parsed = parse_name(name)  # an unknown name: one line listing the known ones
        spec = get_spec(parsed.system)
        if parsed.trained_on or not needs_training(spec, parsed.variant):
            continue
        if not system_module(parsed.system).is_built(dataset, variant=parsed.variant):
            raise MissingArtifactError(f"{name} on {dataset.name}", build_command(parsed.system, dataset.name,
                                                                                  parsed.variant))


def judge_scores(judge: str, dataset, qids: list[str]) -> dict[str, dict[str, float]]:
    """The judge's score of every candidate of ``qids`` (batched ``score_pairs``), cached under var/."""
    import hashlib
    import json

    from core.paths import var_dir

    key = hashlib.sha256(json.dumps([judge, dataset.name, qids]).encode()).hexdigest()[:16]
    cache = var_dir() / "ppi_simulation" / f"{judge.replace('@', '_')}-{key}.json"
    if cache.exists():
        return json.loads(cache.read_text(encoding="utf-8"))
    scorer = load(judge, dataset)
    pairs = [(q, d) for q in qids for d in dataset.candidates[q]]
    out: dict[str, dict[str, float]] = {q: {} for q in qids}
    for start in range(0, len(pairs), 512):
        chunk = pairs[start:start + 512]
        scores = scorer.score_pairs([dataset.queries[q] for q, _ in chunk], [dataset.corpus[d] for _, d in chunk])
        for (q, d), s in zip(chunk, np.asarray(scores, dtype=float)):
            out[q][d] = float(s)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(out), encoding="utf-8")
    return out


def judge_provenance(judge: str, dataset: str) -> str:
    """One line: which build of the judge scored the items (its saved metrics, ``core.model_cards``)."""
    from core.model_cards import convergence_note, metrics_file, training_log

    system, _, variant = judge.partition("@")
    saved = metrics_file(dataset, system, variant or None)
    log = training_log(dataset, system, variant or None)
    best = ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in saved.items()
                     if k.startswith("best_") and isinstance(v, (int, float)))
    trained = convergence_note(log) if log else (best or "no training record (zero-shot or not built)")
    return (f"{judge} on {dataset} (python -m core build --dataset {dataset} --systems {judge}): {trained}; "
            "its scores are cached under var/ppi_simulation/")


def metric_table(qrels: Mapping[str, Mapping[str, int]], run, metric: str, qids: list[str]) -> np.ndarray:
    """Per-query metric over ``qids`` (0 for a question without a relevant candidate)."""
    values = per_query({q: qrels.get(q, {}) for q in qids if qrels.get(q)}, run, metric)
    return np.array([values.get(q, 0.0) for q in qids])


def _tau(a: np.ndarray, b: np.ndarray) -> float:
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
            a["tau_ppi"].append(_tau(np.array(est_p), full))
            a["tau_human"].append(_tau(np.array(est_h), full))
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


def cross_fitted_grade_probs(ds, queries: list[str], scores, qrels, max_label: int, folds: int = 5) -> dict:
    """P(g | item) for every candidate of ``queries``, each fold's from a model chosen and fitted on the
    other folds (``core.judging.calibration.cross_fitted_probs``), so a dev simulation sees a judge
    calibrated away from its labels."""
    items = [(q, d) for q in queries for d in ds.candidates[q]]
    rows = cross_fitted_probs([scores[q][d] for q, d in items], [int(qrels.get(q, {}).get(d, 0)) for q, d in items],
                              max_label, [q for q, _ in items], folds)
    out: dict = {q: {} for q in queries}
    for (q, d), row in zip(items, rows):
        out[q][d] = row.tolist()
    return out


def _d0_key(d0: float) -> str:
    """d₀ as a report key ("inf" for the hard floor)."""
    return "inf" if np.isinf(d0) else f"{d0:g}"


def _d0_value(d0: float) -> float | str:
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
            "candidates": worst, "chosen": _d0_value(chosen), "core_prior_df": _d0_value(PRIOR_DF),
            "matches_core": bool(chosen == PRIOR_DF)}


def markdown_table(report: dict) -> str:
    """The BENCHMARKS.md table of a report: per budget, design and metric, coverage and mean widths."""
    lines = ["| budget | design | metric | human labels (mean) | coverage PPI | coverage humans | width PPI | "
             "width humans | coverage PPI, differences | width PPI / humans, differences | τ PPI | τ humans | "
             "sig. pairs kept PPI / humans |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for budget, designs in report["results"].items():
        for design, per in designs.items():
            for m, r in per.items():
                kept, kept_h = r.get("significant_pairs_kept"), r.get("significant_pairs_kept_human")
                lines.append(f"| {float(budget):.0%} | {design} | {m} | {r['human_labels_mean']:.0f} | "
                             f"{r['coverage_ppi']:.3f} | {r['coverage_human']:.3f} | "
                             f"{r['width_ppi']:.3f} | {r['width_human']:.3f} | {r['diff_coverage_ppi']:.3f} | "
                             f"{r['diff_width_ppi']:.3f} / {r['diff_width_human']:.3f} | "
                             f"{r['tau_ppi']:.2f} | {r['tau_human']:.2f} | "
                             f"{'-' if kept is None else f'{kept:.2f} / {kept_h:.2f}'} |")
    return "\n".join(lines)


def verdict(report: dict) -> dict:
    """The done-means checks per design, per cell: PPI coverage ≥ .88, and PPI narrower than humans only (per
    system; the intervals of differences that are not narrower are listed beside, with humans-only coverage)."""
    out = {}
    for design in ("uniform", "budget-aware"):
        cells = [(b, m, r) for b, ds in report["results"].items() for m, r in ds.get(design, {}).items()]
        low = [f"{b} {m}: {r['coverage_ppi']:.3f}" for b, m, r in cells if r["coverage_ppi"] < 0.88]
        wider = [f"{b} {m}: {r['width_ppi']:.3f} vs {r['width_human']:.3f}" for b, m, r in cells
                 if r["width_ppi"] >= r["width_human"]]
        wider_diff = [f"{b} {m}: {r['diff_width_ppi']:.3f} vs {r['diff_width_human']:.3f} (humans only cover "
                      f"{r['diff_coverage_human']:.3f})" for b, m, r in cells
                      if r["diff_width_ppi"] >= r["diff_width_human"]]
        out[design] = {"coverage_at_least_0.88": not low, "coverage_below": low,
                       "narrower_than_humans_only": not wider, "not_narrower": wider,
                       "differences_not_narrower": wider_diff}
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the simulation and write bench/reports/ppi_simulation.json."""
    p = argparse.ArgumentParser(prog="python -m bench.ppi_simulation", description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="trecqa")
    p.add_argument("--systems", default="bm25,glove-mean,minilm-pairs")
    p.add_argument("--judge", default="minilm-pairs")
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--samples", type=int, default=SAMPLES, help="soft-judge label draws per question")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--choose-prior-df", action="store_true",
                   help="also simulate on dev (cross-fitted judge) to choose the variance moderation d0 (core's PRIOR_DF)")
    p.add_argument("--dev-draws", type=int, default=DEV_DRAWS, help="draws per cell of the dev simulation")
    p.add_argument("--out", default=str(ROOT / "bench" / "reports" / "ppi_simulation.json"))
    p.add_argument("--table", action="store_true", help="print the BENCHMARKS.md table of the report at --out")
    args = p.parse_args(argv)
    if args.table:
        import json

        print(markdown_table(json.loads(Path(args.out).read_text(encoding="utf-8"))))
        return 0
    from core.executor import executor

    ready_or_one_line(load_dataset(args.dataset), [args.judge, *args.systems.split(",")])  # before Ray starts
    with executor():  # Ray started once for every simulation cell of the command
        return _run(args, argv)


def _run(args: argparse.Namespace, argv: list[str] | None) -> int:
    """The measurement behind :func:`main` (on a running executor)."""
    start = time.perf_counter()
    ds = load_dataset(args.dataset)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    test_q = [q for q in ds.split_queries("test") if q in ds.candidates]
    dev_q = [q for q in ds.split_queries("dev") if q in ds.candidates]
    test_qrels, dev_qrels = ds.split_qrels("test"), ds.split_qrels("dev")
    max_label = max(v for rel in test_qrels.values() for v in rel.values())

    scores_dev = judge_scores(args.judge, ds, dev_q)
    scores_test = judge_scores(args.judge, ds, test_q)
    dev_s = [scores_dev[q][d] for q in dev_q for d in ds.candidates[q]]
    dev_y = [int(dev_qrels.get(q, {}).get(d, 0)) for q in dev_q for d in ds.candidates[q]]
    dev_g = [q for q in dev_q for _ in ds.candidates[q]]
    thresholds = fit_thresholds(dev_s, dev_y, max_label)
    calibration = choose_grade_model(dev_s, dev_y, max_label, dev_g)
    grades = calibration.model
    judge_qrels = {q: dict(zip(ds.candidates[q], thresholds.grade([scores_test[q][d] for d in ds.candidates[q]]).tolist()))
                   for q in test_q}
    grade_probs = {q: dict(zip(ds.candidates[q], grades([scores_test[q][d] for d in ds.candidates[q]],
                                                        [q] * len(ds.candidates[q])).tolist()))
                   for q in test_q}
    item_agree = [(int(test_qrels.get(q, {}).get(d, 0)), judge_qrels[q][d]) for q in test_q for d in ds.candidates[q]]
    from sklearn.metrics import cohen_kappa_score

    kappa_test = float(cohen_kappa_score([a for a, _ in item_agree], [b for _, b in item_agree]))

    runs = {s: rank_many(SystemChoice(s), ds, {q: ds.queries[q] for q in test_q}, k=100) for s in systems}
    test_in = simulation_inputs(ds, test_q, test_qrels, grade_probs, runs, systems, args.samples, args.seed)
    human, soft = test_in.human, test_in.soft
    hard = {m: [metric_table(judge_qrels, runs[s], m, test_q) for s in systems] for m in METRICS}
    n_labels = test_in.n_labels
    dev_runs = {s: rank_many(SystemChoice(s), ds, {q: ds.queries[q] for q in dev_q}, k=100) for s in systems}
    dev_probs = cross_fitted_grade_probs(ds, dev_q, scores_dev, dev_qrels, max_label)
    dev_in = simulation_inputs(ds, dev_q, dev_qrels, dev_probs, dev_runs, systems, args.samples, args.seed)
    kappa = dev_variance_scale(dev_in, systems)
    print("variance scale on dev:", kappa)
    prior_choice = None
    if args.choose_prior_df:
        prior_choice = choose_prior_df(scaled(dev_in, kappa), systems, args.seed, args.dev_draws)
        print("prior_df on dev:", prior_choice)

    full = {m: {s: float(human[m][i].mean()) for i, s in enumerate(systems)} for m in METRICS}
    judge_soft = {m: {s: float(soft[m][i].mean()) for i, s in enumerate(systems)} for m in METRICS}
    judge_hard = {m: {s: float(hard[m][i].mean()) for i, s in enumerate(systems)} for m in METRICS}
    circular = [s for s in systems if get_spec(s.split("@")[0]).minilm_derived
                and get_spec(args.judge.split("@")[0]).minilm_derived]
    results = simulate(human, soft, scaled(test_in, kappa).model_var, test_in.uncertainty, BUDGETS, args.draws, args.seed, systems,
                       n_labels, prior_df=PRIOR_DF)
    report = {
        "command": "python -m bench.ppi_simulation " + " ".join(argv if argv is not None else __import__("sys").argv[1:]),
        "commit": head_commit(), "dataset": args.dataset, "split": "test", "calibration_split": "dev",
        "queries": len(test_q), "items": int(n_labels.sum()), "systems": systems, "judge": args.judge,
        "circularity": circular, "metrics": list(METRICS), "level": LEVEL, "draws": args.draws, "seed": args.seed,
        "estimator": ESTIMATOR, "soft_judge_samples": args.samples,
        "budget_unit": "share of test questions whose candidates humans label (human_labels_mean: the items that means)",
        "budget_aware": f"pi_q proportional to {UNIFORM_SHARE} uniform + {1 - UNIFORM_SHARE} x the judge's predicted sd "
                        f"of {ORDER_METRIC} (variance summed over the systems); sequential Poisson order; Hajek "
                        "estimator, variance moderated by the judge's prediction (d0 = prior_df)",
        "humans_only": "the same sample and design, with a judge that always predicts 0",
        "calibration_features": calibration.features,
        "calibration_log_loss_dev": calibration.log_loss,
        "calibration_rule": "P(g | item) by multinomial logistic regression on dev's human labels: the score alone, "
                            "or with where it stands among its question's candidates (score minus the best, "
                            "log(1 + rank), z-score); the one with the lower 5-fold log loss on dev (folds by "
                            "question) is used",
        "variance_scale_dev": kappa,
        "variance_scale_rule": "the judge's predicted variance of each question's metric is multiplied by kappa = "
                               "max(1, sum r^2 / sum sigma^2) per metric, over every system and pairwise difference "
                               "on dev with the judge cross-fitted (core.analysis.ppi.variance_scale)",
        "prior_df": _d0_value(PRIOR_DF),
        "prior_df_choice": prior_choice if prior_choice is not None else "not rerun (--choose-prior-df)",
        "thresholds": list(thresholds.cuts), "kappa_dev": thresholds.kappa, "kappa_test_items": kappa_test,
        "full_judgments": full, "judge_only_soft": judge_soft, "judge_only_thresholded": judge_hard,
        "tau_judge_only": {m: _tau(np.array([judge_soft[m][s] for s in systems]),
                                   np.array([full[m][s] for s in systems])) for m in METRICS},
        "judge_model": judge_provenance(args.judge, args.dataset),
        "simulation_standard_error": f"a {LEVEL:.0%} coverage over {args.draws} draws has a standard error of "
                                     f"about {np.sqrt(LEVEL * (1 - LEVEL) / args.draws):.3f}",
        "results": results, "seconds": round(time.perf_counter() - start, 1),
    }
    report["verdict"] = verdict(report)
    write_report(args.out, report)
    for budget, designs in results.items():
        for design, per in designs.items():
            for m, r in per.items():
                print(f"{budget} {design:12s} {m:12s} cover ppi {r['coverage_ppi']:.3f} human {r['coverage_human']:.3f} "
                      f"width ppi {r['width_ppi']:.3f} human {r['width_human']:.3f} "
                      f"tau ppi {r['tau_ppi']:.2f} human {r['tau_human']:.2f}")
    print(report["verdict"])
    return 0


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
