"""Reliability table: each bad input tried through the CLI (exit code + the one line it now
prints), the load held on each judgment backend (8 processes x 500 labels, SIGKILL mid-stream) and a
held write lock (read latency, time until a write gives up).

Usage: .venv/bin/python -m bench.reliability [--out bench/out/reliability.json]
PostgreSQL rows need Debian's postgresql package (a throw-away server is started, as in the tests).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WORKER = r"""
import sys
from core.judging.judgments import JudgmentStore
url, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = JudgmentStore(url)
for i in range(n):
    store.set_label(name, "toy", f"query {i % 50}", f"d{i}", f"text {i}", i % 3, query_id=f"q{i % 50}")
    print(i, flush=True)
"""
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def cli(argv: list[str]) -> tuple[int, str]:
    from core.cli.main import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
    lines = [line for line in err.getvalue().splitlines() if line.startswith("error:")]
    return rc, (lines[0] if len(lines) == 1 else f"{len(lines)} error lines: {err.getvalue()[-300:]}")


def bad_inputs(tmp: Path) -> list[dict]:
    from core.judging.judgments import JudgmentStore

    rows = []

    def add(what: str, argv: list[str]) -> None:
        rc, line = cli(argv)
        rows.append({"input": what, "exit": rc, "message": line.replace(str(tmp), "TMP")})

    beir = tmp / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text('{"_id": "d1", "text": ["a"]}\n', encoding="utf-8")
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "q"}\n', encoding="utf-8")
    (beir / "qrels" / "test.tsv").write_text("q1\td1\t1\n", encoding="utf-8")
    add("BEIR corpus text that is a list", ["data", "import", "--kind", "beir", "--name", "b", str(beir)])
    (beir / "corpus.jsonl").write_text('{"_id": "d1", "text": "a"}\n{"_id": "d1", "text": "b"}\n', encoding="utf-8")
    add("BEIR duplicate corpus id", ["data", "import", "--kind", "beir", "--name", "b", str(beir)])
    for name, content in [("six_columns", "1\ta\tb\tc\td\te\n"), ("label_7", "7\ta\tb\n"), ("empty_text", "1\ta\t \n"),
                          ("nul", "1\ta\x00\tb\n")]:
        path = tmp / f"{name}.tsv"
        path.write_text(content, encoding="utf-8")
        add(f"pairs TSV: {name}", ["data", "import", "--kind", "pairs", "--name", name, str(path)])
    path = tmp / "bom.tsv"
    path.write_bytes("\ufeff1\ta b\ta c\n".encode())
    add("pairs TSV with a UTF-8 BOM (accepted)", ["data", "import", "--kind", "pairs", "--name", "bom", str(path)])
    path = tmp / "latin1.tsv"
    path.write_bytes("1\ta\tb\n1\tcafé\tcafe\n".encode("latin-1"))
    add("pairs TSV in Latin-1", ["data", "import", "--kind", "pairs", "--name", "latin", str(path)])
    path = tmp / "dups.tsv"
    path.write_text("q1\tq\td1\tx\t1\nq1\tq\td1\tx\t1\n", encoding="utf-8")
    add("candidates TSV duplicate row", ["data", "import", "--kind", "candidates", "--name", "d", str(path)])
    path = tmp / "huge.tsv"
    with path.open("w", encoding="utf-8") as f:
        f.write("1\tq\t" + "x" * (50 * 1024 * 1024) + "\n")
    add("pairs TSV with a 50 MB line", ["data", "import", "--kind", "pairs", "--name", "huge", str(path)])
    add("search -k -3", ["search", "-k", "-3", "python"])
    add("eval --k 0", ["eval", "--system", "bm25", "--k", "0"])
    path = tmp / "neg.tsv"
    path.write_text("0\ta b\tc d\n", encoding="utf-8")
    add("eval on an import with 0 queries", ["eval", "--dataset", f"pairs:{path}", "--system", "bm25"])
    path = tmp / "disjoint.tsv"
    path.write_text("1\talpha\tbravo\n1\tcharlie\tdelta\n", encoding="utf-8")
    add("eval where BM25 finds nothing", ["eval", "--dataset", f"pairs:{path}", "--system", "bm25"])
    text = tmp / "notes.txt"
    text.write_text("hello\n", encoding="utf-8")
    add("--db a plain-text file", ["judgments", "stats", "--db", f"sqlite:///{text}"])
    db = tmp / "trunc.sqlite"
    s = JudgmentStore(f"sqlite:///{db}")
    s.set_label("a", "d", "q", "x", "t", 1)
    s.close()
    c = sqlite3.connect(db, isolation_level=None)
    c.execute("PRAGMA journal_mode=DELETE")
    c.close()
    db.write_bytes(db.read_bytes()[:1500])
    add("--db a truncated database", ["judgments", "stats", "--db", f"sqlite:///{db}"])
    db = tmp / "two.sqlite"
    JudgmentStore(f"sqlite:///{db}").close()
    c = sqlite3.connect(db, isolation_level=None)
    c.execute("UPDATE meta SET value = 'two' WHERE key = 'schema_version'")
    c.close()
    add("--db schema_version='two'", ["judgments", "stats", "--db", f"sqlite:///{db}"])
    other = tmp / "other.db"
    c = sqlite3.connect(other)
    c.execute("CREATE TABLE notes (body TEXT)")
    c.commit()
    c.close()
    before = other.read_bytes()
    add("--db an unrelated SQLite file", ["judgments", "stats", "--db", f"sqlite:///{other}"])
    rows[-1]["message"] += f" [file byte-identical: {other.read_bytes() == before}]"
    add("--db notaurl", ["judgments", "stats", "--db", "notaurl"])
    add("--db a typo'd path", ["judgments", "stats", "--db", f"sqlite:///{tmp}/typo/j.sqlite"])
    rows[-1]["message"] += f" [folder created: {(tmp / 'typo').exists()}]"
    add("--db postgresql:// (no server)", ["judgments", "stats", "--db", "postgresql://u@127.0.0.1:1/db"])
    return rows


def load(url: str, n_proc: int = 8, n: int = 500) -> dict:
    from core.judging.judgments import JudgmentStore

    JudgmentStore(url).close()
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, url, f"p{p}", str(n)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env=ENV) for p in range(n_proc)]
    errors = [p.communicate()[1].decode() for p in procs]
    seconds = time.perf_counter() - start
    s = JudgmentStore(url)
    stored = len(s.judgments())
    s.close()
    return {"processes": n_proc, "labels_each": n, "seconds": round(seconds, 1), "stored": stored,
            "lost": n_proc * n - stored, "failed_processes": sum(p.returncode != 0 for p in procs),
            "locked_errors": sum("locked" in e for e in errors)}


def sigkill(url: str, after: int = 150) -> dict:
    from core.judging.judgments import JudgmentStore

    proc = subprocess.Popen([sys.executable, "-c", WORKER, url, "victim", "100000"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=ENV, text=True)
    committed = -1
    while committed < after:
        line = proc.stdout.readline()
        if not line:
            break
        committed = int(line)
    os.kill(proc.pid, signal.SIGKILL)
    for line in proc.stdout.read().splitlines():
        committed = max(committed, int(line))
    proc.wait()
    s = JudgmentStore(url)
    got = {int(j.doc_id[1:]) for j in s.judgments("toy", ["victim"])}
    s.close()
    return {"committed_before_kill": committed + 1, "found": len(got & set(range(committed + 1))),
            "lost": len(set(range(committed + 1)) - got)}


def held_lock(url: str) -> dict:
    from tests.test_judgments import _hold_lock
    from core.judging.judgments import JudgmentStore, StoreBusyError

    s = JudgmentStore(url)
    s.set_label("a", "toy", "q", "d", "t", 1)
    s.close()
    locker = _hold_lock(url, 60)
    try:
        start = time.perf_counter()
        reader = JudgmentStore(url, create=False)
        reader.stats()
        read_ms = 1000 * (time.perf_counter() - start)
        start = time.perf_counter()
        try:
            reader.set_label("b", "toy", "q", "d2", "t", 1)
            outcome = "written"
        except StoreBusyError:
            outcome = "StoreBusyError"
        write_s = time.perf_counter() - start
    finally:
        locker.kill()
        locker.wait()
    reader.close()
    return {"open+stats_ms_while_locked": round(read_ms, 1), "write_outcome": outcome,
            "write_gave_up_after_s": round(write_s, 2), "lock_timeout_s": reader.lock_timeout}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "reliability.json")
    parser.add_argument("--skip-inputs", action="store_true")
    args = parser.parse_args()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("QRS_VAR", str(Path(tmp) / "var"))
        if not args.skip_inputs:
            out["bad_inputs"] = bad_inputs(Path(tmp))
        backends = {"sqlite": lambda tag: f"sqlite:///{Path(tmp) / (tag + '.sqlite')}"}
        server = None
        try:
            from tests.pg_server import PostgresServer

            server = PostgresServer()
            backends["postgresql"] = lambda tag: server.database()
        except BaseException as exc:  # noqa: BLE001 - no server: SQLite rows only
            out["postgresql"] = f"not measured: {exc}"
        try:
            for name, make in backends.items():
                out[name] = {"load": load(make("load")), "sigkill": sigkill(make("kill")), "lock": held_lock(make("lock"))}
                print(name, json.dumps(out[name]), flush=True)
        finally:
            if server is not None:
                server.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, ensure_ascii=False), encoding="utf-8")
    for row in out.get("bad_inputs", []):
        print(f"| {row['input']} | {row['exit']} | {row['message']} |")


if __name__ == "__main__":
    main()
