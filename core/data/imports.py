"""Bring your own data: validate a file or folder, then copy it into the artifacts folder.

One-way dependency: this module imports ``core.data.datasets`` (loaders, listing), never the reverse.

The input is fully parsed before anything is written, and the copy is moved into place in one
rename, so a malformed file is never half-imported.
"""
from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

from core.data.datasets import _PATH_LOADERS, imported_datasets, imported_root, load_imported  # noqa: F401 (re-exported)
from core.errors import StudioError

KINDS = ("beir", "pairs", "candidates")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _root() -> Path:
    return imported_root()


def import_dataset(kind: str, source: str | Path, name: str) -> str:
    """Validate ``source`` as ``kind`` and store it as ``user/<name>``; returns the dataset name."""
    if kind not in KINDS:
        raise StudioError(f"unknown data kind {kind!r}; use one of {', '.join(KINDS)}")
    if not _NAME.match(name):
        raise StudioError(f"dataset name {name!r} must be 1-64 letters, digits, '_', '-' or '.'")
    source = Path(source)
    _PATH_LOADERS[kind](source)  # raises DataFormatError (file, line, problem) before any write
    target = _root() / name
    if target.exists():
        raise StudioError(f"dataset user/{name} already exists; pick another name or delete {target}")
    with tempfile.TemporaryDirectory(dir=_root()) as tmp:
        staging = Path(tmp) / "data"
        if source.is_dir():
            shutil.copytree(source, staging / source.name)
        else:
            staging.mkdir()
            shutil.copy2(source, staging / source.name)
        (staging / "meta.json").write_text(
            json.dumps({"kind": kind, "source": str(source), "file": source.name}), encoding="utf-8"
        )
        staging.rename(target)
    return f"user/{name}"
