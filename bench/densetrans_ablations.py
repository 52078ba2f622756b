"""DenseTrans and its §4.4.1 ablations (densetrans-cai2021.md Table 3) on the QQP test queries, five training
seeds each (``--seeds``), with paired tests between neighbouring rows (margins below .01 need seeds).

Seed 13 is the built model (``var/systems/<dataset>/densetrans[@variant]``, the default build and
``make reproduce``'s recipes); seeds 14 to 17 are trainings of the same recipe with only ``seed`` changed:

    .venv/bin/python -m bench.first_stage_train densetrans --variant=-TopDense --threads 1 --tag seed14 --set seed=14

(folders ``densetrans@-TopDense+seed14``; a missing one is listed with that command, never trained here). Every
model ranks the test queries through the one runner (exact search, each query dropped from its own ranking);
the paired tests use each query's R@100 averaged over the seeds (randomization test, 10,000 sign flips, and
Student's t; ``bench.seed_stats.paired``).

    .venv/bin/python -m bench.densetrans_ablations [--seeds 13 14 15 16 17] [--out bench/reports/densetrans_ablations.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from bench.reporting import head_commit, write_report
from bench.seed_stats import paired, seed_mean, spread

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "reports" / "densetrans_ablations.json"
VARIANTS = ("full", "-TopDense", "+Concat", "-AllDense")  # Table 3's order (the paper's values fall down the rows)
METRICS = ["recall@100", "mrr@100", "map@100", "ndcg@10", "hit_rate@1"]
BUILT_SEED = 13


def seed_command(variant: str, seed: int) -> str:
    """How the training of ``seed`` is made (the built seed comes from the default build or the recipes)."""
    if seed == BUILT_SEED:
        return ("python -m core build --systems densetrans" + ("" if variant == "full" else f"@{variant}"))
    return (f".venv/bin/python -m bench.first_stage_train densetrans --variant={variant} --threads 1 "
            f"--tag seed{seed} --set seed={seed}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--seeds", nargs="+", type=int, default=[13, 14, 15, 16, 17])
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    from core.evaluation import evaluate_contract
    from core.data.datasets import load_dataset
    from core.errors import MissingArtifactError
    from core.retrieval import densetrans
    from core.serving.runner import SystemChoice, rank_many

    started = time.perf_counter()
    ds = load_dataset(args.dataset)
    qrels = ds.split_qrels("test")
    queries = {q: ds.queries[q] for q in qrels}
    rows, recall = {}, {}
    for variant in VARIANTS:
        runs, per_seed = [], {m: [] for m in METRICS}
        recall[variant] = []
        for seed in args.seeds:
            tag = None if seed == BUILT_SEED else f"seed{seed}"
            name = None if variant == "full" else variant
            try:
                folder = densetrans._folder(ds, name, tag, create=False)
                config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
                if int(config["plan"]["seed"]) != seed:
                    raise MissingArtifactError(f"DenseTrans {variant} seed {seed}", seed_command(variant, seed),
                                               f"its folder holds seed {config['plan']['seed']}")
                retriever = densetrans.load(ds, variant=name, index="flat", tag=tag)
                training = json.loads((folder / "metrics.json").read_text(encoding="utf-8")).get("training", {})
            except (MissingArtifactError, OSError) as exc:
                runs.append({"seed": seed, "not_trained": seed_command(variant, seed), "why": str(exc)[:200]})
                print(json.dumps({variant: runs[-1]}), flush=True)
                continue
            run = rank_many(SystemChoice("densetrans", variant=name), ds, queries, k=100, load=lambda *_: retriever)
            evaluation = evaluate_contract(qrels, run, METRICS)  # every QQP query is answerable: all = answerable
            scores = evaluation.all
            for m, v in scores.items():
                per_seed[m].append(v)
            recall[variant].append(evaluation.per_query["recall@100"])
            runs.append({"seed": seed, "folder": os.path.relpath(folder, ROOT), "command": seed_command(variant, seed),
                         "best_step": training.get("best_step"), "stopped": training.get("stopped"),
                         "best_dev": round(training.get("best_dev", float("nan")), 5),
                         **{m: round(v, 5) for m, v in scores.items()}})
            print(json.dumps({variant: runs[-1]}), flush=True)
        rows[variant] = {"runs": runs, "seeds_trained": [r["seed"] for r in runs if "not_trained" not in r],
                         **({m: spread(v) for m, v in per_seed.items()} if per_seed["recall@100"] else {})}
    tests = {}
    order = [v for v in VARIANTS if recall[v]]
    for a, b in [*zip(order, order[1:]), ("full", "-AllDense")]:
        if recall.get(a) and recall.get(b):
            tests[f"{a} vs {b}"] = paired(seed_mean(recall[b]), seed_mean(recall[a]),
                                          f"R@100, {a} against {b} (per query, mean over seeds)")
    report = {"command": ".venv/bin/python -m bench.densetrans_ablations " + " ".join(argv if argv is not None else sys.argv[1:]),
              "commit": head_commit(), "machine": platform.platform(), "dataset": ds.name, "split": "test",
              "queries": len(queries), "collection": len(ds.corpus), "seeds": args.seeds,
              "protocol": "QQP test queries against the whole collection, each dropped from its own ranking, exact "
                          "search, scored by core.evaluation.evaluate_contract (trec_eval's query set and tie order: score desc, "
                          "then doc id desc); the project's recipe for every row (mean pooling, τ 0.05, d 60 on "
                          "GloVe 6B-50d, 600-step cap, dev R@100 early stopping); only the architecture differs "
                          "(models/densetrans.py VARIANTS)",
              "variants": rows, "paired": tests, "seconds": round(time.perf_counter() - started, 1)}
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
