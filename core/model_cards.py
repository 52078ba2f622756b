"""What the Models page shows about a system: saved config (paper defaults marked), artifact size, the
learning curve and convergence of learned systems (``core.training.TrainLog``), and the longer run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from core.paths import REPO_ROOT, var_dir
from core.registry import get_spec, slug, system_module


def artifact_size(dataset_name: str, system: str, variant: str | None = None) -> int:
    """Bytes on disk of a system's artifacts for a dataset (all variants; with ``variant``, that one's folder)."""
    root = var_dir() / "systems" / slug(dataset_name)
    total = 0
    for folder in root.glob(f"{system}*"):
        if variant is not None:
            if folder.name != f"{system}@{slug(variant)}":
                continue
        elif not (folder.name == system or folder.name.startswith(f"{system}@")):
            continue
        total += sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    return total


def system_config(system: str, dataset_name: str, variant: str | None = None) -> dict:
    """The saved config of the built system (variant), else the module's defaults (``config_dict``)."""
    leaf = system if not variant else f"{system}@{slug(variant)}"
    folder = var_dir() / "systems" / slug(dataset_name) / leaf
    saved = folder / "config.json"
    if saved.is_file():
        try:
            return {"saved config": json.loads(saved.read_text(encoding="utf-8"))}
        except ValueError:
            pass
    get_spec(system)
    try:
        module = system_module(system)
    except ModuleNotFoundError:
        return {}
    fn = getattr(module, "config_dict", None)
    if not fn:
        return {}
    return {"defaults (paper)": fn(variant) if variant else fn()}


# ----------------------------------------------------------------------------- learning curves
def metrics_file(dataset_name: str, system: str, variant: str | None = None) -> dict:
    """The system's saved ``metrics.json`` ({} when missing or unreadable); never creates folders."""
    leaf = system if not variant else f"{system}@{slug(variant)}"
    path = var_dir() / "systems" / slug(dataset_name) / leaf / "metrics.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def training_log(dataset_name: str, system: str, variant: str | None = None,
                 status_metrics: dict | None = None) -> dict | None:
    """The ``TrainLog.to_dict()`` of a learned system (core/training.py schema), or None.

    Looked up in the build status's metrics first, then in ``metrics.json``. Points without a
    numeric ``dev`` are dropped, so a half-written file cannot break the page.
    """
    for source in (status_metrics or {}, metrics_file(dataset_name, system, variant)):
        log = source.get("training") if isinstance(source, dict) else None
        if isinstance(log, dict) and isinstance(log.get("curve"), list):
            curve = [p for p in log["curve"] if isinstance(p, dict) and isinstance(p.get("dev"), (int, float))
                     and isinstance(p.get("step"), (int, float))]
            return {**log, "curve": curve}
    return None


def convergence_note(log: dict) -> str:
    """One line: converged (patience), still improving at its cap, or stopped by the time budget."""
    stopped = log.get("stopped", "")
    metric = log.get("dev_metric", "dev metric")
    best = log.get("best_dev")
    best_text = f"best dev {metric} {best:.4f} at step {log.get('best_step')}" if isinstance(best, (int, float)) else ""
    if stopped == "patience":
        return f"converged: no dev improvement for {log.get('patience')} evaluations; {best_text}"
    if stopped == "cap":
        return f"still improving at its cap ({log.get('max_steps') or 'step cap'} steps); {best_text}"
    if stopped == "budget":
        return f"stopped by its time budget while improving; {best_text}"
    return f"training state unknown ({stopped or 'not recorded'}); {best_text}"


def below_reference(log: dict | None) -> str | None:
    """One line when the best dev metric ended below the untrained or zero-shot reference, else None.

    A learned model that does not beat its reference is said to wherever it is shown: the
    trainer's output, the build's table, and the Models page.
    """
    if not log:
        return None
    best, metric = log.get("best_dev"), log.get("dev_metric", "dev metric")
    ref = log.get("reference") or {}
    refs = [(ref.get("system", "reference") + (f"@{ref['variant']}" if ref.get("variant") else ""), ref.get("dev"))]
    untrained = ref.get("untrained") if isinstance(ref.get("untrained"), dict) else None
    if untrained:
        refs.append(("the untrained model", untrained.get("dev")))
    if not isinstance(best, (int, float)):
        return None
    below = [(name, float(dev)) for name, dev in refs if isinstance(dev, (int, float)) and best < dev]
    if not below:
        return None
    name, dev = max(below, key=lambda r: r[1])
    return (f"BELOW ITS REFERENCE: best dev {metric} {best:.4f} < {name} {dev:.4f} on the same dev data; "
            f"use the reference, or train longer / on more data")


def needs_longer_run(log: dict) -> bool:
    """True when training ended before convergence (cap or time budget)."""
    return log.get("stopped") in ("cap", "budget")


def longer_run_command(dataset_name: str, system: str, variant: str | None = None) -> list[str]:
    """``python -m core train --system S --profile full`` (resumable) for this dataset/variant."""
    cmd = [sys.executable, "-m", "core", "train", "--dataset", dataset_name, "--system", system, "--profile", "full"]
    return cmd + ([f"--variant={variant}"] if variant else [])


def longer_run_log(dataset_name: str, system: str, variant: str | None = None) -> Path:
    leaf = system if not variant else f"{system}@{slug(variant)}"
    return var_dir() / "build" / slug(dataset_name) / f"{leaf}.full.log"


def start_longer_run(dataset_name: str, system: str, variant: str | None = None) -> bool:
    """Start the full-profile training in the background (progress goes to the build status file).

    Returns False (and starts nothing) when this system is already being built or trained.
    """
    from core.build import read_status
    from core.data.datasets import load_dataset

    get_spec(system)
    if read_status(load_dataset(dataset_name), get_spec(system), variant).state == "building":
        return False
    log = longer_run_log(dataset_name, system, variant)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        subprocess.Popen(longer_run_command(dataset_name, system, variant), cwd=REPO_ROOT, stdout=out,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return True
