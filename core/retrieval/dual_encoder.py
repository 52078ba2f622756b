"""``dual-encoder``: DenseTrans's DualEncoder baseline (densetrans-cai2021.md §4.2.1), trained.

The mean of trainable word vectors (GloVe 6B 50-d where known, U(−0.2, 0.2) otherwise, as DenseTrans's
OOV rule §4.2.3) plus a linear layer (``models.dual_encoder.DualEncoder``), cosine relevance, trained
with Eq. (6)-(7) exactly like DenseTrans (``core.retrieval.contrastive``: batches of uniformly drawn
train queries, one paraphrase each, in-batch softmax + BM25 hard negatives, early stopping with
patience on dev Recall@100). Its untrained reference is ``glove-mean``.

Temperature τ = 0.2, the best dev R@100 of a sweep over 0.02, 0.05, 0.1, 0.2 and 1.0 (the raw cosine of
Eq. 6) with the same early-stopping rule, one seed (``bench/first_stage_train.py dual-encoder --set
temperature=T``; the figures: bench/reports/first_stage.md).

Artifacts (``registry.system_dir(dataset, "dual-encoder")``): ``config.json``, ``vocab.json``,
``model.pt`` (best dev checkpoint), ``last.pt`` (resume state), ``embeddings.npy``, ``metrics.json``
(``training`` = ``TrainLog.to_dict()``, ``test`` = held-out test numbers, exact search).
"""
from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass

from core.artifacts import config_from_dict, load_json, load_torch, require_trained, save_json
from core.data.datasets import Dataset
from core.errors import MissingArtifactError
from core.registry import build_command, system_dir
from core.retrieval.base import ProgressFn, no_progress
from core.retrieval.contrastive import TrainPlan, fit
from core.retrieval.dense import DenseRetriever
from core.retrieval.wordmean import collection_vocab, glove_matrix, reference, serve, test_scores
from core.data.tokenizers import IdsEncoder, load_vocab, state_fingerprint, vocab_is_current
from core.systems import registration_for
from core.training import check_profile, device, profile_settings, set_seed

REGISTRATION = registration_for(__name__)  # this system's SystemSpec (its module in core.systems)

SYSTEM = "dual-encoder"
DEFAULT_INDEX = "auto"


@dataclass(frozen=True)
class DualEncoderConfig:
    """Word-mean dual encoder + the contrastive training plan."""

    max_words: int = 30
    oov_scale: float = 0.2
    plan: TrainPlan = TrainPlan(batch_queries=128, hard_negatives=1, temperature=0.2, lr=5e-3,
                                max_steps=1500, eval_every=25, patience=6)  # step cap, no wall-clock budget


PROFILES = {
    "quick": {},
    "full": {"max_steps": 6000, "patience": 10, "max_seconds": 0},
    # the patience counts after the 2,000-step warm-up: counted from step 0 it stopped the model at step 250, inside
    # its warm-up, with the untrained model as its best (BENCHMARKS "The papers' `paper` profiles on CUDA")
    "paper": {"max_steps": 20000, "patience": 10, "max_seconds": 0, "dev_distractors": 0, "patience_after_warmup": True},
    "smoke": {"max_steps": 4, "eval_every": 2, "patience": 1},  # wiring check (fixtures): a few steps, no measurement
}


def make_config(profile: str = "quick", **overrides) -> DualEncoderConfig:
    """The config of a profile; ``overrides`` may name config or plan fields (experiments)."""
    plan_fields = {f.name for f in dataclasses.fields(TrainPlan)}
    settings = {**profile_settings(PROFILES, profile), **overrides}
    plan = dataclasses.replace(DualEncoderConfig.plan, **{k: v for k, v in settings.items() if k in plan_fields})
    return DualEncoderConfig(**{k: v for k, v in settings.items() if k not in plan_fields}, plan=plan)


def _folder(dataset: Dataset, tag: str | None = None):
    return system_dir(dataset.name, SYSTEM, tag)


def _model(vocab_size: int, pretrained=None):
    from models.dual_encoder import DualEncoder

    return DualEncoder(vocab_size, emb_dim=50, pad_id=0, pretrained=pretrained, linear=True, ignore_ids=(1,))


def build(dataset: Dataset, profile: str = "quick", progress: ProgressFn = no_progress, variant: str | None = None,
          config: DualEncoderConfig | None = None, tag: str | None = None, resume: bool = True) -> dict:
    """Train to convergence (or the profile's cap), encode the collection, exact index; test numbers."""
    check_profile(profile)
    REGISTRATION.check_variant(variant)
    cfg = config or make_config(profile)
    folder = _folder(dataset, tag)
    start = time.perf_counter()
    set_seed(cfg.plan.seed)
    vocab = collection_vocab(dataset, glove_only=False)
    model = _model(vocab.size, glove_matrix(vocab, cfg.plan.seed, cfg.oov_scale))
    save_json(folder / "vocab.json", vocab.to_dict())
    save_json(folder / "config.json", cfg)
    ref = reference(dataset, cfg.plan.dev_distractors, cfg.plan.seed) if dataset.query_splits.get("dev") else None
    encoder = IdsEncoder(model, vocab, cfg.max_words, add_cls=False, encoder_id="dual-encoder-training")
    key = json.dumps(dataclasses.asdict(cfg), sort_keys=True, default=str)
    log, facts = fit(model, lambda texts: vocab.batch(texts, cfg.max_words), encoder, dataset, cfg.plan, folder,
                     key, ref, progress, resume, label="dual-encoder")
    progress(0.85, "encoding the collection")
    retriever, encode_seconds = _serve(dataset, folder, build_command(SYSTEM, dataset.name), fresh=True)
    metrics = {"profile": profile, "training": log.to_dict(), **facts, "encode_seconds": encode_seconds,
               "index": retriever.spec.factory, "dim": int(retriever.index.d)}
    if dataset.query_splits.get("test"):
        metrics["test"] = test_scores(retriever, dataset)
    metrics["total_seconds"] = time.perf_counter() - start
    save_json(folder / "metrics.json", metrics)
    progress(1.0, f"dual-encoder: dev Recall@100 {log.best_dev:.4f} ({log.stopped})")
    return metrics


def is_built(dataset: Dataset, variant: str | None = None) -> bool:
    folder = _folder(dataset)
    return vocab_is_current(folder) and all((folder / f).is_file() for f in ("config.json", "model.pt", "embeddings.npy", "metrics.json"))


def _serve(dataset: Dataset, folder, command: str, index: str = DEFAULT_INDEX, fresh: bool = False,
           search_params: str | None = None):
    try:
        cfg_data = load_json(folder / "config.json", "the dual-encoder config", command)
        plan = config_from_dict(TrainPlan, cfg_data.pop("plan", {}))
        cfg = DualEncoderConfig(**{k: v for k, v in cfg_data.items() if k != "plan"}, plan=plan)
        vocab = load_vocab(folder / "vocab.json", "the dual-encoder vocabulary", command)
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise MissingArtifactError("the dual-encoder config", command, f"corrupt ({exc})") from None
    state = load_torch(folder / "model.pt", "the dual-encoder checkpoint", command)
    try:
        model = _model(state["token.weight"].shape[0])
        model.load_state_dict(state)
    except (KeyError, RuntimeError, AttributeError) as exc:
        raise MissingArtifactError("the dual-encoder checkpoint", command, f"corrupt ({type(exc).__name__})") from None
    model.to(device()).eval()
    encoder = IdsEncoder(model, vocab, cfg.max_words, add_cls=False, encoder_id=f"dual-encoder:{state_fingerprint(state)}")
    return serve(SYSTEM, folder, encoder, dataset, "the dual-encoder vectors", command, index=index, fresh=fresh,
                 search_params=search_params)


def load(dataset: Dataset, variant: str | None = None, index: str = DEFAULT_INDEX, search_params: str | None = None,
         tag: str | None = None, **options) -> DenseRetriever:
    """The trained dual encoder over the collection (``index``: ``auto`` = exact below 1M vectors)."""
    REGISTRATION.check_variant(variant)
    folder = _folder(dataset, tag)
    command = build_command(SYSTEM, dataset.name)
    require_trained(folder, "the dual-encoder", command)
    return _serve(dataset, folder, command, index=index, search_params=search_params)[0]


def config_dict(variant: str | None = None) -> dict:
    quick = dataclasses.asdict(make_config("quick"))
    return {"quick": quick,
            "notes": "paper (Gillick et al. via Cai et al. §4.2.1): multi-task in-batch losses; here Eq. (6)-(7) "
                     "with τ = 0.2 (chosen on dev, BENCHMARKS.md), batches of 128 uniformly drawn train queries + 1 BM25 negative each, "
                     "early stopping on dev Recall@100 (patience 6 evaluations of 25 steps)"}
