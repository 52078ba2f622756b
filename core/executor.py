"""The one executor for heavy work: Ray tasks, on this machine by default or on a lab's cluster.

Builds, encodings and experiments are :class:`Job` s with the jobs they wait for (``needs``); :func:`run_jobs`
schedules each one as a Ray task as soon as its inputs are done, so independent jobs run side by side.

- **Where.** ``QRS_RAY_ADDRESS`` unset: Ray is started here, embedded, for the duration of the work
  (``ray.init(num_cpus=QRS_RAY_CPUS or the cores, include_dashboard=False, object_store_memory=bounded)``)
  and stopped after it. Set (``ray://`` or ``HOST:PORT`` of ``ray start --head``): the jobs join that cluster;
  the repository must be at the same path on every node and ``QRS_VAR`` on a folder every node shares. An
  address that answers nothing is one :class:`ExecutorError` line (the CLI exits 2) and nothing is written.
- **Determinism.** A job names its torch intra-op ``threads`` (fixed, whatever the machine's size): the worker
  sets them before the job runs, so a seed and a commit give one model whether the job ran alone, beside
  others, or on another node; Ray reserves as many CPUs as it has threads, so jobs never oversubscribe a core.
- **Priority.** Workers run at a lower priority (``nice``) than the app that started them, so the Streamlit
  server is never starved while a build runs.
- **Faults.** A worker that dies mid-job (killed, out of memory) is retried by Ray (``retries``); a job writes
  its artifacts atomically, so the retry starts from what the dead one left finished (checkpoints included).
"""
from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from core.errors import StudioError
from core.paths import REPO_ROOT
from core.settings import settings

__all__ = ["ExecutorError", "Job", "JobResult", "JobsCancelled", "check_reachable", "cluster_cpus", "executor",
           "in_job", "job_environment", "patient_head_start", "run_jobs", "start_ray", "worker_setup",
           "WORKER_NICE"]

HEARTBEAT_SECONDS = 30.0  # a "running" event per running job when none has finished for this long
WORKER_NICE = 10  # workers' niceness above the driver's: the app's server keeps its share of the cores
OBJECT_STORE_BYTES = 512 * 1024 * 1024  # bounded: builds pass file paths and small records, not tensors
GCS_PORT_WAIT_S = 120  # Ray waits 30 s for a new head's GCS to bind its port; a busy 2-core machine can need more
# torch's and oneDNN's kernel pins (core.cpu_kernels): a worker gets them before it imports torch
_WORKER_ENV = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")


class ExecutorError(StudioError):
    """The executor cannot start or reach its cluster: one line naming the address and what to do."""


@dataclass(frozen=True)
class Job:
    """One unit of heavy work: ``fn(*args)`` in a worker, after the jobs named in ``needs``.

    ``fn`` is a module-level function (Ray pickles it by reference); ``threads`` is torch's intra-op thread count
    in the worker (fixed: part of the result's determinism) and the CPUs Ray reserves for it (two jobs never share
    a core: oversubscribed intra-op threads wait on each other's barriers, several times slower).
    ``priority``: among jobs ready at once, higher goes first."""

    key: str
    fn: Callable[..., Any]
    args: tuple = ()
    needs: tuple[str, ...] = ()
    threads: int = 1
    priority: float = 0.0


@dataclass
class JobResult:
    """What a job returned and where it ran (``node``: the Ray node id; ``pid``: the worker process)."""

    key: str
    value: Any = None
    node: str = ""
    pid: int = 0
    seconds: float = 0.0
    error: str = ""
    ran: bool = True  # False: never started, a job it needs stopped its dependants (``run_jobs``)


_job = {"running": False}  # True while this process runs an executor job (a worker's, or one run inline)
JOB_MARK = "QUESTION_STUDIO_IN_JOB"  # set to 1 while a job runs: a command a job starts (bench.plan_jobs) sees it


def in_job() -> bool:
    """Inside an executor job, or a process one started: the job is the unit of parallel work, so it does not
    fan out again."""
    return _job["running"] or os.environ.get(JOB_MARK) == "1"


@contextmanager
def _running_job() -> Iterator[None]:
    """Mark this process (and the processes it starts) as running a job, for :func:`in_job`."""
    _job["running"], before = True, os.environ.get(JOB_MARK)
    os.environ[JOB_MARK] = "1"
    try:
        yield
    finally:
        _job["running"] = False
        if before is None:
            os.environ.pop(JOB_MARK, None)
        else:
            os.environ[JOB_MARK] = before


def job_environment() -> dict[str, str]:
    """The driver's ``QRS_*`` settings and kernel pins: a worker runs each job in the driver's settings."""
    env = dict(settings().env)
    env.update({k: os.environ[k] for k in _WORKER_ENV if k in os.environ})
    return env


def worker_setup(env: Mapping[str, str], threads: int) -> None:
    """In a worker, before a job or an actor's model: the driver's settings, fixed torch threads, lower priority."""
    import torch

    for key in [k for k in os.environ if k.startswith("QRS_") and k not in env]:
        del os.environ[key]  # a worker is reused across jobs: no setting leaks from an earlier one
    os.environ.update(env)
    if os.nice(0) < WORKER_NICE:
        os.nice(WORKER_NICE - os.nice(0))
    torch.set_num_threads(threads)


def _in_worker(fn: Callable[..., Any], args: tuple, threads: int, env: Mapping[str, str]) -> tuple:
    """Run one job in a Ray worker (:func:`worker_setup` first)."""
    import ray

    worker_setup(env, threads)
    start = time.perf_counter()
    with _running_job():
        value = fn(*args)
    return value, ray.get_runtime_context().get_node_id(), os.getpid(), time.perf_counter() - start


def _inline(job: Job, on_event: Callable[[str, JobResult], None] | None) -> JobResult:
    """One job in this process, on its fixed threads (restored after)."""
    import torch

    if on_event:
        on_event("started", JobResult(job.key))
    before, start = torch.get_num_threads(), time.perf_counter()
    torch.set_num_threads(job.threads)
    try:
        with _running_job():
            result = JobResult(job.key, job.fn(*job.args), "local", os.getpid())
    except Exception as exc:  # noqa: BLE001 - recorded, as in a worker
        result = JobResult(job.key, error=f"{type(exc).__name__}: {exc}"[-2000:])
    finally:
        torch.set_num_threads(before)
    result.seconds = time.perf_counter() - start
    if on_event:
        on_event("failed" if result.error else "done", result)
    return result


def check_reachable() -> None:
    """Before any work is written: ``QRS_RAY_ADDRESS``, when set, answers (else one :class:`ExecutorError` line)."""
    if settings().ray_address and not _ray_initialized():
        _check_address(settings().ray_address)


def _ray_initialized() -> bool:
    import ray

    return ray.is_initialized()


def _check_address(address: str) -> None:
    """Fail fast, in one line, when ``HOST:PORT`` answers nothing (Ray itself would wait and then trace)."""
    target = address.split("://", 1)[-1].rstrip("/")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise ExecutorError(f"QRS_RAY_ADDRESS: expected HOST:PORT or ray://HOST:PORT, got {address!r}")
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            pass
    except OSError as exc:
        raise ExecutorError(f"QRS_RAY_ADDRESS={address}: no Ray cluster answers there ({exc.strerror or exc}); "
                            "start one with `ray start --head` or unset QRS_RAY_ADDRESS to run here") from None


def cluster_cpus() -> int:
    """CPUs of the embedded Ray: ``QRS_RAY_CPUS``, else this machine's cores."""
    return settings().ray_cpus or os.cpu_count() or 1


def patient_head_start() -> None:
    """Let a Ray head started by this process wait ``GCS_PORT_WAIT_S`` for its GCS server's port (Ray's own
    ``RAY_gcs_server_port_wait_time_s``, 30 s by default; an operator's value is kept): on a loaded machine the
    GCS can take longer to bind, and Ray then gives up with "Timed out waiting for file ... gcs_server_port"."""
    os.environ.setdefault("RAY_gcs_server_port_wait_time_s", str(GCS_PORT_WAIT_S))


def start_ray() -> None:
    """Start Ray for this process: joined at ``QRS_RAY_ADDRESS`` (checked first: one line when nothing answers),
    else embedded here. :func:`executor` calls it for the work inside and stops Ray after; a caller that runs many
    pieces of work (a test session) may call it once and stop Ray itself (``ray.shutdown()``): every job and actor
    carries its own settings (:func:`worker_setup`), so one Ray serves work of any settings."""
    import ray

    address = settings().ray_address
    env = {"env_vars": {"PYTHONPATH": str(REPO_ROOT), "OMP_WAIT_POLICY": "PASSIVE", **job_environment()}}
    if address:
        _check_address(address)
        ray.init(address=address, runtime_env=env, log_to_driver=False, logging_level="ERROR")
    else:
        patient_head_start()
        ray.init(address="local", num_cpus=cluster_cpus(), include_dashboard=False,  # "local": never a RAY_ADDRESS
                 object_store_memory=OBJECT_STORE_BYTES,
                 runtime_env=env, log_to_driver=False, logging_level="ERROR", configure_logging=False)


@contextmanager
def executor() -> Iterator[None]:
    """Ray running for the work inside: joined when already up (a test session's or a lab's cluster), else started
    (:func:`start_ray`) and stopped after."""
    import ray

    if ray.is_initialized():
        yield
        return
    start_ray()
    try:
        yield
    finally:
        ray.shutdown()


class JobsCancelled(StudioError):
    """SIGTERM while jobs ran (``core.build.cancel_build``): the running jobs were cancelled, their workers killed."""


@contextmanager
def _cancel_on_sigterm() -> Iterator[threading.Event]:
    """An event that SIGTERM sets while jobs run (installed after ``ray.init``, whose own handler would end the
    process without cancelling anything); the scheduler checks it every second. Main thread only, as signals."""
    requested = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield requested
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: requested.set())
    try:
        yield requested
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_jobs(jobs: list[Job], on_event: Callable[[str, JobResult], None] | None = None,
             retries: int = 3, stops_dependants: Callable[[JobResult], bool] | None = None) -> dict[str, JobResult]:
    """Run ``jobs`` on the executor, each once its ``needs`` are done (a need outside ``jobs`` is taken as
    done); returns every job's :class:`JobResult` by key. ``on_event("started" | "done" | "failed", result)``
    reports progress on the driver (``started``: handed to a worker; ``running``: still running, every
    ``HEARTBEAT_SECONDS`` while none finishes; ``skipped``: never run, see below). A job that raises is recorded
    (``error``) and its dependants still run, unless ``stops_dependants(result)`` says a finished job's result
    stops them: they are then recorded without running (``ran=False``), theirs in turn. Jobs are handed to Ray
    only as CPUs free up, most urgent first (``priority``)."""
    keys = {j.key for j in jobs}
    if len(keys) != len(jobs):
        raise ValueError("job keys must be unique")
    if len(jobs) == 1 and not settings().ray_address:  # nothing to overlap: Ray's start would cost more than
        return {jobs[0].key: _inline(jobs[0], on_event)}  # it saves (a cluster still gets the job)
    import ray

    pending = {j.key: j for j in jobs}
    order = {j.key: i for i, j in enumerate(jobs)}
    running: dict[Any, Job] = {}
    results: dict[str, JobResult] = {}
    env = job_environment()
    with executor(), _cancel_on_sigterm() as cancel:
        task = ray.remote(_in_worker)
        capacity = max(1, int(ray.cluster_resources().get("CPU", 1)))
        node_cpus = max([int(n["Resources"].get("CPU", 0)) for n in ray.nodes() if n.get("Alive")] or [1])
        try:
            _schedule(task, pending, running, results, keys, order, capacity, node_cpus, retries, env, on_event,
                      cancel, stops_dependants)
        except BaseException:  # cancelled (a signal) or interrupted: stop what runs, its workers with it
            for ref in running:
                ray.cancel(ref, force=True)
            raise
    return results


def _skip_stopped(pending: dict, results: dict, stops: Callable[[JobResult], bool] | None, on_event) -> None:  # noqa: ANN001
    """Record as not run every pending job that needs a job whose result stops its dependants (transitively)."""
    if stops is None:
        return
    changed = True
    while changed:
        changed = False
        for key, job in list(pending.items()):
            cause = next((n for n in job.needs if n in results and (not results[n].ran or stops(results[n]))), None)
            if cause is not None:
                del pending[key]
                results[key] = JobResult(key, error=f"not run: {cause} did not succeed", ran=False)
                changed = True
                if on_event:
                    on_event("skipped", results[key])


def _schedule(task, pending: dict, running: dict, results: dict, keys: set, order: dict, capacity: int,  # noqa: ANN001
              node_cpus: int, retries: int, env: Mapping[str, str], on_event, cancel: threading.Event,
              stops: Callable[[JobResult], bool] | None = None) -> None:
    """``run_jobs``'s loop: hand ready jobs to Ray as CPUs free, most urgent first, none past an urgent one that
    waits for CPUs (a smaller job slipped in ahead of it could hold it back for as long as it runs: the
    cross-encoder waited behind both FRMs that way); collect each as it ends. A job reserves its threads' CPUs,
    at most one node's."""
    import ray

    while pending or running:
        _skip_stopped(pending, results, stops, on_event)
        if not pending and not running:
            break
        ready = sorted((j for j in pending.values() if all(n not in keys or n in results for n in j.needs)),
                       key=lambda j: (-j.priority, order[j.key]))
        busy = sum(min(j.threads, node_cpus) for j in running.values())
        for job in ready:  # only what the CPUs take now: a later, more urgent job is not queued behind them
            cpus = min(job.threads, node_cpus)
            if running and busy + cpus > capacity:
                break
            del pending[job.key]
            ref = task.options(num_cpus=cpus, max_retries=retries, retry_exceptions=False,
                               name=job.key).remote(job.fn, job.args, job.threads, env)
            running[ref] = job
            busy += cpus
            if on_event:
                on_event("started", JobResult(job.key))
        if not running:
            missing = {k: [n for n in j.needs if n in keys and n not in results] for k, j in pending.items()}
            raise ValueError(f"jobs wait on each other in a circle: {missing}")
        done: list = []
        waited = time.monotonic()
        while not done:
            done, _ = ray.wait(list(running), num_returns=1, timeout=1.0)
            if cancel.is_set():
                raise JobsCancelled("the jobs were cancelled")
            if not done and time.monotonic() - waited > HEARTBEAT_SECONDS:  # nothing finished for a while
                waited = time.monotonic()
                for job in running.values():
                    if on_event:
                        on_event("running", JobResult(job.key))
        job = running.pop(done[0])
        finished = done[0]
        try:
            value, node, pid, seconds = ray.get(finished)
            result = JobResult(job.key, value, node, pid, seconds)
        except Exception as exc:  # noqa: BLE001 - recorded; the other jobs go on
            result = JobResult(job.key, error=f"{type(exc).__name__}: {exc}"[-2000:])
        results[job.key] = result
        if on_event:
            on_event("failed" if result.error else "done", result)
