"""Evaluation with ranx (no hand-written metrics): metric names, per-query values, comparisons, TREC files.

Metric names are ranx's (``recall@100``, ``mrr@100``, ``map@20``, ``ndcg@10``, ``precision@1``,
``hit_rate@10``). The seed papers' H@k is ranx's ``hit_rate@k`` (fraction of queries with a relevant
item in the top k); ranx's ``hits@k`` counts relevant items and is not used for H@k.

QQP numbers are computed with each query removed from its own ranking (``ignore_identical_ids``), see
``core.retrieval.base``.

The contract's tie order lives here too (``ordered_ids``), so every per-query number follows one rule:
``trec_eval`` = score descending (compared as 32-bit floats, as trec_eval stores them), then doc id descending
(string order); ``run_order`` = score descending, then the run's own order. The chosen order is imposed by
re-scoring (n, n-1, ..., 1) before ranx sees the run. The contract itself (query set, both conventions,
trec_eval names) is ``core.evaluation_contract``.
"""
from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numba
import numpy as np
from ranx import Qrels, Run, compare, evaluate

# ranx sets numba's "workqueue" threading layer, which aborts the whole process when two threads run
# its parallel metrics at once (Streamlit serves each session from its own thread, and the app warms
# ranx up in a background thread). numba's OpenMP layer is thread-safe; the layer is chosen at the
# first parallel call, so this runs right after ranx is imported (tests/test_evaluation.py).
numba.config.THREADING_LAYER = "omp"


def _start_numba_keeping_torch_threads() -> None:
    """Start numba's OpenMP pool now and give torch back its thread count. Starting the pool sets the calling
    thread's OpenMP thread count to numba's own (every core); torch shares that OpenMP runtime, so a process
    that ran ``torch.set_num_threads(1)`` (a one-thread training) would then run torch on every core from its
    first evaluation on, and two such trainings side by side would oversubscribe the CPU (tests/test_evaluation.py).
    The count is read before the pool starts: read after, it is already numba's, and a one-thread training that
    imported this module mid-run (FRM's first dev AUC) went on with two threads and other weights."""
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    numba.get_num_threads()  # starts the pool (numba's public entry to its thread launch)
    if torch is not None:
        torch.set_num_threads(threads)


_start_numba_keeping_torch_threads()

from core.errors import UnknownNameError
from core.data import trec
from core.data.datasets import Pair
from core.retrieval.base import Ranking, Reranker, to_run

DEFAULT_METRICS = (
    "recall@10", "recall@20", "recall@50", "recall@100", "mrr@100", "map@20", "map@100",
    "ndcg@10", "precision@1", "hit_rate@1", "hit_rate@10",
)
SHORT_NAMES = {"hit_rate@1": "H@1", "hit_rate@10": "H@10", "precision@1": "P@1"}
RunLike = Mapping[str, Ranking] | Run | Mapping[str, Mapping[str, float]]
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


def comparable(run: Run, qrels: Qrels) -> Run:
    """``run`` restricted to the queries of ``qrels`` as a *new* Run when their query sets differ (ranx's
    ``make_comparable`` deletes the other queries from the run it is given, so a caller's run evaluated on a
    subset would lose them for its next use); the run itself when they already match."""
    wanted = qrels.qrels
    if set(run.keys()) == set(wanted.keys()):
        return run
    return Run.from_dict({q: {d: float(v) for d, v in run[q].items()} for q in run.keys() if q in wanted and len(run[q])},
                         name=run.name)


def mean_or_nan(values: Iterable[float]) -> float:
    """The mean of ``values``, NaN when there are none."""
    values = list(values)
    return sum(values) / len(values) if values else math.nan


def evaluate_run(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Ranking] | Run,
    metrics: list[str] | tuple[str, ...] = DEFAULT_METRICS,
    ties: str | None = None,
) -> dict[str, float]:
    """Mean of each metric over the queries of ``qrels`` (a query the run misses scores 0), score ties broken
    by the contract's rule (``per_query_metrics``), so a trainer's dev number and a page's number agree."""
    per = per_query_metrics(qrels, run, metrics, ties)
    return {m: mean_or_nan(values.values()) for m, values in per.items()}


def per_query(
    qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Ranking] | Run, metric: str, ties: str | None = None,
) -> dict[str, float]:
    """One metric for each query of ``qrels``, score ties broken by ``ties`` (default: ``DEFAULT_TIES``)."""
    return per_query_metrics(qrels, run, [metric], ties)[check_metrics([metric])[0]]


def per_query_metrics(
    qrels: Mapping[str, Mapping[str, int]], run: RunLike, metrics: Sequence[str], ties: str | None = None,
) -> dict[str, dict[str, float]]:
    """metric -> query -> value for each query of ``qrels`` (a query the run misses scores 0), under the
    contract's tie rule (``ties``, default ``DEFAULT_TIES``): the run is put in that order once (``ordered_ids``)
    and re-scored n..1, so ranx never breaks a tie its own way and every page and verb sees one number."""
    metrics = check_metrics(list(metrics))
    ties = ties or DEFAULT_TIES
    wanted = {q for q, rel in qrels.items() if rel}
    data = run.to_dict() if isinstance(run, Run) else run
    ordered = ordered_ids({q: r for q, r in data.items() if q in wanted}, ties)
    out = {m: dict.fromkeys(wanted, 0.0) for m in metrics}
    present = {q: ids for q, ids in ordered.items() if ids}
    if present:
        run_obj = run_in_order(present)
        evaluate(to_qrels({q: qrels[q] for q in present}), run_obj, metrics, return_mean=False)
        for m in metrics:
            out[m].update({q: float(v) for q, v in run_obj.scores[m].items()})
    return out


def compare_runs(
    qrels: Mapping[str, Mapping[str, int]],
    runs: list[Run],
    metrics: list[str] | tuple[str, ...] = ("map@100", "mrr@100", "ndcg@10", "precision@1"),
    stat_test: str = "student",
    max_p: float = 0.05,
):
    """ranx ``compare``: metric table with paired significance tests (``student`` t-test or
    ``fisher`` randomization). Returns a ranx ``Report``."""
    qrels_obj = to_qrels(qrels)
    return compare(qrels_obj, [comparable(r, qrels_obj) for r in runs], check_metrics(metrics), stat_test=stat_test,
                   max_p=max_p, make_comparable=True)


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
    """A TREC run file (``core.data.trec.read_run``) as a ranx ``Run`` named ``name``, else its tag or file stem."""
    data, tag = trec.read_run(path)
    run = Run.from_dict(data, name=name or tag or Path(path).stem)
    run.name = name or tag or Path(path).stem
    return run


def write_trec_run(run: Mapping[str, Ranking] | Run, path: str | Path, name: str | None = None) -> Path:
    """Write a run as a TREC run file (``core.data.trec``), each query's documents in ranx's order."""
    run = as_run(run, name)
    if not run.sorted:
        run.sort()
    return trec.write_text(path, trec.ranked_text({q: list(run.run[q].items()) for q in run.run}, run.name, None))


def short(metric: str) -> str:
    return SHORT_NAMES.get(metric, metric)


# --- The contract's tie order: equal scores ordered as trec_eval orders them ---


TIE_RULES = {
    "trec_eval": "trec_eval order (score desc, then doc id desc)",
    "run_order": "run order (score desc, then the run's own order)",
}
DEFAULT_TIES = "trec_eval"  # the one default of every page, verb and report


def tie_note(ties: str | None = None) -> str:
    """The line a page or verb shows under its numbers: which tie rule ordered equal scores."""
    return f"ties: {TIE_RULES[ties or DEFAULT_TIES]}"


def _scored_items(ranking: Ranking | Mapping[str, float]) -> list[tuple[str, float]]:
    if isinstance(ranking, Ranking):
        return [(d, float(s)) for d, s in zip(ranking.doc_ids, ranking.scores)]
    return [(d, float(s)) for d, s in ranking.items()]


def ordered_ids(run: RunLike, ties: str = DEFAULT_TIES) -> dict[str, list[str]]:
    """Each query's doc ids in evaluation order: score descending, ties broken by ``ties``.

    ``trec_eval``: scores compared as 32-bit floats (trec_eval keeps them as C ``float``; pytrec_eval
    ties 1.0 and 1.0 + 1e-9), then doc id descending (trec_eval's ``strcmp``). ``run_order``: ties
    keep the run's own order (a Ranking's doc_ids, a mapping's insertion order, a ranx Run's stored order).
    """
    if ties not in TIE_RULES:
        raise UnknownNameError("tie rule", ties, list(TIE_RULES))
    data = run.to_dict() if isinstance(run, Run) else run
    out = {}
    for q, ranking in data.items():
        items = _scored_items(ranking)
        if ties == "trec_eval":
            items.sort(key=lambda x: (np.float32(x[1]), x[0]), reverse=True)
        else:
            items.sort(key=lambda x: -x[1])  # stable: ties stay in run order
        out[q] = [d for d, _ in items]
    return out


def run_in_order(ordered: Mapping[str, list[str]], name: str = "run") -> Run:
    """A ranx Run scoring each query's ids n, n-1, ..., 1 in the given order (ranx then sees no tie)."""
    out = Run.from_dict({q: {d: float(len(ids) - i) for i, d in enumerate(ids)} for q, ids in ordered.items() if ids}, name=name)
    out.name = name
    return out


def rescored_run(run: RunLike, ties: str = DEFAULT_TIES, name: str = "run") -> Run:
    """A ranx Run whose scores (n, n-1, ..., 1) follow ``ordered_ids``: ranx then sees no tie."""
    return run_in_order(ordered_ids(run, ties), name)


# ----------------------------------------------------------------------------- pair classification
def roc_auc(labels, scores) -> float:  # noqa: ANN001
    """ROC AUC of scores against labels (> 0 is positive; sklearn, ties count ½); NaN when one class is missing.

    The one pair-AUC of the project: the trainers' dev metric (SDML §4.2, FRM Table 4) and ``pair_auc``."""
    from sklearn.metrics import roc_auc_score

    positive = np.asarray(labels) > 0
    if positive.size == 0 or positive.all() or not positive.any():
        return float("nan")
    return float(roc_auc_score(positive, np.asarray(scores, dtype=np.float64)))


def pair_auc(scores: np.ndarray, pairs: list[Pair]) -> float:
    """ROC AUC of pair scores against the pairs' 0/1 labels (``roc_auc``); NaN when one class is missing."""
    return roc_auc([p.label for p in pairs], scores)


def score_pairs_of(reranker: Reranker, pairs: list[Pair], corpus: dict[str, str]) -> np.ndarray:
    """The reranker's score of each labelled pair's two texts (what ``pair_auc`` measures)."""
    return reranker.score_pairs([corpus[p.id1] for p in pairs], [corpus[p.id2] for p in pairs])
