"""The verbs that rank: ``eval`` (a system or a TREC run file under the evaluation contract) and ``search`` (one
query), both through the one runner (registered by ``core.cli.main``)."""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from tabulate import tabulate

from core.cli.console import TqdmProgress, backend_options, parse_options, positive_int, with_dataset
from core.data.datasets import load_dataset
from core.errors import StudioError
from core.registry import default_first_stage


CONVENTION_MEANING = {"answerable": "the mean over queries with a relevant item; the others are left out",
                      "all": "the mean over every query; one without a relevant item scores 0"}


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
                                options=tuple({**parse_options(args.option), **backend_options(args)}.items()))
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
    if args.headline:  # the convention a benchmark's official figure uses (both are printed either way)
        result = dataclasses.replace(result, headline=args.headline)
    note = " (each query removed from its own ranking)" if ds.ignore_identical_ids else ""
    form = f"; query form: {args.query_form}" if ds.tokenized and not args.run else ""
    print(f"{name} on {ds.name} [{args.split}: {len(qrels):,} queries{form}]{note}")
    other = "all" if result.headline == "answerable" else "answerable"
    rows = [[short(m), result.headline_values[m], getattr(result, other)[m]] for m in result.metrics]
    print(tabulate(rows, headers=["metric", f"{result.headline} (headline)", other], floatfmt=".4f"))
    print(result.describe())
    print(f"headline convention: {result.headline} ({CONVENTION_MEANING[result.headline]}; "
          f"{'chosen with --headline' if args.headline else 'the default for this kind of dataset; --headline all|answerable'})")
    from core.registry import display_name

    if not args.run and display_name(name).lower() != name.lower():
        print(f"what runs: {name} = {display_name(name)}")
    from core.system_notes import system_notes

    for note in (system_notes(ds, name) if not args.run else ()):
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


def cmd_search(args: argparse.Namespace) -> int:
    from core.registry import parse_name
    from core.serving.runner import SystemChoice, loader_for, rank_one

    ds = load_dataset(args.dataset)
    run_spec = SystemChoice(str(parse_name(args.system, args.variant)), first_stage=args.first_stage, depth=args.depth,
                            options=tuple({**parse_options(args.option), **backend_options(args)}.items()))
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


def add_commands(sub) -> None:  # noqa: ANN001 - argparse's private subparsers action
    """Register eval and search."""
    p = with_dataset(sub.add_parser("eval", help="evaluate a system (or a TREC run file) with ranx"))
    p.add_argument("--system")
    p.add_argument("--variant", help="a variant of the system; fusion: PART+PART:METHOD, e.g. bm25+minilm:rrf (core/retrieval/fusion.py)")
    p.add_argument("--run", help="evaluate this TREC run file instead of a system")
    p.add_argument("--split", default="all", help="query split: all, train, dev, test, paper-004 (QQP: the first question of each positive pair, tree-search-bert-guo.md §4.1); test, clean-test... (TrecQA)")
    p.add_argument("--k", type=positive_int, default=100, help="retrieval depth")
    p.add_argument("--metrics", help="comma-separated ranx metrics (H@k, P@k accepted)")
    p.add_argument("--first-stage", default=default_first_stage(), help="candidates for rerankers")
    p.add_argument("--depth", type=positive_int, default=20, help="first-stage depth for rerankers")
    p.add_argument("--option", action="append", help="system option key=value (e.g. nprobe=20, index=flat)")
    p.add_argument("--run-out", type=Path, help="write the run as a TREC file")
    p.add_argument("--backend", choices=["faiss", "milvus"], default=None,
                   help="serve the first stage from Milvus (QRS_MILVUS_URI; default: QRS_BACKEND or faiss)")
    p.add_argument("--milvus-index", choices=["flat", "hnsw"], default="flat", help="Milvus index (flat = exact)")
    p.add_argument("--ties", choices=["trec_eval", "run_order"], default="trec_eval",
                   help="score ties: trec_eval's order (score, then doc id descending) or the run's own order")
    p.add_argument("--headline", choices=["answerable", "all"], default=None,
                   help="which convention heads the table: answerable-only (candidate lists' default) or every query "
                        "(collections' default; what a benchmark that counts every question reports)")
    p.add_argument("--query-form", choices=["tokenized", "typed"], default="tokenized",
                   help="dataset queries as stored (tokenized) or as people type them (typed: the display form)")
    p.set_defaults(func=cmd_eval)

    p = with_dataset(sub.add_parser("search", help="search one query (on candidate lists: a query id)"))
    p.add_argument("--system", default=default_first_stage())
    p.add_argument("--variant", help="a variant of the system; fusion: PART+PART:METHOD, e.g. bm25+minilm:rrf (core/retrieval/fusion.py)")
    p.add_argument("-k", "--k", type=positive_int, default=10)
    p.add_argument("--first-stage", default=default_first_stage())
    p.add_argument("--depth", type=positive_int, default=20)
    p.add_argument("--option", action="append")

    p.add_argument("--backend", choices=["faiss", "milvus"], default=None,
                   help="serve the first stage from Milvus (QRS_MILVUS_URI; default: QRS_BACKEND or faiss)")
    p.add_argument("--milvus-index", choices=["flat", "hnsw"], default="flat", help="Milvus index (flat = exact)")
    p.add_argument("query")
    p.set_defaults(func=cmd_search)
