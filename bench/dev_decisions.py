"""Choices re-decided on the dev split only: test is kept for the final tables.

Each choice has a rule fixed before its numbers are read, applied to the QQP *dev* queries (1,790, against
the full 36,737-question collection, each query dropped from its own ranking, exact serving), and the
report says what the rule picks and whether it is what the code serves:

- ``tree-k``: the tree's branching K among the paper's 5 / 8 / 10 (tree-search-bert-guo.md §4.3) at the
  paper's beam N = 20. Rule: the highest dev MAP@20 (distance computations per query reported beside).
- ``int8``: MiniLM encoding with ONNX Runtime's dynamic int8 quantization against fp32. Rule (the faster-backend
  tolerance): int8 may be the default only if |dev MAP@100 (int8) − dev MAP@100 (fp32)| ≤ 0.001.
- ``frm-keyword-loss``: FRM with the keyword-agreement loss against FRM with Eq. (18) alone (the default and
  ``frm@kw-loss``, each labelled by the weight in its saved config). Rule: the project's extra loss stays only if its dev
  pair AUC (the metric both trainings early-stop on) is higher; dev reranking of BM25's top 20 reported beside.

Every margin here is below .01, so each choice is reported over three seeds (mean ± sd;
the seed is k-means' for the tree and the training seed for FRM; int8 has no random part, so one run) with a
paired two-sided randomization test over the dev queries (per-query metric averaged over the seeds;
``core.analysis.significance.randomization_test``, 10,000 sign flips) and a paired t-test beside it.

    .venv/bin/python -m bench.dev_decisions [--parts tree-k int8 frm-keyword-loss] [--seeds 13 14 15]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from bench.reporting import head_commit, write_report
from bench.seed_stats import paired, seed_mean, spread
from bench.seed_tests import paired_by_seed

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "reports" / "dev_decisions.json"
SPLIT = "dev"


def tree_k(dataset, queries, qrels, seeds: list[int]) -> dict:
    """MAP@20 / P@1 / MRR@20 and distance computations for K = 5, 8, 10 at beam 20 on dev, one k-means tree per
    seed; paired test of the chosen K against the runner-up on per-query AP@20 (mean over seeds)."""
    from core.evaluation import evaluate_run, per_query
    from core.retrieval.tree import TreeBertConfig
    from core.serving.runner import SystemChoice, rank_many

    metrics = ["map@20", "precision@1", "mrr@20"]
    rows, ap = [], {}
    for k in (5, 8, 10):
        per_seed, computations, ap[k] = {m: [] for m in metrics}, [], []
        t0 = time.perf_counter()
        for seed in seeds:
            choice = SystemChoice("tree-bert", options=(("K", k), ("beam", 20), ("seed", seed)))
            run = rank_many(choice, dataset, queries, k=20)
            for m, v in evaluate_run(qrels, run, metrics).items():
                per_seed[m].append(v)
            computations.append(float(np.mean([r.stats.get("distance_computations", np.nan) for r in run.values()])))
            ap[k].append(per_query(qrels, run, "map@20"))
            print(json.dumps({"K": k, "seed": seed, **{m: round(v[-1], 4) for m, v in per_seed.items()}}), flush=True)
        rows.append({"K": k, "beam": 20, "seeds": seeds, **{m: spread(v) for m, v in per_seed.items()},
                     "distance_computations_per_query": spread(computations),
                     "seconds": round(time.perf_counter() - t0, 1)})
    ranked = sorted(rows, key=lambda r: r["map@20"]["mean"], reverse=True)
    best, runner_up = ranked[0]["K"], ranked[1]["K"]
    served = TreeBertConfig().branching
    return {"rule": "highest dev MAP@20 (mean over k-means seeds) among K = 5, 8, 10 at beam N = 20 (the paper's values)",
            "rows": rows, "chosen_K": best, "served_K": served, "served_is_chosen": best == served,
            "paired_test": paired(seed_mean(ap[runner_up]), seed_mean(ap[best]),
                                  f"AP@20, K = {best} against K = {runner_up} (per query, mean over seeds)")}


def int8(dataset, queries, qrels) -> dict:
    """MiniLM fp32 (the default backend) against ONNX int8 on dev: MAP@100, R@100, H@1."""
    from core.evaluation import evaluate_run
    from core.retrieval.bert import MiniLMEncoder
    from core.retrieval.dense import DenseRetriever, cached_embeddings
    from core.retrieval.indexing import IndexSpec
    from core.serving.loader import load

    from core.evaluation import per_query

    metrics = ["map@100", "recall@100", "hit_rate@1"]
    fp32 = load("minilm", dataset)
    encoder = MiniLMEncoder.pretrained("mean", backend="onnx-int8")
    vectors = cached_embeddings(encoder, dataset.corpus)
    quantized = DenseRetriever.from_vectors("minilm-int8", encoder, dataset.corpus, vectors, IndexSpec("Flat"))
    rows, ap = {}, {}
    for name, system in (("fp32", fp32), ("int8", quantized)):
        run = system.search_many(queries, k=100, ignore_identical_ids=True)
        rows[name] = {m: round(v, 5) for m, v in evaluate_run(qrels, run, metrics).items()}
        ap[name] = per_query(qrels, run, "map@100")
        print(json.dumps({name: rows[name]}), flush=True)
    delta = rows["int8"]["map@100"] - rows["fp32"]["map@100"]
    return {"rule": "int8 may be the default only if |dev MAP@100(int8) - dev MAP@100(fp32)| <= 0.001",
            "seeds": "none: encoding and ONNX Runtime's dynamic quantization have no random part (one run each)",
            "encoder_fp32": fp32.encoder.encoder_id, "encoder_int8": encoder.encoder_id, "rows": rows,
            "delta_map@100": round(delta, 5), "int8_within_tolerance": abs(delta) <= 0.001,
            "paired_test": paired(ap["fp32"], ap["int8"], "AP@100, int8 against fp32 (per query)")}


def frm_seed_path(dataset_name: str, variant: str | None, seed: int, built_seed: int) -> Path:
    """Where FRM's training of ``seed`` lives: the built recipe's own folder for its configured seed
    (``built_seed``), ``var/seeds/<dataset>/frm[@variant]/seed-N`` for another (nothing is created)."""
    from core.paths import var_dir
    from core.registry import system_path

    if seed == built_seed:
        return system_path(dataset_name, "frm", variant)
    return var_dir() / "seeds" / dataset_name / ("frm" + (f"@{variant}" if variant else "")) / f"seed-{seed}"


def _frm_seed_folder(dataset, variant: str | None, seed: int, built_seed: int) -> Path:
    """:func:`frm_seed_path`, trained here on first use (the built recipe with only the seed changed), then reused."""
    import dataclasses

    from core.artifacts import load_json
    from core.registry import system_dir
    from core.rerank import frm as F

    built = system_dir(dataset.name, "frm", variant)
    folder = frm_seed_path(dataset.name, variant, seed, built_seed)
    if seed == built_seed or ((folder / "metrics.json").is_file() and (folder / "weights.pt").is_file()):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    train = F.FRMTrainConfig(**load_json(built / "config.json", "frm", "python -m core build")["train"])
    lex = load_json(built / "lexical_stats.json", "frm", "python -m core build")
    stats = F.LexicalStats(lex["df"], int(lex["n_docs"]), float(lex["avgdl"]), float(lex["k1"]), float(lex["b"]))
    cfg = F.model_config(variant)
    featurizer = F.Featurizer(stats, cfg.max_keywords, load_json(built / "pos_cache.json", "frm", "python -m core build"))
    t0 = time.perf_counter()
    F.train_frm(dataset, cfg, dataclasses.replace(train, seed=seed), folder, featurizer=featurizer)
    (folder / "pos_cache.json").symlink_to(built / "pos_cache.json")
    print(f"trained frm{'@' + variant if variant else ''} seed {seed} in {time.perf_counter() - t0:.0f}s", flush=True)
    return folder


def frm_keyword_loss(dataset, queries, qrels, variant: str, seeds: list[int]) -> dict:
    """Dev pair AUC of the two FRM recipes (their own early-stopping logs) and dev reranking of BM25's top 20, each
    recipe trained once per seed; paired test on per-query RR@20 (mean over seeds)."""
    from core.evaluation import evaluate_run, per_query
    from core.artifacts import load_json
    from core.registry import system_dir
    from core.rerank import frm as F
    from core.serving.loader import FIRST_STAGE, RERANK_DEPTH, load
    from core.serving.runner import SystemChoice, rank_many

    first = load(FIRST_STAGE, dataset).search_many(queries, k=RERANK_DEPTH, ignore_identical_ids=True)
    rows, rr = {}, {}
    for var in (None, variant):
        command = f"python -m core build --systems frm{'@' + var if var else ''}"
        built = system_dir(dataset.name, "frm", var)
        config = load_json(built / "config.json", f"frm {var or ''}", command)
        weight = float(config["train"]["keyword_loss"])
        label = (f"with keyword-agreement loss (weight {weight:g})" if weight else "Eq. (18) only (paper loss)")
        per_seed: dict[str, list] = {"dev_auc_best": [], "best_step": [], "stopped": [],
                                     f"dev_rerank_bm25_top{RERANK_DEPTH}_hit_rate@1": [],
                                     f"dev_rerank_bm25_top{RERANK_DEPTH}_mrr@20": []}
        rr[label] = []
        for seed in seeds:
            folder = _frm_seed_folder(dataset, var, seed, int(config["train"]["seed"]))
            training = load_json(folder / "metrics.json", f"frm {var or ''}", command)
            training = training.get("training", training)
            reranker = F.load(dataset, var, folder=folder)
            run = rank_many(SystemChoice("frm", variant=var, first_stage=FIRST_STAGE), dataset, queries,
                            k=RERANK_DEPTH, first_stage=first, load=lambda *_: reranker)
            ranking = evaluate_run(qrels, run, ["hit_rate@1", "mrr@20"])
            rr[label].append(per_query(qrels, run, "mrr@20"))
            per_seed["dev_auc_best"].append(training.get("best_dev"))
            per_seed["best_step"].append(training.get("best_step"))
            per_seed["stopped"].append(training.get("stopped"))
            for m, v in ranking.items():
                per_seed[f"dev_rerank_bm25_top{RERANK_DEPTH}_{m}"].append(v)
            print(json.dumps({label: seed, "dev_auc_best": training.get("best_dev"), **ranking}), flush=True)
        rows[label] = {"variant": f"frm@{var}" if var else "frm (default)", "seeds": seeds,
                       "best_step": per_seed.pop("best_step"), "stopped": per_seed.pop("stopped"),
                       **{m: spread(v) for m, v in per_seed.items()}}
    with_kw = next(label for label in rows if label.startswith("with"))
    without = next(label for label in rows if not label.startswith("with"))
    keep = rows[with_kw]["dev_auc_best"]["mean"] > rows[without]["dev_auc_best"]["mean"]
    by_seed = {label: dict(zip(seeds, rows[label]["dev_auc_best"]["values"])) for label in rows}
    return {"rule": "keep the keyword-agreement loss only if its best dev pair AUC (mean over seeds) is higher than "
                    "Eq. (18) alone",
            "rows": rows, "keep_keyword_loss": keep,
            "seed_test": {"comparison": "best dev pair AUC, with the keyword loss minus Eq. (18) alone, paired by "
                                        "training seed (t-test; the unit is a training run)",
                          **paired_by_seed(by_seed[with_kw], by_seed[without])},
            "paired_test": paired(seed_mean(rr[without]), seed_mean(rr[with_kw]),
                                  "RR@20 over BM25's top 20, with the keyword loss against Eq. (18) alone "
                                  "(per query, mean over seeds)")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--parts", nargs="+", default=["tree-k", "int8", "frm-keyword-loss"])
    ap.add_argument("--frm-variant", default="kw-loss",
                    help="the FRM recipe built beside the default with the other setting of the keyword-agreement term")
    ap.add_argument("--seeds", nargs="+", type=int, default=[13, 14, 15],
                    help="k-means seeds of the tree and training seeds of FRM (13 is the built one)")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--train-frm", choices=["paper", "kw-loss"], metavar="RECIPE",
                    help="only train FRM's RECIPE (paper: Eq. 18 alone; kw-loss) for --seeds, write no report "
                         "(make reproduce trains two at a time, then runs --parts frm-keyword-loss)")
    args = ap.parse_args(argv)
    from core.data.datasets import load_dataset

    dataset = load_dataset(args.dataset)
    if args.train_frm:
        from core.artifacts import load_json
        from core.registry import system_dir

        variant = None if args.train_frm == "paper" else args.train_frm
        config = load_json(system_dir(dataset.name, "frm", variant) / "config.json", "frm", "python -m core build")
        for seed in args.seeds:
            print(_frm_seed_folder(dataset, variant, seed, int(config["train"]["seed"])), flush=True)
        return 0
    qrels = dataset.split_qrels(SPLIT)
    queries = {q: dataset.queries[q] for q in qrels}
    out = Path(args.out)
    report = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {"decisions": {}}
    started = time.perf_counter()
    for part in args.parts:
        t0 = time.perf_counter()
        if part == "tree-k":
            result = tree_k(dataset, queries, qrels, args.seeds)
        elif part == "int8":
            result = int8(dataset, queries, qrels)
        elif part == "frm-keyword-loss":
            result = frm_keyword_loss(dataset, queries, qrels, args.frm_variant, args.seeds)
        else:
            raise SystemExit(f"unknown part {part!r}: tree-k, int8, frm-keyword-loss")
        report["decisions"][part] = {**result, "commit": head_commit(), "seconds": round(time.perf_counter() - t0, 1),
                                     "command": f".venv/bin/python -m bench.dev_decisions --parts {part} --seeds "
                                                + " ".join(map(str, args.seeds))}
    report.update({
        "command": ".venv/bin/python -m bench.dev_decisions " + " ".join(argv if argv is not None else sys.argv[1:]),
        "commit": head_commit(), "machine": platform.platform(), "dataset": args.dataset, "split": SPLIT,
        "queries": len(queries), "collection": len(dataset.corpus),
        "protocol": "dev queries against the full collection, each dropped from its own ranking, exact serving; "
                    "test queries are not read by this script",
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "seconds_this_run": round(time.perf_counter() - started, 1)})
    write_report(out, report)
    return 0


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
