"""``make reproduce`` as declared steps with a ledger: every report behind BENCHMARKS.md, regenerated, resumable.

The whole plan took about seven hours on 2 cores by its steps' first costs (3:51 from clean clones after the OpenMP
fix: BENCHMARKS.md). A working session here lasts three and starts on a fresh machine (``var/`` is gone), so the
plan is also cut into **parts** (:data:`PARTS`) that each fit a session from a clean clone: a part first builds,
from an empty ``var/``, the systems its steps read (its seed-13 models), then runs its steps and the tables.
``make reproduce`` runs the whole plan; ``make reproduce PART=table3`` one part.

Each finished step is written to a ledger (``var/reproduce/ledger[-PART].jsonl``: step, commands, wall seconds,
exit status, commit, load average at start and end). A second run skips the steps the ledger records as done with
the plan's commands at this commit or one whose code does not differ (a step that stopped midway, or whose commands
changed, is rerun whole). ``bench/reports/reproduce.json`` keeps each part's latest run (merged, so the parts of
several sessions add up) and says the plan is complete when every part is, at commits whose code does not differ
(:func:`code_changes`). A step runs alone, here, unless it is one of the seed trainings (``alone=False``): those
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
import platform
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.experiments import EXPERIMENTS
from bench.harness import machine
from bench.plan_jobs import run_command, run_segment, segments
from bench.reporting import REPORTS, head_commit, write_report

ROOT = Path(__file__).resolve().parent.parent
RECIPES = ("densetrans@paper-objective,frm@kw-loss,densetrans@-AllDense,densetrans@-TopDense,densetrans@+Concat,"
           "sdml-cnn@tl-ssd,sdml-cnn@tl-euc")
SEEDS = ("13", "14", "15", "16", "17")  # training seeds of the recipe studies; 13 is the default build's
SEED_JOBS = {"alone": False, "after": (), "threads": 1}  # one-thread, fixed-seed trainings: executor jobs, any order
WALL = "{wall:default-build}"  # replaced by the ledger's wall time of that step, formatted as GNU time's %E


@dataclass(frozen=True)
class Step:
    """One step of the reproduction: its commands (argument lists after ``python``).

    ``alone``: the step runs by itself in this process (builds start the executor themselves; timed measurements
    must not share the machine). Otherwise each command is an executor job of ``threads`` CPUs that waits for the
    steps named in ``after`` (``None``: every earlier step of its segment, ``bench.plan_jobs``)."""

    name: str
    commands: tuple[tuple[str, ...], ...]
    why: str = ""
    alone: bool = True
    after: tuple[str, ...] | None = None
    threads: int = 1


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


def steps(dataset: str = "qqp-bimpm") -> list[Step]:
    """Every step, in order (each report's ``command`` field names one of these)."""
    d = ("--dataset", dataset)
    ft = ("-m", "bench.first_stage_train")

    def table3(s: str) -> tuple:
        return tuple((*ft, "densetrans", f"--variant={v}", "--threads", "1", "--tag", f"seed{s}", "--set", f"seed={s}")
                     for v in ("full", "-TopDense", "+Concat", "-AllDense"))

    def sdml(s: str) -> tuple:
        return tuple((*ft, "sdml-cnn", f"--variant={v}", "--threads", "1", "--tag", f"seed{s}", "--set", f"seed={s}")
                     for v in ("sdml", "tl-ssd", "tl-euc"))

    frm = tuple(("-m", "bench.dev_decisions", *d, "--train-frm", r, "--seeds", s)
                for s in SEEDS[1:] for r in ("paper", "kw-loss"))
    return [
        Step("default-build", (("-m", "core", "build", *d, "--all"),), why="the default build, timed"),
        Step("default-build-report", (("-m", "bench.default_build_report", *d, "--wall", WALL,
                                       "--load-note", "make reproduce (bench.reproduce): nothing else scheduled"),)),
        Step("recipes", (("-m", "core", "build", *d, "--systems", RECIPES),), why="the papers' recipes and ablations"),
        Step("recipes-report", (("-m", "bench.default_build_report", *d, "--variants-only"),)),
        Step("paper-objective-ablation", ((*ft, "densetrans", "--variant=-AllDense", "--threads", "2", "--tag",
                                           "paper-objective", "--set", "pooling=cls", "temperature=1.0", "dropout=0.1",
                                           "position_std=0.0"),)),
        # one step per seed: an interrupted run loses at most one seed's trainings
        *(Step(f"table3-seed-{s}", table3(s), why=f"DenseTrans Table 3, seed {s}", **SEED_JOBS) for s in SEEDS[1:]),
        Step("table3", (("-m", "bench.recipe_seeds", "densetrans-ablations", *d, "--seeds", *SEEDS),)),
        *(Step(f"sdml-seed-{s}", sdml(s), why=f"SDML against its triplet-loss baselines, seed {s}", **SEED_JOBS)
          for s in SEEDS[1:]),
        Step("sdml-losses", (("-m", "bench.recipe_seeds", "sdml-losses", *d, "--seeds", *SEEDS),)),
        Step("query-forms", (("-m", "bench.query_forms", *d),)),
        Step("dev-decisions", (("-m", "bench.dev_decisions", *d, "--parts", "tree-k", "int8", "--seeds", *SEEDS[:3]),)),
        Step("frm-seeds", frm, why="FRM's two losses, seeds 14-17", **SEED_JOBS),
        Step("frm-keyword-loss", (("-m", "bench.dev_decisions", *d, "--parts", "frm-keyword-loss", "--seeds", *SEEDS),)),
        Step("frm-pairs", (("-m", "bench.frm_pairs", *d, "--seeds", *SEEDS),)),
        Step("keyword-faithfulness", (("-m", "bench.keyword_faithfulness", *d, "--seeds", "13,14"),),
             why="FRM's own explanations, recipe by recipe and seed by seed (two seeds: about 9 minutes)"),
        Step("explain-faithfulness", (("-m", "bench.explain_faithfulness", *d),),
             why="every system's word importance against random words; the Keywords page's default explanation"),
        Step("query-view-faithfulness", (("-m", "bench.query_view_faithfulness", *d),),
             why="the query view of every system against random words; the amended rule's default on both views"),
        Step("cross-encoder-pairs", (("-m", "bench.cross_encoder_pairs", *d),)),
        Step("layers", (("-m", "bench.layers_curves", "--out", "bench/reports/layers_measures_qqp.json"),)),
        Step("layers-paper-objective", (("-m", "bench.layers_curves", "--pair", "densetrans:paper-objective",
                                         "densetrans:-AllDense#paper-objective", "--sources", "minilm:cls",
                                         "densetrans:paper-objective", "densetrans:-AllDense#paper-objective",
                                         "--out", "bench/reports/layers_measures_qqp_paper_objective.json"),)),
        Step("milvus-parity", (("-m", "bench.milvus_parity", *d),)),
        Step("determinism", (("-m", "bench.determinism", *d, "--busy", "2"),)),
        Step("determinism-rerankers", (("-m", "bench.determinism", *d, "--busy", "1", "--systems", "frm", "cnn-rerank",
                                        "cross-encoder", "--out", "bench/reports/determinism_rerankers.json"),)),
        Step("text-pipeline", (("-m", "bench.text_pipeline"),)),
        Step("table3-seed-tests", (("-m", "bench.seed_tests", "--extra", "full,-AllDense"),)),
        Step("sdml-seed-tests", (("-m", "bench.seed_tests", "--report", "sdml_losses.json", "--metric", "hit_rate@1",
                                  "--order", "sdml", "tl-ssd", "tl-euc", "--extra", "sdml,tl-euc"),)),
        Step("trecqa-cnn-builds", (("-m", "core", "build", "--dataset", "trecqa", "--systems",
                                    "cnn-rerank,cnn-rerank@no-features,cnn-rerank@train-all"),)),
        Step("ppi-simulation", (("-m", "bench.ppi_simulation", "--systems", "bm25,bm25@anserini-default,glove-mean",
                                 "--judge", "cnn-rerank", "--draws", "1000", "--choose-prior-df"),)),
        *(Step(f"experiment-{e.name}", (("-m", "bench", "run", e.name),)) for e in EXPERIMENTS),  # every declared one
        Step("tables", (("-m", "bench.tables"),), why="BENCHMARKS.md's generated tables"),
    ]


@dataclass(frozen=True)
class Part:
    """A slice of the plan that fits one working session from a clean clone: ``systems`` are built first (the
    seed-13 models its steps read), then ``steps`` (names from :func:`steps`, in plan order), then the tables."""

    name: str
    systems: tuple[str, ...]
    steps: tuple[str, ...]
    why: str


PARTS = (
    Part("table3", ("densetrans", "densetrans@-TopDense", "densetrans@+Concat", "densetrans@-AllDense"),
         (*(f"table3-seed-{s}" for s in SEEDS[1:]), "table3", "table3-seed-tests"),
         "DenseTrans's Table 3 over five seeds"),
    Part("sdml", ("sdml-cnn", "sdml-cnn@tl-ssd", "sdml-cnn@tl-euc", "bm25", "dual-encoder", "densetrans"),
         (*(f"sdml-seed-{s}" for s in SEEDS[1:]), "sdml-losses", "sdml-seed-tests", "determinism"),
         "SDML against its triplet-loss baselines over five seeds, and the first stages' second build beside two "
         "busy cores"),
    Part("frm", ("bm25", "frm", "frm@kw-loss", "cross-encoder", "cnn-rerank", "minilm-pairs"),  # frm-pairs reads it
         ("frm-seeds", "frm-keyword-loss", "frm-pairs", "keyword-faithfulness", "determinism-rerankers"),
         "FRM's two losses over five seeds, the paper's pairs, the keyword faithfulness and the rerankers' second "
         "build beside a busy core"),
    Part("trecqa", (), ("trecqa-cnn-builds", "ppi-simulation", "experiment-trecqa-cnn", "experiment-trecqa-cnn-clean"),
         "the Severyn-Moschitti CNN's TrecQA builds, its experiments and the judge simulation"),
)
MAIN = "main"  # every step no other part names: the default build, its reports and the declared experiments


def part_names() -> list[str]:
    """Every part's name, :data:`MAIN` first."""
    return [MAIN, *(p.name for p in PARTS)]


def part_plan(name: str, dataset: str = "qqp-bimpm") -> list[Step]:
    """The steps of part ``name``: its prerequisite build, its own steps in plan order, then the tables (every
    part ends by rendering them). :data:`MAIN` is every step the other parts leave, the default build first."""
    plan = steps(dataset)
    taken = {s for p in PARTS for s in p.steps}
    if name == MAIN:
        return [s for s in plan if s.name not in taken]
    part = next((p for p in PARTS if p.name == name), None)
    if part is None:
        raise ValueError(f"unknown part {name!r}: one of {', '.join(part_names())}")
    build = [Step(f"{name}-prerequisites", (("-m", "core", "build", "--dataset", dataset, "--systems",
                                             ",".join(part.systems)),), why="the seed-13 models its steps read")]
    return [*(build if part.systems else []), *(s for s in plan if s.name in part.steps or s.name == "tables")]


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


def _resolve(command: tuple[str, ...], done: dict[str, Record]) -> list[str]:
    """Fill :data:`WALL` placeholders from the ledger."""
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
    starts = _starts_path(ledger)  # a start without a ledger line: the step was interrupted
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


def _starts_path(ledger: Path) -> Path:
    """Where ``reproduce`` notes each step's start, beside its ledger."""
    return ledger.with_name(ledger.name.replace("ledger", "started", 1) if "ledger" in ledger.name
                            else f"started-{ledger.name}")


# files whose change cannot alter a step's output: reports, prose, tests and their runner's requirements, CI, the
# make targets (the code's dependencies are requirements.txt, which counts) and the runner and renderer themselves
# (a step's commands are compared as recorded: command_changes)
NOT_CODE = ("bench/reports/", "docs/", "tests/", ".ci/", ".gitignore", "Makefile", "requirements-test.txt",
            "bench/reproduce.py", "bench/tables.py", ".md")


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
    starts = _starts_path(ledger)
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
