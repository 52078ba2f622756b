"""Training recipes over seeds: each variant of a system trained with several seeds, every model ranked through
the one runner and scored by the one evaluation contract, for claims about recipes tested at their level.

A :class:`RecipeStudy` names a system, its variants in the paper's order (best first), the measures and the
protocol. Seed 13 is the built model (``var/systems/<dataset>/<system>[@variant]``: the default build and
``make reproduce``'s recipes); other seeds are trainings of the same recipe with only ``seed`` changed:

    .venv/bin/python -m bench.first_stage_train densetrans --variant=-TopDense --threads 1 --tag seed14 --set seed=14

(folders ``<system>@<variant>+seed14``; a missing one is listed with that command, never trained here). Every
model ranks the test queries through ``core.serving.runner.rank_many`` (exact search, each query dropped from
its own ranking) and is scored by ``core.evaluation_contract.evaluate_contract``; the per-query paired tests between
neighbouring rows use each query's primary measure averaged over the seeds (randomization test and Student's t,
``bench.seed_stats.paired``); the seed-level tests are ``bench.seed_tests`` on the report this writes.

    .venv/bin/python -m bench.recipe_seeds densetrans-ablations [--seeds 13 14 15 16 17]
    .venv/bin/python -m bench.recipe_seeds sdml-losses [--seeds 13 14 15 16 17]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import dataclass

from bench.reporting import REPORTS, ROOT, head_commit, write_report
from bench.seed_stats import paired, seed_mean, spread

BUILT_SEED = 13


@dataclass(frozen=True)
class RecipeStudy:
    """A system's training recipes (variants, best first in the paper's order) compared over seeds."""

    name: str
    system: str
    variants: tuple[str, ...]
    default_variant: str  # the variant the system's own folder holds (``full``, ``sdml``)
    measures: tuple[str, ...]
    primary: str  # the measure of the per-query tests and of ``bench.seed_tests``
    report: str
    paper: str
    protocol: str
    extra_pair: tuple[str, str] | None = None  # a non-adjacent pair also tested (full vs the ablation of all)

    def folder_variant(self, variant: str, seed: int) -> str | None:
        """The ``@...`` part of the model's folder: None for the built default, ``VARIANT+seedN`` for other seeds."""
        if seed == BUILT_SEED:
            return None if variant == self.default_variant else variant
        return f"{variant}+seed{seed}"

    def command(self, variant: str, seed: int) -> str:
        """How the model of ``variant`` and ``seed`` is made."""
        if seed == BUILT_SEED:
            return "python -m core build --systems " + self.system + ("" if variant == self.default_variant else f"@{variant}")
        return (f".venv/bin/python -m bench.first_stage_train {self.system} --variant={variant} --threads 1 "
                f"--tag seed{seed} --set seed={seed}")


STUDIES = {s.name: s for s in (
    RecipeStudy(
        "densetrans-ablations", "densetrans", ("full", "-TopDense", "+Concat", "-AllDense"), "full",
        ("recall@100", "mrr@100", "map@100", "ndcg@10", "hit_rate@1"), "recall@100", "densetrans_ablations.json",
        "densetrans-cai2021.md §4.4.1, Table 3",
        "QQP test queries against the whole collection, each dropped from its own ranking, exact search, scored by "
        "core.evaluation_contract.evaluate_contract (trec_eval's query set and tie order: score desc, then doc id desc); the "
        "project's recipe for every row (mean pooling, τ 0.05, d 60 on GloVe 6B-50d, 600-step cap, dev R@100 early "
        "stopping); only the architecture differs (models/densetrans.py VARIANTS)",
        extra_pair=("full", "-AllDense")),
    RecipeStudy(
        "sdml-losses", "sdml-cnn", ("sdml", "tl-ssd", "tl-euc"), "sdml",
        ("hit_rate@1", "hit_rate@10", "mrr@100"), "hit_rate@1", "sdml_losses.json",
        "sdml-bonadiman2019.md Table 4 (SDML against the triplet-loss baselines TL (Rand) with SSD and Euclidean distance)",
        "QQP test queries against the whole collection, each dropped from its own ranking, exact search, scored by "
        "core.evaluation_contract.evaluate_contract (trec_eval's query set and tie order); the SDML-CNN encoder and schedule "
        "for every row (GloVe 6B-50d inputs, 450-step cap, early stopping on dev H@1); only the loss differs "
        "(core/retrieval/sdml.py LOSSES)",
        extra_pair=("sdml", "tl-euc")),
)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.recipe_seeds", description=__doc__.splitlines()[0])
    ap.add_argument("study", choices=sorted(STUDIES))
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--seeds", nargs="+", type=int, default=[13, 14, 15, 16, 17])
    ap.add_argument("--out", help="default: bench/reports/<the study's report>")
    args = ap.parse_args(argv)
    from core.data.datasets import load_dataset
    from core.errors import MissingArtifactError
    from core.evaluation_contract import evaluate_contract
    from core.registry import system_path
    from core.serving.runner import SystemChoice, rank_many

    study = STUDIES[args.study]
    started = time.perf_counter()
    ds = load_dataset(args.dataset)
    qrels = ds.split_qrels("test")
    queries = {q: ds.queries[q] for q in qrels}
    rows, primary = {}, {}
    for variant in study.variants:
        runs, per_seed = [], {m: [] for m in study.measures}
        primary[variant] = []
        for seed in args.seeds:
            folder = system_path(ds.name, study.system, study.folder_variant(variant, seed))
            tag = None if seed == BUILT_SEED else f"seed{seed}"
            try:
                config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
                saved_seed = config.get("seed", (config.get("plan") or {}).get("seed"))
                if int(saved_seed) != seed:
                    raise MissingArtifactError(f"{study.system} {variant} seed {seed}", study.command(variant, seed),
                                               f"its folder holds seed {saved_seed}")
                training = json.loads((folder / "metrics.json").read_text(encoding="utf-8")).get("training", {})
                choice = SystemChoice(study.system, variant=None if variant == study.default_variant else variant,
                                      options=(("tag", tag),) if tag else ())
                run = rank_many(choice, ds, queries, k=100)
            except (MissingArtifactError, OSError) as exc:
                runs.append({"seed": seed, "not_trained": study.command(variant, seed), "why": str(exc)[:200]})
                print(json.dumps({variant: runs[-1]}), flush=True)
                continue
            evaluation = evaluate_contract(qrels, run, list(study.measures))  # every QQP query is answerable
            for m, v in evaluation.all.items():
                per_seed[m].append(v)
            primary[variant].append(evaluation.per_query[study.primary])
            runs.append({"seed": seed, "folder": os.path.relpath(folder, ROOT), "command": study.command(variant, seed),
                         "best_step": training.get("best_step"), "stopped": training.get("stopped"),
                         "best_dev": round(training.get("best_dev", float("nan")), 5),
                         **{m: round(v, 5) for m, v in evaluation.all.items()}})
            print(json.dumps({variant: runs[-1]}), flush=True)
        rows[variant] = {"runs": runs, "seeds_trained": [r["seed"] for r in runs if "not_trained" not in r],
                         **({m: spread(v) for m, v in per_seed.items()} if per_seed[study.primary] else {})}
    tests = {}
    order = [v for v in study.variants if primary[v]]
    for a, b in [*zip(order, order[1:]), *([study.extra_pair] if study.extra_pair else [])]:
        if primary.get(a) and primary.get(b):
            tests[f"{a} vs {b}"] = paired(seed_mean(primary[b]), seed_mean(primary[a]),
                                          f"{study.primary}, {a} against {b} (per query, mean over seeds)")
    report = {"command": ".venv/bin/python -m bench.recipe_seeds " + " ".join(argv if argv is not None else sys.argv[1:]),
              "commit": head_commit(), "machine": platform.platform(), "study": study.name, "system": study.system,
              "paper": study.paper, "dataset": ds.name, "split": "test", "queries": len(queries),
              "collection": len(ds.corpus), "seeds": args.seeds, "primary": study.primary, "protocol": study.protocol,
              "scorer": "core.evaluation_contract.evaluate_contract", "ties": "trec_eval",
              "variants": rows, "paired": tests, "seconds": round(time.perf_counter() - started, 1)}
    write_report(args.out or REPORTS / study.report, report)
    return 0


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
