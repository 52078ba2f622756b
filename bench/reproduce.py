"""``make reproduce`` as declared steps with a ledger: every report behind BENCHMARKS.md, regenerated, resumable.

A clean clone needs about five hours on 2 cores, longer than one working session here, so each finished step is
written to a ledger (``var/reproduce/ledger.jsonl``: step, commands, wall seconds, exit status, commit, load
average at start and end). A second run at the same commit skips the steps the ledger records as done, and the
finished run writes ``bench/reports/reproduce.json``: each step's wall time and their sum. A step that stopped
midway (its process ended) is rerun whole. Steps with several commands run ``parallel`` of them at a time
(two one-thread trainings: more throughput on 2 cores than one at two threads); their output goes to
``var/reproduce/logs/``.

    python -m bench.reproduce [--dataset qqp-bimpm] [--fresh] [--list] [--only STEP ...]
    python -m bench.reproduce --status [--ledger PATH] [--out PATH]   # the report so far, from a ledger
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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.experiments import EXPERIMENTS
from bench.reporting import REPORTS, head_commit, write_report

ROOT = Path(__file__).resolve().parent.parent
RECIPES = ("densetrans@paper-objective,frm@kw-loss,densetrans@-AllDense,densetrans@-TopDense,densetrans@+Concat,"
           "sdml-cnn@tl-ssd,sdml-cnn@tl-euc")
SEEDS = ("13", "14", "15", "16", "17")  # training seeds of the recipe studies; 13 is the default build's
WALL = "{wall:default-build}"  # replaced by the ledger's wall time of that step, formatted as GNU time's %E


@dataclass(frozen=True)
class Step:
    """One step of the reproduction: its commands (argument lists after ``python``), ``parallel`` at a time."""

    name: str
    commands: tuple[tuple[str, ...], ...]
    parallel: int = 1
    why: str = ""


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
        *(Step(f"table3-seed-{s}", table3(s), parallel=2, why=f"DenseTrans Table 3, seed {s}") for s in SEEDS[1:]),
        Step("table3", (("-m", "bench.recipe_seeds", "densetrans-ablations", *d, "--seeds", *SEEDS),)),
        *(Step(f"sdml-seed-{s}", sdml(s), parallel=2, why=f"SDML against its triplet-loss baselines, seed {s}")
          for s in SEEDS[1:]),
        Step("sdml-losses", (("-m", "bench.recipe_seeds", "sdml-losses", *d, "--seeds", *SEEDS),)),
        Step("query-forms", (("-m", "bench.query_forms", *d),)),
        Step("dev-decisions", (("-m", "bench.dev_decisions", *d, "--parts", "tree-k", "int8", "--seeds", *SEEDS[:3]),)),
        Step("frm-seeds", frm, parallel=2, why="FRM's two losses, seeds 14-17"),
        Step("frm-keyword-loss", (("-m", "bench.dev_decisions", *d, "--parts", "frm-keyword-loss", "--seeds", *SEEDS),)),
        Step("frm-pairs", (("-m", "bench.frm_pairs", *d, "--seeds", *SEEDS),)),
        Step("keyword-faithfulness", (("-m", "bench.keyword_faithfulness", *d, "--seeds", "13,14"),),
             why="the Keywords page's default explanation (two seeds: about 9 minutes)"),
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


def read_ledger(path: Path) -> list[Record]:
    """The ledger's records, oldest first (a missing ledger is empty)."""
    if not path.is_file():
        return []
    return [Record(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def done_steps(records: list[Record], commit: str) -> dict[str, Record]:
    """The last successful record of each step at ``commit`` (what a resumed run skips)."""
    return {r.step: r for r in records if r.commit == commit and r.returncode == 0}


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


def _run_one(argv: list[str], log: Path | None) -> int:
    """One command under this interpreter, its output to the console or to ``log``."""
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    if log is None:
        return subprocess.run([sys.executable, *argv], cwd=ROOT, env=env).returncode
    with log.open("w", encoding="utf-8") as out:
        return subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT).returncode


def run_step(step: Step, done: dict[str, Record], logs: Path, commit: str, run: str = "") -> Record:
    """Run every command of ``step`` (``parallel`` at a time); the first non-zero exit status is the step's."""
    commands = [_resolve(c, done) for c in step.commands]
    load_start = [round(x, 2) for x in os.getloadavg()]
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    t0 = time.perf_counter()
    if step.parallel == 1 and len(commands) == 1:
        codes = [_run_one(commands[0], None)]
    else:
        logs.mkdir(parents=True, exist_ok=True)

        def one(i: int) -> int:
            code = _run_one(commands[i], logs / f"{step.name}-{i:02d}.log")
            print(f"[reproduce] {step.name} {i + 1}/{len(commands)} exit {code}: {shlex.join(commands[i])}", flush=True)
            return code

        with ThreadPoolExecutor(max_workers=step.parallel) as pool:
            codes = list(pool.map(one, range(len(commands))))
    seconds = round(time.perf_counter() - t0, 1)
    code = next((c for c in codes if c != 0), 0)
    return Record(step.name, [shlex.join(["python", *c]) for c in commands], seconds, code, commit, started, run,
                  load_start, [round(x, 2) for x in os.getloadavg()])


def reproduce(plan: list[Step], ledger: Path, report: Path | None, fresh: bool = False) -> int:
    """Run the steps the ledger does not record as done at this commit, then write ``report`` (:func:`write_progress`)."""
    commit, run = head_commit(), f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} pid {os.getpid()} #{time.monotonic_ns()}"
    ledger.parent.mkdir(parents=True, exist_ok=True)
    if fresh and ledger.is_file():
        ledger.rename(ledger.with_suffix(f".{int(time.time())}.jsonl"))
    done = done_steps(read_ledger(ledger), commit)
    starts = ledger.with_name("started.jsonl")  # a start without a ledger line: the step was interrupted
    for step in plan:
        if step.name in done:
            print(f"[reproduce] {step.name}: done at {commit} ({done[step.name].seconds:.0f} s), skipped", flush=True)
            continue
        print(f"[reproduce] {step.name}: {len(step.commands)} command(s), {step.parallel} at a time", flush=True)
        with starts.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"step": step.name, "commit": commit, "run": run}) + "\n")
        record = run_step(step, done, ledger.parent / "logs", commit, run)
        with ledger.open("a", encoding="utf-8") as out:
            out.write(json.dumps(asdict(record)) + "\n")
        print(f"[reproduce] {record.seconds:.0f} s, exit {record.returncode}: {step.name}", flush=True)
        if record.returncode != 0:
            return record.returncode
        done[step.name] = record
    if report is not None:
        write_progress(plan, ledger, report, commit)
    return 0


def write_progress(plan: list[Step], ledger: Path, report: Path, commit: str) -> dict:
    """``report`` from the ledger: each finished step of ``plan`` at ``commit`` (wall time, load, whether its run
    followed an interrupted attempt), their sum, and the steps left (``complete`` when none is)."""
    records = read_ledger(ledger)
    done = done_steps(records, commit)
    finished = [done[s.name] for s in plan if s.name in done]
    left = [s.name for s in plan if s.name not in done]
    starts = ledger.with_name("started.jsonl")  # a start without a ledger line: the step was interrupted
    started = [json.loads(line) for line in starts.read_text(encoding="utf-8").splitlines() if line.strip()] \
        if starts.is_file() else []
    ended = {(r.step, r.run) for r in records}
    interrupted = {x["step"] for x in started if x["commit"] == commit and (x["step"], x["run"]) not in ended}
    total = sum(r.seconds for r in finished)
    out = {
        "command": "python -m bench.reproduce", "commit": commit, "machine": platform.platform(),
        "cpus": os.cpu_count(), "complete": not left, "steps_done": len(finished), "steps_left": left,
        "total_seconds": round(total, 1), "total_wall": wall_clock(total), "runs": len({r.run for r in finished}),
        "note": "the sum of each finished step's wall time; steps ran in one or more runs of the same commit (a "
                "step interrupted by the end of a session is rerun whole and only its finished run is counted; "
                "'after_interruption' marks a step whose rerun may have reused what the interrupted one wrote)",
        "steps": [{"step": r.step, "seconds": r.seconds, "started": r.started, "load_start": r.load_start,
                   "load_end": r.load_end, "after_interruption": r.step in interrupted, "commands": r.commands}
                  for r in finished]}
    write_report(report, out)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="qqp-bimpm")
    ap.add_argument("--fresh", action="store_true", help="set the ledger aside and run every step again")
    ap.add_argument("--list", action="store_true", help="name every step and its commands, run nothing")
    ap.add_argument("--only", nargs="+", metavar="STEP", help="run only these steps (no reproduce.json)")
    ap.add_argument("--ledger", default=None, help="default: var/reproduce/ledger.jsonl")
    ap.add_argument("--status", action="store_true",
                    help="run nothing: write the report from the ledger (the commit of its newest line), done or not")
    ap.add_argument("--out", default=str(REPORTS / "reproduce.json"), help="the report (default %(default)s)")
    args = ap.parse_args(argv)
    plan = steps(args.dataset)
    if args.list:
        for step in plan:
            print(f"{step.name:<26} {len(step.commands):>2} × {step.parallel}  {shlex.join(['python', *step.commands[0]])}")
        return 0
    if args.only:
        unknown = set(args.only) - {s.name for s in plan}
        if unknown:
            print(f"error: unknown step(s) {', '.join(sorted(unknown))}: python -m bench.reproduce --list",
                  file=sys.stderr)
            return 2
        plan = [s for s in plan if s.name in args.only]
    from core.paths import var_dir

    ledger = Path(args.ledger) if args.ledger else var_dir() / "reproduce" / "ledger.jsonl"
    if args.status:
        records = read_ledger(ledger)
        report = write_progress(plan, ledger, Path(args.out), records[-1].commit if records else head_commit())
        print(f"{report['steps_done']}/{len(plan)} steps done at {report['commit']}: {report['total_wall']}; "
              f"left: {', '.join(report['steps_left']) or 'none'}")
        return 0
    return reproduce(plan, ledger, None if args.only else Path(args.out), fresh=args.fresh)


if __name__ == "__main__":
    raise SystemExit(main())
