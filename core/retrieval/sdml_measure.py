"""SDML-CNN's measurements (sdml-bonadiman2019.md §4.2-4.4): exact search of a split's queries against that split's
questions (the dev collection) or the whole collection, each query dropped from its own ranking; dev H@1 (the
paper's main metric, the early-stopping metric), the pair ROC AUC of §4.2, and the untrained mean-GloVe-50d
reference every variant must beat. The system and its training are ``core.retrieval.sdml``.
"""
from __future__ import annotations

import numpy as np
import torch

from core.data.datasets import Dataset
from core.data.tokenizers import IdsEncoder

DEV_METRIC = "hit_rate@1"  # §4.4: H@1 is the paper's main metric
TEST_METRICS = ("hit_rate@1", "hit_rate@10", "recall@100", "mrr@100")


def split_collection(dataset: Dataset, split: str) -> list[str]:
    """Every question of one split's labelled pairs (the dev collection for early stopping)."""
    return sorted({q for p in dataset.pairs[split] for q in (p.id1, p.id2)})


def exact_rankings(query_vecs: np.ndarray, qids: list[str], doc_vecs: np.ndarray, doc_ids: list[str],
                   k: int = 100, metric: str = "l2", name: str = "exact search") -> dict:
    """Exact top-k by squared L2 (``l2``, score −‖q − d‖²) or cosine (``cos``), each query dropped from
    its own ranking (ignore_identical_ids). Returns {qid: Ranking}."""
    from core.retrieval.base import Ranking

    q = torch.from_numpy(np.ascontiguousarray(query_vecs, dtype=np.float32))
    d = torch.from_numpy(np.ascontiguousarray(doc_vecs, dtype=np.float32))
    if metric == "cos":
        q, d = torch.nn.functional.normalize(q, dim=1), torch.nn.functional.normalize(d, dim=1)
    row = {x: i for i, x in enumerate(doc_ids)}
    out = {}
    kk = min(k + 1, len(doc_ids))
    for start in range(0, len(qids), 1024):
        qb = q[start : start + 1024]
        s = qb @ d.T if metric == "cos" else -squared_distances(qb, d)
        own = [row.get(x) for x in qids[start : start + 1024]]
        for i, r in enumerate(own):
            if r is not None:
                s[i, r] = float("-inf")
        vals, idx = s.topk(kk, dim=1)
        for i, qid in enumerate(qids[start : start + 1024]):
            keep = torch.isfinite(vals[i])
            out[qid] = Ranking(name, [doc_ids[j] for j in idx[i][keep][:k].tolist()], vals[i][keep][:k].tolist())
    return out


def squared_distances(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    from models.losses import squared_distances as sq

    return sq(a, b)


def retrieval_scores(encode, dataset: Dataset, split: str, collection: str = "split", k: int = 100,
                     metrics=(DEV_METRIC,), metric: str = "l2") -> dict[str, float]:
    """Metrics (ranx, core.evaluation) of the queries of ``split`` by exact search against the questions
    of that split (``collection="split"``, the dev collection) or the whole collection (``"all"``);
    each query dropped from its own ranking. A query that is not an item of that collection (a BEIR query, a
    candidate list's question) is encoded beside it. ``encode(texts) -> vectors``."""
    from core.evaluation import evaluate_run

    doc_ids = split_collection(dataset, split) if collection == "split" else list(dataset.corpus)
    members = set(doc_ids)
    qrels = {q: {d: r for d, r in rel.items() if d in members} for q, rel in dataset.split_qrels(split).items()}
    qrels = {q: rel for q, rel in qrels.items() if rel}
    if not qrels:  # no query of this split has a paraphrase in the collection: nothing to measure
        return {m: None for m in metrics}
    qids = list(qrels)
    vecs = encode([dataset.corpus[d] for d in doc_ids])
    row = {d: i for i, d in enumerate(doc_ids)}
    outside = [q for q in qids if q not in row]  # queries that are not collection items (BEIR, candidate lists)
    if outside:
        extra = encode([dataset.corpus[q] for q in outside])
        vecs_all = np.concatenate([vecs, extra])
        row_all = {**row, **{q: len(doc_ids) + i for i, q in enumerate(outside)}}
        query_vecs = vecs_all[[row_all[q] for q in qids]]
    else:
        query_vecs = vecs[[row[q] for q in qids]]
    return evaluate_run(qrels, exact_rankings(query_vecs, qids, vecs, doc_ids, k, metric), list(metrics))


def glove_mean_encode(texts: list[str]) -> np.ndarray:
    """The untrained reference: mean of the GloVe-50d vectors of a question's words (zeros if none)."""
    from core.data.tokenizers import words
    from core.data.vectors import load_glove_50d

    glove = load_glove_50d()
    out = np.zeros((len(texts), glove.dim), dtype=np.float32)
    for i, t in enumerate(texts):
        rows = [glove.index[w] for w in words(t) if w in glove.index]
        if rows:
            out[i] = np.asarray(glove.matrix[sorted(rows)]).mean(0)
    return out


def dev_auc(encoder: IdsEncoder, dataset: Dataset, split: str = "dev") -> float:
    """ROC AUC of −‖φ(q1) − φ(q2)‖² on the labelled pairs of a split (the paper's §4.2 stopping metric;
    reported, no longer used for stopping)."""
    from core.evaluation import roc_auc

    pairs = dataset.pairs[split]
    ids = sorted({q for p in pairs for q in (p.id1, p.id2)})
    row = {q: i for i, q in enumerate(ids)}
    vec = encoder.encode([dataset.corpus[q] for q in ids])
    a = vec[[row[p.id1] for p in pairs]]
    b = vec[[row[p.id2] for p in pairs]]
    return roc_auc([p.label for p in pairs], -((a - b) ** 2).sum(1))


def stopping_split(dataset: Dataset) -> str:
    """"dev"; a dataset whose dev split has no query with a paraphrase inside it (a tiny imported file)
    stops on its training queries instead, so the build still runs."""
    members = set(split_collection(dataset, "dev")) if "dev" in dataset.pairs else set()
    has_dev = any(d in members for rel in dataset.split_qrels("dev").values() for d in rel) if members else False
    return "dev" if has_dev else "train"


def reference_scores(dataset: Dataset) -> dict:
    """The untrained reference every SDML variant must beat: mean GloVe-50d, cosine (dev collection H@1
    and test H@1 against the full collection, exact, each query dropped from its own ranking)."""
    dev = retrieval_scores(glove_mean_encode, dataset, stopping_split(dataset), metric="cos")[DEV_METRIC]
    test = retrieval_scores(glove_mean_encode, dataset, "test", "all", metrics=TEST_METRICS, metric="cos")
    return {"system": "glove-mean", "variant": None, "dev": dev, "test": test[DEV_METRIC], "metric": DEV_METRIC,
            "test_metrics": test}
