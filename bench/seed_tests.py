"""Claims about training recipes tested at the level of the claim: across training seeds, paired by seed.

Reads the per-seed values a ``bench.recipe_seeds`` report already holds (``densetrans_ablations.json``: R@100
of each variant per seed; ``sdml_losses.json``: H@1), and for each adjacent step of the paper's order a paired t-test over the seeds
(the unit is a training run, not a query), the mean difference with its 95 % t interval, and Holm's correction
across the table's steps. Writes ``bench/reports/<name>_seed_tests.json``; no model is loaded.

    python -m bench.seed_tests --report densetrans_ablations.json --metric recall@100 \\
        --order full -TopDense +Concat -AllDense
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from bench.reporting import REPORTS, head_commit, write_report
from core.analysis.significance import holm
from bench.seed_stats import p_value

MIN_SEEDS_ASKED = 5  # what a claim about a training recipe needs (fewer: said in the report)


def paired_by_seed(a: dict[int, float], b: dict[int, float]) -> dict:
    """Paired t-test of ``a − b`` over the seeds both have: n, mean ± sd of the difference, 95 % CI, p."""
    from scipy import stats

    seeds = sorted(set(a) & set(b))
    diff = np.array([a[s] - b[s] for s in seeds])
    n = len(diff)
    sd = float(diff.std(ddof=1)) if n > 1 else float("nan")
    half = float(stats.t.ppf(0.975, n - 1) * sd / np.sqrt(n)) if n > 1 else float("nan")
    p = float(stats.ttest_rel([a[s] for s in seeds], [b[s] for s in seeds]).pvalue) if n > 1 else float("nan")
    return {"seeds": seeds, "n": n, "mean_difference": round(float(diff.mean()), 5), "sd_difference": round(sd, 5),
            "ci95": [round(float(diff.mean()) - half, 5), round(float(diff.mean()) + half, 5)],
            "t_test_p": p_value(p) if np.isfinite(p) else None}


def per_seed(report: dict, variant: str, metric: str) -> dict[int, float]:
    """Seed -> value of ``metric`` for ``variant`` (``variants[v].runs`` of an ablation report)."""
    return {int(r["seed"]): float(r[metric]) for r in report["variants"][variant]["runs"] if metric in r}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.seed_tests", description=__doc__.split("\n\n")[0])
    ap.add_argument("--report", default="densetrans_ablations.json")
    ap.add_argument("--metric", default="recall@100")
    ap.add_argument("--order", nargs="+", default=["full", "-TopDense", "+Concat", "-AllDense"],
                    help="the paper's order, best first: each adjacent step is tested")
    ap.add_argument("--extra", metavar="HIGHER,LOWER",
                    help="one more, non-adjacent step tested with them, e.g. sdml,tl-euc or full,-AllDense "
                         "(one value: a variant starting with '-' would read as an option)")
    args = ap.parse_args(argv)
    if args.extra is not None and len(args.extra.split(",")) != 2:
        ap.error(f"--extra takes HIGHER,LOWER: {args.extra!r}")
    source = json.loads((REPORTS / args.report).read_text(encoding="utf-8"))
    values = {v: per_seed(source, v, args.metric) for v in args.order}
    extra = [tuple(args.extra.split(","))] if args.extra else []
    steps = [(hi, lo) for hi, lo in zip(args.order, args.order[1:])] + extra
    for hi, lo in steps:
        if hi not in values or lo not in values:
            ap.error(f"--extra names a variant outside --order: {hi} {lo}")
    tests = [{"step": f"{hi} > {lo}", **paired_by_seed(values[hi], values[lo])} for hi, lo in steps]
    ps = [t["t_test_p"] if t["t_test_p"] is not None else 1.0 for t in tests]
    for t, adj in zip(tests, holm(ps)):
        t["p_holm"] = p_value(adj)
        t["significant_at_05"] = adj <= 0.05
    n = min(len(v) for v in values.values())
    report = {
        "command": "python -m bench.seed_tests " + " ".join(argv if argv is not None else sys.argv[1:]),
        "commit": head_commit(), "source": args.report, "source_commit": source.get("commit"), "metric": args.metric,
        "unit": "training seed (paired by seed: the same seed for both variants)", "test": "paired t-test over seeds",
        "correction": f"Holm across the {len(steps)} steps tested", "n_seeds": n,
        "seeds_note": (f"{n} seeds: fewer than the {MIN_SEEDS_ASKED} a claim about a training recipe needs; "
                       "the tests have little power" if n < MIN_SEEDS_ASKED else f"{n} seeds"),
        "values": {v: {"mean": round(float(np.mean(list(x.values()))), 5),
                       "sd": round(float(np.std(list(x.values()), ddof=1)), 5) if len(x) > 1 else None,
                       "by_seed": {str(s): x[s] for s in sorted(x)}} for v, x in values.items()},
        "steps": tests,
    }
    write_report(REPORTS / args.report.replace(".json", "_seed_tests.json"), report)
    return 0


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
