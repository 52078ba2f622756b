"""The default build: every registry system for a dataset as jobs on the executor (``core.build_graph``,
``core.executor``: each once the systems it reads are built, independent ones side by side), with status files
the app reads.

``python -m core build --all`` runs it in the foreground; ``--background`` starts it as a detached
process (one per dataset, guarded by a file lock) so the app is usable while heavier systems train;
``cancel_build`` stops it (the Models page's button).
Status of each system is a JSON file ``var/build/<dataset>/<system>.json`` written atomically:
``state`` (queued / building / ready / failed / skipped), ``progress`` (0–1), ``message``, timings,
the error text, and the metrics the build returned. Systems already built are not rebuilt (a second
start reuses everything) unless ``force``. After a system builds (or when a built one has no fresh
run), its stored run over the dataset's queries is written (``core.analysis.runs``, read by Error Analysis).
"""
from __future__ import annotations

import fcntl
import inspect
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from core.artifacts import exclusive_lock, is_locked, remove_partial, save_json
from core.data.datasets import Dataset, load_dataset
from core.paths import REPO_ROOT, artifact_dir
from core.build_status import (QUEUE_FILE, STATES, BuildStatus, _label, _raw_status,  # noqa: F401
                               _status_dir, _status_path, build_lock, build_running, pending_note, percent,
                               write_status)
from core.progress import ProgressFn, no_progress
from core.errors import StudioError
from core.data.final_test import is_marked_test, refuse_if_marked_test
from core.registry import (SystemSpec, build_command, check_variant, get_spec, learns_from_labels, list_systems,
                           needs_training, slug, system_dir, system_module, system_path)

HELD_OUT_KEY = "held_out_lines"  # a build job's verdict lines, beside its status fields


class BuildRunningError(StudioError):
    """A second build of a dataset while one runs: one line (the CLI exits 2), nothing started."""


def read_status(dataset: Dataset, spec: SystemSpec, variant: str | None = None) -> BuildStatus:
    """Current status: the status file, reconciled with what is on disk."""
    import json

    path = _status_path(dataset.name, spec.name, variant)
    status = BuildStatus(spec.name)
    if path.is_file():
        try:
            status = BuildStatus(**json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, TypeError):
            pass
    try:
        built = system_module(spec.name).is_built(dataset, variant=variant)
    except ModuleNotFoundError:
        return BuildStatus(spec.name, "unavailable", message="not implemented in this version")
    if built and status.state != "building":
        status.state, status.progress = "ready", 1.0
    elif not built and status.state == "ready":
        status.state = "not built"
    if status.state == "building" and not is_locked(_status_path(dataset.name, spec.name, variant).with_suffix(".lock")):
        status.state, status.error = "failed", status.error or "the build process stopped before finishing"
    return status


class _Progress:
    """Throttled status writer passed to a system's ``build`` as ``progress(fraction, message)``."""

    def __init__(self, dataset_name: str, status: BuildStatus, variant: str | None, listener=None) -> None:
        self.dataset_name, self.status, self.variant, self.listener = dataset_name, status, variant, listener
        self.last = 0.0

    def __call__(self, fraction: float, message: str) -> None:
        self.status.progress, self.status.message = float(max(0.0, min(1.0, fraction))), message
        if self.listener is not None:
            self.listener(fraction, message)
        now = time.time()
        if now - self.last > 0.5 or fraction >= 1.0:
            self.last = now
            write_status(self.dataset_name, self.status, self.variant)


def build_system(
    dataset: Dataset,
    name: str,
    profile: str = "quick",
    variant: str | None = None,
    force: bool = False,
    listener=None,
) -> BuildStatus:
    """Build one system (unless already built); failures are recorded, not raised.

    ``listener(fraction, message)`` also receives progress (the CLI draws a tqdm bar with it).
    """
    get_spec(name)  # unknown names raise with the list of known ones
    check_variant(name, variant)
    module = system_module(name)
    if learns_from_labels(get_spec(name), variant) and is_marked_test(dataset.name):
        refused = f"{dataset.name} is marked test: building {name} would choose on its labels"
        return BuildStatus(name, "failed", message=refused, error=refused)  # nothing written
    if needs_training(get_spec(name), variant) and not dataset.pairs.get("train"):
        from core.errors import StudioError
        from core.training_data import training_data

        try:  # imported data: its labels as pairs with a deterministic split, the same trainers
            dataset = training_data(dataset).dataset
        except StudioError as exc:
            failed = BuildStatus(name, "failed", message=str(exc), error=str(exc))
            write_status(dataset.name, failed, variant)
            return failed
    status = BuildStatus(name)
    if not force and module.is_built(dataset, variant=variant):
        spec = get_spec(name)
        previous = read_status(dataset, spec, variant)  # keep the recorded build time and metrics
        previous.state, previous.progress, previous.message = "ready", 1.0, "already built"
        write_status(dataset.name, previous, variant)
        _choose_interpolation(dataset, previous, variant, listener)  # a model built before weights were chosen
        _store_run(dataset, previous, variant, listener)  # a built clone without (fresh) stored runs gets them
        return previous
    lock_path = _status_path(dataset.name, name, variant).with_suffix(".lock")
    with exclusive_lock(lock_path) as acquired:
        if not acquired:
            return BuildStatus(name, "building", message="another process is building it")
        return _build_locked(dataset, module, status, profile, variant, listener, force)


def _build_locked(dataset, module, status: BuildStatus, profile, variant, listener, force=False) -> BuildStatus:
    status.state, status.started, status.message = "building", time.time(), f"building ({profile} profile)"
    status.host, status.pid = socket.gethostname(), os.getpid()
    write_status(dataset.name, status, variant)
    try:
        kwargs = {}
        if force and "resume" in inspect.signature(module.build).parameters:
            kwargs["resume"] = False  # --force retrains from scratch instead of resuming a checkpoint
        if get_spec(status.system).composite:  # a composite system's parts come through the one loader
            from core.serving.loader import part_loader

            kwargs["loader"] = part_loader(dataset)
        metrics = module.build(dataset, profile=profile, progress=_Progress(dataset.name, status, variant, listener),
                               variant=variant, **kwargs)
        status.metrics = dict(metrics or {})
        _choose_interpolation(dataset, status, variant, listener, force=True)
        _store_run(dataset, status, variant, listener)
        status.state, status.progress = "ready", 1.0
        status.message = "built"
    except Exception as exc:  # recorded for the Models page; the build goes on with the next system
        status.state, status.error = "failed", f"{type(exc).__name__}: {exc}"
        status.message = traceback.format_exc(limit=6)[-2000:]
    status.finished = time.time()
    write_status(dataset.name, status, variant)
    return status


def _choose_interpolation(dataset: Dataset, status: BuildStatus, variant: str | None, listener=None,
                          force: bool = False) -> None:
    """A trained reranker over a collection: choose its first-stage interpolation weight on dev
    (``core.rerank.interpolation``) unless one is stored (``force``: choose again, the model is new); the
    choice goes to ``status.metrics["interpolation"]``, a failure to ``interpolation_error`` (not raised)."""
    from core.rerank import interpolation
    from core.serving.interpolation_weight import choose_for as choose_interpolation

    spec = get_spec(status.system)
    if spec.kind != "reranker" or not needs_training(spec, variant) or dataset.candidates:
        return
    folder = system_dir(dataset.name, spec.name, None if variant in (None, "full") else variant)
    if not force and interpolation.read(folder) is not None:
        return
    report = _Progress(dataset.name, status, variant, listener)
    try:
        chosen = choose_interpolation(dataset, spec.name, variant, folder,
                                          progress=lambda f, m: report(min(f, 0.999), m))
    except Exception as exc:  # noqa: BLE001 - the reranker alone is still usable
        status.metrics["interpolation_error"] = f"{type(exc).__name__}: {exc}"[:300]
        return
    if chosen is not None:
        status.metrics["interpolation"] = {"weight": chosen.weight, "first_stage": chosen.first_stage,
                                           "rule": chosen.rule, "dev": chosen.dev}
        status.metrics.pop("interpolation_error", None)
    write_status(dataset.name, status, variant)


def _store_run(dataset: Dataset, status: BuildStatus, variant: str | None, listener=None) -> None:
    """Write the system's stored run (``core.analysis.runs``) unless a fresh one exists; a failure is recorded in
    ``status.metrics["stored_run_error"]``, not raised (the system itself is usable)."""
    from core.analysis import runs
    from core.analysis.error_analysis import write_per_query

    try:
        if runs.run_status(dataset, status.system, variant) in ("fresh", "not stored"):
            return
    except Exception:  # noqa: BLE001 - an unknown layout: try to write it below
        pass
    report = _Progress(dataset.name, status, variant, listener)
    t0 = time.time()
    try:
        runs.write_run(dataset, status.system, variant, progress=lambda f, m: report(min(f, 0.999), f"stored run: {m}"))
        write_per_query(dataset, status.system, variant)  # Error Analysis opens on these without evaluating
        status.metrics["stored_run_seconds"] = round(time.time() - t0, 1)
        status.metrics.pop("stored_run_error", None)
    except Exception as exc:  # noqa: BLE001
        status.metrics["stored_run_error"] = f"{type(exc).__name__}: {exc}"[:300]
    status.progress = 1.0
    write_status(dataset.name, status, variant)


def build_all(
    dataset_name: str, systems: list[str] | None = None, profile: str = "quick", force: bool = False,
    echo: bool = True,
) -> list[BuildStatus]:
    """Build ``systems`` (default: every default-build system for the dataset) as jobs on the executor
    (``core.build_graph``: each system once the systems it reads are built, independent ones side by side); a
    name may carry a variant (``densetrans@paper-objective``: built in its own folder, beside the default).
    Returns the statuses in registry order."""
    from core.build_graph import build_jobs, job_key
    from core.executor import JobsCancelled, check_reachable, run_jobs
    from core.registry import default_build_targets, parse_name

    dataset = load_dataset(dataset_name)
    if systems:
        named = [parse_name(s) for s in systems]
        for n in named:
            if n.trained_on:  # SYSTEM@X where X is no variant: a model trained elsewhere is prepared, not built
                from core.errors import UnknownNameError

                raise UnknownNameError(f"variant of {n.system}", n.trained_on, list(get_spec(n.system).variants))
        targets = [(get_spec(n.system), n.variant) for n in named]
    else:
        targets = default_build_targets(dataset)
    check_reachable()  # a cluster that answers nothing: one line, before anything is written
    with build_lock(dataset_name) as acquired:
        if not acquired:
            raise BuildRunningError(f"another build for {dataset_name} is running (see var/build/{slug(dataset_name)}/"
                                    "; the Models page shows it)")
        available, results = [], {}
        for spec, variant in targets:
            try:
                system_module(spec.name)
            except ModuleNotFoundError:
                results[job_key(spec.name, variant)] = BuildStatus(spec.name, "unavailable",
                                                                   message="not implemented in this version")
                continue
            available.append((spec, variant))
        queue = [job_key(s.name, v) for s, v in available
                 if force or not system_module(s.name).is_built(dataset, variant=v)]
        for label in queue:
            name = parse_name(label)
            write_status(dataset_name, BuildStatus(name.system, "queued", message="waiting for its inputs or a CPU"),
                         name.variant)
        save_json(_status_dir(dataset_name) / QUEUE_FILE, queue)

        finished: set[str] = set()

        def report(event: str, job) -> None:  # noqa: ANN001 - a JobResult
            if event in ("done", "failed"):
                finished.add(job.key)
            if not echo:
                return
            if event == "started":
                print(f"[build] {job.key} started", flush=True)
            elif event == "running":  # one readable line per job every half minute: build.log stays a log
                name = parse_name(job.key)
                now = read_status(dataset, get_spec(name.system), name.variant)
                message = now.message.splitlines()[-1][:100] if now.message else now.state
                print(f"[build] {job.key} {percent(now.progress)} % — {message}", flush=True)
            else:
                value = job.value or {}
                took = f" in {job.seconds:.0f}s" if job.seconds else ""
                print(f"[build] {job.key}: {value.get('state', 'failed')}{took} {value.get('error', job.error)}",
                      flush=True)
                for line in value.get(HELD_OUT_KEY, []):
                    print(line, flush=True)

        try:
            done = run_jobs(build_jobs(dataset_name, available, build_job, profile, force), on_event=report)
        except JobsCancelled:
            for label in (k for k in queue if k not in finished):
                name = parse_name(label)
                remove_partial(system_path(dataset_name, name.system, name.variant))  # a write cut by the kill
                write_status(dataset_name, BuildStatus(name.system, "not built", message="cancelled"), name.variant)
            raise BuildCancelled(f"the build of {dataset_name} was cancelled; {len(finished)} of {len(queue)} "
                                 "systems finished") from None
        for key, job in done.items():
            value = {k: v for k, v in (job.value or {}).items() if k != HELD_OUT_KEY}
            results[key] = BuildStatus(**value) if value else BuildStatus(
                parse_name(key).system, "failed", message=job.error, error=job.error or "the build job did not finish")
        return [results[job_key(spec.name, variant)] for spec, variant in targets]


def build_job(dataset_name: str, system: str, variant: str | None, profile: str, force: bool) -> dict:
    """One system's build job (run by the executor, in a worker): :func:`build_system` and, when the system is
    ready, its held-out verdict (cached for the pages); returns the ``BuildStatus`` as a dict, the verdict's line
    under ``HELD_OUT_KEY`` (the driver prints it)."""
    from core.analysis.held_out import check_built

    dataset = load_dataset(dataset_name)
    status = build_system(dataset, system, profile=profile, variant=variant, force=force)
    verdicts = []
    if status.state == "ready":  # beats its reference on held-out queries? checked as each system finishes
        verdicts = [f"[held-out] {v.system}: {v.line()}" for v in check_built(dataset, [(system, variant)], echo=False)]
    return {**asdict(status), HELD_OUT_KEY: verdicts}


def progress_line(dataset: Dataset) -> str | None:
    """The one line every page shows while the background build runs (what builds, how far, how many are
    ready), or ``None`` when no build runs. Progress is a whole percent, as the Models table shows it."""
    from core.registry import supports

    if not build_running(dataset.name):
        return None
    statuses = [read_status(dataset, s) for s in list_systems() if supports(s, dataset)]
    ready = sum(b.state == "ready" for b in statuses)
    active = [b for b in statuses if b.state == "building"]
    tail = f"{ready}/{len(statuses)} systems ready (see Models)"
    if not active:
        return f"⏳ Background build running · {tail}"
    if len(active) == 1:
        message = active[0].message.splitlines()[-1][:80] if active[0].message else "building"
        return f"⏳ Background build: {active[0].system} {percent(active[0].progress)} % — {message} · {tail}"
    building = ", ".join(f"{b.system} {percent(b.progress)} %" for b in active)
    return f"⏳ Background build: {building} · {tail}"


class BuildCancelled(StudioError):
    """The running build was cancelled (``cancel_build``): its unfinished systems are left not built."""


def cancel_build(dataset_name: str) -> bool:
    """Cancel the running build of ``dataset_name`` (SIGTERM to the process that holds its lock): it stops its
    jobs on the executor (their workers are killed: every artifact is written atomically, so nothing is left
    half-written; a training keeps its last checkpoint to resume from), marks each unfinished system not built
    ("cancelled") and lets go of the lock. False when no build runs."""
    if not build_running(dataset_name):
        return False
    try:
        pid = int((_status_dir(dataset_name) / "build.lock").read_text(encoding="utf-8").strip())
        os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError):
        return False
    return True


def start_background_build(dataset_name: str, profile: str = "quick", systems: list[str] | None = None) -> bool:
    """Start the default build as a detached process (no-op if one is running). Returns True if started."""
    if build_running(dataset_name):
        return False
    log = _status_dir(dataset_name) / "build.log"
    cmd = [sys.executable, "-m", "core", "build", "--dataset", dataset_name, "--profile", profile]
    cmd += ["--systems", ",".join(systems)] if systems else ["--all"]
    with open(log, "ab") as out:
        subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return True


def build_log_tail(dataset_name: str, lines: int = 40) -> str:
    log = _status_dir(dataset_name) / "build.log"
    if not log.is_file():
        return ""
    return "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def train_system(dataset: Dataset, system: str, variant: str | None = None, profile: str = "quick",
                 force: bool = False, progress: ProgressFn = no_progress) -> BuildStatus:
    """Train ``system`` on ``dataset``'s labels (``core.training_data``: labelled pairs with a deterministic split)
    with the system's own trainer and convergence rule.

    Returns the ``BuildStatus`` (metrics include the split sizes); status files as for any build.
    """
    from core.errors import StudioError
    from core.training_data import training_data

    if not needs_training(get_spec(system), variant):
        raise StudioError(f"{system} is not trained; build it with: {build_command(system, dataset.name, variant)}")
    refuse_if_marked_test(dataset.name, f"training {system}")
    data = training_data(dataset)
    progress(0.0, data.summary())
    status = build_system(data.dataset, system, profile=profile, variant=variant, force=force, listener=progress)
    status.metrics = {**status.metrics, "split": data.sizes, "split_unit": data.unit}
    if status.state == "ready":  # the split it was trained and chosen on, recorded with the build (its notes read it)
        write_status(data.dataset.name, status, variant)
    return status
