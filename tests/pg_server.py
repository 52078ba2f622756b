"""A throw-away PostgreSQL server for the store's tests (Debian's ``postgresql`` package).

``initdb`` + ``pg_ctl`` on a temporary folder, listening on 127.0.0.1 only, on a free port, trust
authentication for the local test role. ``initdb`` refuses to run as root, so as root the server runs
as the ``postgres`` system user (``runuser``). Outside CI a missing server skips the PostgreSQL tests
with the reason; with ``CI`` set they fail instead (``.ci/run`` installs the package).
"""
from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROLE = "studio"


def server_binaries() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl`` (Debian keeps them out of PATH), or None."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True)
    for folder in candidates:
        if (Path(folder) / "initdb").is_file() and (Path(folder) / "pg_ctl").is_file():
            return Path(folder)
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL tests are mandatory in CI: {reason}")
    pytest.skip(f"no PostgreSQL server to test against: {reason} (install Debian's 'postgresql' package)")


class PostgresServer:
    """One running server; ``database()`` makes a fresh empty database and returns its URL."""

    def __init__(self) -> None:
        self.bin = server_binaries()
        if self.bin is None:
            _unavailable("initdb/pg_ctl not found")
        self.prefix: list[str] = []
        if os.geteuid() == 0:
            try:
                import pwd

                pwd.getpwnam("postgres")
            except KeyError:
                _unavailable("running as root and there is no 'postgres' system user to run initdb as")
            self.prefix = ["runuser", "-u", "postgres", "--"]
        self.root = Path(tempfile.mkdtemp(prefix="qrs-pg-"))
        if self.prefix:
            shutil.chown(self.root, "postgres")
        self.data = self.root / "data"
        self.port = _free_port()
        self._count = itertools.count()
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", ROLE, "--auth=trust", "-E", "UTF8",
                   "--no-sync", "--no-locale"])
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c fsync=off -c max_connections=60"
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.root / "log"),
                   "-w", "-t", "60", "start"])

    def _run(self, cmd: list[str]) -> None:
        proc = subprocess.run(self.prefix + cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            log = (self.root / "log").read_text() if (self.root / "log").exists() else ""
            _unavailable(f"{Path(cmd[0]).name} failed: {(proc.stderr or proc.stdout).strip()[-400:]} {log[-400:]}")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{ROLE}@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        name = f"t{os.getpid()}_{next(self._count)}"
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user={ROLE} dbname=postgres", autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        subprocess.run(self.prefix + [str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the whole test session (skipped, or failed in CI, when unavailable)."""
    server = PostgresServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> str:
    """A fresh, empty judgments database URL on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'j.sqlite'}"
    return request.getfixturevalue("postgres_server").database()
