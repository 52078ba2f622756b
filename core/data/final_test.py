"""Datasets marked test: an import whose labels only a final evaluation reads.

A researcher's own benchmark often comes as a train import and a test import. Marking the test import
(``python -m core experiment`` does it for the import it declares as test; ``mark_test`` from code) makes every
command honest about it: nothing trains, tunes or chooses on it (``core train`` refuses it in one line), and a refusal on it names models trained elsewhere instead of a command that would train on it
(``core.registry.build_command``). The marks are one JSON list in ``var/experiments/test_datasets.json``.
A single import used with its own split needs no mark: training reads its train split, choices its dev split,
and its test split is read by the final evaluation only.
"""
from __future__ import annotations

import json

from core.errors import StudioError


def _path():
    from core.paths import var_dir

    return var_dir() / "experiments" / "test_datasets.json"


def marked_test() -> list[str]:
    """The dataset names marked test, sorted (none when the file is missing)."""
    path = _path()
    if not path.is_file():
        return []
    try:
        names = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        raise StudioError(f"{path} is not a JSON list of dataset names; fix or delete it") from None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise StudioError(f"{path} is not a JSON list of dataset names; fix or delete it")
    return sorted(set(names))


def is_marked_test(name: str) -> bool:
    """Whether ``name`` is marked test (only a final evaluation reads its labels)."""
    return name in marked_test()


def mark_test(name: str) -> bool:
    """Mark ``name`` test; returns False when it already was."""
    from core.artifacts import save_json

    names = marked_test()
    if name in names:
        return False
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_json(path, sorted({*names, name}))
    return True


def refuse_if_marked_test(name: str, what: str) -> None:
    """One clear ``StudioError`` when ``what`` (training or tuning) would read the labels of a dataset marked test."""
    if is_marked_test(name):
        raise StudioError(f"{name} is marked test: {what} would read its labels (only the final evaluation may); "
                          f"train on another dataset and apply the model here as SYSTEM@DATASET")
