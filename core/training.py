"""Shared training plumbing: seeds, device, warm-up/decay schedule, early stopping, progress.

Model code lives in ``models/``; each system module (``core/retrieval/*``, ``core/rerank/*``) owns its
loop and calls these helpers so every trainer behaves the same (deterministic, resumable, logged).
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

import numpy as np
import torch

PROFILES = ("quick", "paper")


def set_seed(seed: int = 13) -> None:
    """Seed python, numpy and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def device() -> torch.device:
    """CUDA when present, else CPU (``QRS_DEVICE`` overrides)."""
    if os.environ.get("QRS_DEVICE"):
        return torch.device(os.environ["QRS_DEVICE"])
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
