"""An automatic judge for a campaign, calibrated against the campaign's own human labels.

A judge is any registered system that the one loader (``core.serving.loader.load``) turns into a pair
scorer (a reranker such as the cross-encoder, FRM, minilm-pairs, a user's own cross-encoder; on a
candidate-list dataset every system). It scores every pooled (query, document) item of the campaign as
the annotators saw it, in batches. Its scores become graded labels through thresholds fitted
(``core.judging.calibration``) on the human reference labels (``adjudicated``: the owner's decision, else
the majority) of a *calibration* split of the labelled queries; agreement is reported on the *report*
split only; a third, human-only *hold-out* split is neither calibrated on nor reported, kept for a later
audit. Judge labels are stored under their own identity ``judge:SYSTEM`` in ``campaign_judge_labels``,
never among human labels.

The report gives, on the report split: Cohen's κ (scikit-learn) and Krippendorff's α (``krippendorff``)
of the judge against the human reference, beside the human–human agreement on the same items (α over
the annotators' ratings, mean pairwise Cohen's κ; and the judge's mean κ against each annotator); the
per-grade confusion matrix (rows human, columns judge); the system ordering the judge induces on the
campaign's pooled systems against the humans' (Kendall τ, scipy; per-query metric by ranx through
``core.evaluation.per_query``) and the share of pairs significantly different under human
labels (paired t-test, p < .05) that stay significant with the same sign under judge labels; and a
circularity warning when the judge and a pooled system share a model family (MiniLM:
``SystemSpec.minilm_derived``), since judges favour systems built like them (Clarke & Dietz 2024).
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from sqlalchemy import select

from core.judging.agreement import campaign_agreement, krippendorff_alpha
from core.judging.calibration import (Thresholds, calibration_split, choose_grade_model, cross_fitted_probs,
                                     fit_thresholds)
from core.judging.campaign_records import CampaignError
from core.judging.campaigns import CampaignStore
from core.judging.schema import CampaignJudgeLabelRow, _now

JUDGE_PREFIX = "judge:"
BATCH = 256
ORDER_METRIC = "ndcg@10"


def judge_identity(system: str) -> str:
    """The annotator identity judge labels are stored under: ``judge:SYSTEM``."""
    return JUDGE_PREFIX + system


@dataclass(frozen=True)
class PoolItem:
    """One pooled item as the annotators saw it, with the systems' hidden ranks."""

    item_id: int
    query_id: str
    query: str
    doc_id: str
    doc_text: str
    systems: dict[str, int]


@dataclass
class JudgeReport:
    """What ``judge_campaign`` measured (see the module docstring)."""

    campaign: str
    judge: str
    identity: str
    items: int
    reference_rule: str
    calibration_queries: list[str]
    report_queries: list[str]
    holdout_queries: list[str]
    thresholds: list[float]
    calibration_kappa: float
    report_items: int
    judge_kappa: float | None
    judge_alpha_nominal: float | None
    judge_alpha_ordinal: float | None
    judge_kappa_vs_annotators: float | None
    human_alpha_nominal: float | None
    human_alpha_ordinal: float | None
    human_kappa_pairs: float | None
    confusion: list[list[int]]
    order_metric: str
    human_order: dict[str, float]
    judge_order: dict[str, float]
    tau: float | None
    significant_pairs: int
    significant_kept: float | None
    circularity: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON form."""
        return asdict(self)


# ----------------------------------------------------------------------------- store access
def pool_items(store: CampaignStore, actor: str, name: str) -> list[PoolItem]:
    """Every pooled item of the campaign in queue order (owners only)."""
    def fn(s, c):
        return [PoolItem(i, qid, row.query_text, doc, row.doc_text, dict(row.systems or {}))
                for i, (qid, doc, row) in store._item_keys(s, c).items()]

    return store._owner_read(actor, name, "run an automatic judge", fn)


def save_judge_labels(store: CampaignStore, actor: str, name: str, identity: str,
                      rows: Sequence[tuple[int, float, int]]) -> int:
    """Store (item id, score, label) under ``identity`` (replacing that judge's earlier labels; owners only)."""
    if not identity.startswith(JUDGE_PREFIX):
        raise CampaignError(f"a judge identity starts with {JUDGE_PREFIX!r}, got {identity!r}")
    actor = store._name(actor)

    def tx() -> int:
        with store.store._write() as s, s.begin():
            c = store._campaign_row(s, name)
            store._require_owner(s, c, actor, "store judge labels")
            keys = store._item_keys(s, c)
            bad = [i for i, _, _ in rows if i not in keys]
            if bad:
                raise CampaignError(f"campaign {name!r} has no item {bad[0]!r}; nothing was changed")
            old = {r.item_id: r for r in s.scalars(select(CampaignJudgeLabelRow).where(
                CampaignJudgeLabelRow.judge == identity, CampaignJudgeLabelRow.item_id.in_(list(keys))))}
            now = _now()
            for item_id, score, label in rows:
                row = old.get(item_id)
                if row is None:
                    s.add(CampaignJudgeLabelRow(item_id=item_id, judge=identity, score=float(score), label=int(label),
                                                created_at=now))
                else:
                    row.score, row.label, row.created_at = float(score), int(label), now
            return len(rows)

    return store.store._run(tx)


def judge_labels(store: CampaignStore, actor: str, name: str, identity: str) -> dict[int, tuple[float, int]]:
    """{item id: (score, label)} stored under ``identity`` (owners only)."""
    def fn(s, c):
        keys = store._item_keys(s, c)
        rows = s.scalars(select(CampaignJudgeLabelRow).where(CampaignJudgeLabelRow.judge == identity,
                                                             CampaignJudgeLabelRow.item_id.in_(list(keys))))
        return {r.item_id: (float(r.score), int(r.label)) for r in rows}

    return store._owner_read(actor, name, "read judge labels", fn)


def judges(store: CampaignStore, actor: str, name: str) -> list[str]:
    """Judge identities with labels on the campaign (owners only)."""
    def fn(s, c):
        keys = store._item_keys(s, c)
        return sorted(set(s.scalars(select(CampaignJudgeLabelRow.judge)
                                    .where(CampaignJudgeLabelRow.item_id.in_(list(keys))))))

    return store._owner_read(actor, name, "read judge labels", fn)


# ----------------------------------------------------------------------------- scoring
def score_items(scorer, items: Sequence[PoolItem], batch: int = BATCH,
                progress: Callable[[float, str], None] | None = None) -> np.ndarray:
    """The judge's score of every item, ``batch`` pairs per ``score_pairs`` call."""
    out = np.zeros(len(items))
    for start in range(0, len(items), batch):
        chunk = items[start:start + batch]
        out[start:start + len(chunk)] = np.asarray(scorer.score_pairs([i.query for i in chunk],
                                                                      [i.doc_text for i in chunk]), dtype=float)
        if progress is not None:
            progress(min(1.0, (start + len(chunk)) / len(items)), f"judged {start + len(chunk):,}/{len(items):,} items")
    return out


def load_judge(system: str, dataset_name: str):
    """The judge as a pair scorer, through the one loader (one line when it cannot score pairs)."""
    from core.serving.candidates import pair_scorer
    from core.data.datasets import load_dataset
    from core.serving.loader import load

    dataset = load_dataset(dataset_name)
    return pair_scorer(load(system, dataset), dataset, system)


def circularity(judge: str, systems: Sequence[str]) -> list[str]:
    """Warnings for pooled systems of the judge's model family (MiniLM; ``SystemSpec.minilm_derived``)."""
    from core.registry import get_spec, parse_name

    def derived(name: str) -> bool:
        try:
            return get_spec(parse_name(name).system).minilm_derived
        except Exception:  # a name the registry does not know (a run file): no family to compare
            return False

    if not derived(judge):
        return []
    return [f"{s}: the judge {judge} and this system are both built on all-MiniLM-L6-v2; judges favour systems "
            "built like them, so its judge-only numbers may be inflated (compare with the human-only hold-out)"
            for s in systems if derived(s)]


# ----------------------------------------------------------------------------- the report
def _runs(items: Sequence[PoolItem]) -> dict[str, dict[str, dict[str, float]]]:
    runs: dict[str, dict[str, dict[str, float]]] = {}
    for it in items:
        for system, rank in it.systems.items():
            runs.setdefault(system, {}).setdefault(it.query_id, {})[it.doc_id] = 1.0 / max(1, int(rank))
    return runs


def system_values(items: Sequence[PoolItem], qrels: Mapping[str, Mapping[str, int]], queries: Sequence[str],
                  metric: str = ORDER_METRIC) -> dict[str, np.ndarray]:
    """Per system, the per-query ``metric`` over ``queries`` of its pooled ranking (0 where no label > 0)."""
    from ranx import Run

    from core.evaluation import per_query

    out = {}
    for system, run in sorted(_runs(items).items()):
        judged = {q: dict(qrels.get(q, {})) for q in queries if any(v > 0 for v in qrels.get(q, {}).values())}
        values = per_query(judged, Run.from_dict({q: run.get(q, {}) for q in queries if run.get(q)}), metric) \
            if judged else {}
        out[system] = np.array([values.get(q, 0.0) for q in queries])
    return out


def _tau(a: Sequence[float], b: Sequence[float]) -> float | None:
    if len(a) < 2:
        return None
    tau = stats.kendalltau(a, b).statistic
    return float(tau) if np.isfinite(tau) else None


def _kappa(a: Sequence[int], b: Sequence[int], grades: list[int]) -> float | None:
    if not a or len(set(a) | set(b)) < 2:
        return None
    value = cohen_kappa_score(list(a), list(b), labels=grades)
    return None if np.isnan(value) else float(value)


def judge_splits(labelled: Sequence[str], calibration_share: float = 0.5, holdout_share: float = 0.2,
                 seed: int = 0) -> tuple[list[str], list[str], list[str]]:
    """(calibration, report, hold-out) query ids of the human-labelled queries (seeded, order-free)."""
    rest, holdout = calibration_split(labelled, 1 - holdout_share, seed) if holdout_share > 0 else (list(labelled), [])
    if len(rest) < 2:
        return list(rest), [], list(holdout)
    calib, report_q = calibration_split(rest, calibration_share, seed + 1)
    return calib, report_q, holdout


@dataclass(frozen=True)
class SoftJudge:
    """A stored judge as grade probabilities: P(g | item) per query and item, fitted on ``calibration``."""

    identity: str
    grade_probs: dict[str, dict[str, list[float]]]
    calibration: list[str]
    calibration_items: int
    max_label: int
    features: str = "score"  # the calibration's inputs: "score" or "score+query" (calibration.CalibrationChoice)
    # P(g | item) of the calibration items, each from a model fitted on the other calibration queries
    # (calibration.cross_fitted_probs): how PPI learns how far the judge under-predicts its own error
    calibration_probs: dict[str, dict[str, list[float]]] = field(default_factory=dict)


def soft_judge(store: CampaignStore, actor: str, name: str, identity: str, rule: str = "adjudicated") -> SoftJudge:
    """The judge ``identity``'s stored scores turned into P(g | item) (``calibration.choose_grade_model``: the
    score alone or with its place among the query's items, whichever predicts better in folds), fitted on
    the human labels of the calibration split of the queries humans have labelled so far (``judge_splits``,
    as ``judge_campaign`` splits them); with no calibration labels yet, the judge's stored grade is taken as
    certain."""
    campaign = store.campaign(name)
    items = pool_items(store, actor, name)
    stored = judge_labels(store, actor, name, identity)
    reference, _ = store.qrels(actor, name, rule)
    labelled = sorted(q for q, rel in reference.items() if rel)
    calib = judge_splits(labelled)[0] if len(labelled) >= 3 else []
    calib_items = [it for it in items
                   if it.item_id in stored and it.query_id in calib and it.doc_id in reference.get(it.query_id, {})]
    pairs = [(stored[it.item_id][0], reference[it.query_id][it.doc_id], it.query_id) for it in calib_items]
    grades = range(campaign.max_label + 1)
    choice = choose_grade_model([s for s, _, _ in pairs], [y for _, y, _ in pairs], campaign.max_label,
                                [q for _, _, q in pairs]) if pairs else None
    model = choice.model if choice is not None else None
    probs: dict[str, dict[str, list[float]]] = {}
    scored = [it for it in items if it.item_id in stored]
    rows = (model([stored[it.item_id][0] for it in scored], [it.query_id for it in scored])
            if model is not None and scored else None)
    for k, it in enumerate(scored):
        row = rows[k].tolist() if rows is not None else [float(g == stored[it.item_id][1]) for g in grades]
        probs.setdefault(it.query_id, {})[it.doc_id] = row
    held_out: dict[str, dict[str, list[float]]] = {}
    if len({q for _, _, q in pairs}) >= 2:
        rows_cf = cross_fitted_probs([s for s, _, _ in pairs], [y for _, y, _ in pairs], campaign.max_label,
                                     [q for _, _, q in pairs])
        for it, row in zip(calib_items, rows_cf):
            held_out.setdefault(it.query_id, {})[it.doc_id] = row.tolist()
    return SoftJudge(identity, probs, calib if pairs else [], len(pairs), campaign.max_label,
                     choice.features if choice is not None else "score", held_out)


def judge_campaign(store: CampaignStore, actor: str, name: str, judge: str, *, scorer=None, rule: str = "adjudicated",
                   calibration_share: float = 0.5, holdout_share: float = 0.2, seed: int = 0,
                   metric: str = ORDER_METRIC, batch: int = BATCH,
                   progress: Callable[[float, str], None] | None = None) -> JudgeReport:
    """Score the campaign's pool with ``judge``, calibrate, store judge labels, and report (owners only)."""
    campaign = store.campaign(name)
    items = pool_items(store, actor, name)
    reference, _ = store.qrels(actor, name, rule)
    labelled = sorted(q for q, rel in reference.items() if rel)
    if len(labelled) < 3:
        raise CampaignError(f"campaign {name!r} has human labels on {len(labelled)} queries; calibrating a judge "
                            "needs at least 3 (calibration, report, hold-out); nothing was changed")
    if not 0 <= holdout_share < 1:
        raise CampaignError(f"hold-out share must be in [0, 1), got {holdout_share}")
    calib, report_q, holdout = judge_splits(labelled, calibration_share, holdout_share, seed)
    scorer = scorer if scorer is not None else load_judge(judge, campaign.dataset)
    scores = score_items(scorer, items, batch, progress)
    grades = list(range(campaign.max_label + 1))
    by_q = {q: [(i, it) for i, it in enumerate(items) if it.query_id == q] for q in labelled}

    def pairs(queries: Sequence[str]) -> tuple[list[int], list[int]]:
        idx = [i for q in queries for i, it in by_q[q] if it.doc_id in reference[q]]
        return idx, [reference[items[i].query_id][items[i].doc_id] for i in idx]

    cal_idx, cal_y = pairs(calib)
    thresholds: Thresholds = fit_thresholds(scores[cal_idx], cal_y, campaign.max_label)
    labels = thresholds.grade(scores)
    identity = judge_identity(judge)
    save_judge_labels(store, actor, name, identity, [(it.item_id, float(s), int(g))
                                                     for it, s, g in zip(items, scores, labels)])
    rep_idx, rep_y = pairs(report_q)
    rep_j = [int(labels[i]) for i in rep_idx]
    confusion = np.zeros((len(grades), len(grades)), dtype=int)
    for h, j in zip(rep_y, rep_j):
        confusion[h, j] += 1
    pair_matrix = np.array([rep_y, rep_j], dtype=float)
    rep_items = {items[i].item_id for i in rep_idx}
    human_labels = [lab for lab in store.labels(actor, name) if lab.item_id in rep_items]
    human = campaign_agreement(human_labels, campaign.max_label)
    pair_kappas = [c["kappa"] for c in human.cohen if c["kappa"] is not None]
    per_annotator = {}
    judge_of = {items[i].item_id: int(labels[i]) for i in rep_idx}
    for lab in human_labels:
        if lab.label is not None:
            per_annotator.setdefault(lab.annotator, ([], []))
            per_annotator[lab.annotator][0].append(lab.label)
            per_annotator[lab.annotator][1].append(judge_of[lab.item_id])
    vs_annotators = [k for a, b in per_annotator.values() if (k := _kappa(a, b, grades)) is not None]
    judge_qrels = {q: {items[i].doc_id: int(labels[i]) for i, _ in by_q[q]} for q in report_q}
    human_vals = system_values(items, reference, report_q, metric)
    judge_vals = system_values(items, judge_qrels, report_q, metric)
    systems = sorted(human_vals)
    human_order = {s: float(human_vals[s].mean()) for s in systems}
    judge_order = {s: float(judge_vals[s].mean()) for s in systems}
    significant = kept = 0
    for a, b in itertools.combinations(systems, 2):
        d = human_vals[a] - human_vals[b]
        if len(d) >= 2 and np.any(d != d[0]) and stats.ttest_rel(human_vals[a], human_vals[b]).pvalue < 0.05:
            significant += 1
            dj = judge_vals[a] - judge_vals[b]
            same = np.any(dj != dj[0]) and stats.ttest_rel(judge_vals[a], judge_vals[b]).pvalue < 0.05
            kept += bool(same and np.sign(dj.mean()) == np.sign(d.mean()))
    return JudgeReport(
        name, judge, identity, len(items), rule, calib, report_q, holdout, list(thresholds.cuts), thresholds.kappa,
        len(rep_idx), _kappa(rep_y, rep_j, grades), krippendorff_alpha(pair_matrix, "nominal", grades),
        krippendorff_alpha(pair_matrix, "ordinal", grades),
        float(np.mean(vs_annotators)) if vs_annotators else None, human.alpha_nominal, human.alpha_ordinal,
        float(np.mean(pair_kappas)) if pair_kappas else None, confusion.tolist(), metric, human_order, judge_order,
        _tau([human_order[s] for s in systems], [judge_order[s] for s in systems]), significant,
        kept / significant if significant else None, circularity(judge, campaign.systems))

