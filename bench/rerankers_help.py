"""Do the trained rerankers beat their references on held-out queries once interpolated with their first stage?

    python -m bench.rerankers_help [--dataset qqp-bimpm] [--systems cnn-rerank,frm,cross-encoder]

For each built trained reranker: the dev choice of α (``core.rerank.interpolation``: the rule, the dev MRR@100
and H@1 of every α, stored beside the model at build time), and on the held-out test queries (BM25's top 20,
each query removed from its own ranking; ``core.analysis.held_out``) H@1 and MRR@100 of the reranker alone
(α = 0), of the served ranking (the chosen α) and of its reference. A system that is not built is listed as such.
Writes ``bench/reports/rerankers_help.json``.
"""
from __future__ import annotations

import argparse
import time


def main(argv: list[str] | None = None) -> int:
    from bench.reporting import head_commit, write_report
    from core.analysis.evaluation import evaluate_run
    from core.analysis.held_out import METRICS, held_out_verdict, reference_of
    from core.data.datasets import load_dataset
    from core.registry import system_dir, system_module
    from core.rerank import interpolation
    from core.serving.loader import load
    from core.serving.runner import SystemChoice, rank_many

    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--systems", default="cnn-rerank,frm,cross-encoder")
    ap.add_argument("--out", default="bench/reports/rerankers_help.json")
    args = ap.parse_args(argv)
    dataset = load_dataset(args.dataset)
    qrels = dataset.split_qrels("test")
    queries = {q: dataset.queries[q] for q in qrels}
    rows = []
    for name in [s for s in args.systems.split(",") if s]:
        t0 = time.time()
        if not system_module(name).is_built(dataset):
            rows.append({"system": name, "state": "not built", "command": f"python -m core build --systems {name}"})
            continue
        chosen = interpolation.read(system_dir(dataset.name, name))
        verdict = held_out_verdict(dataset, name)  # the served ranking (α applied by the loader) vs the reference
        alone = load(name, dataset)
        alone.interpolation = None  # the reranker's own scores (α = 0)
        run = rank_many(SystemChoice(name, first_stage="bm25", depth=20), dataset, queries, k=100,
                        load=lambda *_: alone)
        own = {m: round(v, 4) for m, v in evaluate_run(qrels, run, list(METRICS)).items()}
        rows.append({
            "system": name, "reference": reference_of(name),
            "dev_choice": None if chosen is None else {"alpha": chosen.weight, "rule": chosen.rule,
                                                       "first_stage": chosen.first_stage, "depth": chosen.depth,
                                                       "dev_queries": chosen.dev_queries, "dev": chosen.dev},
            "test_queries": len(queries),
            "test_reranker_alone": own,
            "test_served": verdict.scores if verdict else None,
            "test_reference": verdict.reference_scores if verdict else None,
            "below_reference": verdict.below if verdict else None,
            "verdict": verdict.line() if verdict else None,
            "seconds": round(time.time() - t0, 1),
        })
        print(rows[-1], flush=True)
    write_report(args.out, {
        "command": "python -m bench.rerankers_help " + " ".join(argv or []),
        "check": "python -m core eval --system SYSTEM --split test (prints no 'BELOW ITS REFERENCE')",
        "commit": head_commit(), "dataset": dataset.name, "systems": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
