"""What the default build of a dataset would do now: which of its systems are ready, which are missing, and about how
long the missing ones took when this machine built them before. Home offers the build from this and starts it only
when asked; a build that is up to date is never started (nothing is missing)."""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass

from core.build import read_status, start_background_build
from core.build_status import build_running
from core.data.datasets import Dataset
from core.paths import artifact_dir
from core.registry import default_build_targets, slug


@dataclass(frozen=True)
class BuildPlan:
    """The default build of one dataset, as it stands."""

    dataset: str
    ready: tuple[str, ...]  # SYSTEM[@VARIANT] built and current
    missing: tuple[str, ...]  # what the default build would build now
    minutes: float  # the missing systems' earlier build times on this machine (any dataset), summed
    untimed: tuple[str, ...]  # missing systems this machine never built: not in ``minutes``
    running: bool  # a build of this dataset runs now

    @property
    def up_to_date(self) -> bool:
        """Nothing of the default build is missing."""
        return not self.missing

    def offer(self) -> str:
        """The button's words: "Build the default systems for this dataset (about 12 min)"."""
        if not self.missing:
            return "Nothing to build: every default system is ready"
        when = f"about {max(1, round(self.minutes))} min" if self.minutes else "time unknown"
        if self.untimed and self.minutes:
            when += f" + {len(self.untimed)} never built on this machine"
        return f"Build the default systems for this dataset ({len(self.missing)} missing, {when})"


def _label(name: str, variant: str | None) -> str:
    return name + (f"@{variant}" if variant else "")


def _earlier_minutes(name: str, variant: str | None) -> float | None:
    """The median time of this system's finished builds on this machine (its status files, any dataset), or None."""
    seconds = []
    leaf = (f"{name}@{slug(variant)}" if variant else name) + ".json"  # the build's status file name
    for path in artifact_dir("build").glob(f"*/{leaf}"):
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if raw.get("state") == "ready" and raw.get("started") and raw.get("finished"):
            seconds.append(float(raw["finished"]) - float(raw["started"]))
    return statistics.median(seconds) / 60 if seconds else None


def default_build_plan(dataset: Dataset) -> BuildPlan:
    """Ready and missing systems of ``dataset``'s default build, with an estimate of the missing ones' time."""
    ready, missing, untimed, minutes = [], [], [], 0.0
    for spec, variant in default_build_targets(dataset):
        label = _label(spec.name, variant)
        if read_status(dataset, spec, variant).state == "ready":
            ready.append(label)
            continue
        missing.append(label)
        earlier = _earlier_minutes(spec.name, variant)
        if earlier is None:
            untimed.append(label)
        else:
            minutes += earlier
    return BuildPlan(dataset.name, tuple(ready), tuple(missing), minutes, tuple(untimed), build_running(dataset.name))


def build_missing(dataset: Dataset) -> bool:
    """Start the background build of the missing default systems only; False (nothing started) when none is missing
    or a build of the dataset runs already."""
    plan = default_build_plan(dataset)
    if plan.up_to_date or plan.running:
        return False
    return start_background_build(dataset.name, systems=list(plan.missing))
