"""SDML-CNN against its triplet-loss baselines TL(SSD) and TL(EUC) (sdml-bonadiman2019.md Tables 3-4) on
the held-out QQP test queries: exact search against the full collection (each query dropped from its own
ranking), ranx ``compare`` with a paired two-sided t-test (and Fisher's randomization test) against SDML,
plus the untrained references (mean GloVe-50d, the untrained CNN) from each build's metrics.json.

Usage: QRS_VAR=... python bench/sdml_compare.py [--runs sdml,tl-ssd,tl-euc] [--stat student|fisher]
       (markdown on stdout; a run is VARIANT or VARIANT:TAG for a bench/sdml_experiments.py --tag folder)
Build first: ``python -m core train --system sdml-cnn [--variant tl-ssd|tl-euc]``.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

METRICS = ["hit_rate@1", "hit_rate@10", "mrr@100", "recall@100"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", default="sdml,tl-ssd,tl-euc")
    ap.add_argument("--stat", default="student", choices=["student", "fisher"])
    args = ap.parse_args()
    from core.data.datasets import load_dataset
    from core.evaluation import as_run, compare_runs, evaluate_run
    from core.retrieval import sdml

    ds = load_dataset("qqp-bimpm")
    qrels = ds.split_qrels("test")
    queries = {q: ds.queries[q] for q in qrels}
    runs, rows = [], []
    for item in args.runs.split(","):
        variant, _, tag = item.partition(":")
        folder = sdml._folder(ds, variant, tag or None)
        _cfg, encoder = sdml._load_model(folder, "bench/sdml_compare.py")
        vectors = encoder.encode(list(ds.corpus.values()), batch_size=512)
        row = {d: i for i, d in enumerate(ds.corpus)}
        qids = list(qrels)
        rankings = sdml.exact_rankings(vectors[[row[q] for q in qids]], qids, vectors, list(ds.corpus), k=100)
        name = "SDML" if variant == "sdml" else {"tl-ssd": "TL(SSD)", "tl-euc": "TL(EUC)"}[variant]
        run = as_run(rankings, name)
        runs.append(run)
        metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
        scores = evaluate_run(qrels, run, METRICS)
        rows.append((name, scores, metrics["training"], metrics))
    print(f"Held-out test queries: {len(qrels):,}; collection {len(ds.corpus):,}; exact search; each query "
          "dropped from its own ranking.\n")
    print("| loss | H@1 | H@10 | MRR@100 | R@100 | best dev H@1 (step) | stopped | steps | train s | untrained CNN test H@1 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, s, tr, m in rows:
        print(f"| {name} | {s['hit_rate@1']:.4f} | {s['hit_rate@10']:.4f} | {s['mrr@100']:.4f} | {s['recall@100']:.4f} | "
              f"{tr['best_dev']:.4f} ({tr['best_step']}) | {tr['stopped']} | {m['steps']} | {m['train_seconds']:.0f} | "
              f"{m['untrained']['test']['hit_rate@1']:.4f} |")
    ref = rows[0][2].get("reference") or {}
    if ref:
        t = ref.get("test_metrics", {})
        print(f"| mean GloVe-50d (untrained reference) | {t.get('hit_rate@1', float('nan')):.4f} | "
              f"{t.get('hit_rate@10', float('nan')):.4f} | {t.get('mrr@100', float('nan')):.4f} | "
              f"{t.get('recall@100', float('nan')):.4f} | {ref['dev']:.4f} (dev) | | | | |")
    report = compare_runs(qrels, runs, METRICS, stat_test=args.stat)
    print(f"\nranx compare ({args.stat}, p < 0.05; superscripts = significantly better than that row):\n")
    print(str(report))


if __name__ == "__main__":
    main()
