"""Bad input that used to be accepted silently is refused with file and line, imports
nothing; a BOM is accepted; non-UTF-8 is reported by line; texts have a (configurable) length limit."""
from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest

from core.errors import DataFormatError
from tests.conftest import ROOT


def _beir(root, corpus: list[dict], queries: list[dict], qrels: str = "query-id\tcorpus-id\tscore\nq1\td1\t1\n"):
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(o) + "\n" for o in corpus), encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps(o) + "\n" for o in queries), encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")
    return root


DOCS = [{"_id": "d1", "text": "one"}, {"_id": "d2", "text": "two"}]
QUERIES = [{"_id": "q1", "text": "one"}]


@pytest.mark.parametrize("corpus, queries, where, fragment", [
    (DOCS + [{"_id": "d1", "text": "again"}], QUERIES, "corpus.jsonl:3", "duplicate id 'd1'"),
    (DOCS, QUERIES + [{"_id": "q1", "text": "again"}], "queries.jsonl:2", "duplicate id 'q1'"),
    ([{"_id": "d1", "text": ["a", "list"]}], QUERIES, "corpus.jsonl:1", '"text" of document \'d1\' must be a string'),
    ([{"_id": "d1", "title": 7, "text": "x"}], QUERIES, "corpus.jsonl:1", '"title" of document \'d1\' must be a string'),
    (DOCS, [{"_id": "q1", "text": "   "}], "queries.jsonl:1", "non-empty"),
    (DOCS, [{"_id": "q1"}], "queries.jsonl:1", "non-empty"),
    (DOCS, [{"_id": "q1", "text": "nul \u0000 inside"}], "queries.jsonl:1", "NUL"),
])
def test_bad_beir_folders_are_refused_with_file_and_line(corpus, queries, where, fragment, tmp_path, fresh_var):
    from core.data.imports import import_dataset, imported_datasets

    root = _beir(tmp_path / "beir", corpus, queries)
    with pytest.raises(DataFormatError) as err:
        import_dataset("beir", root, "bad")
    assert where in str(err.value) and fragment in str(err.value), str(err.value)
    assert imported_datasets() == {} and not any(fresh_var.rglob("meta.json"))


@pytest.mark.parametrize("content, line, fragment", [
    ("1\ta\tb\n1\tc\td\textra\tmore\tcols\n", 2, "got 6 column(s)"),
    ("1\ta\tb\n7\tc\td\n", 2, "label must be 0 to 1, got 7"),
    ("1\ta\t  \n", 1, "empty question text"),
    ("1\ta\tb\n0\tc\x00\td\n", 2, "NUL"),
])
def test_bad_pairs_files_are_refused_with_the_line(content, line, fragment, tmp_path, fresh_var):
    from core.data.imports import import_dataset, imported_datasets

    path = tmp_path / "pairs.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataFormatError) as err:
        import_dataset("pairs", path, "bad")
    assert err.value.line == line and fragment in str(err.value), str(err.value)
    assert imported_datasets() == {}


def test_duplicate_candidate_rows_are_refused(tmp_path, fresh_var):
    from core.data.imports import import_dataset

    path = tmp_path / "cands.tsv"
    path.write_text("q1\tquery\td1\tdoc one\t1\nq1\tquery\td2\tdoc two\t0\nq1\tquery\td1\tdoc one\t1\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"cands.tsv:3: duplicate row: query 'q1' already has candidate 'd1'"):
        import_dataset("candidates", path, "dups")


def test_a_utf8_bom_is_accepted_and_stripped(tmp_path, fresh_var):
    from core.data.datasets import load_dataset
    from core.data.imports import import_dataset

    path = tmp_path / "bom.tsv"
    path.write_bytes("\ufeff1\thow to cook rice\thow do I cook rice\n0\ta\tb\n".encode("utf-8"))
    name = import_dataset("pairs", path, "bom")
    ds = load_dataset(name)
    assert sorted(ds.corpus.values()) == ["a", "b", "how do I cook rice", "how to cook rice"]
    assert [p.label for p in ds.pairs["all"]] == [1, 0]


def test_non_utf8_is_reported_by_line(tmp_path):
    from core.data.readers import read_pairs_tsv

    path = tmp_path / "latin1.tsv"
    path.write_bytes("1\ta\tb\n0\tc\td\n1\tcafé\tcafe\n".encode("latin-1"))
    with pytest.raises(DataFormatError) as err:
        read_pairs_tsv(path)
    assert err.value.line == 3 and "latin1.tsv:3: not UTF-8" in str(err.value)


def test_text_length_limit_is_configurable(tmp_path, monkeypatch):
    from core.data.readers import read_pairs_tsv

    path = tmp_path / "long.tsv"
    path.write_text("1\t" + "word " * 30 + "\tshort\n", encoding="utf-8")
    assert len(read_pairs_tsv(path)) == 1
    monkeypatch.setenv("QRS_MAX_TEXT_CHARS", "100")
    with pytest.raises(DataFormatError, match=r"long.tsv:1: the first question has 149 characters; the limit is 100 "
                                              r"\(set QRS_MAX_TEXT_CHARS"):
        read_pairs_tsv(path)


def test_a_50_mb_single_line_is_refused_without_loading_it(tmp_path):
    """The 50 MB one-line question used to be imported (445 MB of memory): now refused after reading
    at most the line limit; measured in a fresh process by its peak resident memory."""
    path = tmp_path / "huge.tsv"
    with path.open("w", encoding="utf-8") as f:
        f.write("1\tshort question\t")
        f.write("x" * (50 * 1024 * 1024))
        f.write("\n")
    code = (
        "import resource, sys\n"
        "from core.data.readers import read_pairs_tsv\n"
        "from core.errors import DataFormatError\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "try:\n"
        "    read_pairs_tsv(sys.argv[1])\n"
        "except DataFormatError as exc:\n"
        "    print(exc)\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    message, grown_mb = out.stdout.strip().splitlines()
    assert "huge.tsv:1: the line is longer than" in message and "QRS_MAX_TEXT_CHARS" in message
    assert int(grown_mb) < 20, grown_mb  # MB; reading the whole line would take >= 50
    assert resource  # (the parent's rusage is not what is measured)
