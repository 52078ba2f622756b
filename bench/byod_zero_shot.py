"""Every system ranks TrecQA's own candidate lists, trained models applied zero-shot.

For each system name (``SYSTEM`` or ``SYSTEM@TRAINED_ON``) that can be loaded from the artifacts
folder, rank each question's candidates of raw TEST and clean TEST through ``core.serving.loader.load``
(the generic path of ``core.transfer`` / ``core.serving.candidates``) and report ranx MAP / MRR over the
questions with at least one correct answer (as the CNN report does). Systems that are not built are
listed as skipped with the reason (the command that builds them).

Usage: QRS_VAR=... python -m bench.byod_zero_shot [--systems a,b,...] [--out JSON]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


DEFAULT = ("bm25", "minilm", "glove-mean", "cnn-rerank", "densetrans@qqp-bimpm", "sdml-cnn@qqp-bimpm",
           "dual-encoder@qqp-bimpm", "frm@qqp-bimpm", "cross-encoder@qqp-bimpm", "cnn-rerank@qqp-bimpm",
           "minilm@finetuned@qqp-bimpm")
SPLITS = ("test", "clean-test")


def main() -> None:
    import torch

    from core.data.datasets import load_dataset
    from core.analysis.compared_runs import system_runs
    from core.errors import StudioError
    from core.evaluation import evaluate_run
    from core.serving.loader import load as load_system

    ap = argparse.ArgumentParser()
    ap.add_argument("--systems", default=",".join(DEFAULT))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ds = load_dataset("trecqa")
    result: dict = {"dataset": "trecqa", "protocol": "each question's own candidates; ranx map@1000 / mrr@1000 "
                    "over questions with >= 1 correct answer", "systems": {}, "skipped": {}}
    for name in args.systems.split(","):
        start = time.perf_counter()
        try:
            load_system(name, ds)  # raises MissingArtifactError (with its build command) if not built
        except StudioError as exc:
            result["skipped"][name] = str(exc)
            print(f"skip {name}: {exc}", file=sys.stderr)
            continue
        row = {}
        for split in SPLITS:
            qids = [q for q in ds.query_splits[split] if any(v > 0 for v in ds.qrels[q].values())]
            (run,) = system_runs([name], ds, {q: ds.queries[q] for q in qids}, k=1000,
                                 loader=lambda n, d: load_system(n, d))
            row[split] = {"queries": len(qids), **evaluate_run({q: ds.qrels[q] for q in qids}, run,
                                                               ["map@1000", "mrr@1000"])}
        row["seconds"] = time.perf_counter() - start
        result["systems"][name] = row
        print(f"{name}: " + "  ".join(f"{s} MAP {row[s]['map@1000']:.4f} MRR {row[s]['mrr@1000']:.4f}"
                                      for s in SPLITS), file=sys.stderr)
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
