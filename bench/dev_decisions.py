"""Choices re-decided on the dev split only (issue 20 item 5): test is kept for the final tables.

Each choice has a rule fixed before its numbers are read, applied to the QQP *dev* queries (1,790, against
the full 36,737-question collection, each query dropped from its own ranking, exact serving), and the
report says what the rule picks and whether it is what the code serves:

- ``tree-k``: the tree's branching K among the paper's 5 / 8 / 10 (tree-search-bert-guo.md §4.3) at the
  paper's beam N = 20. Rule: the highest dev MAP@20 (distance computations per query reported beside).
- ``int8``: MiniLM encoding with ONNX Runtime's dynamic int8 quantization against fp32. Rule (issue 14's
  tolerance): int8 may be the default only if |dev MAP@100 (int8) − dev MAP@100 (fp32)| ≤ 0.001.
- ``frm-keyword-loss``: FRM with the keyword-agreement loss against FRM with Eq. (18) alone (the default and
  ``frm@kw-loss``, each labelled by the weight in its saved config). Rule: the project's extra loss stays only if its dev
  pair AUC (the metric both trainings early-stop on) is higher; dev reranking of BM25's top 20 reported beside.

    .venv/bin/python -m bench.dev_decisions [--parts tree-k int8 frm-keyword-loss]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "reports" / "dev_decisions.json"
SPLIT = "dev"


def _commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def tree_k(dataset, queries, qrels) -> dict:
    """MAP@20 / P@1 / MRR@20 and distance computations for K = 5, 8, 10 at beam 20 on dev."""
    from core.analysis.evaluation import evaluate_run
    from core.retrieval.tree import TreeBertConfig
    from core.serving.runner import SystemChoice, rank_many

    rows = []
    for k in (5, 8, 10):
        choice = SystemChoice("tree-bert", options=(("K", k), ("beam", 20)))
        t0 = time.perf_counter()
        run = rank_many(choice, dataset, queries, k=20)
        scores = evaluate_run(qrels, run, ["map@20", "precision@1", "mrr@20"])
        computations = float(np.mean([r.stats.get("distance_computations", np.nan) for r in run.values()]))
        rows.append({"K": k, "beam": 20, **{m: round(v, 4) for m, v in scores.items()},
                     "distance_computations_per_query": round(computations, 1),
                     "seconds": round(time.perf_counter() - t0, 1)})
        print(json.dumps(rows[-1]), flush=True)
    best = max(rows, key=lambda r: r["map@20"])
    served = TreeBertConfig().branching
    return {"rule": "highest dev MAP@20 among K = 5, 8, 10 at beam N = 20 (the paper's values)",
            "rows": rows, "chosen_K": best["K"], "served_K": served, "served_is_chosen": best["K"] == served}


def int8(dataset, queries, qrels) -> dict:
    """MiniLM fp32 (the default backend) against ONNX int8 on dev: MAP@100, R@100, H@1."""
    from core.analysis.evaluation import evaluate_run
    from core.retrieval.bert import MiniLMEncoder
    from core.retrieval.dense import DenseRetriever, cached_embeddings
    from core.retrieval.indexing import IndexSpec
    from core.serving.loader import load

    metrics = ["map@100", "recall@100", "hit_rate@1"]
    fp32 = load("minilm", dataset)
    encoder = MiniLMEncoder.pretrained("mean", backend="onnx-int8")
    vectors = cached_embeddings(encoder, dataset.corpus)
    quantized = DenseRetriever.from_vectors("minilm-int8", encoder, dataset.corpus, vectors, IndexSpec("Flat"))
    rows = {}
    for name, system in (("fp32", fp32), ("int8", quantized)):
        run = system.search_many(queries, k=100, ignore_identical_ids=True)
        rows[name] = {m: round(v, 5) for m, v in evaluate_run(qrels, run, metrics).items()}
        print(json.dumps({name: rows[name]}), flush=True)
    delta = rows["int8"]["map@100"] - rows["fp32"]["map@100"]
    return {"rule": "int8 may be the default only if |dev MAP@100(int8) - dev MAP@100(fp32)| <= 0.001",
            "encoder_fp32": fp32.encoder.encoder_id, "encoder_int8": encoder.encoder_id, "rows": rows,
            "delta_map@100": round(delta, 5), "int8_within_tolerance": abs(delta) <= 0.001}


def frm_keyword_loss(dataset, queries, qrels, variant: str) -> dict:
    """Dev pair AUC of the two FRM trainings (their own early-stopping logs) and dev reranking of BM25's top 20."""
    from core.analysis.evaluation import evaluate_run
    from core.artifacts import load_json
    from core.registry import system_dir
    from core.serving.loader import FIRST_STAGE, RERANK_DEPTH, load
    from core.serving.runner import SystemChoice, rank_many

    first = load(FIRST_STAGE, dataset).search_many(queries, k=RERANK_DEPTH, ignore_identical_ids=True)
    rows = {}
    for var in (None, variant):
        command = f"python -m core train --system frm{' --variant ' + var if var else ''}"
        folder = system_dir(dataset.name, "frm", var)
        metrics = load_json(folder / "metrics.json", f"frm {var or ''}", command)
        weight = float(load_json(folder / "config.json", f"frm {var or ''}", command)["train"]["keyword_loss"])
        label = (f"with keyword-agreement loss (weight {weight:g})" if weight else "Eq. (18) only (paper loss)")
        training = metrics.get("training", metrics)
        run = rank_many(SystemChoice("frm", variant=var, first_stage=FIRST_STAGE), dataset, queries, k=RERANK_DEPTH,
                        first_stage=first)
        ranking = evaluate_run(qrels, run, ["hit_rate@1", "mrr@20"])
        rows[label] = {"variant": var or "(default)", "dev_auc_best": training.get("best_dev"),
                       "best_step": training.get("best_step"), "stopped": training.get("stopped"),
                       **{f"dev_rerank_bm25_top{RERANK_DEPTH}_{m}": round(v, 4) for m, v in ranking.items()}}
        print(json.dumps({label: rows[label]}), flush=True)
    with_kw = next(r for label, r in rows.items() if label.startswith("with"))
    without = next(r for label, r in rows.items() if not label.startswith("with"))
    keep = (with_kw["dev_auc_best"] or 0) > (without["dev_auc_best"] or 0)
    return {"rule": "keep the keyword-agreement loss only if its best dev pair AUC is higher than Eq. (18) alone",
            "rows": rows, "keep_keyword_loss": keep}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--parts", nargs="+", default=["tree-k", "int8", "frm-keyword-loss"])
    ap.add_argument("--frm-variant", default="kw-loss",
                    help="the FRM recipe built beside the default with the other setting of the keyword-agreement term")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    from core.data.datasets import load_dataset

    dataset = load_dataset(args.dataset)
    qrels = dataset.split_qrels(SPLIT)
    queries = {q: dataset.queries[q] for q in qrels}
    out = Path(args.out)
    report = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {"decisions": {}}
    started = time.perf_counter()
    for part in args.parts:
        t0 = time.perf_counter()
        if part == "tree-k":
            result = tree_k(dataset, queries, qrels)
        elif part == "int8":
            result = int8(dataset, queries, qrels)
        elif part == "frm-keyword-loss":
            result = frm_keyword_loss(dataset, queries, qrels, args.frm_variant)
        else:
            raise SystemExit(f"unknown part {part!r}: tree-k, int8, frm-keyword-loss")
        report["decisions"][part] = {**result, "commit": _commit(), "seconds": round(time.perf_counter() - t0, 1),
                                     "command": f".venv/bin/python -m bench.dev_decisions --parts {part}"}
    report.update({
        "command": ".venv/bin/python -m bench.dev_decisions " + " ".join(argv if argv is not None else sys.argv[1:]),
        "commit": _commit(), "machine": platform.platform(), "dataset": args.dataset, "split": SPLIT,
        "queries": len(queries), "collection": len(dataset.corpus),
        "protocol": "dev queries against the full collection, each dropped from its own ranking, exact serving; "
                    "test queries are not read by this script",
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "seconds_this_run": round(time.perf_counter() - started, 1)})
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
