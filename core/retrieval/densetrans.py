"""DenseTrans system (densetrans-cai2021.md §3, §4.2.3): training on the QQP cluster-disjoint train
split with BM25 hard negatives, early stopping on dev Recall@100, faiss IVFPQ serving.

Artifacts (``registry.system_dir(dataset, "densetrans", variant)``): ``config.json``, ``vocab.json``,
``model.pt`` (best dev checkpoint), ``last.pt`` (resume state), ``embeddings.npy`` (collection vectors,
L2-normalised, collection order), ``index/`` (the default faiss index), ``metrics.json``.

Profiles: ``paper`` = the paper's recipe (d = 300, batch 32, full epochs, τ = 1 i.e. raw cosine in
Eq. (6), dev = every non-test question); ``quick`` = a CPU budget (≤ 3.5 min for the full model on
2 cores including encoding and indexing): d = 60, a temperature τ = 0.05, a capped number of steps
per epoch and a smaller dev collection. Numbers measured with either are in bench/reports/first_stage.md.
"""
from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass

import numpy as np
import torch

from core.artifacts import config_from_dict, load_json, load_torch, save_json, save_torch
from core.data import Dataset
from core.errors import MissingArtifactError
from core.evaluation import evaluate_run
from core.indexing import IndexSpec
from core.registry import build_command, check_variant, system_dir
from core.retrieval.base import ProgressFn, _no_progress
from core.retrieval.dense import DenseRetriever, stored_vectors_and_index
from core.tokenizers import (IdsEncoder, WordPieceVocab, WordVocab, minilm_input_embeddings, minilm_path,
                             state_fingerprint, vocab_from_dict)
from core.training import EarlyStopping, check_profile, device, linear_warmup_decay, set_seed

SYSTEM = "densetrans"
DEFAULT_INDEX = "ivfpq"  # §4.2.3


@dataclass(frozen=True)
class DenseTransConfig:
    """DenseTrans settings; defaults = the paper (§4.2.3) where it gives them."""

    variant: str = "full"  # §4.4.1 ablations: -TopDense, -AllDense, +Concat
    embeddings: str = "glove"  # paper: FastText 300-d (unavailable offline); "glove" 6B-50d or "minilm" WordPiece
    d_model: int = 300  # paper: 300 (FastText width)
    n_layers: int = 3  # N
    n_heads: int = 6  # H
    ffn_ratio: int = 4  # not given in the paper (Vaswani et al.)
    dropout: float = 0.1
    max_words: int = 30
    vocab_size: int = 50_000
    oov_scale: float = 0.2  # OOV vectors ~ U(-0.2, 0.2)
    batch_size: int = 32
    hard_negatives_per_query: int = 1  # J = batch_size · this, sampled from BM25 top-100 minus positives
    bm25_depth: int = 100
    lr: float = 5e-4  # not given in the paper
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-8
    warmup_fraction: float = 0.1
    temperature: float = 1.0  # Eq. (6) uses the raw cosine
    epochs: int = 20
    steps_per_epoch: int = 0  # 0 = a full pass over the training pairs
    patience: int = 2
    dev_distractors: int = 0  # 0 = rank dev queries against every non-test question
    seed: int = 13


PROFILES = {
    "paper": {},
    "quick": {"d_model": 60, "temperature": 0.05, "epochs": 3, "steps_per_epoch": 90, "lr": 1e-3,
              "dev_distractors": 5000, "patience": 1},
}


def make_config(profile: str = "quick", variant: str | None = None, **overrides) -> DenseTransConfig:
    """The config of a profile and variant (``overrides`` for experiments)."""
    check_profile(profile)
    check_variant(SYSTEM, variant)
    return DenseTransConfig(**{**PROFILES[profile], "variant": variant or "full", **overrides})


def _folder(dataset: Dataset, variant: str | None, tag: str | None = None):
    name = variant if variant and variant != "full" else None
    if tag:
        name = f"{name or 'full'}+{tag}"
    return system_dir(dataset.name, SYSTEM, name)


# ----------------------------------------------------------------------------- model construction
def _vocab_and_vectors(dataset: Dataset, cfg: DenseTransConfig):
    """Vocabulary (from the collection's words) and the initial token matrix."""
    rng = np.random.default_rng(cfg.seed)
    if cfg.embeddings == "minilm":
        vocab = WordPieceVocab(minilm_path())
        return vocab, torch.from_numpy(minilm_input_embeddings())
    vocab = WordVocab.build(dataset.corpus.values(), max_size=cfg.vocab_size, hash_bins=0)
    tokens = ["[PAD]", "[CLS]", "[UNK]", *vocab.words]
    if cfg.embeddings == "glove":
        from core.vectors import load_glove_50d

        matrix, _found = load_glove_50d().lookup(tokens, rng, scale=cfg.oov_scale)
    elif cfg.embeddings == "random":
        matrix = rng.uniform(-cfg.oov_scale, cfg.oov_scale, size=(len(tokens), cfg.d_model)).astype(np.float32)
    else:
        raise ValueError(f"unknown embeddings {cfg.embeddings!r}; known: glove, minilm, random")
    return vocab, torch.from_numpy(matrix)


def _model(cfg: DenseTransConfig, vocab_size: int, emb_dim: int, pad_id: int, pretrained=None):
    from models.densetrans import DenseTrans

    return DenseTrans(vocab_size, d_model=cfg.d_model, n_layers=cfg.n_layers, n_heads=cfg.n_heads,
                      dropout=cfg.dropout, max_len=cfg.max_words + 1, ffn_ratio=cfg.ffn_ratio,
                      emb_dim=emb_dim, variant=cfg.variant, pad_id=pad_id, pretrained=pretrained)


def _encoder(model, vocab, cfg: DenseTransConfig, encoder_id: str) -> IdsEncoder:
    return IdsEncoder(model, vocab, cfg.max_words, add_cls=True, encoder_id=encoder_id)


# ----------------------------------------------------------------------------- dev evaluation
def dev_collection(dataset: Dataset, distractors: int, seed: int = 13) -> dict[str, str]:
    """Dev questions + ``distractors`` train-split questions (0 = every non-test question)."""
    dev_ids = sorted({q for p in dataset.pairs["dev"] for q in (p.id1, p.id2)})
    test_ids = {q for p in dataset.pairs["test"] for q in (p.id1, p.id2)}
    others = sorted(q for q in dataset.corpus if q not in test_ids and q not in set(dev_ids))
    if distractors and distractors < len(others):
        rng = np.random.default_rng(seed)
        others = sorted(rng.choice(others, size=distractors, replace=False).tolist())
    return {q: dataset.corpus[q] for q in dev_ids + others}


def dev_score(encoder, dataset: Dataset, collection: dict[str, str], metric: str = "recall@100",
              metric_l2: bool = False) -> float:
    """Rank the dev queries against ``collection`` exactly (flat index) and score ``metric``."""
    vectors = encoder.encode(list(collection.values()))
    spec = IndexSpec("Flat", metric="l2" if metric_l2 else "ip")
    if not metric_l2:
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    retriever = DenseRetriever.from_vectors("dev", encoder, collection, vectors, spec)
    queries = dataset.split_queries("dev")
    rankings = retriever.search_many(queries, k=100, ignore_identical_ids=True)
    return evaluate_run(dataset.split_qrels("dev"), rankings, [metric])[metric]


# ----------------------------------------------------------------------------- training
def training_pairs(dataset: Dataset) -> list[tuple[str, str]]:
    """(query, paraphrase) for every train-split query and every other question of its cluster."""
    return [(q, d) for q in dataset.split_queries("train") for d in sorted(dataset.qrels.get(q, {}))]


def batch_rows(n: int, batch_size: int, batch_index: int, seed: int) -> np.ndarray:
    """Rows of the ``batch_index``-th batch of a stream of shuffled passes over ``n`` examples.

    Each pass is a fresh permutation (seeded by ``seed`` and the pass number); a capped "epoch" of the
    quick profile continues the current pass instead of restarting it, so no pair is seen twice before
    all were seen once. Deterministic, hence resumable at any epoch boundary.
    """
    per_pass = n // batch_size
    p, b = divmod(batch_index, per_pass)
    order = np.random.default_rng([seed, p]).permutation(n)
    return order[b * batch_size : (b + 1) * batch_size]


def _mask(qids: list[str], dids: list[str], qrels: dict[str, dict[str, int]]) -> torch.Tensor:
    """True where candidate j is the query itself or one of its paraphrases (not a negative)."""
    return torch.tensor([[d == q or d in qrels.get(q, {}) for d in dids] for q in qids], dtype=torch.bool)


def train(dataset: Dataset, cfg: DenseTransConfig, folder, progress: ProgressFn = _no_progress,
          resume: bool = True) -> dict:
    """Train with Eq. (6)-(7) and save the best dev checkpoint (resumes from ``last.pt``)."""
    from tqdm.auto import tqdm

    from core.negatives import bm25_negatives
    from models.losses import SampledSoftmaxLoss

    set_seed(cfg.seed)
    dev = device()
    vocab, matrix = _vocab_and_vectors(dataset, cfg)
    pad_id = vocab.pad_id
    model = _model(cfg, vocab.size, matrix.shape[1], pad_id, matrix).to(dev)
    save_json(folder / "vocab.json", vocab.to_dict())
    save_json(folder / "config.json", cfg)
    negatives = bm25_negatives(dataset, "train", cfg.bm25_depth,
                               progress=lambda f, m: progress(0.05 * f, m))
    pairs = training_pairs(dataset)
    steps = len(pairs) // cfg.batch_size
    if cfg.steps_per_epoch:
        steps = min(steps, cfg.steps_per_epoch)
    optim = torch.optim.Adam(model.parameters(), lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps)
    sched = linear_warmup_decay(optim, steps * cfg.epochs, cfg.warmup_fraction)
    loss_fn = SampledSoftmaxLoss(cfg.temperature)
    stopper = EarlyStopping(patience=cfg.patience)
    start_epoch, history = 0, []
    config_json = json.dumps(dataclasses.asdict(cfg), sort_keys=True, default=str)
    last = folder / "last.pt"
    if resume and last.is_file():
        try:
            state = torch.load(last, map_location="cpu", weights_only=True)
            if state.get("config") == config_json:
                model.load_state_dict(state["model"])
                optim.load_state_dict(state["optim"])
                sched.load_state_dict(state["sched"])
                start_epoch = int(state["epoch"]) + 1
                history = json.loads(state["history"])
                for e, value in enumerate(h["dev_recall@100"] for h in history):
                    stopper.step(value, e)
                progress(0.05, f"resuming after epoch {start_epoch}")
        except Exception:  # corrupt resume state: start over
            start_epoch, history = 0, []
    collection = dev_collection(dataset, cfg.dev_distractors, cfg.seed)
    encoder = _encoder(model, vocab, cfg, "densetrans-training")
    texts = dataset.corpus
    t_train = time.perf_counter()
    for epoch in range(start_epoch, cfg.epochs):
        if stopper.should_stop:
            break
        rng = np.random.default_rng([cfg.seed, epoch])
        torch.manual_seed(cfg.seed * 1000 + epoch)
        model.train()
        running = 0.0
        bar = tqdm(range(steps), desc=f"DenseTrans {cfg.variant} epoch {epoch + 1}/{cfg.epochs}", leave=False)
        for step in bar:
            batch = [pairs[i] for i in batch_rows(len(pairs), cfg.batch_size, epoch * steps + step, cfg.seed)]
            qids = [q for q, _ in batch]
            hard = []
            for q in qids:
                pool = negatives.get(q) or []
                if pool:
                    hard.extend(pool[j] for j in rng.integers(0, len(pool), cfg.hard_negatives_per_query))
            dids = [d for _, d in batch] + hard
            q_ids = vocab.batch([texts[q] for q in qids], cfg.max_words, add_cls=True).to(dev)
            d_ids = vocab.batch([texts[d] for d in dids], cfg.max_words, add_cls=True).to(dev)
            loss = loss_fn(model(q_ids), model(d_ids), _mask(qids, dids, dataset.qrels).to(dev))
            optim.zero_grad(set_to_none=True)
            loss.backward()
            optim.step()
            sched.step()
            running += float(loss.detach())
            if step % 10 == 0:
                bar.set_postfix(loss=f"{running / (step + 1):.3f}")
            done = (epoch * steps + step + 1) / (steps * cfg.epochs)
            if step % 20 == 0:
                progress(0.05 + 0.75 * done, f"epoch {epoch + 1} step {step + 1}/{steps} loss {running / (step + 1):.3f}")
        recall = dev_score(encoder, dataset, collection)
        history.append({"epoch": epoch + 1, "loss": running / max(1, steps), "dev_recall@100": recall,
                        "seconds": time.perf_counter() - t_train})
        tqdm.write(f"DenseTrans {cfg.variant} epoch {epoch + 1}: loss {running / max(1, steps):.4f} "
                   f"dev Recall@100 {recall:.4f}")
        progress(0.05 + 0.75 * (epoch + 1) / cfg.epochs, f"epoch {epoch + 1}: dev Recall@100 {recall:.4f}")
        if stopper.step(recall, epoch):
            save_torch(folder / "model.pt", {k: v.cpu() for k, v in model.state_dict().items()})
        save_torch(last, {"model": model.state_dict(), "optim": optim.state_dict(), "sched": sched.state_dict(),
                          "epoch": epoch, "config": config_json, "history": json.dumps(history)})
    return {"history": history, "best_dev_recall@100": stopper.best, "best_epoch": stopper.best_epoch + 1,
            "train_seconds": time.perf_counter() - t_train, "training_pairs": len(pairs), "steps_per_epoch": steps}


# ----------------------------------------------------------------------------- build / load
def build(dataset: Dataset, profile: str = "quick", progress: ProgressFn = _no_progress,
          variant: str | None = None, config: DenseTransConfig | None = None, tag: str | None = None,
          resume: bool = True) -> dict:
    """Train (or resume from ``last.pt`` when its config matches; ``resume=False`` starts over), encode the collection, build the IVFPQ index; returns measured metrics."""
    cfg = config or make_config(profile, variant)
    folder = _folder(dataset, cfg.variant, tag)
    start = time.perf_counter()
    metrics = train(dataset, cfg, folder, progress, resume=resume)
    progress(0.82, "encoding the collection")
    retriever, encode_seconds = _serve(dataset, folder, cfg, build_command(SYSTEM, dataset.name, variant),
                                       index=DEFAULT_INDEX, fresh=True,
                                       progress=lambda f, m: progress(0.82 + 0.15 * f, m))
    metrics.update({"profile": profile, "encode_seconds": encode_seconds,
                    "encode_per_second": len(dataset.corpus) / max(encode_seconds, 1e-9),
                    "total_seconds": time.perf_counter() - start, "index": retriever.spec.factory,
                    "dim": int(retriever.index.d)})
    save_json(folder / "metrics.json", metrics)
    progress(1.0, f"DenseTrans {cfg.variant}: dev Recall@100 {metrics['best_dev_recall@100']:.4f}")
    return metrics


def is_built(dataset: Dataset, variant: str | None = None) -> bool:
    folder = _folder(dataset, variant)
    return all((folder / f).is_file() for f in ("config.json", "vocab.json", "model.pt", "embeddings.npy"))


class DenseTransRetriever(DenseRetriever):
    """DenseRetriever + per-layer ``[CLS]`` vectors (the Layers page)."""

    def layer_embeddings(self, texts: list[str]) -> list[np.ndarray]:
        """``[CLS]`` after the input layer and after each of the N layers: N + 1 arrays (n, d_ℓ)."""
        enc: IdsEncoder = self.encoder
        return enc.map(list(texts), enc.model.layer_cls)


def _load_model(folder, command: str):
    try:
        cfg = config_from_dict(DenseTransConfig, load_json(folder / "config.json", "the DenseTrans config", command))
        vocab = vocab_from_dict(load_json(folder / "vocab.json", "the DenseTrans vocabulary", command))
    except (TypeError, KeyError, ValueError) as exc:
        raise MissingArtifactError("the DenseTrans config", command, f"corrupt ({exc})") from None
    state = load_torch(folder / "model.pt", "the DenseTrans checkpoint", command)
    try:
        emb = state["token.weight"]
        model = _model(cfg, emb.shape[0], emb.shape[1], vocab.pad_id)
        model.load_state_dict(state)
    except (KeyError, RuntimeError, AttributeError) as exc:
        raise MissingArtifactError("the DenseTrans checkpoint", command, f"corrupt ({type(exc).__name__})") from None
    model.to(device()).eval()
    encoder = _encoder(model, vocab, cfg, f"densetrans:{cfg.variant}:{state_fingerprint(state)}")
    return cfg, encoder


def _serve(dataset: Dataset, folder, cfg, command: str, index: str = DEFAULT_INDEX, fresh: bool = False,
           progress: ProgressFn = _no_progress, search_params: str | None = None):
    """Collection vectors (cached) + the requested faiss index (saved for the default preset)."""
    cfg, encoder = _load_model(folder, command)
    vectors, faiss_index, spec, encode_seconds = stored_vectors_and_index(
        folder, encoder, dataset.corpus, lambda n, d: IndexSpec.from_preset(index, n, d), index,
        "the DenseTrans embeddings", command, fresh=fresh, progress=progress, batch_size=256)
    name = SYSTEM if cfg.variant == "full" else f"{SYSTEM}{cfg.variant}"
    retriever = DenseTransRetriever(name, encoder, list(dataset.corpus), faiss_index, spec, vectors,
                                    list(dataset.corpus.values()))
    if search_params:
        retriever.set_params(search_params)
    return retriever, encode_seconds


def load(dataset: Dataset, variant: str | None = None, index: str = DEFAULT_INDEX,
         search_params: str | None = None, tag: str | None = None, **options) -> DenseTransRetriever:
    """The trained DenseTrans over the collection with a faiss index (``flat`` = exact, ``ivfpq``
    (default, §4.2.3), ``ivf``, ``hnsw`` or a factory string); cheap when the embeddings are built."""
    check_variant(SYSTEM, variant)
    folder = _folder(dataset, variant, tag)
    command = build_command(SYSTEM, dataset.name, variant if variant and variant != "full" else None)
    if not (folder / "model.pt").is_file():
        raise MissingArtifactError(f"DenseTrans{'' if not variant or variant == 'full' else ' ' + variant}", command)
    return _serve(dataset, folder, None, command, index=index, search_params=search_params)[0]


def config_dict(variant: str | None = None) -> dict:
    paper = dataclasses.asdict(make_config("paper", variant))
    quick = dataclasses.asdict(make_config("quick", variant))
    return {"paper": paper, "quick (differences)": {k: v for k, v in quick.items() if paper[k] != v},
            "notes": "paper: FastText 300-d token vectors (here GloVe 6B-50d projected, or MiniLM WordPiece); "
                     "lr and FFN width not given in the paper"}

