"""CLI verbs of the judgment store and error analysis (registered by ``core.cli.main`` via ``add_commands``).

- ``judgments export-qrels --dataset D [--annotator A ...] [--resolve majority|latest] [--out FILE]``
- ``judgments stats [--dataset D] [--json]``
- ``judgments agreement --dataset D [--annotator A ...] [--json]``
- ``judgments import-run FILE --dataset D [--name N]``
- ``judgments delete --annotator A --as OWNER [--dataset D] [--confirm A]``: without ``--confirm`` it only
  says what would go (exit 2, nothing deleted); with it, deletes those labels and writes the audit row
- ``compare --dataset D [--systems bm25 ...] [--runs FILE ...] [--baseline NAME] [--metrics m,...]
  [--stat-test student|fisher] [--labels dataset|judgments|both] [--json]``

``compare`` calls the same ``core.analysis.error_analysis`` functions as the Error Analysis page, so the numbers
are identical. ``--db URL`` (or ``QRS_DB_URL``) picks the database (``sqlite:///PATH`` or
``postgresql://USER@HOST:PORT/DB``); these verbs only read it, so a database that does not exist
is an error (exit code 2), never created.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tabulate import tabulate

from core.registry import default_first_stage


def _store(args: argparse.Namespace):
    """The database of ``--db`` for reading: a missing or empty database is an error, never created."""
    from core.judging.judgments import JudgmentStore

    return JudgmentStore(args.db, create=False)


def _common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--db", help="SQLAlchemy URL of the judgments database (default: QRS_DB_URL or var/judgments.sqlite)")
    return p


def cmd_export_qrels(args: argparse.Namespace) -> int:
    """Write the user judgments of a dataset as TREC qrels."""
    from core.data.trec import qrels_text

    store = _store(args)
    qrels = store.qrels(args.dataset, args.annotator, args.resolve)
    if args.out:
        path = store.export_qrels(args.out, args.dataset, args.annotator, args.resolve)
        print(f"{sum(len(v) for v in qrels.values()):,} labels on {len(qrels):,} queries written to {path}")
    else:
        sys.stdout.write(qrels_text(qrels))
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Counts of judgments per annotator and label."""
    from dataclasses import asdict

    stats = _store(args).stats(args.dataset)
    if args.json:
        print(json.dumps(asdict(stats), indent=1, sort_keys=True))
        return 0
    print(tabulate([("judgments", stats.judgments), ("queries", stats.queries), ("documents", stats.documents),
                    ("history entries", stats.history)], headers=["what", "count"]))
    print(tabulate(sorted(stats.annotators.items()), headers=["annotator", "labels"]))
    print(tabulate(sorted(stats.label_counts.items()), headers=["label", "count"]))
    return 0


def cmd_agreement(args: argparse.Namespace) -> int:
    """Cohen's (two annotators) or Fleiss' (three or more) kappa and the disagreements."""
    from dataclasses import asdict

    from core.judging.agreement import agreement

    store = _store(args)
    res = agreement(store.judgments(args.dataset), args.annotator, store.max_label)
    if args.json:
        print(json.dumps(asdict(res), indent=1, ensure_ascii=False))
        return 0
    kappa = "n/a (needs two annotators with shared items)" if res.kappa is None else f"{res.kappa:.4f}"
    print(f"{res.method} kappa over {res.items} shared items, annotators {', '.join(res.annotators)}: {kappa}")
    if res.disagreements:
        print(tabulate([{k: v for k, v in d.items() if k != "dataset"} for d in res.disagreements], headers="keys"))
    return 0


def cmd_import_run(args: argparse.Namespace) -> int:
    """Keep a TREC run of an outside system so the page and ``compare`` can use it by name."""
    from core.data.datasets import load_dataset
    from core.analysis.compared_runs import import_run

    name, path = import_run(args.path, load_dataset(args.dataset), args.name)
    print(f"imported run {name!r} -> {path}")
    return 0


def compare_from_args(args: argparse.Namespace):
    """The ``Analysis`` behind ``compare`` (also used by tests)."""
    from core.data.datasets import load_dataset
    from core.analysis.compared_runs import imported_runs, load_run_file, system_runs
    from core.analysis.error_analysis import ANALYSIS_METRICS, analyze
    from core.analysis.label_sources import label_set
    from core.judging.judgments import JudgmentStore

    ds = load_dataset(args.dataset)
    store = JudgmentStore(args.db, create=False) if args.labels != "dataset" else None
    labels = label_set(ds, store, args.labels, args.split, args.annotator)
    from core.serving.runner import loader_for  # a missing BM25 index is built first (seconds), with a notice

    runs = system_runs(args.systems or [], ds, labels.queries, k=args.k, first_stage=args.first_stage, depth=args.depth,
                       loader=loader_for(ds, notice=lambda m: print(m, file=sys.stderr)))
    stored = imported_runs(ds.name)
    for item in args.runs or []:
        runs.append(load_run_file(stored[item], item) if item in stored else load_run_file(item))
    metrics = args.metrics.split(",") if args.metrics else list(ANALYSIS_METRICS)
    return analyze(labels, runs, args.baseline, metrics, args.stat_test)


def cmd_compare(args: argparse.Namespace) -> int:
    """Metrics table with significance tests (Holm-corrected) against a baseline."""
    res = compare_from_args(args)
    if args.json:
        print(json.dumps(res.to_dict(), indent=1))
        return 0
    print(f"{res.queries:,} queries, labels: {res.label_source}; baseline {res.baseline}; "
          f"{res.stat_test} test, Holm-corrected over {len(res.systems) - 1} system(s); ties: {res.tie_rule}")
    print(tabulate(res.table(), headers="keys", floatfmt=".4f", missingval="-"))
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete an annotator's labels (owners), after the typed confirmation; the audit keeps who and what."""
    from functools import partial

    from core.cli.console import confirmed_deletion
    from core.judging.database import JudgmentError
    from core.judging.deletion import delete_labels, plan_labels

    store = _store(args)
    plan = plan_labels(store, args.annotator, args.dataset)
    return confirmed_deletion(plan, args.confirm, partial(delete_labels, store, args.actor, args.annotator, args.dataset),
                              JudgmentError, f"{plan.target!r} to delete them")


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``judgments ...`` and ``compare`` on the main CLI's subparsers."""
    from core.cli.console import positive_int
    from core.data.datasets import DEFAULT_DATASET
    from core.analysis import LABEL_SOURCES

    j = sub.add_parser("judgments", help="relevance judgments: export-qrels, stats, agreement, delete, import-run")
    jsub = j.add_subparsers(dest="action", required=True)

    p = _common(jsub.add_parser("export-qrels", help="user judgments as TREC qrels"))
    p.add_argument("--dataset", default=DEFAULT_DATASET)
    p.add_argument("--annotator", action="append", help="only these annotators (repeatable)")
    p.add_argument("--resolve", choices=["majority", "latest"], default="majority",
                   help="several annotators on one pair: majority vote (ties -> latest) or latest")
    p.add_argument("--out", type=Path, help="file to write (default: stdout)")
    p.set_defaults(func=cmd_export_qrels)

    p = _common(jsub.add_parser("stats", help="judgment counts"))
    p.add_argument("--dataset", help="one dataset (default: all)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_stats)

    p = _common(jsub.add_parser("agreement", help="Cohen's / Fleiss' kappa and disagreements"))
    p.add_argument("--dataset", default=DEFAULT_DATASET)
    p.add_argument("--annotator", action="append", help="annotators to compare (default: all)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_agreement)

    p = _common(jsub.add_parser("delete", help="delete an annotator's labels (owners; a typed confirmation, audited)"))
    p.add_argument("--annotator", required=True, help="whose labels go")
    p.add_argument("--dataset", help="only this dataset's labels (default: every dataset)")
    p.add_argument("--as", dest="actor", required=True, help="the acting owner (of the configuration)")
    p.add_argument("--confirm", help="the annotator's name again: without it nothing is deleted")
    p.set_defaults(func=cmd_delete)

    p = jsub.add_parser("import-run", help="import a TREC run file of an outside system")
    p.add_argument("path", type=Path)
    p.add_argument("--dataset", default=DEFAULT_DATASET)
    p.add_argument("--name", help="run name (default: the run's tag)")
    p.set_defaults(func=cmd_import_run)

    p = _common(sub.add_parser("compare", help="compare systems and TREC runs with significance tests"))
    p.add_argument("--dataset", default=DEFAULT_DATASET)
    p.add_argument("--systems", nargs="*", help="built-in systems by name (SYSTEM or SYSTEM@VARIANT, e.g. fusion@bm25+minilm:rrf); stored runs are used where fresh")
    p.add_argument("--runs", nargs="*", help="TREC run files, or names of imported runs")
    p.add_argument("--baseline", help="system/run name (default: the first)")
    p.add_argument("--metrics", help="comma-separated ranx metrics")
    p.add_argument("--stat-test", choices=["student", "fisher"], default="student",
                   help="paired t-test (student) or randomization test (fisher)")
    p.add_argument("--labels", choices=LABEL_SOURCES, default="dataset",
                   help="dataset qrels, user judgments, or both (user judgments win)")
    p.add_argument("--annotator", action="append", help="only these annotators' judgments")
    p.add_argument("--split", default="all")
    p.add_argument("--k", type=positive_int, default=100, help="retrieval depth of built-in systems")
    p.add_argument("--first-stage", default=default_first_stage(), help="candidates for rerankers")
    p.add_argument("--depth", type=positive_int, default=20, help="first-stage depth for rerankers")
    p.add_argument("--json", action="store_true", help="full-precision JSON")
    p.set_defaults(func=cmd_compare)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (``python -m core.cli.judgments``) with the same verbs."""
    from core.cli.console import OneLineParser
    from core.cli.main import dispatch

    parser = OneLineParser(prog="python -m core.cli.judgments")
    add_commands(parser.add_subparsers(dest="verb", required=True))

    return dispatch(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
