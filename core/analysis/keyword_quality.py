"""Is a per-word importance faithful to the model and meaningful to a reader? Measured on held-out pairs.

Faithfulness (ERASER, DeYoung et al. 2020, §4): for a pair (q, d) with the model's probability p of its
predicted class (duplicate when sim(q, d) ≥ .5, else not), delete query words and score again.

- comprehensiveness_k = p(q, d) − p(q without its k top-weighted words, d): high when the words the
  explanation ranks first are the ones the model needs;
- sufficiency_k = p(q, d) − p(only the k top-weighted words of q, d): low when they are enough.

Both are averaged over k ∈ ``KS`` (ERASER's AOPC over bins; QQP questions have ~10 words) and compared with
the same deletions of k random words (``RANDOM_DRAWS`` draws, seeded) and of the k bottom-weighted words.
Words are the keyword candidates (``core.data.keywords.keyword_candidates``); a query is rebuilt from the
words kept, joined by spaces, and the full query is scored in the same rebuilt form. Questions with fewer
than ``MIN_WORDS`` words are skipped (nothing to delete and keep).

Plausibility: Spearman's ρ between a question's word weights and the words' IDF (the collection's Lucene
IDF, ``LexicalStats``), averaged over questions; and the share of stop words (spaCy's list, the one FRM's
features use) among each question's top-2 words.

``PASS_RULE`` (fixed before any result was seen) says which explanations pass; ``bench/keyword_faithfulness.py``
measures every FRM recipe and seed (``FRM_REPORT``); ``bench/explain_faithfulness.py`` measures every system's
explanations with bootstrap CIs (``REPORT``), whose ``default`` (the Keywords page's default view, chosen on dev
by the rules of ``bench/explain_decision.py``) :func:`keywords_default` reads; without it, the FRM report's.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from core.data.keywords import keyword_candidates
from core.paths import REPO_ROOT

KS = (1, 2, 3)
MIN_WORDS = 4
RANDOM_DRAWS = 2
REPORT = REPO_ROOT / "bench" / "reports" / "explain_faithfulness.json"  # every system (the page's default)
FRM_REPORT = REPO_ROOT / "bench" / "reports" / "keyword_faithfulness.json"  # FRM's recipes and seeds
QUERY_REPORT = REPO_ROOT / "bench" / "reports" / "query_view_faithfulness.json"  # every system's query view
PASS_RULE = {
    "faithful": "comprehensiveness(top-k) > comprehensiveness(random k) and > comprehensiveness(bottom-k), and "
                "sufficiency(top-k) < sufficiency(random k), averaged over k = 1, 2, 3 on the held-out pairs",
    "plausible": "mean Spearman ρ(weight, IDF) ≥ 0.2 and stop-word share among each question's top-2 ≤ 0.25",
}
FALLBACK_METHOD = "w"  # before any measurement: the registered keyword explainer (FRM) and its own w(k, q)


def fallback() -> tuple[str, str]:
    """(system, method) shown before any measurement: the system whose registration explains keywords."""
    from core.registry import list_systems

    return next(s.name for s in list_systems("reranker") if s.explains_keywords), FALLBACK_METHOD


@dataclass
class Faithfulness:
    """AOPC of comprehensiveness and sufficiency for top-k, random-k and bottom-k deletions."""

    comprehensiveness: dict[str, float] = field(default_factory=dict)  # "top", "random", "bottom"
    sufficiency: dict[str, float] = field(default_factory=dict)
    pairs: int = 0

    @property
    def passes(self) -> bool:
        c, s = self.comprehensiveness, self.sufficiency
        return bool(c and c["top"] > c["random"] and c["top"] > c["bottom"] and s["top"] < s["random"])


@dataclass
class Plausibility:
    """Agreement of the weights with what a reader expects: rare words high, stop words low."""

    spearman_idf: float = 0.0
    stop_share_top2: float = 0.0
    questions: int = 0

    @property
    def passes(self) -> bool:
        return self.spearman_idf >= 0.2 and self.stop_share_top2 <= 0.25


def predicted_class_prob(scores: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """p of the class the model predicts on the full pair (``reference`` ≥ .5: duplicate)."""
    return np.where(reference >= 0.5, scores, 1.0 - scores)


def _rebuild(words: Sequence[str], keep: Sequence[int]) -> str:
    kept = [words[i] for i in sorted(keep)]
    return " ".join(kept) if kept else "?"


def faithfulness(pairs: Sequence[tuple[str, str]], weigh: Callable[[str, str], list[tuple[str, float]]],
                 score: Callable[[list[str], list[str]], np.ndarray], ks: Sequence[int] = KS,
                 draws: int = RANDOM_DRAWS, seed: int = 13) -> Faithfulness:
    """ERASER comprehensiveness / sufficiency of ``weigh(q, d) -> [(word, weight)]`` for the model ``score``
    (pair probabilities, batched) over ``pairs`` (query, candidate)."""
    rng = np.random.default_rng(seed)
    queries, docs, owners, kinds = [], [], [], []
    used = 0
    for q, d in pairs:
        words, _ = keyword_candidates(q)
        if len(words) < MIN_WORDS:
            continue
        weighted = dict((w.lower(), x) for w, x in weigh(q, d))
        weights = np.asarray([weighted.get(w.lower(), 0.0) for w in words], dtype=np.float64)
        order = np.lexsort((np.arange(len(words)), -weights))  # most important first, ties by position
        n = len(words)
        full = _rebuild(words, range(n))
        queries.append(full), docs.append(d), owners.append(used), kinds.append(("full", 0, ""))
        for k in ks:
            if k >= n:
                continue
            sets = {"top": order[:k], "bottom": order[::-1][:k]}
            for j in range(draws):
                sets[f"random{j}"] = rng.choice(n, size=k, replace=False)
            for name, chosen in sets.items():
                chosen = set(int(i) for i in chosen)
                rest = [i for i in range(n) if i not in chosen]
                for measure, keep in (("comp", rest), ("suff", sorted(chosen))):
                    queries.append(_rebuild(words, keep)), docs.append(d), owners.append(used)
                    kinds.append((measure, k, name))
        used += 1
    if not used:
        return Faithfulness()
    probs = np.asarray(score(queries, docs), dtype=np.float64)
    full = {o: probs[i] for i, (o, kind) in enumerate(zip(owners, kinds)) if kind[0] == "full"}
    acc: dict[tuple[str, str], list[float]] = {}
    for i, (o, (measure, k, name)) in enumerate(zip(owners, kinds)):
        if measure == "full":
            continue
        ref = full[o]
        p_full = float(predicted_class_prob(np.asarray([ref]), np.asarray([ref]))[0])
        p_cut = float(predicted_class_prob(np.asarray([probs[i]]), np.asarray([ref]))[0])
        group = "random" if name.startswith("random") else name
        acc.setdefault((measure, group), []).append(p_full - p_cut)
    mean = {key: round(float(np.mean(v)), 4) for key, v in acc.items()}
    return Faithfulness(comprehensiveness={g: mean[("comp", g)] for g in ("top", "random", "bottom")},
                        sufficiency={g: mean[("suff", g)] for g in ("top", "random", "bottom")}, pairs=used)


def plausibility(weighted: Sequence[list[tuple[str, float]]], idf: Callable[[list[str]], np.ndarray],
                 stop_words: set[str] | frozenset[str]) -> Plausibility:
    """Mean Spearman ρ(weights, IDF) over questions (constant weights or IDF: skipped) and the stop-word share of
    each question's top-2 words."""
    from scipy.stats import spearmanr

    rhos, shares = [], []
    for pairs in weighted:
        if len(pairs) < 2:
            continue
        words = [w for w, _ in pairs]
        weights = np.asarray([x for _, x in pairs], dtype=np.float64)
        values = np.asarray(idf(words), dtype=np.float64)
        if np.ptp(weights) > 1e-9 and np.ptp(values) > 1e-9:
            rhos.append(float(spearmanr(weights, values).statistic))
        order = np.lexsort((np.arange(len(words)), -weights))[:2]
        shares.append(float(np.mean([words[i].lower() in stop_words for i in order])))
    return Plausibility(spearman_idf=round(float(np.mean(rhos)), 4) if rhos else 0.0,
                        stop_share_top2=round(float(np.mean(shares)), 4) if shares else 0.0, questions=len(shares))


# ----------------------------------------------------------------------------- the Keywords page's default
@dataclass(frozen=True)
class KeywordsDefault:
    """The explanation the Keywords page opens with, and its measured figures (None: not measured)."""

    system: str
    method: str
    faithful: bool | None = None
    plausible: bool | None = None
    comprehensiveness: dict | None = None
    sufficiency: dict | None = None
    spearman_idf: float | None = None
    stop_share_top2: float | None = None
    paper_loss_note: str = ""  # what the report says about the paper-loss FRM's own weights
    report: str = ""
    why: str = ""  # the report's reason for this default, under the rule it states (every-system report)
    reduced: str = ""  # set when the figures come from reduced trainings, not the default build's models
    dev_passes: bool | None = None  # the decision split: faithful and plausible for every seed measured there
    dev_failures: tuple[str, ...] = ()  # this view's failing (seed, figure) on dev, as the report states them
    verdict: str = ""  # "more faithful than random ..." or "NOT more faithful than random: ..." (every-system report)
    comprehensiveness_ci: dict | None = None  # {"top": [mean, low, high], ...} (every-system report)
    sufficiency_ci: dict | None = None


def read_report(path: Path | None = None) -> dict | None:
    try:
        path = REPORT if path is None else path
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _means(figures: dict | None) -> dict | None:
    """``{"top": [mean, low, high]}`` (every-system report) or ``{"top": mean}`` (FRM report) -> ``{"top": mean}``."""
    if not figures:
        return None
    return {g: (v[0] if isinstance(v, list) else v) for g, v in figures.items()}


def keywords_default(path: Path | None = None) -> KeywordsDefault:
    """The report's ``default`` (system, method) with its held-out figures: the every-system report's, else the
    FRM report's; :func:`fallback` without either (or when the every-system report chose none)."""
    if path is None:
        path = next((p for p in (REPORT, FRM_REPORT) if (read_report(p) or {}).get("default")), REPORT)
    path = Path(path)
    report = read_report(path)
    if not report or not report.get("default"):
        return KeywordsDefault(*fallback())
    chosen = report["default"]
    row = next((r for r in report.get("held_out") or report.get("test") or [] if r.get("system") == chosen["system"]
                and r.get("method") == chosen["method"]), {})
    ci = isinstance((row.get("comprehensiveness") or {}).get("top"), list)
    return KeywordsDefault(system=chosen["system"], method=chosen["method"],
                           faithful=row.get("faithful", row.get("more_faithful_than_random")),
                           plausible=row.get("plausible"), comprehensiveness=_means(row.get("comprehensiveness")),
                           sufficiency=_means(row.get("sufficiency")), verdict=row.get("verdict", ""),
                           comprehensiveness_ci=row.get("comprehensiveness") if ci else None,
                           sufficiency_ci=row.get("sufficiency") if ci else None,
                           spearman_idf=row.get("spearman_idf"),
                           stop_share_top2=row.get("stop_share_top2"),
                           paper_loss_note=report.get("paper_loss_note", ""), why=report.get("why", ""),
                           dev_passes=report.get("default_passes_dev"),
                           dev_failures=tuple(f for f in report.get("dev_failures", [])
                                              if f.startswith(f"{chosen['system']} {chosen['method']} seed ")),
                           reduced=str((report.get("reduced_training") or {}).get(chosen["system"], "")), report=str(path.relative_to(REPO_ROOT))
                           if Path(path).is_relative_to(REPO_ROOT) else str(path))


def query_view_row(system: str, dataset: str, path: Path | None = None) -> dict | None:
    """The held-out (test) figures of ``system``'s query view on ``dataset`` (``bench/query_view_faithfulness.py``:
    comprehensiveness and sufficiency with CIs in 1 − RBO units, verdict, plausibility), or None: not measured."""
    report = read_report(QUERY_REPORT if path is None else path)
    if not report or report.get("dataset") != dataset:
        return None
    return next((r for r in report.get("test", []) if r.get("system") == system), None)


def as_dict(f: Faithfulness, p: Plausibility) -> dict:
    return {**asdict(f), "faithful": f.passes, **asdict(p), "plausible": p.passes}
