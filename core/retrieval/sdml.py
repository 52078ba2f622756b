"""SDML-CNN system (sdml-bonadiman2019.md §2.1, §3, §4.2-4.3): a CNN question encoder trained with the
smoothed deep metric loss (variant ``sdml``) or the triplet-loss baselines TL(Rand) with Euclidean
(``tl-euc``) or squared Euclidean (``tl-ssd``) distance.

Training: early stopping with patience on dev H@1 (the paper's main metric, §4.4) of the dev
queries by exact search against the dev collection (every question of the dev split's pairs, each query
dropped from its own ranking), evaluated every ``eval_every`` steps; the learning curve is a
``core.training.TrainLog`` (metrics.json["training"]) whose reference is the untrained mean-GloVe-50d
baseline; the untrained copy of the CNN is measured too (step 0 of the curve, and on test).

Serving: exact squared-L2 search by default (below 1M vectors, as every trained first stage); the paper's IVF index
(§4.3: IVF2000,Flat, nprobe 10, nlist scaled to the collection, see core.retrieval.indexing) via ``index="ivf"``.

Artifacts (``registry.system_dir(dataset, "sdml-cnn", variant)``): ``config.json``, ``vocab.json``,
``model.pt`` (best dev checkpoint), ``last.pt`` (resume state), ``embeddings.npy`` (raw vectors),
``metrics.json``.

Profiles: ``paper`` = §4.2 (e_dim = n = 300, win 5, random embeddings, 50k words + 5,000 hash bins,
N = 512, Adam 1e-3, until dev stops improving); ``quick`` (default build) and ``full`` = the measured
CPU recipe (see ``PROFILES`` and bench/reports/first_stage.md for each deviation and its measurement).
The measurements (exact search over a split, dev H@1, the mean-GloVe reference) are ``core.retrieval.sdml_measure``.
"""
from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass

import numpy as np
import torch

from core.artifacts import config_from_dict, load_json, load_torch, require_trained, save_json, save_torch
from core.data.datasets import Dataset
from core.errors import MissingArtifactError
from core.retrieval.indexing import PRESETS, IndexSpec
from core.registry import build_command, system_dir
from core.retrieval.base import ProgressFn, no_progress
from core.retrieval.dense import DenseRetriever, stored_vectors_and_index
from core.retrieval.sdml_measure import (DEV_METRIC, TEST_METRICS, dev_auc, glove_mean_encode,  # noqa: F401
                                         reference_scores, retrieval_scores, stopping_split)
from core.data.tokenizers import IdsEncoder, WordVocab, load_vocab, state_fingerprint, vocab_is_current
from core.systems import registration_for
from core.training import (TrainLog, check_profile, device, load_train_state, profile_settings, save_train_state,
                           set_seed)

REGISTRATION = registration_for(__name__)  # this system's SystemSpec (its module in core.systems)

SYSTEM = "sdml-cnn"
DEFAULT_INDEX = "auto" if "auto" in PRESETS else "flat"  # exact below 1M vectors; §4.3 IVF via index="ivf"
LOSSES = {"sdml": ("sdml", "ssd"), "tl-euc": ("triplet", "euc"), "tl-ssd": ("triplet", "ssd")}


@dataclass(frozen=True)
class SDMLConfig:
    """SDML-CNN settings; defaults = the paper (§4.2) except where a measurement said otherwise."""

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
    min_count: int = 2  # words seen once go to the hash bins (rare words, §2.1.1)
    vocab_from: str = "train"  # "train": training questions; "collection": every collection question (no labels)
    init: str = "random"  # word embeddings: "random" (§4.2) or "glove" (GloVe 6B-50d rows, needs emb_dim=50)
    max_words: int = 30
    lr: float = 1e-3
    max_steps: int = 20_000  # cap on optimiser steps ("until the model stops improving", §4.2)
    eval_every: int = 15  # steps between dev evaluations
    patience: int = 5  # dev evaluations without a new best H@1 before stopping
    train_fraction: float = 1.0  # share of the training positive pairs used (data-size curve)
    seed: int = 13


# CPU recipe (quick/full), measured in bench/reports/first_stage.md "SDML-CNN convergence": with the
# paper's random 300-d embeddings and only 7,894 training pairs (the paper: 219k) dev H@1 peaks early,
# below the untrained mean-GloVe baseline; GloVe-50d input embeddings (e_dim = 50) over a vocabulary of
# every collection word (min_count 1, so held-out questions' words keep their GloVe rows instead of a
# hash bin) start near that baseline and keep learning.
_CPU = {"init": "glove", "emb_dim": 50, "vocab_from": "collection", "min_count": 1}
PROFILES = {"paper": {},
            "quick": {**_CPU, "max_steps": 450, "eval_every": 15, "patience": 4},
            "full": {**_CPU, "max_steps": 3000, "eval_every": 15, "patience": 8},
            "smoke": {**_CPU, "max_steps": 4, "eval_every": 2, "patience": 1}}  # wiring check (fixtures): no measurement


def make_config(profile: str = "quick", variant: str | None = None, **overrides) -> SDMLConfig:
    """The config of a profile and variant (``overrides`` for experiments, e.g. ``epsilon=0.1``)."""
    check_profile(profile)
    REGISTRATION.check_variant(variant)
    cfg = SDMLConfig(**{**profile_settings(PROFILES, profile), "variant": variant or "sdml", **overrides})
    if cfg.init == "glove" and cfg.emb_dim != 50:
        raise ValueError(f"init='glove' needs emb_dim=50 (GloVe 6B-50d), got emb_dim={cfg.emb_dim}")
    if cfg.init not in ("random", "glove") or cfg.vocab_from not in ("train", "collection"):
        raise ValueError(f"init must be random|glove and vocab_from train|collection, got {cfg.init!r}, {cfg.vocab_from!r}")
    if not 0.0 < cfg.train_fraction <= 1.0:
        raise ValueError(f"train_fraction must be in (0, 1], got {cfg.train_fraction}")
    return cfg


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
    """Questions of the training split."""
    ids = sorted({q for p in dataset.pairs["train"] for q in (p.id1, p.id2)})
    return [dataset.corpus[q] for q in ids]


def build_vocab(dataset: Dataset, cfg: SDMLConfig) -> WordVocab:
    """Capped word vocabulary + hashing-trick bins (§2.1.1, §4.2) from the training questions or the
    whole (unlabelled) collection."""
    texts = train_texts(dataset) if cfg.vocab_from == "train" else list(dataset.corpus.values())
    return WordVocab.build(texts, cfg.vocab_size, cfg.min_count, cfg.hash_bins)


def new_model(cfg: SDMLConfig, vocab: WordVocab):
    """A freshly initialised encoder (seeded); ``init="glove"`` copies GloVe-50d rows into the embeddings."""
    set_seed(cfg.seed)
    model = _model(cfg, vocab.size)
    if cfg.init == "glove":
        from core.data.vectors import load_glove_50d

        glove = load_glove_50d()
        found = [(vocab.token_id(w), glove.index[w]) for w in vocab.words if w in glove.index]
        with torch.no_grad():
            weight = model.embedding.weight
            if found:
                ids, rows = zip(*found)
                weight[list(ids)] = torch.from_numpy(np.array(glove.matrix[sorted(rows)])[np.argsort(np.argsort(rows))])
            weight[vocab.pad_id].zero_()
    return model


def training_pairs(dataset: Dataset, fraction: float = 1.0, seed: int = 13) -> list[tuple[str, str]]:
    """Positive training pairs (q1, q2); ``fraction`` < 1 keeps a seeded random share (data-size curve)."""
    positives = [(p.id1, p.id2) for p in dataset.pairs["train"] if p.label > 0]
    if fraction < 1.0:
        keep = np.sort(np.random.default_rng([seed, 7]).permutation(len(positives))[: max(1, round(fraction * len(positives)))])
        positives = [positives[i] for i in keep]
    return positives


def batch_rows(n: int, batch_size: int, batch_index: int, seed: int) -> np.ndarray:
    """Rows of the ``batch_index``-th batch of shuffled passes over ``n`` pairs (a fresh permutation per
    pass; deterministic, hence resumable at any step). A batch never wraps across passes."""
    size = min(batch_size, n)
    per_pass = max(1, n // size)
    p, b = divmod(batch_index, per_pass)
    order = np.random.default_rng([seed, p]).permutation(n)
    return order[b * size : (b + 1) * size]


def train(dataset: Dataset, cfg: SDMLConfig, folder, progress: ProgressFn = no_progress,
          resume: bool = True) -> dict:
    """Train with SDML (§3.1 Eq. (3)-(4)) or TL(Rand) (§3 Eq. (2)) until dev H@1 stops improving.

    Every ``eval_every`` steps: H@1 of the dev queries by exact search against the dev collection
    (each query dropped from its own ranking); the best checkpoint is ``model.pt``; stop after
    ``patience`` evaluations without a new best or at ``max_steps`` (then ``stopped="cap"``). The
    learning curve (``core.training.TrainLog``) and the untrained encoder's dev H@1 (step 0) are returned.
    """
    from models.losses import SDMLLoss, TripletLoss

    dev = device()
    vocab = build_vocab(dataset, cfg)
    model = new_model(cfg, vocab).to(dev)
    save_json(folder / "vocab.json", vocab.to_dict())
    save_json(folder / "config.json", cfg)
    kind, distance = LOSSES[cfg.variant]
    loss_fn = SDMLLoss(cfg.epsilon) if kind == "sdml" else TripletLoss(cfg.margin, distance)
    positives = training_pairs(dataset, cfg.train_fraction, cfg.seed)
    pool = sorted({q for p in positives for q in p})  # random negatives (TL(Rand))
    optim = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    encoder = _encoder(model, vocab, cfg, "sdml-training")
    log = TrainLog(DEV_METRIC, patience=cfg.patience, max_steps=cfg.max_steps)
    config_json = json.dumps(dataclasses.asdict(cfg), sort_keys=True, default=str)
    last = folder / "last.pt"
    parts = {"model": model, "optim": optim}
    step, elapsed, untrained = 0, 0.0, None
    state = load_train_state(last, config_json, parts) if resume else None
    if state is not None:
        log, step, elapsed, untrained = (state["log"], int(state["step"]), float(state["seconds"]),
                                          float(state["untrained_dev"]))
    stop_split = stopping_split(dataset)
    if untrained is None:
        untrained = retrieval_scores(encoder.encode, dataset, stop_split)[DEV_METRIC]
        save_torch(folder / "model.pt", {k: v.cpu() for k, v in model.state_dict().items()})
        log.record(0, 0.0, 0.0, untrained)
    texts = dataset.corpus
    per_epoch = max(1, len(positives) // min(cfg.batch_size, len(positives)))
    t0 = time.perf_counter() - elapsed
    running, count = 0.0, 0
    model.train()
    while step < cfg.max_steps and not log.should_stop:
        batch = [positives[i] for i in batch_rows(len(positives), cfg.batch_size, step, cfg.seed)]
        a = model(vocab.batch([texts[q] for q, _ in batch], cfg.max_words).to(dev))
        p = model(vocab.batch([texts[d] for _, d in batch], cfg.max_words).to(dev))
        if kind == "sdml":
            loss = loss_fn(a, p)  # Figure 2: candidate j of anchor i is q_{2,j}
        else:
            rng = np.random.default_rng([cfg.seed, step])
            neg = [pool[j] for j in rng.integers(0, len(pool), len(batch))]
            loss = loss_fn(a, p, model(vocab.batch([texts[q] for q in neg], cfg.max_words).to(dev)))
        optim.zero_grad(set_to_none=True)
        loss.backward()
        optim.step()
        step += 1
        running, count = running + float(loss.detach()), count + 1
        if step % cfg.eval_every == 0 or step == cfg.max_steps:
            h1 = retrieval_scores(encoder.encode, dataset, stop_split)[DEV_METRIC]
            if log.record(step, step / per_epoch, time.perf_counter() - t0, h1, running / count):
                save_torch(folder / "model.pt", {k: v.cpu() for k, v in model.state_dict().items()})
            running, count = 0.0, 0
            save_train_state(last, config_json, parts, step, time.perf_counter() - t0, log, untrained_dev=untrained)
            progress(0.85 * min(1.0, step / cfg.max_steps),
                     f"step {step}: loss {log.curve[-1].loss:.4f}, dev H@1 {h1:.4f} (best {log.best_dev:.4f})")
    log.finish("patience" if log.should_stop else "cap")
    return {"training": log.to_dict(), "stopping_split": stop_split, "best_dev_hit_rate@1": log.best_dev, "best_step": log.best_step,
            "untrained_dev_hit_rate@1": untrained, "train_seconds": time.perf_counter() - t0,
            "train_pairs": len(positives), "steps_per_epoch": per_epoch, "steps": step,
            "vocab_words": len(vocab.words), "hash_bins": vocab.hash_bins}


def build(dataset: Dataset, profile: str = "quick", progress: ProgressFn = no_progress,
          variant: str | None = None, config: SDMLConfig | None = None, tag: str | None = None,
          resume: bool = True) -> dict:
    """Train (or resume from ``last.pt`` when its config matches; ``resume=False`` starts over) until dev
    H@1 stops improving, encode the collection, build the serving index (exact by default); measure the
    test queries (exact search, each query dropped from its own ranking) for the trained encoder, its
    untrained copy and the mean-GloVe reference; returns the metrics (also saved as metrics.json)."""
    cfg = config or make_config(profile, variant)
    folder = _folder(dataset, cfg.variant, tag)
    start = time.perf_counter()
    metrics = train(dataset, cfg, folder, progress, resume=resume)
    progress(0.86, "encoding the collection")
    retriever, encode_seconds = _serve(dataset, folder, build_command(SYSTEM, dataset.name, variant),
                                       index=DEFAULT_INDEX, fresh=True,
                                       progress=lambda f, m: progress(0.86 + 0.08 * f, m))
    progress(0.95, "measuring the test queries (trained, untrained, mean GloVe)")
    row = {t: i for i, t in enumerate(dataset.corpus.values())}
    vectors = retriever.doc_vectors
    def stored_or_encoded(texts: list[str]) -> np.ndarray:  # queries outside the collection are encoded
        return vectors[[row[t] for t in texts]] if all(t in row for t in texts) else retriever.encoder.encode(texts)

    test = retrieval_scores(stored_or_encoded, dataset, "test", "all", metrics=TEST_METRICS)
    vocab = retriever.encoder.vocab
    untrained = _encoder(new_model(cfg, vocab).to(device()), vocab, cfg, "sdml-untrained")
    untrained_test = retrieval_scores(untrained.encode, dataset, "test", "all", metrics=TEST_METRICS)
    reference = reference_scores(dataset)
    metrics["training"]["reference"] = reference
    metrics.update({"profile": profile, "encode_seconds": encode_seconds,
                    "encode_per_second": len(dataset.corpus) / max(encode_seconds, 1e-9),
                    "total_seconds": time.perf_counter() - start, "index": retriever.spec.factory,
                    "test": test, "untrained": {"dev": metrics["untrained_dev_hit_rate@1"], "test": untrained_test},
                    "test_note": "held-out test queries, exact search against the full collection, each query "
                                 "dropped from its own ranking"})
    save_json(folder / "metrics.json", metrics)
    progress(1.0, f"SDML-CNN {cfg.variant}: dev H@1 {metrics['best_dev_hit_rate@1']:.4f}, test H@1 "
                  f"{_fmt(test[DEV_METRIC])} (untrained {_fmt(untrained_test[DEV_METRIC])}, mean GloVe {_fmt(reference['test'])})")
    return metrics


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def is_built(dataset: Dataset, variant: str | None = None) -> bool:
    folder = _folder(dataset, variant)
    return vocab_is_current(folder) and all((folder / f).is_file() for f in ("config.json", "model.pt", "embeddings.npy", "metrics.json"))


def _load_model(folder, command: str):
    try:
        cfg = config_from_dict(SDMLConfig, load_json(folder / "config.json", "the SDML-CNN config", command))
        vocab = load_vocab(folder / "vocab.json", "the SDML-CNN vocabulary", command)
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
           progress: ProgressFn = no_progress, search_params: str | None = None):
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
    """The trained encoder over the collection with a squared-L2 faiss index (exact by default; ``ivf``
    = §4.3, ``hnsw``, ``ivfpq`` or a factory string); scores are −‖q − d‖²."""
    REGISTRATION.check_variant(variant)
    folder = _folder(dataset, variant, tag)
    command = build_command(SYSTEM, dataset.name, variant if variant and variant != "sdml" else None)
    require_trained(folder, f"SDML-CNN{'' if not variant or variant == 'sdml' else ' ' + variant}", command)
    return _serve(dataset, folder, command, index=index, search_params=search_params)[0]


def config_dict(variant: str | None = None) -> dict:
    paper = dataclasses.asdict(make_config("paper", variant))
    quick = dataclasses.asdict(make_config("quick", variant))
    full = dataclasses.asdict(make_config("full", variant))
    return {"paper": paper, "quick (differences)": {k: v for k, v in quick.items() if paper[k] != v},
            "full (differences)": {k: v for k, v in full.items() if paper[k] != v},
            "notes": "c_dim (number of filters) not given in the paper; the paper's randomly initialised 300-d "
                     "embeddings (§4.2) = profile 'paper'; quick/full use GloVe-50d input embeddings (measured: "
                     "bench/reports/first_stage.md); early stopping on dev H@1 instead of the paper's ROC AUC"}
