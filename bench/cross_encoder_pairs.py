"""The FRM paper's "BERT" baseline (frm-multiview-chong.md Table 4: Acc and AUC on Quora pairs) from one model:
the default build's fine-tuned MiniLM cross-encoder, both figures from the same scores of QQP's held-out test pairs.

- Acc: the share of pairs whose predicted label (logit > 0, i.e. probability > 0.5, the threshold of §3.3.3 the
  FRM rows use) equals the gold label; AUC: ROC AUC of the logits (``core.evaluation.pair_auc``, sklearn).
- Beside it, the zero-shot reference the cross-encoder is held to (minilm-pairs, cosine; no 0.5 threshold, so AUC
  only) on the same pairs, through the one loader.

    python -m bench.cross_encoder_pairs [--dataset qqp-bimpm] [--out bench/reports/cross_encoder_pairs.json]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from bench.reporting import ROOT, head_commit, write_report

OUT = ROOT / "bench" / "reports" / "cross_encoder_pairs.json"


def accuracy_at_zero(scores: np.ndarray, labels: np.ndarray) -> float:
    """Share of pairs with (logit > 0) == (label > 0)."""
    s, y = np.asarray(scores, dtype=float), np.asarray(labels) > 0
    return float(((s > 0) == y).mean()) if len(y) else float("nan")


def main(argv: list[str] | None = None) -> int:
    """Score the test pairs with the built cross-encoder and its reference; write the report."""
    from core.data.datasets import load_dataset
    from core.evaluation import pair_auc, score_pairs_of
    from core.registry import reference_of
    from core.serving.loader import load

    ap = argparse.ArgumentParser(prog="python -m bench.cross_encoder_pairs", description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    start = time.perf_counter()
    ds = load_dataset(args.dataset)
    pairs = ds.pairs.get("test", [])
    labels = np.array([int(p.label > 0) for p in pairs])
    model = load("cross-encoder", ds)
    scores = np.asarray(score_pairs_of(model, pairs, ds.corpus), dtype=float)
    reference = reference_of("cross-encoder")
    ref_scores = np.asarray(score_pairs_of(load(reference, ds), pairs, ds.corpus), dtype=float)
    report = {
        "command": "python -m bench.cross_encoder_pairs " + " ".join(argv or []),
        "commit": head_commit(), "dataset": ds.name, "split": "test", "pairs": len(pairs),
        "positives": int(labels.sum()),
        "protocol": "QQP held-out test pairs (cluster-disjoint from training); Acc at logit 0 (probability 0.5, "
                    "§3.3.3) and ROC AUC (sklearn) from the same scores of one model",
        "cross-encoder": {"acc": round(accuracy_at_zero(scores, labels), 5), "auc": round(pair_auc(scores, pairs), 5),
                          "model": "the default build's cross-encoder (var/systems/<dataset>/cross-encoder); pair "
                                   "scores are the model's own (no interpolation)"},
        "reference": {"system": reference, "auc": round(pair_auc(ref_scores, pairs), 5),
                      "note": "zero-shot cosine; all-MiniLM-L6-v2 was pre-trained on data that includes Quora "
                              "duplicates"},
        "seconds": round(time.perf_counter() - start, 1),
    }
    write_report(args.out, report)
    print(report["cross-encoder"], report["reference"]["auc"])
    return 0


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
