"""Word importance of every system, faithful and plausible? ERASER with bootstrap CIs on held-out QQP pairs.

    python -m bench.explain_faithfulness [--dataset qqp-bimpm] [--test-pairs 500] [--dev-pairs 200]
                                         [--systems bm25,minilm,...] [--latency-pairs 20]

For every registered system that can score a (query, candidate) pair (``SystemSpec.pair_scoring``; the default:
all of them) and is built, and every method it offers (``core.analysis.keywords.offered_methods``: occlusion for
all, BM25's exact terms, FRM's w(k, q) and gradient), it measures on sampled pairs of the dev split (the
decision) and of the test split (the figures reported):

- faithfulness (``core.analysis.explanation_quality``): ERASER comprehensiveness and sufficiency of the top-k
  query words against random k words, AOPC over k = 1, 2, 3, per pair in units of the system's score SD, with 95%
  bootstrap CIs over pairs and the verdict "more faithful than random" or not;
- plausibility (``core.analysis.keyword_quality.plausibility``): mean Spearman ρ with the collection's IDF, and
  the stop-word share of each question's top-2 words;
- latency: one pair explained, once loaded (median and p90 ms over ``--latency-pairs`` test pairs, after warm-up).

A system not built (or still building) is listed under ``skipped`` with the reason. The decision rule below was
written before any result was seen and is copied into the report; the issue's two probes are checked on the
chosen default. Writes ``bench/reports/explain_faithfulness.json`` and ``.md``.
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from bench.loaded_systems import each_loaded

DECISION_RULE = (
    "Written before any result. On the DEV pairs only: 1. candidates are the (system, method) explanations that are "
    "more faithful than random (CI of comprehensiveness(top) − (random) above 0 and CI of sufficiency(top) − "
    "(random) below 0). 2. Among them, those that are also plausible (mean Spearman ρ with IDF ≥ 0.2 and stop-word "
    "share of the top-2 ≤ 0.25) come first; if none is plausible, all faithful ones. 3. The Keywords page's "
    "default is the one with the largest gain = AOPC comprehensiveness(top − random) − AOPC sufficiency(top − "
    "random), in units of the system's score SD; ties: the faster one (median ms per pair). 4. If no explanation is "
    "faithful on dev, the page keeps its earlier default and the report says so. Test figures are reported, never "
    "used to choose.")
AMENDED_RULE = (
    "Amended after the first rule's default (the dual encoder) failed the depression probe, because the default "
    "serves two jobs and the first rule weighed one: the pair view (a candidate given) and the query view (none "
    "given: each word weighed by what it does to the system's own top 10, what `core explain` and the Keywords page "
    "open with). Written before any query-view figure was seen, except a 40-query dev smoke test of BM25 and the dual "
    "encoder run while the measure was tested (both more faithful than random). On the DEV split only: 1. candidates "
    "are the (system, method) explanations more faithful than random in both views: the pair view as in the first "
    "rule's item 1, and the system's query view (bench/query_view_faithfulness.py: CI of comprehensiveness(top) − "
    "(random) above 0 and CI of sufficiency(top) − (random) below 0 over dev queries); a system that cannot rank a "
    "typed query has no query view and is no candidate. 2. Among them, those plausible in both views (mean Spearman "
    "ρ with IDF ≥ 0.2 and stop-word share of the top-2 ≤ 0.25, on dev pairs and on dev queries) come first; if none "
    "is, all candidates. 3. The default is the one with the smallest sum of its two ranks, by pair gain (SD units) "
    "and by query gain (1 − RBO units), among them; ties: the larger pair gain, then the faster. 4. If no "
    "explanation is faithful in both views, the first rule's default stands. Test figures are reported, never used "
    "to choose; the probes are checked on the default and reported, never used to choose.")
PROBES = {"How can I stop my depression?": {"top2": {"depression", "stop"}},
          "What are the health benefits of green tea?": {"top4_at_least_3_of": {"health", "benefits", "green", "tea"}}}
REPORT = Path(__file__).resolve().parent / "reports" / "explain_faithfulness.json"


def pair_scorable(name: str) -> None:
    """Refuse, in one line (``StudioError``), a system that cannot score a (query, candidate) pair of its own."""
    from core.registry import get_spec, parse_name
    from core.serving.pair_scoring import check_spec

    check_spec(get_spec(parse_name(name).system))


def _pairs(dataset, split: str, n: int, seed: int = 13) -> list[tuple[str, str]]:
    pairs = dataset.pairs[split]
    idx = np.random.default_rng(seed).choice(len(pairs), size=min(n, len(pairs)), replace=False)
    return [(dataset.corpus[pairs[i].id1], dataset.corpus[pairs[i].id2]) for i in sorted(idx)]


def measure(system, spec, method: str, pairs, corpus, stats, stop_words) -> dict:
    """Faithfulness with CIs and plausibility of one explanation over ``pairs``."""
    from core.analysis.explanation_quality import pairwise_faithfulness
    from core.analysis.keyword_quality import plausibility
    from core.analysis.keywords import word_importance
    from core.serving.pair_scoring import pair_scores

    weights = {(q, d): word_importance(system, q, d, method, corpus=corpus, spec=spec).query for q, d in pairs}
    f = pairwise_faithfulness(pairs, lambda q, d: weights[(q, d)], pair_scores(system, corpus, spec))
    p = plausibility(list(weights.values()), stats.idf, stop_words)
    return {**f.summary, "spearman_idf": p.spearman_idf, "stop_share_top2": p.stop_share_top2,
            "plausible": p.passes}


def per_item_ms(explain: Callable[[object], object], items: Sequence) -> dict:
    """Median and p90 milliseconds of ``explain(item)`` over ``items``, after the first two as warm-up."""
    for item in items[:2]:
        explain(item)
    times = []
    for item in items:
        t0 = time.perf_counter()
        explain(item)
        times.append(1000 * (time.perf_counter() - t0))
    return {"median_ms": round(float(np.median(times)), 1), "p90_ms": round(float(np.quantile(times, .9)), 1)}


def latency(system, spec, method: str, pairs, corpus) -> dict:
    """Milliseconds to explain one pair, once loaded (two warm-up pairs first)."""
    from core.analysis.keywords import word_importance

    timing = per_item_ms(lambda pair: word_importance(system, *pair, method, corpus=corpus, spec=spec), pairs)
    return {**timing, "pairs": len(pairs)}


def query_view_probes(system, dataset, first_stage) -> dict[str, tuple[object, bool]]:
    """Each probe of the Keywords page as ``core explain`` without a candidate answers it: the query's words weighed
    by what they do to the system's own top 10 (``core.analysis.ranking_importance``; a reranker over
    ``first_stage``'s pool), and whether its top words pass the probe's rule: ``query -> (weights, passes)``."""
    from core.analysis.ranking_importance import ranking_importance
    from core.retrieval.base import Reranker

    out = {}
    for query, want in PROBES.items():
        ranked = ranking_importance(system, query, dataset,
                                    first_stage=first_stage if isinstance(system, Reranker) else None)
        top = [x.lower() for x in ranked.ranked(4)]
        if "top2" in want:
            out[query] = (ranked, set(top[:2]) == want["top2"])
        else:
            out[query] = (ranked, len(set(top) & want["top4_at_least_3_of"]) >= 3)
    return out


def probes(system, spec, method: str, dataset, first_stage) -> dict:
    """The two probes on an explanation (:func:`query_view_probes`); beside them, the pair's weights against the
    system's top hit."""
    from core.analysis.keywords import word_importance

    out = {}
    for query, (ranked, ok) in query_view_probes(system, dataset, first_stage).items():
        cand = dataset.corpus[ranked.top[0]]
        pair = word_importance(system, query, cand, method, corpus=dataset.corpus, spec=spec)
        out[query] = {"measure": ranked.measure, "query": [[k, round(float(x), 4)] for k, x in ranked.query],
                      "top4": ranked.ranked(4), "passes": ok, "candidate": cand,
                      "pair_query": [[k, round(float(x), 4)] for k, x in pair.query]}
    return out


def decide(dev_rows: list[dict]) -> dict:
    """DECISION_RULE on the dev rows: the Keywords page's default (system, method), or None with the reason."""
    faithful = [r for r in dev_rows if r["more_faithful_than_random"]]
    if not faithful:
        return {"default": None, "why": "no explanation is more faithful than random on dev pairs"}
    plausible = [r for r in faithful if r["plausible"]]
    pool = plausible or faithful
    best = sorted(pool, key=lambda r: (-r["gain"], r.get("median_ms", 0.0)))[0]
    return {"default": {"system": best["system"], "method": best["method"]},
            "why": f"largest dev gain {best['gain']:+.3f} SD among the "
                   + ("faithful and plausible" if plausible else "faithful (none plausible)") + " explanations"}


def decide_amended(dev_rows: list[dict], query_dev: dict[str, dict]) -> dict:
    """AMENDED_RULE on the dev rows of both views (``query_dev``: system -> its dev query-view row); without any
    explanation faithful in both, the first rule's decision."""
    faithful = [r for r in dev_rows if r["more_faithful_than_random"]
                and (query_dev.get(r["system"]) or {}).get("more_faithful_than_random")]
    if not faithful:
        first = decide(dev_rows)
        return {**first, "why": first["why"] + "; no explanation is faithful in both views on dev, so the first "
                                               "rule's default stands"}
    plausible = [r for r in faithful if r["plausible"] and query_dev[r["system"]]["plausible"]]
    pool = plausible or faithful
    by_pair = sorted(pool, key=lambda r: -r["gain"])
    by_query = sorted(pool, key=lambda r: -query_dev[r["system"]]["gain"])
    rank = {id(r): by_pair.index(r) + 1 + by_query.index(r) + 1 for r in pool}
    best = sorted(pool, key=lambda r: (rank[id(r)], -r["gain"], r.get("median_ms", 0.0)))[0]
    return {"default": {"system": best["system"], "method": best["method"]},
            "why": f"smallest sum of ranks ({rank[id(best)]}) by dev pair gain ({best['gain']:+.3f} SD) and dev query "
                   f"gain ({query_dev[best['system']]['gain']:+.3f}) among the "
                   + ("faithful and plausible in both views" if plausible else "faithful in both views (none "
                      "plausible in both)") + " explanations"}


def markdown(report: dict) -> str:
    """The report as a short Markdown table (test pairs), the verdict per explanation, the decision and probes."""
    lines = [f"# Word importance of every system: faithfulness on held-out QQP pairs", "",
             f"`{report['command']}` at commit {report['commit']}; {report['test_pairs']} test pairs (the figures), "
             f"{report['dev_pairs']} dev pairs (the decision). Units: the system's score SD over the pairs. "
             "CIs: 95% bootstrap over pairs.", "",
             "| system | method | comp top | comp random | suff top | suff random | ρ IDF | stop top-2 | ms/pair | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    fmt = lambda c: f"{c[0]:.3f} [{c[1]:.3f}, {c[2]:.3f}]"  # noqa: E731
    for r in report["test"]:
        lat = report["latency"].get(f"{r['system']} {r['method']}", {})
        lines.append(f"| {r['system']} | {r['method']} | {fmt(r['comprehensiveness']['top'])} | "
                     f"{fmt(r['comprehensiveness']['random'])} | {fmt(r['sufficiency']['top'])} | "
                     f"{fmt(r['sufficiency']['random'])} | {r['spearman_idf']:+.2f} | {r['stop_share_top2']:.0%} | "
                     f"{lat.get('median_ms', '')} | {r['verdict']} |")
    first = report.get("first_decision")
    if first:
        lines += ["", f"First decision rule: {first['decision_rule']}", "",
                  f"First default: {first['default']} ({first['why']}). Probes on it: "
                  + "; ".join(f"{q}: top-4 {p['top4']} → {'passes' if p['passes'] else 'FAILS'}"
                              for q, p in first.get("probes", {}).items()) + "."]
    lines += ["", f"{'Amended d' if first else 'D'}ecision rule: {report['decision_rule']}", "",
              f"Default: {report['default']} ({report['why']})."
              + (f" The query view's figures: {report['query_view_report']}." if report.get("query_view_report") else "")]
    if report.get("probes"):
        lines += ["", "Probes on the default (as `core explain` without a candidate: the query's words weighed by what "
                      "they do to the system's own top 10, 1 − RBO with the word left out):"]
        lines += [f"- {q}: top-4 {p['top4']} → {'passes' if p['passes'] else 'FAILS'}"
                  for q, p in report["probes"].items()]
    if report["skipped"]:
        lines += ["", "Not measured: " + "; ".join(f"{k} ({v})" for k, v in report["skipped"].items())]
    return "\n".join(lines) + "\n"


def write(args, argv, dataset, dev, test, rows_dev, rows_test, lat, skipped, loaded, t0, final=False) -> None:
    """The report so far (written after each explanation, so a long run leaves what it measured), with the
    decision and, at the end, the probes on the chosen default."""
    from bench.reporting import head_commit, write_report
    from core.registry import default_first_stage
    from core.serving.loader import load

    decision = decide(rows_dev)
    probe = {}
    if final and decision["default"]:
        system, spec = loaded[decision["default"]["system"]]
        probe = probes(system, spec, decision["default"]["method"], dataset, load(default_first_stage(), dataset))
    import sys

    report = {"command": "python -m bench.explain_faithfulness " + " ".join(sys.argv[1:] if argv is None else argv),
              "commit": head_commit(),
              "dataset": dataset.name, "test_pairs": len(test), "dev_pairs": len(dev), "complete": final,
              "decision_rule": DECISION_RULE, **decision, "probes": probe, "test": rows_test, "dev": rows_dev,
              "latency": lat, "skipped": skipped, "seconds": round(time.time() - t0, 1)}
    write_report(args.out, report)
    Path(args.out).with_suffix(".md").write_text(markdown(report), encoding="utf-8")


def finish(path: Path, dataset) -> int:
    """Complete an interrupted run's report: the decision on its dev rows and the probes on that default; the
    systems it never reached are listed as not measured."""
    import json

    from bench.reporting import write_report
    from core.registry import default_first_stage, get_spec, list_systems, parse_name
    from core.serving.loader import load

    report = json.loads(path.read_text(encoding="utf-8"))
    report.update(decide(report["dev"]))
    measured = {r["system"] for r in report["dev"]} | set(report["skipped"])
    for name in [s.name for s in list_systems() if s.pair_scoring]:
        if name not in measured:
            report["skipped"][name] = ("not measured: still building when the run started, or not reached before "
                                       "it was stopped (CPU budget)")
    if report["default"]:
        name = report["default"]["system"]
        spec = get_spec(parse_name(name).system)
        report["probes"] = probes(load(name, dataset), spec, report["default"]["method"], dataset,
                                  load(default_first_stage(), dataset))
    report["complete"] = False
    write_report(path, report)
    path.with_suffix(".md").write_text(markdown(report), encoding="utf-8")
    return 0


def latency_report(names: list[str], pairs, dataset, out: Path, argv) -> int:
    """One pair explained, once loaded, for every system of ``names`` and method it offers (:func:`latency`),
    the 1-minute load average before and after each and the Python speed probe: ``out``."""
    import os
    import sys

    from bench.error_analysis_speed import python_speed
    from bench.reporting import head_commit, write_report
    from core.analysis.keywords import offered_methods
    from core.registry import get_spec, parse_name

    rows, skipped = [], {}
    probe = python_speed()
    for name, system in each_loaded(names, dataset, skipped, check=pair_scorable):
        spec = get_spec(parse_name(name).system)
        for method in offered_methods(system, spec):
            before = os.getloadavg()[0]
            got = latency(system, spec, method, pairs, dataset.corpus)
            rows.append({"system": name, "method": method, **got, "load_before": round(before, 2),
                         "load_after": round(os.getloadavg()[0], 2)})
            print(rows[-1], flush=True)
    write_report(out, {"command": "python -m bench.explain_faithfulness " + " ".join(argv or sys.argv[1:]),
                       "commit": head_commit(), "dataset": dataset.name, "pairs": len(pairs),
                       "python_speed_s": probe, "rows": rows, "skipped": skipped})
    return 0


def main(argv: list[str] | None = None) -> int:
    from core.data.datasets import load_dataset
    from core.data.keywords import KeywordTagger, LexicalStats
    from core.analysis.keywords import offered_methods
    from core.registry import get_spec, list_systems, parse_name

    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--test-pairs", type=int, default=500)
    ap.add_argument("--dev-pairs", type=int, default=200)
    ap.add_argument("--latency-pairs", type=int, default=20)
    ap.add_argument("--systems", default="", help="comma-separated (default: every system that scores pairs)")
    ap.add_argument("--out", default=str(REPORT))
    ap.add_argument("--latency-only", metavar="OUT", default=None,
                    help="measure only one pair's explanation time per system and method (--latency-pairs test "
                         "pairs), with the load average, into the report OUT")
    ap.add_argument("--finish", action="store_true",
                    help="an interrupted run: decide on the report's own dev rows and check the probes on the default")
    args = ap.parse_args(argv)
    dataset = load_dataset(args.dataset)
    if args.finish:
        return finish(Path(args.out), dataset)
    names = [s for s in args.systems.split(",") if s] or [s.name for s in list_systems() if s.pair_scoring]
    dev, test = _pairs(dataset, "dev", args.dev_pairs), _pairs(dataset, "test", args.test_pairs)
    stats = LexicalStats.from_texts(dataset.corpus.values())
    stop_words = KeywordTagger().stop_words

    rows_dev, rows_test, lat, skipped, loaded = [], [], {}, {}, {}
    t0 = time.time()
    if args.latency_only:
        return latency_report(names, test[:args.latency_pairs], dataset, Path(args.latency_only), argv)
    for name, system in each_loaded(names, dataset, skipped, check=pair_scorable, say=lambda s: print(s, flush=True)):
        spec = get_spec(parse_name(name).system)
        loaded[name] = (system, spec)
        for method in offered_methods(system, spec):
            start = time.time()
            lat[f"{name} {method}"] = latency(system, spec, method, test[:args.latency_pairs], dataset.corpus)
            for split, pairs, rows in (("dev", dev, rows_dev), ("test", test, rows_test)):
                row = {"system": name, "method": method, "split": split,
                       **measure(system, spec, method, pairs, dataset.corpus, stats, stop_words),
                       "median_ms": lat[f"{name} {method}"]["median_ms"]}
                rows.append(row)
            print(f"{name} {method}: {time.time() - start:.0f}s; test {rows_test[-1]['verdict']}; "
                  f"latency {lat[f'{name} {method}']}", flush=True)
            write(args, argv, dataset, dev, test, rows_dev, rows_test, lat, skipped, loaded, t0)  # after each
    write(args, argv, dataset, dev, test, rows_dev, rows_test, lat, skipped, loaded, t0, final=True)
    return 0


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
