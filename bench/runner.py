"""The one experiment runner: a declared :class:`bench.experiments.Experiment` to one report.

Every ranking comes from ``core.serving.runner.rank_many`` (the loader and runner the app serves with),
every number from ``core.evaluation_contract.evaluate_contract`` (trec_eval's query set and tie order;
both conventions, the dataset kind's headline), every report through ``bench.reporting.write_report``
with its command, commit, scorer and tie rule. Each system is tested against the experiment's baseline
(its first system) on the per-query values of the headline convention: a paired test per measure, Holm's
correction across all the experiment's comparisons. A system that is not built stops the run with the
command that builds it (``--build`` builds it first); nothing is skipped or replaced silently.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.experiments import Experiment, system_entry
from bench.reporting import REPORTS, head_commit, write_report
from core.analysis.significance import holm
from core.evaluation import TIE_RULES
from core.evaluation_contract import evaluate_contract
from core.data.datasets import Dataset, load_dataset
from core.registry import get_spec, parse_name, system_dir
from core.serving.runner import SystemChoice, rank_many

SCORER = "core.evaluation_contract.evaluate_contract"
TIES = "trec_eval"
RANDOMIZATION_PERMUTATIONS = 10_000


def paired_p(control: list[float], treatment: list[float], test: str) -> float:
    """Two-sided p of a paired test over queries: seeded randomization (10,000 sign flips) or Student's t."""
    if test == "student":
        from scipy.stats import ttest_rel

        p = ttest_rel(treatment, control).pvalue
        return float(p) if np.isfinite(p) else 1.0
    from core.analysis.significance import randomization_test

    return float(randomization_test(control, treatment, n_permutations=RANDOMIZATION_PERMUTATIONS))


def choice(entry: str, exp: Experiment, dataset: Dataset) -> SystemChoice:
    """How the runner asks for a system entry: its serving options go to the loader; rerankers on a
    collection carry the experiment's first stage."""
    name, options = system_entry(entry)
    spec = get_spec(parse_name(name).system)
    first = exp.first_stage if spec.kind == "reranker" and not dataset.candidates else None
    return SystemChoice(name, first_stage=first, depth=exp.depth, options=options)


def search_stats(run: dict) -> dict:
    """Mean, 10th and 90th percentile per query of every numeric cost a ranking reports (``Ranking.stats``:
    the tree's ``distance_computations``, a cross-encoder tree's ``pair_scorings``)."""
    values: dict[str, list[float]] = {}
    for ranking in run.values():
        for key, v in (ranking.stats or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                values.setdefault(key, []).append(float(v))
    return {key: {"mean": round(float(np.mean(v)), 2), "p10": float(np.percentile(v, 10)),
                  "p90": float(np.percentile(v, 90)), "queries": len(v)} for key, v in values.items()}


def build_missing(names: list[str], dataset: Dataset, profile: str = "quick") -> None:
    """Build the systems of ``names`` that are not built yet, as one graph on the executor (``core.build.build_all``:
    independent ones side by side, each on its fixed threads). A model trained on another dataset
    (``SYSTEM@TRAINED_ON``) is never built here."""
    from core.build import build_all
    from core.registry import system_module

    missing = []
    for name in names:
        parsed = parse_name(name)
        if not parsed.trained_on and not system_module(parsed.system).is_built(dataset, variant=parsed.variant):
            missing.append(str(parsed))
    if not missing:
        return
    failed = [s for s in build_all(dataset.name, list(dict.fromkeys(missing)), profile=profile, echo=False)
              if s.state == "failed"]
    if failed:
        raise RuntimeError(f"building {failed[0].system} on {dataset.name} failed: {failed[0].error}")


def build_record(name: str, dataset: Dataset) -> dict:
    """What the build saved beside the model (``metrics.json``: dev curve, best epoch, pairs), if anything."""
    import json

    parsed = parse_name(name)
    path = system_dir(parsed.trained_on or dataset.name, parsed.system, parsed.variant) / "metrics.json"
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {k: v for k, v in data.items() if k != "history"} | (
        {"dev_curve_points": len(data["history"])} if isinstance(data.get("history"), list) else {})


def run_experiment(exp: Experiment, dataset: str | None = None, split: str | None = None, build: bool = False,
                   out: str | Path | None = None, command: str | None = None,
                   progress: Callable[[str], None] = lambda m: print(m, file=sys.stderr), profile: str = "quick") -> dict:
    """Run ``exp`` (optionally on another dataset or split: fixtures in tests) and write its report.

    ``profile`` is the ``core.training`` profile of the systems ``build`` trains; the report names it. ``smoke``
    (a few optimiser steps) checks the wiring on fixtures under a private ``QRS_VAR`` (tests): its models measure
    nothing, and a later build sees them as built, so the command line keeps the quick profile."""
    from core.training import check_profile

    check_profile(profile)
    ds = load_dataset(dataset or exp.dataset)
    split = split or exp.split
    queries = ds.split_queries(split)
    qrels = {q: dict(ds.qrels.get(q, {})) for q in queries}
    candidates = bool(ds.candidates)
    systems: dict[str, dict] = {}
    per_query: dict[str, dict[str, dict[str, float]]] = {}
    depth = exp.k or max(exp.depth, 1000 if candidates else 100)
    if build:
        build_missing([system_entry(name)[0] for name in exp.systems], ds, profile)
    for name in exp.systems:
        base, options = system_entry(name)
        start = time.perf_counter()
        run = rank_many(choice(name, exp, ds), ds, queries, k=depth)
        seconds = time.perf_counter() - start
        ev = evaluate_contract(qrels, run, exp.measures, queries=list(queries), ties=TIES, candidates=candidates)
        per_query[name] = ev.per_query
        systems[name] = {"evaluation": ev.to_dict(), "describe": ev.describe(), "rank_seconds": round(seconds, 3),
                         "build": build_record(base, ds), "options": dict(options), "search_stats": search_stats(run)}
        progress(f"{exp.name}: {name}: " + ev.describe().splitlines()[0])
    headline = "answerable" if candidates else "all"
    evaluated = [q for q in queries if headline == "all" or any(v > 0 for v in qrels[q].values())]
    comparisons = [(name, m) for name in exp.systems[1:] for m in exp.measures]
    pvalues = [paired_p([per_query[exp.baseline][m][q] for q in evaluated],
                        [per_query[name][m][q] for q in evaluated], exp.test) for name, m in comparisons]
    adjusted = holm(pvalues) if pvalues else []
    tests = [{"system": name, "baseline": exp.baseline, "measure": m, "n_queries": len(evaluated),
              "mean_difference": round(float(np.mean([per_query[name][m][q] - per_query[exp.baseline][m][q]
                                                      for q in evaluated])), 5) if evaluated else None,
              "p": round(p, 4), "p_holm": round(h, 4)}
             for (name, m), p, h in zip(comparisons, pvalues, adjusted)]
    report = {
        "experiment": exp.name, "title": exp.title, "paper": exp.paper,
        "command": command or f"python -m bench run {exp.name}", "commit": head_commit(),
        "dataset": ds.name, "split": split, "queries": len(queries), "scorer": SCORER, "ties": TIES,
        "tie_rule": TIE_RULES[TIES], "headline_convention": headline, "measures": list(exp.measures),
        "seeds": list(exp.seeds), "build_profile": profile if build else None, "first_stage": exp.first_stage, "depth": exp.depth,
        "ranking_depth": depth,
        "test": {"name": exp.test, "unit": "query (paired, headline convention)", "n": len(evaluated),
                 "correction": f"Holm across the experiment's {len(comparisons)} comparisons",
                 "permutations": RANDOMIZATION_PERMUTATIONS if exp.test == "randomization" else None},
        "systems": systems, "tests": tests,
    }
    write_report(Path(out) if out else REPORTS / exp.report_name, report)
    return report
