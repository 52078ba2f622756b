"""The evaluation contract (``evaluate_contract``): both conventions, counts and the tie rule, equal to trec_eval
to 1e-4 (tests/test_evaluation_contract.py uses pytrec_eval as the oracle). Metric names, the ranx wrappers and
the tie order are ``core.evaluation``'s.

- Query set: ``queries`` if given, else every query of the qrels. A query is *unanswerable* when
  its qrels hold no label > 0 (or it has no qrels); it scores 0 on every metric, as trec_eval
  scores a judged query with no relevant document. A query the run misses scores 0 (trec_eval -c).
- Two conventions, both always computed: ``all`` = mean over every evaluated query;
  ``answerable`` = mean over the answerable ones. ``headline_convention``: answerable-only for
  candidate-list / answer-selection data (WikiQA, TrecQA papers), ``all`` for collections (QQP).
- Ties: ``core.evaluation.TIE_RULES`` (``trec_eval`` by default), imposed by re-scoring before ranx sees the run.
- Names (ranx -> trec_eval): ``map@k`` -> ``map_cut_k``, ``mrr@k`` -> ``recip_rank`` on the run
  cut at k, ``precision@k`` -> ``P_k``, ``ndcg@k`` -> ``ndcg_cut_k`` (both linear gain),
  ``recall@k`` -> ``recall_k``, ``hit_rate@k`` -> ``success_k``.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ranx import evaluate

from core.errors import StudioError, UnknownNameError
from core.evaluation import (
    DEFAULT_METRICS, DEFAULT_TIES, TIE_RULES, RunLike, check_metrics, mean_or_nan, ordered_ids, run_in_order, short,
    to_qrels,
)

CONVENTIONS = ("answerable", "all")
_TREC_EVAL_NAMES = {"map": "map_cut", "precision": "P", "ndcg": "ndcg_cut", "recall": "recall", "hit_rate": "success"}


def headline_convention(candidates: bool) -> str:
    """The convention a dataset kind publishes: ``"answerable"`` for candidate lists, else ``"all"``.

    Candidate-list / answer-selection data (TrecQA, WikiQA) report the mean over questions that have a
    correct candidate (WikiQA: 243 of 633 test questions; TrecQA *clean*: questions with only positive
    or only negative candidates removed). Collections such as QQP, where every query has a
    paraphrase, report the mean over all queries (the two conventions then coincide).

    Severyn & Moschitti (SIGIR'15) §5.1 score the raw TrecQA TEST (100 questions, 1,517 pairs) with
    "the official trec_eval scorer" and say nothing else about questions without a correct answer.
    trec_eval averages over every query present in both the qrels and the run; a query whose labels
    are all 0 is scored 0 and counted. Their released code (aseveryn/deep-qa ``run_nnet.py``, with
    trec_eval 8.0) writes every candidate with its 0/1 label as the qrels, so their MAP/MRR are this
    module's ``all`` convention over the 95 questions that have candidates (the 6 without a correct
    answer score 0, the 21 with only correct ones are kept): compare with their numbers through ``all``.
    """
    return "answerable" if candidates else "all"


def trec_eval_name(metric: str) -> str:
    """The trec_eval measure equal to a ranx metric (``mrr@k``: ``recip_rank`` on the run cut at k)."""
    (metric,) = check_metrics([metric])
    base, _, cutoff = metric.partition("@")
    if base == "mrr":
        return "recip_rank"
    if base in ("map", "ndcg") and not cutoff:
        return base
    if base not in _TREC_EVAL_NAMES or not cutoff:
        raise UnknownNameError("metric with a trec_eval counterpart", metric, [f"{k}@K" for k in _TREC_EVAL_NAMES] + ["mrr@K"])
    return f"{_TREC_EVAL_NAMES[base]}_{cutoff}"


@dataclass(frozen=True)
class Evaluation:
    """Both conventions for one run: ``all`` (unanswerable queries scored 0) and ``answerable``.

    ``per_query`` maps metric -> query id -> value for every evaluated query (unanswerable ones 0).
    ``n_all_relevant``: answerable queries whose every retrieved item is relevant (on candidate
    data: questions with only correct candidates). ``n_missing``: evaluated queries the run misses.
    """

    metrics: tuple[str, ...]
    all: dict[str, float]
    answerable: dict[str, float]
    n_queries: int
    n_answerable: int
    n_unanswerable: int
    n_all_relevant: int
    n_missing: int
    ties: str
    headline: str
    unanswerable: tuple[str, ...] = ()
    per_query: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)

    @property
    def headline_values(self) -> dict[str, float]:
        return self.answerable if self.headline == "answerable" else self.all

    def describe(self) -> str:
        """Two lines: the headline numbers with their query count, the other convention, the tie rule."""
        def values(d: dict[str, float]) -> str:
            return ", ".join(f"{short(m)} {d[m]:.4f}" for m in self.metrics)

        answerable = f"{values(self.answerable)} over {self.n_answerable} answerable queries"
        every = f"{values(self.all)} over all {self.n_queries} with {self.n_unanswerable} unanswerable scored 0"
        if self.n_unanswerable == 0:
            first = f"{values(self.all)} over all {self.n_queries} queries (every query has a relevant item)"
        elif self.headline == "answerable":
            first = f"{answerable} (headline); {every}"
        else:
            first = f"{every} (headline); {answerable}"
        extra = [f"{self.n_missing} missed by the run (scored 0)"] if self.n_missing else []
        extra += [f"{self.n_all_relevant} with every retrieved item relevant"] if self.n_all_relevant else []
        return first + "\n" + "; ".join([f"ties: {TIE_RULES[self.ties]}"] + extra)

    def to_dict(self, per_query: bool = False) -> dict:
        """JSON-ready: both conventions (NaN as None), counts, tie rule, headline."""
        def clean(d: dict[str, float]) -> dict[str, float | None]:
            return {m: None if math.isnan(v) else v for m, v in d.items()}

        out = {
            "metrics": list(self.metrics), "headline": self.headline, "ties": self.ties,
            "tie_rule": TIE_RULES[self.ties], "all": clean(self.all), "answerable": clean(self.answerable),
            "n_queries": self.n_queries, "n_answerable": self.n_answerable,
            "n_unanswerable": self.n_unanswerable, "n_all_relevant": self.n_all_relevant,
            "n_missing": self.n_missing, "unanswerable": list(self.unanswerable),
        }
        if per_query:
            out["per_query"] = self.per_query
        return out


def evaluate_contract(
    qrels: Mapping[str, Mapping[str, int]],
    run: RunLike,
    metrics: list[str] | tuple[str, ...] = DEFAULT_METRICS,
    queries: Iterable[str] | None = None,
    ties: str = DEFAULT_TIES,
    candidates: bool = False,
) -> Evaluation:
    """Evaluate ``run`` under the contract (module docstring): both conventions, counts, tie rule.

    ``queries``: the evaluated query set (default: every query of ``qrels``); run queries outside it
    are ignored. ``candidates``: candidate-list data, which picks the headline (``headline_convention``).
    """
    metrics = tuple(check_metrics(metrics))
    evaluated = list(dict.fromkeys(qrels if queries is None else queries))
    if not evaluated:
        raise StudioError("no queries to evaluate: the qrels (or the given query set) are empty")
    answerable = [q for q in evaluated if any(v > 0 for v in qrels.get(q, {}).values())]
    ordered = ordered_ids(run, ties)
    ranked = [q for q in answerable if ordered.get(q)]
    per = {m: dict.fromkeys(evaluated, 0.0) for m in metrics}
    if ranked:
        run_obj = run_in_order({q: ordered[q] for q in ranked})
        evaluate(to_qrels({q: qrels[q] for q in ranked}), run_obj, list(metrics), return_mean=False)
        for m in metrics:
            per[m].update({q: float(v) for q, v in run_obj.scores[m].items()})
    answerable_set = set(answerable)
    all_relevant = sum(1 for q in ranked if all(qrels[q].get(d, 0) > 0 for d in ordered[q]))
    return Evaluation(
        metrics=metrics,
        all={m: mean_or_nan(per[m].values()) for m in metrics},
        answerable={m: mean_or_nan(per[m][q] for q in answerable) for m in metrics},
        n_queries=len(evaluated),
        n_answerable=len(answerable),
        n_unanswerable=len(evaluated) - len(answerable),
        n_all_relevant=all_relevant,
        n_missing=sum(1 for q in evaluated if not ordered.get(q)),
        ties=ties,
        headline=headline_convention(candidates),
        unanswerable=tuple(q for q in evaluated if q not in answerable_set),
        per_query=per,
    )
