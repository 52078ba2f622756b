"""Contrastive training of a siamese first-stage encoder, shared by DenseTrans and its DualEncoder
baseline (densetrans-cai2021.md §3.3, Eq. (6)-(7); §4.1 BM25 hard negatives; §4.2.1 DualEncoder).

Sampling (a deviation from sampling *pairs*): the paper trains on 79.6k training questions
with 1.69 paraphrases each, so every question counts about alike. Here the cluster closure of the
7,894 positive train pairs gives 37,960 (query, paraphrase) pairs, 40% of them from 11 clusters; a run
over pairs mostly sees a handful of topics. So each step draws ``batch_queries`` train-split queries
uniformly (a fresh permutation per pass over the queries), one paraphrase each (uniform within the
query's cluster) and ``hard_negatives`` negatives each from the query's BM25 top-``bm25_depth`` minus
its cluster (§4.1). The softmax of Eq. (6) runs over the batch's positives and hard negatives
(in-batch negatives); candidates that are the query itself or in its cluster are masked out.

Early stopping (``core.training.TrainLog``): dev Recall@100 every ``eval_every`` steps (dev queries
ranked exactly against the dev questions plus ``dev_distractors`` other non-test questions, each query
dropped from its own ranking); the best checkpoint is kept; training ends after ``patience``
evaluations without improvement ("patience"), at ``max_steps`` ("cap") or after ``max_seconds``
("budget"). ``last.pt`` holds model + optimiser + scheduler + log after every evaluation, so a run
interrupted (or a longer profile with the same settings) resumes there.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from core.artifacts import save_torch
from core.data.datasets import Dataset
from core.evaluation import evaluate_run
from core.retrieval.indexing import IndexSpec
from core.retrieval.base import ProgressFn, no_progress
from core.training import TrainLog, device, linear_warmup_decay, load_train_state, save_train_state


@dataclass(frozen=True)
class TrainPlan:
    """Optimisation settings of one contrastive run (see the module docstring)."""

    batch_queries: int = 128
    hard_negatives: int = 1
    bm25_depth: int = 100
    temperature: float = 0.05
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-8
    weight_decay: float = 0.0
    warmup_fraction: float = 0.1
    max_steps: int = 2000
    eval_every: int = 50
    patience: int = 4
    max_seconds: float = 0.0  # 0 = no time budget
    dev_distractors: int = 5000
    train_fraction: float = 1.0  # share of the positive train pairs used (data-size curve)
    seed: int = 13
    patience_after_warmup: bool = False  # evaluations inside the warm-up do not count towards the patience

    @property
    def grace_steps(self) -> int:
        """The steps whose evaluations the patience ignores: the warm-up, when ``patience_after_warmup``."""
        return int(self.max_steps * self.warmup_fraction) if self.patience_after_warmup else 0


# ----------------------------------------------------------------------------- data
def training_positives(dataset: Dataset, fraction: float = 1.0, seed: int = 13) -> dict[str, list[str]]:
    """Train-split query -> its paraphrases (cluster closure of the chosen positive train pairs).

    ``fraction`` < 1 keeps a seeded random share of the positive train pairs and closes clusters over
    those only (the data-size curve); 1 gives every train query its whole cluster.
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"train fraction must be in (0, 1], got {fraction}")
    train = dataset.split_queries("train")
    if fraction >= 1:
        return {q: sorted(d for d in dataset.qrels.get(q, {}) if d != q) for q in train
                if any(d != q for d in dataset.qrels.get(q, {}))}
    pairs = sorted({(p.id1, p.id2) for p in dataset.pairs.get("train", []) if p.label > 0})
    rng = np.random.default_rng(seed)
    keep = [pairs[i] for i in sorted(rng.permutation(len(pairs))[: max(1, round(fraction * len(pairs)))])]
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in keep:
        parent[find(a)] = find(b)
    clusters: dict[str, list[str]] = {}
    for x in list(parent):
        clusters.setdefault(find(x), []).append(x)
    # a pair of a question with itself makes a one-member cluster: no paraphrase to sample
    return {q: sorted(m for m in members if m != q) for members in clusters.values() if len(members) > 1
            for q in members}


class QuerySampler:
    """Deterministic batches: uniform queries (permutation per pass), one positive and ``hard`` BM25
    negatives each; batch ``step`` depends only on (seed, step), so training resumes exactly."""

    def __init__(self, positives: dict[str, list[str]], negatives: dict[str, list[str]], batch: int,
                 hard: int, seed: int = 13) -> None:
        if not positives:
            raise ValueError("no training query has a paraphrase: nothing to train on")
        self.queries = sorted(positives)
        self.positives, self.negatives = positives, negatives
        self.batch, self.hard, self.seed = min(batch, len(self.queries)), hard, seed

    @property
    def steps_per_pass(self) -> int:
        return max(1, len(self.queries) // self.batch)

    def __call__(self, step: int) -> tuple[list[str], list[str], list[str]]:
        """(queries, one positive per query, hard negatives) of batch number ``step``."""
        p, b = divmod(step, self.steps_per_pass)
        order = np.random.default_rng([self.seed, p]).permutation(len(self.queries))
        qids = [self.queries[i] for i in order[b * self.batch : (b + 1) * self.batch]]
        rng = np.random.default_rng([self.seed, step, 1])
        pos = [self.positives[q][int(rng.integers(len(self.positives[q])))] for q in qids]
        neg: list[str] = []
        for q in qids:
            pool = self.negatives.get(q) or []
            if pool and self.hard:
                neg.extend(pool[int(j)] for j in rng.integers(0, len(pool), self.hard))
        return qids, pos, neg


def candidate_mask(qids: list[str], dids: list[str], positives: dict[str, list[str]]) -> torch.Tensor:
    """True where candidate j is query i itself or one of its paraphrases (not a negative for i)."""
    sets = {q: set(positives.get(q, ())) for q in qids}
    return torch.tensor([[d == q or d in sets[q] for d in dids] for q in qids], dtype=torch.bool)


# ----------------------------------------------------------------------------- dev evaluation
def dev_collection(dataset: Dataset, distractors: int, seed: int = 13) -> dict[str, str]:
    """Dev questions + ``distractors`` seeded other non-test questions (0 = every non-test question)."""
    dev_ids = sorted({q for p in dataset.pairs.get("dev", []) for q in (p.id1, p.id2)}
                     | set(dataset.query_splits.get("dev", [])))
    test_ids = {q for p in dataset.pairs.get("test", []) for q in (p.id1, p.id2)} | set(dataset.query_splits.get("test", []))
    dev_set = set(dev_ids)
    others = sorted(q for q in dataset.corpus if q not in test_ids and q not in dev_set)
    if distractors and distractors < len(others):
        rng = np.random.default_rng(seed)
        others = sorted(rng.choice(others, size=distractors, replace=False).tolist())
    return {q: dataset.corpus[q] for q in dev_ids + others if q in dataset.corpus}


def split_score(encoder, dataset: Dataset, collection: dict[str, str], split: str = "dev",
                metrics: tuple[str, ...] = ("recall@100",)) -> dict[str, float]:
    """Rank ``split``'s queries exactly (Flat, cosine) against ``collection``, each query dropped from
    its own ranking; ranx scores of ``metrics``."""
    from core.retrieval.dense import DenseRetriever, l2_normalize

    vectors = l2_normalize(encoder.encode(list(collection.values())))
    retriever = DenseRetriever.from_vectors("dev", encoder, collection, vectors, IndexSpec("Flat"))
    queries = dataset.split_queries(split)
    rankings = retriever.search_many(queries, k=100, ignore_identical_ids=True)
    return evaluate_run(dataset.split_qrels(split), rankings, list(metrics))


# ----------------------------------------------------------------------------- training loop
def encode_by_length(model: torch.nn.Module, to_ids: Callable[[list[str]], torch.Tensor], texts: list[str],
                     dev: torch.device, chunk: int = 64) -> torch.Tensor:
    """``model`` over ``texts`` in chunks of similar length (each padded to its own longest text, not
    the batch's: ~2× fewer padded positions on QQP), rows returned in input order; differentiable."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i].split()))
    parts = [model(to_ids([texts[i] for i in order[s : s + chunk]]).to(dev)) for s in range(0, len(order), chunk)]
    out = torch.cat(parts)
    inverse = torch.empty(len(order), dtype=torch.long)
    inverse[torch.tensor(order)] = torch.arange(len(order))
    return out[inverse.to(out.device)]


def fit(model: torch.nn.Module, to_ids: Callable[[list[str]], torch.Tensor], encoder, dataset: Dataset,
        plan: TrainPlan, folder, config_key: str, reference: dict | None = None,
        progress: ProgressFn = no_progress, resume: bool = True, label: str = "encoder") -> tuple[TrainLog, dict]:
    """Train ``model`` (ids -> L2-normalised vectors) with Eq. (6)-(7); best dev checkpoint in
    ``folder/model.pt``. Returns the TrainLog and run facts (queries, seconds, steps)."""
    from core.retrieval.negatives import bm25_negatives
    from models.losses import SampledSoftmaxLoss

    dev = device()
    model.to(dev)
    positives = training_positives(dataset, plan.train_fraction, plan.seed)
    negatives = (bm25_negatives(dataset, "train", plan.bm25_depth, progress=lambda f, m: progress(0.05 * f, m))
                 if plan.hard_negatives else {})
    sampler = QuerySampler(positives, negatives, plan.batch_queries, plan.hard_negatives, plan.seed)
    optim = torch.optim.Adam(model.parameters(), lr=plan.lr, betas=tuple(plan.betas), eps=plan.eps,
                             weight_decay=plan.weight_decay)
    sched = linear_warmup_decay(optim, plan.max_steps, plan.warmup_fraction)
    loss_fn = SampledSoftmaxLoss(plan.temperature)
    log = TrainLog("recall@100", patience=plan.patience, max_steps=plan.max_steps, reference=reference,
                   grace_steps=plan.grace_steps)
    collection = dev_collection(dataset, plan.dev_distractors, plan.seed)
    last = folder / "last.pt"
    parts = {"model": model, "optim": optim, "sched": sched}
    step, seconds_before = 0, 0.0
    state = load_train_state(last, config_key, parts) if resume else None
    if state is not None:
        step, seconds_before, log = int(state["step"]), float(state["seconds"]), state["log"]
        log.reference = reference
        progress(0.05, f"{label}: resuming at step {step}")
    t0 = time.perf_counter()

    def elapsed() -> float:
        return seconds_before + time.perf_counter() - t0

    def evaluate(loss: float | None) -> None:
        value = split_score(encoder, dataset, collection)["recall@100"]
        if log.record(step, step * sampler.batch / len(sampler.queries), elapsed(), value, loss):
            save_torch(folder / "model.pt", {k: v.detach().cpu() for k, v in model.state_dict().items()})
        save_train_state(last, config_key, parts, step, elapsed(), log)
        progress(0.05 + 0.75 * step / plan.max_steps,
                 f"{label}: step {step}/{plan.max_steps} dev Recall@100 {value:.4f} (best {log.best_dev:.4f})")

    if step == 0 and not log.curve:
        evaluate(None)  # the untrained starting point of the curve
    reason = None
    running, count = 0.0, 0
    model.train()
    while step < plan.max_steps and not log.should_stop:
        if plan.max_seconds and elapsed() > plan.max_seconds:
            reason = "budget"
            break
        qids, pos, neg = sampler(step)
        dids = pos + neg
        vecs = encode_by_length(model, to_ids, [dataset.corpus[x] for x in qids + dids], dev)
        q, d = vecs[: len(qids)], vecs[len(qids) :]
        loss = loss_fn(q, d, candidate_mask(qids, dids, positives).to(dev))  # Eq. (6)-(7)
        optim.zero_grad(set_to_none=True)
        loss.backward()
        optim.step()
        sched.step()
        step += 1
        running += float(loss.detach())
        count += 1
        if step % plan.eval_every == 0 or step == plan.max_steps:
            evaluate(running / max(1, count))
            running, count = 0.0, 0
            model.train()
    log.finish(reason)
    if not (folder / "model.pt").is_file():  # resumed a finished run whose checkpoint was removed
        save_torch(folder / "model.pt", {k: v.detach().cpu() for k, v in model.state_dict().items()})
    facts = {"train_queries": len(sampler.queries), "train_pairs": sum(len(v) for v in positives.values()),
             "steps": step, "steps_per_pass": sampler.steps_per_pass, "train_seconds": elapsed(),
             "dev_collection": len(collection)}
    return log, facts
