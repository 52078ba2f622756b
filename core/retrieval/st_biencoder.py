"""A researcher's sentence-transformers model folder as a bi-encoder retriever.

Registered by ``python -m core systems add NAME --bi-encoder PATH`` (``core.user_systems``). Texts go
through the one text pipeline exactly as for the built-in ``minilm`` (``core.data.pipeline.subword_text``,
then the model's own tokenizer, pooling and normalisation: ``SentenceTransformer.encode``); the
collection is encoded once with a progress bar through the embedding cache (``core.retrieval.dense``)
and indexed with the faiss presets (``auto``: exact below 1M vectors); the loaded retriever is a
``DenseRetriever``, so it is Milvus-servable like the built-in dense systems.

Fingerprint: the encoder id carries a hash of every file in the folder (names, sizes, contents), and the
built index records it; a changed model folder makes ``is_built`` false, so the loader encodes again
instead of serving stale vectors.
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import numpy as np

from core.artifacts import load_json, save_json
from core.data.datasets import Dataset
from core.data.pipeline import PIPELINE_VERSION, check_stamp, is_current, stamped, subword_text
from core.errors import MissingArtifactError, StudioError
from core.registry import build_command, system_dir, system_path
from core.retrieval.base import ProgressFn, no_progress
from core.retrieval.dense import DenseRetriever, cached_embeddings, l2_normalize
from core.retrieval.indexing import IndexSpec, build_index, load_index, save_index

DEFAULT_INDEX = "auto"  # exact below 1M vectors (core/retrieval/indexing.py)
_DIGESTS: dict[tuple, str] = {}  # (folder, (file, size, mtime)...) -> content digest, per process


def folder_digest(folder: str | Path) -> str:
    """SHA-1 over every file of a model folder (relative name, size, bytes), hidden files and caches excluded.
    Recomputed whenever a file's size or modification time changes."""
    folder = Path(folder)
    if not folder.is_dir():
        raise StudioError(f"the model folder {folder} no longer exists")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not any(part.startswith(".") for part in
                                                                               p.relative_to(folder).parts))
    key = (str(folder.resolve()), tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files))
    if key not in _DIGESTS:
        h = hashlib.sha1()
        for path in files:
            h.update(str(path.relative_to(folder)).encode() + b"\x00")
            with path.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            h.update(b"\x01")
        _DIGESTS[key] = h.hexdigest()[:16]
    return _DIGESTS[key]


_POOLINGS = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean", "pooling_mode_max_tokens": "max"}


def fast_path(folder: str | Path) -> tuple[str, int] | None:
    """(pooling, max length) when the folder is what MiniLM's fast path encodes: a BERT transformer, one pooling
    (CLS, mean or max), an optional Normalize, no lower-casing of its own; else None (sentence-transformers runs
    it as it is)."""
    folder = Path(folder)
    try:
        modules = [m.get("type", "").rsplit(".", 1)[-1] for m in json.loads((folder / "modules.json").read_text())]
        model_type = json.loads((folder / "config.json").read_text()).get("model_type")
        sbert = json.loads((folder / "sentence_bert_config.json").read_text())
        pooling_dir = next(m.get("path") for m in json.loads((folder / "modules.json").read_text())
                           if m.get("type", "").endswith("Pooling"))
        pooling = json.loads((folder / pooling_dir / "config.json").read_text())
    except (OSError, ValueError, StopIteration, AttributeError):
        return None
    modes = [name for key, name in _POOLINGS.items() if pooling.get(key)]
    others = [k for k, v in pooling.items() if k.startswith("pooling_mode") and v and k not in _POOLINGS]
    if (modules not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]) or model_type != "bert"
            or len(modes) != 1 or others or sbert.get("do_lower_case") or not sbert.get("max_seq_length")):
        return None
    return modes[0], int(sbert["max_seq_length"])


class FolderEncoder:
    """Encoder protocol over a sentence-transformers folder: texts -> L2-normalised float32 rows (model loaded
    on first use; cache hits never load it).

    A BERT folder with one pooling (:func:`fast_path`) runs on the built-in MiniLM's encoder (same-length batches,
    ONNX Runtime on CPU) with the folder's own weights, pooling and max length; its ``encoder_id`` says so, so its
    vectors never mix with the sentence-transformers path's in the embedding cache."""

    def __init__(self, folder: str | Path, label: str) -> None:
        import torch

        from core.retrieval.encoding import EncoderRecipe

        self.folder, self.label = Path(folder), label
        self.fast = fast_path(folder)
        shape = f"|fast:{self.fast[0]}:len{self.fast[1]}" if self.fast else ""
        self.encoder_id = f"st-folder:{folder_digest(folder)}{shape}|{PIPELINE_VERSION}"
        self.recipe = EncoderRecipe(FolderEncoder, (str(folder), label), torch.get_num_threads())
        self._model = None
        self._fast = None

    @property
    def model(self):
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            from core.training import device

            self._model = SentenceTransformer(str(self.folder), device=str(device()), local_files_only=True)
        return self._model

    @property
    def fast_encoder(self):
        """The folder on MiniLM's encoder (its weights, pooling and max length), built on first use."""
        if self._fast is None:
            from transformers import AutoModel, AutoTokenizer

            from core.retrieval.minilm_encoder import MiniLMEncoder

            tokenizer = AutoTokenizer.from_pretrained(str(self.folder), local_files_only=True)
            backbone = AutoModel.from_pretrained(str(self.folder), local_files_only=True)
            pooling, max_length = self.fast
            self._fast = MiniLMEncoder(backbone, tokenizer, pooling, max_length,
                                       encoder_id=self.encoder_id.rsplit("|", 1)[0])
        return self._fast

    def batch_rows(self, length: int, batch_size: int = 128) -> int | None:
        """Rows per same-length batch on the fast path (None on the padded sentence-transformers path)."""
        return self.fast_encoder.batch_rows(length, batch_size) if self.fast else None

    def token_lengths(self, texts: list[str]) -> np.ndarray | None:
        """Tokens per text on the fast path (the executor shards by length); None on sentence-transformers'."""
        return self.fast_encoder.token_lengths(texts) if self.fast else None

    def encode(self, texts: list[str], batch_size: int = 128, progress: ProgressFn = no_progress) -> np.ndarray:
        """Batched (the fast path's same-length batches, or the library's length-sorted ones), ``progress`` as it
        goes."""
        if self.fast:
            return self.fast_encoder.encode(texts, batch_size=batch_size, progress=progress)
        texts = [subword_text(t) for t in texts]
        step = 8 * batch_size
        dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        parts = [np.empty((0, dim() or 0), dtype=np.float32)]
        for start in range(0, len(texts), step):
            vecs = self.model.encode(texts[start:start + step], batch_size=batch_size, convert_to_numpy=True,
                                     show_progress_bar=False)
            parts.append(np.asarray(vecs, dtype=np.float32))
            done = min(len(texts), start + step)
            progress(done / max(1, len(texts)), f"{self.label}: {done:,}/{len(texts):,} texts")
        return l2_normalize(np.concatenate(parts))


class BiEncoderFolder:
    """Provider (``registry.system_module``) of a bi-encoder user system: ``spec.source`` is the folder."""

    DEFAULT_INDEX = DEFAULT_INDEX

    def __init__(self, spec) -> None:
        self.spec = spec

    def _encoder(self) -> FolderEncoder:
        return FolderEncoder(self.spec.source, self.spec.name)

    def load_encoder(self, dataset: Dataset, variant: str | None = None) -> FolderEncoder:
        """The encoder alone (candidate-list datasets score pairs with it; no index needed)."""
        return self._encoder()

    def build(self, dataset: Dataset, profile: str = "quick", progress: ProgressFn = no_progress,
              variant: str | None = None) -> dict:
        """Encode the collection (cached per model fingerprint) and save an exact index."""
        folder = system_dir(dataset.name, self.spec.name)
        encoder = self._encoder()
        start = time.perf_counter()
        vectors = cached_embeddings(encoder, dataset.corpus, lambda f, m: progress(0.95 * f, m))
        encode_seconds = time.perf_counter() - start
        spec = IndexSpec.from_preset(DEFAULT_INDEX, len(vectors), vectors.shape[1])
        save_index(folder, build_index(vectors, spec), spec, encoder.encoder_id, len(vectors))
        save_json(folder / "doc_ids.json", list(dataset.corpus))
        save_json(folder / "config.json", stamped({"model_folder": str(self.spec.source),
                                                   "fingerprint": encoder.encoder_id}))
        metrics = {"encode_seconds": encode_seconds, "texts": len(vectors), "encoder": encoder.encoder_id,
                   "build_seconds": time.perf_counter() - start}
        save_json(folder / "metrics.json", metrics)
        progress(1.0, f"{self.spec.name}: {len(vectors):,} texts encoded")
        return metrics

    def is_built(self, dataset: Dataset, variant: str | None = None) -> bool:
        """Built for this dataset with the folder's current content (a changed model is not built)."""
        folder = system_path(dataset.name, self.spec.name)
        if not ((folder / "index.faiss").is_file() and is_current(folder / "config.json")):
            return False
        try:
            saved = load_json(folder / "config.json", "", "").get("fingerprint")
            return saved == self._encoder().encoder_id
        except StudioError:
            return False

    def load(self, dataset: Dataset, variant: str | None = None, index: str = DEFAULT_INDEX,
             search_params: str | None = None, **options) -> DenseRetriever:
        """The retriever over the collection (``index``: a faiss preset; ``auto`` = exact here)."""
        folder = system_dir(dataset.name, self.spec.name)
        command = build_command(self.spec.name, dataset.name)
        what = f"the {self.spec.name} index"
        check_stamp(load_json(folder / "config.json", what, command), what, command)
        stored, spec, meta = load_index(folder, command)
        encoder = self._encoder()
        if meta.get("encoder") != encoder.encoder_id:
            raise MissingArtifactError(what, command, "stale (the model folder changed since it was encoded)")
        doc_ids = load_json(folder / "doc_ids.json", what, command)
        if doc_ids != list(dataset.corpus) or stored.ntotal != len(doc_ids):
            raise MissingArtifactError(what, command, "stale (collection changed)")
        vectors = stored.reconstruct_n(0, stored.ntotal)
        if index != DEFAULT_INDEX:
            spec = IndexSpec.from_preset(index, len(vectors), vectors.shape[1])
            stored = build_index(vectors, spec)
        retriever = DenseRetriever(self.spec.name, encoder, doc_ids, stored, spec, vectors,
                                   [dataset.corpus[d] for d in doc_ids])
        if search_params:
            retriever.set_params(search_params)
        return retriever

    def config_dict(self, variant: str | None = None) -> dict:
        return {"model folder": str(self.spec.source), "text": "core.data.pipeline.subword_text, then the "
                "model's own tokenizer, pooling and normalisation (sentence-transformers)",
                "index": "faiss, exact below 1M vectors (auto)", "fingerprint": "hash of every file in the folder"}
