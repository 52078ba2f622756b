"""FRM as a system (core.rerank.frm): build, load and the reranking contract on a tiny set (the candidate set kept,
batched equal to one by one, explanations consistent), another seed trained beside the build, one training thread,
a missing model naming its build command; and the real training loop on the fixture: the loss falls, the trained
model beats the untrained one, and its keyword importance learns to favour content words."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core.data.keywords import LexicalStats

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # one intra-op thread (tests.conftest)


# ----------------------------------------------------------------------------- system contract
@pytest.fixture(scope="module")
def tiny_frm(tmp_path_factory):
    import os

    from core.data.clusters import dataset_from_pairs
    from core.rerank import frm as F

    old = os.environ.get("QRS_VAR")
    os.environ["QRS_VAR"] = str(tmp_path_factory.mktemp("var"))
    rows = [(1, "How can I stop my depression ?", "How do I overcome depression ?"),
            (0, "How can I stop my depression ?", "What is the capital of France ?"),
            (1, "What is the best phone to buy ?", "Which phone should I buy ?"),
            (0, "How to keep the mobile phone cool ?", "How to keep the mobile phone fast ?")] * 2
    ds = dataset_from_pairs("tiny", "tiny", [(l, a, b, str(i)) for i, (l, a, b) in enumerate(rows)], tokenized=True)
    ds.pairs["train"] = ds.pairs["all"]
    ds.pairs["dev"] = ds.pairs["all"]
    F.build(ds, train_config=F.FRMTrainConfig(max_epochs=1, batch_size=4, eval_every=2))
    yield ds, F.load(ds)
    if old is None:
        os.environ.pop("QRS_VAR", None)
    else:
        os.environ["QRS_VAR"] = old


def test_another_seed_trains_beside_the_build_and_loads_from_its_folder(tiny_frm):
    """bench/dev_decisions.py's extra seeds: the built recipe's settings with another seed, trained into
    var/seeds (never over the build), reused on the next call, and served by ``load(folder=...)``."""
    import json

    from bench.dev_decisions import _frm_seed_folder
    from core.rerank import frm as F

    ds, built = tiny_frm
    assert _frm_seed_folder(ds, None, 13, 13) == F._folder(ds, None)
    folder = _frm_seed_folder(ds, None, 14, 13)
    assert folder != F._folder(ds, None) and "seeds" in folder.parts
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    assert config["train"]["seed"] == 14 and config["train"]["max_epochs"] == 1
    stamp = (folder / "weights.pt").stat().st_mtime_ns
    assert _frm_seed_folder(ds, None, 14, 13) == folder and (folder / "weights.pt").stat().st_mtime_ns == stamp
    other = F.load(ds, folder=folder)
    q, d = ["How can I stop my depression ?"] * 2, ["How do I overcome depression ?", "Which phone should I buy ?"]
    assert not np.allclose(other.score_pairs(q, d), built.score_pairs(q, d))


def test_train_frm_cli_trains_each_seed_beside_the_build_and_names_its_folder(tiny_frm, monkeypatch, capsys):
    """``python -m bench.dev_decisions --train-frm paper --seeds ...`` (make reproduce's FRM seed step): the built
    seed names the build's own folder, another seed is trained into var/seeds, and no report is written."""
    import json
    from pathlib import Path

    from bench import dev_decisions
    from core.data import datasets
    from core.rerank import frm as F

    ds, _ = tiny_frm
    monkeypatch.setattr(datasets, "load_dataset", lambda name: ds)
    out = Path(os.environ["QRS_VAR"]) / "report.json"
    assert dev_decisions.main(["--dataset", "tiny", "--train-frm", "paper", "--seeds", "13", "15",
                               "--out", str(out)]) == 0
    built, other = [Path(line) for line in capsys.readouterr().out.splitlines() if line.startswith("/")]
    assert built == F._folder(ds, None) and "seeds" in other.parts and other.name == "seed-15"
    assert json.loads((other / "config.json").read_text(encoding="utf-8"))["train"]["seed"] == 15
    assert not out.exists()


def test_frm_trains_single_threaded_on_cpu_and_restores_threads(monkeypatch):
    """Two intra-op threads made FRM's weights differ run to run (bench/reports/frm_threads.json): train_frm runs
    the loop with one thread on CPU and gives the caller its thread count back, also when training fails."""
    from core.rerank import frm_training as T

    seen = []

    def fake(*args):
        seen.append(torch.get_num_threads())
        raise RuntimeError("stop")

    monkeypatch.setattr(T, "_train_frm", fake)
    monkeypatch.setattr(T, "device", lambda: torch.device("cpu"))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(RuntimeError, match="stop"):
            T.train_frm(None, None, None, None)
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_missing_frm_names_build_command(tmp_path, monkeypatch):
    from core.data.clusters import dataset_from_pairs
    from core.errors import MissingArtifactError
    from core.rerank import frm as F

    monkeypatch.setenv("QRS_VAR", str(tmp_path))
    ds = dataset_from_pairs("nothing", "x", [(1, "a b", "a c", "1")])
    assert not F.is_built(ds)
    with pytest.raises(MissingArtifactError, match="python -m core train --system frm"):
        F.load(ds)


@given(st.permutations(list(range(6))))
@settings(max_examples=5, deadline=None)
def test_rerank_keeps_candidate_set(tiny_frm, perm):
    from core.retrieval.base import Ranking

    ds, rr = tiny_frm
    ids = [list(ds.corpus)[i] for i in perm]
    out = rr.rerank("How do I stop depression ?", Ranking("x", ids, [0.0] * len(ids)), ds.corpus)
    assert sorted(out.doc_ids) == sorted(ids)
    assert out.scores == sorted(out.scores, reverse=True)
    assert all(0.0 < s < 1.0 for s in out.scores)


def test_batched_equals_one_by_one(tiny_frm):
    ds, rr = tiny_frm
    docs = list(ds.corpus.values())[:5]
    batched = rr.score_pairs(["How do I stop depression ?"] * 5, docs)
    single = np.array([rr.score_pairs(["How do I stop depression ?"], [d])[0] for d in docs])
    assert np.allclose(batched, single, atol=1e-5)


def test_explain_is_consistent(tiny_frm):
    ds, rr = tiny_frm
    e = rr.explain("How to keep the mobile phone cool ?", "stop my iphone from overheating")
    assert e.query_keywords == ["How", "to", "keep", "the", "mobile", "phone", "cool"]
    assert len(e.query_levels) == 7 and len(e.candidate_levels) == 5
    assert [(p["q_level"], p["d_level"]) for p in e.pairs] == [(1, 1), (2, 1), (3, 2), (4, 3), (5, 3), (6, 4), (7, 5)]
    assert all(0 < w < 1 for w in e.query_importance)
    assert set(e.view_contributions) == {"m_mlp", "m_att", "m_lm"}
    assert e.score == pytest.approx(rr.score_pairs(["How to keep the mobile phone cool ?"], ["stop my iphone from overheating"])[0], abs=1e-5)


# ----------------------------------------------------------------------------- the real training loop
@pytest.fixture(scope="module")
def fixture_training(tmp_path_factory):
    """The real loop (``train_frm``) on the tiny QQP fixture (98 train / 12 dev / 13 test pairs)."""
    import os

    from core.data.datasets import load_dataset
    from core.data.keywords import LexicalStats
    from core.rerank import frm as F
    from tests.conftest import TINY_DATA

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QRS_VAR", str(tmp_path_factory.mktemp("var")))
        mp.setenv("QRS_DATA", str(TINY_DATA))
        ds = load_dataset("qqp-bimpm")
        cfg = F.model_config()
        # the kw-loss recipe (Eq. 18 + the keyword-agreement term): the importance test below is about that term
        tcfg = F.FRMTrainConfig(max_epochs=12, batch_size=16, eval_every=7, patience=8, seed=13,
                                **F.RECIPES["kw-loss"])
        stats = LexicalStats.from_texts(ds.corpus.values())
        folder = F._folder(ds, None)
        metrics = F.train_frm(ds, cfg, tcfg, folder, stats=stats)
        from core.training import set_seed

        set_seed(tcfg.seed)
        untrained = F.FRM(cfg).eval()  # the same initialisation train_frm started from
        trained = F.FRM(cfg)
        trained.load_state_dict(torch.load(folder / "weights.pt", weights_only=True)["model"])
        fz = F.Featurizer(stats, cfg.max_keywords)
        feats = F.pair_features(fz, ds.corpus, ds.pairs["all"])
        store = F.VectorStore.for_encoder(cfg.max_keywords)
        store.ensure(fz, list(feats.values()))  # the test pairs' vectors too (training cached train + dev)
        yield ds, metrics, untrained, trained.eval(), feats, store, F


def test_training_loop_lowers_loss_and_beats_untrained(fixture_training):
    ds, metrics, untrained, trained, feats, store, F = fixture_training
    dev = torch.device("cpu")
    train, test = ds.pairs["train"], ds.pairs["test"]

    def loss(model, pairs):
        probs = F.predict_pairs(model, feats, store, ds.corpus, pairs, dev)
        y = np.array([p.label for p in pairs], dtype=float)
        probs = np.clip(probs, 1e-7, 1 - 1e-7)
        return float(-(y * np.log(probs) + (1 - y) * np.log(1 - probs)).mean())

    assert loss(trained, train) < loss(untrained, train) - 0.05
    y = np.array([p.label for p in test])
    auc = lambda m: F.accuracy_auc(y, F.predict_pairs(m, feats, store, ds.corpus, test, dev))["auc"]  # noqa: E731
    assert auc(trained) > auc(untrained)  # held-out fixture pairs (never trained on, not used for stopping)
    log = metrics["training"]
    assert log["dev_metric"] == "roc_auc" and log["curve"][0]["step"] == 0 and log["best_step"] > 0
    assert log["stopped"] in ("patience", "cap", "budget")
    assert log["reference"]["system"] == "minilm" and 0 <= log["reference"]["dev"] <= 1
    assert log["reference"]["untrained"]["dev"] == log["curve"][0]["dev"]


def test_importance_learns_to_vary_and_favour_content_words(fixture_training):
    """With the keyword-agreement term (``frm@kw-loss``); Eq. (18) alone leaves the sign to chance."""
    ds, metrics, untrained, trained, feats, store, F = fixture_training
    texts = list(feats.values())
    before = F.importance_report(untrained, texts, store, torch.device("cpu"))
    after = F.importance_report(trained, texts, store, torch.device("cpu"))
    assert after["saturated"] == 0.0  # the literal Eq. (17) drove every w(k, q) to 1.0
    assert after["std_within_question"] > 5 * before["std_within_question"]  # learned spread, not one flat value
    assert after["mean_content"] > after["mean_stop"] and after["spearman_idf"] > 0
    # the question (a dev-split question: never trained on): "depression" outranks the stop words
    f = feats["How can I stop my depression ?"]
    side = F.side_tensors([f], store.cls[f.text][None].astype(np.float32), [store.kw[f.text]], torch.device("cpu"))
    with torch.inference_mode():
        w = dict(zip(f.keywords, trained.importance(side)[0].tolist()))
    assert max(w, key=w.get) == "depression" and w["depression"] > w["How"] > 0


def test_explain_cli_on_the_fixture_trained_model_finds_the_topic_word(fixture_training, capsys):
    """``python -m core explain --json`` on the fixture-trained model (keyword-agreement recipe): "depression"
    outweighs How, can, I and my (the Keywords page's weights, from the same function)."""
    import json

    from core.cli.main import main

    code = main(["explain", "--system", "frm", "--method", "w", "How can I stop my depression?",
                 "--candidate", "How do I overcome depression?", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    w = dict(json.loads(out)["query"])
    assert all(w["depression"] > w[other] for other in ("How", "can", "I", "my")), w
