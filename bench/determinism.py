"""Two default builds of the same commit give the same models.

Builds ``--systems`` (with BM25, whose hard negatives they train on) into a fresh artifacts folder while
``--busy`` processes burn the CPU, and compares them with the build in ``QRS_VAR`` (default ``var/``,
built earlier on a quieter machine): every tensor of each ``model.pt``, the learning curve (steps and dev
values; seconds differ by nature), the stop reason and the held-out test numbers the build measured.

    .venv/bin/python -m bench.determinism --systems dual-encoder densetrans sdml-cnn --busy 2
    .venv/bin/python -m bench.determinism --systems frm cnn-rerank cross-encoder --busy 1 \
        --out bench/reports/determinism_rerankers.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.reporting import head_commit, write_report
from core.settings import settings

ROOT = Path(__file__).resolve().parent.parent
BURN = "import time\nwhile True:\n    pass\n"


def _shown(path: Path) -> str:
    """A path as the report shows it: relative to the repository when inside it (no machine paths)."""
    try:
        return str(path.resolve().relative_to(ROOT)) + "/"
    except ValueError:
        return path.name + "/"


def _facts(var: Path, dataset: str, system: str) -> dict:
    folder = var / "systems" / dataset / system
    metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
    log = metrics.get("training", {})
    test = metrics.get("test") or ({"test_roc_auc": metrics["test_roc_auc"]} if "test_roc_auc" in metrics else None)
    curve = [(p.get("step"), p.get("dev")) for p in log.get("curve", [])]
    if not curve and "history" in metrics:  # the CNN reranker logs dev MAP per evaluation as "history"
        curve = [tuple(sorted((k, v) for k, v in h.items() if "second" not in k)) for h in metrics["history"]]
    return {"test": test, "stopped": log.get("stopped"), "best_step": log.get("best_step", metrics.get("best_epoch")),
            "best_dev": log.get("best_dev", metrics.get("best_dev_map")), "curve": curve}


def weights_file(folder: Path) -> Path:
    """A system's trained weights: ``model.pt`` (first stages, cross-encoder) or ``weights.pt`` (FRM, CNN)."""
    return next((folder / n for n in ("model.pt", "weights.pt") if (folder / n).is_file()), folder / "model.pt")


def _same_weights(a: Path, b: Path) -> tuple[bool, list[str]]:
    import torch

    def flat(obj, prefix=""):
        if isinstance(obj, torch.Tensor):
            return {prefix: obj}
        if isinstance(obj, dict):
            return {k: v for key, val in obj.items() for k, v in flat(val, f"{prefix}.{key}").items()}
        return {}

    x = flat(torch.load(a, map_location="cpu", weights_only=True))
    y = flat(torch.load(b, map_location="cpu", weights_only=True))
    differ = sorted(k for k in x.keys() | y.keys() if k not in x or k not in y or not torch.equal(x[k], y[k]))
    return not differ, differ[:5]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--systems", nargs="+", default=["dual-encoder", "densetrans", "sdml-cnn"])
    ap.add_argument("--busy", type=int, default=2, help="CPU-burning processes during the second build")
    ap.add_argument("--reference-var", default=str(settings().var or ROOT / "var"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "reports" / "determinism.json"))
    args = ap.parse_args(argv)
    reference = Path(args.reference_var)
    second = Path(tempfile.mkdtemp(prefix="qrs-second-build-"))
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(args.busy)]
    started = time.perf_counter()
    load_start = os.getloadavg()
    try:
        subprocess.run([sys.executable, "-m", "core", "build", "--dataset", args.dataset, "--systems",
                        ",".join(["bm25", *args.systems])], cwd=ROOT, env={**os.environ, "QRS_VAR": str(second)}, check=True)
    finally:
        for p in burners:
            p.kill()
            p.wait()
    seconds = time.perf_counter() - started
    load_end = os.getloadavg()
    rows = {}
    for system in args.systems:
        first, again = _facts(reference, args.dataset, system), _facts(second, args.dataset, system)
        same, differ = _same_weights(weights_file(reference / "systems" / args.dataset / system),
                                     weights_file(second / "systems" / args.dataset / system))
        rows[system] = {"identical_weights": same, "differing_tensors": differ,
                        # a build that records no test number (FRM, the CNN reranker): identical weights serve
                        # identical rankings, so the test numbers follow from the weights
                        "identical_test_numbers": first["test"] == again["test"] if first["test"] is not None else same,
                        "test_numbers_recorded_by_build": first["test"] is not None,
                        "identical_curve": first["curve"] == again["curve"],
                        "first": {k: first[k] for k in ("test", "stopped", "best_step", "best_dev")},
                        "second": {k: again[k] for k in ("test", "stopped", "best_step", "best_dev")}}
        print(json.dumps({system: {k: rows[system][k] for k in ("identical_weights", "identical_test_numbers")}}))
    report = {
        "command": ".venv/bin/python -m bench.determinism " + " ".join(argv if argv is not None else sys.argv[1:]),
        "commit": head_commit(), "machine": platform.platform(), "cpus": os.cpu_count(), "dataset": args.dataset,
        "first_build": f"the build in {_shown(reference)} (the default build of this commit)",
        "second_build": (f"a fresh artifacts folder, `python -m core build --systems bm25 {' '.join(args.systems)}`, "
                         f"beside {args.busy} CPU-burning processes; {seconds:.0f} s; load average "
                         f"{load_start[0]:.1f} at the start, {load_end[0]:.1f} at the end"),
        "results": rows,
        "all_identical": all(r["identical_weights"] and r["identical_test_numbers"] for r in rows.values()),
    }
    write_report(args.out, report)
    shutil.rmtree(second, ignore_errors=True)
    return 0 if report["all_identical"] else 1


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
