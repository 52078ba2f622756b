"""FRM on QQP's held-out test pairs (frm-multiview-chong.md Table 4: Acc and AUC on Quora pairs) and its keyword
importance w(k, q) (Eq. 7) against IDF, for both recipes and every trained seed, with the references beside them.

- ``frm``: Eq. (18) alone (the paper's loss, the default); ``frm@kw-loss``: Eq. (18) plus the project's
  keyword-agreement loss. Seeds: 13 is the built model (``var/systems``); other seeds are the trainings
  ``bench/dev_decisions.py --parts frm-keyword-loss --seeds ...`` wrote under ``var/seeds`` (a missing seed is
  listed with that command, never trained here). Acc at threshold 0.5 (§3.3.3), ROC AUC by sklearn.
- References: the zero-shot all-MiniLM-L6-v2 cosine, the registered ``minilm-pairs`` system through the one loader
  (AUC; it has no 0.5 threshold; pre-trained on data that includes Quora duplicates) and the built cross-encoder.
- Paired bootstrap over the test pairs (2,000 resamples) of the AUC difference, on the seed-mean probabilities:
  Eq. (18) against the keyword loss, and each against zero-shot MiniLM.
- Keyword importance on the test questions (``core.rerank.frm.importance_report``): Spearman of w(k, q) with IDF
  pooled over keywords and per question, mean w of stop words and content words.

    .venv/bin/python -m bench.frm_pairs [--seeds 13 14 15] [--out bench/reports/frm_pairs.json]
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

from bench.dev_decisions import frm_seed_path
from bench.reporting import head_commit, write_report
from bench.seed_stats import spread
from bench.seed_tests import paired_by_seed

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "reports" / "frm_pairs.json"
RECIPES = {"frm": None, "frm@kw-loss": "kw-loss"}


def seed_folder(dataset_name: str, variant: str | None, seed: int) -> Path:
    """Where the training of ``seed`` lives (``bench.dev_decisions.frm_seed_path`` with the built seed)."""
    from core.artifacts import load_json
    from core.registry import system_path

    config = load_json(system_path(dataset_name, "frm", variant) / "config.json", "frm", "python -m core build --systems frm")
    return frm_seed_path(dataset_name, variant, seed, int(config["train"]["seed"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--seeds", nargs="+", type=int, default=[13, 14, 15])
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    import torch

    from core.analysis.significance import paired_bootstrap_auc
    from core.artifacts import load_json
    from core.data.datasets import load_dataset
    from core.registry import system_path
    from core.evaluation import pair_auc, score_pairs_of
    from core.rerank import frm as F
    from core.serving.loader import load
    from core.training import device

    started = time.perf_counter()
    ds = load_dataset(args.dataset)
    pairs = ds.pairs["test"]
    queries = [ds.corpus[p.id1] for p in pairs]
    docs = [ds.corpus[p.id2] for p in pairs]
    labels = np.array([int(p.label > 0) for p in pairs])
    questions = list(dict.fromkeys(queries + docs))
    report: dict = {"dataset": ds.name, "split": "test", "pairs": len(pairs), "positives": int(labels.sum()),
                    "questions": len(questions), "seeds": args.seeds, "systems": {}, "references": {}, "paired": {}}
    probs: dict[str, np.ndarray] = {}
    for name, variant in RECIPES.items():
        rows, per_seed = [], []
        for seed in args.seeds:
            folder = seed_folder(ds.name, variant, seed)
            if not (folder / "weights.pt").is_file():
                rows.append({"seed": seed, "not_trained": f".venv/bin/python -m bench.dev_decisions --parts "
                                                          f"frm-keyword-loss --seeds {seed}"})
                print(json.dumps({name: rows[-1]}), flush=True)
                continue
            reranker = F.load(ds, variant, folder=folder)
            t0 = time.perf_counter()
            p = reranker.score_pairs(queries, docs)
            metrics = F.accuracy_auc(labels, p)
            store = reranker.store or F.VectorStore.for_encoder(reranker.model.cfg.max_keywords)
            feats = reranker.featurizer.features(questions)
            store.ensure(reranker.featurizer, feats)
            importance = F.importance_report(reranker.model, feats, store, device())
            training = load_json(folder / "metrics.json", name, "python -m core build")
            training = training.get("training", training)
            rows.append({"seed": seed, "folder": os.path.relpath(folder, ROOT), **{k: round(v, 5) for k, v in metrics.items()},
                         "best_dev_auc": round(training.get("best_dev"), 5), "best_step": training.get("best_step"),
                         "stopped": training.get("stopped"),
                         "importance_test": {k: (round(v, 5) if isinstance(v, float) else v) for k, v in importance.items()},
                         "seconds": round(time.perf_counter() - t0, 1)})
            per_seed.append(p)
            print(json.dumps({name: {k: v for k, v in rows[-1].items() if k != "importance_test"}}), flush=True)
        done = [r for r in rows if "auc" in r]
        keyword = load_json(system_path(ds.name, "frm", variant) / "config.json", name, "python -m core build")
        report["systems"][name] = {
            "keyword_loss_weight": float(keyword["train"]["keyword_loss"]), "runs": rows,
            "seeds_trained": [r["seed"] for r in done],
            **({"acc": spread([r["acc"] for r in done]), "auc": spread([r["auc"] for r in done]),
                "spearman_idf": spread([r["importance_test"]["spearman_idf"] for r in done]),
                "spearman_idf_per_question": spread([r["importance_test"]["spearman_idf_per_question"] for r in done]),
                "mean_w_stop": spread([r["importance_test"]["mean_stop"] for r in done]),
                "mean_w_content": spread([r["importance_test"]["mean_content"] for r in done])} if done else {})}
        if per_seed:
            probs[name] = np.mean(per_seed, axis=0)
    # the reference the app holds FRM to, through the one loader (the same scores as bench.cross_encoder_pairs)
    zero_shot = np.asarray(score_pairs_of(load("minilm-pairs", ds), pairs, ds.corpus), dtype=float)
    report["references"]["minilm zero-shot cosine"] = {
        "system": "minilm-pairs", "auc": round(pair_auc(zero_shot, pairs), 5),
        "note": "all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates (its QQP numbers are not "
                "zero-shot); scored through the loader as the app serves it (core.evaluation.score_pairs_of)"}
    cross = system_path(ds.name, "cross-encoder") / "metrics.json"
    if cross.is_file():
        m = json.loads(cross.read_text(encoding="utf-8"))
        report["references"]["cross-encoder (built)"] = {"auc": m.get("test_roc_auc"), "note": "fine-tuned MiniLM "
                                                         "cross-encoder of the default build (its own metrics.json)"}
    probs["minilm zero-shot cosine"] = zero_shot
    for a, b in (("frm", "frm@kw-loss"), ("frm", "minilm zero-shot cosine"), ("frm@kw-loss", "minilm zero-shot cosine")):
        if a in probs and b in probs:
            test = paired_bootstrap_auc(labels, probs[a], probs[b])
            report["paired"][f"{a} - {b}"] = {k: (round(v, 5) if isinstance(v, float) else
                                               [round(x, 5) for x in v] if isinstance(v, list) else v)
                                              for k, v in test.items()}
    trained = {name: {r["seed"]: r for r in system["runs"] if "auc" in r} for name, system in report["systems"].items()}
    if len(trained) == 2:  # the recipe claim at its level: the unit is a training run, paired by seed
        report["seed_tests"] = {
            f"frm@kw-loss - frm {m}": {"comparison": f"test pair {m}, Eq. (18) plus the keyword loss minus Eq. (18) "
                                                     "alone, paired by training seed (t-test)",
                                       **paired_by_seed({s: r[m] for s, r in trained["frm@kw-loss"].items()},
                                                        {s: r[m] for s, r in trained["frm"].items()})}
            for m in ("auc", "acc")}
    report.update({"command": ".venv/bin/python -m bench.frm_pairs " + " ".join(argv if argv is not None else sys.argv[1:]),
                   "commit": head_commit(), "machine": platform.platform(), "threads": torch.get_num_threads(),
                   "protocol": "QQP held-out test pairs (cluster-disjoint from training); Acc at 0.5 (§3.3.3) and "
                               "ROC AUC (sklearn); the paired bootstrap uses each recipe's seed-mean probability",
                   "seconds": round(time.perf_counter() - started, 1)})
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
