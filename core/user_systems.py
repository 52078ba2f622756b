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
:func:`discover` is what the registry runs, lazily and once, on its first lookup; a plugin that fails to
import or register, or a user file that cannot be read, becomes one line in :func:`problems` (shown on
the Models page and by ``core systems``), never an exception.
"""
from __future__ import annotations

import os
import re
import threading
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from core.errors import StudioError
from core.paths import var_dir
from core.plugins import ENTRY_POINT_GROUP  # noqa: F401  (the group's name; plugin discovery is core.plugins)

FILE_NAME = "user_systems.toml"
WAYS = ("bi-encoder", "cross-encoder", "run")
# the two ways a model folder comes in (the Models page's form), with what each becomes
FOLDER_WAYS = {WAYS[0]: "bi-encoder folder (retriever)", WAYS[1]: "cross-encoder folder (reranker)"}
NAME_RULE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,47}")
_PROBLEMS: list[str] = []
_SEEN: dict = {"file": None, "plugins": None, "checked": 0.0}  # what discovery last read; when plugins were checked
PLUGIN_CHECK_S = 5.0  # a long-running app looks for newly installed plugins at most this often
_HEADER = ("# Your own systems (python -m core systems add / remove). One table per system:\n"
           "# way = bi-encoder | cross-encoder | run; path = the model folder or run file; dataset = the\n"
           "# dataset a run ranks (or a bi-encoder was first encoded on).\n")


@dataclass(frozen=True)
class UserSystem:
    """One entry of the user systems file."""

    name: str
    way: str  # one of WAYS
    path: str  # absolute path of the model folder or run file
    dataset: str = ""  # the dataset a run ranks ("" for a model folder added without --dataset)
    added: str = ""  # UTC time it was added (ISO 8601)
    state: str = ""  # "" usable; "encoding": being encoded on ``dataset`` (not usable until it is done)


def user_file() -> Path:
    """``var/user_systems.toml`` (``QRS_VAR`` moves it with the rest of the artifacts)."""
    return var_dir() / FILE_NAME


def read_user_systems() -> list[UserSystem]:
    """The user systems in the file, in the order they were added (a missing file: none).
    A malformed file raises ``StudioError`` naming it."""
    path = user_file()
    if not path.is_file():
        return []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise StudioError(f"{path} is not valid TOML ({exc}); fix or delete it") from None
    out = []
    for name, row in (data.get("systems") or {}).items():
        if not isinstance(row, dict) or row.get("way") not in WAYS or not isinstance(row.get("path"), str):
            raise StudioError(f"{path}: [systems.{name}] needs way = one of {', '.join(WAYS)} and path = \"...\"")
        out.append(UserSystem(name, row["way"], row["path"], str(row.get("dataset", "")), str(row.get("added", "")),
                              str(row.get("state", ""))))
    return out


LOCK_TIMEOUT_S = 30.0


@contextmanager
def _locked() -> Iterator[None]:
    """Hold the user file's lock (``.user_systems.toml.lock`` beside it) across a read-modify-write."""
    from filelock import FileLock, Timeout

    path = user_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path.with_name(f".{path.name}.lock")), timeout=LOCK_TIMEOUT_S)
    try:
        with lock:
            yield
    except Timeout:
        raise StudioError(f"{path} is locked by another add/remove for over {LOCK_TIMEOUT_S:.0f} s; "
                          "nothing was changed, try again") from None


def _update(change: Callable[[list[UserSystem]], list[UserSystem]]) -> None:
    """Read the file, ``change`` the list, write it back: under the lock, so no concurrent change is lost."""
    with _locked():
        _write(change(read_user_systems()))


def _write(systems: list[UserSystem]) -> None:
    """Write the file atomically (a temporary file renamed over it); callers hold ``_locked``."""
    import tomli_w

    table = {"systems": {s.name: {k: v for k, v in (("way", s.way), ("path", s.path), ("dataset", s.dataset),
                                                    ("added", s.added), ("state", s.state)) if v} for s in systems}}
    path = user_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(_HEADER + tomli_w.dumps(table), encoding="utf-8")
    tmp.replace(path)


# ----------------------------------------------------------------------------- registrations
def spec_of(system: UserSystem):
    """The ``SystemSpec`` of a user system (its provider is made from ``module`` by the registry)."""
    from core.registry import SystemSpec

    common = dict(origin="user", source=system.path, default_build=False)
    on_demand = "your model folder may change: its rankings are computed on demand, never read from a stored run"
    if system.way == "bi-encoder":
        return SystemSpec(system.name, "retriever", f"{system.name} (your bi-encoder)",
                          "core.retrieval.st_biencoder:BiEncoderFolder", f"sentence-transformers folder {system.path}",
                          datasets=("*",), family="dense", ann_indexable=True, milvus_servable=True, cheap=True,
                          knobs=("index", "nprobe", "efSearch"),
                          note=(f"being encoded on {system.dataset}, not usable yet (if that was interrupted, the same "
                                f"`python -m core systems add {system.name} --bi-encoder {system.path} --dataset "
                                f"{system.dataset}` resumes it)" if system.state == "encoding" else
                                "your model: encoded on first use, re-encoded when the folder changes"),
                          not_stored=on_demand, **common)
    if system.way == "cross-encoder":
        return SystemSpec(system.name, "reranker", f"{system.name} (your cross-encoder)",
                          "core.rerank.st_cross_encoder:CrossEncoderFolder",
                          f"sentence-transformers cross-encoder folder {system.path}", datasets=("*",),
                          family="cross-encoder", note="your model: scores (query, candidate) pairs",
                          not_stored=on_demand, **common)
    return SystemSpec(system.name, "retriever", f"{system.name} (your run file)", "core.retrieval.fixed_run:FixedRun",
                      f"TREC run file {system.path}", datasets=(system.dataset,), family="run",
                      note=f"a fixed run of {system.dataset}: ranks only the queries it covers, not typed queries",
                      not_stored="a fixed run: its rankings are the file itself", **common)


def problems() -> list[str]:
    """One line per plugin or user system that could not be registered (after discovery)."""
    from core.registry import list_systems

    list_systems()  # discovery runs on the registry's first lookup
    return list(_PROBLEMS)


def discover() -> None:
    """Register the user systems file and the ``qrs.systems`` plugins (called by the registry, once)."""
    from core.registry import register

    _PROBLEMS.clear()
    _SEEN["file"] = _file_state()
    try:
        systems = read_user_systems()
    except StudioError as exc:
        _PROBLEMS.append(f"user systems: {exc}")
        systems = []
    for system in systems:
        try:
            register(spec_of(system))
        except ValueError as exc:
            _PROBLEMS.append(f"user system {system.name}: {exc}")
    _discover_plugins()


def _file_state() -> tuple | None:
    try:
        stat = user_file().stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


def refresh_if_changed(force: bool = False) -> bool:
    """Re-discover when the user systems file changed since it was read, or the installed ``qrs.systems`` plugins
    did (checked at most every ``PLUGIN_CHECK_S`` seconds, or now with ``force``): a long-running app sees what
    ``core systems add/remove`` or a ``pip install`` did meanwhile, without a restart; True when it did."""
    import time

    from core.registry import list_systems, refresh

    list_systems()
    changed = _file_state() != _SEEN["file"]
    now = time.monotonic()
    if not changed and (force or now - _SEEN["checked"] >= PLUGIN_CHECK_S):
        _SEEN["checked"] = now
        from core.plugins import plugin_state

        changed = plugin_state() != _SEEN["plugins"]
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



def _discover_plugins() -> None:
    from core.plugins import discover_plugins

    _SEEN["plugins"] = discover_plugins(_PROBLEMS)

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

    _update(append)
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

    _update(drop)
    refresh()
    return removed[0]


def mark_usable(name: str) -> None:
    """A user system's encoding is done: clear its "encoding" state (it is listed and served as usable)."""
    from core.registry import refresh

    _update(lambda systems: [replace(s, state="") if s.name == name else s for s in systems])
    refresh()


def discard(name: str) -> None:
    """Undo an ``add`` whose encoding did not finish (the entry goes; nothing else was written for it)."""
    from core.registry import refresh

    _update(lambda systems: [s for s in systems if s.name != name])
    refresh()
