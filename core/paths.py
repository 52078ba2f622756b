"""Where things live: bundled data (in the repo) and built artifacts (one git-ignored folder).

``QRS_VAR`` overrides the artifacts folder (tests and e2e runs point it at a temp dir);
``QRS_DATA`` overrides the bundled data folder (both read through ``core.settings``).
"""
from __future__ import annotations

from pathlib import Path

from core.settings import settings

REPO_ROOT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """The bundled datasets folder (``data/`` in the repo)."""
    return settings().data or REPO_ROOT / "data"


def var_dir() -> Path:
    """The git-ignored artifacts folder (indexes, checkpoints, caches, SQLite)."""
    path = settings().var or REPO_ROOT / "var"
    path.mkdir(parents=True, exist_ok=True)
    return path


def artifact_dir(*parts: str) -> Path:
    """A sub-folder of the artifacts folder, created on demand."""
    path = var_dir().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
