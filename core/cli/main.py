"""``python -m core``: one function per verb (argparse); progress bars with tqdm.

Verbs: datasets, data, systems, build, train (``core.cli.systems``), eval, search (``core.cli.ranking``), then
judgments, compare, casestudy, campaign, explain, judge, experiment when their modules are present; what the verbs
share is ``core.cli.console``. Every error a user can cause prints one clear line and exits 2 (``guarded``).
"""
from __future__ import annotations

import argparse
import importlib
import sys

from core.cli import ranking, systems
from core.cli.console import OneLineParser, printable, printable_stdout
from core.errors import describe_error

EXTENSIONS = ("core.cli.judgments", "core.cli.casestudy", "core.cli.campaign", "core.cli.explain", "core.cli.judge",
              "core.cli.experiment")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m core", description="Question Retrieval Studio command line")
    sub = parser.add_subparsers(dest="verb", required=True)
    systems.add_commands(sub)
    ranking.add_commands(sub)
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
    a ``StudioError`` or a known library error is one ``error:`` line and exit code 2, Ctrl-C is 130; what it prints
has no control characters (``core.cli.console.printable_stdout``)."""
    try:
        with printable_stdout():  # stored texts printed, never a terminal's control sequence
            code = fn(*args)
        return code if isinstance(code, int) else 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - anything unknown is re-raised with its traceback
        message = describe_error(exc)
        if message is None:
            raise
        print(f"error: {' '.join(printable(message).split())}", file=sys.stderr)
        return 2
