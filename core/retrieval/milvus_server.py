"""A local ``milvus-lite server`` process: start it on 127.0.0.1, wait until it answers, stop it.

Used by the Milvus tests (``tests/milvus_server.py``) and ``bench/milvus_scale.py``. The server always
binds 127.0.0.1 (milvus-lite's own default is 0.0.0.0, and it has no authentication). A real Milvus
standalone server or cluster needs none of this: point ``QRS_MILVUS_URI`` at it.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import StudioError


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def milvus_lite_command() -> list[str] | None:
    """The ``milvus-lite`` console script of this interpreter's environment (or on PATH), else None."""
    beside = Path(sys.executable).parent / "milvus-lite"
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("milvus-lite")
    return [found] if found else None


@dataclass
class LocalMilvusServer:
    """One ``milvus-lite server --data-dir DIR --host 127.0.0.1 --port PORT`` child process.

    ``start()`` returns once a client call succeeds (or raises ``StudioError`` with the server's last
    output); ``stop()`` terminates it and removes a data folder it created itself.
    """

    data_dir: Path | None = None
    port: int = 0
    ready_timeout: float = 60.0
    max_workers: int = 4
    process: subprocess.Popen | None = field(default=None, init=False, repr=False)
    _own_dir: bool = field(default=False, init=False, repr=False)

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> str:
        """Start the server and wait until it answers; returns its URI."""
        command = milvus_lite_command()
        if command is None:
            raise StudioError("milvus-lite is not installed (pip install milvus-lite): no 'milvus-lite' command")
        self._root = Path(tempfile.mkdtemp(prefix="qrs-milvus-"))
        if self.data_dir is None:
            self.data_dir = self._root / "data"
            self._own_dir = True
        self.port = self.port or free_port()
        self._log = open(self._root / "server.log", "w+b")  # noqa: SIM115
        self.process = subprocess.Popen(
            [*command, "server", "--data-dir", str(self.data_dir), "--host", "127.0.0.1", "--port", str(self.port),
             "--max-workers", str(self.max_workers)],
            stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise StudioError(f"milvus-lite server exited with code {self.process.returncode}: {self._tail()}")
            if self._answers():
                return self.uri
            time.sleep(0.2)
        self.stop()
        raise StudioError(f"milvus-lite server did not answer on {self.uri} within {self.ready_timeout:.0f}s")

    def _answers(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
        except OSError:
            return False
        from core.retrieval.milvus_client import MilvusConfig, ping

        try:
            ping(MilvusConfig(self.uri, timeout=2.0))
        except StudioError:
            return False
        return True

    def _tail(self) -> str:
        try:
            self._log.seek(0)
            return " ".join(self._log.read().decode("utf-8", "replace").split())[-400:]
        except (OSError, ValueError):
            return ""

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 10 s) and remove a data folder it created."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None
        if getattr(self, "_log", None) is not None:
            self._log.close()
            self._log = None
        if self._own_dir and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        if getattr(self, "_root", None) is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def __enter__(self) -> LocalMilvusServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
