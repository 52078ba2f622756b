"""SDML-CNN system (sdml-bonadiman2019.md §2.1, §3, §4.2-4.3): a CNN question encoder trained with the
smoothed deep metric loss (variant ``sdml``) or the triplet-loss baselines TL(Rand) with Euclidean
(``tl-euc``) or squared Euclidean (``tl-ssd``) distance; early stopping on dev ROC AUC of the labelled
dev pairs; served with a faiss IVF index over squared Euclidean distance (§4.3: IVF2000,Flat, nprobe 10,
nlist scaled to the collection, see core.indexing).

Artifacts (``registry.system_dir(dataset, "sdml-cnn", variant)``): ``config.json``, ``vocab.json``,
``model.pt`` (best dev checkpoint), ``last.pt`` (resume state), ``embeddings.npy`` (raw vectors),
``index-ivf/``, ``metrics.json``.

Profiles: ``paper`` = §4.2 (e_dim = n = 300, win 5, 50k words + 5,000 hash bins, N = 512, Adam 1e-3,
train until dev ROC AUC stops improving); ``quick`` = the same model with a cap on the epochs (the
default build must finish in ≤ 2 min on 2 CPU cores, including encoding and indexing).
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
from core.indexing import IndexSpec
from core.registry import build_command, check_variant, system_dir
from core.retrieval.base import ProgressFn, _no_progress
from core.retrieval.dense import DenseRetriever, stored_vectors_and_index
from core.tokenizers import IdsEncoder, WordVocab, state_fingerprint, vocab_from_dict
from core.training import EarlyStopping, check_profile, device, set_seed

SYSTEM = "sdml-cnn"
DEFAULT_INDEX = "ivf"  # §4.3
LOSSES = {"sdml": ("sdml", "ssd"), "tl-euc": ("triplet", "euc"), "tl-ssd": ("triplet", "ssd")}


@dataclass(frozen=True)
class SDMLConfig:
    """SDML-CNN settings; defaults = the paper (§4.2)."""

    variant: str = "sdml"  # "sdml", "tl-euc", "tl-ssd" (Tables 3-4)
    epsilon: float = 0.3  # label smoothing ε (Table 1)
    batch_size: int = 512  # N (Table 2)
    margin: float = 0.5  # triplet α
    emb_dim: int = 300  # e_dim
    window: int = 5  # win
    channels: int = 300  # c_dim (not given in the paper)
    out_dim: int = 300  # n
    vocab_size: int = 50_000
    hash_bins: int = 5_000  # m
    min_count: int = 2  # words seen once in training go to the hash bins (rare words, §2.1.1)
    max_words: int = 30
    lr: float = 1e-3
    epochs: int = 50
    patience: int = 3
    steps_per_epoch: int = 0  # 0 = a full pass over the positive training pairs
    seed: int = 13


PROFILES = {"paper": {}, "quick": {"epochs": 3, "patience": 2}}


def make_config(profile: str = "quick", variant: str | None = None, **overrides) -> SDMLConfig:
    """The config of a profile and variant (``overrides`` for experiments, e.g. ``epsilon=0.1``)."""
    check_profile(profile)
    check_variant(SYSTEM, variant)
    return SDMLConfig(**{**PROFILES[profile], "variant": variant or "sdml", **overrides})


def _folder(dataset: Dataset, variant: str | None, tag: str | None = None):
    name = variant if variant and variant != "sdml" else None
    if tag:
        name = f"{name or 'sdml'}+{tag}"
    return system_dir(dataset.name, SYSTEM, name)


def _model(cfg: SDMLConfig, vocab_size: int):
    from models.sdml_cnn import SDMLCNN

    return SDMLCNN(vocab_size, cfg.emb_dim, cfg.window, cfg.channels, cfg.out_dim)


def _encoder(model, vocab, cfg: SDMLConfig, encoder_id: str) -> IdsEncoder:
    return IdsEncoder(model, vocab, cfg.max_words, add_cls=False, encoder_id=encoder_id)


def train_texts(dataset: Dataset) -> list[str]:
    """Questions of the training split (the vocabulary is built from them only)."""
    ids = sorted({q for p in dataset.pairs["train"] for q in (p.id1, p.id2)})
    return [dataset.corpus[q] for q in ids]


def dev_auc(encoder: IdsEncoder, dataset: Dataset, split: str = "dev") -> float:
    """ROC AUC of −‖φ(q1) − φ(q2)‖² on the labelled pairs of a split (§4.2 early-stopping metric)."""
    from sklearn.metrics import roc_auc_score

    pairs = dataset.pairs[split]
    ids = sorted({q for p in pairs for q in (p.id1, p.id2)})
    row = {q: i for i, q in enumerate(ids)}
    vec = encoder.encode([dataset.corpus[q] for q in ids])
    a = vec[[row[p.id1] for p in pairs]]
    b = vec[[row[p.id2] for p in pairs]]
    return float(roc_auc_score([int(p.label > 0) for p in pairs], -((a - b) ** 2).sum(1)))


def train(dataset: Dataset, cfg: SDMLConfig, folder, progress: ProgressFn = _no_progress,
          resume: bool = True) -> dict:
    """Train with SDML (§3.1) or TL(Rand) (§3 Eq. (2)); keep the best dev ROC AUC checkpoint."""
    from tqdm.auto import tqdm

    from models.losses import SDMLLoss, TripletLoss

    set_seed(cfg.seed)
    dev = device()
    vocab = WordVocab.build(train_texts(dataset), cfg.vocab_size, cfg.min_count, cfg.hash_bins)
    model = _model(cfg, vocab.size).to(dev)
    save_json(folder / "vocab.json", vocab.to_dict())
    save_json(folder / "config.json", cfg)
    kind, distance = LOSSES[cfg.variant]
    loss_fn = SDMLLoss(cfg.epsilon) if kind == "sdml" else TripletLoss(cfg.margin, distance)
    positives = [(p.id1, p.id2) for p in dataset.pairs["train"] if p.label > 0]
    pool = sorted({q for p in dataset.pairs["train"] for q in (p.id1, p.id2)})  # random negatives (TL)
    steps = max(1, len(positives) // cfg.batch_size)
    if cfg.steps_per_epoch:
        steps = min(steps, cfg.steps_per_epoch)
    optim = torch.optim.Adam(model.parameters(), lr=cfg.lr)
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
                start_epoch = int(state["epoch"]) + 1
                history = json.loads(state["history"])
                for e, h in enumerate(history):
                    stopper.step(h["dev_roc_auc"], e)
        except Exception:  # corrupt resume state: start over
            start_epoch, history = 0, []
    encoder = _encoder(model, vocab, cfg, "sdml-training")
    texts = dataset.corpus
    t_train = time.perf_counter()
    for epoch in range(start_epoch, cfg.epochs):
        if stopper.should_stop:
            break
        from core.retrieval.densetrans import batch_rows

        rng = np.random.default_rng([cfg.seed, epoch])
        torch.manual_seed(cfg.seed * 1000 + epoch)
        model.train()
        running = 0.0
        bar = tqdm(range(steps), desc=f"SDML-CNN {cfg.variant} epoch {epoch + 1}/{cfg.epochs}", leave=False)
        for step in bar:
            batch = [positives[i] for i in batch_rows(len(positives), cfg.batch_size, epoch * steps + step, cfg.seed)]
            a = model(vocab.batch([texts[q] for q, _ in batch], cfg.max_words).to(dev))
            p = model(vocab.batch([texts[d] for _, d in batch], cfg.max_words).to(dev))
            if kind == "sdml":
                loss = loss_fn(a, p)  # Figure 2: candidate j of anchor i is q_{2,j}
            else:
                neg = [pool[j] for j in rng.integers(0, len(pool), len(batch))]
                loss = loss_fn(a, p, model(vocab.batch([texts[q] for q in neg], cfg.max_words).to(dev)))
            optim.zero_grad(set_to_none=True)
            loss.backward()
            optim.step()
            running += float(loss.detach())
            bar.set_postfix(loss=f"{running / (step + 1):.4f}")
            progress(0.85 * (epoch * steps + step + 1) / (steps * cfg.epochs),
                     f"epoch {epoch + 1} step {step + 1}/{steps} loss {running / (step + 1):.4f}")
        auc = dev_auc(encoder, dataset)
        history.append({"epoch": epoch + 1, "loss": running / steps, "dev_roc_auc": auc,
                        "seconds": time.perf_counter() - t_train})
        tqdm.write(f"SDML-CNN {cfg.variant} epoch {epoch + 1}: loss {running / steps:.4f} dev ROC AUC {auc:.4f}")
        progress(0.85 * (epoch + 1) / cfg.epochs, f"epoch {epoch + 1}: dev ROC AUC {auc:.4f}")
        if stopper.step(auc, epoch):
            save_torch(folder / "model.pt", {k: v.cpu() for k, v in model.state_dict().items()})
        save_torch(last, {"model": model.state_dict(), "optim": optim.state_dict(), "epoch": epoch,
                          "config": config_json, "history": json.dumps(history)})
    return {"history": history, "best_dev_roc_auc": stopper.best, "best_epoch": stopper.best_epoch + 1,
            "train_seconds": time.perf_counter() - t_train, "training_pairs": len(positives),
            "steps_per_epoch": steps, "vocab_words": len(vocab.words), "hash_bins": vocab.hash_bins}


def build(dataset: Dataset, profile: str = "quick", progress: ProgressFn = _no_progress,
          variant: str | None = None, config: SDMLConfig | None = None, tag: str | None = None,
          resume: bool = True) -> dict:
    """Train (or resume from ``last.pt`` when its config matches; ``resume=False`` starts over), encode the collection, build the IVF index; returns measured metrics."""
    cfg = config or make_config(profile, variant)
    folder = _folder(dataset, cfg.variant, tag)
    start = time.perf_counter()
    metrics = train(dataset, cfg, folder, progress, resume=resume)
    progress(0.86, "encoding the collection")
    retriever, encode_seconds = _serve(dataset, folder, build_command(SYSTEM, dataset.name, variant),
                                       index=DEFAULT_INDEX, fresh=True,
                                       progress=lambda f, m: progress(0.86 + 0.12 * f, m))
    metrics.update({"profile": profile, "encode_seconds": encode_seconds,
                    "encode_per_second": len(dataset.corpus) / max(encode_seconds, 1e-9),
                    "total_seconds": time.perf_counter() - start, "index": retriever.spec.factory})
    save_json(folder / "metrics.json", metrics)
    progress(1.0, f"SDML-CNN {cfg.variant}: dev ROC AUC {metrics['best_dev_roc_auc']:.4f}")
    return metrics


def is_built(dataset: Dataset, variant: str | None = None) -> bool:
    folder = _folder(dataset, variant)
    return all((folder / f).is_file() for f in ("config.json", "vocab.json", "model.pt", "embeddings.npy"))


def _load_model(folder, command: str):
    try:
        cfg = config_from_dict(SDMLConfig, load_json(folder / "config.json", "the SDML-CNN config", command))
        vocab = vocab_from_dict(load_json(folder / "vocab.json", "the SDML-CNN vocabulary", command))
    except (TypeError, KeyError, ValueError) as exc:
        raise MissingArtifactError("the SDML-CNN config", command, f"corrupt ({exc})") from None
    state = load_torch(folder / "model.pt", "the SDML-CNN checkpoint", command)
    try:
        model = _model(cfg, vocab.size)
        model.load_state_dict(state)
    except (KeyError, RuntimeError, AttributeError) as exc:
        raise MissingArtifactError("the SDML-CNN checkpoint", command, f"corrupt ({type(exc).__name__})") from None
    model.to(device()).eval()
    return cfg, _encoder(model, vocab, cfg, f"sdml-cnn:{cfg.variant}:{state_fingerprint(state)}")


def _serve(dataset: Dataset, folder, command: str, index: str = DEFAULT_INDEX, fresh: bool = False,
           progress: ProgressFn = _no_progress, search_params: str | None = None):
    cfg, encoder = _load_model(folder, command)
    vectors, faiss_index, spec, encode_seconds = stored_vectors_and_index(
        folder, encoder, dataset.corpus, lambda n, d: IndexSpec.from_preset(index, n, d, metric="l2"), index,
        "the SDML-CNN embeddings", command, fresh=fresh, progress=progress, batch_size=512, normalize=False)
    name = SYSTEM if cfg.variant == "sdml" else f"{SYSTEM}:{cfg.variant}"
    retriever = DenseRetriever(name, encoder, list(dataset.corpus), faiss_index, spec, vectors,
                               list(dataset.corpus.values()))
    if search_params:
        retriever.set_params(search_params)
    return retriever, encode_seconds


def load(dataset: Dataset, variant: str | None = None, index: str = DEFAULT_INDEX,
         search_params: str | None = None, tag: str | None = None, **options) -> DenseRetriever:
    """The trained encoder over the collection with a squared-L2 faiss index (``ivf`` default, §4.3;
    ``flat`` exact, ``hnsw``, ``ivfpq`` or a factory string); scores are −‖q − d‖²."""
    check_variant(SYSTEM, variant)
    folder = _folder(dataset, variant, tag)
    command = build_command(SYSTEM, dataset.name, variant if variant and variant != "sdml" else None)
    if not (folder / "model.pt").is_file():
        raise MissingArtifactError(f"SDML-CNN{'' if not variant or variant == 'sdml' else ' ' + variant}", command)
    return _serve(dataset, folder, command, index=index, search_params=search_params)[0]


def config_dict(variant: str | None = None) -> dict:
    paper = dataclasses.asdict(make_config("paper", variant))
    quick = dataclasses.asdict(make_config("quick", variant))
    return {"paper": paper, "quick (differences)": {k: v for k, v in quick.items() if paper[k] != v},
            "notes": "c_dim (number of filters) not given in the paper; randomly initialised embeddings (§4.2)"}
