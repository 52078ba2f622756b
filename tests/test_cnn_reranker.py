"""Severyn–Moschitti CNN: overlap features, wide convolution, overfitting, build/load/rerank contract."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from core.data.overlap import OverlapFeaturizer, normalize_tokens
from models.cnn_reranker import CNNConfig, CNNPairReranker, SentenceCNN, cnn_loss

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # one intra-op thread (tests.conftest)


def test_normalize_lowercases_and_zeroes_digits():
    assert normalize_tokens("In 1998 , Obama") == ["in", "0000", ",", "obama"]


def test_overlap_features_hand_computed():
    f = OverlapFeaturizer.fit(["the cat sat", "the dog ran", "a cat 12"], stop_words={"the", "a"})
    # idf = log(N / df): N = 3; df(the) = 2, df(cat) = 2
    feats = f.transform(["The cat sat 34"], ["the cat ran"])[0]
    # Q = {the, cat, sat, 00}, A = {the, cat, ran}: |Q ∩ A| = 2, |Q| + |A| = 7
    assert feats[0] == pytest.approx(2 / 7)
    assert feats[1] == pytest.approx(2 * np.log(3 / 2) / 7)
    # without stop words: Q = {cat, sat, 00}, A = {cat, ran}
    assert feats[2] == pytest.approx(1 / 5)
    assert feats[3] == pytest.approx(np.log(3 / 2) / 5)


def test_overlap_no_common_words_is_zero():
    f = OverlapFeaturizer.fit(["a b", "c d"], stop_words=set())
    assert f.transform(["a b"], ["c d"]).tolist() == [[0.0, 0.0, 0.0, 0.0]]


def test_wide_convolution_handles_short_sentences():
    cnn = SentenceCNN(50, CNNConfig())
    emb = torch.randn(2, 3, 50)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])  # lengths 3 and 1 (< width 5)
    out = cnn(emb, mask)
    assert out.shape == (2, 100) and torch.isfinite(out).all()
    # padding after a sentence does not change its vector
    single = cnn(emb[1:2, :1], mask[1:2, :1])
    assert torch.allclose(out[1], single[0], atol=1e-6)


def _toy(n=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(30, 50, generator=g)
    emb[0] = 0
    q = torch.randint(2, 30, (n, 6), generator=g)
    d = torch.randint(2, 30, (n, 8), generator=g)
    y = torch.tensor([i % 2 for i in range(n)])
    return emb, q, d, torch.rand(n, 4, generator=g), y


def test_cnn_overfits_toy_set():
    torch.manual_seed(0)
    emb, q, d, f, y = _toy()
    model = CNNPairReranker(CNNConfig(dropout=0.0), emb)
    opt = torch.optim.Adadelta([p for p in model.parameters() if p.requires_grad], lr=1.0, rho=0.95, eps=1e-6)
    for _ in range(80):
        loss = cnn_loss(model, model(q, d, f), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert (model(q, d, f).argmax(1) == y).all()


def test_embeddings_static_and_gradients_reach_parameters():
    emb, q, d, f, y = _toy()
    model = CNNPairReranker(CNNConfig(), emb)
    cnn_loss(model, model(q, d, f), y).backward()
    assert model.embed.weight.grad is None
    for name, p in model.named_parameters():
        if p.requires_grad:
            assert p.grad is not None and float(p.grad.abs().sum()) > 0, name


def test_l2_penalty_weights():
    emb, *_ = _toy()
    model = CNNPairReranker(CNNConfig(), emb)
    conv = sum(float((p.detach() ** 2).sum()) for n, p in model.named_parameters() if n.startswith("cnn_"))
    other = sum(float((p.detach() ** 2).sum()) for n, p in model.named_parameters() if not n.startswith("cnn_") and p.requires_grad)
    assert float(model.l2_penalty().detach()) == pytest.approx(1e-5 * conv + 1e-4 * other, rel=1e-4)


def test_without_features_join_is_smaller():
    emb, q, d, _, _ = _toy()
    model = CNNPairReranker(CNNConfig(use_features=False), emb)
    assert model.hidden.in_features == 201 and model(q, d).shape == (24, 2)


# ----------------------------------------------------------------------------- system contract
@pytest.fixture()
def tiny_qa(tmp_path, monkeypatch):
    from core.data.loaders import load_candidates_tsv

    monkeypatch.setenv("QRS_VAR", str(tmp_path / "var"))
    import core.data.vectors
    from core.data.vectors import WordVectors

    words = ["hamlet", "obama", "paris", "france", "capital", "born", "wrote"]
    small = WordVectors({w: i for i, w in enumerate(words)}, np.random.default_rng(0).normal(size=(len(words), 50)).astype(np.float32))
    monkeypatch.setattr(core.data.vectors, "load_glove_50d", lambda: small)  # the 400k-word table is not needed here
    rows = []
    for i, (q, good, bad) in enumerate([("who wrote hamlet ?", "shakespeare wrote hamlet in 1600 .", "the cat sat ."),
                                        ("when was obama born ?", "obama was born in 1961 .", "paris is in france ."),
                                        ("what is the capital of france ?", "paris is the capital of france .", "dogs bark .")]):
        rows.append(f"q{i}\t{q}\td{i}a\t{good}\t1")
        rows.append(f"q{i}\t{q}\td{i}b\t{bad}\t0")
        rows.append(f"q{i}\t{q}\td{i}c\t{bad} {bad}\t0")
    path = tmp_path / "qa.tsv"
    path.write_text("\n".join(rows), encoding="utf-8")
    ds = load_candidates_tsv(path)
    ds.query_splits = {"train": list(ds.queries), "dev": list(ds.queries), "test": list(ds.queries)}
    return ds


def test_build_load_rerank_keeps_candidates(tiny_qa):
    from core.rerank import cnn as C
    from core.retrieval.base import Ranking

    metrics = C.build(tiny_qa, train_config=C.CNNTrainConfig(epochs=3, eval_every=1, patience_epochs=3))
    assert C.is_built(tiny_qa) and np.isfinite(metrics["best_dev_map"])
    rr = C.load(tiny_qa)
    ids = list(reversed(tiny_qa.candidates["q0"]))
    out = rr.rerank(tiny_qa.queries["q0"], Ranking("x", ids, [0.0] * 3), tiny_qa.corpus)
    assert sorted(out.doc_ids) == sorted(ids) and out.scores == sorted(out.scores, reverse=True)
    batched = rr.score_pairs([tiny_qa.queries["q0"]] * 3, [tiny_qa.corpus[i] for i in ids])
    single = [rr.score_pairs([tiny_qa.queries["q0"]], [tiny_qa.corpus[i]])[0] for i in ids]
    assert np.allclose(batched, single, atol=1e-6)


def test_missing_cnn_names_build_command(tiny_qa):
    from core.errors import MissingArtifactError
    from core.rerank import cnn as C

    assert not C.is_built(tiny_qa, "no-features")
    with pytest.raises(MissingArtifactError, match="python -m core train --system cnn-rerank"):
        C.load(tiny_qa, "no-features")
