"""Typed vs tokenized queries: every system on the QQP held-out test queries in both forms.

``tokenized`` = the query as the dataset stores it (CoreNLP tokens: "How can I stop my depression ?"),
``typed`` = its display form, as people write it ("How can I stop my depression?"). Same artifacts, same
runner as ``python -m core eval --query-form ...``: each query dropped from its own ranking, exact
serving (each system's default), rerankers over BM25's top 20.

Scored by ``core.evaluation_contract.evaluate_contract`` (trec_eval's query set and tie order), the one contract.

Usage: QRS_VAR=... python -m bench.query_forms [--systems bm25 minilm ...] [--split test] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path


DEFAULT_SYSTEMS = ["bm25", "minilm", "glove-mean", "dual-encoder", "densetrans", "densetrans@paper-objective",
                   "densetrans@-AllDense", "densetrans@-TopDense", "densetrans@+Concat", "sdml-cnn", "sdml-cnn@tl-ssd", "sdml-cnn@tl-euc", "tree-bert", "frm",
                   "frm@kw-loss", "cnn-rerank", "cross-encoder", "minilm-pairs"]
METRICS = ["recall@100", "hit_rate@1", "mrr@100", "ndcg@10", "map@100"]


def main() -> None:
    from core.evaluation import TIE_RULES
    from core.evaluation_contract import evaluate_contract
    from core.data.datasets import load_dataset
    from core.errors import StudioError
    from core.registry import get_spec
    from core.serving.loader import FIRST_STAGE, RERANK_DEPTH
    from core.serving.runner import SystemChoice, loader_for, rank_many

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--systems", nargs="*", default=DEFAULT_SYSTEMS)
    ap.add_argument("--split", default="test")
    ap.add_argument("--out", default="bench/reports/query_forms.json")
    ap.add_argument("--update", action="store_true",
                    help="keep the other systems' rows of an existing report (each row keeps its own commit)")
    args = ap.parse_args()
    ds = load_dataset(args.dataset)
    qrels = ds.split_qrels(args.split)
    stored = {q: ds.queries[q] for q in qrels}
    forms = {form: ds.in_form(stored, form) for form in ("tokenized", "typed")}
    changed = sum(forms["typed"][q] != stored[q] for q in stored)
    cache: dict = {}
    base = loader_for(ds)

    def load(name, variant=None, options=()):  # noqa: ANN001, ANN202 - the runner's Loader, memoised
        key = (name, variant, tuple(options))
        if key not in cache:
            cache[key] = base(name, variant, options)
        return cache[key]

    rows = []
    for name in args.systems:
        reranker = get_spec(name).kind == "reranker"
        choice = SystemChoice(name, first_stage=FIRST_STAGE if reranker else None, depth=RERANK_DEPTH)
        row: dict = {"system": name, "kind": "reranker over bm25 top 20" if reranker else "first stage"}
        try:
            for form, queries in forms.items():
                start = time.perf_counter()
                rankings = rank_many(choice, ds, queries, k=100, load=load)
                scored = evaluate_contract(qrels, rankings, METRICS).all  # QQP: every query answerable
                row[form] = {m: round(v, 4) for m, v in scored.items()}
                row[form]["seconds"] = round(time.perf_counter() - start, 1)
        except StudioError as exc:
            row["error"] = str(exc)
            print(f"{name}: {exc}")
            rows.append(row)
            continue
        row["delta_typed_minus_tokenized"] = {m: round(row["typed"][m] - row["tokenized"][m], 4) for m in METRICS}
        rows.append(row)
        print(f"{name:14s} R@100 {row['tokenized']['recall@100']:.4f} -> {row['typed']['recall@100']:.4f}   "
              f"H@1 {row['tokenized']['hit_rate@1']:.4f} -> {row['typed']['hit_rate@1']:.4f}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    for row in rows:
        row["commit"] = commit
        row["scorer"] = "evaluate_contract (trec_eval ties)"
    if args.update and Path(args.out).is_file():
        done = {row["system"] for row in rows}
        old = json.loads(Path(args.out).read_text(encoding="utf-8"))
        rows = [r for r in old["rows"] if r["system"] not in done] + rows
        order = {name: i for i, name in enumerate(DEFAULT_SYSTEMS)}
        rows.sort(key=lambda r: order.get(r["system"], len(order)))
    report = {"command": "python -m bench." + Path(__file__).stem + (" " + " ".join(sys.argv[1:]) if not args.update
                                                                      else ""), "commit": commit,
              "machine": platform.platform(), "dataset": ds.name, "split": args.split, "queries": len(qrels),
              "queries_whose_typed_form_differs": changed,
              "scorer": "evaluate_contract", "ties": "trec_eval", "tie_rule": TIE_RULES["trec_eval"],
              "unanswerable": "none on QQP: every held-out query has a paraphrase ('all' = 'answerable')",
              "protocol": "each query removed from its own ranking; exact serving (each system's default); "
                          "rerankers rescore BM25's top 20; MiniLM-derived systems (minilm, tree-bert, frm, "
                          "cross-encoder, minilm-pairs) use all-MiniLM-L6-v2, pre-trained on data that includes "
                          "Quora duplicates", "rows": rows}
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
