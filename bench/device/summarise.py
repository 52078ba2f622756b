"""Turn a device run's logs (``bash bench/device/run.sh``) into ``bench/reports/paper_profiles_cuda.json``.

    python -m bench.device.summarise FOLDER [--out bench/reports/paper_profiles_cuda.json]

FOLDER holds what came back: ``env.txt``, ``NAME.log`` and ``NAME-artifacts.tgz`` of the paper-profile jobs and
``NAME-after-warmup.log`` of the patience-after-warm-up runs. Every number is read from those files.
"""
from __future__ import annotations

import argparse
import json
import re
import tarfile
from pathlib import Path

_STEP = re.compile(r"^\s*([\d.]+)s .*step (\d+)/(\d+) dev ([\w@]+) ([\d.]+) \(best ([\d.]+)\)")
_TRAIN = re.compile(r"train rc=(\d+) seconds=(\d+)")
_METRIC = re.compile(r"^(recall@100|H@1|mrr@100|map@20|map|mrr)\s+([\d.]+)\s", re.M)
_QUERIES = re.compile(r"\[test: ([\d,]+) queries")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace").replace("\r", "\n")


def _artifact_metrics(tgz: Path) -> dict:
    """The trained system's ``metrics.json`` (its training curve, stop and held-out numbers), by folder."""
    out: dict = {}
    if not tgz.is_file():
        return out
    with tarfile.open(tgz) as tar:
        for member in tar.getmembers():
            if member.name.endswith("/metrics.json"):
                data = json.load(tar.extractfile(member))
                out[member.name.split("/")[-2]] = data
    return out


def paper_job(folder: Path, name: str) -> dict:
    """One ``core train --profile paper`` + ``core eval`` job: exit codes, seconds, test metrics, training."""
    text = _text(folder / f"{name}.log")
    train = _TRAIN.search(text)
    error = next((line.strip() for line in text.splitlines() if line.startswith("error:")), None)
    job: dict = {"train_exit": int(train.group(1)) if train else None,
                 "train_wall_seconds": int(train.group(2)) if train else None, "error": error}
    if "eval rc=0" in text:
        queries = _QUERIES.search(text)
        job["test_queries"] = int(queries.group(1).replace(",", "")) if queries else None
        job["test"] = {m: float(v) for m, v in _METRIC.findall(text)}
    metrics = _artifact_metrics(folder / f"{name}-artifacts.tgz").get(name, {})
    training = metrics.get("training") or {}
    if metrics:
        job["profile"] = metrics.get("profile")
        job["steps"] = metrics.get("steps")
        job["train_seconds"] = metrics.get("train_seconds")
        job["best_step"] = training.get("best_step", metrics.get("best_step"))
        job["stop"] = training.get("stop")
        job["curve"] = [(p["step"], round(p["dev"], 4)) for p in training.get("curve", []) if p.get("dev") is not None]
    below = [line.strip() for line in text.splitlines() if "BELOW ITS REFERENCE" in line]
    job["below_reference"] = below
    return job


def after_warmup_job(path: Path) -> dict:
    """A patience-after-warm-up run: its dev curve as far as it got and whether it ended by itself."""
    text = _text(path)
    matches = [m for m in map(_STEP.match, text.splitlines()) if m]
    curve = [(int(m.group(2)), float(m.group(5)), float(m.group(1))) for m in matches]
    header = next((json.loads(line) for line in text.splitlines() if line.startswith('{"system"')), {})
    best = max(curve, key=lambda p: p[1]) if curve else None
    rc = re.findall(r"^rc=(\d+)", text, re.M)
    return {**header, "ended": "by itself" if rc and rc[-1] == "0" else "cut by the device's time limit",
            "max_steps": int(matches[0].group(3)) if matches else None,
            "dev_metric": matches[0].group(4) if matches else None,
            "untrained_dev": curve[0][1] if curve else None,
            "best": {"step": best[0], "dev": best[1]} if best else None,
            "last": {"step": curve[-1][0], "dev": curve[-1][1], "seconds": curve[-1][2]} if curve else None,
            "curve": [(s, d) for s, d, _ in curve]}


def summarise(folder: Path) -> dict:
    env = _text(folder / "env.txt").strip().splitlines() if (folder / "env.txt").is_file() else []
    paper = sorted(p.stem for p in folder.glob("*.log") if not p.stem.endswith("-after-warmup"))
    warm = sorted(folder.glob("*-after-warmup.log"))
    return {"what": "the `paper` training profiles on CUDA (bench/device/run.sh), then the same profile with its "
                    "patience counted after the warm-up (bench/device/patience_after_warmup.py)",
            "machine": "one NVIDIA H200 (the workplace's lent accelerator), 16 CPU cores; jobs side by side",
            "environment": env,
            "dev_protocol": "dev queries against the whole dev collection (dev_distractors 0 in the paper profiles), "
                            "each query dropped from its own ranking; test: `core eval --split test`",
            "paper_profile": {name: paper_job(folder, name) for name in paper},
            "patience_after_warmup": {p.stem.removesuffix("-after-warmup"): after_warmup_job(p) for p in warm}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.device.summarise")
    parser.add_argument("folder")
    parser.add_argument("--out", default="bench/reports/paper_profiles_cuda.json")
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    if not (folder / "env.txt").is_file():
        parser.exit(2, f"error: {folder}: no env.txt (unpack the device run's results.tgz there)\n")
    Path(args.out).write_text(json.dumps(summarise(folder), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
