"""The build as a graph of executor jobs: one job per system (or recipe variant), edges from the registrations.

A system's job waits for the systems its build reads (``SystemSpec.needs``), the untrained reference its held-out
verdict is measured against (``SystemSpec.reference``) and, for a reranker, the first stage its stored runs and
interpolation weight rerank (the registry's default first stage). An edge to a system outside the build is
dropped (it is built already, or the job builds what it reads on demand, as a sequential build did). Every job
runs ``core.build.build_job`` in a worker with its registration's fixed thread count (``SystemSpec.threads``), so a
parallel build gives the models of the sequential one. Among jobs ready at once, the one that more jobs wait for
(directly or not) goes first: MiniLM before GloVe, the cross-encoder before the FRMs.
"""
from __future__ import annotations

from collections.abc import Callable

from core.build_status import _label
from core.executor import Job
from core.registry import SystemSpec, default_first_stage

__all__ = ["build_jobs", "dependants", "job_key"]


def job_key(system: str, variant: str | None) -> str:
    """``SYSTEM[@VARIANT]``: a build job's key (the label the status files and the CLI use)."""
    return _label(system, variant)


def _inputs(spec: SystemSpec) -> tuple[str, ...]:
    """Systems whose artifacts ``spec``'s build, stored runs and held-out verdict read (registration order)."""
    first_stage = (default_first_stage(),) if spec.kind == "reranker" else ()
    reference = (spec.reference,) if spec.reference else ()
    return tuple(dict.fromkeys(n for n in (*spec.needs, *reference, *first_stage) if n != spec.name))


def build_jobs(dataset_name: str, targets: list[tuple[SystemSpec, str | None]], run: Callable[..., dict],
               profile: str = "quick", force: bool = False) -> list[Job]:
    """One job per target, ``run(dataset_name, system, variant, profile, force)`` in a worker; a job waits for
    the default build (no variant) of each of its inputs that is a target too."""
    keys = {job_key(spec.name, variant) for spec, variant in targets}
    needs = {job_key(spec.name, variant): tuple(n for n in _inputs(spec) if n in keys) for spec, variant in targets}
    return [Job(job_key(spec.name, variant), run, (dataset_name, spec.name, variant, profile, force),
                needs=needs[job_key(spec.name, variant)], threads=spec.threads,
                priority=len(dependants(job_key(spec.name, variant), needs)))
            for spec, variant in targets]


def dependants(key: str, needs: dict[str, tuple[str, ...]]) -> set[str]:
    """Every job that waits, directly or through others, for ``key``: a job that unblocks more goes first."""
    found: set[str] = set()
    frontier = [key]
    while frontier:
        current = frontier.pop()
        for other, wanted in needs.items():
            if current in wanted and other not in found:
                found.add(other)
                frontier.append(other)
    return found
