"""``python -m core casestudy``: Table-4-style case-study tables for many queries at once.

- ``casestudy --dataset D --queries FILE --systems bm25,cross-encoder [--k 5] [--format md|tex|csv]
  [--out DIR]``: one table per line of FILE (a dataset query id, or else the text of a question);
- ``casestudy --dataset D --disagree SYS_A,SYS_B --top N [--metric ndcg@10] [--split all]``: the N
  queries on which the two systems differ most (per-query metric delta, ranx), shown with
  ``--systems`` (default: the two).

Tables go through the same ``core.analysis.compare.compare`` as the Compare page and the same exporters as its
download buttons (``core.judging.case_tables``). Rerankers rescore ``--first-stage``'s top ``--depth``.
Without ``--out`` the tables are printed.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

from core.errors import StudioError
from core.registry import default_first_stage

FORMATS = {"md": "md", "tex": "tex", "csv": "csv"}


def _split_names(value: str | None) -> list[str]:
    return [s.strip() for s in (value or "").split(",") if s.strip()]


def read_query_file(path: Path) -> list[str]:
    """Non-empty, non-comment lines of a query file."""
    if not path.is_file():
        raise StudioError(f"query file not found: {path}")
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def _slug(text: str, limit: int = 40) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:limit].lower() or "query"


def cmd_casestudy(args: argparse.Namespace) -> int:
    """Write one case-study table per query (see module docstring)."""
    from core.judging.case_tables import case_table, to_csv, to_latex, to_markdown
    from core.judging.casestudy import disagreements
    from core.analysis.compare import SystemChoice, compare
    from core.data.datasets import load_dataset
    from core.analysis.compared_runs import system_runs
    from core.evaluation import check_metrics, short
    from core.registry import get_spec
    from core.serving.loader import load as load_system

    if bool(args.queries) == bool(args.disagree):
        raise StudioError("say either --queries FILE or --disagree SYS_A,SYS_B")
    ds = load_dataset(args.dataset)
    if ds.candidates:
        raise StudioError(f"{ds.name} is a reranking dataset (candidate lists): case studies need first-stage retrieval")
    systems = _split_names(args.systems)
    loaded: dict[tuple, object] = {}

    def load(name: str, variant: str | None, options: tuple) -> object:
        key = (name, variant, tuple(options))
        if key not in loaded:
            loaded[key] = load_system(name, ds, variant=variant, **dict(options))
        return loaded[key]

    picks: list[tuple[str | None, str, str]] = []  # (query id, text, why)
    if args.queries:
        for line in read_query_file(args.queries):
            if line in ds.queries:
                picks.append((line, ds.display_query(line), ""))
            else:
                picks.append((None, line, ""))
    else:
        pair = _split_names(args.disagree)
        if len(pair) != 2:
            raise StudioError(f"--disagree takes two systems SYS_A,SYS_B, got {args.disagree!r}")
        (metric,) = check_metrics([args.metric])
        qrels = ds.split_qrels(args.split)
        queries = {q: ds.queries[q] for q in qrels}
        runs = system_runs(pair, ds, queries, k=max(100, args.k), first_stage=args.first_stage, depth=args.depth,
                           loader=load)
        for row in disagreements(qrels, runs[0], runs[1], metric, args.top):
            why = f"{short(metric)}: {pair[0]} {row.a:.3f}, {pair[1]} {row.b:.3f} (delta {row.delta:+.3f})"
            picks.append((row.query_id, ds.display_query(row.query_id), why))
        systems = systems or pair
    if not systems:
        raise StudioError("say which systems: --systems bm25,cross-encoder")
    choices = [SystemChoice(n, first_stage=args.first_stage, depth=args.depth) if get_spec(n).kind == "reranker"
               else SystemChoice(n) for n in systems]
    if not picks:
        print("no queries to write")
        return 0
    out_dir = args.out
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
    max_chars = args.truncate or None
    written = []
    for i, (qid, text, why) in enumerate(picks, start=1):
        result = compare(ds, text, choices, load, k=args.k, query_id=qid)
        table = case_table(result, ds.name)
        title = f"Case {i}" + (f" - {why}" if why else "")
        if args.format == "md":
            body = to_markdown(table, max_chars=max_chars, title=title)
        elif args.format == "tex":
            body = to_latex(table, max_chars=max_chars, title=title, mark=args.mark, label=f"tab:case-{i}")
        else:
            body = to_csv(table, max_chars=max_chars)
        if out_dir:
            path = out_dir / f"case-{i:03d}-{_slug(qid or text)}.{FORMATS[args.format]}"
            path.write_text(body, encoding="utf-8")
            written.append(path)
        else:
            print(body)
    if out_dir:
        print(f"{len(written)} case stud{'y' if len(written) == 1 else 'ies'} written to {out_dir}")
        for path in written:
            print(f"  {path.name}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``casestudy`` on the main CLI's subparsers."""
    from core.data.datasets import DEFAULT_DATASET

    p = sub.add_parser("casestudy", help="Table-4-style case-study tables (Markdown, LaTeX, CSV) for many queries")
    p.add_argument("--dataset", default=DEFAULT_DATASET)
    p.add_argument("--queries", type=Path, help="file with one dataset query id or question text per line")
    p.add_argument("--disagree", metavar="SYS_A,SYS_B", help="pick the queries where these two systems differ most")
    p.add_argument("--top", type=int, default=10, help="how many queries --disagree picks (default 10)")
    p.add_argument("--metric", default="ndcg@10", help="per-query metric for --disagree (ranx name; default ndcg@10)")
    p.add_argument("--split", default="all", help="query split --disagree looks at (default all)")
    p.add_argument("--systems", help="comma-separated systems shown in each table (default: the --disagree pair)")
    p.add_argument("--k", type=int, default=5, help="top-k per system (default 5, as in Table 4)")
    p.add_argument("--first-stage", default=default_first_stage(), help="candidates for rerankers")
    p.add_argument("--depth", type=int, default=20, help="first-stage depth for rerankers")
    p.add_argument("--format", choices=sorted(FORMATS), default="md")
    p.add_argument("--mark", choices=["color", "bold"], default="color", help="LaTeX: ground-truth hits in red or bold")
    p.add_argument("--truncate", type=int, default=80, help="cut questions at N characters (0: never)")
    p.add_argument("--out", type=Path, help="folder to write one file per query (default: print)")
    p.set_defaults(func=cmd_casestudy)
