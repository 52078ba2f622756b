"""Is a system's word importance more faithful than random words? ERASER with bootstrap CIs, for any system.

For each held-out pair (q, d) and each k ∈ ``KS`` (DeYoung et al. 2020, ERASER §4, AOPC over k):

- comprehensiveness_k = s(q, d) − s(q without its k top-weighted words, d)   (high: the model needs them)
- sufficiency_k       = s(q, d) − s(only the k top-weighted words of q, d)   (low: they are enough)

with s the system's own pair score (``core.serving.pair_scoring``), and the same deletions of k random words
(``RANDOM_DRAWS`` seeded draws). Deviation from ERASER: s is the system's score, not the predicted class's
probability (BM25 and cosines are not probabilities); each pair's differences are divided by the standard deviation
of the system's full-pair scores over the measured pairs (``scale``), so that systems on different scales compare.

Per pair, AOPC = the mean over k; the report gives each mean with a 95% percentile-bootstrap CI over pairs
(``BOOTSTRAP`` resamples, seeded) and the paired differences top − random. An explanation is *more faithful than
random* when the CI of comprehensiveness(top) − comprehensiveness(random) lies above 0 AND the CI of
sufficiency(top) − sufficiency(random) lies below 0; otherwise the report says it is not.

Words and rebuilding follow ``core.analysis.keyword_quality`` (keyword candidates; kept words joined by spaces,
the full query scored in the same rebuilt form; questions under ``MIN_WORDS`` words skipped).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from core.analysis.keyword_quality import KS, MIN_WORDS, RANDOM_DRAWS, _rebuild
from core.data.keywords import keyword_candidates

BOOTSTRAP = 1000


@dataclass
class PairwiseFaithfulness:
    """Per-pair AOPC (score units / ``scale``) of comprehensiveness and sufficiency for top-k and random-k."""

    comp_top: np.ndarray
    comp_random: np.ndarray
    suff_top: np.ndarray
    suff_random: np.ndarray
    scale: float
    pairs: int = 0
    summary: dict = field(default_factory=dict)


def _ci(values: np.ndarray, rng: np.random.Generator, draws: int = BOOTSTRAP) -> list[float]:
    """[mean, low, high]: the mean and its 95% percentile-bootstrap interval over pairs."""
    if not len(values):
        return [0.0, 0.0, 0.0]
    idx = rng.integers(0, len(values), size=(draws, len(values)))
    means = values[idx].mean(axis=1)
    return [round(float(values.mean()), 4), round(float(np.quantile(means, .025)), 4),
            round(float(np.quantile(means, .975)), 4)]


def pairwise_faithfulness(pairs: Sequence[tuple[str, str]], weigh: Callable[[str, str], list[tuple[str, float]]],
                          score: Callable[[list[str], list[str]], np.ndarray], ks: Sequence[int] = KS,
                          draws: int = RANDOM_DRAWS, seed: int = 13) -> PairwiseFaithfulness:
    """ERASER comprehensiveness / sufficiency per pair of ``weigh(q, d) -> [(word, weight)]`` for the pair scorer
    ``score`` (every deletion of every pair in one call), with bootstrap CIs and the verdict in ``summary``."""
    rng = np.random.default_rng(seed)
    queries, docs, rows = [], [], []  # rows: (pair, measure, k, group)
    used = 0
    for q, d in pairs:
        words, _ = keyword_candidates(q)
        n = len(words)
        if n < MIN_WORDS:
            continue
        weighted = {w.lower(): x for w, x in weigh(q, d)}
        weights = np.asarray([weighted.get(w.lower(), 0.0) for w in words], dtype=np.float64)
        order = np.lexsort((np.arange(n), -weights))
        queries.append(_rebuild(words, range(n))), docs.append(d), rows.append((used, "full", 0, ""))
        for k in ks:
            if k >= n:
                continue
            sets = [("top", order[:k])] + [("random", rng.choice(n, size=k, replace=False)) for _ in range(draws)]
            for group, chosen in sets:
                chosen = {int(i) for i in chosen}
                for measure, keep in (("comp", [i for i in range(n) if i not in chosen]), ("suff", sorted(chosen))):
                    queries.append(_rebuild(words, keep)), docs.append(d), rows.append((used, measure, k, group))
        used += 1
    empty = np.zeros(0)
    if not used:
        return PairwiseFaithfulness(empty, empty, empty, empty, 1.0, 0, {})
    scores = np.asarray(score(queries, docs), dtype=np.float64)
    full = np.zeros(used)
    for s, (p, measure, _, _) in zip(scores, rows):
        if measure == "full":
            full[p] = s
    scale = float(full.std()) if used > 1 and full.std() > 1e-12 else 1.0
    sums: dict[tuple[str, str], np.ndarray] = {(m, g): np.zeros((used, len(ks)))
                                               for m in ("comp", "suff") for g in ("top", "random")}
    counts = {key: np.zeros((used, len(ks))) for key in sums}
    for s, (p, measure, k, group) in zip(scores, rows):
        if measure == "full":
            continue
        j = list(ks).index(k)
        sums[(measure, group)][p, j] += (full[p] - s) / scale
        counts[(measure, group)][p, j] += 1
    aopc = {}
    for key in sums:  # per pair: the mean over the k measured (random: over its draws too)
        with np.errstate(invalid="ignore"):
            per_k = sums[key] / np.where(counts[key] > 0, counts[key], np.nan)
        aopc[key] = np.nanmean(per_k, axis=1)
    result = PairwiseFaithfulness(aopc[("comp", "top")], aopc[("comp", "random")], aopc[("suff", "top")],
                                  aopc[("suff", "random")], scale, used)
    result.summary = summarise(result, seed)
    return result


def summarise(f: PairwiseFaithfulness, seed: int = 13) -> dict:
    """Means with CIs, the paired differences top − random, and whether top-k beats random-k on both measures."""
    rng = np.random.default_rng(seed)
    comp_gain = f.comp_top - f.comp_random
    suff_gain = f.suff_top - f.suff_random
    out = {"pairs": f.pairs, "score_sd": round(f.scale, 6),
           "comprehensiveness": {"top": _ci(f.comp_top, rng), "random": _ci(f.comp_random, rng),
                                 "top_minus_random": _ci(comp_gain, rng)},
           "sufficiency": {"top": _ci(f.suff_top, rng), "random": _ci(f.suff_random, rng),
                           "top_minus_random": _ci(suff_gain, rng)}}
    comp_ok = out["comprehensiveness"]["top_minus_random"][1] > 0
    suff_ok = out["sufficiency"]["top_minus_random"][2] < 0
    out["more_faithful_than_random"] = bool(f.pairs and comp_ok and suff_ok)
    out["verdict"] = ("more faithful than random on both measures" if out["more_faithful_than_random"] else
                      "NOT more faithful than random: " + "; ".join(
                          ([] if comp_ok else ["comprehensiveness(top) − (random) CI reaches 0 or below"])
                          + ([] if suff_ok else ["sufficiency(top) − (random) CI reaches 0 or above"])))
    out["gain"] = round(float(comp_gain.mean() - suff_gain.mean()), 4) if f.pairs else 0.0
    return out
