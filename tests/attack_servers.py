"""The servers the attack tests (``tests/test_attacks.py``) run against, and how they attack them: ``studio`` is
``streamlit run serve.py`` as ``make run`` serves it; ``endpoint`` the label endpoint under uvicorn in the test's
process (a panel rendered there gives a token it knows); ``flood`` streams a body from a generator over a raw
socket; ``rss`` / ``reset_peak`` read a process's memory from ``/proc``."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.conftest import ROOT
from tests.e2e.conftest import free_port
from ui import label_endpoint as le

__all__ = ["GB", "MB", "endpoint", "flood", "one_json_line", "post", "reset_peak", "rss", "studio", "wait_healthy"]

GB = 1 << 30
MB = 1 << 20


def rss(pid: int, field: str) -> int:
    """``VmRSS`` / ``VmHWM`` of a process, bytes."""
    status = open(f"/proc/{pid}/status", encoding="ascii").read()
    return int(re.search(rf"^{field}:\s+(\d+) kB", status, re.M).group(1)) * 1024


def reset_peak(pid: int) -> None:
    with open(f"/proc/{pid}/clear_refs", "w", encoding="ascii") as f:
        f.write("5")  # VmHWM := VmRSS (Linux: "reset the peak resident set size")


def wait_healthy(base: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2):  # noqa: S310 (loopback)
                return
        except OSError:
            assert time.monotonic() < deadline and (proc is None or proc.poll() is None), "the server did not start"
            time.sleep(0.5)


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    """``streamlit run serve.py`` as ``make run`` serves it: (port, process, its stderr file)."""
    tmp = tmp_path_factory.mktemp("studio")
    port, log = free_port(), tmp / "stderr.txt"
    env = {**os.environ, "QRS_VAR": str(tmp / "var"), "QRS_AUTOBUILD": "0"}
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "serve.py", "--server.headless", "true",
                                 "--server.port", str(port), "--server.fileWatcherType", "none",
                                 "--browser.gatherUsageStats", "false"], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        yield port, proc, log
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def endpoint():
    """The commit endpoint under uvicorn in this process (so a panel rendered here gives a token it knows)."""
    import uvicorn
    from starlette.applications import Starlette

    mounted = le._MOUNTED
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(Starlette(routes=le.routes()), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        le._MOUNTED = mounted


def _body(total: int, chunk: bytes) -> Iterator[bytes]:
    """``total`` bytes in pieces of ``chunk``: the body is never whole in memory."""
    for _ in range(total // len(chunk)):
        yield chunk


def flood(port: int, headers: dict[str, str], total: int, chunked: bool) -> tuple[bytes, int]:
    """POST ``total`` bytes to the endpoint from a generator over a raw socket, reading the answer meanwhile;
    returns (the answer as received, the bytes the server took before it closed or answered)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    length = {"Transfer-Encoding": "chunked"} if chunked else {"Content-Length": str(total)}
    head = "".join(f"{k}: {v}\r\n" for k, v in {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json",
                                                 **length, **headers}.items())
    answer = bytearray()
    done = threading.Event()

    def read() -> None:
        try:
            while data := sock.recv(65536):
                answer.extend(data)
                head_end = answer.find(b"\r\n\r\n")
                size = re.search(rb"content-length: (\d+)", answer[:head_end].lower()) if head_end >= 0 else None
                if size and len(answer) >= head_end + 4 + int(size.group(1)):
                    break
        except OSError:
            pass
        done.set()

    sock.sendall(f"POST {le.PATH} HTTP/1.1\r\n{head}\r\n".encode())
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    sent = 0
    try:
        for piece in _body(total, b" " * MB):
            if done.is_set():
                break
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            sent += len(piece)
    except OSError:
        pass  # the server closed the connection: the rest was never read
    reader.join(timeout=60)
    sock.close()
    return bytes(answer), sent


def one_json_line(answer: bytes, status: int) -> dict:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status}".encode()), head[:200]
    assert body.count(b"\n") == 0 and b"Traceback" not in body, body[:300]
    return json.loads(body)


def post(port: int, body: bytes, token: str | None = None, host: str | None = None) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json", **({le.TOKEN_HEADER: token} if token else {}),
               **({"Host": host} if host else {})}
    request = urllib.request.Request(f"http://127.0.0.1:{port}{le.PATH}", data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as r:  # noqa: S310 (loopback)
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
