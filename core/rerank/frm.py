"""System ``frm``: FRM reranker (frm-multiview-chong.md §3) trained on the QQP cluster-disjoint pairs.

Pipeline per question: keyword candidates + spaCy POS/stop words + IDF buckets + BM25 weights
(``core.data.keywords``) and MiniLM vectors (``models.frm.KeywordEncoder``: E_CLS and the mean WordPiece
vector of each keyword). ``models.frm.FRM`` does the rest (importance, keyword sets, pairs, views).

CPU cost bound (``quick`` profile): MiniLM is frozen; its vectors are computed once per question under
``torch.inference_mode`` (length-sorted batches, ≤ 64 WordPieces, ≤ 32 keywords) and cached in
``var/cache/frm-vectors`` (chunked, so an interrupted build resumes) for the whole collection. Training
(``train_frm``) evaluates dev ROC AUC every ``eval_every`` steps and keeps the best (``TrainLog``: patience,
epoch cap, and in ``quick`` 1,000 dev pairs; no wall-clock budget); ``full`` has longer caps and resumes from ``last.pt``; ``paper``
fine-tunes MiniLM (lr 2e-5, warm-up). References in ``metrics["training"]["reference"]``: the zero-shot
MiniLM cosine of the same dev pairs and the untrained FRM (the curve's step 0).
Loss: the paper's Eq. (18) alone (``keyword_loss`` 0), the paper's recipe under the paper's name; whether the
keyword-agreement term helps was decided on dev ROC AUC over seeds, by a rule fixed in advance (the numbers and
the verdict: ``bench/reports/dev_decisions.json``, BENCHMARKS.md "Choices re-decided on dev"). Recipes (variants with
their own folder, ``registry.Recipe``): ``kw-loss`` = the project's earlier recipe, Eq. (18) plus
``models.frm.keyword_agreement_loss`` (weight 1), in ``frm@kw-loss/`` beside the default.
Inference: collection questions reuse the build's vectors, POS tags and (memoised) keyword features; a typed
query gets one MiniLM forward and one spaCy call; each distinct text of a batch goes through ImNN once.
Here: the system (its variants, the reranker, build / is_built / load); its inputs are ``core.rerank.frm_features``,
its training ``core.rerank.frm_training`` (the training names are re-exported for bench/ and the tests).
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from core.artifacts import config_from_dict, load_json, load_torch, save_json
from core.data.datasets import Dataset
from core.data.keywords import LexicalStats, assign_pairs, keyword_sets
from core.data.pipeline import check_stamp, is_current
from core.errors import MissingArtifactError
from core.registry import build_command, system_dir, system_path
from core.rerank.frm_features import Featurizer, VectorStore, equality, side_tensors
from core.rerank.frm_training import (RECIPES, FRMTrainConfig, accuracy_auc, importance_report,  # noqa: F401
                                      pair_features, predict_pairs, train_frm)
from core.retrieval.base import ProgressFn, Reranker, no_progress
from core.systems import registration_for
from core.training import device
from models.frm import FRM, FRMConfig

REGISTRATION = registration_for(__name__)  # this system's SystemSpec (its module in core.systems)

COLLECTION_CACHE_LIMIT = 200_000  # the build caches features + vectors of collections up to this size

VARIANTS: dict[str, dict] = {
    "full": {},
    "-m_mlp": {"use_mlp": False},
    "-m_att": {"use_att": False},
    "-m_lm": {"use_lm": False},
    "FRM-1": {"importance": "one"},
    "FRM-TFIDF": {"importance": "tfidf"},
    "one-level": {"max_levels": 1},
    "two-level": {"max_levels": 2},
    "three-level": {"max_levels": 3},
}


# ----------------------------------------------------------------------------- reranker
@dataclass
class FRMExplanation:
    """Everything the Keywords page shows for one (query, candidate) pair."""

    score: float
    query_keywords: list[str]
    candidate_keywords: list[str]
    query_importance: list[float]
    candidate_importance: list[float]
    query_idf: list[float]
    candidate_idf: list[float]
    query_pos: list[str]
    candidate_pos: list[str]
    query_stop: list[bool]
    candidate_stop: list[bool]
    query_levels: list[list[str]]
    candidate_levels: list[list[str]]
    pairs: list[dict] = field(default_factory=list)  # {q_level, d_level, q_set, d_set, weight, rule}
    view_contributions: dict[str, float] = field(default_factory=dict)


class FRMReranker(Reranker):
    """FRM as a reranker: ``score_pairs`` = sim(q, d) of Eq. (2), batched."""

    def __init__(self, model: FRM, featurizer: Featurizer, name: str = "frm", batch_pairs: int = 256,
                 store: VectorStore | None = None) -> None:
        self.model, self.featurizer, self.name, self.batch_pairs = model.eval(), featurizer, name, batch_pairs
        self.store = store  # frozen-MiniLM vectors cached at build time (quick profile only)

    def _encode(self, texts: list[str]):
        """Features and vectors of the unique texts: cached vectors where present, one MiniLM batch for the rest."""
        uniq = list(dict.fromkeys(texts))
        feats = self.featurizer.features(uniq)
        cls = np.zeros((len(feats), 384), dtype=np.float32)
        kws: list[np.ndarray] = [np.zeros((0, 384), np.float32)] * len(feats)
        missing = []
        for i, f in enumerate(feats):
            if self.store is not None and f.text in self.store.cls and len(self.store.kw[f.text]) == len(f.keywords):
                cls[i], kws[i] = self.store.cls[f.text], self.store.kw[f.text].astype(np.float32)
            else:
                missing.append(i)
        if missing:
            c, k = self.featurizer.vectors([feats[i] for i in missing])
            for j, i in enumerate(missing):
                cls[i], kws[i] = c[j], k[j]
        pos = {t: i for i, t in enumerate(uniq)}
        return feats, cls, kws, pos

    def _batch(self, queries: list[str], docs: list[str]):
        """Model batch with each distinct text once per side (``rows`` maps pairs to texts): the query of a
        reranked list gets one ImNN pass, not one per candidate."""
        feats, cls, kws, pos = self._encode(list(queries) + list(docs))
        dev = next(self.model.parameters()).device
        batch = {}
        for key, texts in (("q", queries), ("d", docs)):
            uniq = list(dict.fromkeys(texts))
            idx = [pos[t] for t in uniq]
            side = side_tensors([feats[i] for i in idx], cls[idx], [kws[i] for i in idx], dev)
            row_of = {t: r for r, t in enumerate(uniq)}
            side["rows"] = torch.tensor([row_of[t] for t in texts], dtype=torch.long, device=dev)
            batch[key] = side
        batch["eq"] = equality([feats[pos[t]] for t in queries], [feats[pos[t]] for t in docs], dev)
        return batch, feats, pos

    def score_pairs(self, queries: list[str], docs: list[str]) -> np.ndarray:
        out = np.empty(len(queries), dtype=np.float64)
        with torch.inference_mode():
            for s in range(0, len(queries), self.batch_pairs):
                batch, _, _ = self._batch(queries[s : s + self.batch_pairs], docs[s : s + self.batch_pairs])
                out[s : s + self.batch_pairs] = torch.sigmoid(self.model(batch)).double().cpu().numpy()
        return out

    def explain(self, query: str, candidate: str) -> FRMExplanation:
        """Importances, keyword sets, comparable pairs with Eq. (9) weights, and each view's contribution
        (score minus the score with that view's aggregated vector set to zero)."""
        with torch.inference_mode():
            batch, feats, pos = self._batch([query], [candidate])
            v = self.model.views(batch)
            score = float(torch.sigmoid(self.model.score_from_E(v["E"]))[0])
            contrib = {}
            for name, sl in self.model.view_slices().items():
                e = v["E"].clone()
                e[:, sl] = 0
                contrib[name] = score - float(torch.sigmoid(self.model.score_from_E(e))[0])
        fq, fd = feats[pos[query]], feats[pos[candidate]]
        wq = v["w_q"][0, : len(fq.keywords)].cpu().numpy().tolist()
        wd = v["w_d"][0, : len(fd.keywords)].cpu().numpy().tolist()
        lq, ld = keyword_sets(wq), keyword_sets(wd)
        pairs = []
        pw = v["pair_w"][0].cpu().numpy()
        limit = self.model.cfg.max_levels or len(lq)
        for m, n in assign_pairs(len(lq), len(ld))[:limit]:
            size_q = len(lq[m])
            rule = 3 if size_q == 1 else (1 if len(ld[n]) * len(lq) == size_q * len(ld) else 2)
            pairs.append({"q_level": m + 1, "d_level": n + 1, "q_set": [fq.keywords[i] for i in lq[m]],
                          "d_set": [fd.keywords[i] for i in ld[n]], "weight": float(pw[m]), "rule": rule})
        return FRMExplanation(
            score=score, query_keywords=fq.keywords, candidate_keywords=fd.keywords,
            query_importance=wq, candidate_importance=wd, query_idf=fq.idf.tolist(), candidate_idf=fd.idf.tolist(),
            query_pos=fq.pos, candidate_pos=fd.pos, query_stop=[bool(x) for x in fq.stop],
            candidate_stop=[bool(x) for x in fd.stop],
            query_levels=[[fq.keywords[i] for i in s] for s in lq], candidate_levels=[[fd.keywords[i] for i in s] for s in ld],
            pairs=pairs, view_contributions=contrib,
        )


    def keyword_gradients(self, query: str, candidate: str) -> tuple[list[str], list[float], list[str], list[float]]:
        """Input × gradient of the pair's logit (Eq. 2, before the sigmoid) over each keyword's MiniLM vector,
        summed over the vector's dimensions (Shrikumar et al. 2016), for both sides: a second view of which words
        drive the score, through every path (ImNN's importance, keyword sets, matching views).
        Returns (query keywords, their attributions, candidate keywords, theirs)."""
        batch, feats, pos = self._batch([query], [candidate])
        for key in ("q", "d"):
            batch[key]["kw"] = batch[key]["kw"].detach().clone().requires_grad_(True)
        with torch.enable_grad():
            logit = self.model(batch).sum()
            grad_q, grad_d = torch.autograd.grad(logit, [batch["q"]["kw"], batch["d"]["kw"]])
        fq, fd = feats[pos[query]], feats[pos[candidate]]
        att_q = (grad_q * batch["q"]["kw"].detach()).sum(-1)[0, : len(fq.keywords)]
        att_d = (grad_d * batch["d"]["kw"].detach()).sum(-1)[0, : len(fd.keywords)]
        return fq.keywords, att_q.cpu().numpy().tolist(), fd.keywords, att_d.cpu().numpy().tolist()


def explain(reranker: FRMReranker, query: str, candidate: str) -> FRMExplanation:
    """Module-level alias of ``FRMReranker.explain`` (for the UI)."""
    return reranker.explain(query, candidate)


# ----------------------------------------------------------------------------- training
def _folder(dataset: Dataset, variant: str | None, create: bool = True):
    """``frm/`` for the default build, ``frm@<variant>/`` for an ablation or a recipe (never the default's)."""
    return (system_dir if create else system_path)(dataset.name, "frm", None if variant in (None, "full") else variant)


def _served_name(variant: str | None) -> str:
    """``frm``, ``frm-m_mlp`` (ablations), ``frm@kw-loss`` (recipes)."""
    if variant in (None, "full"):
        return "frm"
    return f"frm@{variant}" if variant in RECIPES else f"frm{variant}"


def model_config(variant: str | None = None, **overrides) -> FRMConfig:
    """The model of a variant: an ablation's (``VARIANTS``), or the full model for a recipe (``RECIPES``)."""
    if variant not in (None, *VARIANTS, *RECIPES):
        from core.errors import UnknownNameError

        raise UnknownNameError("variant of frm", str(variant), [*VARIANTS, *RECIPES])
    return FRMConfig(**{**VARIANTS.get(variant or "full", {}), **overrides})


# ----------------------------------------------------------------------------- system contract
def build(dataset: Dataset, profile: str = "quick", progress: ProgressFn = no_progress, variant: str | None = None,
          train_config: FRMTrainConfig | None = None) -> dict:
    """Train FRM (variant = an ablation name of ``VARIANTS`` or a recipe of ``RECIPES``); cache the collection's POS
    tags and frozen-MiniLM vectors so that reranking only computes features for a typed query."""
    cfg = model_config(variant)
    tcfg = train_config or FRMTrainConfig.for_variant(profile, variant)
    folder = _folder(dataset, variant)
    stats = LexicalStats.from_texts(dataset.corpus.values())
    featurizer = Featurizer(stats, cfg.max_keywords)
    t0 = time.perf_counter()
    progress(0.0, "FRM: keyword features of the collection (spaCy POS, IDF, BM25)")
    texts = list(dataset.corpus.values())
    if len(texts) > COLLECTION_CACHE_LIMIT:  # large imported collections: only the labelled pairs' texts
        texts = list(dict.fromkeys(dataset.corpus[i] for ps in dataset.pairs.values() for p in ps for i in (p.id1, p.id2)))
    feats = featurizer.features(texts)
    save_json(folder / "pos_cache.json", {t: featurizer.pos_cache[t] for t in texts})
    if not tcfg.finetune_encoder:  # query time then reuses every candidate's vectors
        VectorStore.for_encoder(cfg.max_keywords).ensure(featurizer, feats, progress=lambda f, m: progress(0.3 * f, m))
    cache_seconds = time.perf_counter() - t0
    metrics = train_frm(dataset, cfg, tcfg, folder, lambda f, m: progress(0.3 + 0.7 * f, m), stats,
                        featurizer=featurizer)
    metrics["collection_cache_seconds"] = cache_seconds
    save_json(folder / "metrics.json", metrics)
    return metrics


def is_built(dataset: Dataset, variant: str | None = None) -> bool:
    folder = _folder(dataset, variant, create=False)
    return is_current(folder / "config.json") and all((folder / n).is_file() for n in ("weights.pt", "lexical_stats.json"))


def load(dataset: Dataset, variant: str | None = None, folder: Path | None = None, **options) -> FRMReranker:
    """Load a trained FRM (``MissingArtifactError`` with the build command when missing or corrupt); ``folder``
    reads a training written elsewhere (bench/dev_decisions.py's extra seeds) instead of the variant's folder."""
    folder = Path(folder) if folder is not None else _folder(dataset, variant)
    command = build_command("frm", dataset.name, None if variant in (None, "full") else variant)
    conf = load_json(folder / "config.json", "the FRM model", command)
    check_stamp(conf, "the FRM model", command)
    lex = load_json(folder / "lexical_stats.json", "the FRM model", command)
    state = load_torch(folder / "weights.pt", "the FRM model", command)
    try:
        cfg = config_from_dict(FRMConfig, conf["model"])
        stats = LexicalStats(lex["df"], int(lex["n_docs"]), float(lex["avgdl"]), float(lex["k1"]), float(lex["b"]))
        model = FRM(cfg)
        model.load_state_dict(state["model"])
    except (KeyError, RuntimeError, TypeError) as exc:
        raise MissingArtifactError("the FRM model", command, f"corrupt ({type(exc).__name__})") from None
    pos_path = folder / "pos_cache.json"
    pos_cache = load_json(pos_path, "the FRM POS cache", command) if pos_path.is_file() else {}
    featurizer = Featurizer(stats, cfg.max_keywords, pos_cache)
    dev = device()
    if "encoder" in state:
        featurizer.encoder(dev).backbone.load_state_dict(state["encoder"])
    featurizer.encoder(dev)
    store = None
    if "encoder" not in state and options.get("vector_cache", True):
        store = VectorStore.for_encoder(cfg.max_keywords)  # frozen MiniLM: reuse the build's vectors
    return FRMReranker(model.to(dev), featurizer, name=_served_name(variant), store=store)


def config_dict(variant: str | None = None) -> dict:
    return {"model": dataclasses.asdict(model_config(variant)),
            "quick": dataclasses.asdict(FRMTrainConfig.for_variant("quick", variant)),
            "paper": dataclasses.asdict(FRMTrainConfig.for_profile("paper")), "variants": [*VARIANTS, *RECIPES],
            "paper defaults": "K=100 IDF buckets × 64-d, dropout 0.3, AdamW lr 2e-5 + warm-up, batch 64 (Quora)"}
