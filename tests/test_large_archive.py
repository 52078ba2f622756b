"""A benchmark-sized archive (bench.large_archive) and the import that takes it: the archive is a BEIR folder written
as a stream, deterministic in its seed, whose qrels are whole copies of QQP's paraphrase clusters and which says it
measures cost, not quality; the import checks a BEIR folder a line at a time, takes BEIR's Quora layout as it comes,
and refuses a file past ``QRS_IMPORT_MAX_ROWS`` in one line, writing nothing."""
from __future__ import annotations

import json
from collections import defaultdict

import pytest

from tests.conftest import run_main


def _read(folder):
    corpus = {o["_id"]: o["text"] for o in map(json.loads, (folder / "corpus.jsonl").read_text().splitlines())}
    queries = [json.loads(line)["_id"] for line in (folder / "queries.jsonl").read_text().splitlines()]
    rows = [line.split("\t") for line in (folder / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    return corpus, queries, rows


def test_the_archive_is_n_documents_with_whole_clusters_and_says_cost_not_quality(tiny_data, tmp_path):
    from bench.large_archive import base_clusters, write_archive
    from core.data.datasets import load_dataset

    base = base_clusters()
    bundled = sum(len(c) for c in base)
    n = 2 * bundled + 7  # round 0, a whole perturbed round, and the start of a third
    summary = write_archive(n, tmp_path / "a", seed=3)
    corpus, queries, rows = _read(tmp_path / "a")
    assert summary.documents == len(corpus) == n and summary.rounds == 3
    qqp = list(load_dataset("qqp-bimpm").corpus.values())
    assert sorted(list(corpus.values())[:len(qqp)]) == sorted(qqp)  # round 0 opens with QQP's collection
    assert list(corpus.values())[bundled:2 * bundled] != list(corpus.values())[:bundled]  # perturbed, shuffled
    relevant = defaultdict(set)
    for qid, did, score in rows:
        assert qid in corpus and did in corpus and qid != did and score == "1"
        assert qid.split("m")[0] == did.split("m")[0]  # the same copy of the same cluster
        relevant[qid].add(did)
    assert set(queries) == set(relevant) and summary.queries == len(queries) and summary.qrels == len(rows)
    assert all(relevant[d] | {d} == relevant[q] | {q} for q in relevant for d in relevant[q])  # clusters
    meta = json.loads((tmp_path / "a" / "metadata.json").read_text())
    assert meta["synthetic"] is True and meta["measures"] == "cost, not quality"
    assert "not quality" in (tmp_path / "a" / "README.md").read_text()
    write_archive(n, tmp_path / "b", seed=3)
    assert (tmp_path / "b" / "corpus.jsonl").read_bytes() == (tmp_path / "a" / "corpus.jsonl").read_bytes()
    write_archive(n, tmp_path / "c", seed=4)
    assert (tmp_path / "c" / "corpus.jsonl").read_bytes() != (tmp_path / "a" / "corpus.jsonl").read_bytes()


def test_bad_arguments_are_one_line_and_write_nothing(tiny_data, tmp_path, capsys):
    from bench.large_archive import main
    from core.cli.main import guarded

    (tmp_path / "taken").mkdir()
    assert guarded(main, ["--n", "10", "--out", str(tmp_path / "taken")]) == 2
    assert guarded(main, ["--n", "0", "--out", str(tmp_path / "new")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "already exists" in err[0] and "at least 1" in err[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_the_archive_imports_and_loads_as_a_beir_dataset(tiny_data, fresh_var, tmp_path):
    from bench.large_archive import write_archive
    from core.data.datasets import load_dataset

    summary = write_archive(300, tmp_path / "arch", seed=0)
    code, out, err = run_main("data", "import", "--kind", "beir", "--name", "arch", str(tmp_path / "arch"))
    assert code == 0, err
    ds = load_dataset("user/arch")
    assert len(ds.corpus) == 300 and len(ds.queries) == summary.queries and ds.ignore_identical_ids


def _quora_like(folder):
    """BEIR's Quora layout as downloaded: empty titles, metadata objects, a header row in the qrels."""
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": str(i), "title": "", "text": f"How do I learn skill {i} quickly?", "metadata": {}}
            for i in range(1, 21)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": str(i), "text": f"Learning skill {i} fast?",
                                                               "metadata": {}}) + "\n" for i in (101, 102)))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n101\t3\t1\n101\t4\t1\n102\t7\t1\n")
    (folder / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\n102\t8\t1\n")


def test_a_quora_layout_folder_imports_as_it_comes(fresh_var, tmp_path):
    from core.data.datasets import load_dataset
    from core.data.imports import check_beir_folder

    _quora_like(tmp_path / "quora")
    assert check_beir_folder(tmp_path / "quora") == {"documents": 20, "queries": 2, "qrels": 3}
    code, out, err = run_main("data", "import", "--kind", "beir", "--name", "quora", str(tmp_path / "quora"))
    assert code == 0, err
    ds = load_dataset("user/quora")
    assert len(ds.corpus) == 20 and ds.qrels == {"101": {"3": 1, "4": 1}, "102": {"7": 1}}


@pytest.mark.parametrize("kind", ["beir", "pairs"])
def test_a_file_past_the_row_limit_is_one_line_and_nothing_is_written(fresh_var, tmp_path, monkeypatch, kind):
    from core.data.datasets import imported_root

    if kind == "beir":
        source = tmp_path / "quora"
        _quora_like(source)
    else:
        source = tmp_path / "pairs.tsv"
        source.write_text("".join(f"1\tquestion {i} here\tquestion {i} there\n" for i in range(30)))
    monkeypatch.setenv("QRS_IMPORT_MAX_ROWS", "10")
    code, out, err = run_main("data", "import", "--kind", kind, "--name", "big", str(source))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "more than 10 rows" in err and "QRS_IMPORT_MAX_ROWS" in err
    assert not (imported_root() / "big").exists()
    monkeypatch.setenv("QRS_IMPORT_MAX_ROWS", "ten")
    code, out, err = run_main("data", "import", "--kind", kind, "--name", "big", str(source))
    assert code == 2 and "QRS_IMPORT_MAX_ROWS" in err and len(err.strip().splitlines()) == 1
    monkeypatch.setenv("QRS_IMPORT_MAX_ROWS", "40")
    code, out, err = run_main("data", "import", "--kind", kind, "--name", "big", str(source))
    assert code == 0, err


def test_the_streamed_check_refuses_what_the_loader_refuses(fresh_var, tmp_path):
    from core.data.imports import check_beir_folder
    from core.errors import DataFormatError

    _quora_like(tmp_path / "q")
    with (tmp_path / "q" / "corpus.jsonl").open("a") as f:
        f.write(json.dumps({"_id": "5", "text": "a repeated id"}) + "\n")
    with pytest.raises(DataFormatError, match="duplicate id '5'"):
        check_beir_folder(tmp_path / "q")
    _quora_like(tmp_path / "r")
    (tmp_path / "r" / "qrels" / "test.tsv").write_text("101\t999\t1\n")
    with pytest.raises(DataFormatError, match="corpus id '999' is not in corpus.jsonl"):
        check_beir_folder(tmp_path / "r")
