"""Saving and loading artifacts: config (JSON) + weights (torch, ``weights_only=True``) + metrics.

Writes go to a temporary file first and are renamed into place, so a killed build never leaves a
half-written checkpoint that looks complete.
"""
from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from core.errors import MissingArtifactError


def save_json(path: str | Path, obj: Any) -> None:
    """Atomically write JSON (dataclasses are converted)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, sort_keys=True, default=str)
    os.replace(tmp, path)


def remove_partial(folder: str | Path) -> list[Path]:
    """Delete what an atomic write left when its process was killed mid-write (the hidden ``.NAME.XXXXXXXX``
    temporaries of :func:`save_json` / :func:`save_torch`); returns them."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    partial = [p for p in folder.iterdir() if p.is_file() and re.fullmatch(r"\..+\.[A-Za-z0-9_]{8}", p.name)]
    for path in partial:
        path.unlink(missing_ok=True)
    return partial


def load_json(path: str | Path, what: str, command: str) -> Any:
    path = Path(path)
    if not path.is_file():
        raise MissingArtifactError(what, command)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise MissingArtifactError(what, command, f"corrupt ({path.name}: {exc})") from None


def save_torch(path: str | Path, state: dict) -> None:
    """Atomically save a state dict (tensors and plain containers only)."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    os.close(fd)
    torch.save(state, tmp)
    os.replace(tmp, path)


def load_torch(path: str | Path, what: str, command: str) -> dict:
    """Load a state dict with ``weights_only=True``; missing or corrupt -> ``MissingArtifactError``."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise MissingArtifactError(what, command)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for truncated/garbage files
        raise MissingArtifactError(what, command, f"corrupt ({path.name}: {type(exc).__name__})") from None


def require_trained(folder: str | Path, what: str, command: str) -> None:
    """Refuse to serve a model folder without a finished training: no checkpoint (``model.pt``: not built), or no
    ``metrics.json`` (a training still running, or killed): a half-trained model is never served."""
    folder = Path(folder)
    if not (folder / "model.pt").is_file():
        raise MissingArtifactError(what, command)
    if not (folder / "metrics.json").is_file():
        raise MissingArtifactError(what, command, "still training (no metrics.json yet)")


def config_from_dict(cls: type, data: dict) -> Any:
    """Rebuild a config dataclass, ignoring unknown keys (older/newer artifacts)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in data.items() if k in names})


@contextmanager
def exclusive_lock(path: Path) -> Iterator[bool]:
    """Exclusive non-blocking ``flock`` on ``path`` (its holder's pid written in it): yields whether it was taken;
    released when the block ends or its holder exits or dies."""
    fh = open(path, "a+")
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
    finally:
        fh.close()


def is_locked(path: Path) -> bool:
    """True while a live process holds :func:`exclusive_lock` on ``path``."""
    if not path.exists():
        return False
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False
