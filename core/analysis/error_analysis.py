"""Error analysis: systems against a baseline with Holm-corrected significance, per-query deltas, exports.

Labels come from ``core.analysis.label_sources``, the runs from ``core.analysis.compared_runs``; unjudged
items and query buckets are ``core.analysis.error_buckets``.

Only queries with at least one relevant (label > 0) item are evaluated (ranx would otherwise average
in zeros for queries nothing could answer). Metrics and tests are ranx's (``core.evaluation``):
paired Student's t-test (``student``, ranx) or Fisher's randomization test (``fisher``, 1000
permutations, seed 42; ranx's statistic with a seeded generator, see ``randomization_test``); the
p-values of the systems against the baseline are Holm-corrected per metric.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from ranx import Run

from core.analysis.label_sources import LabelSet, label_set
from core.analysis.significance import holm, randomization_test
from core.data.cells import csv_text
from core.data.datasets import Dataset
from core.errors import StudioError, UnknownNameError
from core.evaluation import DEFAULT_TIES, TIE_RULES, check_metrics, per_query_metrics

ANALYSIS_METRICS = ("ndcg@10", "mrr@100", "map@100", "precision@1", "hit_rate@10")  # what Error Analysis opens with:
# five of core.evaluation.DEFAULT_METRICS (the CLI's eval and Compare report all of those)
TIE_TOLERANCE = 1e-9


@dataclass
class Analysis:
    """Everything the Error Analysis page and ``python -m core compare`` show."""

    systems: list[str]
    baseline: str
    metrics: list[str]
    stat_test: str
    label_source: str
    queries: int
    scores: dict[str, dict[str, float]]  # system -> metric -> mean
    pvalues: dict[str, dict[str, float]]  # system -> metric -> p vs baseline
    holm: dict[str, dict[str, float]]  # system -> metric -> Holm-adjusted p
    win_tie_loss: dict[str, dict[str, dict[str, int]]]  # system -> metric -> W/T/L vs baseline
    per_query: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # metric -> system -> q -> v
    max_p: float = 0.05
    ties: str = DEFAULT_TIES  # the tie rule the per-query values were computed under (``core.evaluation``)

    @property
    def tie_rule(self) -> str:
        return TIE_RULES[self.ties]

    def table(self) -> list[dict]:
        """One row per system: metric means, p, Holm p, significance and W/T/L vs the baseline."""
        rows = []
        for s in self.systems:
            row: dict = {"system": s}
            for m in self.metrics:
                row[m] = self.scores[s][m]
            for m in self.metrics:
                if s == self.baseline:
                    row[f"{m} p"] = row[f"{m} p (Holm)"] = None
                    row[f"{m} W/T/L"] = ""
                else:
                    row[f"{m} p"] = self.pvalues[s][m]
                    row[f"{m} p (Holm)"] = self.holm[s][m]
                    wtl = self.win_tie_loss[s][m]
                    row[f"{m} W/T/L"] = f"{wtl['W']}/{wtl['T']}/{wtl['L']}"
            rows.append(row)
        return rows

    def display_table(self) -> list[dict]:
        """``table()`` for people: p-values formatted (``format_p``), the baseline row says "baseline" where
        a test against itself has no value (no empty or "None" cells)."""
        rows = []
        for row in self.table():
            out = {}
            for key, value in row.items():
                if key.endswith(" p") or key.endswith(" p (Holm)"):
                    out[key] = "baseline" if row["system"] == self.baseline else format_p(value)
                elif key.endswith(" W/T/L") and row["system"] == self.baseline:
                    out[key] = "baseline"
                else:
                    out[key] = value
            rows.append(out)
        return rows

    def to_dict(self) -> dict:
        """JSON-ready summary (no per-query values)."""
        return {
            "label_source": self.label_source, "queries": self.queries, "baseline": self.baseline,
            "stat_test": self.stat_test, "metrics": self.metrics, "ties": self.ties, "tie_rule": self.tie_rule,
            "table": self.table(),
        }


def analyze(
    labels: LabelSet,
    runs: Sequence[Run],
    baseline: str | None = None,
    metrics: Sequence[str] = ANALYSIS_METRICS,
    stat_test: str = "student",
    max_p: float = 0.05,
    ties: str = DEFAULT_TIES,
) -> Analysis:
    """ranx comparison of ``runs`` on ``labels.qrels`` with Holm-corrected tests against ``baseline``; score ties
    broken by the evaluation contract's rule ``ties`` (``core.evaluation.TIE_RULES``)."""
    if not runs:
        raise StudioError("pick at least one system or run")
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise StudioError(f"two runs share a name: {names}")
    checked = check_metrics(list(metrics))
    values = {r.name: per_query_metrics(labels.qrels, r, checked, ties) for r in runs} if labels.qrels else {}
    return analysis_from_values(labels, names, values, baseline, checked, stat_test, max_p, ties)


def analysis_from_values(
    labels: LabelSet,
    names: Sequence[str],
    values: Mapping[str, Mapping[str, Mapping[str, float]]],
    baseline: str | None = None,
    metrics: Sequence[str] = ANALYSIS_METRICS,
    stat_test: str = "student",
    max_p: float = 0.05,
    ties: str = DEFAULT_TIES,
) -> Analysis:
    """The same comparison from per-query metric values already computed (``values``: system -> metric ->
    query -> value, from ``core.evaluation.per_query_metrics`` under the tie rule ``ties``), so a page can keep them per run fingerprint and
    never recompute what a widget does not change. The paired t-test is ranx's own (``paired_student_t_test``,
    scipy's ``ttest_rel``) over the same per-query values ranx's ``compare`` would pair."""
    from ranx.statistical_tests import paired_student_t_test

    if not names:
        raise StudioError("pick at least one system or run")
    if not labels.qrels:
        raise StudioError(f"no query has a relevant label in the '{labels.source}' label source")
    if stat_test not in ("student", "fisher"):
        raise UnknownNameError("statistical test", stat_test, ["student", "fisher"])
    if len(set(names)) != len(names):
        raise StudioError(f"two runs share a name: {list(names)}")
    baseline = baseline or names[0]
    if baseline not in names:
        raise UnknownNameError("baseline", baseline, list(names))
    metrics = check_metrics(list(metrics))
    ordered = [baseline] + [n for n in names if n != baseline]
    qids = list(labels.qrels)
    pq = {m: {n: {q: float(values[n][m].get(q, 0.0)) for q in qids} for n in ordered} for m in metrics}
    scores = {n: {m: float(np.mean(list(pq[m][n].values()))) for m in metrics} for n in ordered}
    pvalues: dict[str, dict[str, float]] = {}
    wtl: dict[str, dict[str, dict[str, int]]] = {}
    for n in ordered[1:]:
        pvalues[n] = {}
        for m in metrics:
            control = np.array([pq[m][baseline][q] for q in qids])
            treatment = np.array([pq[m][n][q] for q in qids])
            if stat_test == "student":
                p = float(paired_student_t_test(control, treatment, max_p)[0])
            else:
                p = randomization_test(control, treatment)
            # a t-test on identical per-query scores is 0/0: no evidence of a difference, p = 1
            pvalues[n][m] = 1.0 if np.isnan(p) else p
        wtl[n] = {m: win_tie_loss(pq[m][n], pq[m][baseline]) for m in metrics}
    adjusted: dict[str, dict[str, float]] = {s: {} for s in pvalues}
    for m in metrics:
        for s, p in holm({s: pvalues[s][m] for s in pvalues}).items():
            adjusted[s][m] = p
    return Analysis(
        systems=ordered, baseline=baseline, metrics=metrics, stat_test=stat_test,
        label_source=labels.source, queries=len(labels.qrels), scores=scores, pvalues=pvalues, holm=adjusted,
        win_tie_loss=wtl, per_query=pq, max_p=max_p, ties=ties,
    )


P_FLOOR = 1e-10


def format_p(p: float | None) -> str:
    """A p-value as people read it: three decimals down to 0.001, scientific notation below ("7.7e-05"),
    and "< 1e-10" under ``P_FLOOR`` (smaller values are below any test's numeric precision); "—" for none."""
    if p is None or (isinstance(p, float) and np.isnan(p)):
        return "—"
    if p < P_FLOOR:
        return f"< {P_FLOOR:.0e}"
    return f"{p:.3f}" if p >= 1e-3 else f"{p:.1e}"


def win_tie_loss(system: Mapping[str, float], baseline: Mapping[str, float]) -> dict[str, int]:
    """Queries where the system beats / ties / loses to the baseline (|Δ| ≤ 1e-9 is a tie)."""
    out = {"W": 0, "T": 0, "L": 0}
    for q, v in system.items():
        d = v - baseline.get(q, 0.0)
        out["W" if d > TIE_TOLERANCE else "L" if d < -TIE_TOLERANCE else "T"] += 1
    return out


def query_deltas(analysis: Analysis, system: str, metric: str) -> list[tuple[str, float]]:
    """(query id, system − baseline) for every evaluated query, most negative first."""
    sys_v = analysis.per_query[metric][system]
    base = analysis.per_query[metric][analysis.baseline]
    return sorted(((q, sys_v[q] - base.get(q, 0.0)) for q in sys_v), key=lambda t: (t[1], t[0]))


# ----------------------------------------------------------------------------- export
def rows_to_csv(rows: Sequence[Mapping]) -> str:
    """CSV text of a list of dicts (columns in first-seen order), formulas neutralised (``core.data.cells``)."""
    return csv_text(rows)


def per_query_rows(analysis: Analysis, metric: str, queries: Mapping[str, str]) -> list[dict]:
    """One row per query: text, each system's value, each system's delta to the baseline."""
    values = analysis.per_query[metric]
    rows = []
    for q in sorted(values[analysis.baseline]):
        row: dict = {"query_id": q, "query": queries.get(q, "")}
        for s in analysis.systems:
            row[s] = values[s].get(q, 0.0)
        for s in analysis.systems[1:]:
            row[f"{s} - {analysis.baseline}"] = row[s] - row[analysis.baseline]
        rows.append(row)
    return rows


def write_per_query(dataset: Dataset, system: str, variant: str | None = None) -> Path | None:
    """Per-query values of ``ANALYSIS_METRICS`` for a fresh stored run on the labels Error Analysis opens with (the
    dataset's qrels on ``default_split``), through ``core.evaluation.per_query`` (ranx), stamped with the
    run's fingerprint and the labels' digest, so opening the page reads them instead of evaluating."""
    from core.analysis.runs import (STORED_DEPTH, _leaf, _to_run, default_split, fingerprint, labels_digest,
                                    per_query_path, read_run_dict, run_path, run_status)

    if run_status(dataset, system, variant) != "fresh":
        return None
    labels = label_set(dataset, None, "dataset", default_split(dataset))
    if not labels.qrels:
        return None
    data = read_run_dict(run_path(dataset.name, system, variant), list(labels.queries), STORED_DEPTH)
    run = _to_run(data, _leaf(system, variant))
    values = per_query_metrics(labels.qrels, run, ANALYSIS_METRICS, DEFAULT_TIES)
    path = per_query_path(dataset.name, system, variant)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"fingerprint": fingerprint(dataset, system, variant), "labels": labels_digest(labels.qrels),
                               "depth": STORED_DEPTH, "ties": DEFAULT_TIES, "metrics": values}), encoding="utf-8")
    os.replace(tmp, path)
    return path
