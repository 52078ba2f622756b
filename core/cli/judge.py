"""``python -m core judge``: an automatic judge for a campaign, calibrated on its human labels.

    python -m core judge --campaign NAME --judge SYSTEM --as OWNER [--rule adjudicated] [--json]

Scores the campaign's pool with SYSTEM through the one loader, fits its grade thresholds on a
calibration split of the human-labelled queries, stores its labels as ``judge:SYSTEM`` (apart from
human labels) and prints κ, α and the confusion matrix against the humans beside human–human
agreement on the same items, the system ordering it induces (Kendall τ) and any circularity warning
(``core.judging.auto_judge``). The report is also written to var/campaigns/<campaign>.judge-<system>.json.
"""
from __future__ import annotations

import argparse
import json

from tabulate import tabulate


def _fmt(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def cmd_judge(args: argparse.Namespace) -> int:
    """Run the judge on the campaign and print its report."""
    from core.artifacts import save_json
    from core.judging.auto_judge import judge_campaign
    from core.judging.campaign_results import export_filename
    from core.judging.campaigns import CampaignStore
    from core.paths import var_dir

    store = CampaignStore(args.db, create=False)
    try:
        rep = judge_campaign(store, args.actor, args.campaign, args.judge, rule=args.rule,
                             calibration_share=args.calibration_share, holdout_share=args.holdout_share,
                             seed=args.seed, metric=args.metric)
    finally:
        store.close()
    out = var_dir() / "campaigns" / export_filename(args.campaign, "majority").replace(
        ".majority.qrels", f".judge-{args.judge.replace('@', '_')}.json")
    save_json(out, rep.to_dict())
    if args.json:
        print(json.dumps(rep.to_dict(), indent=1, sort_keys=True))
        return 0
    print(f"judge {rep.judge}: {rep.items} items scored and stored as {rep.identity!r} (apart from human labels); "
          f"thresholds {', '.join(f'{t:.4g}' for t in rep.thresholds)} fitted on {len(rep.calibration_queries)} "
          f"calibration queries (reference: {rep.reference_rule}; kappa there {rep.calibration_kappa:.3f})")
    print(f"agreement on {rep.report_items} items of {len(rep.report_queries)} other queries "
          f"(human-only hold-out: {len(rep.holdout_queries)} queries, neither calibrated on nor reported):")
    print(tabulate([("Cohen's kappa", _fmt(rep.judge_kappa), _fmt(rep.human_kappa_pairs)),
                    ("Krippendorff's alpha (nominal)", _fmt(rep.judge_alpha_nominal), _fmt(rep.human_alpha_nominal)),
                    ("Krippendorff's alpha (ordinal)", _fmt(rep.judge_alpha_ordinal), _fmt(rep.human_alpha_ordinal)),
                    ("mean Cohen's kappa vs each annotator", _fmt(rep.judge_kappa_vs_annotators), "")],
                   headers=["measure", "judge vs reference", "human vs human"]))
    grades = range(len(rep.confusion))
    print("confusion (rows: human reference grade, columns: judge grade)")
    print(tabulate([[f"human {g}", *row] for g, row in zip(grades, rep.confusion)],
                   headers=["", *[f"judge {g}" for g in grades]]))
    print(f"system ordering by {rep.order_metric} on the report queries: Kendall tau {_fmt(rep.tau)}; "
          f"{rep.significant_pairs} pair(s) significantly different under human labels, "
          f"{'-' if rep.significant_kept is None else f'{rep.significant_kept:.0%}'} kept by the judge")
    print(tabulate([(s, f"{rep.human_order[s]:.4f}", f"{rep.judge_order[s]:.4f}") for s in rep.human_order],
                   headers=["system", "human", "judge"]))
    for line in rep.circularity:
        print(f"warning (circularity): {line}")
    print(f"report written to {out}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``judge`` on the main CLI's subparsers."""
    from core.judging.campaign_results import RULES

    p = sub.add_parser("judge", help="an automatic judge for a campaign, calibrated on its human labels")
    p.add_argument("--campaign", required=True, help="campaign name")
    p.add_argument("--judge", required=True, help="a registered system that scores pairs (e.g. cross-encoder)")
    p.add_argument("--as", dest="actor", required=True, help="the acting user (an owner of the campaign)")
    p.add_argument("--db", help="SQLAlchemy URL of the judgments database (default: QRS_DB_URL or "
                                "var/judgments.sqlite)")
    p.add_argument("--rule", choices=[r for r in RULES if r != "mean"], default="adjudicated",
                   help="human reference: adjudicated (owner's decision, else majority) or majority")
    p.add_argument("--calibration-share", type=float, default=0.5, help="share of the non-hold-out labelled "
                                                                        "queries the thresholds are fitted on")
    p.add_argument("--holdout-share", type=float, default=0.2, help="share of labelled queries kept human-only")
    p.add_argument("--metric", default="ndcg@10", help="metric of the system ordering")
    p.add_argument("--seed", type=int, default=0, help="seed of the splits")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_judge)
