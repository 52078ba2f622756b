"""Inter-annotator agreement: Cohen's κ (two raters), Fleiss' κ (three or more), Krippendorff's α.

Cohen's κ is scikit-learn's ``cohen_kappa_score``. Krippendorff's α (nominal and ordinal; missing
ratings allowed, so it fits campaigns where each item has r of n annotators) is the ``krippendorff``
package's ``alpha`` (``krippendorff_alpha``, ``campaign_agreement``). Fleiss' κ (Fleiss 1971, "Measuring nominal scale
agreement among many raters", Psychological Bulletin 76(5)) is computed from the item × category count
matrix with the standard formula:

    P_i = (Σ_j n_ij² − n) / (n (n − 1)),  P̄ = mean_i P_i,  p_j = Σ_i n_ij / (N n),  P̄_e = Σ_j p_j²,
    κ = (P̄ − P̄_e) / (1 − P̄_e)

Only items labelled by every chosen annotator count (Fleiss needs the same number of raters per item).
"""
from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from sklearn.metrics import cohen_kappa_score

from core.judging.label_records import Judgment


@dataclass(frozen=True)
class CampaignLabel:
    """One annotator's current label on a campaign item (``label`` None: can't judge, ``reason`` says why);
    ``core.judging.campaigns`` reads them from its store, this module measures their agreement."""

    item_id: int
    query_id: str
    doc_id: str
    annotator: str
    label: int | None
    reason: str | None
    rationale: str | None
    time: datetime


@dataclass
class Agreement:
    """κ over the items every chosen annotator labelled, and the items where they disagree."""

    method: str  # "cohen" | "fleiss"
    annotators: list[str]
    items: int
    kappa: float | None
    observed: float | None  # raw proportion of agreeing pairs of ratings
    disagreements: list[dict] = field(default_factory=list)


def cohen_kappa(a: Sequence[int], b: Sequence[int], labels: Sequence[int] | None = None) -> float:
    """Cohen's κ of two raters' labels on the same items (scikit-learn)."""
    if len(a) != len(b) or not a:
        raise ValueError("two equally long, non-empty label lists are needed")
    return float(cohen_kappa_score(list(a), list(b), labels=list(labels) if labels is not None else None))


def fleiss_kappa(counts: np.ndarray | Sequence[Sequence[int]]) -> float:
    """Fleiss' κ from an items × categories matrix of rating counts (same raters per item)."""
    table = np.asarray(counts, dtype=float)
    if table.ndim != 2 or table.shape[0] == 0:
        raise ValueError("counts must be a non-empty items x categories matrix")
    n = table.sum(axis=1)
    if not np.allclose(n, n[0]) or n[0] < 2:
        raise ValueError("every item needs the same number (>= 2) of ratings")
    n_raters, n_items = n[0], table.shape[0]
    p_item = ((table**2).sum(axis=1) - n_raters) / (n_raters * (n_raters - 1))
    p_bar = p_item.mean()
    p_cat = table.sum(axis=0) / (n_items * n_raters)
    p_e = float((p_cat**2).sum())
    if np.isclose(p_e, 1.0):
        return 1.0 if np.isclose(p_bar, 1.0) else 0.0
    return float((p_bar - p_e) / (1 - p_e))


def _pairwise_observed(rows: list[list[int]]) -> float:
    agree = total = 0
    for labels in rows:
        for i in range(len(labels)):
            for j in range(i + 1, len(labels)):
                total += 1
                agree += labels[i] == labels[j]
    return agree / total if total else float("nan")


def agreement(judgments: Iterable[Judgment], annotators: Sequence[str] | None = None, max_label: int = 2) -> Agreement:
    """κ for the chosen annotators (all who judged, by default) and the list of disagreements.

    Two annotators -> Cohen's κ; three or more -> Fleiss' κ. ``kappa`` is ``None`` with fewer than two
    annotators or no shared items.
    """
    js = list(judgments)
    names = sorted(set(annotators) if annotators is not None else {j.annotator for j in js})
    by_item: dict[tuple[str, str, str], dict[str, int]] = {}
    texts: dict[tuple[str, str, str], str] = {}
    for j in js:
        if j.annotator in names:
            key = (j.dataset, j.query_id, j.doc_id)
            by_item.setdefault(key, {})[j.annotator] = j.label
            texts[key] = j.query
    shared = sorted(k for k, v in by_item.items() if len(v) == len(names))
    method = "cohen" if len(names) == 2 else "fleiss"
    rows = [[by_item[k][a] for a in names] for k in shared]
    disagreements = [
        {"dataset": k[0], "query_id": k[1], "query": texts[k], "doc_id": k[2], **by_item[k]}
        for k in shared if len(set(by_item[k].values())) > 1
    ]
    if len(names) < 2 or not shared:
        return Agreement(method, names, len(shared), None, None, disagreements)
    labels = list(range(max_label + 1))
    if method == "cohen":
        kappa = cohen_kappa([r[0] for r in rows], [r[1] for r in rows], labels)
    else:
        counts = np.zeros((len(rows), len(labels)), dtype=int)
        for i, r in enumerate(rows):
            for label in r:
                counts[i, label] += 1
        kappa = fleiss_kappa(counts)
    return Agreement(method, names, len(shared), kappa, _pairwise_observed(rows), disagreements)


# ----------------------------------------------------------------------------- Krippendorff's alpha, campaigns
ALPHA_LEVELS = ("nominal", "ordinal")


def krippendorff_alpha(ratings: Sequence[Sequence[float]] | np.ndarray, level: str = "nominal",
                       values: Sequence[int] | None = None) -> float | None:
    """Krippendorff's α of a raters × items matrix (``nan`` = missing), by the ``krippendorff`` package.

    ``values``: the label scale (e.g. 0, 1, 2), needed for ordinal distances when a grade is unused.
    None when α is undefined: fewer than two ratings on every item, or a single value used throughout.
    """
    import krippendorff

    if level not in ALPHA_LEVELS:
        raise ValueError(f"level must be one of {', '.join(ALPHA_LEVELS)}, got {level!r}")
    data = np.asarray(ratings, dtype=float)
    if data.ndim != 2 or data.size == 0:
        return None
    pairable = (~np.isnan(data)).sum(axis=0) >= 2
    observed = np.unique(data[:, pairable][~np.isnan(data[:, pairable])])
    if not pairable.any() or len(observed) < 2:
        return None
    domain = sorted(set(values) | set(observed.tolist())) if values is not None else None
    value = float(krippendorff.alpha(reliability_data=data[:, pairable], value_domain=domain,
                                     level_of_measurement=level))
    return None if math.isnan(value) else value


@dataclass
class QueryAgreement:
    """α on one query's items."""

    items: int
    alpha_nominal: float | None
    alpha_ordinal: float | None


@dataclass
class CampaignAgreement:
    """Agreement on a campaign: α over every item with two or more ratings (missing ratings allowed),
    Fleiss' κ over items with exactly ``fleiss_raters`` ratings, Cohen's κ per pair over shared items,
    and α per query. "Can't judge" is a missing rating. None: undefined (see ``krippendorff_alpha``)."""

    annotators: list[str]
    items: int
    ratings: int
    alpha_nominal: float | None
    alpha_ordinal: float | None
    fleiss: float | None
    fleiss_items: int
    fleiss_raters: int
    cohen: list[dict] = field(default_factory=list)  # {"pair": "a / b", "items": n, "kappa": κ or None}
    per_query: dict[str, QueryAgreement] = field(default_factory=dict)


def _matrix(by_item: dict[int, dict[str, int]], names: list[str], items: list[int]) -> np.ndarray:
    return np.array([[by_item[i].get(a, np.nan) for i in items] for a in names], dtype=float)


def campaign_agreement(labels: Iterable[CampaignLabel], max_label: int = 2) -> CampaignAgreement:
    """α (nominal, ordinal), Fleiss' κ and pairwise Cohen's κ for a campaign's labels, and α per query."""
    by_item: dict[int, dict[str, int]] = {}
    query_of: dict[int, str] = {}
    for lab in labels:
        if lab.label is not None:  # can't judge = missing
            by_item.setdefault(lab.item_id, {})[lab.annotator] = lab.label
            query_of[lab.item_id] = lab.query_id
    names = sorted({a for votes in by_item.values() for a in votes})
    scale = list(range(max_label + 1))
    rated = sorted(i for i, v in by_item.items() if len(v) >= 2)
    data = _matrix(by_item, names, rated)
    counts = Counter(len(by_item[i]) for i in rated)
    raters = max(counts, key=lambda n: (counts[n], n)) if counts else 0
    full = [i for i in rated if len(by_item[i]) == raters]
    fleiss = None
    if full:
        table = np.zeros((len(full), len(scale)), dtype=int)
        for row, i in enumerate(full):
            for label in by_item[i].values():
                table[row, label] += 1
        fleiss = fleiss_kappa(table)
    cohen = []
    for a, b in itertools.combinations(names, 2):
        shared = [i for i in rated if a in by_item[i] and b in by_item[i]]
        kappa = None
        left, right = [by_item[i][a] for i in shared], [by_item[i][b] for i in shared]
        if len(set(left) | set(right)) >= 2:  # one value throughout: κ is undefined (0/0)
            value = cohen_kappa(left, right, scale)
            kappa = None if math.isnan(value) else value
        cohen.append({"pair": f"{a} / {b}", "items": len(shared), "kappa": kappa})
    per_query: dict[str, QueryAgreement] = {}
    for qid in sorted({query_of[i] for i in rated}):
        items = [i for i in rated if query_of[i] == qid]
        m = _matrix(by_item, names, items)
        per_query[qid] = QueryAgreement(len(items), krippendorff_alpha(m, "nominal", scale),
                                        krippendorff_alpha(m, "ordinal", scale))
    return CampaignAgreement(names, len(rated), int(sum(len(by_item[i]) for i in rated)),
                             krippendorff_alpha(data, "nominal", scale), krippendorff_alpha(data, "ordinal", scale),
                             fleiss, len(full), raters, cohen, per_query)
