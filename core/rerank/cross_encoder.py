"""System "cross-encoder": all-MiniLM-L6-v2 + classification head on [CLS] over "[CLS] q1 [SEP] q2 [SEP]",
fine-tuned with cross-entropy on the QQP cluster-disjoint training pairs (tree-search-bert-guo.md §3.2,
interaction-based method; also the "BERT" baseline of the FRM paper and the tree-bert-cross scorer).

No pretrained cross-encoder is available offline, so this is always fine-tuned: paper profile = every
training pair, up to 3 epochs, early stopping on dev MAP@20; quick profile = a deterministic subsample
of training pairs and one epoch (≤ 3 min on 2 CPU cores; sizes in ``PROFILES``). Dev MAP@20 reranks
the top-10 of the pretrained MiniLM bi-encoder within the dev sub-collection for a sample of dev
queries (cheap, and no test data is touched). all-MiniLM-L6-v2 was pre-trained on data that includes
Quora duplicates.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from core.artifacts import config_from_dict, load_json, load_torch, save_json, save_torch
from core.data import Dataset, Pair
from core.errors import MissingArtifactError
from core.registry import build_command, system_dir
from core.retrieval.base import ProgressFn, Ranking, Reranker, _no_progress
from core.training import EarlyStopping, check_profile, device, linear_warmup_decay, resume_from_checkpoint, set_seed

QUORA_NOTE = "all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates"


@dataclass(frozen=True)
class CrossEncoderConfig:
    """Fine-tuning settings; defaults from tree-search-bert-guo.md §4.2 (paper profile)."""

    max_length: int = 64  # §4.2 (pairs of QQP questions: 99% fit)
    lr: float = 2e-5  # §4.2
    warmup: float = 0.1  # §4.2
    batch_size: int = 32  # §4.2
    epochs: int = 3  # not stated in the paper; early stopping on dev MAP@20
    train_pairs: int = 0  # 0 = all training pairs
    dev_queries: int = 200
    dev_depth: int = 10
    patience: int = 1
    score_batch: int = 256
    seed: int = 13


PROFILES = {"paper": {}, "quick": {"epochs": 1, "train_pairs": 6400, "dev_queries": 80}}


class CrossEncoderReranker(Reranker):
    """Scores (query, question) pairs with the fine-tuned cross-encoder (logit margin); counts pairs."""

    name = "cross-encoder"

    def __init__(self, model, tokenizer, max_length: int = 64, batch_size: int = 256) -> None:
        self.model, self.tokenizer, self.max_length, self.batch_size = model, tokenizer, max_length, batch_size
        self.device = device()
        self.model.to(self.device).eval()
        self.pairs_scored = 0

    def score_pairs(self, queries: list[str], docs: list[str]) -> np.ndarray:
        """Batched, length-sorted, ``inference_mode``; higher = more similar."""
        n = len(queries)
        out = np.empty(n, dtype=np.float32)
        if n == 0:
            return out
        lengths = np.fromiter((len(q) + len(d) for q, d in zip(queries, docs)), dtype=np.int64, count=n)
        order = np.argsort(-lengths, kind="stable")
        self.model.eval()
        with torch.inference_mode():
            for start in range(0, n, self.batch_size):
                idx = order[start : start + self.batch_size]
                enc = self.tokenizer([queries[i] for i in idx], [docs[i] for i in idx], padding=True,
                                     truncation=True, max_length=self.max_length, return_tensors="pt").to(self.device)
                logits = self.model(enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids"))
                out[idx] = self.model.score(logits).float().cpu().numpy()
        self.pairs_scored += n
        return out


def new_model():
    """(tokenizer, untrained BertCrossEncoder on all-MiniLM-L6-v2)."""
    from core.retrieval.bert import load_backbone
    from models.bert import BertCrossEncoder

    tokenizer, backbone = load_backbone()
    return tokenizer, BertCrossEncoder(backbone)


def _folder(dataset_name: str) -> Path:
    return system_dir(dataset_name, "cross-encoder")


def make_config(profile: str = "quick") -> CrossEncoderConfig:
    return replace(CrossEncoderConfig(), **PROFILES[check_profile(profile)])


def dev_candidates(dataset: Dataset, config: CrossEncoderConfig) -> dict[str, Ranking]:
    """Top-``dev_depth`` of the pretrained MiniLM (cached collection embeddings) within the dev
    sub-collection for a deterministic sample of dev queries (self excluded)."""
    from core.retrieval import bert

    vectors = bert.collection_embeddings(dataset, "mean")
    ids = list(dataset.corpus)
    row = {d: i for i, d in enumerate(ids)}
    dev_ids = sorted({q for p in dataset.pairs["dev"] for q in (p.id1, p.id2)})
    qids = sorted(dataset.split_qrels("dev"))
    if config.dev_queries and len(qids) > config.dev_queries:
        qids = sorted(np.random.default_rng(config.seed).choice(qids, config.dev_queries, replace=False).tolist())
    sub = vectors[[row[d] for d in dev_ids]]
    sims = vectors[[row[q] for q in qids]] @ sub.T
    dev_arr = np.asarray(dev_ids)
    out = {}
    for i, q in enumerate(qids):
        sims[i, dev_ids.index(q)] = -np.inf  # the query itself
        top = np.argsort(-sims[i])[: config.dev_depth]
        out[q] = Ranking("minilm-dev", dev_arr[top].tolist(), sims[i, top].astype(float).tolist())
    return out


def dev_map(reranker: CrossEncoderReranker, dataset: Dataset, candidates: dict[str, Ranking]) -> float:
    from core.evaluation import evaluate_run

    qrels = dataset.split_qrels("dev")
    run = reranker.rerank_many({q: dataset.queries[q] for q in candidates}, candidates, dataset.corpus)
    return evaluate_run({q: qrels[q] for q in candidates}, run, ["map@20"])["map@20"]


def train(model, tokenizer, pairs: list[Pair], corpus: dict[str, str], config: CrossEncoderConfig,
          folder: Path | None = None, evaluate=None, progress: ProgressFn = _no_progress) -> dict:
    """Cross-entropy fine-tuning (§3.2 interaction-based, §4.2 hyper-parameters).

    ``evaluate(reranker) -> float`` is the dev metric (higher is better) used for early stopping; with a
    ``folder`` the best weights go to ``model.pt`` and a resumable ``checkpoint.pt`` is written per epoch.
    """
    from tqdm.auto import tqdm

    set_seed(config.seed)
    dev = device()
    model.to(dev)
    steps_per_epoch = math.ceil(len(pairs) / config.batch_size)
    total = steps_per_epoch * config.epochs
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.0)
    scheduler = linear_warmup_decay(optimizer, total, config.warmup)
    stopper = EarlyStopping(patience=config.patience)
    key = repr(sorted(asdict(config).items()))
    start_epoch = resume_from_checkpoint(folder / "checkpoint.pt" if folder is not None else None, key,
                                         model, optimizer, scheduler, stopper)
    loss_fn = torch.nn.CrossEntropyLoss()
    losses: list[float] = []
    t0 = time.perf_counter()
    for epoch in range(start_epoch, config.epochs):
        if stopper.should_stop:
            break
        order = np.random.default_rng(config.seed + epoch).permutation(len(pairs))
        model.train()
        for step in tqdm(range(steps_per_epoch), desc=f"cross-encoder epoch {epoch + 1}", leave=False):
            batch = [pairs[i] for i in order[step * config.batch_size : (step + 1) * config.batch_size]]
            enc = tokenizer([corpus[p.id1] for p in batch], [corpus[p.id2] for p in batch], padding=True,
                            truncation=True, max_length=config.max_length, return_tensors="pt").to(dev)
            labels = torch.tensor([int(p.label > 0) for p in batch], device=dev)
            loss = loss_fn(model(enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids")), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            done = epoch * steps_per_epoch + step + 1
            progress(0.9 * done / total, f"cross-encoder: step {done}/{total}, loss {losses[-1]:.4f}")
        score = evaluate(CrossEncoderReranker(model, tokenizer, config.max_length, config.score_batch)) if evaluate else -float(np.mean(losses[-steps_per_epoch:]))
        model.train()
        best = stopper.step(score, epoch)
        if folder is not None:
            if best:
                save_torch(folder / "model.pt", model.state_dict())
            save_torch(folder / "checkpoint.pt", {
                "model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                "epoch": epoch, "best": stopper.best, "best_epoch": stopper.best_epoch, "bad": stopper.bad,
                "history": stopper.history, "config": key})
        progress(0.9 * (epoch + 1) / config.epochs, f"cross-encoder: epoch {epoch + 1} dev {score:.4f}")
    model.eval()
    return {"train_pairs": len(pairs), "epochs_run": len(stopper.history), "dev_history": stopper.history,
            "best_epoch": stopper.best_epoch, "train_seconds": time.perf_counter() - t0,
            "final_train_loss": float(np.mean(losses[-20:])) if losses else None}


def build(dataset: Dataset, profile: str = "quick", progress: ProgressFn = _no_progress,
          variant: str | None = None) -> dict:
    """Fine-tune on the training pairs (subsampled in the quick profile); early stop on dev MAP@20."""
    from core.retrieval.bert import sample_pairs

    if not dataset.pairs.get("train"):
        raise MissingArtifactError("training pairs", "a dataset with labelled pairs (e.g. qqp-bimpm)", "not available")
    config = make_config(profile)
    folder = _folder(dataset.name)
    start = time.perf_counter()
    progress(0.0, "cross-encoder: dev candidates from the MiniLM embeddings")
    candidates = dev_candidates(dataset, config) if dataset.pairs.get("dev") else None
    tokenizer, model = new_model()
    pairs = sample_pairs(dataset.pairs["train"], config.train_pairs, config.seed)
    metrics = train(model, tokenizer, pairs, dataset.corpus, config, folder,
                    (lambda r: dev_map(r, dataset, candidates)) if candidates else None, progress)
    save_json(folder / "config.json", config)
    metrics.update({"build_seconds": time.perf_counter() - start, "profile": profile, "note": QUORA_NOTE,
                    "dev_metric": "map@20 reranking MiniLM top-10 in the dev sub-collection"})
    save_json(folder / "metrics.json", metrics)
    progress(1.0, f"cross-encoder: trained in {metrics['build_seconds']:.0f}s")
    return metrics


def is_built(dataset: Dataset, variant: str | None = None) -> bool:
    folder = _folder(dataset.name)
    return (folder / "model.pt").is_file() and (folder / "config.json").is_file()


def load(dataset: Dataset, variant: str | None = None, **options) -> CrossEncoderReranker:
    folder = _folder(dataset.name)
    command = build_command("cross-encoder", dataset.name)
    config = config_from_dict(CrossEncoderConfig, load_json(folder / "config.json", "the cross-encoder", command))
    state = load_torch(folder / "model.pt", "the cross-encoder", command)
    tokenizer, model = new_model()
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        raise MissingArtifactError("the cross-encoder", command, f"corrupt ({exc})") from None
    return CrossEncoderReranker(model, tokenizer, config.max_length, int(options.get("batch_size", config.score_batch)))


def config_dict(variant: str | None = None) -> dict:
    return {**asdict(CrossEncoderConfig()), "quick profile": PROFILES["quick"],
            "paper defaults": "lr 2e-5, 10% warm-up, max length 64, batch 32 (§4.2)", "note": QUORA_NOTE}
