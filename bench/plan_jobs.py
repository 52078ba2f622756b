"""The reproduction's independent steps as executor jobs: every command of a run of such steps is one job on the
project's executor (``core.executor``), so a lab's cluster trains all the seeds of a study at once.

A step of ``bench.reproduce`` runs *alone* (in this process, nothing beside it) unless it says otherwise: builds
start the executor themselves, and timed or "beside busy cores" measurements must not share the machine. The
seed trainings of the recipe studies say ``alone=False``: each of their commands is a fixed-thread, fixed-seed
training whose result does not depend on what runs beside it, so consecutive such steps form one *segment* whose
commands are handed to Ray as CPUs free up (``Step.threads`` CPUs each: two at a time on 2 cores, as the steps'
two-at-a-time thread pool did before; all at once on a cluster with the cores). Within a segment a step waits for
the steps named in its ``after`` (``None``: every earlier step of the segment); a failing command stops the steps
that wait for it, and the segment ends with the first failure's exit status, like a failing alone step.

Every command's output goes to ``var/reproduce/logs/<step>-NN.log``; one line per command as it ends, and a line
per running command every ``core.executor.HEARTBEAT_SECONDS`` while none ends.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

ROOT = Path(__file__).resolve().parent.parent


class PlanStep(Protocol):
    """What a segment needs of a ``bench.reproduce_plan.Step``."""

    name: str
    after: tuple[str, ...] | None
    threads: int


@dataclass
class StepTiming:
    """When a step of a segment started and ended (wall clock on this driver) and its commands' exit statuses."""

    started: float = 0.0
    ended: float = 0.0
    load_start: list[float] = field(default_factory=list)
    load_end: list[float] = field(default_factory=list)
    codes: dict[int, int] = field(default_factory=dict)  # command index -> exit status (-1: not run)


def run_command(argv: Sequence[str], log: str | None) -> int:
    """One command under this interpreter in the repository, its output to ``log`` (None: the console); the
    exit status. OpenMP's threads wait passively, as in every build job."""
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    if log is None:
        return subprocess.run([sys.executable, *argv], cwd=ROOT, env=env).returncode
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8") as out:
        return subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, stdout=out,
                              stderr=subprocess.STDOUT).returncode


def segments(plan: Sequence, is_alone: Callable[[object], bool]) -> list[list]:
    """``plan`` cut into runs: an alone step is a run of its own; consecutive other steps make one segment."""
    out: list[list] = []
    for step in plan:
        if is_alone(step) or not out or is_alone(out[-1][0]):
            out.append([step])
        else:
            out[-1].append(step)
    return out


def _loads() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run_segment(steps: Sequence[PlanStep], commands: dict[str, list[list[str]]], logs: Path,
                print_line: Callable[[str], None] = print) -> dict[str, StepTiming]:
    """Run every command of ``steps`` as executor jobs (:mod:`core.executor`); ``commands[step]`` are its argument
    lists after ``python``. Returns each step's :class:`StepTiming`; a step whose ``after`` failed is not run (its
    commands' status -1)."""
    from core.executor import Job, run_jobs

    names = [s.name for s in steps]
    keys = {s.name: [f"{s.name}#{i:02d}" for i in range(len(commands[s.name]))] for s in steps}
    jobs = []
    for pos, step in enumerate(steps):
        waits = names[:pos] if step.after is None else [n for n in step.after if n in keys]
        needs = tuple(k for n in waits for k in keys[n])
        for i, argv in enumerate(commands[step.name]):
            jobs.append(Job(keys[step.name][i], run_command, (argv, str(logs / f"{step.name}-{i:02d}.log")),
                            needs=needs, threads=step.threads, priority=-pos))
    timing = {s.name: StepTiming() for s in steps}
    owner = {k: (name, i) for name, ks in keys.items() for i, k in enumerate(ks)}

    def on_event(kind: str, result) -> None:  # noqa: ANN001 - core.executor.JobResult
        name, i = owner[result.key]
        t = timing[name]
        if kind == "started" and not t.started:
            t.started, t.load_start = time.time(), _loads()
        elif kind == "running":
            print_line(f"[reproduce] {name} {i + 1}/{len(keys[name])} still running: "
                       f"{shlex.join(commands[name][i])}")
        elif kind in ("done", "failed", "skipped"):
            code = -1 if kind == "skipped" else result.value if kind == "done" and isinstance(result.value, int) else 1
            t.codes[i] = code
            if len(t.codes) == len(keys[name]):
                t.ended, t.load_end = time.time(), _loads()
            print_line(f"[reproduce] {name} {i + 1}/{len(keys[name])} exit {code}: {shlex.join(commands[name][i])}"
                       + (f" ({result.error})" if result.error else ""))

    run_jobs(jobs, on_event, stops_dependants=lambda r: bool(r.error) or r.value != 0)
    return timing
