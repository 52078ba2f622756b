"""What the Models page shows about a system: saved config (paper defaults marked) and artifact size."""
from __future__ import annotations

import json

from core.registry import get_spec, slug, system_module
from core.paths import var_dir


def artifact_size(dataset_name: str, system: str) -> int:
    """Bytes on disk of a system's artifacts for a dataset (all variants)."""
    root = var_dir() / "systems" / slug(dataset_name)
    total = 0
    for folder in root.glob(f"{system}*"):
        if folder.name == system or folder.name.startswith(f"{system}@"):
            total += sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    return total


def system_config(system: str, dataset_name: str) -> dict:
    """The saved config of the built system, else the module's defaults (``config_dict``)."""
    folder = var_dir() / "systems" / slug(dataset_name) / system
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
    return {"defaults (paper)": fn()} if fn else {}
