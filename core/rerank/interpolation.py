"""A trained reranker's score interpolated with its reference's score, the weight chosen on dev.

On QQP the trained rerankers rescoring BM25's top 20 ranked the held-out queries worse than their
references (CNN below BM25; FRM and the cross-encoder below the zero-shot MiniLM pairs): the pair
classifiers, trained on QQP's labelled pairs, throw away what the untrained scorer knew. The fix, a
deviation from the papers (none of them interpolates): the served score of a candidate is

    s(q, d) = (1 − α) · minmax_q(reranker(q, d)) + α · minmax_q(partner(q, d))

with both scores min-max normalised over the query's candidate list (a constant list normalises to 0).
The partner is the reranker's held-out reference in its registration (``SystemSpec.reference``): BM25 for
the CNN (the first stage itself, whose scores come with the candidates), the zero-shot MiniLM pair scorer
for FRM and the cross-encoder (scored on the same candidates through the one loader). Interpolating with
BM25 alone did not lift FRM or the cross-encoder to their reference (BENCHMARKS.md, "Trained rerankers
interpolated with their reference").
α is chosen once per build on the dev split by a rule fixed before looking at any result (``RULE``):
the α of ``GRID`` with the highest dev MRR@100 over BM25's top 20 (each dev query removed from its own
ranking); ties within ``TIE`` go to the smaller α (the reranker's own score). α is stored beside the
model (``interpolation.json`` in its artifacts folder, so stored runs go stale when it changes) with the
dev figures; it applies only when the candidates come from the first stage it was chosen for, and never
to ``score_pairs`` (pair AUC, explanations and keyword importance are the reranker's own).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from core.retrieval.base import minmax, mix  # noqa: F401  (the served score, Eq. above)

GRID = tuple(round(0.1 * i, 1) for i in range(10))  # 0 … 0.9: α = 1 would be the first stage alone
TIE = 1e-4
DEV_QUERIES = 600  # dev queries (sampled, seed 13) the weight is chosen on; 0 = all
RULE = ("α ∈ {0, .1, …, .9} with the highest dev MRR@100 over BM25's top 20 (600 sampled dev queries, each "
        "removed from its own ranking), the partner being the reranker's held-out reference; ties within 1e-4 "
        "go to the smaller α")
FILE = "interpolation.json"


@dataclass(frozen=True)
class Interpolation:
    """α and where it came from (stored beside the model)."""

    weight: float
    first_stage: str
    depth: int
    rule: str = RULE
    partner: str = ""  # the system whose score is mixed in ("" or the first stage: the candidates' own scores)
    dev_queries: int = 0
    dev: dict[str, dict[str, float]] = field(default_factory=dict)  # α -> {mrr@100, hit_rate@1}


def path_for(folder: Path) -> Path:
    return Path(folder) / FILE


def read(folder: Path) -> Interpolation | None:
    """The stored interpolation of a model folder, or None (none chosen: the reranker's own score)."""
    try:
        raw = json.loads(path_for(folder).read_text(encoding="utf-8"))
        return Interpolation(**raw)
    except (OSError, ValueError, TypeError):
        return None


def write(folder: Path, chosen: Interpolation) -> None:
    from core.artifacts import save_json

    save_json(path_for(folder), asdict(chosen))


def choose(dev_scores: dict[str, tuple[list[str], list[float], list[float]]], qrels: dict[str, dict[str, int]],
           grid: Sequence[float] = GRID) -> tuple[float, dict[str, dict[str, float]]]:
    """Apply ``RULE``: ``dev_scores`` maps a dev query to (candidate ids, reranker scores, partner scores).
    Returns (α, per-α dev MRR@100 and H@1)."""
    from core.evaluation import evaluate_run
    from core.retrieval.base import Ranking

    table: dict[str, dict[str, float]] = {}
    best, best_mrr = 0.0, -1.0
    judged = {q: r for q, r in qrels.items() if q in dev_scores and any(v > 0 for v in r.values())}
    for alpha in grid:
        run = {}
        for q, (ids, mine, first) in dev_scores.items():
            if q not in judged:
                continue
            s = mix(mine, first, alpha)
            order = np.argsort(-s, kind="stable")
            run[q] = Ranking("mix", [ids[i] for i in order], [float(s[i]) for i in order])
        scores = evaluate_run(judged, run, ["mrr@100", "hit_rate@1"])
        table[f"{alpha:.1f}"] = {m: round(float(v), 4) for m, v in scores.items()}
        if scores["mrr@100"] > best_mrr + TIE:
            best, best_mrr = alpha, scores["mrr@100"]
    return best, table


def apply(reranker, folder: Path, partner_loader=None) -> None:
    """Give a loaded reranker its stored α (``Reranker.interpolation``) and, when the partner is not the first
    stage, its partner scorer (``partner_loader(name)``, the one loader); nothing when none was chosen."""
    chosen = read(folder)
    if chosen is None or chosen.weight <= 0:
        return
    reranker.interpolation = chosen
    if chosen.partner and chosen.partner != chosen.first_stage:
        if partner_loader is None:
            raise ValueError(f"the interpolation partner {chosen.partner!r} needs a loader")
        reranker.partner = partner_loader(chosen.partner)
