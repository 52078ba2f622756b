"""``python -m core explain --system SYSTEM QUERY [--candidate TEXT] [--method M] [--json]``.

The per-word importance the Keywords page shows, from the same function
(``core.analysis.keywords.word_importance``) over any system loaded through the one loader (occlusion for every
system that scores a pair). Without ``--candidate`` the query's words are weighed by what they do to the
system's own top 10 (``core.analysis.ranking_importance``: 1 − RBO with the word left out; ``query`` in the JSON,
the pair's own weights in ``pair_query``) and the candidate is the system's top hit that is not the query itself. Without ``--system``: the Keywords page's default
(``core.analysis.keyword_quality.keywords_default``); without ``--method``: the page's method for that system,
else the system's first offered one. ``--json`` prints ``{"query": [[word, weight], ...], "candidate": [...],
"score": ..., ...}``; a query with no words, a candidate over ``MAX_CANDIDATE_CHARS`` or a system that cannot
score a pair prints one line and exits 2.
"""
from __future__ import annotations

import argparse
import json

from core.errors import QueryError, StudioError


MAX_CANDIDATE_CHARS = 10_000  # a candidate may be longer than a typed query (its first 32 words are weighed)


def _checked(text: str, what: str) -> str:
    from core.data.keywords import keyword_candidates
    from core.retrieval.base import MAX_QUERY_CHARS, validate_query

    try:
        cleaned = validate_query(text, MAX_QUERY_CHARS if what == "query" else MAX_CANDIDATE_CHARS)
    except QueryError as exc:
        raise QueryError(str(exc).replace("the query", f"the {what}", 1)) from None
    if not keyword_candidates(cleaned)[0]:
        raise QueryError(f"the {what} has no words to weigh: {cleaned[:60]!r}")
    return cleaned


def _ranked_view(loaded, query: str, dataset):
    """Without a candidate: (the query words' importance to the system's own top 10, its top hit's text); a system
    or a query that cannot give that view (one word, a candidate-list dataset) falls back to BM25's top hit for the
    pair alone, (None, that hit)."""
    from core.analysis.ranking_importance import ranking_importance
    from core.data.pipeline import terms
    from core.registry import default_first_stage
    from core.retrieval.base import Reranker
    from core.serving.loader import load

    first = loaded if getattr(loaded, "name", None) == default_first_stage() else load(default_first_stage(), dataset)
    try:
        ranked = ranking_importance(loaded, query, dataset, first_stage=first if isinstance(loaded, Reranker) else None)
    except StudioError:
        ranked = None
    if ranked is not None and ranked.top:
        return ranked, dataset.corpus[ranked.top[0]]
    if dataset.candidates:  # a candidate list: the dataset question's own top answer by BM25, through the runner
        from core.serving.runner import SystemChoice, rank_one

        qid = next((q for q, text in dataset.queries.items() if text == query and q in dataset.candidates), None)
        if qid is None:
            raise QueryError(f"{dataset.name} ranks each question's own answers: give --candidate, or a question "
                             "of the dataset as the query")
        hits = rank_one(SystemChoice(default_first_stage()), dataset, query, 5, query_id=qid, load=lambda n, v=None,
                        o=(): first)
    else:
        hits = first.search(query, k=5)  # BM25's top hit that is not the query itself
    others = [d for d in hits.doc_ids if terms(dataset.corpus[d]) != terms(query)]
    return ranked, dataset.corpus[others[0]] if others else query


def cmd_explain(args: argparse.Namespace) -> int:
    from core.analysis.keyword_quality import keywords_default
    from core.analysis.keywords import METHODS, offered_methods, word_importance
    from core.data.datasets import load_dataset
    from core.registry import get_spec, parse_name
    from core.serving.loader import load
    from core.serving.pair_scoring import check_spec

    default = keywords_default()
    system = args.system or default.system
    if args.method is not None and args.method not in METHODS:
        raise StudioError(f"unknown method {args.method!r}; choose one of: {', '.join(METHODS)}")
    spec = get_spec(parse_name(system).system)
    check_spec(spec)  # a tree search or a fusion: one line before anything is loaded
    query = _checked(args.query, "query")
    dataset = load_dataset(args.dataset)
    loaded = load(system, dataset)
    ranked = None
    if args.candidate is not None:
        candidate = _checked(args.candidate, "candidate")
    else:
        ranked, candidate = _ranked_view(loaded, query, dataset)
    offered = offered_methods(loaded, spec)
    method = args.method or (default.method if system == default.system and default.method in offered
                             else offered[0] if offered else "occlusion")
    result = word_importance(loaded, query, candidate, method, corpus=dataset.corpus, spec=spec)
    if args.json:
        out = result.as_json()
        out["query_measure"] = METHODS[method] + " (the pair's)"
        if ranked is not None:  # no candidate: the query's words weighed by the system's own top 10
            out.update(pair_query=out["query"], query=ranked.as_json()["query"], query_measure=ranked.measure,
                       top=ranked.top, candidate_text=candidate)
        print(json.dumps(out, ensure_ascii=False))
        return 0
    if ranked is not None:
        print(f"{result.system}: which query words decide its top {ranked.k} ({ranked.measure})")
        for word, weight in sorted(ranked.query, key=lambda p: -p[1]):
            print(f"  {weight:+.4f}  {word}")
        print(f"its top hit, weighed as a pair: {candidate}")
    print(f"{result.system}: {METHODS[method]}; score(q, d) = {result.score:.4f}")
    for note in result.notes:
        print(f"note: {note}")
    if result.agreement is not None:
        print(f"Spearman ρ(occlusion, w(k, q)) over the query words: {result.agreement:+.3f}")
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
    p.add_argument("--method", help="occlusion (any system that scores a pair), terms (exact, BM25), w (FRM's "
                                    "w(k, q)) or gradient (input × gradient); default: the page's")
    p.add_argument("--candidate", help="candidate question (default: the system's top hit, and the query's words "
                                       "weighed by what they do to its top 10)")
    p.add_argument("--json", action="store_true", help='print {"query": [[word, weight], ...], "candidate": [...]}')
    p.add_argument("query")
    p.set_defaults(func=cmd_explain)
