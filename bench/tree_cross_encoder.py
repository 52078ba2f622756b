"""Train and measure the cross-encoder (tree-search-bert-guo.md §3.2 interaction-based; FRM's "BERT").

Builds the ``cross-encoder`` system in ``QRS_VAR`` with a profile and optional ``key=value`` overrides of
``CrossEncoderConfig`` and prints one JSON line: the learning curve (dev pair ROC AUC against steps and
seconds), why training stopped, the test pair ROC AUC on every held-out test pair, and the zero-shot
MiniLM cosine AUC (system ``minilm-pairs``) of the same dev/test pairs. Appends to
bench/reports/tree_bert_results.jsonl.

Usage (from the repository root):
  QRS_VAR=/tmp/x/var .venv/bin/python bench/tree_cross_encoder.py quick                 # the default-build recipe
  QRS_VAR=/tmp/x/var .venv/bin/python bench/tree_cross_encoder.py quick dev_pairs=256 max_seconds=2100
  QRS_VAR=/tmp/x/var .venv/bin/python bench/tree_cross_encoder.py quick head=cls        # the [CLS] head
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import fields, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import core  # noqa: E402,F401  (offline hub settings)
from core.data.datasets import load_dataset  # noqa: E402
from core.rerank import cross_encoder as ce  # noqa: E402

OUT = Path(__file__).resolve().parent / "reports" / "tree_bert_results.jsonl"


def parse(profile: str, overrides: list[str]) -> ce.CrossEncoderConfig:
    config = ce.make_config(profile)
    types = {f.name: type(getattr(config, f.name)) if getattr(config, f.name) is not None else float
             for f in fields(config)}
    changes = {}
    for item in overrides:
        key, _, value = item.partition("=")
        if key not in types:
            raise SystemExit(f"unknown setting {key!r}; known: {', '.join(types)}")
        changes[key] = (value.lower() in ("1", "true", "yes")) if types[key] is bool else types[key](value)
    return replace(config, **changes)


def main() -> None:
    args = sys.argv[1:]
    profile = args[0] if args and "=" not in args[0] else "quick"
    config = parse(profile, [a for a in args if "=" in a])
    dataset = load_dataset("qqp-bimpm")
    t0 = time.perf_counter()
    metrics = ce.build(dataset, profile, lambda f, m: print(f"[{time.perf_counter() - t0:7.1f}s] {m}", flush=True)
                       if ("dev" in m or "reference" in m or "test" in m) else None, config=config)
    row = {"what": "cross-encoder pair ROC AUC (held-out test pairs) vs zero-shot MiniLM cosine, same pairs",
           "profile": profile, "config": {f.name: getattr(config, f.name) for f in fields(config)},
           "test_roc_auc": metrics.get("test_roc_auc"), "reference_test_roc_auc": metrics.get("reference_test_roc_auc"),
           "test_pairs": metrics.get("test_pairs"), "dev_pairs": metrics.get("dev_pairs"),
           "reference_dev_roc_auc": metrics["training"]["reference"]["dev"],
           "curve": [(p["step"], round(p["dev"], 4), round(p["seconds"], 1), p["loss"] and round(p["loss"], 4))
                     for p in metrics["training"]["curve"]],
           "stopped": metrics["training"]["stopped"], "best_step": metrics["training"]["best_step"],
           "build_seconds": round(metrics["build_seconds"], 1), "machine": "2 shared CPU cores under load, nice 10"}
    line = json.dumps(row, default=float)
    print(line, flush=True)
    with OUT.open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")


if __name__ == "__main__":
    main()
