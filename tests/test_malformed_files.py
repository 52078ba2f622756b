"""Malformed dataset and run files: a TREC run that is not UTF-8 or is malformed, unknown document ids, a broken
BEIR folder, a non-UTF-8 pairs file, a second import under the same name, a missing or unreadable dataset file; each
names the file (and the line) in one clear error and stores or imports nothing."""
from __future__ import annotations

import os

import pytest

from core.errors import DataFormatError


@pytest.fixture
def tiny_ds(tiny_data):
    from core.data.datasets import load_dataset

    return load_dataset("qqp-bimpm")


def test_trec_run_that_is_not_utf8_names_the_file(tmp_path):
    from core.evaluation import read_trec_run

    path = tmp_path / "binary.trec"
    path.write_bytes(b"q1 Q0 d1 1 2.0 x\n\xff\xfe\x00garbage\n")
    with pytest.raises(DataFormatError, match="binary.trec"):
        read_trec_run(path)


@pytest.mark.parametrize("content, line, fragment", [
    ("q1 Q0 d1 1 2.0 x\n\nq1 Q0 d2 two 1.0 x\n", 3, "rank must be an integer"),
    ("q1 Q0 d1 1 nan-ish x\n", 1, "score a number"),
    ("q1 Q0 d1 1 2.0 x extra\n", 1, "expected 6 columns"),
])
def test_malformed_run_import_names_line_and_stores_nothing(content, line, fragment, tiny_ds, monkeypatch, tmp_path):
    from core.analysis.compared_runs import import_run, imported_runs

    ds = tiny_ds
    monkeypatch.setenv("QRS_VAR", str(tmp_path / "var"))
    path = tmp_path / "bad.trec"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataFormatError) as err:
        import_run(path, ds, "bad")
    assert err.value.line == line and fragment in str(err.value) and "bad.trec" in str(err.value)
    assert imported_runs(ds.name) == {}


def test_run_with_unknown_doc_ids_is_refused_and_stores_nothing(tiny_ds, monkeypatch, tmp_path):
    from core.analysis.compared_runs import import_run, imported_runs

    ds = tiny_ds
    monkeypatch.setenv("QRS_VAR", str(tmp_path / "var"))
    path = tmp_path / "foreign.trec"
    path.write_text("q00000 Q0 nope1 1 2.0 x\nq00000 Q0 nope2 2 1.0 x\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="foreign.trec.*none of its 2 doc ids"):
        import_run(path, ds, "foreign")
    assert imported_runs(ds.name) == {}


def _beir(root, corpus: str, queries: str, qrels: str):
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text(corpus, encoding="utf-8")
    (root / "queries.jsonl").write_text(queries, encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")


GOOD_CORPUS = '{"_id": "d1", "text": "one"}\n{"_id": "d2", "text": "two"}\n'
GOOD_QUERIES = '{"_id": "q1", "text": "one"}\n'
GOOD_QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\n"


@pytest.mark.parametrize("part, content, where", [
    ("queries", '{"_id": "q1", "text": "one"}\n[1, 2]\n', "queries.jsonl:2"),
    ("qrels", "query-id\tcorpus-id\tscore\nq1\td1\tone\n", "test.tsv:2"),
    ("qrels", "query-id\tcorpus-id\tscore\nq1\td1\n", "test.tsv:2"),
    ("qrels", "query-id\tcorpus-id\tscore\nq9\td1\t1\n", "test.tsv:2"),
    ("corpus", '{"_id": "d1", "text": "one"}\n\n{"_id": "d2", "title": "", "text": ""}\n', "corpus.jsonl:3"),
    ("corpus", '{"_id": "d1", "text": "one"}\n{"_id": "d2", "title": "", "text": ""}\n', "corpus.jsonl:2"),
])
def test_malformed_beir_folder_names_file_and_line_and_imports_nothing(part, content, where, tmp_path, fresh_var):
    from core.data.imports import import_dataset, imported_datasets

    root = tmp_path / "beir"
    files = {"corpus": GOOD_CORPUS, "queries": GOOD_QUERIES, "qrels": GOOD_QRELS, part: content}
    _beir(root, files["corpus"], files["queries"], files["qrels"])
    with pytest.raises(DataFormatError) as err:
        import_dataset("beir", root, "broken")
    assert where in str(err.value), str(err.value)
    assert imported_datasets() == {}
    assert not any((fresh_var).rglob("meta.json"))


def test_non_utf8_pairs_file_is_refused_and_imports_nothing(tmp_path, fresh_var):
    from core.data.imports import import_dataset, imported_datasets

    path = tmp_path / "latin1.tsv"
    path.write_bytes("1\tcafé ?\tcafé !\n".encode("latin-1"))
    with pytest.raises(DataFormatError, match="latin1.tsv.*not UTF-8"):
        import_dataset("pairs", path, "latin")
    assert imported_datasets() == {}


def test_second_import_with_same_name_keeps_the_first(tmp_path, fresh_var):
    from core.data.datasets import load_dataset
    from core.errors import StudioError
    from core.data.imports import import_dataset

    good = tmp_path / "good.tsv"
    good.write_text("1\ta b\ta c\n", encoding="utf-8")
    import_dataset("pairs", good, "mine")
    other = tmp_path / "other.tsv"
    other.write_text("1\tx y\tx z\n0\tp\tq\n", encoding="utf-8")
    with pytest.raises(StudioError, match="already exists"):
        import_dataset("pairs", other, "mine")
    assert len(load_dataset("user/mine").corpus) == 2


def test_missing_dataset_file_is_a_clear_error(tmp_path):
    from core.data.readers import read_pairs_tsv

    missing = tmp_path / "nope.tsv"
    with pytest.raises(DataFormatError, match="nope.tsv: file not found"):
        read_pairs_tsv(missing)


def test_unreadable_dataset_file_is_a_clear_error(tmp_path, monkeypatch):
    """A file that exists but cannot be opened (permission denied): named, with the reason."""
    import pathlib

    from core.data.readers import read_pairs_tsv

    path = tmp_path / "locked.tsv"
    path.write_text("1\ta\tb\n", encoding="utf-8")
    if os.name == "posix" and os.geteuid() != 0:
        path.chmod(0)
    else:  # root reads any file: make opening this one fail the way a permission error does
        real_open = pathlib.Path.open

        def denied(self, *args, **kwargs):
            if self == path:
                raise PermissionError(13, "Permission denied", str(self))
            return real_open(self, *args, **kwargs)

        monkeypatch.setattr(pathlib.Path, "open", denied)
    try:
        with pytest.raises(DataFormatError, match=r"locked.tsv: cannot be read \(Permission denied\)"):
            read_pairs_tsv(path)
    finally:
        path.chmod(0o644)
