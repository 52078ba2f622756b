"""SDML-CNN: the loss against hand-computed values, hashing trick stability, a tiny real training run."""
from __future__ import annotations

import json
import math

import faiss
import numpy as np
import pytest
import torch

from core.data.clusters import dataset_from_pairs
from core.errors import MissingArtifactError
from core.data.tokenizers import WordVocab, stable_bucket
from models.losses import SDMLLoss, TripletLoss, smoothed_targets
from models.sdml_cnn import SDMLCNN
from tests.synonym_clusters import synonym_clusters

faiss.omp_set_num_threads(1)  # tiny indexes; avoids OpenMP spinning on a loaded machine


def test_figure2_smoothed_targets():
    expected = torch.tensor([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]])
    assert torch.allclose(smoothed_targets(3, 0.3), expected)


def test_sdml_loss_equals_hand_computed_value():
    a = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    c = torch.tensor([[0.0, 0.0], [1.0, 1.0], [0.0, 2.0]])
    sq = [[0, 2, 4], [1, 1, 5], [4, 2, 0]]  # ‖a_i − c_j‖² by hand
    target = [[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]]  # Figure 2 (ε = 0.3, N = 3)
    total = 0.0
    for i in range(3):
        z = sum(math.exp(-d) for d in sq[i])
        for j in range(3):
            p_hat = math.exp(-sq[i][j]) / z  # Eq. (3)
            total += target[i][j] * (math.log(target[i][j]) - math.log(p_hat))
    expected = total / 3
    assert SDMLLoss(0.3)(a, c).item() == pytest.approx(expected, rel=1e-5)
    # ε = 0 is plain cross-entropy on the gold candidate
    ce = sum(-(-sq[i][i]) + math.log(sum(math.exp(-d) for d in sq[i])) for i in range(3)) / 3
    assert SDMLLoss(0.0)(a, c).item() == pytest.approx(ce, rel=1e-5)


def test_triplet_loss_distances():
    a, p, n = torch.tensor([[0.0, 0.0]]), torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.2]])
    # SSD: 1 − 1.44 + 0.5 = 0.06; EUC: 1 − 1.2 + 0.5 = 0.3
    assert TripletLoss(0.5, "ssd")(a, p, n).item() == pytest.approx(0.06, abs=1e-5)
    assert TripletLoss(0.5, "euc")(a, p, n).item() == pytest.approx(0.3, abs=1e-5)


def test_hashing_trick_is_stable_across_runs():
    # CRC-32 is a fixed standard: these buckets are the same in every process, whatever PYTHONHASHSEED
    # (Python's salted hash() would change them between runs).
    assert [stable_bucket(w, 5000) for w in ("quora", "zyzzyva", "naïve")] == [4163, 1557, 3174]
    vocab = WordVocab.build(["a a b", "a c"], max_size=2, min_count=1, hash_bins=7)
    assert vocab.words == ("a", "b")
    rare = vocab.token_id("zyzzyva")
    assert vocab.first_bin <= rare < vocab.size and rare == vocab.first_bin + stable_bucket("zyzzyva", 7)
    assert vocab.batch(["A b zyzzyva", "a"], max_len=30).tolist() == [[3, 4, rare], [3, 0, 0]]


def test_encoder_shapes_and_gradients():
    torch.manual_seed(0)
    model = SDMLCNN(vocab_size=40, emb_dim=8, window=5, channels=6, out_dim=4)
    ids = torch.tensor([[3, 4, 5, 0, 0], [7, 0, 0, 0, 0]])
    out = model(ids)
    assert out.shape == (2, 4)
    assert torch.allclose(model(torch.tensor([[7]])), out[1:], atol=1e-6)  # padding is ignored
    SDMLLoss(0.3)(out, model(torch.tensor([[3, 4, 6], [8, 0, 0]]))).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def synonym_toy(n_syn: int = 20, n_ent: int = 10, seed: int = 0):
    """Clusters of two questions that share an entity word and say one concept with two synonyms
    (``a{i}`` / ``b{i}``); every entity and synonym pair recurs across clusters, so a held-out cluster
    is new but its words are not. Untrained, a question's neighbours are the ~2·n_syn questions with
    the same entity; trained, a{i} ≈ b{i} singles out the paraphrase."""
    rng = np.random.default_rng(seed)
    filler = [f"w{i}" for i in range(30)]
    rows, pid = [], 0

    def f(k: int) -> str:
        return " ".join(rng.choice(filler, size=k, replace=False))

    for i in range(n_syn):
        for j in range(n_ent):
            rows.append((1, f"what is a{i} e{j} {f(1)} ?", f"explain b{i} e{j} {f(1)} ?", str(pid)))
            pid += 1
    return dataset_from_pairs("toy", "toy synonyms", rows, tokenized=True)


def test_tiny_training_beats_untrained_copy(tmp_path, monkeypatch):
    """The real build loop (early stopping on dev H@1) lowers the loss, and the trained encoder beats its
    own untrained copy on the held-out (test split) queries of the toy fixture."""
    monkeypatch.setenv("QRS_VAR", str(tmp_path))
    from core.retrieval import sdml
    from core.training import TrainLog

    torch.set_num_threads(1)
    toy = synonym_toy()
    cfg = sdml.make_config("paper", None, emb_dim=32, channels=32, out_dim=32, batch_size=32, lr=0.01,
                           max_steps=160, eval_every=20, patience=4, min_count=1, hash_bins=50)
    metrics = sdml.build(toy, "quick", config=cfg)
    log = TrainLog.from_dict(metrics["training"])
    assert log.dev_metric == "hit_rate@1" and metrics["training"]["stopped"] in ("patience", "cap")
    assert log.curve[0].step == 0 and log.curve[0].loss is None  # the untrained encoder is the first point
    losses = [p.loss for p in log.curve[1:]]
    assert len(losses) >= 2 and losses[-1] < losses[0], losses
    assert metrics["training"]["reference"]["system"] == "glove-mean"
    trained, untrained = metrics["test"]["hit_rate@1"], metrics["untrained"]["test"]["hit_rate@1"]
    assert trained > untrained + 0.1, (trained, untrained)
    assert metrics["best_dev_hit_rate@1"] > metrics["untrained"]["dev"]
    # the served (exact, default) index gives the same test H@1 as the build's measurement
    retriever = sdml.load(toy)
    assert retriever.spec.metric == "l2" and "IVF" not in retriever.spec.factory
    from core.evaluation import evaluate_run

    qrels = toy.split_qrels("test")
    run = retriever.search_many({q: toy.queries[q] for q in qrels}, k=100, ignore_identical_ids=True)
    assert evaluate_run(qrels, run, ["hit_rate@1"])["hit_rate@1"] == pytest.approx(trained, abs=1e-9)
    # squared-L2 serving: scores are −‖q − d‖², best first, and the query finds itself first
    q = toy.corpus[next(iter(toy.corpus))]
    hits = retriever.retrieve([q], 5)
    assert hits.ids[0][0] == next(iter(toy.corpus)) and hits.scores[0][0] == pytest.approx(0.0, abs=1e-3)
    assert hits.scores[0] == sorted(hits.scores[0], reverse=True)
    ann = sdml.load(toy, index="ivf")  # the paper's IVF index (§4.3) on request
    assert "IVF" in ann.spec.factory and ann.spec.metric == "l2" and len(ann.retrieve([q], 5).ids[0]) == 5
    # resuming a finished run with the same config does not train again
    again = sdml.train(toy, cfg, sdml._folder(toy, "sdml"), resume=True)
    assert again["steps"] == metrics["steps"] and again["training"]["curve"] == metrics["training"]["curve"]


def test_config_rejects_bad_values():
    from core.retrieval import sdml

    with pytest.raises(ValueError, match="emb_dim=50"):
        sdml.make_config("paper", None, init="glove")
    with pytest.raises(ValueError, match="train_fraction"):
        sdml.make_config("quick", None, train_fraction=0.0)


def test_glove_init_copies_glove_rows_and_keeps_padding_zero():
    from core.retrieval import sdml
    from core.data.vectors import load_glove_50d

    toy = synonym_clusters(4)
    cfg = sdml.make_config("quick", None, channels=8, out_dim=8)  # quick: GloVe-50d over the collection's words
    assert cfg.init == "glove" and cfg.emb_dim == 50 and cfg.vocab_from == "collection"
    vocab = sdml.build_vocab(toy, cfg)
    assert "what" in vocab.words and "alpha3" in vocab.words  # every collection word, even held-out ones
    weight = sdml.new_model(cfg, vocab).embedding.weight.detach()
    glove = load_glove_50d()
    assert np.allclose(weight[vocab.token_id("what")].numpy(), glove.matrix[glove.index["what"]])
    assert torch.count_nonzero(weight[vocab.pad_id]) == 0


def test_without_dev_queries_training_stops_on_train_queries():
    from core.retrieval import sdml

    toy = synonym_toy()
    assert sdml.stopping_split(toy) == "dev"
    toy.pairs["dev"], toy.query_splits["dev"] = [], []
    assert sdml.stopping_split(toy) == "train"
    toy.pairs["test"], toy.query_splits["test"] = [], []
    assert sdml.retrieval_scores(sdml.glove_mean_encode, toy, "test", "all", metric="cos") == {"hit_rate@1": None}


def test_training_pairs_fraction_is_a_seeded_subset():
    from core.retrieval import sdml

    toy = synonym_clusters()
    full = sdml.training_pairs(toy)
    half = sdml.training_pairs(toy, 0.5)
    assert len(half) == round(0.5 * len(full)) and set(half) <= set(full)
    assert half == sdml.training_pairs(toy, 0.5)
    rows = [sdml.batch_rows(10, 4, i, 13) for i in range(2)]
    assert len(set(rows[0]) | set(rows[1])) == 8  # one pass: no pair twice before the pass ends


def test_missing_and_corrupt_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setenv("QRS_VAR", str(tmp_path))
    from core.registry import system_dir
    from core.retrieval import sdml

    toy = synonym_clusters(4)
    with pytest.raises(MissingArtifactError, match="python -m core train --system sdml-cnn --dataset toy --variant=tl-ssd"):
        sdml.load(toy, variant="tl-ssd")
    folder = system_dir("toy", "sdml-cnn", None)
    (folder / "config.json").write_text('{"variant": "sdml"}')
    from core.data.pipeline import stamp

    (folder / "vocab.json").write_text(json.dumps({"kind": "words", "words": ["a"], "hash_bins": 3, **stamp()}))
    (folder / "model.pt").write_bytes(b"\x00garbage")
    with pytest.raises(MissingArtifactError, match="still training"):  # no metrics.json: a build in progress
        sdml.load(toy)
    (folder / "metrics.json").write_text("{}")
    with pytest.raises(MissingArtifactError, match="corrupt"):
        sdml.load(toy)
