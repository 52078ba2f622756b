"""The Keywords page's two probes on every system's query view: which systems pass them, beside the default.

    python -m bench.explain_probes [--dataset qqp-bimpm] [--systems bm25,dual-encoder,...]

Issue-given probes (``bench.explain_decision.PROBES``): for "How can I stop my depression?" the two most
important query words must be depression and stop; for "What are the health benefits of green tea?" three of
health, benefits, green and tea must be among the top four. Each is answered as ``python -m core explain --system
S QUERY`` answers it without a candidate: the query's words weighed by what each does to the system's own top 10
(``core.analysis.ranking_importance``; a reranker over the default first stage's top 20). The default itself is
chosen by ``bench.explain_decision.PROBE_GATE_RULE``: the first of the dev-faithfulness order whose query view passes
both probes (``bench.query_view_faithfulness`` asks them in that order, no further than the first that passes);
this report answers them for every system, so that a reader sees what each other choice would have meant.
Writes ``bench/reports/explain_probes.json`` and ``.md``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench.explain_decision import PROBES
from bench.explain_faithfulness import REPORT as PAIR_REPORT, query_view_probes
from bench.loaded_systems import each_loaded

__all__ = ["REPORT", "main", "markdown", "probe_rows"]

REPORT = Path(__file__).resolve().parent / "reports" / "explain_probes.json"


def probe_rows(names: list[str], dataset) -> tuple[list[dict], dict[str, str]]:
    """Each system's answer to both probes (its top four query words, pass or fail); the systems that could not be
    loaded, with the reason."""
    from core.registry import contamination_note, default_first_stage
    from core.serving.loader import load

    first = load(default_first_stage(), dataset)
    rows, skipped = [], {}
    for name, system in each_loaded(names, dataset, skipped):
        start = time.time()
        got = {q: {"top4": ranked.ranked(4), "passes": ok}
               for q, (ranked, ok) in query_view_probes(system, dataset, first).items()}
        rows.append({"system": name, "minilm_derived": contamination_note(name, dataset.name) is not None,
                     "probes": got, "passes_both": all(p["passes"] for p in got.values()),
                     "seconds": round(time.time() - start, 1)})
        print(f"{name}: " + "; ".join(f"{' '.join(p['top4'])} {'pass' if p['passes'] else 'FAIL'}"
                                      for p in got.values()), flush=True)
    return rows, skipped


def markdown(report: dict) -> str:
    """The report as a Markdown table: each system's top four words per probe and whether it passes both."""
    queries = list(PROBES)
    default = report.get("default") or {}
    lines = ["# The Keywords page's probes on every system's query view", "",
             f"`{report['command']}` at commit {report['commit']}; {report['dataset']}. The default "
             f"({default.get('system', 'none')}) is the first system in the dev-faithfulness order whose query view "
             "passes both probes (the rules: `bench/explain_decision.py`; the order and the decision: "
             "`bench/reports/explain_faithfulness.md`).",
             "", "| system | " + " | ".join(f'"{q}"' for q in queries) + " | both probes |",
             "|---|" + "---|" * (len(queries) + 1)]
    for row in report["rows"]:
        cells = [", ".join(row["probes"][q]["top4"]) + ("" if row["probes"][q]["passes"] else " (fails)")
                 for q in queries]
        mark = " ¹" if row.get("minilm_derived") else ""
        mark += " (the default)" if row["system"] == default.get("system") else ""
        both = "yes" if row["passes_both"] else "no"
        lines.append(f"| {row['system']}{mark} | " + " | ".join(cells) + f" | {both} |")
    if any(row.get("minilm_derived") for row in report["rows"]):
        lines += ["", "¹ MiniLM-derived: all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates."]
    if report["skipped"]:
        lines += ["", "Not measured: " + "; ".join(f"{k} ({v})" for k, v in report["skipped"].items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from bench.reporting import head_commit, write_report
    from core.data.datasets import load_dataset

    ap = argparse.ArgumentParser(prog="python -m bench.explain_probes", description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--systems", default="", help="comma-separated (default: every system of the pair-view report)")
    ap.add_argument("--pair-report", default=str(PAIR_REPORT), help="the report that names the systems and the default")
    ap.add_argument("--out", default=str(REPORT))
    args = ap.parse_args(argv)
    pair = json.loads(Path(args.pair_report).read_text(encoding="utf-8"))
    names = [s for s in args.systems.split(",") if s] or list(dict.fromkeys(r["system"] for r in pair["dev"]))
    dataset = load_dataset(args.dataset)
    t0 = time.time()
    rows, skipped = probe_rows(names, dataset)
    report = {"command": " ".join(["python -m bench.explain_probes", *(sys.argv[1:] if argv is None else argv)]),
              "commit": head_commit(), "dataset": dataset.name, "default": pair.get("default"),
              "probes": {q: {k: sorted(v) for k, v in want.items()} for q, want in PROBES.items()},
              "measure": "the query view: 1 - RBO(p = 0.9) of the system's own top 10 with each word left out",
              "rows": rows, "skipped": skipped, "seconds": round(time.time() - t0, 1)}
    out = Path(args.out)
    write_report(out, report)
    out.with_suffix(".md").write_text(markdown(report), encoding="utf-8")
    print(f"{sum(r['passes_both'] for r in rows)} of {len(rows)} systems pass both probes; wrote {out}")
    return 0


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
