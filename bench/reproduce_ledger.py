"""The reproduction's ledger and its report: which steps ran, at which code, and how far each part has got.

A ledger line (:class:`Record`) is one step as it ran. A step counts as done at a commit whose code does not
differ from this one's (:func:`code_changes`) when it ran the plan's commands; ``bench/reports/reproduce.json``
keeps each part's latest run, so parts run in different sessions add up (:func:`write_progress`).
"""
from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from bench.reporting import write_report
from bench.reproduce_plan import MAIN, Step, part_names, part_plan

__all__ = ["NOT_CODE", "Record", "code_changes", "command_changes", "done_steps", "part_progress", "read_ledger",
           "same_code", "starts_path", "wall_clock", "write_progress"]

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Record:
    """One ledger line: a step as it ran."""

    step: str
    commands: list[str]
    seconds: float
    returncode: int
    commit: str
    started: str
    run: str = ""  # when the bench.reproduce process that ran it started
    load_start: list[float] = field(default_factory=list)
    load_end: list[float] = field(default_factory=list)
    built_before: int | None = None  # trained-system folders under var/systems when it started (0: a clean clone)
    cpu: str = ""  # the host's CPU model, AVX-512 and torch's kernels (core.cpu_kernels pins them: BENCHMARKS.md)


def read_ledger(path: Path) -> list[Record]:
    """The ledger's records, oldest first (a missing ledger is empty)."""
    if not path.is_file():
        return []
    return [Record(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def same_code(records: list[Record], commit: str) -> set[str]:
    """``commit`` and the ledger's commits whose code does not differ from it (:func:`code_changes`)."""
    return {commit} | {c for c in {r.commit for r in records} - {commit} if not code_changes([commit, c])}


def done_steps(records: list[Record], commit: str, plan: list[Step] | None = None) -> dict[str, Record]:
    """The last successful record of each step at ``commit`` or at a commit with the same code (a resumed run
    skips them); with ``plan``, only records that ran the plan's commands (a step whose commands changed reruns)."""
    code = same_code(records, commit)
    want = {s.name: s for s in plan} if plan is not None else None
    return {r.step: r for r in records if r.commit in code and r.returncode == 0
            and (want is None or (r.step in want and _same_commands(want[r.step], r.commands)))}


def _same_commands(step: Step, recorded: list[str]) -> bool:
    """Whether ``recorded`` (a ledger line's commands) are ``step``'s (a :data:`WALL` placeholder matches any value)."""
    want = [["python", *c] for c in step.commands]
    got = [shlex.split(c) for c in recorded]
    return len(want) == len(got) and all(
        len(w) == len(g) and all(a == b or (a.startswith("{") and a.endswith("}")) for a, b in zip(w, g))
        for w, g in zip(want, got))


def wall_clock(seconds: float) -> str:
    """``seconds`` as GNU time's %E: ``[h:]mm:ss``."""
    h, rest = divmod(int(round(seconds)), 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def starts_path(ledger: Path) -> Path:
    """Where ``reproduce`` notes each step's start, beside its ledger."""
    return ledger.with_name(ledger.name.replace("ledger", "started", 1) if "ledger" in ledger.name
                            else f"started-{ledger.name}")


# files whose change cannot alter a step's output: reports, prose, tests and their runner's requirements, CI, the
# make targets (the code's dependencies are requirements.txt, which counts) and the runner and renderer themselves
# (a step's commands are compared as recorded: command_changes)
NOT_CODE = ("bench/reports/", "docs/", "tests/", ".ci/", ".gitignore", "Makefile", "requirements-test.txt",
            "bench/reproduce.py", "bench/reproduce_ledger.py", "bench/reproduce_plan.py", "bench/tables.py",
            ".md")


def code_changes(commits: list[str]) -> list[str]:
    """Files that could change a step's output and differ between the first of ``commits`` and any other (``git
    diff --name-only``), or a line saying a commit is unknown to this clone: empty when the parts ran the same code."""
    out: list[str] = []
    for other in sorted(set(commits[1:]) - {commits[0]}) if commits else []:
        diff = subprocess.run(["git", "diff", "--name-only", commits[0], other], cwd=ROOT, capture_output=True,
                              text=True)
        if diff.returncode != 0:
            out.append(f"{commits[0]}..{other}: not in this clone's history")
            continue
        out += [f"{commits[0]}..{other}: {f}" for f in diff.stdout.split()
                if not any(f.startswith(n) or f.endswith(n) for n in NOT_CODE)]
    return out


def command_changes(parts: dict[str, dict], dataset: str = "qqp-bimpm") -> list[str]:
    """Recorded steps whose commands differ from the plan's now (a :data:`WALL` placeholder matches any value), or
    that the plan no longer has: a part run with other commands reproduced something else."""
    out = []
    for name, part in parts.items():
        plan = {s.name: s for s in part_plan(name, dataset)}
        for step in part["steps"]:
            if step["step"] not in plan:
                out.append(f"part {name}: step {step['step']} is no longer in the plan")
                continue
            if not _same_commands(plan[step["step"]], step["commands"]):
                out.append(f"part {name}: step {step['step']} ran other commands than the plan's")
    return out


def part_progress(plan: list[Step], ledger: Path, commit: str) -> dict:
    """One part's run from its ledger: each finished step of ``plan`` at ``commit`` (wall time, load, whether its
    run followed an interrupted attempt), their sum and the steps left (``complete`` when none is)."""
    records = read_ledger(ledger)
    done, code = done_steps(records, commit, plan), same_code(records, commit)
    finished = [done[s.name] for s in plan if s.name in done]
    left = [s.name for s in plan if s.name not in done]
    starts = starts_path(ledger)
    started = [json.loads(line) for line in starts.read_text(encoding="utf-8").splitlines() if line.strip()] \
        if starts.is_file() else []
    ended = {(r.step, r.run) for r in records}
    interrupted = {x["step"] for x in started if x["commit"] in code and (x["step"], x["run"]) not in ended}
    total = sum(r.seconds for r in finished)
    ours = [r for r in records if r.commit in code]  # the part's runs at this code, first to last
    superseded = [r for r in ours if r.returncode == 0 and r.step in done and r is not done[r.step]]
    return {"commit": commit, "machine": platform.platform(), "cpus": os.cpu_count(), "complete": not left,
            "clean_clone": ours[0].built_before == 0 if finished else None,  # its first run began in an empty var/
            "cpus_seen": sorted({r.cpu for r in finished if r.cpu}),
            "steps_done": len(finished), "steps_left": left, "total_seconds": round(total, 1),
            "total_wall": wall_clock(total), "runs": len({r.run for r in finished}),
            "steps": [{"step": r.step, "commit": r.commit, "seconds": r.seconds, "started": r.started,
                       "load_start": r.load_start, "load_end": r.load_end,
                       "after_interruption": r.step in interrupted, "commands": r.commands} for r in finished],
            # successful runs a later run of the same step replaced (its commands had changed): not in the total
            "superseded": [{"step": r.step, "commit": r.commit, "seconds": r.seconds, "commands": r.commands}
                           for r in superseded]}


def write_progress(plan: list[Step], ledger: Path, report: Path, commit: str, part: str = MAIN,
                   dataset: str = "qqp-bimpm") -> dict:
    """``report`` with part ``part`` replaced by its run so far (:func:`part_progress`); the other parts' runs
    are kept from the report on disk, so parts run in different sessions (each from a clean clone) add up. The
    plan is complete when every part is, at commits without :func:`code_changes` between them."""
    old = json.loads(report.read_text(encoding="utf-8")) if report.is_file() else {}
    earlier = list(old.get("earlier") or [])
    if "steps" in old and "parts" not in old:  # a whole-plan run from before the parts: kept, not added up
        earlier.append({"what": "a whole-plan run (before the plan had parts)", "commit": old["commit"],
                        "steps_done": old["steps_done"], "total_wall": old["total_wall"],
                        "why": "Its session ended after these steps and its artifacts went with the machine, so "
                               "no later run could build on them: the plan was cut into parts that fit a session.",
                        "steps": [{"step": s["step"], "seconds": s["seconds"], "wall": wall_clock(s["seconds"])}
                                  for s in old["steps"]]})
    parts = {k: v for k, v in (old.get("parts") or {}).items() if k in part_names()}
    parts[part] = part_progress(plan, ledger, commit)
    parts = {k: parts[k] for k in part_names() if k in parts and (parts[k]["steps_done"] or k == part)}
    ran = {k: v for k, v in parts.items() if v["steps_done"]}  # a part that finished nothing adds nothing up
    changes = code_changes([p["commit"] for p in ran.values()]) + command_changes(ran, dataset)
    complete = set(parts) == set(part_names()) and all(p["complete"] for p in parts.values()) and not changes
    total = sum(p["total_seconds"] for p in parts.values())
    out = {
        "command": "python -m bench.reproduce --part " + " / ".join(parts), "commit": commit,
        "machine": platform.platform(),
        "complete": complete, "parts_left": [n for n in part_names() if not parts.get(n, {}).get("complete")],
        "code_changes": changes, "total_seconds": round(total, 1), "total_wall": wall_clock(total),
        "longest_part_wall": wall_clock(max(p["total_seconds"] for p in parts.values())),
        "note": "each part ran from a clean clone (an empty var/), first building the systems its steps read; the "
                "total is the sum of every finished step's wall time over the parts, each part's own prerequisite "
                "build included (so systems two parts read are built twice); a step interrupted by the end of a "
                "session is rerun whole and only its finished run counts ('after_interruption' marks a step whose "
                "rerun may have reused what the interrupted one wrote)",
        "parts": parts, **({"earlier": earlier} if earlier else {})}
    write_report(report, out)
    return out
