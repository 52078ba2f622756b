"""Every former traceback is now one ``error:`` line and exit code 2 (CLI), and the pages
show the same line naming the database."""
from __future__ import annotations

import json
import sqlite3

import pytest

from core.cli.main import main
from core.errors import describe_error


def _cli(argv: list[str], capsys) -> tuple[int, list[str], str]:
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse
        rc = exc.code
    err = capsys.readouterr().err
    return rc, [line for line in err.splitlines() if line.startswith("error:")], err


def _assert_one_line(argv, capsys, *fragments: str) -> str:
    rc, lines, err = _cli(argv, capsys)
    assert rc == 2 and "Traceback" not in err, err
    assert len(lines) == 1, err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def test_search_with_negative_k(capsys):
    _assert_one_line(["search", "-k", "-3", "python"], capsys, "-k", "must be at least 1, got -3")


def test_eval_with_k_zero(capsys):
    _assert_one_line(["eval", "--system", "bm25", "--k", "0"], capsys, "--k", "must be at least 1")


def test_beir_text_that_is_not_a_string(tmp_path, fresh_var, capsys):
    root = tmp_path / "beir"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text('{"_id": "d1", "text": {"nested": 1}}\n', encoding="utf-8")
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "q"}\n', encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text("q1\td1\t1\n", encoding="utf-8")
    _assert_one_line(["data", "import", "--kind", "beir", "--name", "x", str(root)], capsys,
                     "corpus.jsonl:1", "must be a string")


def test_eval_on_an_import_with_no_queries(tmp_path, fresh_var, capsys):
    path = tmp_path / "negatives.tsv"
    path.write_text("0\thow to cook rice\thow to cook pasta\n0\ta b\tc d\n", encoding="utf-8")
    _assert_one_line(["eval", "--dataset", f"pairs:{path}", "--system", "bm25"], capsys,
                     "no queries with relevance labels")


def test_eval_when_bm25_finds_nothing(tmp_path, fresh_var, capsys):
    """Every query's only match is itself, which is dropped from its own ranking: all rankings empty
    (ranx used to fail with 'max() arg is an empty sequence')."""
    path = tmp_path / "disjoint.tsv"
    path.write_text("1\talpha\tbravo\n1\tcharlie\tdelta\n", encoding="utf-8")
    _assert_one_line(["eval", "--dataset", f"pairs:{path}", "--system", "bm25"], capsys, "every ranking is empty")


def test_a_ranx_failure_is_one_line():
    from ranx import Qrels, Run, evaluate

    with pytest.raises(Exception) as err:
        evaluate(Qrels({"q1": {"d1": 1}}), Run({"q1": {}}), "ndcg@10")
    message = describe_error(err.value)
    assert message is not None and message.startswith("ranx could not process the input") and "\n" not in message


def test_json_and_sqlite_errors_are_one_line():
    with pytest.raises(json.JSONDecodeError) as err:
        json.loads('{"a": ')
    assert describe_error(err.value).startswith("invalid JSON (line 1")
    assert describe_error(sqlite3.DatabaseError("file is not a database")) == "database error: file is not a database"
    assert describe_error(RuntimeError("a bug")) is None  # unknown errors keep their traceback


def _text_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("just some notes\n", encoding="utf-8")
    return path


def _truncated(tmp_path):
    from core.judging.judgments import JudgmentStore

    path = tmp_path / "trunc.sqlite"
    s = JudgmentStore(f"sqlite:///{path}")
    s.set_label("a", "d", "q", "doc", "text", 1)
    s.close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    path.write_bytes(path.read_bytes()[:1500])
    return path


def _version_two(tmp_path):
    from core.judging.judgments import JudgmentStore

    path = tmp_path / "two.sqlite"
    JudgmentStore(f"sqlite:///{path}").close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("UPDATE meta SET value = 'two' WHERE key = 'schema_version'")
    conn.close()
    return path


@pytest.mark.parametrize("make, fragment", [
    (_text_file, "not a SQLite database file"),
    (_truncated, "judgments database"),
    (_version_two, "not a number"),
])
def test_broken_database_files(make, fragment, tmp_path, capsys):
    path = make(tmp_path)
    line = _assert_one_line(["judgments", "stats", "--db", f"sqlite:///{path}"], capsys, fragment)
    assert str(path) in line


def test_bad_db_urls(tmp_path, capsys):
    _assert_one_line(["judgments", "stats", "--db", "notaurl"], capsys, "not a database URL", "sqlite:///")
    _assert_one_line(["judgments", "stats", "--db", "postgresql://nobody@127.0.0.1:1/none"], capsys,
                     "postgresql+psycopg://nobody@127.0.0.1:1/none", "Connection refused")
    typo = tmp_path / "no" / "such.sqlite"
    _assert_one_line(["judgments", "export-qrels", "--db", f"sqlite:///{typo}"], capsys, "does not exist")
    assert not (tmp_path / "no").exists()  # read commands never create the database or its folders


def test_cli_reads_a_postgresql_database(postgres_server, capsys):
    from core.judging.judgments import JudgmentStore

    url = postgres_server.database()
    s = JudgmentStore(url)
    s.set_label("alice", "toy", "a question", "d1", "text", 2, query_id="q1")
    s.close()
    assert main(["judgments", "stats", "--db", url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["judgments"] == 1


def test_annotate_page_names_the_broken_database(tiny_data, fresh_var, tmp_path, monkeypatch):
    """The page shows the CLI's line (naming the file), not 'Unexpected error: DatabaseError'."""
    from tests.conftest import app_test

    path = _text_file(tmp_path)
    monkeypatch.setenv("QRS_DB_URL", f"sqlite:///{path}")
    at = app_test("pages/4_Annotate.py").run()
    assert not at.exception
    messages = [e.value for e in at.error]
    assert any(str(path) in m and "not a SQLite database file" in m for m in messages), messages
    assert not any("Unexpected error" in m for m in messages)


def test_build_of_an_unknown_variant_builds_nothing(tiny_data, fresh_var, capsys):
    # 'bogus' is neither a variant nor (for build) a dataset a model could come from: one line, no training
    _assert_one_line(["build", "--systems", "densetrans@bogus"], capsys, "unknown variant of densetrans 'bogus'",
                     "paper-objective")
    assert not (fresh_var / "systems").exists() or not any((fresh_var / "systems").rglob("model.pt"))


@pytest.mark.parametrize("query", ["???", "   ", "!!", "?!."])
@pytest.mark.parametrize("system", ["minilm", "bm25", "glove-mean"])
def test_search_without_word_tokens_is_one_line_and_no_ranking(tiny_data, fresh_var, capsys, query, system):
    rc, lines, err = _cli(["search", "--system", system, query], capsys)
    assert rc == 2 and "Traceback" not in err and len(lines) == 1, err
    assert "empty" in lines[0] or "no words" in lines[0], lines[0]
    assert "rank" not in capsys.readouterr().out  # no table printed


def test_validate_query_refuses_text_without_words_and_keeps_questions():
    from core.errors import QueryError
    from core.retrieval.base import validate_query

    for text in ("???", "!!", " ... ", "?!"):
        with pytest.raises(QueryError, match="no words"):
            validate_query(text)
    assert validate_query("  What is 2+2 ?? ") == "What is 2+2 ??"
    assert validate_query("C#?") == "C#?"
