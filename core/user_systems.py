"""A researcher's own systems, registered beside the papers' systems without editing the project.

Three ways in, each one registration (``core.registry.register``) served by the one loader and runner:

- a sentence-transformers model folder as a **bi-encoder** retriever (``core.retrieval.st_biencoder``) or
  a **cross-encoder** reranker (``core.rerank.st_cross_encoder``):
  ``python -m core systems add NAME --bi-encoder PATH`` / ``--cross-encoder PATH`` [``--dataset D``];
- a **TREC run file** as a fixed system of one dataset (``core.retrieval.fixed_run``):
  ``python -m core systems add NAME --run FILE --dataset D``;
- a **plugin**: an installed distribution declaring an entry point in the group ``qrs.systems`` whose value
  is a module (or object) providing what a built-in system module provides: ``REGISTRATION`` (a
  ``SystemSpec``; or ``REGISTRATIONS``, several) and ``build`` / ``is_built`` / ``load`` [``config_dict``].

The first two persist in ``var/user_systems.toml`` (readable TOML; read with ``tomllib``, written with
``tomli-w``), validated on ``add``: bad input raises one ``StudioError`` line and writes nothing. Every change
reads and rewrites the file under one file lock (``filelock``; two ``add`` at once both land) and replaces it
atomically. A bi-encoder added with a dataset is saved as ``state = "encoding"`` until its encoding there is
done (``mark_usable``); an interrupted encoding is undone (``discard``), or, when the process was killed, the
entry stays "encoding" and the same ``add`` resumes it.
:func:`problems` lists, one line each, what the registry's discovery could not register (a plugin that fails to
import or register, a user file that cannot be read; shown on the Models page and by ``core systems``), never an
exception. The file itself (reading, writing, its entries' specs) is ``core.user_systems_file``.
"""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from core.errors import StudioError
from core.plugins import ENTRY_POINT_GROUP  # noqa: F401  (the group's name; plugin discovery is core.plugins)
from core.user_systems_file import (FOLDER_WAYS, NAME_RULE, WAYS, UserSystem, file_state, read_user_systems,  # noqa: F401
                                    update_user_systems, user_file)

PLUGIN_CHECK_S = 5.0  # a long-running app looks for newly installed plugins at most this often
_CHECKED = {"plugins": 0.0}  # when installed plugins were last compared with what discovery read


def problems() -> list[str]:
    """One line per plugin or user system that could not be registered (after discovery)."""
    from core.registry import discovery

    return list(discovery().problems)


def refresh_if_changed(force: bool = False) -> bool:
    """Re-discover when the user systems file changed since it was read, or the installed ``qrs.systems`` plugins
    did (checked at most every ``PLUGIN_CHECK_S`` seconds, or now with ``force``): a long-running app sees what
    ``core systems add/remove`` or a ``pip install`` did meanwhile, without a restart; True when it did."""
    import time

    from core.registry import discovery, refresh

    seen = discovery()
    changed = file_state() != seen.file_state
    now = time.monotonic()
    if not changed and (force or now - _CHECKED["plugins"] >= PLUGIN_CHECK_S):
        _CHECKED["plugins"] = now
        from core.plugins import plugin_state

        changed = plugin_state() != seen.plugin_state
    if not changed:
        return False
    refresh()
    return True


def source_key(name: str) -> str:
    """What a loaded user system depends on outside the artifacts folder (its model folder's content digest,
    its run file's size and time): a cache of loaded systems keys on it, so a changed folder is never served
    from a cache. "" for built-in and plugin systems."""
    from core.registry import get_spec

    spec = get_spec(name.split("@", 1)[0])
    if spec.origin != "user":
        return ""
    path = Path(spec.source)
    try:
        if path.is_dir():
            from core.retrieval.st_biencoder import folder_digest

            return folder_digest(path)
        stat = path.stat()
        return f"{stat.st_size}:{stat.st_mtime_ns}"
    except (OSError, StudioError):
        return "missing"


# ----------------------------------------------------------------------------- add / remove
def _check_name(name: str, resuming: UserSystem | None = None) -> None:
    from core.registry import list_systems

    if not NAME_RULE.fullmatch(name or ""):
        raise StudioError(f"system name {name!r}: use 1-48 lower-case letters, digits, '-', '_' or '.', "
                          "starting with a letter or digit")
    taken = {s.name: s.origin for s in list_systems()}
    if name in taken and resuming is None:
        raise StudioError(f"{name} is taken ({taken[name]} system); choose another name or remove it first")


def _check_model_folder(path: Path, way: str) -> None:
    """A sentence-transformers folder of the right kind, loaded once (a bad one is one line)."""
    import json

    if not path.is_dir():
        raise StudioError(f"{path} is not a folder (a sentence-transformers model folder is expected)")
    config = path / "config.json"
    if not config.is_file():
        raise StudioError(f"{path} has no config.json: not a transformers/sentence-transformers model folder")
    if not any(path.glob("*.safetensors")) and not any(path.glob("*.bin")):
        raise StudioError(f"{path} has no model weights (*.safetensors or *.bin)")
    try:
        architectures = json.loads(config.read_text(encoding="utf-8")).get("architectures") or []
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as exc:
        raise StudioError(f"{config} is not valid JSON ({exc})") from None
    classifier = any(a.endswith("ForSequenceClassification") for a in architectures)
    if way == "cross-encoder" and not classifier:
        raise StudioError(f"{path} is not a cross-encoder (config.json architectures {architectures}: no "
                          "...ForSequenceClassification); use --bi-encoder for an embedding model")
    if way == "bi-encoder" and classifier:
        raise StudioError(f"{path} is a sequence classifier: use --cross-encoder for it")
    try:
        if way == "bi-encoder":
            from sentence_transformers import SentenceTransformer

            SentenceTransformer(str(path), device="cpu", local_files_only=True)
        else:
            from sentence_transformers import CrossEncoder

            CrossEncoder(str(path), device="cpu", local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - whatever the library says, in one line
        raise StudioError(f"{path} does not load as a sentence-transformers {way}: "
                          f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}") from None


def _check_run(path: Path, dataset_name: str) -> None:
    """A readable TREC run whose queries and documents belong to the dataset (at least one query covered)."""
    from core.data.datasets import load_dataset
    from core.retrieval.fixed_run import read_rankings

    if not dataset_name:
        raise StudioError("a run file ranks one dataset's queries: say --dataset D")
    dataset = load_dataset(dataset_name)
    rankings = read_rankings(path)
    covered = [q for q in rankings if q in dataset.queries]
    if not covered:
        raise StudioError(f"{path}: none of its {len(rankings):,} query ids is a query of {dataset_name}")
    known = set(dataset.corpus)
    unknown = {d for q in covered for d, _ in rankings[q] if d not in known}
    if unknown:
        raise StudioError(f"{path}: {len(unknown):,} document ids are not in {dataset_name}'s collection "
                          f"(e.g. {sorted(unknown)[0]!r})")


def add_user_system(name: str, way: str, path: str | Path, dataset: str = "", state: str = "") -> UserSystem:
    """Validate and save a user system; returns it. Bad input: one ``StudioError`` line, nothing written.

    ``state="encoding"``: saved as not yet usable (``mark_usable`` when its encoding is done, ``discard`` if it
    fails); adding again an entry left "encoding" with the same way, path and dataset resumes it."""
    from core.registry import refresh

    if way not in WAYS:
        raise StudioError(f"way must be one of {', '.join(WAYS)}, not {way!r}")
    path = Path(path).expanduser()
    resolved = str(path.resolve()) if path.exists() else ""
    resuming = next((s for s in read_user_systems() if s.name == name and s.state == "encoding" and s.way == way
                     and s.path == resolved and s.dataset == dataset), None)
    _check_name(name, resuming)
    if resuming is not None:
        return resuming
    if not path.exists():
        raise StudioError(f"{path} does not exist")
    path = path.resolve()
    if dataset:
        from core.data.datasets import load_dataset

        load_dataset(dataset)  # an unknown dataset is one line naming the known ones
    if way == "run":
        if not path.is_file():
            raise StudioError(f"{path} is not a file (a TREC run file is expected)")
        _check_run(path, dataset)
    else:
        _check_model_folder(path, way)
    system = UserSystem(name, way, str(path), dataset, datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                        state)

    def append(systems: list[UserSystem]) -> list[UserSystem]:
        if any(s.name == name for s in systems):  # another process added it since the check above
            raise StudioError(f"{name} was just added by another process; choose another name; nothing was written")
        return [*systems, system]

    update_user_systems(append)
    refresh()
    if way == "run":  # nothing to train: mark it ready on its dataset (pooling lists ready systems)
        from core.data.datasets import load_dataset
        from core.registry import system_module

        system_module(name).build(load_dataset(dataset))
    return system


def remove_user_system(name: str) -> UserSystem:
    """Remove a user system from the file (its built artifacts stay in var/systems until deleted)."""
    from core.registry import refresh

    removed: list[UserSystem] = []

    def drop(systems: list[UserSystem]) -> list[UserSystem]:
        found = next((s for s in systems if s.name == name), None)
        if found is None:
            known = ", ".join(s.name for s in systems) or "none"
            raise StudioError(f"{name} is not a user system (user systems: {known}); built-in and plugin systems "
                              "cannot be removed here")
        removed.append(found)
        return [s for s in systems if s.name != name]

    update_user_systems(drop)
    refresh()
    return removed[0]


def mark_usable(name: str) -> None:
    """A user system's encoding is done: clear its "encoding" state (it is listed and served as usable)."""
    from core.registry import refresh

    update_user_systems(lambda systems: [replace(s, state="") if s.name == name else s for s in systems])
    refresh()


def discard(name: str) -> None:
    """Undo an ``add`` whose encoding did not finish (the entry goes; nothing else was written for it)."""
    from core.registry import refresh

    update_user_systems(lambda systems: [s for s in systems if s.name != name])
    refresh()
