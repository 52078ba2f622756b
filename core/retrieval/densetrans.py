"""DenseTrans system (densetrans-cai2021.md §3, §4.2.3): training on the QQP cluster-disjoint train
split with BM25 hard negatives, early stopping on dev Recall@100, exact serving below 1M vectors.

Artifacts (``registry.system_dir(dataset, "densetrans", variant)``): ``config.json``, ``vocab.json``,
``model.pt`` (best dev checkpoint), ``last.pt`` (resume state), ``embeddings.npy`` (collection vectors,
L2-normalised, collection order), ``index/`` (the default faiss index), ``metrics.json``.

Profiles (training = ``core.retrieval.contrastive``: uniform query batches, Eq. (6)-(7), early
stopping with patience on dev Recall@100, learning curve in ``metrics.json["training"]``):
``paper`` = the paper's recipe (d = 300, batch 32, τ = 1 i.e. raw cosine in Eq. (6), PyTorch's default
init, dev = every non-test question; GPU-sized, runs on CUDA via ``core.training.device()``);
``quick`` = the default build: d = 60, batches of 128 queries, τ = 0.05, position embeddings
N(0, 0.02²), φ(q) = the mean of the words of E^N (not the paper's ``[CLS]`` row) with dropout 0.2 (both chosen
over the paper's on dev R@100: bench/reports/first_stage.md), lr 2e-3, dev every 50 steps (dev questions + 5,000 distractors), patience 4, capped at
600 steps (no wall-clock budget: a commit and a seed give the same model on an idle or a busy machine);
``full`` = ``quick`` with patience 6: the same 600-step schedule (resumable from ``last.pt``).
Recipes (variants with their own folder, ``registry.Recipe``; each named beside the paper's): ``paper-objective`` = the
paper's objective ([CLS] pooling, τ = 1, dropout 0.1, PyTorch's default position init) at the default build's
CPU size (d = 60, batches of 128, lr 2e-3, 600-step cap, the same dev early stopping) in
``densetrans@paper-objective/``: built beside the default, never over it. A 3,000-step schedule (warm-up 300, slow decay) was measured
worse than the 600-step one on dev and test (both with ``[CLS]`` pooling; BENCHMARKS.md). Numbers and the measurements behind each choice:
bench/reports/first_stage.md.
"""
from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass

import numpy as np
import torch

from core.artifacts import config_from_dict, load_json, load_torch, require_trained, save_json
from core.data.datasets import Dataset
from core.errors import MissingArtifactError
from core.retrieval.indexing import IndexSpec
from core.registry import build_command, system_dir, system_path
from core.retrieval.base import ProgressFn, no_progress
from core.retrieval.contrastive import TrainPlan, dev_collection, fit, split_score  # noqa: F401 (re-exported)
from core.retrieval.dense import DenseRetriever, stored_vectors_and_index
from core.data.tokenizers import (IdsEncoder, WordPieceVocab, WordVocab, minilm_input_embeddings, minilm_path,
                             state_fingerprint, load_vocab, vocab_is_current)
from core.systems import registration_for
from core.training import check_profile, device, profile_settings, set_seed

REGISTRATION = registration_for(__name__)  # this system's SystemSpec (its module in core.systems)

SYSTEM = "densetrans"
DEFAULT_INDEX = "auto"  # exact below 1M vectors; the paper's IVFPQ (§4.2.3) is the "ivfpq" preset


@dataclass(frozen=True)
class DenseTransConfig:
    """DenseTrans settings; defaults = the paper (§4.2.3) where it gives them; ``plan`` = training."""

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
    position_std: float = 0.0  # 0 = PyTorch's default N(0, 1) (paper: "default initialization")
    pooling: str = "cls"  # φ(q) = E^N[CLS] (§3.2.1); "mean" = mean of E^N over the words
    # paper: batch 32, Eq. (6) on the raw cosine (τ = 1), warm-up 10% then linear decay, Adam(0.9, 0.98, 1e-8)
    # the patience counts after the 800-step warm-up (counted from step 0 it stopped the paper profile at step
    # 1,000 with the untrained model as its best: BENCHMARKS "The papers' `paper` profiles on CUDA")
    plan: TrainPlan = TrainPlan(batch_queries=32, hard_negatives=1, temperature=1.0, lr=5e-4, max_steps=8000,
                                eval_every=200, patience=5, dev_distractors=0, patience_after_warmup=True)


# the CPU settings shared by the quick and full profiles (the same 600-step schedule)
_CPU = {"d_model": 60, "position_std": 0.02, "batch_queries": 128, "temperature": 0.05, "lr": 2e-3,
        "pooling": "mean", "dropout": 0.2, "max_steps": 600, "eval_every": 50, "dev_distractors": 5000,
        "patience_after_warmup": False}
PROFILES = {
    "paper": {},
    # CPU budget of the default build; every deviation measured in bench/reports/first_stage.md
    # (mean pooling + dropout 0.2: BENCHMARKS.md, "DenseTrans pooling")
    # deterministic: step caps and patience only, no wall-clock budget, so a commit and a seed give
    # the same model on an idle or a busy machine
    "quick": {**_CPU, "patience": 4},
    "full": {**_CPU, "patience": 6},  # quick with more patience
    "smoke": {**_CPU, "max_steps": 4, "eval_every": 2, "patience": 1},  # wiring check (fixtures): no measurement
}
# recipes built beside the default (registry ``Recipe`` variants; each in its own folder): the settings that
# replace the profile's, on top of the CPU size, whatever the profile (a profile changes patience only)
RECIPES = {
    # the paper's objective (§3.2.1 [CLS], Eq. (6) on the raw cosine, §4.2.3 dropout 0.1 and PyTorch's default
    # init) at the default build's CPU size and step cap
    "paper-objective": {**_CPU, "pooling": "cls", "temperature": 1.0, "dropout": 0.1, "position_std": 0.0},
}


def _check_recipe_profile(variant: str | None, profile: str) -> None:
    """A recipe fixes its own size: with ``--profile paper`` its name would no longer say what runs."""
    if variant in RECIPES and profile == "paper":
        from core.errors import StudioError

        raise StudioError(f"densetrans@{variant} is the paper's objective at the default build's size (profiles quick "
                          "or full); the paper's whole recipe is --profile paper without a variant")


def make_config(profile: str = "quick", variant: str | None = None, **overrides) -> DenseTransConfig:
    """The config of a profile and variant; ``overrides`` may name config or ``TrainPlan`` fields.

    A recipe variant (``RECIPES``: ``paper-objective``) is the full architecture trained with that recipe's
    settings (``quick``/``full`` contribute their patience only; ``paper`` is refused); any other variant is an
    ablation (§4.4.1)."""
    check_profile(profile)
    REGISTRATION.check_variant(variant)
    _check_recipe_profile(variant, profile)
    plan_fields = {f.name for f in dataclasses.fields(TrainPlan)}
    settings = {**profile_settings(PROFILES, profile), **RECIPES.get(variant or "", {}), **overrides}
    plan = dataclasses.replace(DenseTransConfig.plan, **{k: v for k, v in settings.items() if k in plan_fields})
    arch = "full" if not variant or variant in RECIPES else variant
    return DenseTransConfig(**{k: v for k, v in settings.items() if k not in plan_fields}, variant=arch, plan=plan)


def _folder(dataset: Dataset, variant: str | None, tag: str | None = None, create: bool = True):
    """``densetrans[@variant][+tag]``: the default build in ``densetrans/``, an ablation or a recipe in its own."""
    name = variant if variant and variant != "full" else None
    if tag:
        name = f"{name or 'full'}+{tag}"
    return (system_dir if create else system_path)(dataset.name, SYSTEM, name)


def _served_name(variant: str | None) -> str:
    """The retriever's name: ``densetrans``, ``densetrans-AllDense`` (ablations), ``densetrans@paper-objective``."""
    if not variant or variant == "full":
        return SYSTEM
    return f"{SYSTEM}@{variant}" if variant in RECIPES else f"{SYSTEM}{variant}"


# ----------------------------------------------------------------------------- model construction
def _vocab_and_vectors(dataset: Dataset, cfg: DenseTransConfig):
    """Vocabulary (from the collection's words) and the initial token matrix."""
    rng = np.random.default_rng(cfg.plan.seed)
    if cfg.embeddings == "minilm":
        vocab = WordPieceVocab(minilm_path())
        return vocab, torch.from_numpy(minilm_input_embeddings())
    vocab = WordVocab.build(dataset.corpus.values(), max_size=cfg.vocab_size, hash_bins=0)
    tokens = ["[PAD]", "[CLS]", "[UNK]", *vocab.words]
    if cfg.embeddings == "glove":
        from core.data.vectors import load_glove_50d

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
                      emb_dim=emb_dim, variant=cfg.variant, pad_id=pad_id, pretrained=pretrained,
                      position_std=cfg.position_std, pooling=cfg.pooling)


def _encoder(model, vocab, cfg: DenseTransConfig, encoder_id: str) -> IdsEncoder:
    return IdsEncoder(model, vocab, cfg.max_words, add_cls=True, encoder_id=encoder_id)


# ----------------------------------------------------------------------------- training
def train(dataset: Dataset, cfg: DenseTransConfig, folder, progress: ProgressFn = no_progress,
          resume: bool = True, label: str | None = None) -> dict:
    """Train with Eq. (6)-(7) until dev Recall@100 stops improving (``core.retrieval.contrastive``);
    the best dev checkpoint is ``folder/model.pt`` (resumes from ``last.pt`` when the config matches).
    Returns the run facts and ``training`` = ``TrainLog.to_dict()`` (reference: glove-mean)."""
    from core.retrieval.wordmean import reference

    set_seed(cfg.plan.seed)
    vocab, matrix = _vocab_and_vectors(dataset, cfg)
    model = _model(cfg, vocab.size, matrix.shape[1], vocab.pad_id, matrix)
    save_json(folder / "vocab.json", vocab.to_dict())
    save_json(folder / "config.json", cfg)
    ref = reference(dataset, cfg.plan.dev_distractors, cfg.plan.seed) if dataset.query_splits.get("dev") else None
    encoder = _encoder(model, vocab, cfg, "densetrans-training")
    key = json.dumps(dataclasses.asdict(cfg), sort_keys=True, default=str)
    log, facts = fit(model, lambda texts: vocab.batch(texts, cfg.max_words, add_cls=True), encoder, dataset,
                     cfg.plan, folder, key, ref, progress, resume, label=label or f"DenseTrans {cfg.variant}")
    return {"training": log.to_dict(), **facts}


# ----------------------------------------------------------------------------- build / load
def build(dataset: Dataset, profile: str = "quick", progress: ProgressFn = no_progress,
          variant: str | None = None, config: DenseTransConfig | None = None, tag: str | None = None,
          resume: bool = True) -> dict:
    """Train (or resume from ``last.pt`` when its config matches; ``resume=False`` starts over), encode
    the collection, build the default index (exact here); returns measured metrics incl. the held-out
    test numbers (exact search, each query dropped from its own ranking)."""
    from core.retrieval.wordmean import test_scores

    cfg = config or make_config(profile, variant)
    named = variant if variant in RECIPES else cfg.variant  # a recipe's folder, else the architecture's
    folder = _folder(dataset, named, tag)
    start = time.perf_counter()
    metrics = train(dataset, cfg, folder, progress, resume=resume, label=f"DenseTrans {named}")
    progress(0.82, "encoding the collection")
    retriever, encode_seconds = _serve(dataset, folder, named, build_command(SYSTEM, dataset.name, variant),
                                       index=DEFAULT_INDEX, fresh=True,
                                       progress=lambda f, m: progress(0.82 + 0.15 * f, m))
    metrics.update({"profile": profile, "encode_seconds": encode_seconds,
                    "encode_per_second": len(dataset.corpus) / max(encode_seconds, 1e-9),
                    "total_seconds": time.perf_counter() - start, "index": retriever.spec.factory,
                    "dim": int(retriever.index.d)})
    if dataset.query_splits.get("test"):
        metrics["test"] = test_scores(retriever, dataset)
    metrics["total_seconds"] = time.perf_counter() - start
    save_json(folder / "metrics.json", metrics)
    log = metrics["training"]
    progress(1.0, f"DenseTrans {named}: dev Recall@100 {log['best_dev']:.4f} ({log['stopped']})")
    return metrics


def is_built(dataset: Dataset, variant: str | None = None) -> bool:
    folder = _folder(dataset, variant, create=False)
    return vocab_is_current(folder) and all((folder / f).is_file() for f in ("config.json", "model.pt", "embeddings.npy", "metrics.json"))


class DenseTransRetriever(DenseRetriever):
    """DenseRetriever + per-layer question vectors (the Layers page)."""

    def layer_embeddings(self, texts: list[str]) -> list[np.ndarray]:
        """The model's pooled vector (its ``pooling``: ``[CLS]`` or mean) after the input layer and after each
        of the N layers: N + 1 arrays (n, d_ℓ)."""
        enc: IdsEncoder = self.encoder
        return enc.map(list(texts), enc.model.layer_vectors)


def _load_model(folder, command: str):
    try:
        data = load_json(folder / "config.json", "the DenseTrans config", command)
        plan = config_from_dict(TrainPlan, data.pop("plan", None) or {})
        cfg = dataclasses.replace(config_from_dict(DenseTransConfig, data), plan=plan)
        vocab = load_vocab(folder / "vocab.json", "the DenseTrans vocabulary", command)
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
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


def _serve(dataset: Dataset, folder, variant: str | None, command: str, index: str = DEFAULT_INDEX,
           fresh: bool = False, progress: ProgressFn = no_progress, search_params: str | None = None):
    """Collection vectors (cached) + the requested faiss index (saved for the default preset)."""
    _cfg, encoder = _load_model(folder, command)
    vectors, faiss_index, spec, encode_seconds = stored_vectors_and_index(
        folder, encoder, dataset.corpus, lambda n, d: IndexSpec.from_preset(index, n, d), index,
        "the DenseTrans embeddings", command, fresh=fresh, progress=progress, batch_size=256)
    retriever = DenseTransRetriever(_served_name(variant), encoder, list(dataset.corpus), faiss_index, spec, vectors,
                                    list(dataset.corpus.values()))
    if search_params:
        retriever.set_params(search_params)
    return retriever, encode_seconds


def load(dataset: Dataset, variant: str | None = None, index: str = DEFAULT_INDEX,
         search_params: str | None = None, tag: str | None = None, **options) -> DenseTransRetriever:
    """The trained DenseTrans over the collection with a faiss index (``auto`` (default) = exact below
    1M vectors, ``flat``, ``ivfpq`` (the paper's §4.2.3), ``ivf``, ``hnsw`` or a factory string); cheap
    when the embeddings are built."""
    REGISTRATION.check_variant(variant)
    folder = _folder(dataset, variant, tag)
    command = build_command(SYSTEM, dataset.name, variant if variant and variant != "full" else None)
    require_trained(folder, f"DenseTrans{'' if not variant or variant == 'full' else ' ' + variant}", command)
    return _serve(dataset, folder, variant, command, index=index, search_params=search_params)[0]


def config_dict(variant: str | None = None) -> dict:
    """The paper's settings and where this variant's default-profile build differs from them."""
    def flat(cfg: DenseTransConfig) -> dict:
        out = dataclasses.asdict(cfg)
        return {**{k: v for k, v in out.items() if k != "plan"}, **out["plan"]}

    paper = flat(make_config("paper", None if variant in RECIPES else variant))
    quick = flat(make_config("quick", variant))
    return {"paper": paper, "quick (differences)": {k: v for k, v in quick.items() if paper[k] != v},
            "notes": "paper: FastText 300-d token vectors (here GloVe 6B-50d projected, or MiniLM WordPiece); "
                     "lr and FFN width not given in the paper"}
