"""Where the background build stands, read from its status files: what every page and the one loader show
while systems are queued or building ("queued (position 2)", "building: step 3/7"), and the build's lock.

The build itself (``core.build``) writes these files; this module only names them and reads them, so the
serving layer can say why a system is not ready without importing the build.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from core.artifacts import exclusive_lock, is_locked, save_json
from core.paths import artifact_dir
from core.registry import slug

STATES = ("queued", "building", "ready", "failed", "not built", "unavailable")


QUEUE_FILE = "queue.json"  # the running build's order: the systems it will build, as SYSTEM[@VARIANT]


@dataclass
class BuildStatus:
    """What the app shows for one system on one dataset."""

    system: str
    state: str = "not built"
    progress: float = 0.0
    message: str = ""
    started: float | None = None
    finished: float | None = None
    error: str = ""
    metrics: dict = field(default_factory=dict)
    host: str = ""  # the machine whose process builds (built) it: a cluster's node
    pid: int = 0  # that process (a Ray worker when the build runs on the executor)

    @property
    def seconds(self) -> float | None:
        if self.started is None:
            return None
        return (self.finished or time.time()) - self.started


def _status_dir(dataset_name: str) -> Path:
    return artifact_dir("build", slug(dataset_name))


def _status_path(dataset_name: str, system: str, variant: str | None = None) -> Path:
    return _status_dir(dataset_name) / (f"{system}@{slug(variant)}.json" if variant else f"{system}.json")


def write_status(dataset_name: str, status: BuildStatus, variant: str | None = None) -> None:
    save_json(_status_path(dataset_name, status.system, variant), asdict(status))


def _label(system: str, variant: str | None) -> str:
    return system + (f"@{variant}" if variant else "")


def _raw_status(dataset_name: str, system: str, variant: str | None) -> BuildStatus | None:
    import json

    try:
        return BuildStatus(**json.loads(_status_path(dataset_name, system, variant).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def percent(fraction: float) -> int:
    """A build progress (0–1) as the whole percent the pages show (rounded down: an unfinished build never shows 100)."""
    return int(max(0.0, min(1.0, float(fraction))) * 100)


def pending_note(dataset_name: str, system: str, variant: str | None = None) -> str | None:
    """Where the running background build stands with a system that is not built yet, or ``None``
    (no build running, or the build does not have it queued or in progress).

    "minilm: queued (position 2) in the background build; bm25 is building now" or "densetrans: building:
    step 3/7 of the background build, 42% (epoch 2/6)". The queue is the build's order
    (``QUEUE_FILE``, written when the build starts); the position counts the queued systems up to this one.
    """
    if not build_running(dataset_name):
        return None
    status = _raw_status(dataset_name, system, variant)
    if status is None or status.state not in ("queued", "building"):
        return None
    import json

    label = _label(system, variant)
    try:
        queue = [str(x) for x in json.loads((_status_dir(dataset_name) / QUEUE_FILE).read_text(encoding="utf-8"))]
    except (OSError, ValueError, TypeError):
        queue = []
    states = {name: _raw_status(dataset_name, *(name.split("@", 1) if "@" in name else (name, None)))
              for name in queue}
    step = f"step {queue.index(label) + 1}/{len(queue)} of the background build, " if label in queue \
        else "in the background build, "
    if status.state == "building":
        detail = f" ({status.message[:80]})" if status.message else ""
        return f"{label}: building: {step}{status.progress:.0%}{detail}; it shows here when ready."
    ahead = [n for n in queue[: queue.index(label)] if states[n] is not None and states[n].state == "queued"] \
        if label in queue else []
    now = next((n for n in queue if states[n] is not None and states[n].state == "building"), None)
    return (f"{label}: queued (position {len(ahead) + 1}) in the background build"
            + (f"; {now} is building now" if now else "") + "; it shows here when ready.")


@contextmanager
def build_lock(dataset_name: str):
    """An exclusive, non-blocking file lock per dataset; yields whether it was acquired."""
    with exclusive_lock(_status_dir(dataset_name) / "build.lock") as acquired:
        yield acquired


def build_running(dataset_name: str) -> bool:
    """True while a build process holds the dataset's lock."""
    return is_locked(_status_dir(dataset_name) / "build.lock")




def system_lock(dataset_name: str, system: str, variant: str | None = None):
    """The lock one system's build holds on one dataset (``core.build.build_system``, ``core systems add``): whoever
    builds or encodes that system there (the build, the CLI, the server's first use) takes it, so one model is
    encoded once. A context manager yielding whether it was taken."""
    return exclusive_lock(_status_path(dataset_name, system, variant).with_suffix(".lock"))


def building_elsewhere(dataset_name: str, system: str, variant: str | None = None) -> str | None:
    """Where another process's build of this system stands ("my-model: being built by another process, 42%
    (encoding 1,024/36,737)..."), or None when no other process holds its lock (this process's own does not count)."""
    import os

    path = _status_path(dataset_name, system, variant).with_suffix(".lock")
    if not is_locked(path):
        return None
    try:
        if int(path.read_text(encoding="utf-8").strip() or 0) == os.getpid():
            return None
    except (OSError, ValueError):
        pass
    status = _raw_status(dataset_name, system, variant)
    where = f", {percent(status.progress)}%" + (f" ({status.message[:80]})" if status.message else "") \
        if status is not None and status.state == "building" else ""
    return (f"{_label(system, variant)}: being built by another process{where}; it is used from there when done "
            "(never built twice).")
