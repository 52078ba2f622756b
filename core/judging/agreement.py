"""Inter-annotator agreement on the judgment store: Cohen's κ (two raters), Fleiss' κ (three or more).

Cohen's κ is scikit-learn's ``cohen_kappa_score``. Fleiss' κ (Fleiss 1971, "Measuring nominal scale
agreement among many raters", Psychological Bulletin 76(5)) is computed from the item × category count
matrix with the standard formula:

    P_i = (Σ_j n_ij² − n) / (n (n − 1)),  P̄ = mean_i P_i,  p_j = Σ_i n_ij / (N n),  P̄_e = Σ_j p_j²,
    κ = (P̄ − P̄_e) / (1 − P̄_e)

Only items labelled by every chosen annotator count (Fleiss needs the same number of raters per item).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from sklearn.metrics import cohen_kappa_score

from core.judging.judgments import Judgment


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
