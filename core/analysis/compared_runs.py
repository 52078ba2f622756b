"""The runs error analysis compares: imported TREC run files (validated against the dataset, kept under
``var/runs``), built-in systems' runs through the one runner (``system_runs``), and runs kept as plain data
(``RunData``, ``run_from_dict``)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ranx import Run

from core.data.datasets import Dataset
from core.errors import DataFormatError
from core.evaluation import read_trec_run, to_run
from core.paths import artifact_dir
from core.registry import default_first_stage, get_spec, rerank_depth
from core.retrieval.base import ProgressFn, Ranking, no_progress
from core.serving.runner import Loader, SystemChoice, loader_for, rank_many


def rename(run: Run, name: str) -> Run:
    """A copy of a run under another name (ranx keys comparisons by ``Run.name``)."""
    out = Run.from_dict(run.to_dict(), name=name)
    out.name = name
    return out


def runs_dir(dataset_name: str) -> Path:
    """Where imported TREC runs of a dataset are kept."""
    from core.registry import slug

    return artifact_dir("runs", slug(dataset_name))


def import_run(path: str | Path, dataset: Dataset, name: str | None = None) -> tuple[str, Path]:
    """Validate a TREC run file against the dataset and keep a copy; returns (name, stored path)."""
    from core.registry import slug

    run = read_trec_run(path, name)
    docs = {d for ranked in run.to_dict().values() for d in ranked}
    known = docs & set(dataset.corpus)
    if not known:
        raise DataFormatError(path, None, f"none of its {len(docs)} doc ids is in the collection of {dataset.name}")
    run_name = slug(name or run.name or Path(path).stem)
    target = runs_dir(dataset.name) / f"{run_name}.trec"
    rename(run, run_name).save(str(target), kind="trec")
    return run_name, target


def imported_runs(dataset_name: str) -> dict[str, Path]:
    """Imported run name -> file."""
    return {p.stem: p for p in sorted(runs_dir(dataset_name).glob("*.trec"))}


def load_run_file(path: str | Path, name: str | None = None) -> Run:
    """A TREC run file as a ranx ``Run`` named ``name`` (default: file stem)."""
    return rename(read_trec_run(path), name or Path(path).stem)


def system_runs(
    names: Sequence[str],
    dataset: Dataset,
    queries: Mapping[str, str],
    k: int = 100,
    first_stage: str = default_first_stage(),
    depth: int = rerank_depth(),
    loader: Loader | None = None,
    progress: ProgressFn | None = None,
) -> list[Run]:
    """Runs of built-in systems by name through the one runner (rerankers rescore ``first_stage``'s top ``depth``).

    With the stored runs' first stage (bm25, top 20) they come from ``core.analysis.runs.load_runs``: the build's
    stored TREC runs where fresh, computed only for what they lack (``progress`` reports counts).
    ``loader(name, variant, options)`` defaults to the one loader (``core.serving.loader``).
    """
    from core.analysis import runs as stored

    progress = progress or no_progress
    if first_stage == stored.FIRST_STAGE and depth == stored.RERANK_DEPTH:
        return stored.load_runs(dataset, list(names), queries, k, progress, loader)
    load = loader or loader_for(dataset)
    first: dict[str, Ranking] | None = None
    runs = []
    for name in names:
        choice = SystemChoice(name, first_stage=first_stage, depth=depth)
        if first is None and get_spec(name).kind == "reranker" and not dataset.candidates:
            first = rank_many(SystemChoice(first_stage), dataset, queries, depth, load=load)  # shared by the rerankers
        rankings = rank_many(choice, dataset, queries, k, progress, load=load, first_stage=first)
        runs.append(to_run(rankings, name) if rankings else run_from_dict({}, name))
    return runs


@dataclass(frozen=True)
class RunData:
    """A run as plain data (``{qid: {doc: score}}``) with its name: what the unjudged rates, the pools and the TREC
    export read (``name`` and ``to_dict()``, as on a ranx ``Run``) without building ranx's typed dicts."""

    name: str
    data: Mapping[str, Mapping[str, float]]

    def to_dict(self) -> Mapping[str, Mapping[str, float]]:
        return self.data


def run_from_dict(data: Mapping[str, Mapping[str, float]], name: str) -> Run:
    """A fresh ranx ``Run`` from ``{qid: {doc: score}}`` (cached runs are kept as plain dicts)."""
    run = Run.from_dict({q: dict(v) for q, v in data.items() if v}, name=name)
    run.name = name
    return run
