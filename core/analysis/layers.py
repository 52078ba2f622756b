"""Per-layer analysis for the Layers page (densetrans-cai2021.md Figures 1, 3 and 6).

Discriminativeness of layer ℓ (Figure 1 / Figure 3): the mean over dataset queries q of
``|log cos(q, q⁺) − log cos(q, q⁻)|`` where q⁺ is a relevant question (same paraphrase cluster) and q⁻
an irrelevant one, both embedded with layer ℓ's representation. The paper does not say how q⁻ was
chosen; we offer three samplers and default to ``random`` (a uniformly drawn question outside q's
cluster): ``bm25`` takes the best-ranked BM25 question outside the cluster (a hard negative) and
``labelled`` a question Quora labelled as not duplicate of q (only queries that have one).
Cosines are clipped at 1e-3 before the log (a non-positive cosine has no log); the number of clipped
values is reported.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from core.data.datasets import Dataset
from core.errors import StudioError, UnknownNameError
from core.analysis.evaluation import evaluate_run
from core.retrieval.base import ProgressFn, Retriever, _no_progress

LayerFn = Callable[[list[str]], list[np.ndarray]]
NEGATIVE_SAMPLERS = ("random", "bm25", "labelled")
COS_FLOOR = 1e-3


@dataclass(frozen=True)
class Triple:
    query: str
    positive: str
    negative: str


@dataclass
class LayerCurve:
    """Per-layer discriminativeness of one representation over a sample of queries."""

    label: str
    signed: np.ndarray  # (layers, queries): log cos(q, q⁺) − log cos(q, q⁻)
    clipped: int

    @property
    def values(self) -> np.ndarray:
        """(layers, queries): the paper's |log cos(q, q⁺) − log cos(q, q⁻)|."""
        return np.abs(self.signed)

    @property
    def mean(self) -> np.ndarray:
        return self.values.mean(axis=1)

    @property
    def signed_mean(self) -> np.ndarray:
        """Mean signed gap per layer: > 0 when q⁺ is closer than q⁻ (the |·| of the paper's measure also
        counts noise in the wrong direction, e.g. in untrained random vectors)."""
        return self.signed.mean(axis=1)

    @property
    def std(self) -> np.ndarray:
        return self.values.std(axis=1)

    def quantiles(self, q: Sequence[float] = (0.25, 0.75)) -> np.ndarray:
        return np.quantile(self.values, q, axis=1)


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
    if negatives == "bm25":
        if bm25 is None:
            raise StudioError("the bm25 sampler needs the BM25 index (build bm25 first)")
        hard = {q: r.doc_ids for q, r in bm25.search_many({q: dataset.queries[q] for q in chosen}, k=30).items()}
    for q in chosen:
        rel = qrels[q]
        positive = sorted(rel)[int(rng.integers(len(rel)))]
        if negatives == "labelled":
            negative = labelled[q][int(rng.integers(len(labelled[q])))]
        elif negatives == "bm25" and any(d not in rel for d in hard[q]):
            negative = next(d for d in hard[q] if d not in rel)
        else:
            negative = q
            while negative == q or negative in rel:
                negative = corpus_ids[int(rng.integers(len(corpus_ids)))]
        out.append(Triple(dataset.queries[q], dataset.corpus[positive], dataset.corpus[negative]))
    return out


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return (a * b).sum(axis=1)


def discriminativeness(label: str, layer_fn: LayerFn, triples: list[Triple],
                       progress: ProgressFn = _no_progress, batch: int = 256) -> LayerCurve:
    """|log cos(q, q⁺) − log cos(q, q⁻)| per layer and query (Figure 1 / 3 of densetrans-cai2021.md)."""
    per_layer: list[list[np.ndarray]] = []
    clipped = 0
    for start in range(0, len(triples), batch):
        part = triples[start : start + batch]
        n = len(part)
        layers = layer_fn([t.query for t in part] + [t.positive for t in part] + [t.negative for t in part])
        if not per_layer:
            per_layer = [[] for _ in layers]
        for i, emb in enumerate(layers):
            pos = _cosines(emb[:n], emb[n : 2 * n])
            neg = _cosines(emb[:n], emb[2 * n :])
            clipped += int((pos < COS_FLOOR).sum() + (neg < COS_FLOOR).sum())
            per_layer[i].append(np.log(np.maximum(pos, COS_FLOOR)) - np.log(np.maximum(neg, COS_FLOOR)))
        progress(min(1.0, (start + n) / len(triples)), f"{label}: {start + n}/{len(triples)} queries")
    return LayerCurve(label, np.stack([np.concatenate(v) for v in per_layer]), clipped)


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
