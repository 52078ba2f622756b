"""SDML-CNN: the loss against hand-computed values, hashing trick stability, a tiny real training run."""
from __future__ import annotations

import math

import faiss
import numpy as np
import pytest
import torch

from core.data import dataset_from_pairs
from core.errors import MissingArtifactError
from core.tokenizers import WordVocab, stable_bucket
from models.losses import SDMLLoss, TripletLoss, smoothed_targets
from models.sdml_cnn import SDMLCNN

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


def toy_dataset(n_concepts: int = 100, seed: int = 0):
    """Synonym clusters (alphaC / betaC), two clusters per component joined by a negative pair."""
    rng = np.random.default_rng(seed)
    filler = [f"w{i}" for i in range(30)]
    rows, pid = [], 0

    def f(k: int) -> str:
        return " ".join(rng.choice(filler, size=k, replace=False))

    for c in range(0, n_concepts, 2):
        groups = []
        for cc in (c, c + 1):
            a, b = f"alpha{cc}", f"beta{cc}"
            groups.append([f"what is {a} {f(2)} ?", f"explain {b} {f(3)} ?", f"{f(1)} {a} or {b} {f(1)} ?"])
        for g in groups:
            for t1, t2 in ((g[0], g[1]), (g[1], g[2])):
                rows.append((1, t1, t2, str(pid)))
                pid += 1
        rows.append((0, groups[0][0], groups[1][0], str(pid)))
        pid += 1
    return dataset_from_pairs("toy", "toy synonyms", rows, tokenized=True)


def test_tiny_training_beats_random_encoder(tmp_path, monkeypatch):
    monkeypatch.setenv("QRS_VAR", str(tmp_path))
    from core.retrieval import sdml

    torch.set_num_threads(1)
    toy = toy_dataset()
    cfg = sdml.make_config("quick", None, emb_dim=16, channels=16, out_dim=16, batch_size=16, epochs=8,
                           patience=8, min_count=1, hash_bins=50)
    metrics = sdml.build(toy, "quick", config=cfg)
    losses = [h["loss"] for h in metrics["history"]]
    assert losses[-1] < losses[0]
    retriever = sdml.load(toy, index="flat")
    trained_auc = sdml.dev_auc(retriever.encoder, toy, "train")
    torch.manual_seed(1)
    random_enc = sdml._encoder(sdml._model(cfg, retriever.encoder.vocab.size).eval(), retriever.encoder.vocab, cfg, "r")
    random_auc = sdml.dev_auc(random_enc, toy, "train")
    assert trained_auc > random_auc + 0.1, (trained_auc, random_auc)
    # squared-L2 serving: scores are −‖q − d‖², best first, and the query finds itself first
    q = toy.corpus[next(iter(toy.corpus))]
    hits = retriever.retrieve([q], 5)
    assert hits.ids[0][0] == next(iter(toy.corpus)) and hits.scores[0][0] == pytest.approx(0.0, abs=1e-3)
    assert hits.scores[0] == sorted(hits.scores[0], reverse=True)
    ann = sdml.load(toy)  # default IVF index, saved at build time
    assert "IVF" in ann.spec.factory and ann.spec.metric == "l2" and len(ann.retrieve([q], 5).ids[0]) == 5


def test_missing_and_corrupt_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setenv("QRS_VAR", str(tmp_path))
    from core.registry import system_dir
    from core.retrieval import sdml

    toy = toy_dataset(4)
    with pytest.raises(MissingArtifactError, match="python -m core train --system sdml-cnn --dataset toy --variant=tl-ssd"):
        sdml.load(toy, variant="tl-ssd")
    folder = system_dir("toy", "sdml-cnn", None)
    (folder / "config.json").write_text('{"variant": "sdml"}')
    (folder / "vocab.json").write_text('{"kind": "words", "words": ["a"], "hash_bins": 3}')
    (folder / "model.pt").write_bytes(b"\x00garbage")
    with pytest.raises(MissingArtifactError, match="corrupt"):
        sdml.load(toy)
