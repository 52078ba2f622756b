"""MiniLM bi-encoder / cross-encoder (models/bert.py, core/retrieval/bert.py, core/rerank/cross_encoder.py)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel

from core.data.clusters import dataset_from_pairs
from core.data.datasets import Pair
from core.errors import MissingArtifactError
from models.bert import BertBiEncoder, BertCrossEncoder, CosineMSELoss, pool

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # one intra-op thread (tests.conftest)


def tiny_bert() -> BertModel:
    torch.manual_seed(0)
    return BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=32, max_position_embeddings=32))


IDS = torch.tensor([[2, 5, 6, 7, 3], [2, 8, 3, 0, 0]])
MASK = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])


def test_poolings_shapes_and_padding_ignored():
    hidden = torch.randn(2, 5, 4)
    hidden_padded = hidden.clone()
    hidden_padded[1, 3:] = 100.0  # padding positions must not matter
    for p in ("cls", "mean", "max"):
        a, b = pool(hidden, MASK, p), pool(hidden_padded, MASK, p)
        assert a.shape == (2, 4)
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(pool(hidden, MASK, "mean")[1], hidden[1, :3].mean(0))
    torch.testing.assert_close(pool(hidden, MASK, "max")[1], hidden[1, :3].max(0).values)
    torch.testing.assert_close(pool(hidden, MASK, "cls"), hidden[:, 0])
    with pytest.raises(ValueError):
        pool(hidden, MASK, "sum")


@pytest.mark.parametrize("pooling", ["cls", "mean", "max"])
def test_bi_encoder_loss_finite_and_gradients_reach_all_parameters(pooling):
    enc = BertBiEncoder(tiny_bert(), pooling)
    u, v = enc(IDS, MASK), enc(IDS.flip(0), MASK.flip(0))
    loss = CosineMSELoss()(u, v, torch.tensor([1.0, 0.0]))
    assert torch.isfinite(loss)
    loss.backward()
    unused = {"pooler.dense.weight", "pooler.dense.bias"}  # BERT's pooler is not part of the sentence vector
    for name, p in enc.backbone.named_parameters():
        if name not in unused:
            assert p.grad is not None and p.grad.abs().sum() > 0, name
    enc.eval()  # no dropout: the last hidden state's pooling equals the sentence vector
    layers = enc.encode_layers(IDS, MASK, pooling)
    assert len(layers) == 3 and all(x.shape == (2, 16) for x in layers)
    torch.testing.assert_close(layers[-1], enc(IDS, MASK))


def test_cosine_mse_matches_definition():
    u, v = torch.randn(4, 8), torch.randn(4, 8)
    y = torch.tensor([1.0, 0.0, 1.0, 0.0])
    cos = (u * v).sum(1) / (u.norm(dim=1) * v.norm(dim=1))
    torch.testing.assert_close(CosineMSELoss()(u, v, y), ((cos - y) ** 2).mean())


def test_cross_encoder_shapes_and_gradients():
    model = BertCrossEncoder(tiny_bert())
    logits = model(IDS, MASK, torch.zeros_like(IDS))
    assert logits.shape == (2, 2)
    torch.nn.functional.cross_entropy(logits, torch.tensor([1, 0])).backward()
    assert model.head.weight.grad.abs().sum() > 0
    assert model.backbone.embeddings.word_embeddings.weight.grad.abs().sum() > 0
    torch.testing.assert_close(model.score(logits), logits[:, 1] - logits[:, 0])


# ----------------------------------------------------------------------------- real MiniLM (offline)


@pytest.fixture(scope="module")
def minilm():
    from core.retrieval.bert import MiniLMEncoder

    return MiniLMEncoder.pretrained("mean")


TEXTS = ["How can I lose weight quickly ?", "What is the fastest way to lose weight ?",
         "How do I learn Python ?", "What is the capital of France ?", "Why is the sky blue ?"]


def test_encoder_unit_norm_batched_equals_single_and_layers(minilm):
    full = minilm.encode(TEXTS, batch_size=2)
    assert full.shape == (5, 384) and full.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(full, axis=1), 1.0, atol=1e-5)
    single = np.concatenate([minilm.encode([t]) for t in TEXTS])
    np.testing.assert_allclose(full, single, atol=1e-4)
    assert full[0] @ full[1] > full[0] @ full[3]  # paraphrases are closer (Quora was in pre-training)
    for pooling in ("cls", "mean"):
        layers = minilm.layer_embeddings(TEXTS, pooling=pooling)
        assert len(layers) == 7 and all(x.shape == (5, 384) for x in layers)
    last = minilm.layer_embeddings(TEXTS, pooling="mean")[-1]
    np.testing.assert_allclose(last / np.linalg.norm(last, axis=1, keepdims=True), full, atol=1e-4)


def toy_dataset():
    rows = [(1, TEXTS[0], TEXTS[1], "1"), (0, TEXTS[2], TEXTS[3], "2"), (1, "How do I study Python ?", TEXTS[2], "3"),
            (0, TEXTS[4], TEXTS[0], "4")]
    return dataset_from_pairs("toy-bert", "toy", rows)


def test_minilm_build_load_search(tmp_path, monkeypatch, minilm):
    monkeypatch.setenv("QRS_VAR", str(tmp_path))
    from core.retrieval import bert

    ds = toy_dataset()
    assert not bert.is_built(ds, "mean")
    with pytest.raises(MissingArtifactError, match="--systems minilm"):
        bert.load(ds, "mean")
    metrics = bert.build(ds, variant="mean")
    assert metrics["texts"] == len(ds.corpus) and bert.is_built(ds, "mean")
    retriever = bert.load(ds, "mean")
    qid = next(q for q, t in ds.queries.items() if t == TEXTS[0])
    run = retriever.search_many({qid: TEXTS[0]}, k=3)
    assert qid not in run[qid].doc_ids
    assert ds.corpus[run[qid].doc_ids[0]] == TEXTS[1]
    assert run[qid].stats["distance_computations"] == len(ds.corpus)
    assert len(retriever.layer_embeddings(TEXTS[:2], "cls")) == 7
    # tree-bert is built from the cached embeddings and searched with the live knobs
    from core.retrieval import tree

    assert tree.build(ds)["items"] == len(ds.corpus) and tree.is_built(ds)
    tb = tree.load(ds, K=2, beam=50)
    hits = tb.search_many({qid: TEXTS[0]}, k=3)
    assert hits[qid].doc_ids == run[qid].doc_ids  # a beam as wide as the collection is exact
    assert hits[qid].stats["distance_computations"] > 0
    tb.set_params(beam=1, probes=1)
    assert len(tb.search_many({qid: TEXTS[0]}, k=3)[qid].doc_ids) <= 3


def test_cross_encoder_learns_paraphrase_over_unrelated_and_round_trips(tmp_path):
    from core.rerank.cross_encoder import CrossEncoderConfig, CrossEncoderReranker, new_model, train

    corpus = {"a": "How can I lose weight quickly ?", "b": "What is the fastest way to lose weight ?",
              "c": "Why is the sky blue ?", "d": "What makes the sky look blue ?",
              "e": "How do I learn Python ?", "f": "What is the best way to learn Python ?"}
    pairs = [Pair("a", "b", 1), Pair("a", "c", 0), Pair("c", "d", 1), Pair("c", "e", 0), Pair("e", "f", 1),
             Pair("f", "b", 0), Pair("d", "a", 0), Pair("b", "e", 0)]
    tokenizer, model = new_model()
    config = CrossEncoderConfig(epochs=3, batch_size=8, lr=1e-4, warmup=0.1)
    metrics = train(model, tokenizer, pairs, corpus, config)
    assert metrics["train_pairs"] == 8 and np.isfinite(metrics["final_train_loss"])
    reranker = CrossEncoderReranker(model, tokenizer)
    q = "How do I lose weight fast ?"
    s = reranker.score_pairs([q, q], ["What is the quickest way to lose weight ?", "Why is the sky blue ?"])
    assert s[0] > s[1]
    assert reranker.pairs_scored == 2
    # save -> load gives the same scores (weights_only load)
    from core.artifacts import load_torch, save_torch

    save_torch(tmp_path / "model.pt", model.state_dict())
    tokenizer2, model2 = new_model()
    model2.load_state_dict(load_torch(tmp_path / "model.pt", "x", "y"))
    again = CrossEncoderReranker(model2, tokenizer2).score_pairs([q, q], ["What is the quickest way to lose weight ?",
                                                                           "Why is the sky blue ?"])
    np.testing.assert_allclose(again, s, atol=1e-4)


def test_finetuned_variant_builds_and_loads(tmp_path, monkeypatch):
    """The fine-tuned bi-encoder trains, saves its config before re-encoding, and serves searches."""
    monkeypatch.setenv("QRS_VAR", str(tmp_path))
    from core.retrieval import bert

    ds = toy_dataset()
    ds.pairs["train"] = ds.pairs["dev"] = ds.pairs["all"]
    ds.query_splits["dev"] = list(ds.queries)
    metrics = bert.build(ds, variant="finetuned")
    assert bert.is_built(ds, "finetuned") and metrics["texts"] == len(ds.corpus)
    retriever = bert.load(ds, "finetuned")
    qid = next(q for q, t in ds.queries.items() if t == TEXTS[0])
    assert len(retriever.search_many({qid: TEXTS[0]}, k=3)[qid].doc_ids) == 3
