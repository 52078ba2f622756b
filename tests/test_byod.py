"""Bring your own data all the way: names, candidate lists, training on user labels, portability.

Runs on the two small fixtures of ``tests/fixtures/byod`` (a BEIR folder and a candidate-list TSV made
from real QQP and TrecQA rows). GloVe is replaced by a small seeded table of the fixtures' words so the
trainers run in seconds; everything else is the production code path (CLI included).
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from tests.byod_env import BYOD, byod  # noqa: F401  (byod: a fixture)
from tests.conftest import FIXTURES, run_main


def var_files(tmp_path) -> set[str]:
    root = tmp_path / "var"
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


# ----------------------------------------------------------------------------- names
def test_parse_name_variant_and_trained_on():
    from core.errors import UnknownNameError
    from core.registry import SystemName, get_spec, parse_name

    assert parse_name("densetrans@qqp-bimpm") == SystemName("densetrans", None, "qqp-bimpm")
    assert parse_name("cnn-rerank@no-features") == SystemName("cnn-rerank", "no-features", None)
    assert parse_name("frm@-m_att@user/x") == SystemName("frm", "-m_att", "user/x")
    assert str(parse_name("sdml-cnn@tl-euc@trecqa")) == "sdml-cnn@tl-euc@trecqa"
    assert get_spec("densetrans@qqp-bimpm").name == "densetrans"
    with pytest.raises(UnknownNameError, match="unknown system 'nope'"):
        parse_name("nope@qqp-bimpm")
    with pytest.raises(UnknownNameError):
        parse_name("densetrans@")


def test_supports_candidate_lists_except_tree_search(byod):
    from core.registry import get_spec, supports

    _cqa, answers = byod
    assert all(supports(get_spec(n), answers) for n in ("bm25", "minilm", "densetrans", "sdml-cnn", "frm",
                                                         "cnn-rerank", "cross-encoder", "glove-mean"))
    assert not supports(get_spec("tree-bert"), answers) and not supports(get_spec("tree-bert-cross"), answers)


# ----------------------------------------------------------------------------- candidate lists
def test_bm25_ranks_each_querys_own_candidates(byod):
    from core.retrieval.bm25 import BM25PairScorer
    from core.analysis.compared_runs import system_runs
    from core.serving.runner import SystemChoice, rank_one
    from core.evaluation import evaluate_run
    from core.retrieval.bm25 import BM25Retriever

    _cqa, answers = byod
    qid = next(iter(answers.queries))
    ranking = rank_one(SystemChoice("bm25"), answers, answers.queries[qid], k=100, query_id=qid)
    assert sorted(ranking.doc_ids) == sorted(answers.candidates[qid])
    assert ranking.scores == sorted(ranking.scores, reverse=True)
    # the scores are BM25 over all candidate texts: the same as the retriever's own scores of those ids
    ref = BM25Retriever.index(answers.corpus).score_texts(answers.queries[qid], ranking.doc_ids)
    assert np.allclose(ranking.scores, ref, atol=1e-5)
    scorer = BM25PairScorer(answers.corpus)
    assert scorer.score_pairs([answers.queries[qid]], [answers.corpus[ranking.doc_ids[0]]])[0] == pytest.approx(
        ranking.scores[0], abs=1e-5)
    (run,) = system_runs(["bm25"], answers, answers.queries, k=100)
    assert set(run.to_dict()) == set(answers.queries)
    scores = evaluate_run(answers.qrels, run, ["map@100", "mrr@100"])
    assert 0.3 < scores["map@100"] <= 1.0


def test_free_text_on_candidate_lists_is_refused(byod):
    from core.errors import QueryError
    from core.serving.runner import SystemChoice, rank_one

    _cqa, answers = byod
    with pytest.raises(QueryError, match="own candidate list"):
        rank_one(SystemChoice("bm25"), answers, "who wrote hamlet?")


def test_encoder_pair_scorer_is_the_encoders_cosine_and_l2(byod):
    from core.serving.candidates import EncoderPairScorer

    _cqa, answers = byod

    class HashEncoder:
        encoder_id = "test-hash-encoder"

        def encode(self, texts, batch_size=128, progress=None):
            rows = [np.random.default_rng(abs(hash(t)) % 2**32).normal(size=8) for t in texts]
            return np.asarray(rows, dtype=np.float32)

    enc = HashEncoder()
    q, d = answers.queries["test/32.1"], answers.corpus["test/32.1/0"]
    qv, dv = enc.encode([q])[0], enc.encode([d])[0]
    cos = EncoderPairScorer(enc, answers.corpus, "h", "ip").score_pairs([q], [d])[0]
    assert cos == pytest.approx(float(qv @ dv / np.linalg.norm(qv) / np.linalg.norm(dv)), abs=1e-5)
    l2 = EncoderPairScorer(enc, answers.corpus, "h", "l2").score_pairs([q], [d])[0]
    assert l2 == pytest.approx(-float(((qv - dv) ** 2).sum()), rel=1e-5)


# ----------------------------------------------------------------------------- training data
def test_training_views_and_deterministic_splits(byod):
    from core.data.datasets import load_dataset
    from core.training_data import training_data

    cqa, answers = byod
    a, b = training_data(cqa), training_data(cqa)
    assert a.sizes == b.sizes and a.dataset.query_splits == b.dataset.query_splits
    splits = a.dataset.query_splits
    assert sum(len(v) for v in splits.values()) == len(cqa.queries)
    assert not set(splits["train"]) & (set(splits["dev"]) | set(splits["test"]))
    assert all(a.sizes[s]["positives"] >= 1 for s in ("train", "dev", "test"))
    for p in a.dataset.pairs["train"]:  # positives are qrels; negatives are unjudged BM25 hits
        assert (cqa.qrels[p.id1].get(p.id2, 0) > 0) == (p.label > 0)
        assert a.dataset.corpus[p.id1] == cqa.queries[p.id1] and a.dataset.corpus[p.id2] == cqa.corpus[p.id2]
    assert len(a.dataset.corpus) == len(cqa.corpus) and list(a.dataset.corpus) == list(cqa.corpus)
    assert "qrels split by query" in a.summary()

    c = training_data(answers)
    assert sum(len(v) for k, v in c.dataset.pairs.items() if k != "all") == sum(map(len, answers.candidates.values()))
    assert c.source == "candidates"
    trec = training_data(load_dataset("trecqa"))
    assert trec.dataset.query_splits["train"] == load_dataset("trecqa").query_splits["train"]
    assert trec.sizes["train"]["pairs"] == 4718


def test_cnn_generic_training_examples_equal_the_bespoke_trecqa_ones():
    """The generic path feeds the CNN exactly the examples the bespoke TrecQA code built (same order)."""
    from core.data.datasets import load_dataset
    from core.rerank.cnn import CNNTrainConfig, dev_candidates, training_examples
    from core.training_data import training_data

    ds = load_dataset("trecqa")
    qids = ds.query_splits["train"]  # the removed bespoke construction, verbatim
    q = [ds.queries[x] for x in qids for _ in ds.candidates[x]]
    d = [ds.corpus[c] for x in qids for c in ds.candidates[x]]
    y = [int(ds.qrels[x].get(c, 0) > 0) for x in qids for c in ds.candidates[x]]
    view = training_data(ds).dataset
    gq, gd, gy = training_examples(view)
    assert gq == q and gd == d and gy.tolist() == y
    dev = dev_candidates(view, CNNTrainConfig())
    assert list(dev) == [x for x in ds.query_splits["dev"] if ds.candidates.get(x)]
    assert all(dev[x].doc_ids == ds.candidates[x] for x in dev)
    texts = list(view.corpus.values()) + list(view.queries.values())
    assert texts == list(ds.corpus.values()) + list(ds.queries.values())  # same vocabulary order
    assert CNNTrainConfig().epochs_for(4718) == 13 and CNNTrainConfig().epochs_for(15871) == 4


# ----------------------------------------------------------------------------- import -> train -> eval -> portable
def test_workflow_train_eval_and_apply_zero_shot(byod, tmp_path):
    from core.data.datasets import load_dataset
    from core.transfer import applicable_systems, listing
    from core.serving.loader import load as load_system
    from core.retrieval.base import Reranker

    cqa, answers = byod
    # BM25 is built on demand by eval with a one-line notice
    code, out, err = run_main("eval", "--system", "bm25", "--dataset", "user/cqa", "--metrics", "map@100")
    assert code == 0 and "note: building the bm25 index for user/cqa" in err and "map@100" in out
    # train the CNN on the candidate list (tiny) through the CLI: split sizes reported
    code, out, err = run_main("train", "--system", "cnn-rerank", "--dataset", "user/answers")
    assert code == 0, err
    assert "candidates split by query" in err and "best_dev_map" in out
    code, out, err = run_main("eval", "--system", "cnn-rerank", "--dataset", "user/answers",
                             "--metrics", "map@100,mrr@100")
    assert code == 0 and "cnn-rerank on user/answers" in out, err
    # ... and apply it zero-shot to the BEIR collection (reranks BM25's top 20 there)
    code, out, err = run_main("eval", "--system", "cnn-rerank@user/answers", "--dataset", "user/cqa",
                             "--metrics", "map@100")
    assert code == 0 and "cnn-rerank@user/answers on user/cqa" in out, err
    assert "cnn-rerank@user/answers" in applicable_systems(cqa)
    assert "cnn-rerank" in applicable_systems(answers) and "bm25" in applicable_systems(answers)
    model = [m for m in listing() if m.name == "cnn-rerank@user/answers"]
    assert model and model[0].dataset_exists

    # a trained bi-encoder (dual-encoder, tiny plan) on the BEIR labels, applied to the candidate list
    from core.retrieval import dual_encoder
    from core.training_data import training_data

    view = training_data(cqa).dataset
    dual_encoder.build(view, config=dual_encoder.make_config("quick", max_steps=12, eval_every=4, patience=2))
    native = load_system("dual-encoder", cqa)
    assert set(native.search(cqa.queries["q000"], 5).doc_ids) <= set(cqa.corpus)
    scorer = load_system("dual-encoder@user/cqa", answers)
    assert isinstance(scorer, Reranker) and scorer.name == "dual-encoder@user/cqa"
    code, out, err = run_main("eval", "--system", "dual-encoder@user/cqa", "--dataset", "user/answers",
                             "--metrics", "map@100")
    assert code == 0, err
    # ... and to another collection: vectors + index built once and cached per (model, dataset)
    target = load_dataset(f"pairs:{FIXTURES / 'data' / 'qqp-bimpm' / 'test.tsv'}")
    retriever = load_system("dual-encoder@user/cqa", target)
    hits = retriever.search(next(iter(target.queries.values())), 5)
    assert len(hits.doc_ids) == 5 and set(hits.doc_ids) <= set(target.corpus)
    cached = list((tmp_path / "var" / "portable" / "dual-encoder").rglob("embeddings.npy"))
    assert len(cached) == 1
    stamp = cached[0].stat().st_mtime_ns
    again = load_system("dual-encoder@user/cqa", target)
    assert cached[0].stat().st_mtime_ns == stamp and again.search(target.queries[next(iter(target.queries))], 5).doc_ids == hits.doc_ids


def test_bad_inputs_give_one_line_and_change_nothing(byod, tmp_path):
    from core.data.imports import import_dataset
    from core.errors import DataFormatError

    cqa, _answers = byod
    run_main("eval", "--system", "bm25", "--dataset", "user/cqa")  # BM25 built once (a cheap artifact)
    before = var_files(tmp_path)

    def one_line_error(*argv: str, match: str) -> None:
        code, _out, err = run_main(*argv)
        lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("eval", "train", "prepare"))]
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error:") and match in lines[0], err
        assert var_files(tmp_path) == before

    one_line_error("eval", "--system", "densetrans@nope", "--dataset", "user/cqa", match="unknown training dataset 'nope'")
    one_line_error("eval", "--system", "bm25@qqp-bimpm", "--dataset", "user/cqa", match="unknown variant of bm25")
    one_line_error("eval", "--system", "densetrans", "--dataset", "user/cqa",
                   match="python -m core train --system densetrans --dataset user/cqa")
    # a model whose training dataset was deleted
    gone = tmp_path / "var" / "systems" / "user_gone" / "cnn-rerank"
    gone.mkdir(parents=True)
    (gone / "weights.pt").write_bytes(b"x")
    before = var_files(tmp_path)
    one_line_error("eval", "--system", "cnn-rerank@user/gone", "--dataset", "user/cqa", match="was deleted")
    # a dataset without labels asked to train
    negatives = tmp_path / "neg.tsv"
    negatives.write_text("0\tHow do I learn Python?\tWhat is a snake?\n0\tIs tea healthy?\tWhy is the sky blue?\n",
                         encoding="utf-8")
    import_dataset("pairs", negatives, "neg")
    before = var_files(tmp_path)
    one_line_error("train", "--system", "cnn-rerank", "--dataset", "user/neg", match="no positive pair")
    # a candidate list with no positive label is refused at import, nothing is stored
    unlabeled = tmp_path / "unlabeled.tsv"
    unlabeled.write_text("q1\twho wrote hamlet ?\td1\tthe cat sat .\t0\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="no candidate has a positive label"):
        import_dataset("candidates", unlabeled, "unlabeled")
    assert var_files(tmp_path) == before
    code, _out, err = run_main("data", "import", "--kind", "candidates", "--name", "unlabeled", str(unlabeled))
    assert code == 2 and err.count("\n") == 1 and "no candidate has a positive label" in err
    shutil.rmtree(tmp_path / "var" / "systems" / "user_gone")


def test_cli_eval_on_a_candidate_list_prints_both_conventions(tmp_path, fresh_var):
    """Questions without a correct candidate are reported both ways, with their counts; the
    headline of a candidate list is the answerable-only mean (what published answer-selection tables use)."""
    from core.data.imports import import_dataset
    from tests.conftest import run_main

    lines = (BYOD / "answers.tsv").read_text(encoding="utf-8").splitlines()
    first_qid = lines[0].split("\t")[0]
    rows = [("\t".join(line.split("\t")[:4] + ["0"]) if line.split("\t")[0] == first_qid else line) for line in lines]
    path = tmp_path / "with_unanswerable.tsv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    name = import_dataset("candidates", path, "unans")
    code, out, err = run_main("eval", "--dataset", name, "--system", "bm25", "--metrics", "map,mrr@100")
    assert code == 0, err
    assert "answerable (headline)" in out
    assert "over 15 answerable queries (headline)" in out and "over all 16 with 1 unanswerable scored 0" in out
    assert "ties: trec_eval order" in out
