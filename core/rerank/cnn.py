"""System ``cnn-rerank``: Severyn & Moschitti CNN reranker (cnn-rerank-severyn2015.md §3-5).

One generic path for every dataset with labels (``core.training_data.training_data``): the training
split's labelled pairs (TrecQA: TRAIN's candidates, or TRAIN-ALL's with ``cnn-rerank@train-all``; QQP and pairs TSVs:
the cluster-disjoint training pairs; BEIR: qrels positives + BM25 negatives; candidate lists: their
labels, split by query). Convergence rule (§4.1): ≤ 25 epochs, early stopping with patience 5 epochs
on dev MAP, the best checkpoint kept. The dev signal is MAP of the CNN reranking each dev query's own
candidate list, or, on a collection, BM25's top 20 (query removed from its own ranking; 600 sampled
dev queries in the quick profile). It is computed every 10 mini-batches as in §4.1 when it costs at
most ``DEV_PAIRS_EVERY_STEPS`` pair scorings (TrecQA DEV: 1,148), else once per epoch (QQP: 12,000,
too many for every 10 mini-batches on CPU). The quick profile caps the epochs at
``quick_pair_budget`` / training pairs (QQP: 4 epochs; TrecQA: 13, beyond where patience stops it).

Variants: ``None`` = with the four overlap features (Table 3), ``"no-features"`` = without (Table 2),
``"train-all"`` = with features, trained on TrecQA's TRAIN-ALL split (1,229 questions, 53,417 pairs with
automatic labels; Table 3's headline row), early stopping on DEV as above, at most ``TRAIN_ALL_EPOCHS``
epochs in the quick profile (the paper profile: 25). Every build's vocabulary and IDF statistics
cover the texts of the splits it uses (the other training split is left out, as the paper's |V| differs
between TRAIN and TRAIN-ALL).
Preprocessing §5.1: the one text pipeline's PTB tokens (``core.data.pipeline``; the paper's data came
tokenized), lower-cased, digits → 0. Embeddings:
static GloVe 6B 50-d (``core.data.vectors.load_glove_50d``), unknown words U[−0.25, 0.25] (seeded).
Optimiser: Adadelta (ρ = 0.95, ε = 1e-6, lr 1.0), batch 50, dropout 0.5, L2 as §4.1.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from core.artifacts import config_from_dict, load_json, load_torch, save_json, save_torch
from core.data.datasets import Dataset
from core.data.loaders import training_split_view
from core.errors import MissingArtifactError, StudioError, UnknownNameError
from core.evaluation import evaluate_run
from core.data.overlap import OverlapFeaturizer, normalize_tokens
from core.data.pipeline import check_stamp, is_current, stamp
from core.registry import build_command, system_dir
from core.retrieval.base import ProgressFn, Ranking, Reranker, no_progress
from core.systems import registration_for
from core.training import EarlyStopping, check_profile, device, set_seed
from core.training_data import training_data
from models.cnn_reranker import CNNConfig, CNNPairReranker, cnn_loss

REGISTRATION = registration_for(__name__)  # this system's SystemSpec (its module in core.systems)

VARIANTS = ("no-features", "train-all")
TRAIN_ALL = "train-all"  # the variant and the TrecQA split it trains on
OTHER_TRAINING_SPLITS = (TRAIN_ALL,)  # left out of every other build (vocabulary, IDF, training pairs)
TRAIN_ALL_EPOCHS = 6  # quick profile's deterministic cap for TRAIN-ALL (53,417 pairs an epoch on a shared CPU)
PAD, UNK = 0, 1
DEV_PAIRS_EVERY_STEPS = 5000  # dev signals up to this many pair scorings run every ``eval_every`` mini-batches


@dataclass(frozen=True)
class CNNTrainConfig:
    """§4.1: Adadelta, batch 50, 25 epochs, early stopping (5 epochs) on dev MAP every 10 mini-batches."""

    epochs: int = 25
    batch_size: int = 50
    patience_epochs: int = 5
    eval_every: int = 10  # mini-batches, when the dev signal is small (see DEV_PAIRS_EVERY_STEPS)
    max_len: int = 100
    rho: float = 0.95
    eps: float = 1e-6
    seed: int = 13
    quick_pair_budget: int = 64_000  # quick profile: epochs ≤ budget / training pairs (0 = no cap, paper)
    dev_queries: int = 600  # quick, on a collection: dev queries of the BM25 top-20 dev signal (0 = all)

    @classmethod
    def for_profile(cls, profile: str) -> CNNTrainConfig:
        if check_profile(profile) == "paper":
            return cls(quick_pair_budget=0, dev_queries=0)
        if profile == "smoke":  # wiring check (fixtures): one epoch, nothing it builds is a measurement
            return cls(epochs=1, patience_epochs=1, eval_every=2, quick_pair_budget=0)
        return cls()

    def epochs_for(self, n_train: int) -> int:
        if not self.quick_pair_budget:
            return self.epochs
        return max(1, min(self.epochs, self.quick_pair_budget // max(1, n_train)))


class Vocabulary:
    """Word -> row of the static embedding matrix (0 = padding, 1 = unknown)."""

    def __init__(self, words: list[str]) -> None:
        self.words = words
        self.index = {w: i for i, w in enumerate(words)}

    @classmethod
    def from_texts(cls, texts) -> Vocabulary:
        seen = dict.fromkeys(w for t in texts for w in normalize_tokens(t))
        return cls(["<pad>", "<unk>", *seen])

    def encode(self, texts: list[str], max_len: int) -> torch.Tensor:
        rows = [[self.index.get(w, UNK) for w in normalize_tokens(t)][:max_len] or [UNK] for t in texts]
        out = np.zeros((len(rows), max(len(r) for r in rows)), dtype=np.int64)
        for i, r in enumerate(rows):
            out[i, : len(r)] = r
        return torch.as_tensor(out)


def embedding_matrix(vocab: Vocabulary, seed: int) -> tuple[torch.Tensor, int]:
    """GloVe 50-d rows; unknown words U[−0.25, 0.25] (§5.1); padding row zero."""
    from core.data.vectors import load_glove_50d

    matrix, found = load_glove_50d().lookup(vocab.words, np.random.default_rng(seed))
    matrix[PAD] = 0.0
    return torch.as_tensor(matrix), found


class CNNReranker(Reranker):
    """The trained CNN as a reranker: score = p(y = 1 | q, d) from the softmax."""

    def __init__(self, model: CNNPairReranker, vocab: Vocabulary, overlap: OverlapFeaturizer, max_len: int,
                 name: str = "cnn-rerank") -> None:
        self.model, self.vocab, self.overlap, self.max_len, self.name = model.eval(), vocab, overlap, max_len, name

    def tensors(self, queries: list[str], docs: list[str], dev: torch.device):
        q = self.vocab.encode(queries, self.max_len).to(dev)
        d = self.vocab.encode(docs, self.max_len).to(dev)
        f = torch.as_tensor(self.overlap.transform(queries, docs)).to(dev) if self.model.cfg.use_features else None
        return q, d, f

    def score_pairs(self, queries: list[str], docs: list[str]) -> np.ndarray:
        dev = next(self.model.parameters()).device
        out = np.empty(len(queries), dtype=np.float64)
        self.model.eval()
        with torch.inference_mode():
            for s in range(0, len(queries), 1024):
                q, d, f = self.tensors(queries[s : s + 1024], docs[s : s + 1024], dev)
                out[s : s + 1024] = torch.softmax(self.model(q, d, f), -1)[:, 1].double().cpu().numpy()
        return out


# ----------------------------------------------------------------------------- data
def training_examples(dataset: Dataset) -> tuple[list[str], list[str], np.ndarray]:
    """(queries, docs, labels) of the training split of a ``core.training_data`` view (labelled pairs)."""
    pairs = dataset.pairs["train"]
    return ([dataset.corpus[p.id1] for p in pairs], [dataset.corpus[p.id2] for p in pairs],
            np.array([int(p.label > 0) for p in pairs]))


def candidate_rankings(dataset: Dataset, split: str) -> dict[str, Ranking]:
    """The given candidate lists of a reranking dataset (TrecQA) as first-stage rankings."""
    return {q: Ranking("candidates", list(dataset.candidates[q]), [0.0] * len(dataset.candidates[q]))
            for q in dataset.query_splits[split] if dataset.candidates.get(q)}


def dev_candidates(dataset: Dataset, tcfg: CNNTrainConfig) -> dict[str, Ranking]:
    """The dev signal's candidates: each dev query's own list, or BM25's top 20 on a collection."""
    if dataset.candidates:
        return candidate_rankings(dataset, "dev")
    return bm25_candidates(dataset, "dev", 20, tcfg.dev_queries)


def bm25_candidates(dataset: Dataset, split: str, k: int = 20, n_queries: int = 0, seed: int = 13) -> dict[str, Ranking]:
    """BM25 top-k (query removed from its own ranking) for the queries of a split (QQP dev signal)."""
    from core.retrieval.bm25 import BM25Retriever

    qids = sorted(dataset.split_queries(split))
    if n_queries and n_queries < len(qids):
        qids = sorted(np.random.default_rng(seed).choice(qids, n_queries, replace=False).tolist())
    retriever = BM25Retriever.index(dataset.corpus)
    return retriever.search_many({q: dataset.queries[q] for q in qids}, k=k,
                                 ignore_identical_ids=dataset.ignore_identical_ids)


def rerank_map(reranker: Reranker, dataset: Dataset, candidates: dict[str, Ranking], metric: str = "map@100") -> float:
    queries = {q: dataset.queries[q] for q in candidates}
    run = reranker.rerank_many(queries, candidates, dataset.corpus)
    qrels = {q: dataset.qrels[q] for q in candidates if any(v > 0 for v in dataset.qrels.get(q, {}).values())}
    return evaluate_run(qrels, run, [metric, "mrr@100"])[metric]


class DevEvaluator:
    """Dev MAP of the reranked candidate lists; inputs are tensorised once (called every 10 mini-batches)."""

    def __init__(self, reranker: CNNReranker, dataset: Dataset, candidates: dict[str, Ranking], metric: str) -> None:
        self.reranker, self.metric = reranker, metric
        self.owners = [(q, d) for q, r in candidates.items() for d in r.doc_ids]
        dev = next(reranker.model.parameters()).device
        self.inputs = reranker.tensors([dataset.queries[q] for q, _ in self.owners],
                                       [dataset.corpus[d] for _, d in self.owners], dev)
        self.qrels = {q: dataset.qrels[q] for q in candidates if any(v > 0 for v in dataset.qrels.get(q, {}).values())}

    def __call__(self) -> float:
        model = self.reranker.model
        model.eval()
        with torch.inference_mode():
            q, d, f = self.inputs
            scores = np.concatenate([
                torch.softmax(model(q[s : s + 2048], d[s : s + 2048], None if f is None else f[s : s + 2048]), -1)[:, 1].cpu().numpy()
                for s in range(0, len(q), 2048)])
        run: dict[str, Ranking] = {}
        for (qid, did), s in zip(self.owners, scores):
            r = run.setdefault(qid, Ranking(self.reranker.name, [], []))
            r.doc_ids.append(did)
            r.scores.append(float(s))
        return evaluate_run(self.qrels, run, [self.metric, "mrr@100"])[self.metric]


# ----------------------------------------------------------------------------- training
def train_config_for(profile: str, variant: str | None = None) -> CNNTrainConfig:
    """The profile's config; TRAIN-ALL in the quick profile: no pair budget, at most ``TRAIN_ALL_EPOCHS`` epochs."""
    tcfg = CNNTrainConfig.for_profile(profile)
    if variant == TRAIN_ALL and tcfg.quick_pair_budget:
        tcfg = dataclasses.replace(tcfg, epochs=TRAIN_ALL_EPOCHS, quick_pair_budget=0)
    return tcfg


def training_view(dataset: Dataset, variant: str | None = None) -> Dataset:
    """The dataset as the variant trains on it: TRAIN-ALL as the training split for ``train-all`` (TRAIN's
    questions left out), otherwise TRAIN-ALL left out; ``StudioError`` for ``train-all`` without that split."""
    if variant == TRAIN_ALL:
        if TRAIN_ALL not in dataset.query_splits:
            raise StudioError(f"cnn-rerank@train-all trains on TrecQA's TRAIN-ALL split; {dataset.name} has no "
                              f"'{TRAIN_ALL}' split (use cnn-rerank)")
        return training_split_view(dataset, TRAIN_ALL, OTHER_TRAINING_SPLITS)
    return training_split_view(dataset, None, OTHER_TRAINING_SPLITS)


def _folder(dataset: Dataset, variant: str | None) -> Path:
    return system_dir(dataset.name, "cnn-rerank", variant)


def _check_variant(variant: str | None) -> None:
    if variant is not None and variant not in VARIANTS:
        raise UnknownNameError("variant of cnn-rerank", variant, list(VARIANTS))


def build(dataset: Dataset, profile: str = "quick", progress: ProgressFn = no_progress, variant: str | None = None,
          train_config: CNNTrainConfig | None = None) -> dict:
    """Train the CNN on the dataset's training split with early stopping on dev MAP; save artifacts."""
    _check_variant(variant)
    tcfg = train_config or train_config_for(profile, variant)
    dataset = training_data(training_view(dataset, variant)).dataset  # the generic labelled-pairs view
    set_seed(tcfg.seed)
    start = time.perf_counter()
    dev = device()
    cfg = CNNConfig(use_features=variant != "no-features")
    texts = list(dataset.corpus.values()) + list(dataset.queries.values())
    vocab = Vocabulary.from_texts(texts)
    progress(0.0, f"CNN: GloVe 50-d for {len(vocab.words):,} words")
    emb, found = embedding_matrix(vocab, tcfg.seed)
    overlap = OverlapFeaturizer.fit(list(dict.fromkeys(texts)))
    model = CNNPairReranker(cfg, emb).to(dev)
    reranker = CNNReranker(model, vocab, overlap, tcfg.max_len)
    q_txt, d_txt, labels = training_examples(dataset)
    q_all, d_all, f_all = reranker.tensors(q_txt, d_txt, torch.device("cpu"))
    y_all = torch.as_tensor(labels)
    dev_cands = dev_candidates(dataset, tcfg)
    every_steps = sum(len(r.doc_ids) for r in dev_cands.values()) <= DEV_PAIRS_EVERY_STEPS
    epochs = tcfg.epochs_for(len(y_all))
    opt = torch.optim.Adadelta([p for p in model.parameters() if p.requires_grad], lr=1.0, rho=tcfg.rho, eps=tcfg.eps)
    stopper = EarlyStopping(patience=10**9)
    best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    best_epoch, history, step = -1, [], 0
    rng = np.random.default_rng(tcfg.seed)
    n_batches = (len(y_all) + tcfg.batch_size - 1) // tcfg.batch_size
    from tqdm.auto import tqdm

    dev_eval = DevEvaluator(reranker, dataset, dev_cands, "map@100" if dataset.candidates else "map@20")

    def evaluate(epoch: int) -> None:
        nonlocal best_state, best_epoch
        value = dev_eval()
        model.train()
        history.append({"epoch": epoch + 1, "step": step, "dev_map": value})
        if stopper.step(value, epoch):
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            best_epoch = epoch

    for epoch in range(epochs):
        model.train()
        order = torch.as_tensor(rng.permutation(len(y_all)))
        bar = tqdm(range(n_batches), desc=f"CNN epoch {epoch + 1}/{epochs}", leave=False)
        for b in bar:
            idx = order[b * tcfg.batch_size : (b + 1) * tcfg.batch_size]
            q, d = q_all[idx], d_all[idx]
            q, d = q[:, : max(1, int((q > 0).sum(1).max()))], d[:, : max(1, int((d > 0).sum(1).max()))]
            f = f_all[idx].to(dev) if f_all is not None else None
            loss = cnn_loss(model, model(q.to(dev), d.to(dev), f), y_all[idx].to(dev))
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if every_steps and step % tcfg.eval_every == 0:
                evaluate(epoch)
            progress(min(0.99, (epoch + (b + 1) / n_batches) / epochs), f"CNN epoch {epoch + 1}/{epochs} batch {b + 1}/{n_batches}")
        if not every_steps:
            evaluate(epoch)
        if epoch - best_epoch >= tcfg.patience_epochs:
            break
    model.load_state_dict(best_state)
    folder = _folder(dataset, variant)
    save_torch(folder / "weights.pt", {k: v.cpu() for k, v in model.state_dict().items()})
    save_json(folder / "vocab.json", vocab.words)
    save_json(folder / "overlap.json", {"idf": overlap.idf, "stop_words": sorted(overlap.stop_words)})
    save_json(folder / "config.json", {"model": dataclasses.asdict(cfg), "train": dataclasses.asdict(tcfg),
                                       "embedding_rows": len(vocab.words), "glove_found": found, **stamp()})
    seconds = time.perf_counter() - start
    metrics = {"seconds": seconds, "best_dev_map": stopper.best, "best_epoch": best_epoch + 1,
               "train_pairs": int(len(y_all)), "vocab": len(vocab.words), "glove_found": found, "history": history[-50:]}
    save_json(folder / "metrics.json", metrics)
    progress(1.0, f"CNN: trained in {seconds:.0f}s, dev MAP {stopper.best:.4f}")
    return metrics


def is_built(dataset: Dataset, variant: str | None = None) -> bool:
    folder = _folder(dataset, variant)
    return is_current(folder / "config.json") and all((folder / n).is_file() for n in ("weights.pt", "vocab.json", "overlap.json"))


def load(dataset: Dataset, variant: str | None = None, **options) -> CNNReranker:
    """Load the trained CNN (``MissingArtifactError`` naming the build command if missing or corrupt)."""
    _check_variant(variant)
    folder = _folder(dataset, variant)
    command = build_command("cnn-rerank", dataset.name, variant)
    conf = load_json(folder / "config.json", "the CNN reranker", command)
    check_stamp(conf, "the CNN reranker", command)
    words = load_json(folder / "vocab.json", "the CNN reranker", command)
    ov = load_json(folder / "overlap.json", "the CNN reranker", command)
    state = load_torch(folder / "weights.pt", "the CNN reranker", command)
    try:
        cfg = config_from_dict(CNNConfig, conf["model"])
        tcfg = config_from_dict(CNNTrainConfig, conf["train"])
        model = CNNPairReranker(cfg, torch.zeros(len(words), state["embed.weight"].shape[1]))
        model.load_state_dict(state)
    except (KeyError, RuntimeError, TypeError) as exc:
        raise MissingArtifactError("the CNN reranker", command, f"corrupt ({type(exc).__name__})") from None
    overlap = OverlapFeaturizer(ov["idf"], frozenset(ov["stop_words"]))
    return CNNReranker(model.to(device()), Vocabulary(words), overlap, tcfg.max_len,
                       name="cnn-rerank" if not variant else f"cnn-rerank@{variant}")


def config_dict(variant: str | None = None) -> dict:
    return {"model": dataclasses.asdict(CNNConfig(use_features=variant != "no-features")),
            "quick": dataclasses.asdict(train_config_for("quick", variant)),
            "paper": dataclasses.asdict(CNNTrainConfig.for_profile("paper")), "variants": list(VARIANTS),
            "paper defaults": "m=5, 100 maps, dropout 0.5, Adadelta, batch 50, L2 1e-5 conv / 1e-4 others"}
