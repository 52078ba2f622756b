"""The query view of every system's word importance, faithful and plausible? ERASER on its own top 10.

    python -m bench.query_view_faithfulness [--dataset qqp-bimpm] [--dev-queries 150] [--test-queries 300]
                                            [--systems bm25,dual-encoder,...] [--decide-only]
                                            [--latency-only OUT [--latency-queries 20]]

Without a candidate, ``core explain`` and the Keywords page weigh a query's words by what each does to the system's
own top 10 (``core.analysis.ranking_importance``). For every system of the pair-view report
(``bench/reports/explain_faithfulness.json``) that ranks a typed query (a retriever; a reranker over the default
first stage's top 20), it measures on sampled held-out QQP queries in their typed form (dev: the decision; test:
the figures):

- faithfulness (``core.analysis.ranking_faithfulness``): comprehensiveness and sufficiency of the top-k words
  against random k words, in 1 − RBO units, with 95% bootstrap CIs over queries and the verdict;
- plausibility (``core.analysis.keyword_quality.plausibility``): Spearman ρ with IDF and the stop-word share of the
  top-2 words.

It writes ``bench/reports/query_view_faithfulness.json`` and ``.md`` (after each system, so a long run leaves what
it measured), then applies ``bench.explain_decision.PROBE_GATE_RULE`` to the dev rows of both views: the pair
report's ``default`` becomes the first of the amended rule's candidates, in its order, whose query view passes the
issue's two probes; the first rule's and the amended rule's decisions are kept beside it with their probes
(``first_decision``, ``amended_decision``). ``--latency-only`` times the query view of
one query per system, once loaded, into its own report.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bench.explain_decision import AMENDED_RULE, DECISION_RULE, PROBE_GATE_RULE
from bench.explain_faithfulness import REPORT as PAIR_REPORT
from bench.loaded_systems import each_loaded

REPORT = Path(__file__).resolve().parent / "reports" / "query_view_faithfulness.json"


def sample_queries(dataset, split: str, n: int, seed: int = 13) -> list[str]:
    """``n`` queries of ``split`` in their typed form (the form people type), drawn with ``seed``, in id order."""
    queries = dataset.in_form(dataset.split_queries(split), "typed")
    ids = sorted(queries)
    chosen = np.random.default_rng(seed).choice(len(ids), size=min(n, len(ids)), replace=False)
    return [queries[ids[i]] for i in sorted(chosen)]


def measure(system, queries: list[str], dataset, first_stage, stats, stop_words) -> dict:
    """The query view's faithfulness (with CIs) and plausibility on ``queries``."""
    from core.analysis.keyword_quality import plausibility
    from core.analysis.ranking_faithfulness import ranking_faithfulness

    got = ranking_faithfulness(system, queries, dataset, first_stage=first_stage)
    p = plausibility([w.query for w in got.weights], stats.idf, stop_words)
    return {**got.summary, "spearman_idf": p.spearman_idf, "stop_share_top2": p.stop_share_top2,
            "plausible": p.passes}


def latency_report(names: list[str], queries: list[str], dataset, out: Path, command: str) -> int:
    """The query view of one query, once loaded (what the Keywords page computes first): median and p90 ms per
    system over ``queries`` after two warm-up queries, with the load average and the Python speed probe."""
    import os

    from bench.error_analysis_speed import python_speed
    from bench.explain_faithfulness import per_item_ms
    from bench.reporting import head_commit, write_report
    from core.analysis.ranking_importance import ranking_importance
    from core.registry import default_first_stage
    from core.retrieval.base import Reranker
    from core.serving.loader import load

    probe, rows, skipped = python_speed(), [], {}
    first = load(default_first_stage(), dataset)
    for name, system in each_loaded(names, dataset, skipped):
        stage = first if isinstance(system, Reranker) else None
        before = os.getloadavg()[0]
        timing = per_item_ms(lambda query: ranking_importance(system, query, dataset, first_stage=stage), queries)
        rows.append({"system": name, **timing, "queries": len(queries), "load_before": round(before, 2),
                     "load_after": round(os.getloadavg()[0], 2)})
        print(rows[-1], flush=True)
    write_report(out, {"command": command, "commit": head_commit(), "dataset": dataset.name,
                       "python_speed_s": probe, "rows": rows, "skipped": skipped})
    return 0


def markdown(report: dict) -> str:
    fmt = lambda c: f"{c[0]:.3f} [{c[1]:.3f}, {c[2]:.3f}]"  # noqa: E731
    lines = ["# The query view of every system's word importance: faithfulness on held-out QQP queries", "",
             f"`{report['command']}` at commit {report['commit']}; {report['test_queries']} test queries (the "
             f"figures), {report['dev_queries']} dev queries (the decision), typed form. Units: 1 − RBO(p = 0.9) of "
             "the top 10. CIs: 95% bootstrap over queries.", "",
             "| system | comp top | comp random | suff top | suff random | ρ IDF | stop top-2 | s | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in report["test"]:
        lines.append(f"| {r['system']} | {fmt(r['comprehensiveness']['top'])} | {fmt(r['comprehensiveness']['random'])}"
                     f" | {fmt(r['sufficiency']['top'])} | {fmt(r['sufficiency']['random'])} | {r['spearman_idf']:+.2f}"
                     f" | {r['stop_share_top2']:.0%} | {r['seconds']:.0f} | {r['verdict']} |")
    if report["skipped"]:
        lines += ["", "Not measured: " + "; ".join(f"{k} ({v})" for k, v in report["skipped"].items())]
    return "\n".join(lines) + "\n"


def decide(dataset, query_report: dict, pair_path: Path = PAIR_REPORT, first_stage=None) -> dict:
    """``PROBE_GATE_RULE`` on both views' dev rows, written into the pair report with the probes on its default; the
    first rule's decision and the amended rule's are kept beside it (``first_decision``, ``amended_decision``, each
    with the probes on its own default). The gate loads the amended rule's candidates in its order, no further than
    the first that passes (a reranker over ``first_stage``, loaded here when not given)."""
    from bench.explain_decision import decide_amended, decide_gated
    from bench.explain_faithfulness import markdown as pair_markdown, probes, query_view_probes
    from bench.reporting import head_commit, write_report
    from core.registry import default_first_stage, get_spec, parse_name
    from core.serving.loader import load

    pair = json.loads(pair_path.read_text(encoding="utf-8"))
    if "first_decision" not in pair:
        pair["first_decision"] = {"decision_rule": DECISION_RULE, "default": pair["default"], "why": pair["why"],
                                  "probes": pair.get("probes", {})}
    first = first_stage or load(default_first_stage(), dataset)
    views: dict[str, tuple] = {}

    def view(name: str) -> tuple:
        """``name`` loaded once and its answers to the probes (the query view), computed once."""
        if name not in views:
            system = load(name, dataset)
            views[name] = system, query_view_probes(system, dataset, first)
        return views[name]

    def probed(default: dict | None) -> dict:
        if not default:
            return {}
        system, answers = view(default["system"])
        return probes(system, get_spec(parse_name(default["system"]).system), default["method"], dataset, first,
                      answers)

    query_dev = {r["system"]: r for r in query_report["dev"]}
    amended = decide_amended(pair["dev"], query_dev)
    pair["amended_decision"] = {"decision_rule": AMENDED_RULE, **amended, "probes": probed(amended["default"])}
    decision = decide_gated(pair["dev"], query_dev, lambda name: all(ok for _, ok in view(name)[1].values()))
    pair.update(decision_rule=PROBE_GATE_RULE, query_view_report=str(REPORT.relative_to(REPORT.parents[2])),
                decided_at=head_commit(), **decision)
    pair["probes"] = probed(decision["default"])
    write_report(pair_path, pair)
    pair_path.with_suffix(".md").write_text(pair_markdown(pair), encoding="utf-8")
    return decision


def main(argv: list[str] | None = None) -> int:
    import sys

    from bench.reporting import head_commit, write_report
    from core.data.datasets import load_dataset
    from core.data.keywords import KeywordTagger, LexicalStats
    from core.registry import default_first_stage
    from core.retrieval.base import Reranker
    from core.serving.loader import load

    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--dev-queries", type=int, default=150)
    ap.add_argument("--test-queries", type=int, default=300)
    ap.add_argument("--systems", default="", help="comma-separated (default: every system of the pair-view report)")
    ap.add_argument("--out", default=str(REPORT))
    ap.add_argument("--pair-report", default=str(PAIR_REPORT), help="the pair-view report the decision is written to")
    ap.add_argument("--latency-only", metavar="OUT", default=None,
                    help="time only the query view of one query per system (--latency-queries test queries) into OUT")
    ap.add_argument("--latency-queries", type=int, default=20)
    ap.add_argument("--decide-only", action="store_true", help="apply the decision rules to the reports as they are")
    args = ap.parse_args(argv)
    dataset = load_dataset(args.dataset)
    out = Path(args.out)
    if args.decide_only:
        print(decide(dataset, json.loads(out.read_text(encoding="utf-8")), Path(args.pair_report)))
        return 0
    command = "python -m bench.query_view_faithfulness " + " ".join(sys.argv[1:] if argv is None else argv)
    pair = json.loads(Path(args.pair_report).read_text(encoding="utf-8"))
    names = [s for s in args.systems.split(",") if s] or list(dict.fromkeys(r["system"] for r in pair["dev"]))
    dev = sample_queries(dataset, "dev", args.dev_queries)
    test = sample_queries(dataset, "test", args.test_queries)
    if args.latency_only:
        return latency_report(names, test[:args.latency_queries], dataset, Path(args.latency_only), command.strip())
    stats = LexicalStats.from_texts(dataset.corpus.values())
    stop_words = KeywordTagger().stop_words
    first = load(default_first_stage(), dataset)
    report = {"command": command.strip(),
              "commit": head_commit(), "dataset": dataset.name, "dev_queries": len(dev), "test_queries": len(test),
              "first_stage": default_first_stage(), "dev": [], "test": [], "skipped": {}}
    t0 = time.time()
    for name, system in each_loaded(names, dataset, report["skipped"]):
        stage = first if isinstance(system, Reranker) else None
        for split, queries in (("dev", dev), ("test", test)):
            start = time.time()
            row = {"system": name, "split": split, **measure(system, queries, dataset, stage, stats, stop_words)}
            row["seconds"] = round(time.time() - start, 1)
            report[split].append(row)
            print(f"{name} {split}: {row['seconds']:.0f}s gain {row['gain']:+.3f} {row['verdict']}; "
                  f"rho {row['spearman_idf']:+.2f} stop {row['stop_share_top2']:.0%}", flush=True)
        report["seconds"] = round(time.time() - t0, 1)
        write_report(out, report)
        out.with_suffix(".md").write_text(markdown(report), encoding="utf-8")
    print(decide(dataset, report, Path(args.pair_report), first))
    return 0


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
