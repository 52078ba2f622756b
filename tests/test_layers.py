"""core.analysis.layers: both per-layer measures on cases with a known answer (the paper's |Δ log cos| with
exclusions, the AUC against sklearn), the paired bootstrap, the triple sampler, and DenseTrans's per-layer curves
against −AllDense (densetrans-cai2021.md Figures 1 and 3)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from core.analysis.layers import (LayerCurve, Triple, bootstrap_ci, discriminativeness, layer_auc,
                                  query_layer_cosines, sample_triples)
from core.errors import StudioError


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
    assert curve.pos.shape == curve.neg.shape == (3, 4) and curve.paper.values.shape == (3, 4)
    np.testing.assert_allclose(curve.paper.mean, [math.log(2), math.log(4), 0.0], atol=1e-5)
    np.testing.assert_allclose(curve.paper.signed_mean, [math.log(2), math.log(4), 0.0], atol=1e-5)
    assert curve.paper.excluded.tolist() == [0, 0, 0]
    # every positive above every negative at layers 0 and 1; all tied at layer 2
    np.testing.assert_allclose(curve.auc, [1.0, 1.0, 0.5])


def test_non_positive_cosines_are_excluded_and_counted_not_clipped():
    # three triples: (cos+, cos-) = (1, .5), (.5, 1) and (1, -1); the third has no log and is excluded
    fn = _fixed_layers({"q": [_unit(0.0)], "a": [_unit(0.0)], "b": [_unit(math.acos(0.5))],
                        "far": [_unit(math.pi)]})
    triples = [Triple("q", "a", "b"), Triple("q", "b", "a"), Triple("q", "a", "far")]
    curve = discriminativeness("excluded", fn, triples)
    np.testing.assert_allclose(curve.paper.mean, [math.log(2)], atol=1e-5)  # over the two kept triples
    np.testing.assert_allclose(curve.paper.signed_mean, [0.0], atol=1e-5)  # the sign keeps the direction
    assert curve.paper.excluded.tolist() == [1] and curve.paper.kept.tolist() == [2]
    np.testing.assert_allclose(curve.paper.excluded_share, [1 / 3])
    assert np.isnan(curve.paper.values[0, 2])
    # the old measure clipped the cosine at 1e-3: the excluded triple alone added |log 1e-3| = 6.9 to the mean
    clipped = np.abs(np.log(np.maximum(curve.pos, 1e-3)) - np.log(np.maximum(curve.neg, 1e-3))).mean(axis=1)
    np.testing.assert_allclose(clipped, [(2 * math.log(2) + math.log(1e3)) / 3], atol=1e-5)
    assert abs(clipped[0] - curve.paper.mean[0]) > 1.0
    # a layer where every triple has a cosine <= 0 has no value (NaN), not a floor's value
    only_far = discriminativeness("none", fn, [Triple("q", "a", "far")] * 2)
    assert np.isnan(only_far.paper.mean[0]) and only_far.paper.excluded.tolist() == [2]
    assert only_far.auc[0] == 1.0  # the AUC needs no log: cos+ = 1 > cos- = -1


def test_auc_equals_sklearn_with_ties():
    from sklearn.metrics import roc_auc_score

    pos = np.array([0.9, 0.5, 0.3, 0.5, -0.1, 0.7])
    neg = np.array([0.5, 0.1, 0.7, -0.2, 0.5, 0.3])  # ties across pairs: 0.5, 0.3, 0.7
    expected = roc_auc_score(np.r_[np.ones(6), np.zeros(6)], np.r_[pos, neg])
    assert layer_auc(pos, neg) == pytest.approx(expected)
    both = np.stack([pos, neg])  # leading axes (layers) are kept
    np.testing.assert_allclose(layer_auc(both, both[::-1]), [expected, 1 - expected])
    # through the embedding path: cosines set by angles on the unit circle
    angle = lambda c: _unit(math.acos(c))  # noqa: E731
    table = {"q": [_unit(0.0)]}
    table.update({f"p{i}": [angle(c)] for i, c in enumerate(pos)})
    table.update({f"n{i}": [angle(c)] for i, c in enumerate(neg)})
    curve = discriminativeness("auc", _fixed_layers(table), [Triple("q", f"p{i}", f"n{i}") for i in range(6)])
    assert curve.auc[0] == pytest.approx(expected, abs=1e-6)


def _curve(label: str, rng: np.random.Generator, shift: float, n: int = 60, digest: str = "d") -> LayerCurve:
    pos = np.clip(rng.normal(0.5 + shift, 0.3, size=(3, n)), -1, 1)
    neg = np.clip(rng.normal(0.2, 0.3, size=(3, n)), -1, 1)  # some cosines <= 0: the paper's measure excludes them
    return LayerCurve(label, pos, neg, digest)


def test_paired_bootstrap_contains_the_estimate_and_is_seeded():
    rng = np.random.default_rng(0)
    a, b = _curve("A", rng, 0.2), _curve("B", rng, 0.0)
    assert a.paper.excluded.sum() > 0
    for measure in ("auc", "paper"):
        ci = bootstrap_ci(a, measure, b, n_resamples=300, seed=7)
        np.testing.assert_allclose(ci.estimate, a.measure(measure) - b.measure(measure))
        assert ((ci.low <= ci.estimate) & (ci.estimate <= ci.high)).all(), (measure, ci)
        assert (ci.high > ci.low).all() and ci.finite.tolist() == [300] * 3
        again = bootstrap_ci(a, measure, b, n_resamples=300, seed=7)
        np.testing.assert_array_equal(again.low, ci.low)
        np.testing.assert_array_equal(again.high, ci.high)
        assert not np.array_equal(bootstrap_ci(a, measure, b, n_resamples=300, seed=8).low, ci.low)
        one = bootstrap_ci(a, measure, n_resamples=300, seed=7)  # a single curve's own interval
        assert ((one.low <= one.estimate) & (one.estimate <= one.high)).all()
    # paired: a curve against itself differs by exactly 0 in every resample
    same = bootstrap_ci(a, "auc", a, n_resamples=50, seed=1)
    np.testing.assert_array_equal(same.low, 0.0)
    np.testing.assert_array_equal(same.high, 0.0)
    with pytest.raises(StudioError, match="different triples"):
        bootstrap_ci(a, "auc", _curve("C", rng, 0.0, digest="other"))
    assert bootstrap_ci(a, "paper", b, n_resamples=10).as_dict()["label"] == "A − B"


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
    from tests.synonym_clusters import synonym_clusters

    torch.set_num_threads(1)
    toy = synonym_clusters(60)
    triples = sample_triples(toy, 40, "random", seed=5, split="train")
    curves = {}
    for variant in ("full", "-AllDense"):
        trained, untrained_model = _train_toy(toy, variant)
        assert trained.model.pooling == "mean"  # the quick profile's
        after = _layer_curve(trained.model, trained.vocab, triples)
        before = _layer_curve(untrained_model, trained.vocab, triples)
        assert after.pos.shape == after.neg.shape == (4, 40) and np.isfinite(after.pos).all()
        curves[variant] = (before, after)
        assert after.paper.signed_mean[-1] > max(0.0, before.paper.signed_mean[-1]), (variant, before.paper.signed_mean,
                                                                                      after.paper.signed_mean)
        assert after.auc[-1] > max(0.5, before.auc[-1]), (variant, before.auc, after.auc)
        widths = [a.shape[1] for a in trained.map(["what is it ?"], trained.model.layer_vectors)]
        assert widths == ([24, 24, 48, 96] if variant == "full" else [24, 24, 24, 24])
    trained, untrained_model = _train_toy(toy, "full", pooling="cls")
    after = _layer_curve(trained.model, trained.vocab, triples)
    before = _layer_curve(untrained_model, trained.vocab, triples)
    assert after.paper.mean[-1] > before.paper.mean[-1] and after.paper.signed_mean[-1] > 0, (before.paper.mean,
                                                                                            after.paper.mean)
    np.testing.assert_allclose(before.paper.values[0], 0.0, atol=1e-5)  # [CLS] at E⁰ is one vector for every question
    assert before.auc[0] == pytest.approx(0.5, abs=0.05)  # ... so positives and negatives tie (up to rounding)
    np.testing.assert_allclose(curves["full"][0].pos[0], curves["-AllDense"][0].pos[0], rtol=1e-4, atol=1e-5)
