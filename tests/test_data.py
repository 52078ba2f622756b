"""Dataset loaders: published counts, cluster closure, split disjointness, malformed input."""
from __future__ import annotations

import json

import pytest

from core.data.clusters import paraphrase_clusters
from core.data.datasets import Pair, load_dataset
from core.data.loaders import load_qqp_bimpm
from core.data.readers import read_pairs_tsv
from core.errors import DataFormatError, UnknownNameError
from core.data.imports import import_dataset, imported_datasets
from core.data.text import display_form


@pytest.fixture(scope="module")
def qqp():
    return load_qqp_bimpm()


def test_qqp_retrieval_protocol_counts(qqp):
    assert len(qqp.corpus) == 36_737  # unique questions of dev + test
    assert sum(p.label for p in qqp.pairs["all"]) == 10_000
    assert len(qqp.pairs["all"]) == 20_000
    positives = {q for p in qqp.pairs["all"] if p.label for q in (p.id1, p.id2)}
    assert set(qqp.queries) == positives
    assert qqp.ignore_identical_ids
    for qid in list(qqp.queries)[:500]:
        assert qid not in qqp.qrels[qid]  # a query is never relevant to itself


def test_cluster_is_transitive_closure():
    pairs = [Pair("a", "b", 1), Pair("b", "c", 1), Pair("c", "d", 0), Pair("e", "f", 1)]
    clusters = paraphrase_clusters(pairs)
    assert clusters["a"] == clusters["b"] == clusters["c"]
    assert clusters["d"] != clusters["a"] and clusters["e"] == clusters["f"]


def test_qrels_cover_whole_cluster(tiny_data):
    ds = load_dataset("qqp-bimpm")
    ids = {ds.corpus[q]: q for q in ds.corpus}
    a, b, c = (ids[t] for t in ("How do I learn Python fast ?", "What is the quickest way to learn Python ?",
                                "How can I learn Python quickly ?"))
    assert ds.qrels[a] == {b: 1, c: 1}  # a-b and b-c positive => a-c relevant
    french = ids["How do I learn French fast ?"]
    assert french not in ds.queries  # only in a negative pair


def test_split_is_cluster_disjoint_and_deterministic(qqp):
    seen: dict[str, str] = {}
    for split in ("train", "dev", "test"):
        for p in qqp.pairs[split]:
            for q in (p.id1, p.id2):
                assert seen.setdefault(q, split) == split, f"{q} in {seen[q]} and {split}"
    assert sum(len(qqp.pairs[s]) for s in ("train", "dev", "test")) == 20_000  # no pair dropped
    sizes = {s: len(qqp.pairs[s]) for s in ("train", "dev", "test")}
    assert sizes == {s: len(load_qqp_bimpm().pairs[s]) for s in sizes}
    assert 0.7 < sizes["train"] / 20_000 < 0.9
    test_queries = set(qqp.split_queries("test"))
    train_questions = {q for p in qqp.pairs["train"] for q in (p.id1, p.id2)}
    assert not test_queries & train_questions
    for q in test_queries:  # relevant items of a held-out query are held out too
        assert not set(qqp.qrels[q]) & train_questions


def test_trecqa_counts():
    ds = load_dataset("trecqa")
    def pairs(split):
        return sum(len(ds.candidates[q]) for q in ds.query_splits[split])
    assert (len(ds.query_splits["train"]), pairs("train")) == (93, 4_718)
    assert (len(ds.query_splits["dev"]), pairs("dev")) == (81, 1_148)
    assert (len(ds.query_splits["test"]), pairs("test")) == (95, 1_517)
    assert (len(ds.query_splits["clean-test"]), pairs("clean-test")) == (68, 1_442)
    positives = sum(v for q in ds.query_splits["test"] for v in ds.qrels[q].values())
    assert positives == 284
    assert (len(ds.query_splits["train-all"]), pairs("train-all")) == (1_229, 53_417)
    assert sum(v for q in ds.query_splits["train-all"] for v in ds.qrels[q].values()) == 6_403


def test_display_form_undoes_corenlp_tokens():
    assert display_form("How can I stop my depression ?") == "How can I stop my depression?"
    assert display_form("What 's the best way ( if any ) to learn , quickly ?") == \
        "What's the best way (if any) to learn, quickly?"


@pytest.mark.parametrize("content, line, fragment", [
    ("1\thello\tworld\n0\tonly two\n", 2, "got 2 column"),
    ("x\thello\tworld\n", 1, "label must be an integer"),
    ("1\thello\t \n", 1, "empty question"),
])
def test_pairs_tsv_errors_name_file_and_line(tmp_path, content, line, fragment):
    path = tmp_path / "pairs.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataFormatError) as err:
        read_pairs_tsv(path)
    assert err.value.line == line and fragment in str(err.value) and "pairs.tsv" in str(err.value)


def test_beir_folder_and_errors(tmp_path):
    root = tmp_path / "mini"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(
        "\n".join(json.dumps({"_id": f"d{i}", "title": "", "text": f"doc {i}"}) for i in range(3)), encoding="utf-8")
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "doc"}), encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    ds = load_dataset(f"beir:{root}")
    assert ds.qrels == {"q1": {"d1": 1}} and len(ds.corpus) == 3
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tnope\t1\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"test.tsv:2: corpus id 'nope'"):
        load_dataset(f"beir:{root}")
    (root / "corpus.jsonl").write_text('{"_id": "d0", "text": "ok"}\n{broken\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"corpus.jsonl:2: invalid JSON"):
        load_dataset(f"beir:{root}")


def test_candidates_tsv(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_text("q1\twho\td1\tan answer\t1\nq1\twho\td2\tanother\t0\n", encoding="utf-8")
    ds = load_dataset(f"candidates:{path}")
    assert ds.candidates == {"q1": ["d1", "d2"]} and ds.qrels["q1"] == {"d1": 1, "d2": 0}
    path.write_text("q1\twho\td1\tan answer\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="c.tsv:1: expected 5"):
        load_dataset(f"candidates:{path}")


def test_import_is_all_or_nothing(tmp_path, fresh_var):
    bad = tmp_path / "bad.tsv"
    bad.write_text("1\ta\tb\nnot-a-label\tc\td\n", encoding="utf-8")
    with pytest.raises(DataFormatError):
        import_dataset("pairs", bad, "mine")
    assert imported_datasets() == {}
    good = tmp_path / "good.tsv"
    good.write_text("1\ta b\ta c\n0\ta b\tx y\n", encoding="utf-8")
    assert import_dataset("pairs", good, "mine") == "user/mine"
    assert "user/mine" in imported_datasets()
    assert len(load_dataset("user/mine").corpus) == 3


def test_unknown_dataset_lists_known():
    with pytest.raises(UnknownNameError, match="qqp-bimpm"):
        load_dataset("nope")


def test_a_dataset_file_reads_the_text_limit_once_not_once_per_text(tiny_data, monkeypatch):
    """The settings are read from the whole environment; once per text, loading QQP's 36,737 questions took
    seconds of every page's first visit. A reader reads the limit once per file."""
    from core import settings as settings_module
    from core.data.datasets import load_dataset

    calls = []
    real = settings_module.settings
    monkeypatch.setattr(settings_module, "settings", lambda *a, **k: calls.append(1) or real(*a, **k))
    ds = load_dataset("qqp-bimpm")
    assert len(ds.corpus) > 100 and len(calls) <= 10, len(calls)
