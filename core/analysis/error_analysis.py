"""Error analysis: label sources, significance with Holm correction, per-query deltas, buckets, imports.

Label source (``LABEL_SOURCES``)
- ``dataset``: the dataset's qrels; negative labelled pairs (label 0) count as judged, not relevant.
- ``judgments``: the user judgments of the store (several annotators on one pair: majority vote,
  ties -> the most recent label).
- ``both``: the union; **a user judgment wins** over the dataset label for the same (query, doc).
Only queries with at least one relevant (label > 0) item are evaluated (ranx would otherwise average
in zeros for queries nothing could answer). Metrics and tests are ranx's (``core.evaluation``):
paired Student's t-test (``student``, ranx) or Fisher's randomization test (``fisher``, 1000
permutations, seed 42; ranx's statistic with a seeded generator, see ``randomization_test``); the
p-values of the systems against the baseline are Holm-corrected per metric.

Buckets
- Jaccard (frm-multiview-chong.md §4.2): a labelled *pair* is hard when a positive has word Jaccard
  in [0, 0.2] or a negative in [0.7, 1]; easy when a positive is in [0.7, 1] or a negative in
  [0, 0.2]; middle otherwise. A *query* is hard when all its positives are hard, easy when all are
  easy, middle otherwise (the paper buckets pairs; per-query metrics need the query lifted).
- Query length in words (``core.data.pipeline.terms``).
"""
from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
from ranx import Run

from core.analysis.significance import holm, randomization_test
from core.data.datasets import Dataset
from core.errors import DataFormatError, StudioError, UnknownNameError
from core.analysis import LABEL_SOURCES
from core.evaluation import DEFAULT_TIES, TIE_RULES, check_metrics, per_query_metrics, read_trec_run, to_run
from core.paths import artifact_dir
from core.registry import default_first_stage, get_spec, rerank_depth
from core.retrieval.base import ProgressFn, Ranking, no_progress
from core.serving.runner import Loader, SystemChoice, loader_for, rank_many
from core.data.pipeline import terms

PRECEDENCE = "user judgments win over dataset qrels for the same (query, doc)"
ANALYSIS_METRICS = ("ndcg@10", "mrr@100", "map@100", "precision@1", "hit_rate@10")  # what Error Analysis opens with:
# five of core.evaluation.DEFAULT_METRICS (the CLI's eval and Compare report all of those)
LENGTH_BINS = ((1, 5), (6, 10), (11, 15), (16, 20), (21, 10**9))
TIE_TOLERANCE = 1e-9

Qrels = dict[str, dict[str, int]]


class LabelStore(Protocol):
    """What error analysis reads from a judgments store (``core.judging.judgments.JudgmentStore`` is one);
    the store is passed in, so analysis does not depend on the judging layer above it."""

    def qrels(self, dataset: str, annotators: Sequence[str] | None = None,
              resolve: str = "majority") -> dict[str, dict[str, int]]: ...

    def query_texts(self, dataset: str) -> dict[str, str]: ...


# ----------------------------------------------------------------------------- labels
@dataclass
class LabelSet:
    """Labels for evaluation: ``qrels`` (queries with a relevant item), ``judged`` (every label,
    including negatives, for unjudged rates), query texts, and the source name."""

    source: str
    qrels: Qrels
    judged: Qrels
    queries: dict[str, str]


def merge_qrels(dataset_qrels: Mapping[str, Mapping[str, int]], user_qrels: Mapping[str, Mapping[str, int]]) -> Qrels:
    """Union of two label sets; the user label wins for a pair present in both (``PRECEDENCE``)."""
    out: Qrels = {q: dict(v) for q, v in dataset_qrels.items()}
    for q, docs in user_qrels.items():
        out.setdefault(q, {}).update(docs)
    return out


def dataset_labels(dataset: Dataset, split: str = "all") -> tuple[Qrels, dict[str, str]]:
    """Dataset qrels of a split plus its negative pairs as explicit 0 labels; query texts."""
    queries = dataset.split_queries(split)
    labels: Qrels = {q: dict(dataset.qrels.get(q, {})) for q in queries}
    for pair in dataset.pairs.get("all", []):
        if pair.label == 0:
            for a, b in ((pair.id1, pair.id2), (pair.id2, pair.id1)):
                if a in labels:
                    labels[a].setdefault(b, 0)
    return labels, queries


def qrels_label_set(dataset: Dataset, qrels: Mapping[str, Mapping[str, int]], source: str,
                    texts: Mapping[str, str] | None = None) -> LabelSet:
    """Labels from outside qrels (a judging campaign's export under its rule): judged pairs as given, queries
    with a relevant item scored; query texts from the dataset, else ``texts``."""
    judged = {q: dict(v) for q, v in qrels.items() if v}
    queries = {q: dataset.queries.get(q) or (texts or {}).get(q, "") for q in judged}
    rel = {q: v for q, v in judged.items() if any(label > 0 for label in v.values()) and queries.get(q)}
    return LabelSet(source, rel, judged, {q: queries[q] for q in rel})


def label_set(
    dataset: Dataset,
    store: LabelStore | None,
    source: str = "both",
    split: str = "all",
    annotators: Sequence[str] | None = None,
    resolve: str = "majority",
) -> LabelSet:
    """Build the labels of one source (see module docstring for the precedence)."""
    if source not in LABEL_SOURCES:
        raise UnknownNameError("label source", source, list(LABEL_SOURCES))
    judged: Qrels = {}
    queries: dict[str, str] = {}
    if source in ("dataset", "both"):
        judged, queries = dataset_labels(dataset, split)
    if source in ("judgments", "both") and store is not None:
        user = store.qrels(dataset.name, annotators, resolve)
        texts = store.query_texts(dataset.name)
        judged = merge_qrels(judged, user)
        for q in user:
            queries.setdefault(q, dataset.queries.get(q, texts.get(q, "")))
    qrels = {q: dict(v) for q, v in judged.items() if any(label > 0 for label in v.values()) and queries.get(q)}
    return LabelSet(source, qrels, {q: v for q, v in judged.items() if v}, {q: queries[q] for q in qrels})


# ----------------------------------------------------------------------------- runs
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


# ----------------------------------------------------------------------------- unjudged
@dataclass(frozen=True)
class UnjudgedRate:
    """Share of a system's top-k items that carry no label in the chosen source."""

    system: str
    k: int
    retrieved: int
    unjudged: int

    @property
    def rate(self) -> float:
        return self.unjudged / self.retrieved if self.retrieved else 0.0


def unjudged_rate(run: Run, judged: Mapping[str, Mapping[str, int]], k: int = 10,
                  queries: Sequence[str] | None = None) -> UnjudgedRate:
    """How many of the run's top-k items (over ``queries``, default all) have no label."""
    data = run.to_dict()
    retrieved = unjudged = 0
    for q in queries if queries is not None else list(data):
        top = sorted(data.get(q, {}).items(), key=lambda kv: (-kv[1], kv[0]))[:k]
        labels = judged.get(q, {})
        retrieved += len(top)
        unjudged += sum(d not in labels for d, _ in top)
    return UnjudgedRate(run.name, k, retrieved, unjudged)


def most_unjudged(runs: Sequence[Run], judged: Mapping[str, Mapping[str, int]], k: int = 10,
                  limit: int = 20) -> list[tuple[str, int, dict[str, list[str]]]]:
    """Queries with the most unlabelled items in the systems' pooled top-k: (qid, count, pool)."""
    datas = {r.name: r.to_dict() for r in runs}
    qids = sorted({q for d in datas.values() for q in d})
    out = []
    for q in qids:
        pool = {name: [d for d, _ in sorted(data.get(q, {}).items(), key=lambda kv: (-kv[1], kv[0]))[:k]]
                for name, data in datas.items()}
        missing = {d for ids in pool.values() for d in ids if d not in judged.get(q, {})}
        if missing:
            out.append((q, len(missing), pool))
    out.sort(key=lambda t: (-t[1], t[0]))
    return out[:limit]


# ----------------------------------------------------------------------------- buckets
def jaccard(a: str, b: str) -> float:
    """Word-set Jaccard similarity (``core.data.pipeline.terms``); 0 for two empty texts."""
    sa, sb = set(terms(a)), set(terms(b))
    union = sa | sb
    return len(sa & sb) / len(union) if union else 0.0


def pair_bucket(similarity: float, relevant: bool) -> str:
    """frm-multiview-chong.md §4.2: hard / easy / middle for one labelled pair."""
    low, high = similarity <= 0.2, similarity >= 0.7
    if relevant:
        return "hard" if low else "easy" if high else "middle"
    return "hard" if high else "easy" if low else "middle"


def query_buckets(qrels: Mapping[str, Mapping[str, int]], queries: Mapping[str, str],
                  corpus: Mapping[str, str]) -> dict[str, str]:
    """Query -> bucket from its positives: all hard -> hard, all easy -> easy, else middle."""
    out = {}
    for q, docs in qrels.items():
        buckets = {pair_bucket(jaccard(queries[q], corpus[d]), True) for d, label in docs.items()
                   if label > 0 and d in corpus}
        if buckets:
            out[q] = buckets.pop() if len(buckets) == 1 and buckets <= {"hard", "easy"} else "middle"
    return out


def pair_bucket_counts(judged: Mapping[str, Mapping[str, int]], queries: Mapping[str, str],
                       corpus: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """Labelled pairs per bucket, split into positives and negatives."""
    out = {b: {"positive": 0, "negative": 0} for b in ("hard", "middle", "easy")}
    for q, docs in judged.items():
        if q not in queries:
            continue
        for d, label in docs.items():
            if d in corpus:
                out[pair_bucket(jaccard(queries[q], corpus[d]), label > 0)]["positive" if label > 0 else "negative"] += 1
    return out


def length_bucket(text: str) -> str:
    """Query length bin in words (``LENGTH_BINS``)."""
    n = len(terms(text))
    for lo, hi in LENGTH_BINS:
        if lo <= n <= hi:
            return f"{lo}-{hi}" if hi < 10**9 else f"{lo}+"
    return "0"


def metric_by_group(analysis: Analysis, metric: str, groups: Mapping[str, str],
                    order: Sequence[str] | None = None) -> list[dict]:
    """Mean per-query metric of every system within each group: rows {group, queries, system...}."""
    values = analysis.per_query[metric]
    names = list(order) if order is not None else sorted(set(groups.values()))
    rows = []
    for g in names:
        qids = [q for q in values[analysis.baseline] if groups.get(q) == g]
        if not qids:
            continue
        row: dict = {"group": g, "queries": len(qids)}
        for s in analysis.systems:
            row[s] = float(np.mean([values[s].get(q, 0.0) for q in qids]))
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- export
def rows_to_csv(rows: Sequence[Mapping]) -> str:
    """CSV text of a list of dicts (columns in first-seen order)."""
    cols: list[str] = []
    for r in rows:
        cols.extend(c for c in r if c not in cols)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols)
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


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
