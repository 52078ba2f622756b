"""Evaluation with ranx (no hand-written metrics): metric names, per-query values, comparisons, TREC files.

Metric names are ranx's (``recall@100``, ``mrr@100``, ``map@20``, ``ndcg@10``, ``precision@1``,
``hit_rate@10``). The seed papers' H@k is ranx's ``hit_rate@k`` (fraction of queries with a relevant
item in the top k); ranx's ``hits@k`` counts relevant items and is not used for H@k.

QQP numbers are computed with each query removed from its own ranking (``ignore_identical_ids``), see
``core.retrieval.base``.
"""
from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numba
from ranx import Qrels, Run, compare, evaluate

# ranx sets numba's "workqueue" threading layer, which aborts the whole process when two threads run
# its parallel metrics at once (Streamlit serves each session from its own thread, and the app warms
# ranx up in a background thread). numba's OpenMP layer is thread-safe; the layer is chosen at the
# first parallel call, so this runs right after ranx is imported (tests/test_evaluation.py).
numba.config.THREADING_LAYER = "omp"

from core.errors import DataFormatError, UnknownNameError
from core.retrieval.base import Ranking, to_run

DEFAULT_METRICS = (
    "recall@10", "recall@20", "recall@50", "recall@100", "mrr@100", "map@20", "map@100",
    "ndcg@10", "precision@1", "hit_rate@1", "hit_rate@10",
)
SHORT_NAMES = {"hit_rate@1": "H@1", "hit_rate@10": "H@10", "precision@1": "P@1"}
_KNOWN = ("recall", "mrr", "map", "ndcg", "precision", "hit_rate", "hits", "r-precision", "bpref", "f1")


def check_metrics(metrics: list[str] | tuple[str, ...]) -> list[str]:
    """Validate metric names (ranx's ``name@k``), accepting the papers' aliases H@k and P@k."""
    aliases = {v.lower(): k for k, v in SHORT_NAMES.items()}
    out = []
    for m in metrics:
        m = aliases.get(m.lower(), m.lower())
        if m.startswith("h@"):
            m = "hit_rate@" + m[2:]
        if m.startswith("p@"):
            m = "precision@" + m[2:]
        base, _, cutoff = m.partition("@")
        if base not in _KNOWN or (cutoff and not cutoff.isdigit()):
            raise UnknownNameError("metric", m, [f"{k}@K" for k in _KNOWN])
        out.append(m)
    return out


def to_qrels(qrels: Mapping[str, Mapping[str, int]], name: str = "qrels") -> Qrels:
    q = Qrels.from_dict({qid: dict(rel) for qid, rel in qrels.items() if rel})
    q.name = name
    return q


def as_run(rankings: Mapping[str, Ranking] | Run, name: str | None = None) -> Run:
    if isinstance(rankings, Run):
        return rankings
    return to_run(rankings, name or next(iter(rankings.values())).system if rankings else "empty")


def evaluate_run(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Ranking] | Run,
    metrics: list[str] | tuple[str, ...] = DEFAULT_METRICS,
) -> dict[str, float]:
    """Mean of each metric over the queries of ``qrels`` (a query the run misses scores 0)."""
    metrics = check_metrics(metrics)
    run = as_run(run)
    qrels_obj = to_qrels(qrels)
    scores = evaluate(qrels_obj, run, metrics, make_comparable=True)
    return {m: float(scores[m]) if len(metrics) > 1 else float(scores) for m in metrics}


def per_query(
    qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Ranking] | Run, metric: str
) -> dict[str, float]:
    """One metric for each query of ``qrels``."""
    (metric,) = check_metrics([metric])
    run = as_run(run)
    qrels_obj = to_qrels(qrels)
    evaluate(qrels_obj, run, metric, return_mean=False, make_comparable=True)
    return {q: float(v) for q, v in run.scores[metric].items()}


def compare_runs(
    qrels: Mapping[str, Mapping[str, int]],
    runs: list[Run],
    metrics: list[str] | tuple[str, ...] = ("map@100", "mrr@100", "ndcg@10", "precision@1"),
    stat_test: str = "student",
    max_p: float = 0.05,
):
    """ranx ``compare``: metric table with paired significance tests (``student`` t-test or
    ``fisher`` randomization). Returns a ranx ``Report``."""
    return compare(to_qrels(qrels), runs, check_metrics(metrics), stat_test=stat_test, max_p=max_p, make_comparable=True)


def warm_up(example_ids: Sequence[str] = (), stat_test: str = "student") -> float:
    """Compile ranx's numba code for this process on a tiny qrels/run pair; returns the seconds it took.

    ranx keeps qrels and runs in numba typed dicts/lists whose internals are compiled in every new
    process (numba cannot cache them on disk): the first evaluation of a process pays several seconds
    (measured in bench/results.md, "Error Analysis: the default first view"). The app calls this in a
    background thread when the server starts, so a researcher's first Error Analysis view does not.
    ``example_ids`` (a dataset's own ids) give the arrays the dataset's string widths.
    """
    import time

    start = time.perf_counter()
    q1, q2, d1, d2, d3 = (list(example_ids)[:5] + ["q1", "q2", "d1", "d2", "d3"][len(list(example_ids)[:5]):])
    qrels = {q1: {d1: 1}, q2: {d2: 2, d3: 1}}
    runs = [Run.from_dict({q1: {d1: 2.0, d2: 1.0}, q2: {d3: 1.5, d2: 0.5}}, name="a"),
            Run.from_dict({q1: {d2: 2.0, d1: 1.0}, q2: {d2: 1.0, d1: 0.5}}, name="b")]
    with warnings.catch_warnings():  # two-query t-tests on toy data: precision warnings are expected
        warnings.simplefilter("ignore", RuntimeWarning)
        for run in runs:
            per_query(qrels, run, "map@100")
        compare_runs(qrels, runs, DEFAULT_METRICS, stat_test=stat_test)
    return time.perf_counter() - start


def read_trec_run(path: str | Path, name: str | None = None) -> Run:
    """Read a TREC run file (``qid Q0 docid rank score tag``), naming the line of any malformed row."""
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(path, None, "file not found")
    data: dict[str, dict[str, float]] = {}
    tag = None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataFormatError(path, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cols = line.split()
        if len(cols) != 6:
            raise DataFormatError(path, lineno, f"expected 6 columns 'qid Q0 docid rank score tag', got {len(cols)}")
        qid, _, did, rank, score, tag = cols
        try:
            int(rank)
            value = float(score)
        except ValueError:
            raise DataFormatError(path, lineno, f"rank must be an integer and score a number: {rank!r} {score!r}") from None
        data.setdefault(qid, {})[did] = value
    if not data:
        raise DataFormatError(path, None, "no run lines found")
    run = Run.from_dict(data, name=name or tag or path.stem)
    run.name = name or tag or path.stem
    return run


def write_trec_run(run: Mapping[str, Ranking] | Run, path: str | Path, name: str | None = None) -> Path:
    """Write a TREC run file (ranx's writer)."""
    run = as_run(run, name)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    run.save(str(path), kind="trec")
    return path


def short(metric: str) -> str:
    return SHORT_NAMES.get(metric, metric)
