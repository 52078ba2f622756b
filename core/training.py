"""Shared training plumbing: seeds, device, warm-up/decay schedule, early stopping, progress.

Model code lives in ``models/``; each system module (``core/retrieval/*``, ``core/rerank/*``) owns its
loop and calls these helpers so every trainer behaves the same (deterministic, resumable, logged).
"""
from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch

from core.settings import settings

# quick: default build (≤ 30 min all systems); full: longer caps; paper: the paper recipe; smoke: a wiring check of a
# few optimiser steps (a system without a "smoke" entry trains its quick settings) whose models measure nothing
PROFILES = ("quick", "full", "paper", "smoke")


def set_seed(seed: int = 13) -> None:
    """Seed python, numpy and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


@contextmanager
def preserved_rng() -> Iterator[None]:
    """Run a block without moving python's, numpy's or torch's global random state: work a trainer does between
    :func:`set_seed` and its first step only when a cache is cold (an untrained reference's modules drawing their
    initial weights) must not change the model, or a system built alone differs from the same system built after
    another one filled that cache."""
    py, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []):
        try:
            yield
        finally:
            random.setstate(py)
            np.random.set_state(np_state)


def device() -> torch.device:
    """CUDA when present, else CPU (``QRS_DEVICE`` overrides)."""
    if settings().device:
        return torch.device(settings().device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        from core.errors import UnknownNameError

        raise UnknownNameError("profile", profile, list(PROFILES))
    return profile


def linear_warmup_decay(optimizer: torch.optim.Optimizer, total_steps: int, warmup_fraction: float = 0.1):
    """Linear warm-up over ``warmup_fraction`` of the steps, then linear decay to 0."""
    warmup = max(1, int(total_steps * warmup_fraction))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


@dataclass
class EarlyStopping:
    """Stop when the dev metric has not improved for ``patience`` evaluations (higher is better)."""

    patience: int = 2
    best: float = float("-inf")
    best_epoch: int = -1
    bad: int = 0
    history: list[float] = field(default_factory=list)

    def step(self, value: float, epoch: int) -> bool:
        """Record ``value``; True if it is the best so far (save a checkpoint then)."""
        self.history.append(value)
        if value > self.best:
            self.best, self.best_epoch, self.bad = value, epoch, 0
            return True
        self.bad += 1
        return False

    @property
    def should_stop(self) -> bool:
        return self.bad >= self.patience


def resume_from_checkpoint(path, key: str, model, optimizer, scheduler, stopper: EarlyStopping) -> int:
    """Restore an epoch checkpoint saved for the same config ``key``; returns the epoch to start at.

    A missing, unreadable or different-config checkpoint means starting over (epoch 0).
    """
    from pathlib import Path

    path = Path(path) if path is not None else None
    if path is None or not path.is_file():
        return 0
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        if ckpt.get("config") != key:
            return 0
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        stopper.best, stopper.best_epoch, stopper.bad = ckpt["best"], ckpt["best_epoch"], ckpt["bad"]
        stopper.history = list(ckpt["history"])
        return int(ckpt["epoch"]) + 1
    except Exception:  # unreadable checkpoint: start over
        return 0


# ----------------------------------------------------------------------------- convergence contract
# Every learned system trains "until its dev metric stops improving" and saves its learning curve.
# Its metrics.json carries ``TrainLog.to_dict()`` under the key "training" (schema below), which the
# Models page, BENCHMARKS.md and the tests read. Keep the schema stable:
#   {"dev_metric": "recall@100", "curve": [{"step", "epoch", "seconds", "dev", "loss"}, ...],
#    "best_step", "best_dev", "stopped": "patience" | "cap" | "budget", "converged": bool,
#    "patience", "max_steps", "reference": {"system", "variant", "dev", "test", "metric"} | None}
@dataclass
class CurvePoint:
    """One dev evaluation during training."""

    step: int
    epoch: float
    seconds: float
    dev: float
    loss: float | None = None


@dataclass
class TrainLog:
    """Early stopping on a dev metric (higher is better) plus the learning curve it saw.

    ``record`` returns True when the value is a new best (save the checkpoint then); ``should_stop``
    is True after ``patience`` evaluations without improvement of more than ``min_delta``; an evaluation at or
    before ``grace_steps`` (a learning-rate warm-up, whose first steps often lower the dev metric) does not count
    towards the patience. ``finish``
    says why training ended: "patience" (converged), "cap" (the step/epoch cap was hit while still
    improving: a longer profile should finish the job) or "budget" (a time budget).
    """

    dev_metric: str
    patience: int = 3
    min_delta: float = 0.0
    max_steps: int | None = None
    curve: list[CurvePoint] = field(default_factory=list)
    best_dev: float = float("-inf")
    best_step: int = -1
    bad: int = 0
    stopped: str = ""
    reference: dict | None = None
    grace_steps: int = 0

    def record(self, step: int, epoch: float, seconds: float, dev: float, loss: float | None = None) -> bool:
        self.curve.append(CurvePoint(int(step), float(epoch), float(seconds), float(dev),
                                     None if loss is None else float(loss)))
        if dev > self.best_dev + self.min_delta:
            self.best_dev, self.best_step, self.bad = float(dev), int(step), 0
            return True
        if step > self.grace_steps:
            self.bad += 1
        return False

    @property
    def should_stop(self) -> bool:
        return self.bad >= self.patience

    def finish(self, reason: str | None = None) -> "TrainLog":
        """Mark why training ended (default: patience if it triggered, else cap)."""
        self.stopped = reason or ("patience" if self.should_stop else "cap")
        return self

    @property
    def converged(self) -> bool:
        return self.stopped == "patience"

    def to_dict(self) -> dict:
        from dataclasses import asdict

        return {"dev_metric": self.dev_metric, "curve": [asdict(p) for p in self.curve],
                "best_step": self.best_step, "best_dev": self.best_dev, "stopped": self.stopped,
                "converged": self.converged, "patience": self.patience, "max_steps": self.max_steps,
                "reference": self.reference, "grace_steps": self.grace_steps}

    @classmethod
    def from_dict(cls, data: dict) -> "TrainLog":
        log = cls(dev_metric=data["dev_metric"], patience=int(data.get("patience", 3)),
                  max_steps=data.get("max_steps"), reference=data.get("reference"),
                  grace_steps=int(data.get("grace_steps", 0)))
        for p in data.get("curve", []):
            log.record(p["step"], p["epoch"], p["seconds"], p["dev"], p.get("loss"))
        log.stopped = data.get("stopped", "")
        return log


def profile_settings(table: dict[str, dict], profile: str) -> dict:
    """A system's overrides for ``profile``; a system without a "full" or "smoke" entry uses its "quick" one."""
    check_profile(profile)
    if profile in table:
        return table[profile]
    return table.get("quick", {})


def save_train_state(path, config_key: str, parts: dict, step: int, seconds: float, log: TrainLog, **extra) -> None:
    """``last.pt`` of a step-based trainer: every part's state dict (model, optimiser, scheduler, ...)
    under its name, the step, the seconds trained, the TrainLog, torch's RNG state (so that dropout after a
    resume draws the same masks as an uninterrupted run) and ``extra`` scalars, for ``config_key``."""
    import json

    from core.artifacts import save_torch

    rng = {"torch_rng": torch.get_rng_state()}  # dropout's generator: a resumed run draws what an uninterrupted one would
    if torch.cuda.is_available():
        rng["cuda_rng"] = torch.cuda.get_rng_state_all()
    save_torch(path, {**{name: part.state_dict() for name, part in parts.items()}, "step": step,
                      "seconds": seconds, "config": config_key, "log": json.dumps(log.to_dict()), **rng, **extra})


def load_train_state(path, config_key: str, parts: dict) -> dict | None:
    """Resume what ``save_train_state`` wrote for the same ``config_key``: loads every part and returns
    the saved dict with ``log`` as a TrainLog. A missing, foreign or unreadable file returns None and
    leaves every part as it was (a part loaded before the failure is restored)."""
    import copy
    import json
    from pathlib import Path

    path = Path(path)
    if not path.is_file():
        return None
    before = {name: copy.deepcopy(part.state_dict()) for name, part in parts.items()}
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        if state.get("config") != config_key:
            return None
        for name, part in parts.items():
            part.load_state_dict(state[name])
        state["log"] = TrainLog.from_dict(json.loads(state["log"]))
        if isinstance(state.get("torch_rng"), torch.Tensor):
            torch.set_rng_state(state["torch_rng"])
        if state.get("cuda_rng") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        return state
    except Exception:  # unreadable or foreign resume state: start over
        for name, part in parts.items():
            part.load_state_dict(before[name])
        return None
