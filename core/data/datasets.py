"""Datasets by name (``load_dataset``, ``list_datasets``): the bundled ones (``qqp-bimpm`` by default, ``trecqa``),
the ones imported with ``python -m core data import`` (``user/<name>``, kept in ``var/datasets``), and
``beir:``/``pairs:``/``candidates:`` + a path. What a dataset is: ``core.data.dataset_model``; how each is read:
``core.data.loaders``."""
from __future__ import annotations

import json
from pathlib import Path

from core.data.dataset_model import Dataset, Pair  # noqa: F401 - Pair and Dataset: imported from here by many modules
from core.data.loaders import load_beir_folder, load_candidates_tsv, load_pairs_dataset, load_qqp_bimpm, load_trecqa
from core.errors import UnknownNameError

BUNDLED = {
    "qqp-bimpm": "Quora Question Pairs, BiMPM partition (bundled; default)",
    "trecqa": "TrecQA answer selection (bundled)",
}
DEFAULT_DATASET = "qqp-bimpm"


def imported_root() -> Path:
    """``var/datasets``: one folder per imported dataset (written by ``core.data.imports``)."""
    from core.paths import artifact_dir

    return artifact_dir("datasets")


def imported_datasets() -> dict[str, str]:
    """``user/<name>`` -> description, for every imported dataset."""
    out = {}
    for meta in sorted(imported_root().glob("*/meta.json")):
        info = json.loads(meta.read_text(encoding="utf-8"))
        out[f"user/{meta.parent.name}"] = f"imported {info['kind']} data from {info['source']}"
    return out


def load_imported(name: str) -> Dataset | None:
    """Load ``user/<name>`` (or None when there is no such import)."""
    if not name.startswith("user/"):
        return None
    folder = imported_root() / name.removeprefix("user/")
    meta_path = folder / "meta.json"
    if not meta_path.is_file():
        return None
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    dataset = _PATH_LOADERS[meta["kind"]](folder / meta["file"])
    dataset.name = name
    return dataset


def list_datasets() -> dict[str, str]:
    """Bundled datasets plus any imported with ``python -m core data import``."""
    return {**BUNDLED, **imported_datasets()}


def load_dataset(name: str) -> Dataset:
    """Load a dataset by name: bundled, imported (``user/<name>``), or ``beir:``/``pairs:``/``candidates:`` + path."""
    if name == "qqp-bimpm":
        return load_qqp_bimpm()
    if name == "trecqa":
        return load_trecqa()
    kind, _, path = name.partition(":")
    if path and kind in _PATH_LOADERS:
        return _PATH_LOADERS[kind](path)
    imported = load_imported(name)
    if imported is not None:
        return imported
    raise UnknownNameError("dataset", name, list(list_datasets()) + ["beir:PATH", "pairs:PATH", "candidates:PATH"])


_PATH_LOADERS = {"beir": load_beir_folder, "pairs": load_pairs_dataset, "candidates": load_candidates_tsv}
