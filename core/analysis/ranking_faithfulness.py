"""Is a system's query-level word importance more faithful than random words? ERASER on its own rankings.

The Keywords page and ``core explain`` without a candidate weigh a query's words by what each does to the system's
own top 10 (``core.analysis.ranking_importance``: 1 − RBO with the word left out). This measures that view as
``core.analysis.explanation_quality`` measures the pair view, with the ranking in place of the pair score. For
each held-out query q and each k ∈ ``KS`` (DeYoung et al. 2020, ERASER §4, AOPC over k):

- comprehensiveness_k = 1 − RBO(top 10 of q, top 10 of q without its k top-weighted words)  (high: it needs them)
- sufficiency_k       = 1 − RBO(top 10 of q, top 10 of only the k top-weighted words of q)  (low: they are enough)

and the same deletions of k random words (``RANDOM_DRAWS`` seeded draws); RBO as in ``ranking_importance``
(p = 0.9). Units: 1 − RBO, in [0, 1], the same for every system, so no rescaling. A word left out is every
occurrence of it (case-insensitive, ``occlusion.left_out``); "only the k words" keeps those tokens in question order
(``occlusion.kept_only``). At k = 1 the top
word is, by construction, the one whose omission moves the top 10 most, so comprehensiveness is not below random
there; k = 2, 3 and sufficiency are not given by construction. Queries with fewer than ``MIN_WORDS`` words are
skipped. Per query, AOPC = the mean over k; CIs and the verdict are ``explanation_quality.summarise``'s (95%
percentile bootstrap over queries; more faithful than random when comprehensiveness(top − random) lies above 0
and sufficiency(top − random) below 0).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from core.analysis.explanation_quality import PairwiseFaithfulness, summarise
from core.analysis.keyword_quality import KS, MIN_WORDS, RANDOM_DRAWS
from core.analysis.occlusion import MAX_WORDS, kept_only, left_out
from core.analysis.ranking_importance import (DEPTH, POOL, RankingImportance, rank_biased_overlap, rank_variants,
                                              ranking_importances)
from core.data.keywords import keyword_candidates

__all__ = ["MEASURE", "RankingFaithfulness", "ranking_faithfulness"]

MEASURE = ("ERASER on the system's own top 10: 1 − RBO(p = 0.9) between the query's top 10 and the top 10 "
           "without (comprehensiveness) or with only (sufficiency) its k top words, AOPC over k = 1, 2, 3")


@dataclass
class RankingFaithfulness:
    """The summary with CIs (AOPC in 1 − RBO units, top-k and random-k) and the weights of the queries measured."""

    summary: dict
    weights: list[RankingImportance] = field(default_factory=list)  # one per query of ``MIN_WORDS`` or more words


def ranking_faithfulness(system, queries: Sequence[str], dataset, first_stage=None, ks: Sequence[int] = KS,
                         draws: int = RANDOM_DRAWS, seed: int = 13, k: int = DEPTH,
                         depth: int = POOL) -> RankingFaithfulness:
    """ERASER comprehensiveness / sufficiency of the system's query-level word importance on ``queries`` (module
    docstring): two batched calls to the system, one for the weights and one for every deletion."""
    rng = np.random.default_rng(seed)
    kept = [q for q in queries if len(keyword_candidates(q, MAX_WORDS)[0]) >= MIN_WORDS]
    empty = np.zeros(0)
    if not kept:
        return RankingFaithfulness(_summary(PairwiseFaithfulness(empty, empty, empty, empty, 1.0, 0), seed))
    weights = ranking_importances(system, kept, dataset, k, first_stage, depth)
    variants, rows = {}, []  # rows: (query index, measure, k index, group, key)
    for i, (query, ranked) in enumerate(zip(kept, weights)):
        words = [w.lower() for w, _ in ranked.query]
        n = len(words)
        order = np.lexsort((np.arange(n), -np.asarray([x for _, x in ranked.query])))
        for j, size in enumerate(ks):
            if size >= n:
                continue
            sets = [("top", order[:size])] + [("random", rng.choice(n, size=size, replace=False))
                                              for _ in range(draws)]
            for g, (group, chosen) in enumerate(sets):
                chosen_words = {words[int(c)] for c in chosen}
                deleted = (("comp", left_out(query, chosen_words)), ("suff", kept_only(query, chosen_words)))
                for measure, text in deleted:
                    key = f"{i}/{measure}/{size}/{g}"
                    variants[key] = (query, text)
                    rows.append((i, measure, j, group, key))
    top = rank_variants(system, variants, dataset, k, first_stage, depth)
    sums = {(m, g): np.zeros((len(kept), len(ks))) for m in ("comp", "suff") for g in ("top", "random")}
    counts = {key: np.zeros((len(kept), len(ks))) for key in sums}
    for i, measure, j, group, key in rows:
        sums[(measure, group)][i, j] += 1.0 - rank_biased_overlap(weights[i].top, top[key])
        counts[(measure, group)][i, j] += 1
    aopc = {}
    for key in sums:  # per query: the mean over the k measured (random: over its draws too)
        with np.errstate(invalid="ignore"):
            aopc[key] = np.nanmean(sums[key] / np.where(counts[key] > 0, counts[key], np.nan), axis=1)
    f = PairwiseFaithfulness(aopc[("comp", "top")], aopc[("comp", "random")], aopc[("suff", "top")],
                             aopc[("suff", "random")], 1.0, len(kept))
    return RankingFaithfulness(_summary(f, seed), weights)


def _summary(f: PairwiseFaithfulness, seed: int) -> dict:
    """``summarise``'s figures, counted in queries and in 1 − RBO units (no score SD)."""
    summary = summarise(f, seed)
    summary["queries"] = summary.pop("pairs", 0)
    summary.pop("score_sd", None)
    summary["measure"] = MEASURE
    return summary
