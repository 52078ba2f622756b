"""CLI verbs of judging campaigns (registered by ``core.cli.main`` through ``EXTENSIONS``).

- ``campaign create --name N --as OWNER [--owner O ...] [--annotator A ...] --overlap R
  (--split S | --queries q1,q2 | --sample N [--split S] [--seed K]) (--systems a,b --depth K | --pool FILE.json)``
- ``campaign list --as USER``: every campaign with its roster for an owner; otherwise only the user's own
- ``campaign status --name N --as OWNER [--json]``: per-annotator and per-query progress
- ``campaign assign --name N --as OWNER --annotator A --queries q1,q2 [--replace B]``
- ``campaign export --name N --as OWNER --rule majority|adjudicated|mean [--threshold T] [--out-dir DIR]``
- ``campaign agreement --name N --as OWNER [--json]``
- ``campaign delete --name N --as OWNER [--confirm N]``: without ``--confirm`` it only says what would go (exit
  2, nothing deleted); with it, the campaign and every row it owns go, and the audit keeps who and what

``--as`` is the acting user, in its canonical form (``core.judging.identity``: e-mail addresses
lower-cased). ``create`` and ``list`` check it against the owners of the configuration (``QRS_OWNERS`` or
``[qrs] owners`` in ``.streamlit/secrets.toml``; none configured: the single-user tool, everyone is an
owner); the store checks the campaign's owners (only they assign, read progress and agreement, export).
Trust model: whoever holds the database URL can write to it, so the CLI is for the lab's trusted
operators; the owner check is against the configuration, never against a typed name alone. No ``--annotator``: an open campaign (anyone logged in claims queries). ``--pool``
is an explicit pool ``{"query id": ["doc id", ...]}`` (JSON) pooled blind without running systems.
``--db URL`` (or ``QRS_DB_URL``) picks the database. Bad input: one ``error:`` line, exit code 2.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from tabulate import tabulate


def _store(args: argparse.Namespace, create: bool = False):
    from core.judging.campaigns import CampaignStore

    return CampaignStore(args.db, create=create)


def configured_owner(actor: str) -> bool:
    """Whether ``actor`` is an owner of the configuration (True when none is configured: single-user mode)."""
    from core.judging.identity import canonical_identity, configured_people

    owners = configured_people("owners")
    return not owners or canonical_identity(actor) in owners


def require_owner(actor: str, doing: str) -> None:
    """``CampaignAuthError`` (one line, nothing done) unless ``actor`` is an owner of the configuration."""
    from core.judging.campaign_records import CampaignAuthError
    from core.judging.identity import canonical_identity, configured_people

    if not configured_owner(actor):
        raise CampaignAuthError(f"{canonical_identity(actor) or '(no name)'} is not an owner in the configuration "
                                f"(QRS_OWNERS or [qrs] owners: {', '.join(sorted(configured_people('owners')))}); "
                                f"only owners {doing}; nothing was changed")


def _ids(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def _query_set(args: argparse.Namespace):
    from core.judging.campaign_records import CampaignError, QuerySet

    chosen = [flag for flag, value in (("--queries", args.queries), ("--sample", args.sample)) if value]
    if len(chosen) > 1:
        raise CampaignError("give one of --queries or --sample (with --split), not both")
    if args.queries:
        return QuerySet("list", ids=tuple(_ids(args.queries)))
    if args.sample:
        return QuerySet("sample", split=args.split, size=args.sample, seed=args.seed)
    return QuerySet("split", split=args.split)


def _read_pool(path: Path) -> dict[str, list[str]]:
    from core.errors import DataFormatError

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataFormatError(path, None, "file not found") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataFormatError(path, None, f"not a JSON pool: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, list) and all(isinstance(d, str) for d in v)
                                             for v in data.values()):
        raise DataFormatError(path, None, 'expected {"query id": ["doc id", ...], ...}')
    return data


def cmd_create(args: argparse.Namespace) -> int:
    """Pool the chosen queries and store the campaign with its assignment."""
    from core.data.datasets import load_dataset
    from core.judging.campaign_pool import choose_queries, items_from_pool, items_from_rankings, rank_pool
    from core.judging.campaign_records import CampaignError, CampaignSpec

    require_owner(args.actor, "create campaigns")
    ds = load_dataset(args.dataset)
    query_set = _query_set(args)
    systems = _ids(args.systems)
    if args.pool:
        pool = _read_pool(args.pool)
        qids = set(choose_queries(ds, query_set))
        outside = [q for q in pool if q not in qids]
        if outside:
            raise CampaignError(f"the pool names queries outside the query set ({query_set.describe()}): "
                                f"{', '.join(outside[:5])}")
        items, systems = items_from_pool(ds, pool), ["given"]
    else:
        if not systems:
            raise CampaignError("name the systems to pool (--systems bm25,minilm) or give --pool FILE.json")
        items = items_from_rankings(ds, rank_pool(ds, choose_queries(ds, query_set), systems, args.depth), args.depth)
    guidelines = args.guidelines.read_text(encoding="utf-8") if args.guidelines else ""
    spec = CampaignSpec(args.name, ds.name, query_set, tuple(systems), args.depth, args.overlap,
                        tuple(dict.fromkeys([args.actor, *(args.owner or [])])), tuple(args.annotator or []),
                        guidelines=guidelines)
    store = _store(args, create=True)
    try:
        c = store.create(args.actor, spec, items)
    finally:
        store.close()
    roster = ", ".join(c.annotators) if c.annotators else "open (anyone logged in claims queries)"
    print(f"campaign {c.name!r}: {c.items} items on {c.queries} queries of {c.dataset} ({query_set.describe()}), "
          f"pool depth {c.depth} of {', '.join(c.systems)}, overlap {c.overlap}; annotators: {roster}; "
          f"owners: {', '.join(c.owners)}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """Campaigns, newest first: every one with its roster for an owner of the configuration; for anyone
    else only the campaigns they are in (or that are open), without the other people's names."""
    from core.judging.identity import canonical_identity

    actor = canonical_identity(args.actor)
    owner = configured_owner(actor)
    store = _store(args)
    try:
        if owner:
            rows = [(c.name, c.dataset, c.queries, c.items, c.overlap, "open" if c.open else ", ".join(c.annotators),
                     ", ".join(c.owners)) for c in store.campaigns()]
        else:
            rows = [(c.name, c.dataset, c.queries, c.items, c.overlap,
                     "open" if c.open else (actor if actor in c.annotators else ""),
                     actor if actor in c.owners else "") for c in store.campaigns(actor)]
    finally:
        store.close()
    print(tabulate(rows, headers=["campaign", "dataset", "queries", "items", "overlap", "annotators", "owners"]))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Per-annotator and per-query progress (owners)."""
    store = _store(args)
    try:
        c, prog = store.campaign(args.name), store.progress(args.actor, args.name)
    finally:
        store.close()
    if args.json:
        print(json.dumps({"campaign": c.name, "items": prog.items, "complete": prog.complete,
                          "annotators": {a: {"labelled": d, "assigned": n} for a, (d, n) in prog.annotators.items()},
                          "queries": prog.queries}, indent=1, sort_keys=True))
        return 0
    print(f"campaign {c.name!r} on {c.dataset}: {prog.complete}/{prog.items} items have their {c.overlap} ratings")
    print(tabulate([(a, d, n) for a, (d, n) in prog.annotators.items()], headers=["annotator", "labelled", "assigned"]))
    print(tabulate([(q, v["items"], f"{v['ratings']}/{v['wanted']}", v["complete"]) for q, v in prog.queries.items()],
                   headers=["query", "items", "ratings", "complete items"]))
    if args.budget:
        _print_budget(args)
    return 0


def _print_budget(args: argparse.Namespace) -> None:
    """The budget-aware labelling order and the interval widths of the system comparisons."""
    from core.judging.budget_plan import budget_plan

    store = _store(args)
    try:
        plan = budget_plan(store, args.actor, args.name, args.budget, judge=args.judge)
    finally:
        store.close()
    print(f"budget {plan.budget} of {plan.total} queries ({len(plan.labelled)} fully labelled by humans; judge "
          f"{plan.judge}); label next, in this order: {', '.join(plan.order[:20]) or '(none left)'}"
          + (" ..." if len(plan.order) > 20 else ""))
    print(tabulate([(c["pair"], f"{c['judge_only']:+.4f}", *((f"{c['estimate']:+.4f}", f"[{c['low']:+.4f}, {c['high']:+.4f}]",
                     f"{c['width_now']:.4f}", f"{c['width_at_budget']:.4f}") if "estimate" in c else ("-",) * 4))
                    for c in plan.comparisons],
                   headers=["systems", "judge only", "PPI", "90% CI", "width now", "width at budget"]))


def cmd_assign(args: argparse.Namespace) -> int:
    """Give an annotator the items of some queries (or hand over another's unlabelled ones)."""
    store = _store(args)
    try:
        n = store.assign(args.actor, args.name, args.annotator, _ids(args.queries), replace=args.replace)
    finally:
        store.close()
    print(f"assigned {n} item(s) of {len(_ids(args.queries))} query(ies) to {args.annotator}"
          + (f" (handed over from {args.replace})" if args.replace else ""))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write TREC qrels with the aggregation rule in the file name, and say what the rule did."""
    from core.judging.campaign_results import rule_description
    from core.paths import var_dir

    store = _store(args)
    try:
        res = store.export_qrels(args.actor, args.name, args.out_dir or Path(var_dir()) / "campaigns", args.rule,
                                 args.threshold)
    finally:
        store.close()
    print(f"{res.pairs} labels on {res.queries} queries written to {res.path} (TREC qrels; rule "
          f"{rule_description(args.rule, args.threshold)}; {res.skipped} item(s) without a usable label left out)")
    return 0


def _fmt(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.4f}"


def cmd_agreement(args: argparse.Namespace) -> int:
    """Krippendorff's α (nominal, ordinal), Fleiss' κ, Cohen's κ per pair, α per query (owners)."""
    store = _store(args)
    try:
        res = store.agreement(args.actor, args.name)
    finally:
        store.close()
    if args.json:
        print(json.dumps(asdict(res), indent=1, sort_keys=True))
        return 0
    print(f"{res.items} items with two or more ratings ({res.ratings} ratings; can't-judge counts as missing), "
          f"annotators {', '.join(res.annotators) or '(none)'}")
    print(tabulate([("Krippendorff's alpha (nominal)", _fmt(res.alpha_nominal), res.items),
                    ("Krippendorff's alpha (ordinal)", _fmt(res.alpha_ordinal), res.items),
                    (f"Fleiss' kappa ({res.fleiss_raters} ratings per item)", _fmt(res.fleiss), res.fleiss_items)]
                   + [(f"Cohen's kappa {c['pair']}", _fmt(c["kappa"]), c["items"]) for c in res.cohen],
                   headers=["measure", "value", "items"]))
    print(tabulate([(q, v.items, _fmt(v.alpha_nominal), _fmt(v.alpha_ordinal)) for q, v in res.per_query.items()],
                   headers=["query", "items", "alpha nominal", "alpha ordinal"]))
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete a campaign (its owners), after the typed confirmation; the audit keeps who and what."""
    from functools import partial

    from core.cli.console import confirmed_deletion
    from core.judging.campaign_records import CampaignError
    from core.judging.deletion import delete_campaign, plan_campaign

    store = _store(args)
    plan = plan_campaign(store, args.actor, args.name)
    return confirmed_deletion(plan, args.confirm, partial(delete_campaign, store, args.actor, args.name), CampaignError,
                              f"{args.name!r} to delete it")


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``campaign ...`` on the main CLI's subparsers."""
    from core.cli.console import positive_int
    from core.data.datasets import DEFAULT_DATASET
    from core.judging.campaign_results import RULES

    c = sub.add_parser("campaign", help="judging campaigns: create, list, status, assign, export, agreement, delete")
    csub = c.add_subparsers(dest="action", required=True)

    def common(p: argparse.ArgumentParser, named: bool = True) -> argparse.ArgumentParser:
        p.add_argument("--db", help="SQLAlchemy URL of the judgments database (default: QRS_DB_URL or "
                                    "var/judgments.sqlite)")
        if named:
            p.add_argument("--name", required=True, help="campaign name")
        p.add_argument("--as", dest="actor", required=True,
                       help="the acting user (an owner; e-mail addresses compare case-insensitively)")
        return p

    p = common(csub.add_parser("create", help="pool queries and create a campaign"))
    p.add_argument("--dataset", default=DEFAULT_DATASET)
    p.add_argument("--owner", action="append", help="another owner (repeatable); --as is always one")
    p.add_argument("--annotator", action="append", help="a named annotator (repeatable); none: an open campaign")
    p.add_argument("--overlap", type=positive_int, default=2, help="annotators per item (r)")
    p.add_argument("--split", default="test", help="query split (default test; 'all' = every query)")
    p.add_argument("--queries", help="comma-separated query ids instead of a split")
    p.add_argument("--sample", type=positive_int, help="a seeded random sample of this many queries of --split")
    p.add_argument("--seed", type=int, default=0, help="seed of --sample")
    p.add_argument("--systems", help="comma-separated systems to pool (the one runner ranks them)")
    p.add_argument("--depth", type=positive_int, default=10, help="pool depth: top k of every system")
    p.add_argument("--pool", type=Path, help='explicit pool JSON {"query id": ["doc id", ...]} instead of --systems')
    p.add_argument("--guidelines", type=Path, help="text file with the judging guidelines")
    p.set_defaults(func=cmd_create)

    common(csub.add_parser("list", help="campaigns (all of them, with rosters, for an owner)"), named=False).set_defaults(func=cmd_list)

    p = common(csub.add_parser("status", help="per-annotator and per-query progress"))
    p.add_argument("--json", action="store_true")
    p.add_argument("--budget", type=positive_int, help="queries humans will label in all: print the budget-aware "
                                                        "labelling order and the comparisons' interval widths")
    p.add_argument("--judge", help="the judge identity to plan with (judge:SYSTEM; default: the first)")
    p.set_defaults(func=cmd_status)

    p = common(csub.add_parser("assign", help="give an annotator the items of some queries"))
    p.add_argument("--annotator", required=True)
    p.add_argument("--queries", required=True, help="comma-separated query ids")
    p.add_argument("--replace", help="hand over this annotator's unlabelled items of those queries")
    p.set_defaults(func=cmd_assign)

    p = common(csub.add_parser("export", help="TREC qrels under an aggregation rule named in the file name"))
    p.add_argument("--rule", choices=RULES, default="majority",
                   help="majority (ties -> lower label), adjudicated (owner's decision, else majority), "
                        "mean (1 if the mean label >= --threshold, else 0)")
    p.add_argument("--threshold", type=float, default=1.0, help="threshold of --rule mean (default 1)")
    p.add_argument("--out-dir", type=Path, help="folder for <campaign>.<rule>.qrels (default var/campaigns)")
    p.set_defaults(func=cmd_export)

    p = common(csub.add_parser("agreement", help="Krippendorff's alpha, Fleiss' and Cohen's kappa, per query"))
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_agreement)

    p = common(csub.add_parser("delete", help="delete a campaign and its labels (owners; typed confirmation, audited)"))
    p.add_argument("--confirm", help="the campaign's name again: without it nothing is deleted")
    p.set_defaults(func=cmd_delete)
