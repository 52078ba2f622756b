"""core.analysis.layers: the discriminativeness measure on cases with a known answer, the triple sampler, and
DenseTrans's per-layer curves against −AllDense (densetrans-cai2021.md Figures 1 and 3)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from core.analysis.layers import COS_FLOOR, Triple, discriminativeness, query_layer_cosines, sample_triples


def _unit(angle: float) -> np.ndarray:
    return np.array([math.cos(angle), math.sin(angle)], dtype=np.float32)


def _fixed_layers(table: dict[str, list[np.ndarray]]):
    """A layer function that returns, per layer, the vector assigned to each text."""

    def fn(texts: list[str]) -> list[np.ndarray]:
        n_layers = len(next(iter(table.values())))
        return [np.stack([table[t][layer] for t in texts]) for layer in range(n_layers)]

    return fn


def test_measure_has_the_known_value_per_layer():
    # layer 0: cos(q, q+) = 1, cos(q, q-) = 0.5 -> |log 1 - log 0.5| = log 2
    # layer 1: cos(q, q+) = 0.8, cos(q, q-) = 0.2 -> log 4; layer 2: equal cosines -> 0
    q = [_unit(0.0)] * 3
    pos = [_unit(0.0), _unit(math.acos(0.8)), _unit(math.acos(0.3))]
    neg = [_unit(math.acos(0.5)), _unit(math.acos(0.2)), _unit(-math.acos(0.3))]
    fn = _fixed_layers({"q": q, "p": [3.0 * v for v in pos], "n": neg})  # scale must not matter (cosine)
    curve = discriminativeness("synthetic", fn, [Triple("q", "p", "n")] * 4)
    assert curve.values.shape == (3, 4)
    np.testing.assert_allclose(curve.mean, [math.log(2), math.log(4), 0.0], atol=1e-5)
    np.testing.assert_allclose(curve.std, 0.0, atol=1e-6)
    np.testing.assert_allclose(curve.signed_mean, [math.log(2), math.log(4), 0.0], atol=1e-5)
    assert curve.clipped == 0


def test_measure_is_symmetric_and_clips_non_positive_cosines():
    # the negative closer than the positive gives the same |difference|; an orthogonal or opposite
    # vector is clipped at COS_FLOOR and counted
    fn = _fixed_layers({"q": [_unit(0.0)], "p": [_unit(math.acos(0.5))], "n": [_unit(0.0)],
                        "far": [_unit(math.pi)]})
    swapped = discriminativeness("swapped", fn, [Triple("q", "p", "n")])
    np.testing.assert_allclose(swapped.mean, [math.log(2)], atol=1e-5)
    np.testing.assert_allclose(swapped.signed_mean, [-math.log(2)], atol=1e-5)  # the sign keeps the direction
    clipped = discriminativeness("clipped", fn, [Triple("q", "n", "far")])
    np.testing.assert_allclose(clipped.mean, [abs(math.log(1.0) - math.log(COS_FLOOR))], atol=1e-5)
    assert clipped.clipped == 1


def test_query_layer_cosines_known_values():
    fn = _fixed_layers({"q": [_unit(0.0), _unit(0.0)], "a": [_unit(math.acos(0.25)), _unit(0.0)]})
    out = query_layer_cosines(fn, "q", {"hit": "a"})
    np.testing.assert_allclose(out["hit"], [0.25, 1.0], atol=1e-5)


@pytest.fixture(scope="module")
def tiny():
    import os

    from tests.conftest import TINY_DATA

    old = os.environ.get("QRS_DATA")
    os.environ["QRS_DATA"] = str(TINY_DATA)
    try:
        from core.data.datasets import load_dataset

        yield load_dataset("qqp-bimpm")
    finally:
        if old is None:
            os.environ.pop("QRS_DATA", None)
        else:
            os.environ["QRS_DATA"] = old


def test_random_triples_respect_clusters(tiny):
    triples = sample_triples(tiny, 30, "random", seed=3)
    assert len(triples) == 30
    by_text = {}
    for qid, text in tiny.queries.items():
        by_text.setdefault(text, set()).add(qid)
    corpus_id = {text: doc_id for doc_id, text in tiny.corpus.items()}
    for t in triples:
        qids = by_text[t.query]
        rel = set().union(*(tiny.qrels[q] for q in qids))
        assert corpus_id[t.positive] in rel
        assert corpus_id[t.negative] not in rel and corpus_id[t.negative] not in qids
    assert sample_triples(tiny, 30, "random", seed=3) == triples  # seeded


def _layer_curve(model, vocab, triples):
    from core.data.tokenizers import IdsEncoder

    enc = IdsEncoder(model, vocab, 30, add_cls=True, encoder_id="t")
    return discriminativeness("m", lambda texts: enc.map(texts, model.layer_vectors), triples)


def _train_toy(toy, variant: str, **overrides):
    from core.retrieval import densetrans as dt

    cfg = dt.make_config("quick", variant, d_model=24, embeddings="random", batch_queries=16, hard_negatives=1,
                         max_steps=60, eval_every=30, patience=10, dev_distractors=0, dropout=0.0, lr=1e-3,
                         max_seconds=0, **overrides)
    folder = dt._folder(toy, cfg.variant, overrides.get("pooling"))
    dt.train(toy, cfg, folder)
    trained = dt._load_model(folder, "cmd")[1]
    torch.manual_seed(0)
    untrained = dt._model(cfg, trained.model.token.num_embeddings, trained.model.token.embedding_dim, 0).eval()
    return trained, untrained


def test_densetrans_layers_against_alldense(tmp_path, monkeypatch):
    """Both variants give N + 1 curves (widths d, d, 2d, 4d for the dense model, d everywhere for
    −AllDense); untrained from the same seed they share E⁰, so their first rows agree; after real
    training each variant's last layer puts paraphrases closer than non-paraphrases, more than its untrained
    copy did (the signed gap: the quick profile mean-pools, and the |·| of the paper's measure also scores the
    wrong-direction noise of untrained mean-pooled random vectors). With the paper's ``[CLS]`` pooling the
    paper's |·| measure itself rises. (The QQP comparison of the converged models is in BENCHMARKS.md.)"""
    monkeypatch.setenv("QRS_VAR", str(tmp_path))
    from tests.test_densetrans import toy_dataset

    torch.set_num_threads(1)
    toy = toy_dataset(60)
    triples = sample_triples(toy, 40, "random", seed=5, split="train")
    curves = {}
    for variant in ("full", "-AllDense"):
        trained, untrained_model = _train_toy(toy, variant)
        assert trained.model.pooling == "mean"  # the quick profile's
        after = _layer_curve(trained.model, trained.vocab, triples)
        before = _layer_curve(untrained_model, trained.vocab, triples)
        assert after.values.shape == (4, 40) and np.isfinite(after.values).all()
        curves[variant] = (before, after)
        assert after.signed_mean[-1] > max(0.0, before.signed_mean[-1]), (variant, before.signed_mean, after.signed_mean)
        widths = [a.shape[1] for a in trained.map(["what is it ?"], trained.model.layer_vectors)]
        assert widths == ([24, 24, 48, 96] if variant == "full" else [24, 24, 24, 24])
    trained, untrained_model = _train_toy(toy, "full", pooling="cls")
    after = _layer_curve(trained.model, trained.vocab, triples)
    before = _layer_curve(untrained_model, trained.vocab, triples)
    assert after.mean[-1] > before.mean[-1] and after.signed_mean[-1] > 0, (before.mean, after.mean)
    np.testing.assert_allclose(before.values[0], 0.0, atol=1e-5)  # [CLS] at E⁰ is one vector for every question
    np.testing.assert_allclose(curves["full"][0].values[0], curves["-AllDense"][0].values[0], rtol=1e-4, atol=1e-5)
