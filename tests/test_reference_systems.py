"""The untrained reference (glove-mean) and the trained references (dual-encoder, DenseTrans) on the
tiny QQP fixture: the real training loop lowers the loss and the trained model beats its own untrained
copy on held-out fixture queries (dev + test splits, against the whole collection, each query dropped
from its own ranking)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from core.evaluation import evaluate_run
from core.retrieval.indexing import IndexSpec
from core.retrieval.dense import DenseRetriever, l2_normalize
from core.data.tokenizers import IdsEncoder


@pytest.fixture
def tiny(tiny_data, fresh_var):
    from core.data.datasets import load_dataset

    torch.set_num_threads(1)
    return load_dataset("qqp-bimpm")


def _held_out(ds):
    queries = {**ds.split_queries("dev"), **ds.split_queries("test")}
    qrels = {q: ds.qrels[q] for q in queries if ds.qrels.get(q)}
    return queries, qrels


def _score(encoder, ds, metric: str = "mrr@100") -> float:
    queries, qrels = _held_out(ds)
    vectors = l2_normalize(encoder.encode(list(ds.corpus.values())))
    retriever = DenseRetriever.from_vectors("x", encoder, ds.corpus, vectors, IndexSpec("Flat"))
    return evaluate_run(qrels, retriever.search_many(queries, k=100, ignore_identical_ids=True), [metric])[metric]


def _heldout_loss(encoder, ds, temperature: float = 0.05) -> float:
    """Eq. (6)-(7) over the whole collection (the query itself excluded) for the held-out queries:
    mean −log softmax of each relevant question; unlike a rank metric it does not saturate on 26 queries."""
    queries, qrels = _held_out(ds)
    ids = list(ds.corpus)
    docs = torch.from_numpy(l2_normalize(encoder.encode(list(ds.corpus.values()))))
    q = torch.from_numpy(l2_normalize(encoder.encode([queries[x] for x in qrels])))
    scores = q @ docs.T / temperature
    col = {d: i for i, d in enumerate(ids)}
    losses = []
    for row, qid in enumerate(qrels):
        s = scores[row].clone()
        s[col[qid]] = float("-inf")
        logp = torch.log_softmax(s, 0)
        losses.extend(float(-logp[col[d]]) for d in qrels[qid])
    return float(np.mean(losses))


def _last_state(encoder, folder):
    """The encoder with the loop's final weights (``last.pt``): on 26 held-out fixture queries against
    244 questions dev Recall@100 is 1.0 from step 0, so early stopping keeps the step-0 checkpoint and
    ``model.pt`` would compare the untrained model with itself."""
    state = torch.load(folder / "last.pt", map_location="cpu", weights_only=True)
    encoder.model.load_state_dict(state["model"])
    return encoder


def test_glove_mean_builds_serves_and_matches_a_hand_mean(tiny):
    from core.registry import get_spec
    from core.retrieval import wordmean
    from core.data.vectors import load_glove_50d

    assert get_spec("glove-mean").module == "core.retrieval.wordmean"
    metrics = wordmean.build(tiny)
    assert metrics["trained"] is False and metrics["index"] == "Flat"
    assert 0 < metrics["test"]["recall@100"] <= 1 and 0 < metrics["dev"]["recall@100"] <= 1
    assert wordmean.is_built(tiny)
    retriever = wordmean.load(tiny)
    text = "how do i learn python ?"
    glove = load_glove_50d()
    hand = np.mean([glove.matrix[glove.index[w]] for w in text.split()], axis=0)
    got = retriever.encoder.encode([text])[0]
    np.testing.assert_allclose(got / np.linalg.norm(got), hand / np.linalg.norm(hand), atol=1e-5)
    # an unknown word is left out of the mean
    got2 = retriever.encoder.encode([text + " zzqxwv"])[0]
    np.testing.assert_allclose(got2 / np.linalg.norm(got2), hand / np.linalg.norm(hand), atol=1e-5)
    hits = retriever.retrieve([text], 3)
    assert len(hits.ids[0]) == 3


def test_missing_reference_artifacts_name_the_command(tiny):
    from core.errors import MissingArtifactError
    from core.retrieval import dual_encoder, wordmean

    with pytest.raises(MissingArtifactError) as err:
        wordmean.load(tiny)
    assert "python -m core build --systems glove-mean" in str(err.value)
    with pytest.raises(MissingArtifactError) as err:
        dual_encoder.load(tiny)
    assert "python -m core train --system dual-encoder" in str(err.value)


def test_dual_encoder_training_lowers_loss_and_beats_its_untrained_copy(tiny):
    from core.retrieval import dual_encoder as de
    from core.retrieval.wordmean import collection_vocab, glove_matrix

    # τ = 0.05: on QQP dev τ = 0.2 is best (the default; BENCHMARKS.md), but 60 steps on the fixture's 49 pairs
    # at τ = 0.2 lower the held-out loss (3.87 -> 0.62) while MRR@100 of the 26 held-out queries falls 0.95 -> 0.82
    cfg = de.make_config("quick", max_steps=60, eval_every=10, patience=100, batch_queries=32, lr=5e-3,
                         dev_distractors=0, max_seconds=0, temperature=0.05)
    metrics = de.build(tiny, config=cfg)
    log = metrics["training"]
    losses = [c["loss"] for c in log["curve"] if c["loss"] is not None]
    assert losses[-1] < losses[0], losses
    assert log["reference"]["system"] == "glove-mean" and log["stopped"] == "cap"
    assert [c["step"] for c in log["curve"]] == [0, 10, 20, 30, 40, 50, 60]
    trained = _last_state(de.load(tiny, index="flat").encoder, de._folder(tiny))
    vocab = collection_vocab(tiny, glove_only=False)
    untrained = IdsEncoder(de._model(vocab.size, glove_matrix(vocab, cfg.plan.seed, cfg.oov_scale)).eval(), vocab,
                           cfg.max_words, add_cls=False, encoder_id="untrained")
    # rank metrics of the GloVe mean are near the ceiling on 26 held-out queries (MRR@100 0.95):
    # the trained model must not rank worse and must fit the held-out paraphrases better (Eq. (7))
    assert _score(trained, tiny) >= _score(untrained, tiny)
    after, before = _heldout_loss(trained, tiny), _heldout_loss(untrained, tiny)
    assert after < before, (after, before)


def test_densetrans_training_lowers_loss_and_beats_its_untrained_copy(tiny):
    from core.retrieval import densetrans as dt

    cfg = dt.make_config("quick", None, d_model=24, max_steps=60, eval_every=20, patience=100, batch_queries=32,
                         lr=2e-3, dev_distractors=0, dropout=0.0, max_seconds=0)
    metrics = dt.build(tiny, config=cfg)
    losses = [c["loss"] for c in metrics["training"]["curve"] if c["loss"] is not None]
    assert losses[-1] < losses[0], losses
    trained = _last_state(dt.load(tiny, index="flat").encoder, dt._folder(tiny, None))
    vocab, matrix = dt._vocab_and_vectors(tiny, cfg)
    torch.manual_seed(cfg.plan.seed)
    untrained_model = dt._model(cfg, vocab.size, matrix.shape[1], vocab.pad_id, matrix).eval()
    untrained = IdsEncoder(untrained_model, vocab, cfg.max_words, add_cls=True, encoder_id="untrained")
    # GloVe-initialised DenseTrans already ranks the 26 held-out queries at MRR@100 ~0.85 untrained; one
    # query moving a rank decides a rank metric, so the held-out Eq. (7) loss is the measure here
    ranks = (_score(trained, tiny), _score(untrained, tiny))
    after, before = _heldout_loss(trained, tiny), _heldout_loss(untrained, tiny)
    assert after < before, (after, before, "MRR@100 trained/untrained", ranks)
