"""The Compare page's logic: run several systems on one query and describe how they differ.

Everything the page shows is computed here (the page only lays it out): per-system rankings and
latency, relevance marks from qrels and from user labels, rank movement against a baseline,
hits shared by all systems vs unique to one, pairwise overlap@k and rank-biased overlap, and
per-query metrics (ranx) when the query has qrels.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import combinations

from core.data.datasets import Dataset
from core.errors import NotReadyError, StudioError
from core.registry import get_spec
from core.evaluation import evaluate_run
from core.retrieval.base import Ranking, validate_query
from core.serving.runner import SystemChoice, rank_one  # noqa: F401 (SystemChoice re-exported for pages)

QUERY_METRICS = ("precision@1", "mrr@100", "ndcg@10", "recall@10")


@dataclass
class Hit:
    rank: int
    doc_id: str
    text: str
    score: float
    qrel: int | None  # dataset label (None: not in qrels)
    user_label: int | None  # current user judgment (None: none)
    baseline_rank: int | None  # rank in the baseline's top-k (None: absent)
    shared_by: int  # how many selected systems have this doc in their top-k

    @property
    def movement(self) -> str:
        """``↑3`` / ``↓2`` / ``=`` against the baseline, ``new`` when the baseline's top-k misses it."""
        if self.baseline_rank is None:
            return "new"
        delta = self.baseline_rank - self.rank
        return "=" if delta == 0 else (f"↑{delta}" if delta > 0 else f"↓{-delta}")

    @property
    def judged(self) -> bool:
        return self.qrel is not None or self.user_label is not None


@dataclass
class SystemResult:
    choice: SystemChoice
    ranking: Ranking | None = None
    hits: list[Hit] = field(default_factory=list)
    error: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    recall_vs_exact: float | None = None  # ANN/tree top-k recall against exact search of the same model
    not_ready: bool = False  # the error is a normal state (building, queued, a fixed run and a typed query)

    @property
    def ok(self) -> bool:
        return self.ranking is not None and not self.error


@dataclass
class Comparison:
    query: str
    query_id: str | None
    k: int
    baseline: str | None
    results: list[SystemResult]
    overlap: dict[tuple[str, str], float]
    rbo: dict[tuple[str, str], float]
    known_paraphrases: list[str]


def rank_biased_overlap(a: list[str], b: list[str], p: float = 0.9) -> float:
    """Extrapolated RBO (Webber, Moffat & Zobel 2010, Eq. 32) of two top-k lists.

    Written here because the PyPI ``rbo`` package pins numpy < 2 (it would downgrade the stack).
    """
    k = min(len(a), len(b))
    if k == 0:
        return 1.0 if not a and not b else 0.0
    seen_a, seen_b, overlap, total = set(), set(), 0, 0.0
    for d in range(1, k + 1):
        x, y = a[d - 1], b[d - 1]
        if x == y:
            overlap += 1
        else:
            overlap += (x in seen_b) + (y in seen_a)
        seen_a.add(x)
        seen_b.add(y)
        total += (overlap / d) * p**d
    return float((1 - p) / p * total + (overlap / k) * p**k)


def overlap_at_k(a: list[str], b: list[str]) -> float:
    k = max(len(a), len(b))
    return len(set(a) & set(b)) / k if k else 1.0


EXACT_INDEXES = ("auto", "flat")  # "auto": exact below 1M vectors (every system's serving default)


def exact_choice(choice: SystemChoice) -> SystemChoice | None:
    """The exact-search counterpart of an approximate choice (None if it is exact already)."""
    options = dict(choice.options)
    if choice.first_stage:
        return None
    if "@" in choice.name:  # a model trained elsewhere takes no index knob
        return None
    try:
        spec = get_spec(choice.name)
    except StudioError:
        return None
    if spec.exact_reference:  # an approximate search over another system's vectors (the tree: minilm's)
        return SystemChoice(spec.exact_reference, None, options=(("index", "flat"),))
    if spec.ann_indexable and options.get("index", "auto") not in EXACT_INDEXES:
        return SystemChoice(choice.name, choice.variant, options=(("index", "flat"),))
    return None


def compare(
    dataset: Dataset,
    query: str,
    choices: list[SystemChoice],
    load: Callable[[str, str | None, tuple], object],
    k: int = 10,
    query_id: str | None = None,
    baseline: str | None = None,
    user_labels: Mapping[str, int] | None = None,
    metrics: bool = True,
) -> Comparison:
    """Run every chosen system on ``query`` and annotate the hits (see module docstring).

    ``load(name, variant, options)`` returns a loaded system (the page passes its cached loader); every
    ranking comes from the one runner (``core.serving.runner.rank_one``), as in the CLI and the evaluation.
    A system that fails (not built, bad option) gets an ``error`` and the others still run. ``metrics``: False
    leaves the per-query metrics out (a page whose evaluation is still compiling in the background).
    """
    query = validate_query(query)
    if query_id is not None and query_id not in dataset.queries and query_id not in dataset.corpus:
        query_id = None
    # a dataset query shown in its display form ranks with its stored text, exactly as the CLI and the
    # evaluation rank it (the one text pipeline gives both forms the same tokens for nearly every QQP question:
    # bench/reports/text_pipeline.json)
    text = dataset.queries[query_id] if query_id in dataset.queries and query == dataset.display_query(query_id) else query
    results: list[SystemResult] = []
    for choice in choices:
        try:
            result = SystemResult(choice, rank_one(choice, dataset, text, k, query_id, load))
        except StudioError as exc:
            results.append(SystemResult(choice, error=str(exc), not_ready=isinstance(exc, NotReadyError)))
            continue
        exact = exact_choice(choice)
        if exact is not None:
            try:
                reference = rank_one(exact, dataset, text, k, query_id, load).doc_ids[:k]
                found = set(result.ranking.doc_ids[:k]) & set(reference)
                result.recall_vs_exact = len(found) / max(1, len(reference))
            except StudioError:
                result.recall_vs_exact = None
        results.append(result)
    ok = [r for r in results if r.ok]
    tops = {r.choice.label: r.ranking.doc_ids[:k] for r in ok}
    base_top = tops.get(baseline or "", [])
    base_rank = {d: i + 1 for i, d in enumerate(base_top)}
    counts: dict[str, int] = {}
    for ids in tops.values():
        for d in ids:
            counts[d] = counts.get(d, 0) + 1
    qrels = dataset.qrels.get(query_id, {}) if query_id else {}
    labels = user_labels or {}
    for r in ok:
        r.hits = [
            Hit(i + 1, d, dataset.display(d), float(s),
                qrels.get(d), labels.get(d), base_rank.get(d) if baseline else None, counts[d])
            for i, (d, s) in enumerate(zip(r.ranking.doc_ids[:k], r.ranking.scores[:k]))
        ]
        if qrels and metrics:
            r.metrics = evaluate_run({"q": qrels}, {"q": r.ranking}, QUERY_METRICS)
    pairs = list(combinations(tops, 2))
    return Comparison(
        query=query,
        query_id=query_id,
        k=k,
        baseline=baseline,
        results=results,
        overlap={(a, b): overlap_at_k(tops[a], tops[b]) for a, b in pairs},
        rbo={(a, b): rank_biased_overlap(tops[a], tops[b]) for a, b in pairs},
        known_paraphrases=[dataset.display(d) for d in qrels if qrels[d] > 0],
    )


def pooled_ids(comparison: Comparison) -> dict[str, list[str]]:
    """System label -> its top-k ids: the pool the Annotate page judges ("judge these")."""
    return {r.choice.label: r.ranking.doc_ids[: comparison.k] for r in comparison.results if r.ok}
