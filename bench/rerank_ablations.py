"""FRM ablations (Tables 5-6) and baselines on the same split, at a reduced CPU budget.

Every variant trains with the same settings (--train-pairs of the cluster-disjoint training pairs, --epochs,
frozen MiniLM vectors from the shared cache) and is scored on all held-out test pairs (dataset.pairs['test'])
from the cached vectors: Acc (threshold 0.5), AUC (sklearn), Acc on the Figure 2 Jaccard buckets.
Baselines: the fine-tuned MiniLM cross-encoder system ("BERT", if built; acc at logit margin 0) and two
frozen-MiniLM feature classifiers trained here ("E_CLS MLP" and "E_CLS MLP + BM25", the paper's BERT+BM25
recipe with a frozen encoder).

Every variant trains with ``core.rerank.frm.train_frm`` under the same rule (same pairs, seed, dev-AUC early
stopping); each ablation is compared with the full model by a paired bootstrap of the test-pair AUC difference.

Usage: QRS_VAR=... python bench/rerank_ablations.py [--profile quick] [--train max_seconds=100 ...]
       [--variants full,-m_att,...] [--baselines] [--out JSON]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch

from core.data.datasets import load_dataset
from core.data.keywords import LexicalStats, jaccard_bucket, jaccard_texts
from core.rerank import frm as F
from core.registry import system_dir
from core.training import set_seed


def bucket_acc(labels, preds, buckets) -> dict:
    out = {}
    for b in ("hard", "easy", "middle"):
        sel = buckets == b
        out[f"acc_{b}"] = float((preds[sel] == labels[sel]).mean()) if sel.any() else float("nan")
    return out


def score_block(labels, probs, buckets, threshold=0.5) -> dict:
    from sklearn.metrics import roc_auc_score

    preds = (probs > threshold).astype(int)
    return {"acc": float((preds == labels).mean()), "auc": float(roc_auc_score(labels, probs)),
            **bucket_acc(labels, preds, buckets)}


def cls_baseline(ds, store, stats, train, dev, test, use_bm25: bool, epochs: int = 30) -> np.ndarray:
    """Frozen MiniLM E_CLS of both questions [u; v; |u − v|; u·v] (+ log(1 + BM25)) → MLP, BCE, AdamW 1e-3."""

    def feats(pairs):
        u = np.stack([store.cls[ds.corpus[p.id1]] for p in pairs]).astype(np.float32)
        v = np.stack([store.cls[ds.corpus[p.id2]] for p in pairs]).astype(np.float32)
        x = [u, v, np.abs(u - v), u * v]
        if use_bm25:
            from core.data.keywords import keyword_candidates

            bm = []
            for p in pairs:
                q, d = ds.corpus[p.id1], ds.corpus[p.id2]
                kws, _ = keyword_candidates(d, 64)
                qw = {w.lower() for w in keyword_candidates(q, 64)[0]}
                w = stats.bm25_weights(d, kws)
                bm.append(sum(wi for k, wi in zip(kws, w) if k.lower() in qw))
            x.append(np.log1p(np.array(bm, np.float32))[:, None])
        return torch.as_tensor(np.concatenate(x, 1))

    set_seed(13)
    xtr, xdv, xte = feats(train), feats(dev), feats(test)
    ytr = torch.tensor([p.label > 0 for p in train], dtype=torch.float32)
    ydv = np.array([p.label > 0 for p in dev])
    model = torch.nn.Sequential(torch.nn.Dropout(0.3), torch.nn.Linear(xtr.shape[1], 256), torch.nn.ReLU(),
                                torch.nn.Dropout(0.3), torch.nn.Linear(256, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    best, best_state = -1.0, None
    for _ in range(epochs):
        model.train()
        for idx in torch.randperm(len(xtr)).split(64):
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(xtr[idx]).squeeze(-1), ytr[idx])
            opt.zero_grad(); loss.backward(); opt.step()
        model.eval()
        with torch.inference_mode():
            acc = float(((torch.sigmoid(model(xdv).squeeze(-1)).numpy() > 0.5) == ydv).mean())
        if acc > best:
            best, best_state = acc, {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(best_state)
    with torch.inference_mode():
        return torch.sigmoid(model(xte).squeeze(-1)).numpy()


def paired_bootstrap_auc(labels: np.ndarray, a: np.ndarray, b: np.ndarray, n: int = 2000, seed: int = 0) -> dict:
    """Paired bootstrap over test pairs (the same resample for both models) of AUC(a) − AUC(b); two-sided p."""
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(n):
        idx = rng.integers(0, len(labels), len(labels))
        if 0 < labels[idx].sum() < len(idx):
            diffs.append(roc_auc_score(labels[idx], a[idx]) - roc_auc_score(labels[idx], b[idx]))
    diffs = np.asarray(diffs)
    p = 2 * min((diffs <= 0).mean(), (diffs >= 0).mean())
    return {"auc_diff": float(roc_auc_score(labels, a) - roc_auc_score(labels, b)),
            "ci95": [float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))], "p": float(min(1.0, p)),
            "resamples": int(len(diffs))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default=",".join(F.VARIANTS))
    ap.add_argument("--profile", default="quick")
    ap.add_argument("--train", nargs="*", default=[], help="FRMTrainConfig overrides key=value (e.g. max_seconds=100)")
    ap.add_argument("--baselines", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    ds = load_dataset("qqp-bimpm")
    overrides = {}
    for item in args.train:
        k, v = item.split("=", 1)
        overrides[k] = json.loads(v)
    tcfg = dataclasses.replace(F.FRMTrainConfig.for_profile(args.profile), **overrides)
    stats = LexicalStats.from_texts(ds.corpus.values())
    cfg0 = F.FRMConfig()
    from core.paths import artifact_dir

    pos_path = artifact_dir("diag", "frm") / "pos_cache.json"  # spaCy tags shared with bench/rerank_frm_diag.py
    featurizer = F.Featurizer(stats, cfg0.max_keywords, json.loads(pos_path.read_text()) if pos_path.is_file() else None)
    test = ds.pairs["test"]
    sub = F._subset(ds.pairs["train"], tcfg.train_pairs, tcfg.seed)
    feats = F.pair_features(featurizer, ds.corpus, sub + ds.pairs["dev"] + test)
    store = F.VectorStore.for_encoder(cfg0.max_keywords)
    store.ensure(featurizer, list(feats.values()))
    labels = np.array([int(p.label > 0) for p in test])
    buckets = np.array([jaccard_bucket(p.label, jaccard_texts(ds.corpus[p.id1], ds.corpus[p.id2])) for p in test])
    results: dict = {"settings": {"train": dataclasses.asdict(tcfg), "test_pairs": len(test),
                                  "rule": "every variant: same pairs, seed and early-stopping rule (dev ROC AUC, patience)",
                                  "bucket_sizes": {b: int((buckets == b).sum()) for b in ("hard", "easy", "middle")}}}
    out_path = Path(args.out) if args.out else None
    probs_of: dict[str, np.ndarray] = {}
    for variant in [v for v in args.variants.split(",") if v]:
        t0 = time.perf_counter()
        cfg = F.model_config(variant)
        folder = system_dir(ds.name, "frm-ablation", variant)
        metrics = F.train_frm(ds, cfg, tcfg, folder, stats=stats, resume=False, featurizer=featurizer)
        model = F.FRM(cfg)
        model.load_state_dict(torch.load(folder / "weights.pt", weights_only=True)["model"])
        probs = F.predict_pairs(model, feats, store, ds.corpus, test, torch.device("cpu"))
        probs_of[variant] = probs
        log = metrics["training"]
        results[f"FRM {variant}"] = {**score_block(labels, probs, buckets), "dev_auc": metrics["best_dev_auc"],
                                     "untrained_dev_auc": metrics["untrained_dev_auc"], "steps": metrics["steps"],
                                     "best_step": log["best_step"], "stopped": log["stopped"],
                                     "importance_test": F.importance_report(model, [feats[ds.corpus[i]] for i in
                                                                                    dict.fromkeys(x for p in test for x in (p.id1, p.id2))],
                                                                            store, torch.device("cpu")),
                                     "seconds": time.perf_counter() - t0}
        if variant != "full" and "full" in probs_of:
            results[f"FRM {variant}"]["vs_full"] = paired_bootstrap_auc(labels, probs, probs_of["full"])
        print(variant, json.dumps(results[f"FRM {variant}"]), flush=True)
        if out_path:
            out_path.write_text(json.dumps(results, indent=2))
    if args.baselines:
        for name, bm in (("E_CLS MLP (frozen MiniLM)", False), ("E_CLS MLP + BM25 (frozen MiniLM)", True)):
            t0 = time.perf_counter()
            probs = cls_baseline(ds, store, stats, sub, ds.pairs["dev"], test, bm)
            results[name] = {**score_block(labels, probs, buckets), "seconds": time.perf_counter() - t0}
            print(name, json.dumps(results[name]), flush=True)
        if out_path:
            out_path.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
