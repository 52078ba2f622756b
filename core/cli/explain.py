"""``python -m core explain --system SYSTEM QUERY [--candidate TEXT] [--method M] [--json]``.

The per-word importance the Keywords page shows, from the same function
(``core.analysis.keywords.word_importance``) over the system loaded through the one loader. Without
``--candidate`` the candidate is BM25's top hit for the query that is not the query itself. Without
``--system``/``--method``: the Keywords page's default (``core.analysis.keyword_quality.keywords_default``).
``--json`` prints ``{"query": [[word, weight], ...], "candidate": [...]}``; a query with no words prints one
line and exits 2.
"""
from __future__ import annotations

import argparse
import json

from core.errors import QueryError, StudioError


def _checked(text: str, what: str) -> str:
    from core.data.keywords import keyword_candidates
    from core.retrieval.base import validate_query

    cleaned = validate_query(text)
    if not keyword_candidates(cleaned)[0]:
        raise QueryError(f"the {what} has no words to weigh: {cleaned[:60]!r}")
    return cleaned


def cmd_explain(args: argparse.Namespace) -> int:
    from core.analysis.keyword_quality import keywords_default
    from core.analysis.keywords import METHODS, word_importance
    from core.data.datasets import load_dataset
    from core.serving.loader import load

    default = keywords_default()
    system = args.system or default.system
    method = args.method or (default.method if system == default.system else "w")
    if method not in METHODS:
        raise StudioError(f"unknown method {method!r}; choose one of: {', '.join(METHODS)}")
    query = _checked(args.query, "query")
    dataset = load_dataset(args.dataset)
    if args.candidate is not None:
        candidate = _checked(args.candidate, "candidate")
    else:
        from core.data.pipeline import terms
        from core.registry import default_first_stage

        hits = load(default_first_stage(), dataset).search(query, k=5)  # its top hit that is not the query itself
        others = [d for d in hits.doc_ids if terms(dataset.corpus[d]) != terms(query)]
        candidate = dataset.corpus[others[0]] if others else query
    result = word_importance(load(system, dataset), query, candidate, method)
    if args.json:
        print(json.dumps(result.as_json(), ensure_ascii=False))
        return 0
    print(f"{result.system}: {METHODS[method]}; sim(q, d) = {result.score:.4f}")
    for side, pairs, text in (("query", result.query, query), ("candidate", result.candidate, candidate)):
        print(f"{side}: {text}")
        for word, weight in sorted(pairs, key=lambda p: -p[1]):
            print(f"  {weight:+.4f}  {word}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``explain`` on the main CLI's subparsers."""
    from core.data.datasets import DEFAULT_DATASET

    p = sub.add_parser("explain", help="per-word importance of a query (and a candidate), as the Keywords page shows")
    p.add_argument("--dataset", default=DEFAULT_DATASET)
    p.add_argument("--system", help="a system that shows per-word importance (default: the Keywords page's default)")
    p.add_argument("--method", help="w (FRM's w(k, q)) or gradient (input × gradient); default: the page's")
    p.add_argument("--candidate", help="candidate question (default: BM25's top hit for the query)")
    p.add_argument("--json", action="store_true", help='print {"query": [[word, weight], ...], "candidate": [...]}')
    p.add_argument("query")
    p.set_defaults(func=cmd_explain)
