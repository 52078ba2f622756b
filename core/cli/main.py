"""``python -m core``: one function per verb (argparse); progress bars with tqdm.

Verbs: datasets, data, systems, build, train, eval, search (+ judgments, compare, casestudy when
their modules are present). Every error a user can cause prints one clear line and exits 2.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

from tabulate import tabulate
from tqdm import tqdm

from core.data.datasets import DEFAULT_DATASET, list_datasets, load_dataset
from core.errors import StudioError, describe_error
from core.registry import default_first_stage


class TqdmProgress:
    """A ``progress(fraction, message)`` callback drawing one tqdm bar."""

    def __init__(self, desc: str, lazy: bool = False) -> None:
        """``lazy``: draw the bar only when something reports progress (a load that finds everything built
        prints nothing)."""
        self.desc, self.bar, self.done = desc, None, 0
        if not lazy:
            self._open()

    def _open(self) -> None:
        self.bar = tqdm(total=1000, desc=self.desc, unit="‰", leave=True, dynamic_ncols=True,
                        bar_format="{l_bar}{bar}| {elapsed}<{remaining} {postfix}")

    def __call__(self, fraction: float, message: str) -> None:
        if self.bar is None:
            self._open()
        target = int(max(0.0, min(1.0, fraction)) * 1000)
        if target > self.done:
            self.bar.update(target - self.done)
            self.done = target
        self.bar.set_postfix_str(message[-60:], refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _options(pairs: list[str]) -> dict:
    out = {}
    for item in pairs or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise StudioError(f"--option takes key=value, got {item!r}")
        try:
            out[key] = int(value)
        except ValueError:
            try:
                out[key] = float(value)
            except ValueError:
                out[key] = value
    return out


# ----------------------------------------------------------------------------- verbs
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


def _notice(message: str) -> None:
    print(message, file=sys.stderr)


def _loading(ds, run_spec):  # noqa: ANN001, ANN202
    """The CLI's loader of ``ds`` with ``run_spec`` loaded now: whatever first use builds or encodes (a zero-shot
    system's collection vectors, a cheap index) draws a bar with its count and time left; ranking after this
    gets that loaded system back (other names, a reranker's first stage, load as usual)."""
    from core.serving.runner import loader_for

    bar = TqdmProgress(f"load {run_spec.name}", lazy=True)
    try:
        first = loader_for(ds, notice=_notice, progress=bar)(run_spec.name, run_spec.variant, run_spec.options)
    finally:
        bar.close()
    others = loader_for(ds, notice=_notice)
    key = (run_spec.name, run_spec.variant, tuple(run_spec.options))

    def load(name, variant=None, options=()):  # noqa: ANN001, ANN202
        return first if (name, variant, tuple(options)) == key else others(name, variant, options)

    return load


def cmd_eval(args: argparse.Namespace) -> int:
    from core.evaluation import DEFAULT_METRICS, check_metrics, read_trec_run, short, write_trec_run
    from core.evaluation_contract import evaluate_contract
    from core.registry import parse_name
    from core.serving.runner import SystemChoice, loader_for, rank_many

    ds = load_dataset(args.dataset)
    qrels = ds.split_qrels(args.split)
    queries = ds.in_form({q: ds.queries[q] for q in qrels}, args.query_form)
    metrics = check_metrics(args.metrics.split(",")) if args.metrics else list(DEFAULT_METRICS)
    if args.run:
        run = read_trec_run(args.run)
        name = run.name
        rankings = None
    else:
        if not args.system:
            raise StudioError("say --system NAME or --run FILE")
        parsed = parse_name(args.system, args.variant)
        run_spec = SystemChoice(str(parsed), first_stage=args.first_stage, depth=args.depth,
                                options=tuple({**_options(args.option), **_backend(args)}.items()))
        load = _loading(ds, run_spec)  # load (a first-use build or encoding with its bar) before the clock starts
        bar = TqdmProgress(f"eval {parsed}")
        start = time.perf_counter()
        try:
            rankings = rank_many(run_spec, ds, queries, k=args.k, progress=bar, load=load)
        finally:
            bar.close()
        seconds = time.perf_counter() - start
        name = str(parsed)
        run = rankings
        print(f"{len(queries):,} queries in {seconds:.1f}s ({1000 * seconds / max(1, len(queries)):.2f} ms/query)")
    _check_evaluable(qrels, rankings, args)
    result = evaluate_contract(qrels, run, metrics, queries=list(qrels), ties=args.ties, candidates=bool(ds.candidates))
    note = " (each query removed from its own ranking)" if ds.ignore_identical_ids else ""
    form = f"; query form: {args.query_form}" if ds.tokenized and not args.run else ""
    print(f"{name} on {ds.name} [{args.split}: {len(qrels):,} queries{form}]{note}")
    other = "all" if result.headline == "answerable" else "answerable"
    rows = [[short(m), result.headline_values[m], getattr(result, other)[m]] for m in result.metrics]
    print(tabulate(rows, headers=["metric", f"{result.headline} (headline)", other], floatfmt=".4f"))
    print(result.describe())
    from core.registry import contamination_note, deviation_note, display_name

    if not args.run and display_name(name).lower() != name.lower():
        print(f"what runs: {name} = {display_name(name)}")
    from core.analysis.held_out import held_out_note

    notes = (contamination_note(name, ds.name), deviation_note(name), held_out_note(ds, name)) if not args.run else ()
    for note in filter(None, notes):
        print(f"note: {note}")
    if args.run_out and rankings is not None:
        print(f"run written to {write_trec_run(rankings, args.run_out, name)}")
    return 0


def _check_evaluable(qrels: dict, rankings: dict | None, args: argparse.Namespace) -> None:
    """Refuse, in one line, what ranx cannot score: no labelled queries, or only empty rankings.

    ``rankings`` is None for a run file: ``read_trec_run`` already refuses one without run lines."""
    if not qrels:
        raise StudioError(f"split {args.split!r} of {args.dataset} has no queries with relevance labels; nothing to evaluate")
    if rankings is not None and not any(len(r.doc_ids) for r in rankings.values()):
        raise StudioError(f"every ranking is empty ({len(rankings):,} queries, none retrieved anything); nothing to "
                          "evaluate - check the system, --k and the dataset")


def _positive_int(value: str) -> int:
    """argparse type: an integer >= 1 (``-k -3`` and ``--k 0`` are refused)."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as one ``error:`` line (exit code 2), like every other error."""

    def error(self, message: str):  # noqa: ANN201 - argparse's signature
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def _backend(args: argparse.Namespace) -> dict:
    """``--backend milvus [--milvus-index hnsw]`` as loader options (nothing for the default faiss)."""
    if not args.backend or args.backend == "faiss":
        return {}
    return {"backend": args.backend, "milvus_index": args.milvus_index}


def cmd_search(args: argparse.Namespace) -> int:
    from core.registry import parse_name
    from core.serving.runner import SystemChoice, loader_for, rank_one

    ds = load_dataset(args.dataset)
    run_spec = SystemChoice(str(parse_name(args.system, args.variant)), first_stage=args.first_stage, depth=args.depth,
                            options=tuple({**_options(args.option), **_backend(args)}.items()))
    qid = args.query if args.query in ds.queries else None  # a dataset query by id, or typed text
    text = ds.queries[qid] if qid else args.query
    if not ds.candidates:
        from core.retrieval.base import validate_query

        text = validate_query(text)  # bad input gets its one line before any model loads
    load = _loading(ds, run_spec)
    ranking = rank_one(run_spec, ds, text, args.k, query_id=qid, load=load)
    rows = [(i + 1, d, f"{s:.4f}", ds.display(d)[:100]) for i, (d, s) in enumerate(zip(ranking.doc_ids, ranking.scores))]
    print(tabulate(rows, headers=["rank", "id", "score", "text"]))
    print(f"{1000 * ranking.seconds:.1f} ms {ranking.stats or ''}")
    served = getattr(load(run_spec.name, None, run_spec.options), "describe", None)
    if callable(served) and args.backend == "milvus":
        print(f"served by Milvus: {served()}")
    return 0


# ----------------------------------------------------------------------------- parser
EXTENSIONS = ("core.cli.judgments", "core.cli.casestudy", "core.cli.campaign", "core.cli.explain", "core.cli.judge")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m core", description="Question Retrieval Studio command line")
    sub = parser.add_subparsers(dest="verb", required=True)

    def with_dataset(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--dataset", default=DEFAULT_DATASET, help=f"dataset name (default {DEFAULT_DATASET})")
        return p

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

    p = with_dataset(sub.add_parser("eval", help="evaluate a system (or a TREC run file) with ranx"))
    p.add_argument("--system")
    p.add_argument("--variant", help="a variant of the system; fusion: PART+PART:METHOD, e.g. bm25+minilm:rrf (core/retrieval/fusion.py)")
    p.add_argument("--run", help="evaluate this TREC run file instead of a system")
    p.add_argument("--split", default="all", help="query split: all, train, dev, test, paper-004 (QQP: the first question of each positive pair, tree-search-bert-guo.md §4.1); test, clean-test... (TrecQA)")
    p.add_argument("--k", type=_positive_int, default=100, help="retrieval depth")
    p.add_argument("--metrics", help="comma-separated ranx metrics (H@k, P@k accepted)")
    p.add_argument("--first-stage", default=default_first_stage(), help="candidates for rerankers")
    p.add_argument("--depth", type=_positive_int, default=20, help="first-stage depth for rerankers")
    p.add_argument("--option", action="append", help="system option key=value (e.g. nprobe=20, index=flat)")
    p.add_argument("--run-out", type=Path, help="write the run as a TREC file")
    p.add_argument("--backend", choices=["faiss", "milvus"], default=None,
                   help="serve the first stage from Milvus (QRS_MILVUS_URI; default: QRS_BACKEND or faiss)")
    p.add_argument("--milvus-index", choices=["flat", "hnsw"], default="flat", help="Milvus index (flat = exact)")
    p.add_argument("--ties", choices=["trec_eval", "run_order"], default="trec_eval",
                   help="score ties: trec_eval's order (score, then doc id descending) or the run's own order")
    p.add_argument("--query-form", choices=["tokenized", "typed"], default="tokenized",
                   help="dataset queries as stored (tokenized) or as people type them (typed: the display form)")
    p.set_defaults(func=cmd_eval)

    p = with_dataset(sub.add_parser("search", help="search one query (on candidate lists: a query id)"))
    p.add_argument("--system", default=default_first_stage())
    p.add_argument("--variant", help="a variant of the system; fusion: PART+PART:METHOD, e.g. bm25+minilm:rrf (core/retrieval/fusion.py)")
    p.add_argument("-k", "--k", type=_positive_int, default=10)
    p.add_argument("--first-stage", default=default_first_stage())
    p.add_argument("--depth", type=_positive_int, default=20)
    p.add_argument("--option", action="append")

    p.add_argument("--backend", choices=["faiss", "milvus"], default=None,
                   help="serve the first stage from Milvus (QRS_MILVUS_URI; default: QRS_BACKEND or faiss)")
    p.add_argument("--milvus-index", choices=["flat", "hnsw"], default="flat", help="Milvus index (flat = exact)")
    p.add_argument("query")
    p.set_defaults(func=cmd_search)

    for module in EXTENSIONS:
        try:
            importlib.import_module(module).add_commands(sub)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
    return parser


def main(argv: list[str] | None = None) -> int:
    return dispatch(build_parser().parse_args(argv))


def dispatch(args: argparse.Namespace) -> int:
    """Run a parsed verb: a ``StudioError`` or a known library error (SQLAlchemy, sqlite3, JSON, ranx,
    bm25s: ``core.errors.describe_error``) becomes one ``error:`` line and exit code 2."""
    return guarded(args.func, args)


def guarded(fn, *args) -> int:  # noqa: ANN001
    """``fn(*args)`` as a command runs it (every verb, every ``python -m bench.X``): its exit code (0 for None);
    a ``StudioError`` or a known library error is one ``error:`` line and exit code 2, Ctrl-C is 130."""
    try:
        code = fn(*args)
        return code if isinstance(code, int) else 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - anything unknown is re-raised with its traceback
        message = describe_error(exc)
        if message is None:
            raise
        print(f"error: {' '.join(message.split())}", file=sys.stderr)
        return 2
