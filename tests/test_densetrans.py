"""DenseTrans: dense-connectivity widths, shapes, gradients, a tiny real training run, artifacts."""
from __future__ import annotations

import json

import faiss
import pytest
import torch

from core.errors import MissingArtifactError
from core.evaluation import evaluate_run
from models.densetrans import VARIANTS, DenseTrans, layer_input_widths
from models.losses import SampledSoftmaxLoss
from tests.synonym_clusters import synonym_clusters

faiss.omp_set_num_threads(1)  # tiny indexes; avoids OpenMP spinning on a loaded machine


@pytest.fixture(scope="module")
def toy():
    return synonym_clusters()


@pytest.mark.parametrize("variant", VARIANTS)
def test_widths_and_shapes(variant):
    torch.manual_seed(0)
    model = DenseTrans(vocab_size=50, d_model=12, n_layers=3, n_heads=6, max_len=8, variant=variant).eval()
    expected_inputs = {"full": [12, 24, 48], "-TopDense": [12, 24, 24], "-AllDense": [12, 12, 12],
                       "+Concat": [12, 12, 12]}[variant]
    assert layer_input_widths(12, 3, variant) == expected_inputs
    assert model.widths == expected_inputs
    ids = torch.tensor([[1, 5, 7, 9, 0, 0], [1, 4, 0, 0, 0, 0]])
    rep = model.encode(ids)
    expected_rep = {"full": 48, "-TopDense": 24, "-AllDense": 12, "+Concat": 48}[variant]
    assert rep.shape == (2, expected_rep) == (2, model.rep_dim)
    cls = model.layer_vectors(ids)
    assert [c.shape for c in cls] == [(2, 12)] + [(2, w) for w in expected_inputs]
    if variant == "full":  # Eq. (5): layer ℓ's input is the concatenation of all earlier outputs
        outs = model.layer_outputs(ids)
        assert [o.shape[-1] for o in outs] == [12, 12, 24, 48]
    unit = model(ids)
    assert torch.allclose(unit.norm(dim=-1), torch.ones(2), atol=1e-5)


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_padding_does_not_change_the_vector(pooling):
    torch.manual_seed(0)
    model = DenseTrans(vocab_size=50, d_model=12, n_heads=6, max_len=10, pooling=pooling).eval()
    short = model(torch.tensor([[1, 5, 7]]))
    padded = model(torch.tensor([[1, 5, 7, 0, 0, 0]]))
    assert torch.allclose(short, padded, atol=1e-5)


def test_mean_pooling_averages_the_words_of_the_last_layer():
    torch.manual_seed(0)
    ids = torch.tensor([[1, 5, 7, 0], [1, 4, 0, 0]])
    model = DenseTrans(vocab_size=50, d_model=12, n_heads=6, max_len=8, pooling="mean").eval()
    last = model.layer_outputs(ids)[-1]
    assert torch.allclose(model.encode(ids)[0], last[0, :3].mean(0), atol=1e-6)
    assert torch.allclose(model.encode(ids)[1], last[1, :2].mean(0), atol=1e-6)
    assert not torch.allclose(model.encode(ids), last[:, 0])  # not the [CLS] row
    assert [c.shape[1] for c in model.layer_vectors(ids)] == [12, 12, 24, 48]
    with pytest.raises(ValueError, match="unknown pooling"):
        DenseTrans(vocab_size=50, d_model=12, n_heads=6, pooling="max")


def test_gradients_reach_every_parameter():
    torch.manual_seed(0)
    model = DenseTrans(vocab_size=50, d_model=12, n_heads=6, max_len=8, emb_dim=10)
    q = model(torch.tensor([[1, 5, 7], [1, 8, 9]]))
    d = model(torch.tensor([[1, 5, 6], [1, 8, 3], [1, 2, 4]]))
    SampledSoftmaxLoss(0.1)(q, d).backward()
    missing = [n for n, p in model.named_parameters() if p.requires_grad and (p.grad is None or not p.grad.abs().sum() > 0)]
    assert missing == []


def test_sampled_softmax_masks_false_negatives():
    q = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), dim=-1)
    d = torch.nn.functional.normalize(torch.tensor([[1.0, 0.1], [1.0, 0.0], [0.0, 1.0]]), dim=-1)
    mask = torch.tensor([[False, True, False], [False, False, False]])
    loss_masked = SampledSoftmaxLoss(1.0)(q, d, mask)
    s = q @ d.T
    expected = (-torch.log_softmax(s[0, [0, 2]], 0)[0] - torch.log_softmax(s[1], 0)[1]) / 2
    assert torch.isclose(loss_masked, expected, atol=1e-6)


def test_tiny_training_beats_random_encoder_and_serves(toy, tmp_path, monkeypatch):
    monkeypatch.setenv("QRS_VAR", str(tmp_path))
    from core.retrieval import densetrans as dt

    torch.set_num_threads(1)
    cfg = dt.make_config("quick", None, d_model=24, embeddings="random", max_steps=72, eval_every=12,
                         batch_queries=16, temperature=0.05, lr=1e-3, dev_distractors=0, patience=6, dropout=0.0,
                         max_seconds=0)
    metrics = dt.build(toy, "quick", config=cfg)
    log = metrics["training"]
    losses = [c["loss"] for c in log["curve"] if c["loss"] is not None]
    assert losses[-1] < losses[0]
    assert log["dev_metric"] == "recall@100" and log["stopped"] in ("patience", "cap")
    assert log["curve"][0]["step"] == 0 and log["reference"]["system"] == "glove-mean"
    assert set(metrics["test"]) >= {"recall@100", "hit_rate@1", "mrr@100"}
    assert dt.is_built(toy)
    retriever = dt.load(toy, index="flat")
    queries, qrels = toy.split_queries("all"), toy.split_qrels("all")
    trained = evaluate_run(qrels, retriever.search_many(queries, k=10), ["recall@10"])["recall@10"]
    # the same architecture, untrained, through the same serving path
    enc = retriever.encoder
    torch.manual_seed(1)
    random_model = dt._model(cfg, enc.model.token.num_embeddings, enc.model.token.embedding_dim, 0).eval()
    from core.retrieval.indexing import IndexSpec
    from core.retrieval.dense import DenseRetriever, l2_normalize
    from core.data.tokenizers import IdsEncoder

    renc = IdsEncoder(random_model, enc.vocab, cfg.max_words, True, "random")
    rvec = l2_normalize(renc.encode(list(toy.corpus.values())))
    rand = DenseRetriever.from_vectors("random", renc, toy.corpus, rvec, IndexSpec("Flat"))
    baseline = evaluate_run(qrels, rand.search_many(queries, k=10), ["recall@10"])["recall@10"]
    assert trained > baseline + 0.1, (trained, baseline)
    # the Layers-page contract: N + 1 arrays, widths d, d, 2d, 4d
    layers = retriever.layer_embeddings(["what is alpha3 ?", "explain beta3 ?"])
    assert [a.shape for a in layers] == [(2, 24), (2, 24), (2, 48), (2, 96)]
    # the default index is exact on a small collection; ANN presets and live parameters still work
    assert dt.load(toy).spec.factory == "Flat"
    ann = dt.load(toy, index="ivfpq")
    ann.set_params("nprobe=4")
    hits = ann.retrieve(["what is alpha3 ?"], 5)
    assert len(hits.ids[0]) == 5
    # resuming: the finished run is picked up from last.pt and not retrained
    again = dt.train(toy, cfg, dt._folder(toy, None))
    assert again["training"]["curve"] == log["curve"]


def test_a_cold_reference_cache_does_not_change_the_trained_model(toy, tmp_path, monkeypatch):
    """The glove-mean reference is computed between set_seed and the first step only when its cache is cold, and
    building it draws from the global random state (its modules' initial weights): without
    ``core.training.preserved_rng`` DenseTrans built alone differed from DenseTrans built after another trainer
    had filled that cache (seed 13 on QQP: held-out H@1 .6311 against the default build's .6266)."""
    from pathlib import Path

    from core.retrieval import densetrans as dt
    from core.retrieval.wordmean import reference

    torch.set_num_threads(1)
    cfg = dt.make_config("quick", None, d_model=12, embeddings="random", max_steps=8, eval_every=4,
                         batch_queries=8, temperature=0.05, lr=1e-3, dev_distractors=0, patience=2, dropout=0.3,
                         max_seconds=0)
    states = []
    for warm in (False, True):
        var = tmp_path / ("warm" if warm else "cold")
        monkeypatch.setenv("QRS_VAR", str(var))
        if warm:  # what an earlier trainer of the same build leaves behind
            reference(toy, cfg.plan.dev_distractors, cfg.plan.seed)
        dt.build(toy, "quick", config=cfg)
        [model] = [p for p in Path(var).rglob("model.pt")]
        states.append(torch.load(model, map_location="cpu"))
    cold, warm = states
    state = lambda s: s.get("model", s) if isinstance(s, dict) else s  # noqa: E731
    cold, warm = state(cold), state(warm)
    assert set(cold) == set(warm) and all(torch.equal(cold[k], warm[k]) for k in cold if torch.is_tensor(cold[k]))


def test_query_sampler_counts_every_query_alike():
    from core.retrieval.contrastive import QuerySampler, candidate_mask

    # one huge cluster (50 questions) and 50 two-question clusters: pair sampling would draw the big
    # cluster's 2,450 ordered pairs 96% of the time; query sampling draws each query once per pass
    big = [f"b{i}" for i in range(50)]
    positives = {q: [x for x in big if x != q] for q in big}
    for i in range(50):
        positives[f"s{i}a"], positives[f"s{i}b"] = [f"s{i}b"], [f"s{i}a"]
    sampler = QuerySampler(positives, {"b0": ["n1", "n2"]}, batch=25, hard=1, seed=3)
    assert sampler.steps_per_pass == 6
    seen = [q for step in range(6) for q in sampler(step)[0]]
    assert sorted(seen) == sorted(positives)  # one pass = every query exactly once
    qids, pos, neg = sampler(7)
    assert sampler(7) == (qids, pos, neg)  # deterministic: resumable at any step
    assert all(p in positives[q] for q, p in zip(qids, pos))
    mask = candidate_mask(["b0", "s1a"], ["b1", "s1b", "b0", "n1"], positives)
    assert mask.tolist() == [[True, False, True, False], [False, True, False, False]]


def test_training_positives_fraction_closes_clusters(toy):
    from core.retrieval.contrastive import training_positives

    full = training_positives(toy, 1.0)
    assert full and all(q not in v and v for q, v in full.items())
    half = training_positives(toy, 0.5, seed=1)
    n_pairs = sum(len(v) for v in half.values())
    assert 0 < n_pairs < sum(len(v) for v in full.values())
    assert all(set(v) <= set(full[q]) for q, v in half.items())  # only true paraphrases
    with pytest.raises(ValueError):
        training_positives(toy, 0.0)


def test_missing_and_corrupt_checkpoint(toy, tmp_path, monkeypatch):
    monkeypatch.setenv("QRS_VAR", str(tmp_path))
    from core.registry import build_command, system_dir
    from core.retrieval import densetrans as dt

    with pytest.raises(MissingArtifactError) as err:
        dt.load(toy, variant="-AllDense")
    assert build_command("densetrans", "toy", "-AllDense") in str(err.value)
    folder = system_dir("toy", "densetrans", None)
    (folder / "model.pt").write_bytes(b"not a checkpoint")
    (folder / "metrics.json").write_text("{}")  # a finished build (a running one is refused as such)
    (folder / "config.json").write_text('{"variant": "full", "d_model": 12}')
    from core.data.pipeline import stamp

    (folder / "vocab.json").write_text(json.dumps({"kind": "words", "words": ["a"], "hash_bins": 0, **stamp()}))
    with pytest.raises(MissingArtifactError) as err:
        dt.load(toy)
    assert "corrupt" in str(err.value) and "python -m core train --system densetrans" in str(err.value)


def test_auto_index_is_exact_below_a_million_vectors():
    from core.retrieval.indexing import EXACT_BELOW, IndexSpec

    assert IndexSpec.from_preset("auto", 36_737, 240).factory == "Flat"
    assert IndexSpec.from_preset("auto", EXACT_BELOW - 1, 64) == IndexSpec("Flat", "", "ip")
    big = IndexSpec.from_preset("auto", EXACT_BELOW, 64, metric="l2")
    assert big.factory.startswith("HNSW") and big.search_params == "efSearch=128" and big.metric == "l2"
    from core.retrieval import densetrans, dual_encoder, wordmean

    assert densetrans.DEFAULT_INDEX == dual_encoder.DEFAULT_INDEX == wordmean.DEFAULT_INDEX == "auto"


def test_a_fraction_of_pairs_never_gives_a_query_without_a_paraphrase():
    """QQP's train split holds pairs of a question with itself (4 positive ones): a one-member cluster
    must not become a query with nothing to sample (the data-size curve crashed at 1/4)."""
    from types import SimpleNamespace

    from core.retrieval.contrastive import training_positives

    pairs = [SimpleNamespace(id1="a", id2="a", label=1), SimpleNamespace(id1="b", id2="c", label=1),
             SimpleNamespace(id1="c", id2="d", label=1), SimpleNamespace(id1="e", id2="f", label=0)]
    ds = SimpleNamespace(pairs={"train": pairs}, split_queries=lambda split: ["a", "b", "c", "d"], qrels={})
    for fraction in (0.5, 0.75, 0.99):
        positives = training_positives(ds, fraction, seed=3)
        assert positives and all(positives.values()), positives
        assert "a" not in positives and "e" not in positives


def test_train_state_round_trip_and_a_broken_file_changes_nothing(tmp_path):
    """core.training.save/load_train_state: the shared last.pt of DenseTrans, SDML-CNN and FRM."""
    import torch

    from core.training import TrainLog, load_train_state, save_train_state

    model = torch.nn.Linear(3, 2)
    optim = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.ones(1, 3)).sum().backward()
    optim.step()
    log = TrainLog("recall@100", patience=2, max_steps=10)
    log.record(5, 0.5, 1.0, 0.7, 0.3)
    save_train_state(tmp_path / "last.pt", "cfg", {"model": model, "optim": optim}, 5, 12.5, log, untrained=0.1)
    fresh = torch.nn.Linear(3, 2)
    fresh_optim = torch.optim.Adam(fresh.parameters(), lr=0.1)
    assert load_train_state(tmp_path / "last.pt", "other cfg", {"model": fresh, "optim": fresh_optim}) is None
    state = load_train_state(tmp_path / "last.pt", "cfg", {"model": fresh, "optim": fresh_optim})
    assert state["step"] == 5 and state["seconds"] == 12.5 and state["untrained"] == 0.1
    assert state["log"].best_dev == 0.7 and torch.equal(fresh.weight, model.weight)
    # a state whose optimiser part does not fit: the model part loaded first is put back
    other = torch.nn.Linear(3, 2)
    before = other.weight.detach().clone()
    wrong_optim = torch.optim.Adam([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    assert load_train_state(tmp_path / "last.pt", "cfg", {"model": other, "optim": wrong_optim}) is None
    assert torch.equal(other.weight, before)
    (tmp_path / "broken.pt").write_bytes(b"not a checkpoint")
    assert load_train_state(tmp_path / "broken.pt", "cfg", {"model": other}) is None
