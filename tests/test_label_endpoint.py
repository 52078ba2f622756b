"""The judging panel's commit endpoint: signed, expiring tokens bound to an annotator and a scope; ops
committed through the panel's own path once each; one line for every refusal; served by ``serve.py``."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from core.judging.database import JudgmentError, StoreBusyError
from tests.conftest import ROOT
from ui import judging_panel as jp
from ui import label_endpoint as le


def _op(key: str, **extra) -> dict:
    return {"key": key, "kind": "label", "uid": "u1", "item": 3, "group": "q", "label": 1, **extra}


@pytest.fixture
def committed():
    seen: list[str] = []

    def commit(op):
        if op.key == "bad":
            raise JudgmentError("label must be an integer from 0 to 2, got 9")
        if op.key == "busy":
            raise StoreBusyError("judgments database x is busy")
        seen.append(op.key)

    record = {"u1": jp.PanelItem("u1", 3, "q", "query", "text")}  # what the panel rendered
    token = le.register("h-test", "ann@lab", "campaign|c|ann@lab", lambda raw: jp.commit_now(raw, commit, record))
    return token, seen


def test_a_token_commits_through_the_panels_path_once_per_key(committed):
    token, seen = committed
    status, body = le.commit_request(token, {"ops": [_op("a"), _op("bad"), _op("b", kind="drop"), _op("c")]})
    assert status == 200 and body["acked"] == ["a", "c"] and set(body["failed"]) == {"bad", "b"}
    assert body["failed"]["b"] == "malformed request; nothing was changed"
    status, body = le.commit_request(token, {"ops": [_op("c"), _op("busy"), _op("d")]})
    assert status == 200 and body["acked"] == ["c"] and seen == ["a", "c", "c"]  # "d" waits behind "busy"


@pytest.mark.parametrize("mangle, reason", [
    (lambda t: t[:-2] + ("00" if not t.endswith("00") else "11"), "not valid"),
    (lambda t: "x" + t, "not valid"),
    (lambda t: "", "not valid"),
    (lambda t: le.sign("h-test", "eve@lab", "campaign|c|ann@lab", time.time() + 60), "does not know"),
    (lambda t: le.sign("h-test", "ann@lab", "campaign|other|ann@lab", time.time() + 60), "does not know"),
    (lambda t: le.sign("h-unknown", "ann@lab", "campaign|c|ann@lab", time.time() + 60), "does not know"),
    (lambda t: le.sign("h-test", "ann@lab", "campaign|c|ann@lab", time.time() - 1), "expired"),
])
def test_a_forged_expired_or_foreign_token_is_refused_with_one_line(committed, mangle, reason):
    token, seen = committed
    status, body = le.commit_request(mangle(token), {"ops": [_op("a")]})
    assert status == 401 and reason in body["error"] and "\n" not in body["error"] and seen == []


def test_a_body_without_ops_is_refused_and_nothing_changes(committed):
    token, seen = committed
    for payload in (None, [], {"ops": "x"}, {"op": []}):
        status, body = le.commit_request(token, payload)
        assert status == 400 and "nothing was changed" in body["error"]
    assert seen == []


def test_registrations_expire_and_stay_bounded(monkeypatch):
    monkeypatch.setattr(le, "_HANDLES", {})
    monkeypatch.setattr(le, "MAX_HANDLES", 3)
    t0 = 1_000_000.0
    old = le.register("h0", "a", "s", lambda raw: ([], {}), now=t0)
    for i in range(1, 4):
        le.register(f"h{i}", "a", "s", lambda raw: ([], {}), now=t0 + i)
    assert list(le._HANDLES) == ["h1", "h2", "h3"]  # the oldest made room
    with pytest.raises(le.TokenError, match="does not know"):
        le.verify(old, now=t0 + 5)
    le.register("h4", "a", "s", lambda raw: ([], {}), now=t0 + le.TTL_S + 2)  # h1 expired meanwhile
    assert "h1" not in le._HANDLES


def test_the_http_route_answers_json_and_refuses_bad_bodies(committed, monkeypatch):
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    monkeypatch.setattr(le, "_MOUNTED", False)  # routes() marks the process as serving: undone after the test
    token, seen = committed
    client = TestClient(Starlette(routes=le.routes()))
    r = client.post(le.PATH, json={"ops": [_op("h1")]}, headers={le.TOKEN_HEADER: token})
    assert r.status_code == 200 and r.json() == {"acked": ["h1"], "failed": {}} and seen == ["h1"]
    for bad in (b"{", b"[" * 100_000, b"x" * (le.MAX_BODY + 1)):
        refused = client.post(le.PATH, content=bad, headers={le.TOKEN_HEADER: token})
        assert refused.status_code in (400, 413) and "nothing was changed" in refused.json()["error"]
    assert client.post(le.PATH, json={"ops": [_op("h2")]}).status_code == 401
    assert client.get(le.PATH).status_code == 405 and seen == ["h1"]
    assert le.mounted()


def test_serve_py_is_an_st_app_that_streamlit_run_serves_with_the_route():
    """``streamlit run serve.py`` serves ``st.App`` (public) with our route; that `streamlit run` finds the app
    is Streamlit's app discovery (``streamlit.web.server.app_discovery``, not a public API): pinned here so that
    a Streamlit upgrade that changes it fails loudly instead of silently serving labels through script runs."""
    import streamlit as st
    from streamlit.web.server.app_discovery import discover_asgi_app

    found = discover_asgi_app(Path(ROOT / "serve.py"))
    assert found.is_asgi_app and found.import_string == "serve:app", (
        f"Streamlit {st.__version__} no longer discovers serve.py's st.App: the commit endpoint is not served")
    assert "App" in dir(st) and "routes" in st.App.__init__.__code__.co_varnames
    requirement = next(line for line in (ROOT / "requirements.txt").read_text().splitlines()
                       if line.startswith("streamlit=="))
    assert requirement == f"streamlit=={st.__version__}", "re-check serve.py's st.App against the new Streamlit"


def test_under_a_base_url_path_the_route_and_the_browser_url_carry_the_prefix(monkeypatch):
    from starlette.applications import Starlette
    from starlette.testclient import TestClient
    from streamlit import config

    monkeypatch.setattr(le, "_MOUNTED", False)
    before = config.get_option("server.baseUrlPath")
    config.set_option("server.baseUrlPath", "/studio/")
    try:
        assert le.url_path() == "/studio/qrs/labels"
        client = TestClient(Starlette(routes=le.routes()))
        assert client.post("/studio/qrs/labels", json={"ops": []}).status_code == 401  # reached: no token
        assert client.post(le.PATH, json={"ops": []}).status_code == 404  # not beside the app's prefix
    finally:
        config.set_option("server.baseUrlPath", before)
    assert le.url_path() == le.PATH


def test_streamlit_run_serves_the_route_under_server_base_url_path(tmp_path):
    """A real ``streamlit run serve.py --server.baseUrlPath studio``: the endpoint answers at /studio/qrs/labels
    (a request without a token gets its one line, 401), where the panel tells the browser to post."""
    import json
    import socket
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.baseUrlPath", "studio", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**__import__("os").environ, "QRS_VAR": str(tmp_path / "var")})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base}/studio/_stcore/health", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "the server did not start"
                time.sleep(0.5)
        request = urllib.request.Request(f"{base}/studio/qrs/labels", data=b'{"ops": []}', method="POST",
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 401 and "not valid" in json.loads(refused.value.read())["error"]
    finally:
        server.terminate()
        server.wait(timeout=30)
