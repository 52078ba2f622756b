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
import time
from pathlib import Path

import numpy as np

from bench.ppi_cells import (BUDGETS, DEV_DRAWS, LEVEL, METRICS, choose_prior_df, d0_value, dev_variance_scale,
                             kendall_tau, metric_table, scaled, simulate, simulation_inputs)
from bench.reporting import ROOT, head_commit, write_report
from core.analysis.budget import UNIFORM_SHARE
from core.analysis.ppi import ESTIMATOR, PRIOR_DF, SAMPLES
from core.data.datasets import load_dataset
from core.judging.auto_judge import ORDER_METRIC
from core.judging.calibration import choose_grade_model, cross_fitted_probs, fit_thresholds
from core.registry import get_spec
from core.serving.loader import load
from core.serving.runner import SystemChoice, rank_many


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
        "prior_df": d0_value(PRIOR_DF),
        "prior_df_choice": prior_choice if prior_choice is not None else "not rerun (--choose-prior-df)",
        "thresholds": list(thresholds.cuts), "kappa_dev": thresholds.kappa, "kappa_test_items": kappa_test,
        "full_judgments": full, "judge_only_soft": judge_soft, "judge_only_thresholded": judge_hard,
        "tau_judge_only": {m: kendall_tau(np.array([judge_soft[m][s] for s in systems]),
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
