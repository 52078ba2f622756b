"""Per-layer analysis for the Layers page (densetrans-cai2021.md Figures 1, 3 and 6).

Every measure starts from the per-layer cosines cos(q, q⁺) and cos(q, q⁻) of sampled triples (q, q⁺, q⁻): q⁺ is
a relevant question (same paraphrase cluster) and q⁻ an irrelevant one, all three embedded with layer ℓ's
representation. The paper does not say how q⁻ was chosen; we offer three samplers and default to ``random`` (a
uniformly drawn question outside q's cluster): ``bm25`` takes the best-ranked BM25 question outside the cluster
(a hard negative) and ``labelled`` a question Quora labelled as not duplicate of q (only queries that have one).

Two measures per layer (``LayerCurve``):

- **The paper's discriminativeness** (Figures 1 and 3, §4.4.1): the mean of ``|log cos(q, q⁺) − log cos(q, q⁻)|``.
  The log has no value for a non-positive cosine, so a triple with cos⁺ ≤ 0 or cos⁻ ≤ 0 is **excluded** from that
  layer's mean (not clipped to a floor: a floor of 1e-3 adds |log 1e-3| ≈ 6.9 per clipped negative and then decides
  the value) and **counted** (``PaperMeasure.excluded``, ``.excluded_share``).
- **The per-layer AUC** P(cos⁺ > cos⁻) (clip-free, any pooling): the ROC AUC of the cosine as a score separating
  the triples' positive pairs (q, q⁺) from their negative pairs (q, q⁻), i.e. the probability that a randomly drawn
  positive pair of the sample has a higher cosine than a randomly drawn negative pair; ties count ½ (the
  Mann–Whitney rank formula with ``scipy.stats.rankdata`` average ranks, equal to ``sklearn.metrics.roc_auc_score``).
  0.5 = the layer does not separate them, 1 = every positive above every negative.

``bootstrap_ci`` gives percentile bootstrap intervals (queries resampled with replacement, seeded) for one curve
or, paired over the same triples, for the per-layer difference of two (DenseTrans − its −AllDense ablation).
"""
from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.stats import rankdata

from core.data.datasets import Dataset
from core.errors import StudioError, UnknownNameError
from core.evaluation import evaluate_run
from core.registry import default_first_stage
from core.retrieval.base import ProgressFn, Retriever, no_progress

LayerFn = Callable[[list[str]], list[np.ndarray]]
HARD_NEGATIVES = default_first_stage()  # the sampler named after the first stage whose top non-relevant hit it takes
NEGATIVE_SAMPLERS = ("random", HARD_NEGATIVES, "labelled")
MEASURES = ("auc", "paper")
MEASURE_NAMES = {
    "auc": "AUC P(cos(q,q⁺) > cos(q,q⁻)), ties ½",
    "paper": "paper's mean |log cos(q,q⁺) − log cos(q,q⁻)|, triples with a cosine ≤ 0 excluded",
}


@dataclass(frozen=True)
class Triple:
    query: str
    positive: str
    negative: str


def triples_digest(triples: Sequence[Triple]) -> str:
    """A short fingerprint of a triple sample (two curves are paired only over the same triples)."""
    h = hashlib.sha1()
    for t in triples:
        h.update(f"{t.query}\x1f{t.positive}\x1f{t.negative}\x1e".encode())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class PaperMeasure:
    """Figures 1 and 3 of densetrans-cai2021.md per layer: mean |log cos⁺ − log cos⁻| over the triples whose two
    cosines are > 0; the others are excluded and counted."""

    signed: np.ndarray  # (layers, triples): log cos(q, q⁺) − log cos(q, q⁻); NaN where excluded
    excluded: np.ndarray  # (layers,) triples with cos⁺ ≤ 0 or cos⁻ ≤ 0
    total: int  # triples per layer

    @property
    def values(self) -> np.ndarray:
        """(layers, triples): the paper's |log cos(q, q⁺) − log cos(q, q⁻)|, NaN where excluded."""
        return np.abs(self.signed)

    @property
    def mean(self) -> np.ndarray:
        """(layers,) the paper's quantity over the kept triples (NaN when a layer keeps none)."""
        return _nanmean(self.values, axis=1)

    @property
    def signed_mean(self) -> np.ndarray:
        """(layers,) mean signed gap over the kept triples: > 0 when q⁺ is closer than q⁻ (the |·| of the paper's
        measure also counts gaps in the wrong direction)."""
        return _nanmean(self.signed, axis=1)

    @property
    def kept(self) -> np.ndarray:
        return self.total - self.excluded

    @property
    def excluded_share(self) -> np.ndarray:
        return self.excluded / max(self.total, 1)


@dataclass
class LayerCurve:
    """Per-layer cosines of one representation over a triple sample; both measures derive from them."""

    label: str
    pos: np.ndarray  # (layers, triples): cos(q, q⁺)
    neg: np.ndarray  # (layers, triples): cos(q, q⁻)
    digest: str = ""  # triples_digest of the sample

    @property
    def n_layers(self) -> int:
        return int(self.pos.shape[0])

    @property
    def n_triples(self) -> int:
        return int(self.pos.shape[1])

    @cached_property
    def paper(self) -> PaperMeasure:
        """The paper's measure with exclusions (Figures 1, 3)."""
        return paper_measure(self.pos, self.neg)

    @cached_property
    def auc(self) -> np.ndarray:
        """(layers,) P(cos⁺ > cos⁻), ties ½."""
        return layer_auc(self.pos, self.neg)

    def measure(self, name: str) -> np.ndarray:
        """(layers,) point values of ``name`` (one of ``MEASURES``)."""
        if name not in MEASURES:
            raise UnknownNameError("layer measure", name, list(MEASURES))
        return self.auc if name == "auc" else self.paper.mean


@dataclass(frozen=True)
class BootstrapCI:
    """A per-layer estimate with its percentile bootstrap interval (queries resampled; paired for a difference)."""

    measure: str
    label: str  # "A" or "A − B"
    estimate: np.ndarray  # (layers,) on the full sample
    low: np.ndarray
    high: np.ndarray
    level: float
    n_resamples: int
    seed: int
    finite: np.ndarray  # (layers,) resamples with a defined value (the paper's measure can have none)

    def as_dict(self, digits: int = 4) -> dict:
        r = lambda a: [None if not np.isfinite(v) else round(float(v), digits) for v in a]  # noqa: E731
        return {"measure": self.measure, "label": self.label, "estimate": r(self.estimate), "low": r(self.low),
                "high": r(self.high), "level": self.level, "n_resamples": self.n_resamples, "seed": self.seed,
                "finite_resamples": [int(v) for v in self.finite]}


def _nanmean(a: np.ndarray, axis: int) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a layer (or resample) where every triple is excluded
        return np.nanmean(a, axis=axis)


def log_gaps(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """log cos⁺ − log cos⁻ (the term inside Figures 1 and 3's |·|), NaN where either cosine is ≤ 0 (no log)."""
    ok = (pos > 0) & (neg > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, np.log(np.where(ok, pos, 1.0)) - np.log(np.where(ok, neg, 1.0)), np.nan)


def paper_measure(pos: np.ndarray, neg: np.ndarray) -> PaperMeasure:
    """Figures 1/3 of densetrans-cai2021.md from (layers, triples) cosines: non-positive cosines excluded, counted."""
    signed = log_gaps(np.asarray(pos, dtype=np.float64), np.asarray(neg, dtype=np.float64))
    return PaperMeasure(signed, np.isnan(signed).sum(axis=-1), int(signed.shape[-1]))


def layer_auc(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """AUC P(cos⁺ > cos⁻), ties ½, along the last axis (a clip-free stand-in for Figures 1/3's measure).

    Mann–Whitney: (sum of the positives' average ranks among all scores − n⁺(n⁺+1)/2) / (n⁺ n⁻), with
    ``scipy.stats.rankdata``; leading axes (layers, resamples) are kept.
    """
    pos = np.asarray(pos, dtype=np.float64)
    neg = np.asarray(neg, dtype=np.float64)
    n_pos, n_neg = pos.shape[-1], neg.shape[-1]
    if n_pos == 0 or n_neg == 0:
        return np.full(pos.shape[:-1], np.nan)
    ranks = rankdata(np.concatenate([pos, neg], axis=-1), method="average", axis=-1)
    return (ranks[..., :n_pos].sum(axis=-1) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def _resampled(curve: LayerCurve, measure: str, idx: np.ndarray) -> np.ndarray:
    """(layers, resamples) values of ``measure`` on the triples ``idx`` (resamples, triples) picks."""
    out = np.empty((curve.n_layers, idx.shape[0]))
    for layer in range(curve.n_layers):  # one layer at a time keeps memory at resamples × triples
        pos, neg = curve.pos[layer][idx], curve.neg[layer][idx]
        out[layer] = layer_auc(pos, neg) if measure == "auc" else _nanmean(np.abs(log_gaps(pos, neg)), axis=-1)
    return out


def bootstrap_ci(a: LayerCurve, measure: str, b: LayerCurve | None = None, n_resamples: int = 1000,
                 level: float = 0.95, seed: int = 13) -> BootstrapCI:
    """Percentile bootstrap CI per layer of ``measure`` for ``a``, or of the paired difference a − b (Figure 3:
    DenseTrans − −AllDense): each resample draws the triples' queries with replacement once and scores both
    curves on the same draw. The paper's measure keeps each curve's own exclusions within a resample."""
    if measure not in MEASURES:
        raise UnknownNameError("layer measure", measure, list(MEASURES))
    if b is not None:
        if a.n_triples != b.n_triples or (a.digest and b.digest and a.digest != b.digest):
            raise StudioError(f"{a.label} and {b.label} were measured on different triples; a paired bootstrap "
                              "needs the same sample")
        if a.n_layers != b.n_layers:
            raise StudioError(f"{a.label} has {a.n_layers} layers and {b.label} {b.n_layers}: no per-layer difference")
    if a.n_triples == 0:
        raise StudioError("no triples to resample")
    idx = np.random.default_rng(seed).integers(0, a.n_triples, size=(n_resamples, a.n_triples))
    stats = _resampled(a, measure, idx)
    estimate = a.measure(measure)
    if b is not None:
        stats = stats - _resampled(b, measure, idx)
        estimate = estimate - b.measure(measure)
    alpha = (1 - level) / 2
    finite = np.isfinite(stats).sum(axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN layers give NaN bounds
        low, high = np.nanquantile(stats, [alpha, 1 - alpha], axis=1)
    return BootstrapCI(measure, a.label if b is None else f"{a.label} − {b.label}", np.asarray(estimate, float),
                       low, high, level, n_resamples, seed, finite)


def sample_triples(
    dataset: Dataset,
    n: int,
    negatives: str = "random",
    bm25: Retriever | None = None,
    seed: int = 13,
    split: str = "all",
) -> list[Triple]:
    """(q, q⁺, q⁻) for ``n`` seeded dataset queries (see module docstring for the samplers)."""
    if negatives not in NEGATIVE_SAMPLERS:
        raise UnknownNameError("negative sampler", negatives, list(NEGATIVE_SAMPLERS))
    rng = np.random.default_rng(seed)
    qrels = dataset.split_qrels(split)
    qids = sorted(qrels)
    if not qids:
        raise StudioError(f"{dataset.name} has no queries with relevant questions for this analysis")
    labelled: dict[str, list[str]] = {}
    if negatives == "labelled":
        for p in dataset.pairs.get("all", []):
            if p.label == 0:
                labelled.setdefault(p.id1, []).append(p.id2)
                labelled.setdefault(p.id2, []).append(p.id1)
        qids = [q for q in qids if q in labelled]
        if not qids:
            raise StudioError("no query has a labelled negative in this dataset; choose another sampler")
    chosen = [qids[i] for i in rng.permutation(len(qids))[: min(n, len(qids))]]
    corpus_ids = list(dataset.corpus)
    out = []
    hard: dict[str, list[str]] = {}
    if negatives == HARD_NEGATIVES:
        if bm25 is None:
            raise StudioError("the bm25 sampler needs the BM25 index (build bm25 first)")
        hard = {q: r.doc_ids for q, r in bm25.search_many({q: dataset.queries[q] for q in chosen}, k=30).items()}
    for q in chosen:
        rel = qrels[q]
        positive = sorted(rel)[int(rng.integers(len(rel)))]
        if negatives == "labelled":
            negative = labelled[q][int(rng.integers(len(labelled[q])))]
        elif negatives == HARD_NEGATIVES and any(d not in rel for d in hard[q]):
            negative = next(d for d in hard[q] if d not in rel)
        else:
            negative = q
            while negative == q or negative in rel:
                negative = corpus_ids[int(rng.integers(len(corpus_ids)))]
        out.append(Triple(dataset.queries[q], dataset.corpus[positive], dataset.corpus[negative]))
    return out


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)  # float64: near-1 cosines (MiniLM [CLS]) keep their order
    b = np.asarray(b, dtype=np.float64)
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return (a * b).sum(axis=1)


def discriminativeness(label: str, layer_fn: LayerFn, triples: list[Triple],
                       progress: ProgressFn = no_progress, batch: int = 256) -> LayerCurve:
    """Per-layer cos(q, q⁺) and cos(q, q⁻) of every triple (Figures 1 and 3 of densetrans-cai2021.md); the
    returned curve gives the paper's measure with exclusions (``.paper``) and the AUC (``.auc``)."""
    pos_parts: list[list[np.ndarray]] = []
    neg_parts: list[list[np.ndarray]] = []
    for start in range(0, len(triples), batch):
        part = triples[start : start + batch]
        n = len(part)
        layers = layer_fn([t.query for t in part] + [t.positive for t in part] + [t.negative for t in part])
        if not pos_parts:
            pos_parts, neg_parts = [[] for _ in layers], [[] for _ in layers]
        for i, emb in enumerate(layers):
            pos_parts[i].append(_cosines(emb[:n], emb[n : 2 * n]))
            neg_parts[i].append(_cosines(emb[:n], emb[2 * n :]))
        progress(min(1.0, (start + n) / len(triples)), f"{label}: {start + n}/{len(triples)} queries")
    if not pos_parts:
        raise StudioError("no triples to measure")
    return LayerCurve(label, np.stack([np.concatenate(v) for v in pos_parts]),
                      np.stack([np.concatenate(v) for v in neg_parts]), triples_digest(triples))


def query_layer_cosines(layer_fn: LayerFn, query: str, targets: dict[str, str]) -> dict[str, list[float]]:
    """For one query: per layer, the cosine to each target text (top hits, a known paraphrase)."""
    names = list(targets)
    layers = layer_fn([query] + [targets[n] for n in names])
    return {name: [float(_cosines(emb[:1], emb[i + 1 : i + 2])[0]) for emb in layers] for i, name in enumerate(names)}


def recall_curve(
    retriever: Retriever,
    dataset: Dataset,
    cutoffs: Sequence[int] = (1, 5, 10, 20, 50, 100),
    split: str = "test",
    max_queries: int = 500,
    seed: int = 13,
) -> dict[int, float]:
    """Recall@k at several cutoffs on a seeded sample of ``split`` queries (Figure 6)."""
    qrels = dataset.split_qrels(split) if split in dataset.query_splits or split == "all" else dataset.split_qrels()
    qids = sorted(qrels)
    rng = np.random.default_rng(seed)
    qids = [qids[i] for i in sorted(rng.permutation(len(qids))[:max_queries])]
    runs = retriever.search_many({q: dataset.queries[q] for q in qids}, k=max(cutoffs),
                                 ignore_identical_ids=dataset.ignore_identical_ids)
    scores = evaluate_run({q: qrels[q] for q in qids}, runs, [f"recall@{k}" for k in cutoffs])
    return {k: scores[f"recall@{k}"] for k in cutoffs}
