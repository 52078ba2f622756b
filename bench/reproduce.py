"""``make reproduce`` as declared steps with a ledger: every report behind BENCHMARKS.md, regenerated, resumable.

The whole plan took about seven hours on 2 cores by its steps' first costs (3:51 from clean clones after the OpenMP
fix: BENCHMARKS.md). A working session here lasts three and starts on a fresh machine (``var/`` is gone), so the
plan is also cut into **parts** (``bench.reproduce_plan``) that each fit a session from a clean clone: a part
first builds, from an empty ``var/``, the systems its steps read (its seed-13 models), then runs its steps and
the tables.
``make reproduce`` runs the whole plan; ``make reproduce PART=table3`` one part.

Each finished step is written to a ledger (``var/reproduce/ledger[-PART].jsonl``: step, commands, wall seconds,
exit status, commit, load average at start and end). A second run skips the steps the ledger records as done with
the plan's commands at this commit or one whose code does not differ (a step that stopped midway, or whose commands
changed, is rerun whole). ``bench/reports/reproduce.json`` keeps each part's latest run (merged, so the parts of
several sessions add up) and says the plan is complete when every part is, at commits whose code does not differ
(``bench.reproduce_ledger``). A step runs alone, here, unless it is one of the seed trainings (``alone=False``): those
run as jobs on the project's executor (``bench.plan_jobs``: one job per command, one Ray CPU per training thread;
two one-thread trainings at a time on 2 cores, every seed of a study at once on a lab's cluster), their output in
``var/reproduce/logs/``.

    python -m bench.reproduce [--dataset qqp-bimpm] [--part NAME] [--fresh] [--list] [--only STEP ...]
    python -m bench.reproduce --status [--part NAME] [--ledger PATH] [--out PATH]   # the report so far
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path

from bench.measure import machine
from bench.plan_jobs import run_command, run_segment, segments
from bench.reporting import REPORTS, head_commit
from bench.reproduce_ledger import Record, done_steps, read_ledger, starts_path, wall_clock, write_progress
from bench.reproduce_plan import MAIN, Step, part_names, part_plan


def _resolve(command: tuple[str, ...], done: dict[str, Record]) -> list[str]:
    """Fill ``bench.reproduce_plan.WALL`` placeholders from the ledger."""
    out = []
    for arg in command:
        if arg.startswith("{wall:") and arg.endswith("}"):
            step = arg[len("{wall:"):-1]
            if step not in done:
                raise SystemExit(f"step needs the wall time of {step!r}, which the ledger does not record as done")
            arg = wall_clock(done[step].seconds)
        out.append(arg)
    return out


def run_step(step: Step, done: dict[str, Record], logs: Path, commit: str, run: str = "") -> Record:
    """Run an alone step's commands one after another here (one command: its output on the console); the first
    non-zero exit status is the step's."""
    commands = [_resolve(c, done) for c in step.commands]
    built_before = built_systems()
    load_start = [round(x, 2) for x in os.getloadavg()]
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    t0 = time.perf_counter()
    codes = []
    for i, argv in enumerate(commands):
        codes.append(run_command(argv, None if len(commands) == 1 else str(logs / f"{step.name}-{i:02d}.log")))
        if codes[-1]:
            break
    seconds = round(time.perf_counter() - t0, 1)
    code = next((c for c in codes if c != 0), 0)
    return Record(step.name, [shlex.join(["python", *c]) for c in commands], seconds, code, commit, started, run,
                  load_start, [round(x, 2) for x in os.getloadavg()], built_before, cpu_kind())


def run_jobs_steps(steps: list[Step], done: dict[str, Record], logs: Path, commit: str, run: str = "") -> list[Record]:
    """Run a segment of non-alone steps as executor jobs (``bench.plan_jobs.run_segment``): one record per step,
    its wall time from its first command's start to its last one's end (steps of a segment overlap); a step
    that did not run because one it waits for failed is not recorded."""
    commands = {s.name: [_resolve(c, done) for c in s.commands] for s in steps}
    built_before = built_systems()
    timing = run_segment(steps, commands, logs, lambda line: print(line, flush=True))
    out = []
    for step in steps:
        t = timing[step.name]
        if not t.started or any(c == -1 for c in t.codes.values()):
            continue
        code = next((c for _, c in sorted(t.codes.items()) if c != 0), 0)
        out.append(Record(step.name, [shlex.join(["python", *c]) for c in commands[step.name]],
                          round(t.ended - t.started, 1), code, commit,
                          time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t.started)), run, t.load_start,
                          t.load_end, built_before, cpu_kind()))
    return out


def cpu_kind() -> str:
    """The host's CPU model, whether it has AVX-512 and the kernels torch runs (``core.cpu_kernels`` pins AVX2)."""
    flags = ""
    try:
        flags = next((line for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines()
                      if line.startswith("flags")), "")
    except OSError:
        pass
    from core.cpu_kernels import cpu_kernels

    return (machine()["cpu_model"] + (", AVX-512" if " avx512f" in flags else ", no AVX-512" if flags else "")
            + f", torch kernels {cpu_kernels()}")


def built_systems() -> int:
    """How many system folders ``var/systems`` holds (0 in a clean clone)."""
    from core.paths import var_dir

    root = var_dir() / "systems"
    return sum(1 for d in root.glob("*/*") if d.is_dir()) if root.is_dir() else 0


def reproduce(plan: list[Step], ledger: Path, report: Path | None, fresh: bool = False, part: str = MAIN,
              dataset: str = "qqp-bimpm") -> int:
    """Run the steps the ledger does not record as done (:func:`done_steps`), then write ``report``
    (:func:`write_progress`)."""
    commit, run = head_commit(), f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} pid {os.getpid()} #{time.monotonic_ns()}"
    ledger.parent.mkdir(parents=True, exist_ok=True)
    if fresh and ledger.is_file():
        ledger.rename(ledger.with_suffix(f".{int(time.time())}.jsonl"))
    done = done_steps(read_ledger(ledger), commit, plan)
    starts = starts_path(ledger)  # a start without a ledger line: the step was interrupted
    for step in plan:
        if step.name in done:
            print(f"[reproduce] {step.name}: done at {done[step.name].commit} ({done[step.name].seconds:.0f} s), "
                  "skipped", flush=True)
    for group in segments([s for s in plan if s.name not in done], lambda s: s.alone):
        for step in group:
            print(f"[reproduce] {step.name}: {len(step.commands)} command(s)"
                  + ("" if step.alone else f", executor jobs of {step.threads} CPU(s)"), flush=True)
        with starts.open("a", encoding="utf-8") as out:
            out.writelines(json.dumps({"step": s.name, "commit": commit, "run": run}) + "\n" for s in group)
        if group[0].alone:
            records = [run_step(group[0], done, ledger.parent / "logs", commit, run)]
        else:
            records = run_jobs_steps(group, done, ledger.parent / "logs", commit, run)
        with ledger.open("a", encoding="utf-8") as out:
            out.writelines(json.dumps(asdict(r)) + "\n" for r in records)
        for record in records:
            print(f"[reproduce] {record.seconds:.0f} s, exit {record.returncode}: {record.step}", flush=True)
            if record.returncode == 0:
                done[record.step] = record
        failed = next((r.returncode for r in records if r.returncode != 0), 0)
        if failed or len(records) < len(group):
            return failed or 1
    if report is not None:
        write_progress(plan, ledger, report, commit, part, dataset)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--part", choices=part_names(),
                    help="one part of the plan, run from a clean clone (default: every part in turn, in one var/)")
    ap.add_argument("--fresh", action="store_true", help="set the ledger aside and run every step again")
    ap.add_argument("--list", action="store_true", help="name every step and its commands, run nothing")
    ap.add_argument("--only", nargs="+", metavar="STEP", help="run only these steps (no reproduce.json)")
    ap.add_argument("--ledger", default=None, help="default: var/reproduce/ledger-PART.jsonl")
    ap.add_argument("--status", action="store_true",
                    help="run nothing: write the report from the ledger (the commit of its newest line), done or not")
    ap.add_argument("--out", default=str(REPORTS / "reproduce.json"), help="the report (default %(default)s)")
    args = ap.parse_args(argv)
    if args.part is None and (args.status or args.ledger or args.only):
        ap.error("--status, --ledger and --only need --part")
    if args.part is None:  # every part in turn (later parts find their prerequisites built: quick builds)
        given = argv if argv is not None else sys.argv[1:]
        for name in part_names():
            code = main([*given, "--part", name])
            if code:
                return code
        return 0
    plan = part_plan(args.part, args.dataset)
    if args.list:
        print(f"part {args.part}")
        for step in plan:
            print(f"  {step.name:<26} {len(step.commands):>2} {'alone' if step.alone else 'jobs ':<5}  "
                  f"{shlex.join(['python', *step.commands[0]])}")
        return 0
    if args.only:
        unknown = set(args.only) - {s.name for s in plan}
        if unknown:
            print(f"error: unknown step(s) {', '.join(sorted(unknown))}: python -m bench.reproduce --list",
                  file=sys.stderr)
            return 2
        plan = [s for s in plan if s.name in args.only]
    from core.paths import var_dir

    ledger = Path(args.ledger) if args.ledger else var_dir() / "reproduce" / f"ledger-{args.part}.jsonl"
    if args.status:
        records = read_ledger(ledger)
        report = write_progress(plan, ledger, Path(args.out), records[-1].commit if records else head_commit(),
                                args.part, args.dataset)
        mine = report["parts"][args.part]
        print(f"part {args.part}: {mine['steps_done']}/{len(plan)} steps done at {mine['commit']}: "
              f"{mine['total_wall']}; left: {', '.join(mine['steps_left']) or 'none'}; "
              f"parts left: {', '.join(report['parts_left']) or 'none'}")
        return 0
    return reproduce(plan, ledger, None if args.only else Path(args.out), fresh=args.fresh, part=args.part,
                     dataset=args.dataset)


if __name__ == "__main__":
    from core.cli.main import guarded

    raise SystemExit(guarded(main))
