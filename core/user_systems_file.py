"""The user systems file, ``var/user_systems.toml``: a researcher's model folders and run files, read, written and
turned into registrations (``SystemSpec``; the registry registers them on its first lookup).

Readable TOML (read with ``tomllib``, written with ``tomli-w``). Every change reads and rewrites the file under one
file lock (``filelock``; two ``add`` at once both land) and replaces it atomically. Adding, removing and checking
entries is ``core.user_systems``.
"""
from __future__ import annotations

import os
import re
import threading
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from core.errors import StudioError
from core.paths import var_dir
from core.system_spec import SystemSpec

FILE_NAME = "user_systems.toml"
WAYS = ("bi-encoder", "cross-encoder", "run")
# the two ways a model folder comes in (the Models page's form), with what each becomes
FOLDER_WAYS = {WAYS[0]: "bi-encoder folder (retriever)", WAYS[1]: "cross-encoder folder (reranker)"}
NAME_RULE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,47}")
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
def locked() -> Iterator[None]:
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


def update_user_systems(change: Callable[[list[UserSystem]], list[UserSystem]]) -> None:
    """Read the file, ``change`` the list, write it back: under the lock, so no concurrent change is lost."""
    with locked():
        write_user_systems(change(read_user_systems()))


def write_user_systems(systems: list[UserSystem]) -> None:
    """Write the file atomically (a temporary file renamed over it); callers hold ``locked``."""
    import tomli_w

    table = {"systems": {s.name: {k: v for k, v in (("way", s.way), ("path", s.path), ("dataset", s.dataset),
                                                    ("added", s.added), ("state", s.state)) if v} for s in systems}}
    path = user_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(_HEADER + tomli_w.dumps(table), encoding="utf-8")
    tmp.replace(path)


# ----------------------------------------------------------------------------- registrations
def spec_of(system: UserSystem) -> SystemSpec:
    """The ``SystemSpec`` of a user system (its provider is made from ``module`` by the registry)."""
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


def file_state() -> tuple | None:
    """The user file's (size, modification time), None when there is none: what discovery read."""
    try:
        stat = user_file().stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


def discover_user_systems(register: Callable[[SystemSpec], object], problems: list[str]) -> tuple | None:
    """Register (``register``: the registry's) every user system in the file; one line per one that cannot be
    (a file that cannot be read too) goes to ``problems``. Returns the :func:`file_state` read."""
    state = file_state()
    try:
        systems = read_user_systems()
    except StudioError as exc:
        problems.append(f"user systems: {exc}")
        systems = []
    for system in systems:
        try:
            register(spec_of(system))
        except ValueError as exc:
            problems.append(f"user system {system.name}: {exc}")
    return state
