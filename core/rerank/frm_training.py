"""FRM's training (frm-multiview-chong.md §3.3, §4.1.4): the settings of each profile and recipe
(:class:`FRMTrainConfig`), the loop on the labelled pairs with dev ROC AUC early stopping (``train_frm``: Eq. (18),
plus the keyword-agreement loss in the ``kw-loss`` recipe), its references (zero-shot MiniLM cosine, the untrained
FRM) and the importance report of w(k, q) (Eq. 7). Inputs come from ``core.rerank.frm_features``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from core.artifacts import save_json, save_torch
from core.data.datasets import Dataset, Pair
from core.data.keywords import LexicalStats
from core.data.pipeline import stamp
from core.rerank.frm_features import Featurizer, TextFeatures, VectorStore, make_batch, side_tensors
from core.retrieval.base import ProgressFn, no_progress
from core.training import (TrainLog, check_profile, device, linear_warmup_decay, load_train_state, save_train_state,
                           set_seed)
from models.frm import FRM, FRMConfig, frm_loss, keyword_agreement_loss

# recipes built beside the default (registry ``Recipe`` variants; each in its own folder): FRMTrainConfig
# fields that replace the profile's
RECIPES: dict[str, dict] = {
    "kw-loss": {"keyword_loss": 1.0},  # the project's earlier recipe: Eq. (18) + the keyword-agreement loss
}


@dataclass(frozen=True)
class FRMTrainConfig:
    """Training settings: paper §4.1.4 (AdamW, lr 2e-5 with warm-up, batch 64 on Quora, dropout 0.3) and the
    convergence rule of every trainer: evaluate dev ROC AUC every ``eval_every`` steps, keep the best, stop after
    ``patience`` evaluations without improvement (``core.training.TrainLog``), or at ``max_epochs`` /
    ``max_seconds`` (then ``stopped`` says "cap" / "budget")."""

    profile: str = "quick"
    train_pairs: int = 0  # 0 = all 15,871 training pairs
    max_epochs: int = 3
    batch_size: int = 64  # §4.1.4 (Quora)
    bert_lr: float = 2e-5  # §4.1.4 (only used when MiniLM is fine-tuned)
    head_lr: float = 1e-3  # deviation: new layers learn at 1e-3 (at 2e-5 they do not move in a CPU budget)
    warmup_fraction: float = 0.05
    weight_decay: float = 0.01
    finetune_encoder: bool = False  # paper profile: True
    eval_every: int = 100  # steps between dev evaluations
    patience: int = 4  # evaluations without improvement
    max_seconds: float = 0.0  # wall-clock budget of the training loop (0 = none)
    dev_pairs: int = 0  # dev pairs used for early stopping (0 = all)
    keyword_loss: float = 0.0  # weight of models.frm.keyword_agreement_loss beside Eq. (18): 0 = the paper (default, chosen on dev)
    seed: int = 13

    @classmethod
    def for_profile(cls, profile: str) -> FRMTrainConfig:
        """quick: the default build (≈ 4 min on 2 cores); full: longer caps, resumable; paper: fine-tuned MiniLM."""
        profile = check_profile(profile)
        if profile == "paper":
            return cls(profile="paper", max_epochs=10, finetune_encoder=True, eval_every=250, patience=4, keyword_loss=0.0)
        if profile == "full":
            return cls(profile="full", max_epochs=30, patience=8)
        return cls(max_epochs=3, dev_pairs=1000)  # 3-epoch step cap, no wall-clock budget (deterministic)

    @classmethod
    def for_variant(cls, profile: str, variant: str | None = None) -> FRMTrainConfig:
        """The profile's settings with a recipe variant's (``RECIPES``) on top; ablations train like the default.
        A recipe takes the quick or full profile (``paper`` fine-tunes MiniLM: its name would no longer say what runs)."""
        if variant in RECIPES and profile == "paper":
            from core.errors import StudioError

            raise StudioError(f"frm@{variant} is the paper's loss with the default build's recipe (profiles quick or "
                              "full); the paper's whole recipe is --profile paper without a variant")
        return dataclasses.replace(cls.for_profile(profile), **RECIPES.get(variant or "", {}))


def _subset(pairs: list[Pair], n: int, seed: int) -> list[Pair]:
    if not n or n >= len(pairs):
        return list(pairs)
    rng = np.random.default_rng(seed)
    return [pairs[i] for i in sorted(rng.choice(len(pairs), n, replace=False))]


def pair_features(featurizer: Featurizer, corpus: dict[str, str], pairs: list[Pair]) -> dict[str, TextFeatures]:
    """Keyword features of every question of ``pairs`` (text -> features)."""
    texts = list(dict.fromkeys(t for p in pairs for t in (corpus[p.id1], corpus[p.id2])))
    feats = dict(zip(texts, featurizer.features(texts)))
    return feats


def predict_pairs(model: FRM, feats: dict[str, TextFeatures], store: VectorStore, corpus: dict[str, str],
                  pairs: list[Pair], dev: torch.device, batch_size: int = 256) -> np.ndarray:
    """sim(q, d) for labelled pairs whose vectors are in ``store``."""
    model.eval()
    out = []
    with torch.inference_mode():
        for s in range(0, len(pairs), batch_size):
            part = pairs[s : s + batch_size]
            out.append(torch.sigmoid(model(_pairs_batch(part, feats, store, corpus, dev))).cpu().numpy())
    return np.concatenate(out) if out else np.zeros(0)


def _pairs_batch(part, feats, store, corpus, dev):
    tq, td = [corpus[p.id1] for p in part], [corpus[p.id2] for p in part]
    return make_batch([feats[t] for t in tq], [feats[t] for t in td],
                      np.stack([store.cls[t] for t in tq]).astype(np.float32), [store.kw[t] for t in tq],
                      np.stack([store.cls[t] for t in td]).astype(np.float32), [store.kw[t] for t in td], dev)


def accuracy_auc(labels: np.ndarray, probs: np.ndarray) -> dict[str, float]:
    """Acc. (threshold 0.5, §3.3.3) and AUC (``core.evaluation.roc_auc``) of pair predictions."""
    from core.evaluation import roc_auc

    labels = np.asarray(labels) > 0
    acc = float(((probs > 0.5) == labels).mean()) if len(labels) else 0.0
    return {"acc": acc, "auc": roc_auc(labels, probs)}


def minilm_cosine_scores(featurizer: Featurizer, corpus: dict[str, str], pairs: list[Pair], batch_size: int = 128) -> np.ndarray:
    """Zero-shot reference: cosine of the all-MiniLM-L6-v2 sentence vectors (its sentence-transformers
    recipe: mean pooling over WordPieces, L2 normalisation, ≤ 256 WordPieces) of each pair's questions."""
    key = hashlib.sha1("\x00".join(corpus[p.id1] + "\x01" + corpus[p.id2] for p in pairs).encode()).hexdigest()
    if key in _ZERO_SHOT:
        return _ZERO_SHOT[key]
    enc = featurizer.encoder()
    tok = featurizer._tokenizer
    dev = next(enc.parameters()).device
    texts = list(dict.fromkeys(t for p in pairs for t in (corpus[p.id1], corpus[p.id2])))
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    vecs = np.zeros((len(texts), 384), np.float32)
    with torch.inference_mode():
        for s in range(0, len(order), batch_size):
            idx = order[s : s + batch_size]
            b = tok([texts[i] for i in idx], truncation=True, max_length=256, padding=True, return_tensors="pt").to(dev)
            h = enc.backbone(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).last_hidden_state
            m = b["attention_mask"][..., None].to(h.dtype)
            v = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1).clamp(min=1), dim=-1)
            vecs[idx] = v.float().cpu().numpy()
    pos = {t: i for i, t in enumerate(texts)}
    a = vecs[[pos[corpus[p.id1]] for p in pairs]]
    b = vecs[[pos[corpus[p.id2]] for p in pairs]]
    _ZERO_SHOT[key] = (a * b).sum(1)
    return _ZERO_SHOT[key]


_ZERO_SHOT: dict[str, np.ndarray] = {}  # pair list digest -> zero-shot cosines (once per process)


def importance_report(model: FRM, feats: Sequence[TextFeatures], store: VectorStore, dev: torch.device,
                      batch_size: int = 256) -> dict:
    """How w(k, q) (Eq. 7) behaves on ``feats``: Spearman with IDF (pooled over all keywords and the mean
    per question), mean importance of stop words (spaCy list) vs content words, spread."""
    from scipy.stats import spearmanr

    if model.importance_net is None or not feats:
        return {}
    model.eval()
    imp, idf, stop, per_q = [], [], [], []
    with torch.inference_mode():
        for s in range(0, len(feats), batch_size):
            part = [f for f in feats[s : s + batch_size] if f.keywords]
            if not part:
                continue
            side = side_tensors(part, np.stack([store.cls[f.text] for f in part]).astype(np.float32),
                                [store.kw[f.text] for f in part], dev)
            w = model.importance(side).float().cpu().numpy()
            for i, f in enumerate(part):
                wi = w[i, : len(f.keywords)]
                imp.append(wi)
                idf.append(f.idf)
                stop.append(np.asarray(f.stop, bool))
                if len(wi) > 2 and np.ptp(wi) > 0 and np.ptp(f.idf) > 0:
                    per_q.append(spearmanr(wi, f.idf).statistic)
    imp_all, idf_all, stop_all = np.concatenate(imp), np.concatenate(idf), np.concatenate(stop)
    return {"keywords": int(len(imp_all)), "questions": len(imp),
            "spearman_idf": float(spearmanr(imp_all, idf_all).statistic) if np.ptp(imp_all) > 0 else 0.0,
            "spearman_idf_per_question": float(np.mean(per_q)) if per_q else 0.0,
            "mean_stop": float(imp_all[stop_all].mean()) if stop_all.any() else float("nan"),
            "mean_content": float(imp_all[~stop_all].mean()) if (~stop_all).any() else float("nan"),
            "std": float(imp_all.std()), "std_within_question": float(np.mean([w.std() for w in imp])),
            "saturated": float(((imp_all > 0.999) | (imp_all < 0.001)).mean())}


def _labels(pairs: Sequence[Pair]) -> np.ndarray:
    return np.array([int(p.label > 0) for p in pairs])


def _dev_metric(labels: np.ndarray, probs: np.ndarray) -> float:
    """ROC AUC of the dev pairs (the paper's AUC.); accuracy when dev holds one class only (tiny fixtures)."""
    scores = accuracy_auc(labels, probs)
    return scores["auc"] if np.isfinite(scores["auc"]) else scores["acc"]


def train_frm(dataset: Dataset, cfg: FRMConfig, tcfg: FRMTrainConfig, folder: Path,
              progress: ProgressFn = no_progress, stats: LexicalStats | None = None, resume: bool = True,
              featurizer: Featurizer | None = None) -> dict:
    """Train FRM (Eq. 18) with one intra-op thread on CPU, then restore the caller's thread count.

    Measured (bench/frm_threads.py): with two intra-op threads the same seed gives different weights from run to
    run (the curves part after ~20 steps), with one thread they are bit-identical; a commit and a seed must give
    one model, so FRM trains single-threaded on CPU.
    """
    threads = torch.get_num_threads()
    if device().type == "cpu":
        torch.set_num_threads(1)
    try:
        return _train_frm(dataset, cfg, tcfg, folder, progress, stats, resume, featurizer)
    finally:
        torch.set_num_threads(threads)


def _train_frm(dataset: Dataset, cfg: FRMConfig, tcfg: FRMTrainConfig, folder: Path,
               progress: ProgressFn = no_progress, stats: LexicalStats | None = None, resume: bool = True,
               featurizer: Featurizer | None = None) -> dict:
    """Train FRM (Eq. 18) on ``dataset.pairs['train']`` until dev ROC AUC stops improving; save the best.

    The learning curve (dev AUC against steps and seconds) goes to ``metrics["training"]``
    (``core.training.TrainLog``) with two references: the zero-shot MiniLM cosine of the same dev pairs
    and the untrained FRM (the curve's step 0). An interrupted run resumes from ``folder/last.pt``.
    """
    from core.errors import StudioError

    set_seed(tcfg.seed)
    dev = device()
    start = time.perf_counter()
    stats = featurizer.stats if featurizer is not None else stats or LexicalStats.from_texts(dataset.corpus.values())
    featurizer = featurizer or Featurizer(stats, cfg.max_keywords)
    train = _subset(dataset.pairs.get("train", []), tcfg.train_pairs, tcfg.seed)
    dev_pairs = _subset(dataset.pairs.get("dev", []), tcfg.dev_pairs, tcfg.seed)
    if not train or not dev_pairs:
        raise StudioError(f"FRM needs labelled train and dev pairs; dataset {dataset.name!r} has "
                          f"{len(train)} train and {len(dev_pairs)} dev pairs")
    progress(0.0, "FRM: keyword features (spaCy POS, IDF, BM25)")
    feats = pair_features(featurizer, dataset.corpus, train + dev_pairs)
    store = VectorStore.for_encoder(cfg.max_keywords)
    store.ensure(featurizer, list(feats.values()), progress=lambda f, m: progress(0.05 + 0.35 * f, m))
    dev_labels = _labels(dev_pairs)
    model = FRM(cfg).to(dev)
    encoder = featurizer.encoder(dev) if tcfg.finetune_encoder else None
    groups = [{"params": list(model.parameters()), "lr": tcfg.head_lr}]
    if encoder is not None:
        groups.append({"params": list(encoder.parameters()), "lr": tcfg.bert_lr})
    opt = torch.optim.AdamW(groups, weight_decay=tcfg.weight_decay)
    steps_per_epoch = (len(train) + tcfg.batch_size - 1) // tcfg.batch_size
    max_steps = steps_per_epoch * tcfg.max_epochs
    sched = linear_warmup_decay(opt, max_steps, tcfg.warmup_fraction)
    key = json.dumps({"model": dataclasses.asdict(cfg), "train": {**dataclasses.asdict(tcfg), "max_seconds": None},
                      "pairs": len(train)}, sort_keys=True)
    progress(0.4, "FRM: references (zero-shot MiniLM cosine, untrained FRM) on the dev pairs")
    zero_shot = _dev_metric(dev_labels, minilm_cosine_scores(featurizer, dataset.corpus, dev_pairs))
    log = TrainLog("roc_auc", patience=tcfg.patience, max_steps=max_steps)
    last = folder / "last.pt"
    step, seconds_before, untrained = 0, 0.0, None
    best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    best_encoder = None
    parts = {"model": model, "optimizer": opt, "scheduler": sched,
             **({"encoder": encoder.backbone} if encoder is not None else {})}
    try:  # the best weights so far, which a resumed run keeps comparing against
        saved = torch.load(folder / "weights.pt", map_location="cpu", weights_only=True) if resume else None
    except Exception:  # noqa: BLE001 - unreadable: start over
        saved = None
    state = load_train_state(last, key, parts) if saved is not None else None
    if state is not None:
        step, seconds_before, log, untrained = (int(state["step"]), float(state["seconds"]), state["log"],
                                                float(state["untrained"]))
        best_state, best_encoder = saved["model"], saved.get("encoder")
        progress(0.4, f"FRM: resuming at step {step}")
    t0 = time.perf_counter()

    def elapsed() -> float:
        return seconds_before + time.perf_counter() - t0

    def dev_store() -> VectorStore:
        if encoder is None:
            return store
        fresh = VectorStore.__new__(VectorStore)
        fresh.cls, fresh.kw = {}, {}
        dev_feats = [feats[t] for t in dict.fromkeys(t for p in dev_pairs for t in (dataset.corpus[p.id1], dataset.corpus[p.id2]))]
        encoder.eval()
        cls, kws = featurizer.vectors(dev_feats)
        encoder.train()
        for f, c, k in zip(dev_feats, cls, kws):
            fresh.cls[f.text], fresh.kw[f.text] = c, k
        return fresh

    def evaluate(loss: float | None) -> None:
        nonlocal best_state, best_encoder
        value = _dev_metric(dev_labels, predict_pairs(model, feats, dev_store(), dataset.corpus, dev_pairs, dev))
        if log.record(step, step / steps_per_epoch, elapsed(), value, loss):
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            payload = {"model": best_state}
            if encoder is not None:
                best_encoder = {k: v.detach().clone() for k, v in encoder.backbone.state_dict().items()}
                payload["encoder"] = best_encoder
            save_torch(folder / "weights.pt", payload)
        save_train_state(last, key, parts, step, elapsed(), log,
                         untrained=float(untrained if untrained is not None else value))

    if untrained is None:  # step 0 of the curve = the untrained FRM (its own reference)
        evaluate(None)
        untrained = log.curve[0].dev
    log.reference = {"system": "minilm", "variant": "zero-shot cosine", "dev": zero_shot, "test": None,
                     "metric": "roc_auc", "untrained": {"system": "frm", "variant": "untrained", "dev": untrained}}
    from tqdm.auto import tqdm

    reason = None
    bar = tqdm(total=max_steps, initial=step, desc="FRM", leave=False)
    running, count = 0.0, 0
    while step < max_steps and not log.should_stop:
        epoch, pos = divmod(step, steps_per_epoch)
        order = np.random.default_rng(tcfg.seed + epoch).permutation(len(train))
        part = [train[i] for i in order[pos * tcfg.batch_size : (pos + 1) * tcfg.batch_size]]
        model.train()
        if encoder is not None:
            encoder.train()
            batch = _encoded_batch(part, feats, featurizer, encoder, dataset.corpus, dev)
        else:
            batch = _pairs_batch(part, feats, store, dataset.corpus, dev)
        labels = torch.tensor([p.label > 0 for p in part], dtype=torch.float32, device=dev)
        views = model.views(batch)
        loss = frm_loss(model.score_from_E(views["E"]), labels)  # Eq. (18)
        if tcfg.keyword_loss and model.importance_net is not None:
            loss = loss + tcfg.keyword_loss * keyword_agreement_loss(views, batch["eq"], labels)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for g in groups for p in g["params"]], 5.0)
        opt.step()
        sched.step()
        step += 1
        running, count = running + loss.item(), count + 1
        bar.update(1)
        bar.set_postfix(loss=f"{running / count:.4f}")
        progress(0.42 + 0.55 * step / max_steps,
                 f"FRM step {step}/{max_steps} (epoch {epoch + 1}) loss {running / count:.4f}, best dev AUC {log.best_dev:.4f}")
        over_budget = bool(tcfg.max_seconds) and elapsed() > tcfg.max_seconds
        if step % tcfg.eval_every == 0 or step == max_steps or over_budget:
            evaluate(running / count)
            running, count = 0.0, 0
            if over_budget and not log.should_stop:
                reason = "budget"
                break
    bar.close()
    log.finish(reason)
    model.load_state_dict(best_state)
    if encoder is not None and best_encoder is not None:
        encoder.backbone.load_state_dict(best_encoder)
    payload = {"model": best_state, **({"encoder": best_encoder} if best_encoder is not None else {})}
    save_torch(folder / "weights.pt", payload)
    seconds = time.perf_counter() - start
    save_json(folder / "config.json", {"model": dataclasses.asdict(cfg), "train": dataclasses.asdict(tcfg), **stamp()})
    save_json(folder / "lexical_stats.json", {"df": stats.df, "n_docs": stats.n_docs, "avgdl": stats.avgdl,
                                              "k1": stats.k1, "b": stats.b})
    dev_texts = [feats[t] for t in dict.fromkeys(t for p in dev_pairs for t in (dataset.corpus[p.id1], dataset.corpus[p.id2]))]
    metrics = {"seconds": seconds, "train_seconds": elapsed(), "train_pairs": len(train), "dev_pairs": len(dev_pairs),
               "steps": step, "best_step": log.best_step, "best_dev_auc": log.best_dev,
               "untrained_dev_auc": untrained, "zero_shot_minilm_dev_auc": zero_shot,
               "importance_dev": importance_report(model, dev_texts, dev_store(), dev),
               "training": log.to_dict()}
    save_json(folder / "metrics.json", metrics)
    last.unlink(missing_ok=True)
    progress(1.0, f"FRM: {step} steps in {elapsed():.0f}s ({log.stopped}), best dev AUC {log.best_dev:.4f} "
                  f"(untrained {untrained:.4f}, zero-shot MiniLM {zero_shot:.4f})")
    return metrics


def _encoded_batch(part, feats, featurizer, encoder, corpus, dev):
    """Paper profile: MiniLM runs inside the training step (gradients reach the encoder)."""
    tq, td = [feats[corpus[p.id1]] for p in part], [feats[corpus[p.id2]] for p in part]
    out = []
    for side in (tq, td):
        toks = {k: v.to(dev) for k, v in featurizer.tokenize(side).items()}
        cls, kw = encoder(**toks)
        out.append((cls, kw))
    batch = make_batch(tq, td, np.zeros((len(part), 384), np.float32), [np.zeros((len(f.keywords), 384), np.float32) for f in tq],
                       np.zeros((len(part), 384), np.float32), [np.zeros((len(f.keywords), 384), np.float32) for f in td], dev)
    for key, (cls, kw) in zip(("q", "d"), out):
        length = batch[key]["kw"].shape[1]
        batch[key]["cls"], batch[key]["kw"] = cls, kw[:, :length]
    return batch
