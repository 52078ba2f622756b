"""Render the reranker benchmark JSON files (bench/reports/*.json) as the markdown tables of
bench/reports/rerankers.md. Usage: python bench/rerank_report.py"""
from __future__ import annotations

import json
from pathlib import Path

R = Path(__file__).resolve().parent / "reports"


def load(name: str):
    path = R / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def pct(x) -> str:
    return "—" if x is None or x != x else f"{100 * x:.2f}"


def pairs_table(rows: list[tuple[str, dict]]) -> str:
    out = ["| model | Acc (%) | AUC (%) | Acc hard | Acc easy | Acc middle |", "|---|---|---|---|---|---|"]
    for name, r in rows:
        out.append(f"| {name} | {pct(r['acc'])} | {pct(r['auc'])} | {pct(r['acc_hard'])} | {pct(r['acc_easy'])} | {pct(r['acc_middle'])} |")
    return "\n".join(out)


def rerank_table(name: str, rr: dict) -> str:
    out = [f"| first stage → {name} | MAP@20 before | after | MRR before | after | P@1 before | after | s/query |",
           "|---|---|---|---|---|---|---|---|"]
    for stage in ("bm25", "minilm@mean"):
        if stage not in rr:
            continue
        b, a = rr[stage]["before"], rr[stage]["after"]
        out.append(f"| {stage} top-20 | {b['map@20']:.4f} | {a['map@20']:.4f} | {b['mrr@100']:.4f} | {a['mrr@100']:.4f} | "
                   f"{b['precision@1']:.4f} | {a['precision@1']:.4f} | {rr[stage]['rerank_seconds_per_query']:.3f} |")
    lat = rr.get("latency_ms_20")
    if lat:
        out.append(f"\nRerank latency, 1 query × 20 candidates (warm, n={lat['n']}): p50 {lat['p50']:.1f} ms, p90 {lat['p90']:.1f} ms")
    return "\n".join(out)


def main() -> None:
    for name in ("frm_full", "cnn_qqp"):
        r = load(name)
        if r:
            print(f"### {name}\n")
            print(pairs_table([(name, r["test_pairs"])]))
            if "rerank" in r:
                print()
                print(rerank_table(name, r["rerank"]))
            print()
    rows = []
    for name in ("frm_ablations", "frm_baselines"):
        r = load(name)
        if r:
            rows += [(k, v) for k, v in r.items() if k != "settings" and isinstance(v, dict)]
    if rows:
        print("### ablations / baselines\n")
        print(pairs_table(rows))
        print()
    for name in ("cnn_trecqa", "cnn_trecqa_nofeat"):
        r = load(name)
        if r:
            print(f"### {name} (best dev MAP {r['build']['best_dev_map']:.4f}, epoch {r['build']['best_epoch']}, "
                  f"build {r['build_seconds']:.0f} s)\n")
            print("| split | queries (with a relevant answer) | MAP | MRR | MAP (all queries) | MRR (all queries) |")
            print("|---|---|---|---|---|---|")
            for split, v in r["eval"].items():
                d, a = v["dropping_queries_without_relevant"], v["all_queries_zero_if_no_relevant"]
                print(f"| {split} | {v['queries']} ({v['queries_with_relevant']}) | {d['map@1000']:.4f} | {d['mrr@1000']:.4f} | "
                      f"{a['map@1000']:.4f} | {a['mrr@1000']:.4f} |")
            print()


if __name__ == "__main__":
    main()
