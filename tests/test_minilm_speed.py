"""MiniLM encoding speed path: same-length batches, the unmasked forward, ONNX Runtime backends."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from core.errors import UnknownNameError

TEXTS = ["How can I lose weight quickly ?", "What is the fastest way to lose weight ?", "How do I learn Python ?",
         "What is the capital of France ?", "Why is the sky blue ?", "Why ?",
         "What are the best books to read if I want to understand the history of the Roman empire in detail ?"]


def test_same_length_batches_cover_every_row_once_without_padding():
    from core.retrieval.bert import same_length_batches

    rng = np.random.default_rng(0)
    token_ids = [[1] * int(n) for n in rng.integers(3, 40, size=500)]
    batches = same_length_batches(token_ids, tokens_per_batch=256)
    seen = np.concatenate(batches)
    assert sorted(seen.tolist()) == list(range(500))
    for idx in batches:
        lengths = {len(token_ids[i]) for i in idx}
        assert len(lengths) == 1  # rectangular: no padding
        assert len(idx) * lengths.pop() <= 256 or len(idx) == 1
    firsts = [len(token_ids[b[0]]) for b in batches]
    assert firsts == sorted(firsts, reverse=True)  # longest first
    assert same_length_batches([]) == []


def test_unpadded_forward_equals_the_masked_forward():
    from transformers import BertConfig, BertModel

    from models.bert import BertBiEncoder

    torch.manual_seed(0)
    enc = BertBiEncoder(BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                             intermediate_size=32, max_position_embeddings=32)), "mean").eval()
    ids = torch.tensor([[2, 5, 6, 7, 3], [2, 8, 9, 4, 3]])
    with torch.inference_mode():
        torch.testing.assert_close(enc.encode_unpadded(ids), enc(ids, torch.ones_like(ids)), atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def backends(tmp_path_factory):
    import os

    from core.retrieval.bert import MiniLMEncoder, load_backbone

    old = os.environ.get("QRS_VAR")
    os.environ["QRS_VAR"] = str(tmp_path_factory.mktemp("onnxvar"))
    tokenizer, backbone = load_backbone()
    out = {b: MiniLMEncoder(backbone, tokenizer, "mean", backend=b) for b in ("torch", "onnx", "onnx-int8")}
    yield out
    if old is None:
        os.environ.pop("QRS_VAR", None)
    else:
        os.environ["QRS_VAR"] = old


def test_onnx_backend_gives_torchs_embeddings_and_int8_has_its_own_cache_id(backends):
    ref = backends["torch"].encode(TEXTS, batch_size=2)
    fast = backends["onnx"].encode(TEXTS, batch_size=2)
    np.testing.assert_allclose(fast, ref, atol=1e-5)
    assert backends["onnx"].encoder_id == backends["torch"].encoder_id  # same vectors -> same cache entries
    q8 = backends["onnx-int8"].encode(TEXTS)
    assert backends["onnx-int8"].encoder_id != backends["torch"].encoder_id
    assert float((q8 * ref).sum(1).min()) > 0.95  # quantized, close but not equal
    # one text at a time equals the batch (the Compare page encodes one query)
    single = np.concatenate([backends["onnx"].encode([t]) for t in TEXTS])
    np.testing.assert_allclose(single, fast, atol=1e-5)


def test_unknown_backend_is_refused():
    from core.retrieval.bert import MiniLMEncoder, load_backbone

    tokenizer, backbone = load_backbone()
    with pytest.raises(UnknownNameError):
        MiniLMEncoder(backbone, tokenizer, "mean", backend="tensorrt")
