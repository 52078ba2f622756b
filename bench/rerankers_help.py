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


def _paired(dataset, name: str, qrels, queries) -> dict | None:
    """Served ranking minus reference per query (stored runs): mean difference and a paired t-test (scipy) for
    H@1 and MRR@100 over the held-out queries."""
    import numpy as np
    from scipy import stats

    from core.analysis import runs
    from core.analysis.held_out import METRICS, reference_of
    from core.evaluation import per_query

    reference = reference_of(name)
    if reference is None:
        return None
    mine, ref = runs.load_runs(dataset, [name, reference], queries, k=100)
    out = {"test": "paired t-test over queries (scipy.stats.ttest_rel), served − reference", "queries": len(qrels)}
    for m in METRICS:
        a, b = per_query(qrels, mine, m), per_query(qrels, ref, m)
        d = np.array([a.get(q, 0.0) - b.get(q, 0.0) for q in qrels])
        p = float(stats.ttest_rel(d, np.zeros_like(d)).pvalue) if np.any(d != 0) else 1.0
        out[m] = {"mean_difference": round(float(d.mean()), 4), "p": p, "queries_better": int((d > 0).sum()),
                  "queries_worse": int((d < 0).sum())}
    return out


def main(argv: list[str] | None = None) -> int:
    from bench.reporting import head_commit, write_report
    from core.evaluation import evaluate_run
    from core.analysis.held_out import METRICS, held_out_verdict, reference_of
    from core.data.datasets import load_dataset
    from core.registry import system_dir, system_module
    from core.rerank import interpolation
    from core.serving.loader import load
    from core.serving.runner import SystemChoice, loader_for, rank_many

    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--systems", default="cnn-rerank,frm,cross-encoder")
    ap.add_argument("--out", default="bench/reports/rerankers_help.json")
    ap.add_argument("--reduced-cnn-epochs", type=int, default=0,
                    help="CPU budget: train the CNN reranker for N epochs only (in the current QRS_VAR) through the "
                         "build (weight chosen on dev, stored run, held-out check) before measuring; 0: use what is built")
    args = ap.parse_args(argv)
    dataset = load_dataset(args.dataset)
    reduced = None
    if args.reduced_cnn_epochs:
        import dataclasses

        from core.build import build_system
        from core.rerank import cnn

        n_train = len(dataset.pairs["train"])
        budget = args.reduced_cnn_epochs * n_train
        quick = cnn.CNNTrainConfig.for_profile
        cnn.CNNTrainConfig.for_profile = classmethod(  # the quick profile with a smaller epoch cap
            lambda cls, profile: dataclasses.replace(quick(profile), quick_pair_budget=budget))
        status = build_system(dataset, "cnn-rerank")
        reduced = {"cnn-rerank": f"{args.reduced_cnn_epochs} epoch(s) of {n_train:,} training pairs (quick profile: "
                                 f"{cnn.CNNTrainConfig().epochs_for(n_train)}); not the default build's model",
                   "build_state": status.state, "build_error": status.error}
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
        served = loader_for(dataset)
        run = rank_many(SystemChoice(name, first_stage="bm25", depth=20), dataset, queries, k=100,
                        load=lambda n, v=None, o=(), a=alone, s=served, me=name: a if n == me else s(n, v, o))
        own = {m: round(v, 4) for m, v in evaluate_run(qrels, run, list(METRICS)).items()}
        rows.append({
            "system": name, "reference": reference_of(name),
            "dev_choice": None if chosen is None else {"alpha": chosen.weight, "rule": chosen.rule,
                                                       "partner": chosen.partner or chosen.first_stage,
                                                       "first_stage": chosen.first_stage, "depth": chosen.depth,
                                                       "dev_queries": chosen.dev_queries, "dev": chosen.dev},
            "test_queries": len(queries),
            "test_reranker_alone": own,
            "test_served": verdict.scores if verdict else None,
            "test_reference": verdict.reference_scores if verdict else None,
            "below_reference": verdict.below if verdict else None,
            "verdict": verdict.line() if verdict else None,
            "served_vs_reference": _paired(dataset, name, qrels, queries),
            "seconds": round(time.time() - t0, 1),
        })
        print(rows[-1], flush=True)
    write_report(args.out, {
        "command": "python -m bench.rerankers_help " + " ".join(argv or []),
        "check": "python -m core eval --system SYSTEM --split test (prints no 'BELOW ITS REFERENCE')",
        "commit": head_commit(), "dataset": dataset.name, "reduced_training": reduced, "systems": rows})
    return 0


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
