"""``python -m core experiment``: a declared experiment on one's own data, with no way to touch the test labels.

Declared once: the systems (any system expression: ``bm25``, ``cross-encoder``, ``cross-encoder@qqp-bimpm``, a run
or model folder added with ``core systems add``, ``fusion@PART+PART:METHOD[:untuned]``), a baseline, and either a
train import and a test import (``--train user/a --test user/b``) or one import with its own split
(``--dataset user/a``). What it does, in order, printing each step as the command that does the same by hand:

1. the test import is marked test (``core.data.final_test``): from then on nothing trains or tunes on it;
2. every system that learns from labels and names no training dataset is trained on the train import's train
   split, its choices (early stopping, a fusion's weights) made on that import's dev split; a fusion's learning
   parts are pinned to the train import (``cnn-rerank`` -> ``cnn-rerank@user/a``);
3. the dev table: every system on the train import's dev split (where a choice would be made);
4. one final evaluation on the test labels (the test import's queries, or the import's test split) under the
   evaluation contract, with a paired randomization test against the baseline, Holm-corrected per metric
   (``core.analysis.significance``); the report is written once to ``var/experiments/<name>/report.json`` and
   a second run of the same experiment is refused (the test labels are read once).
"""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, field

from tabulate import tabulate

from core.cli.console import TqdmProgress
from core.data.datasets import Dataset, load_dataset
from core.errors import StudioError
from core.registry import SystemName, get_spec, learns_from_labels, parse_name, slug, supports, system_module

HEADLINE_METRICS = ("map@100", "mrr@100")


@dataclass
class Step:
    """One preparation step: the command that does it by hand, and what the experiment calls."""

    command: str
    action: str  # "train" (reads the train split, chooses on dev) or "build" (reads no labels)
    system: str
    variant: str | None
    dataset: str


@dataclass
class ExperimentPlan:
    """What a declared experiment runs: systems as built on the train import and as evaluated on the test labels."""

    name: str
    train: str
    test: str
    test_split: str  # "all" for a test import; "test" for one import with its own split
    baseline: str
    declared: list[str]
    on_train: list[str] = field(default_factory=list)  # the same systems, named as they run on the train import
    on_test: list[str] = field(default_factory=list)  # ... and as they run on the test labels
    steps: list[Step] = field(default_factory=list)


def _pin(name: SystemName, train: str) -> str:
    """A learning system that names no training dataset, pinned to the train import (others as they are)."""
    if name.trained_on is None and learns_from_labels(get_spec(name.system), name.variant):
        return str(SystemName(name.system, name.variant, train))
    return str(name)


def _fusion_names(name: SystemName, train: str, two_imports: bool) -> tuple[str, str, bool]:
    """(name on the train import, name on the test labels, chooses on dev) of a composite system."""
    module = system_module(name.system)
    spec = module.parse_variant(name.variant)
    parts = "+".join(_pin(parse_name(p, v), train) for p, v in spec.parts)
    variant = f"{parts}:{spec.method}" + (":untuned" if spec.untuned else "")
    tuned = module.chooses_on_dev(variant)
    on_train = f"{name.system}@{variant}"
    return on_train, (f"{on_train}@{name.trained_on or train}" if tuned and two_imports else on_train), tuned


def plan_experiment(name: str, train: str, test: str | None, systems: list[str], baseline: str) -> ExperimentPlan:
    """The plan of a declared experiment (nothing is run or written); bad input raises one ``StudioError``."""
    if not systems:
        raise StudioError("say which systems: --systems bm25,cnn-rerank,...")
    if baseline not in systems:
        raise StudioError(f"the baseline {baseline!r} is not one of the declared systems ({', '.join(systems)})")
    if test == train:
        raise StudioError(f"--train and --test name the same dataset {train}; for one import with its own split use "
                          "--dataset")
    from core.data.final_test import refuse_if_marked_test

    refuse_if_marked_test(train, "training on it")
    train_ds = load_dataset(train)
    test_ds = load_dataset(test) if test else train_ds
    if not test and "test" not in train_ds.query_splits:
        raise StudioError(f"{train} has no test split; declare a test import with --train and --test")
    plan = ExperimentPlan(name, train, test or train, "all" if test else "test", baseline, list(systems))
    for declared in systems:
        parsed = parse_name(declared)
        spec = get_spec(parsed.system)
        if spec.composite:
            on_train, on_test, learns = _fusion_names(parsed, train, bool(test))
        else:
            learns = parsed.trained_on is None and learns_from_labels(spec, parsed.variant)
            on_train = str(parsed)
            on_test = _pin(parsed, train) if test else on_train
        if not supports(spec, test_ds):
            raise StudioError(f"{declared} cannot rank {test_ds.name} (it applies to {', '.join(spec.datasets)})")
        if spec.composite:  # its learning parts are trained on the train import first
            for part, v in system_module(parsed.system).parse_variant(parse_name(on_train).variant).parts:
                pinned = parse_name(part, v)
                if pinned.trained_on == train and learns_from_labels(get_spec(pinned.system), pinned.variant):
                    _add_step(plan, pinned.system, pinned.variant, train)
        if learns and parsed.trained_on in (None, train):
            _add_step(plan, parsed.system, parse_name(on_train).variant, train)
        plan.on_train.append(on_train)
        plan.on_test.append(on_test)
    return plan


def _add_step(plan: ExperimentPlan, system: str, variant: str | None, train: str) -> None:
    """Train ``system`` (variant) on the train import, once (its train split; its choices on its dev split)."""
    command = f"python -m core train --system {system} --dataset {train}" + (f" --variant={variant}" if variant else "")
    if command not in [s.command for s in plan.steps]:
        plan.steps.append(Step(command, "train", system, variant, train))


def _prepare(plan: ExperimentPlan, profile: str, say) -> None:  # noqa: ANN001
    """Run the plan's steps through the build (status files, trainers' own dev choices), one line each."""
    from core.build import build_system, train_system
    from core.registry import needs_training

    for step in plan.steps:
        say(step.command)
        ds = load_dataset(step.dataset)
        if system_module(step.system).is_built(ds, variant=step.variant):
            say(f"  {step.system} is already built on {step.dataset}")
            continue
        bar = TqdmProgress(f"{step.action} {step.system}")
        try:
            if needs_training(get_spec(step.system), step.variant):
                status = train_system(ds, step.system, variant=step.variant, profile=profile, force=True, progress=bar)
            else:
                status = build_system(ds, step.system, profile=profile, variant=step.variant, force=True, listener=bar)
        finally:
            bar.close()
        if status.state != "ready":
            raise StudioError(f"{step.command} failed: {status.error}")


def _evaluate(ds: Dataset, names: list[str], split: str, metrics: list[str]) -> dict:
    """name -> the contract's evaluation (per-query values kept) of each system on one split of ``ds``."""
    from core.evaluation_contract import evaluate_contract
    from core.serving.runner import SystemChoice, rank_many

    qrels = ds.split_qrels(split)
    if not qrels:
        raise StudioError(f"split {split!r} of {ds.name} has no queries with relevance labels")
    queries = {q: ds.queries[q] for q in qrels}
    out = {}
    for name in names:
        bar = TqdmProgress(f"rank {name} on {ds.name} [{split}]")
        try:
            rankings = rank_many(SystemChoice(name), ds, queries, k=100, progress=bar)
        finally:
            bar.close()
        out[name] = evaluate_contract(qrels, rankings, metrics, queries=list(qrels), candidates=bool(ds.candidates))
    return out


def significance_rows(results: dict, baseline: str, metrics: list[str]) -> list[list]:
    """One row per system: each metric's headline value and, against the baseline, the paired randomization
    test's p-value Holm-corrected over the compared systems (``core.analysis.significance``)."""
    from core.analysis.significance import holm, randomization_test

    others = [n for n in results if n != baseline]
    adjusted = {}
    for m in metrics:
        base = results[baseline].per_query[m]
        raw = {n: randomization_test([base[q] for q in base], [results[n].per_query[m][q] for q in base])
               for n in others}
        adjusted[m] = holm(raw) if raw else {}
    rows = []
    for name, result in results.items():
        row = [name]
        for m in metrics:
            row += [result.headline_values[m], "baseline" if name == baseline else adjusted[m][name]]
        rows.append(row)
    return rows


def run_experiment(plan: ExperimentPlan, metrics: list[str], profile: str = "quick", say=print) -> dict:  # noqa: ANN001
    """Prepare, show dev, evaluate once on the test labels; returns (and writes) the report."""
    from core.data.final_test import mark_test
    from core.paths import artifact_dir

    folder = artifact_dir("experiments", slug(plan.name))
    if (folder / "report.json").is_file():
        raise StudioError(f"experiment {plan.name} was already evaluated on its test labels ({folder / 'report.json'}); "
                          "the test labels are read once: declare a new experiment to change anything")
    if plan.test != plan.train and mark_test(plan.test):
        say(f"{plan.test} is now marked test: nothing trains or tunes on its labels")
    _prepare(plan, profile, say)
    train_ds = load_dataset(plan.train)
    on_dev = [n for n in plan.on_train if supports(get_spec(n), train_ds) and _applies(n, train_ds)]
    dev = _evaluate(train_ds, on_dev, "dev", metrics) if "dev" in train_ds.query_splits else {}
    if dev:
        say(f"dev ({plan.train} [dev], where choices are made):")
        say(tabulate([[n] + [r.headline_values[m] for m in metrics] for n, r in dev.items()],
                     headers=["system", *metrics], floatfmt=".4f"))
    test_ds = load_dataset(plan.test)
    say(f"final evaluation on the test labels ({plan.test} [{plan.test_split}]), once:")
    final = _evaluate(test_ds, plan.on_test, plan.test_split, metrics)
    rows = significance_rows(final, plan.on_test[plan.declared.index(plan.baseline)], metrics)
    headers = ["system"] + [h for m in metrics for h in (m, f"p vs baseline ({m}, Holm)")]
    say(tabulate(rows, headers=headers, floatfmt=".4f"))
    first = next(iter(final.values()))
    say(f"headline convention: {first.headline} (both conventions per system in {folder / 'report.json'})")
    report = {"plan": asdict(plan), "metrics": metrics, "profile": profile,
              "dev": {n: r.to_dict() for n, r in dev.items()}, "test": {n: r.to_dict(per_query=True) for n, r in final.items()},
              "table": {"headers": headers, "rows": rows}}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    say(f"report written to {folder / 'report.json'}")
    return report


def _applies(name: str, ds: Dataset) -> bool:
    """Whether every part of ``name`` applies to ``ds`` (a run ranks its own dataset only)."""
    parsed = parse_name(name)
    if not get_spec(parsed.system).composite:
        return supports(get_spec(parsed.system), ds)
    return all(supports(get_spec(p), ds) for p, _ in system_module(parsed.system).parse_variant(parsed.variant).parts)


def cmd_experiment(args: argparse.Namespace) -> int:
    from core.evaluation import check_metrics

    if bool(args.dataset) == bool(args.train):
        raise StudioError("say --train TRAIN --test TEST (two imports) or --dataset NAME (one import, its own split)")
    if args.train and not args.test:
        raise StudioError("--train needs --test (the import whose labels only the final evaluation reads)")
    metrics = check_metrics(args.metrics.split(",")) if args.metrics else list(HEADLINE_METRICS)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    plan = plan_experiment(args.name, args.train or args.dataset, args.test, systems, args.baseline or systems[0])
    if args.dry_run:
        for step in plan.steps:
            print(step.command)
        for declared, name in zip(plan.declared, plan.on_test):
            print(f"final: {declared} as {name} on {plan.test} [{plan.test_split}]")
        return 0
    run_experiment(plan, metrics, args.profile)
    return 0


def add_commands(sub) -> None:  # noqa: ANN001 - argparse's private subparsers action
    from core.training import PROFILES

    p = sub.add_parser("experiment", help="a declared experiment on your own data: train, choose on dev, "
                                          "evaluate once on the test labels, significance vs a baseline")
    p.add_argument("--name", required=True, help="the experiment's name (its report: var/experiments/NAME)")
    p.add_argument("--train", help="the import whose train split trains and whose dev split chooses")
    p.add_argument("--test", help="the import whose labels only the final evaluation reads (marked test)")
    p.add_argument("--dataset", help="instead of --train/--test: one import and its own train/dev/test split")
    p.add_argument("--systems", required=True, help="comma-separated system expressions, e.g. "
                                                    "bm25,cnn-rerank,cross-encoder@qqp-bimpm,fusion@run+cnn-rerank:rrf")
    p.add_argument("--baseline", help="the system the others are tested against (default: the first)")
    p.add_argument("--metrics", help=f"comma-separated ranx metrics (default {','.join(HEADLINE_METRICS)})")
    p.add_argument("--profile", default="quick", choices=list(PROFILES),
                   help="training profile (smoke: a wiring check that measures nothing)")
    p.add_argument("--dry-run", action="store_true", help="print the plan's commands; run and write nothing")
    p.set_defaults(func=cmd_experiment)
