"""Render bench/reports/tree_bert_results.jsonl (written by bench/tree_eval.py) as markdown tables.

Usage: .venv/bin/python bench/tree_table.py [filter-substring]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

PATH = Path(__file__).resolve().parent / "reports" / "tree_bert_results.jsonl"
COLS = ["map@20", "precision@1", "mrr@20", "ndcg@20", "mrr@10"]


def label(row: dict) -> str:
    if row.get("system") == "tree":
        extra = f", probes={row['probes']}" if row.get("probes") != row.get("K") else ""
        shape = f"leaf≤{row['leaf_size']}, balanced" if row.get("balanced") else "paper shape"
        return f"{row['K']}-K tree ({shape}), beam={row['beam']}{extra}"
    if "params" in row:
        return f"{row['system']} {row['params']}"
    if "budget" in row:
        return f"{row['system']} budget={row['budget']}"
    return row["system"]


def main(filt: str = "") -> None:
    rows = [json.loads(line) for line in PATH.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if "system" in r and filt in json.dumps(r)]
    print("| system | split (queries) | MAP@20 | P@1 | MRR@20 | NDCG@20 | MRR@10 | computations/query | ms/query |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        comp = r.get("distance_computations", r.get("pair_scorings", ""))
        kind = "pairs" if "pair_scorings" in r else ""
        print(f"| {label(r)} | {r.get('split', '')} ({r['queries']}) | "
              + " | ".join(f"{r[c]:.3f}" for c in COLS)
              + f" | {comp:,.0f} {kind} | {r['ms_per_query']} |" if comp != "" else
              f"| {label(r)} | {r.get('split', '')} ({r['queries']}) | " + " | ".join(f"{r[c]:.3f}" for c in COLS)
              + f" | | {r['ms_per_query']} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
