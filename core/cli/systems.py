"""The verbs about datasets and systems: ``datasets``, ``data stats|import``, ``systems [add|remove]``, ``build``,
``train`` (registered by ``core.cli.main``)."""
from __future__ import annotations

import argparse
import sys
import time

from tabulate import tabulate

from core.cli.console import OneLineParser, TqdmProgress, with_dataset
from core.data.datasets import list_datasets, load_dataset
from core.errors import StudioError


def cmd_datasets(args: argparse.Namespace) -> int:
    rows = [(name, desc) for name, desc in list_datasets().items()]
    print(tabulate(rows, headers=["dataset", "description"]))
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    if args.action == "stats":
        ds = load_dataset(args.dataset)
        print(ds.description)
        print(tabulate(list(ds.stats().items()), headers=["what", "count"], intfmt=","))
        return 0
    from core.data.imports import import_dataset

    name = import_dataset(args.kind, args.path, args.name)
    ds = load_dataset(name)
    print(f"imported {name}: {len(ds.corpus):,} texts, {len(ds.queries):,} queries")
    return 0


def cmd_systems(args: argparse.Namespace) -> int:
    """List every system with its origin (built-in, user, plugin:<distribution>); ``add`` / ``remove`` user systems."""
    if getattr(args, "action", None) == "add":
        return _systems_add(args)
    if getattr(args, "action", None) == "remove":
        from core.user_systems import remove_user_system

        removed = remove_user_system(args.name)
        print(f"removed {removed.name} ({removed.way}: {removed.path}); its built files stay in var/systems")
        return 0
    from core.build import read_status
    from core.transfer import trained_datasets
    from core.registry import display_name, list_systems, needs_training, supports
    from core.user_systems import problems

    ds = load_dataset(args.dataset)
    rows = []
    for spec in list_systems():
        state = read_status(ds, spec).state if supports(spec, ds) else "n/a on this dataset"
        rows.append((spec.name, spec.kind, spec.origin, state, ",".join(spec.variants) or "-", spec.paper))
        if supports(spec, ds):  # a paper's recipe built beside the default, in its own folder
            rows += [(f"{spec.name}@{r.variant}", spec.kind, spec.origin, read_status(ds, spec, r.variant).state, "-",
                      display_name(f"{spec.name}@{r.variant}")) for r in spec.recipes]
        if supports(spec, ds) and needs_training(spec):
            rows += [(f"{spec.name}@{src}", spec.kind, spec.origin, "ready (zero-shot)", "-", f"trained on {src}")
                     for src in trained_datasets(spec.name) if src != ds.name]
    print(tabulate(rows, headers=["system", "kind", "origin", f"status ({ds.name})", "variants", "paper / source"]))
    for line in problems():
        print(f"not loaded: {line}")
    return 0


def _systems_add(args: argparse.Namespace) -> int:
    """``systems add NAME --bi-encoder PATH | --cross-encoder PATH | --run FILE [--dataset D]``: validate, save;
    a bi-encoder given ``--dataset`` is encoded there now (else on first use)."""
    from core.user_systems import WAYS, add_user_system, discard, mark_usable

    way, path = next((w, p) for w, p in ((WAYS[0], args.bi_encoder), (WAYS[1], args.cross_encoder),
                                         (WAYS[2], args.run)) if p)
    encode = way == WAYS[0] and bool(args.dataset)
    system = add_user_system(args.name, way, path, args.dataset or "", state="encoding" if encode else "")
    if encode:  # saved as "encoding" (listed so); usable once the encoding is done, removed if it is not
        from core.build import build_system

        print(f"encoding {system.name} ({system.way}: {system.path}) on {args.dataset}")
        bar = TqdmProgress(f"encode {system.name} on {args.dataset}")
        try:
            status = build_system(load_dataset(args.dataset), system.name, force=True, listener=bar)
        except BaseException:
            discard(system.name)
            raise
        finally:
            bar.close()
        if status.state != "ready":
            discard(system.name)
            raise StudioError(f"encoding {system.name} on {args.dataset} failed: {status.error}; it was not added")
        mark_usable(system.name)
        print(f"added {system.name} ({system.way}: {system.path}), encoded on {args.dataset}")
    else:
        print(f"added {system.name} ({system.way}: {system.path})")
    if way == "bi-encoder" and not encode:
        print(f"{system.name} is encoded on first use (or now: python -m core train --system {system.name} "
              f"--dataset D)")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    from core.build import build_all, start_background_build

    systems = [s for s in (args.systems or "").split(",") if s] or None
    if not systems and not args.all:
        raise StudioError("say which systems: --systems bm25,minilm or --all")
    if args.background:
        started = start_background_build(args.dataset, args.profile, systems)
        print("background build started" if started else "a build is already running for this dataset")
        return 0
    from core.registry import parse_name

    start = time.perf_counter()
    results = build_all(args.dataset, systems, profile=args.profile, force=args.force)
    variants = [parse_name(s).variant for s in systems] if systems else [None] * len(results)
    labels = [r.system + (f"@{v}" if v else "") for r, v in zip(results, variants)]
    print(tabulate([(label, r.state, f"{r.seconds:.1f}" if r.seconds else "-", r.error[:80])
                    for label, r in zip(labels, results)], headers=["system", "state", "seconds", "error"]))
    print(f"total {time.perf_counter() - start:.1f}s")
    for r, variant in zip(results, variants):
        if r.state == "ready":
            _say_below_reference(args.dataset, r.system, variant, r.metrics, held_out=False)
    return 0 if all(r.state in ("ready", "unavailable") for r in results) else 1


def cmd_train(args: argparse.Namespace) -> int:
    from core.build import build_system
    from core.registry import get_spec, needs_training, parse_name, system_module

    ds = load_dataset(args.dataset)
    name = parse_name(args.system, args.variant)
    if name.trained_on and name.trained_on != ds.name:  # a portable model: build its vectors/index here
        from core.transfer import prepare

        bar = TqdmProgress(f"prepare {name} on {ds.name}")
        try:
            info = prepare(str(name), ds, progress=bar)
        finally:
            bar.close()
        print(f"{info['system']} ready on {ds.name} ({info['texts']:,} texts, {info['seconds']:.1f}s)")
        return 0
    args.system, args.variant = name.system, name.variant
    from core.data.final_test import refuse_if_marked_test
    from core.registry import learns_from_labels

    if learns_from_labels(get_spec(args.system), args.variant):
        refuse_if_marked_test(ds.name, f"training {name}")
    bar = TqdmProgress(f"train {args.system}{'@' + args.variant if args.variant else ''}")
    module = system_module(args.system)
    if not args.force and module.is_built(ds, variant=args.variant):
        bar.close()
        print(f"{args.system} is already built for {ds.name}; use --force to retrain")
        return 0
    # Same code path as the background build (status file included), with a tqdm bar on top; trained
    # systems go through core.training_data (labelled pairs + deterministic split of any labelled dataset).
    try:
        if needs_training(get_spec(args.system), args.variant):
            from core.build import train_system
            from core.training_data import training_data

            print(training_data(ds).summary(), file=sys.stderr)
            status = train_system(ds, args.system, variant=args.variant, profile=args.profile, force=True,
                                  progress=bar)
        else:
            status = build_system(ds, args.system, profile=args.profile, variant=args.variant, force=True, listener=bar)
    finally:
        bar.close()
    if status.state != "ready":
        print(status.message, file=sys.stderr)
        raise StudioError(f"training {args.system} failed: {status.error}")
    print(tabulate(sorted((k, v) for k, v in status.metrics.items() if not isinstance(v, (dict, list))),
                   headers=["metric", "value"], floatfmt=".4f"))
    _say_below_reference(ds.name, args.system, args.variant, status.metrics)
    return 0


def _say_below_reference(dataset_name: str, system: str, variant: str | None, metrics: dict | None,
                         held_out: bool = True) -> None:
    """Print one line when a trained model ended below its untrained or zero-shot reference: on its dev
    metric (the trainer's log) and, with ``held_out``, on the held-out queries' ranking (core.analysis.held_out;
    ``build`` prints that one itself)."""
    from core.model_cards import below_reference, training_log

    label = f"{system}{'@' + variant if variant else ''}"
    line = below_reference(training_log(dataset_name, system, variant, metrics))
    if line:
        print(f"{label}: {line}")
    if held_out:
        from core.analysis.held_out import held_out_verdict

        try:
            verdict = held_out_verdict(load_dataset(dataset_name), system, variant, compute=True)
        except StudioError:
            verdict = None
        if verdict is not None:
            print(f"{label}: {verdict.line()}")


def add_commands(sub) -> None:  # noqa: ANN001 - argparse's private subparsers action
    """Register datasets, data, systems, build and train."""
    sub.add_parser("datasets", help="list datasets").set_defaults(func=cmd_datasets)

    data = sub.add_parser("data", help="dataset statistics, or import your own data").add_subparsers(
        dest="action", required=True)
    with_dataset(data.add_parser("stats", help="counts of a dataset")).set_defaults(func=cmd_data)
    p = data.add_parser("import", help="validate and import a BEIR folder, pairs TSV or candidate TSV")
    p.add_argument("--kind", choices=["beir", "pairs", "candidates"], required=True)
    p.add_argument("--name", required=True, help="stored as user/NAME")
    p.add_argument("path", help="file or folder")
    p.set_defaults(func=cmd_data)

    p = with_dataset(sub.add_parser("systems", help="list systems (origin, build status); add or remove your own"))
    p.set_defaults(func=cmd_systems)
    actions = p.add_subparsers(dest="action", required=False, parser_class=OneLineParser)
    a = actions.add_parser("add", help="add your own system: a sentence-transformers folder or a TREC run file")
    a.add_argument("name", help="a new system name (lower-case letters, digits, '-', '_', '.')")
    way = a.add_mutually_exclusive_group(required=True)
    way.add_argument("--bi-encoder", metavar="PATH", help="sentence-transformers model folder: a bi-encoder retriever")
    way.add_argument("--cross-encoder", metavar="PATH", help="sentence-transformers cross-encoder folder: a reranker")
    way.add_argument("--run", metavar="FILE", help="TREC run file: a fixed system of --dataset (its queries only)")
    a.add_argument("--dataset", default="", help="the dataset a run ranks; for a bi-encoder: encode it there now")
    r = actions.add_parser("remove", help="remove one of your own systems")
    r.add_argument("name")

    p = with_dataset(sub.add_parser("build", help="build systems (the app's default build)"))
    p.add_argument("--systems", help="comma-separated system names; SYSTEM@VARIANT builds a variant in its own folder "
                                     "(e.g. densetrans@paper-objective, frm@kw-loss)")
    p.add_argument("--all", action="store_true", help="every default-build system for the dataset")
    p.add_argument("--profile", default="quick", choices=["quick", "full", "paper"])
    p.add_argument("--force", action="store_true", help="rebuild even if built")
    p.add_argument("--background", action="store_true", help="run detached; progress in var/build/")
    p.set_defaults(func=cmd_build)

    p = with_dataset(sub.add_parser("train", help="train/build one system"))
    p.add_argument("--system", required=True)
    p.add_argument("--variant", help="a variant of the system; fusion: PART+PART:METHOD, e.g. bm25+minilm:rrf (core/retrieval/fusion.py)")
    p.add_argument("--profile", default="quick", choices=["quick", "full", "paper"])
    p.add_argument("--force", action="store_true", help="retrain even if a checkpoint exists")
    p.set_defaults(func=cmd_train)
