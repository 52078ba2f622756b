"""The cross-encoder (core/rerank/cross_encoder.py) and the zero-shot pair reference (core/rerank/biencoder.py)
on the tiny QQP fixture: the real training loop learns, early stopping and the curve follow TrainLog."""
from __future__ import annotations

import numpy as np
import pytest

from core.evaluation import pair_auc, score_pairs_of
from core.training import TrainLog


@pytest.fixture
def tiny(tiny_data, fresh_var):
    from core.data.datasets import load_dataset

    return load_dataset("qqp-bimpm")


def _log_loss(scores: np.ndarray, pairs) -> float:
    y = np.array([float(p.label > 0) for p in pairs])
    s = np.asarray(scores, dtype=np.float64)
    return float(np.mean(np.logaddexp(0.0, s) - y * s))  # binary cross-entropy on the logit


def test_training_lowers_loss_and_beats_untrained_copy_on_held_out_pairs(tiny):
    """The shipped head ("segments", quick/full profiles) through the real loop on the fixture's 98
    training pairs; held out = the cluster-disjoint dev + test pairs (25)."""
    from core.rerank.cross_encoder import CrossEncoderConfig, CrossEncoderReranker, new_model, train

    held_out = tiny.pairs["dev"] + tiny.pairs["test"]
    assert {p.label > 0 for p in held_out} == {True, False}
    tok0, untrained = new_model(head="segments")
    s0 = score_pairs_of(CrossEncoderReranker(untrained, tok0), held_out, tiny.corpus)
    tok, model = new_model(head="segments")
    config = CrossEncoderConfig(head="segments", lr=5e-5, head_lr=5e-4, batch_size=16, epochs=4, patience=10)
    metrics = train(model, tok, tiny.pairs["train"], tiny.corpus, config)
    log = TrainLog.from_dict(metrics["training"])
    losses = [p.loss for p in log.curve]
    assert len(losses) == 4 and losses[-1] < losses[0]  # one point per epoch: the training loss went down
    assert metrics["training"]["stopped"] == "cap" and metrics["steps"] == 4 * 7
    s1 = score_pairs_of(CrossEncoderReranker(model, tok), held_out, tiny.corpus)
    # held-out cross-entropy (the training objective) drops, and the ranking of pairs is not worse
    assert _log_loss(s1, held_out) < _log_loss(s0, held_out), (_log_loss(s0, held_out), _log_loss(s1, held_out))
    assert pair_auc(s1, held_out) >= pair_auc(s0, held_out), (pair_auc(s0, held_out), pair_auc(s1, held_out))


def test_build_early_stops_saves_curve_reference_and_round_trips(tiny, monkeypatch):
    from core.rerank import cross_encoder as ce

    monkeypatch.setitem(ce.PROFILES, "quick", {"head": "segments", "lr": 5e-5, "head_lr": 5e-4, "batch_size": 16, "max_steps": 12,
                                              "eval_every": 3, "patience": 2})
    seen = []
    metrics = ce.build(tiny, progress=lambda f, m: seen.append(f))
    training = metrics["training"]
    assert training["dev_metric"] == ce.DEV_METRIC and training["curve"][0]["step"] == 0
    assert training["stopped"] in ("patience", "cap") and training["max_steps"] == 12
    assert training["reference"]["system"] == "minilm-pairs" and 0 <= training["reference"]["test"] <= 1
    assert 0 <= metrics["test_roc_auc"] <= 1 and metrics["test_pairs"] == len(tiny.pairs["test"])
    assert training["best_dev"] == max(p["dev"] for p in training["curve"])
    assert seen[-1] == 1.0 and ce.is_built(tiny)
    reranker = ce.load(tiny)
    q = tiny.pairs["test"][0]
    a = reranker.score_pairs([tiny.corpus[q.id1]], [tiny.corpus[q.id2]])
    assert a.shape == (1,) and reranker.pairs_scored == 1
    # the saved best weights reproduce the reported test AUC
    again = pair_auc(score_pairs_of(reranker, tiny.pairs["test"], tiny.corpus), tiny.pairs["test"])
    assert again == pytest.approx(metrics["test_roc_auc"], abs=1e-6)


def test_corrupt_weights_name_the_build_command(tiny):
    from core.errors import MissingArtifactError
    from core.rerank import cross_encoder as ce
    from core.artifacts import save_json

    folder = ce._folder(tiny.name)
    folder.mkdir(parents=True, exist_ok=True)
    save_json(folder / "config.json", ce.CrossEncoderConfig())
    (folder / "model.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(MissingArtifactError, match="python -m core train --system cross-encoder"):
        ce.load(tiny)


def test_empty_input_no_pairs_and_unknown_head():
    from core.errors import UnknownNameError
    from core.rerank.cross_encoder import CrossEncoderConfig, CrossEncoderReranker, new_model, train

    tok, model = new_model(head="segments")
    assert CrossEncoderReranker(model, tok).score_pairs([], []).shape == (0,)
    with pytest.raises(ValueError, match="no training pairs"):
        train(model, tok, [], {}, CrossEncoderConfig())
    with pytest.raises(UnknownNameError):
        new_model(head="pooler")


def test_segment_head_starts_as_a_scaled_cosine_of_the_two_questions():
    """w = 0 at initialisation: the score is a * cos(u, v) + b with u, v the segments' mean token outputs."""
    import torch

    from core.retrieval.bert import load_backbone
    from models.cross_encoder import SegmentPoolCrossEncoder

    tok, backbone = load_backbone()
    model = SegmentPoolCrossEncoder(backbone).eval()
    enc = tok(["How do I lose weight ?"], ["Why is the sky blue ?"], return_tensors="pt")
    with torch.inference_mode():
        s = model(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
        h = backbone(**enc).last_hidden_state[0]
        t = enc["token_type_ids"][0].bool()
        cos = torch.nn.functional.cosine_similarity(h[~t].mean(0), h[t].mean(0), dim=0)
    torch.testing.assert_close(s, (10.0 * cos - 8.0).reshape(1), atol=1e-4, rtol=1e-4)


def test_minilm_pairs_reference_scores_cosine_and_reranks(tiny):
    """The zero-shot reference reranker: batched cosine of the pretrained embeddings, usable by rerank_many."""
    from core.rerank import biencoder
    from core.registry import get_spec
    from core.serving.loader import load as load_system
    from core.retrieval.base import Ranking, Reranker

    assert get_spec("minilm-pairs").kind == "reranker"
    metrics = biencoder.build(tiny)
    assert 0.5 < metrics["test_roc_auc"] <= 1 and metrics["test_pairs"] == len(tiny.pairs["test"])
    reranker = load_system("minilm-pairs", tiny)
    assert isinstance(reranker, Reranker)
    q = "How do I lose weight fast ?"
    s = reranker.score_pairs([q, q], ["What is the quickest way to lose weight ?", "Why is the sky blue ?"])
    assert s[0] > s[1] and -1.0 <= s.min() and s.max() <= 1.0 + 1e-5
    ids = list(tiny.corpus)[:5]
    out = reranker.rerank_many({"q": q}, {"q": Ranking("x", ids, [0.0] * 5)}, tiny.corpus)
    assert sorted(out["q"].doc_ids) == sorted(ids)
    assert list(out["q"].scores) == sorted(out["q"].scores, reverse=True)
    with pytest.raises(ValueError, match="one candidate per query"):
        reranker.score_pairs([q], [])
