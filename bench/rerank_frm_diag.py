"""FRM diagnostics: train a configuration with the real loop (``core.rerank.frm.train_frm``) into a
private folder and report its learning curve, test-pair AUC, keyword-importance behaviour on the held-out test
questions (Spearman with IDF, stop vs content words, saturation) and the m_att input scale (content
projection vs position/segment embeddings).

Usage: QRS_VAR=... python bench/rerank_frm_diag.py --tag NAME [--set key=value ...] [--train key=value ...]
       [--out JSON]   (``--set`` overrides FRMConfig fields, ``--train`` FRMTrainConfig fields)
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
from core.data.keywords import LexicalStats
from core.paths import artifact_dir
from core.rerank import frm as F
from core.training import device


def _parse(pairs: list[str], cls) -> dict:
    """``key=value`` overrides of a dataclass (values parsed as JSON where they parse, else strings)."""
    names = {f.name for f in dataclasses.fields(cls)}
    out = {}
    for item in pairs:
        k, v = item.split("=", 1)
        if k not in names:
            raise SystemExit(f"unknown field {k!r} of {cls.__name__}: {sorted(names)}")
        try:
            out[k] = json.loads(v)
        except json.JSONDecodeError:
            out[k] = v
    return out


def att_scale(model, feats, store) -> dict:
    """Mean L2 norm of the projected keyword vectors vs the position and segment embeddings m_att adds."""
    if not model.cfg.use_att:
        return {}
    am = model.att_match
    kw = torch.as_tensor(np.concatenate([store.kw[f.text] for f in feats[:500]]).astype(np.float32))
    with torch.inference_mode():
        content = am.proj(kw).norm(dim=-1).mean().item()
        position = am.position.weight.norm(dim=-1).mean().item()
        segment = am.segment.weight.norm(dim=-1).mean().item()
    return {"content_norm": content, "position_norm": position, "segment_norm": segment}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tag", required=True)
    ap.add_argument("--variant", default=None)
    ap.add_argument("--set", nargs="*", action="extend", default=[])
    ap.add_argument("--train", nargs="*", default=[])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ds = load_dataset("qqp-bimpm")
    cfg = F.model_config(args.variant, **_parse(args.set, F.FRMConfig))
    tcfg = dataclasses.replace(F.FRMTrainConfig.for_profile("quick"), **_parse(args.train, F.FRMTrainConfig))
    folder = artifact_dir("diag", "frm", args.tag)
    stats = LexicalStats.from_texts(ds.corpus.values())
    pos_path = artifact_dir("diag", "frm") / "pos_cache.json"  # spaCy once across diagnostic runs
    fz = F.Featurizer(stats, cfg.max_keywords, json.loads(pos_path.read_text()) if pos_path.is_file() else None)
    t0 = time.perf_counter()
    metrics = F.train_frm(ds, cfg, tcfg, folder, stats=stats, resume=False, featurizer=fz)
    model = F.FRM(cfg)
    model.load_state_dict(torch.load(folder / "weights.pt", weights_only=True)["model"])
    model.eval()
    test = ds.pairs["test"]
    feats = F.pair_features(fz, ds.corpus, test)
    store = F.VectorStore.for_encoder(cfg.max_keywords)
    store.ensure(fz, list(feats.values()))
    probs = F.predict_pairs(model, feats, store, ds.corpus, test, device())
    if not pos_path.is_file():
        pos_path.write_text(json.dumps(fz.pos_cache))
    out = {"tag": args.tag, "variant": args.variant or "full", "config": {k: v for k, v in _parse(args.set, F.FRMConfig).items()},
           "train": _parse(args.train, F.FRMTrainConfig), "seconds": time.perf_counter() - t0,
           "test_pairs": F.accuracy_auc(np.array([p.label for p in test]), probs),
           "importance_test": F.importance_report(model, list(feats.values()), store, device()),
           "att_scale": att_scale(model, list(feats.values()), store),
           **{k: metrics[k] for k in ("steps", "best_step", "best_dev_auc", "untrained_dev_auc", "zero_shot_minilm_dev_auc",
                                      "train_seconds")},
           "stopped": metrics["training"]["stopped"],
           "curve": [(p["step"], round(p["dev"], 4), None if p["loss"] is None else round(p["loss"], 4))
                     for p in metrics["training"]["curve"]]}
    print(json.dumps(out, indent=1))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "a") as fh:
            fh.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
