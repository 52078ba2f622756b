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

A system not built (or still building) is listed under ``skipped`` with the reason. The first decision rule
(``bench.explain_decision.DECISION_RULE``, written before any result was seen) is copied into the report and the
issue's two probes are checked on its default; ``bench.query_view_faithfulness`` then applies the later rules.
Writes ``bench/reports/explain_faithfulness.json`` and ``.md``.
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from bench.explain_decision import DECISION_RULE, PROBES, decide
from bench.loaded_systems import each_loaded

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


def probes(system, spec, method: str, dataset, first_stage, answers: dict | None = None) -> dict:
    """The two probes on an explanation (:func:`query_view_probes`, or its ``answers`` when already computed);
    beside them, the pair's weights against the system's top hit."""
    from core.analysis.keywords import word_importance

    out = {}
    for query, (ranked, ok) in (answers or query_view_probes(system, dataset, first_stage)).items():
        cand = dataset.corpus[ranked.top[0]]
        pair = word_importance(system, query, cand, method, corpus=dataset.corpus, spec=spec)
        out[query] = {"measure": ranked.measure, "query": [[k, round(float(x), 4)] for k, x in ranked.query],
                      "top4": ranked.ranked(4), "passes": ok, "candidate": cand,
                      "pair_query": [[k, round(float(x), 4)] for k, x in pair.query]}
    return out


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
    earlier = [("First", report.get("first_decision")), ("Amended", report.get("amended_decision"))]
    for label, decision in [(k, d) for k, d in earlier if d]:
        lines += ["", f"{label} decision rule: {decision['decision_rule']}", "",
                  f"{label} default: {decision['default']} ({decision['why']}). Probes on it: "
                  + "; ".join(f"{q}: top-4 {p['top4']} → {'passes' if p['passes'] else 'FAILS'}"
                              for q, p in decision.get("probes", {}).items()) + "."]
    label = ("Decision rule, amended a second time" if report.get("amended_decision")
             else "Amended decision rule" if report.get("first_decision") else "Decision rule")
    lines += ["", f"{label}: {report['decision_rule']}", "",
              f"Default: {report['default']} ({report['why']})."
              + (f" Decided at commit {report['decided_at']}." if report.get("decided_at") else "")
              + (" Probes asked, in the rule's order: " + ", ".join(f"{k} {'passes' if v else 'fails'}"
                                                                   for k, v in report["gate"].items()) + "."
                 if report.get("gate") else "")
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
