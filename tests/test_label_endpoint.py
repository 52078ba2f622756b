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

    token = le.register("h-test", "ann@lab", "campaign|c|ann@lab", lambda raw: jp.commit_now(raw, commit))
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
    assert client.post(le.PATH, content=b"{", headers={le.TOKEN_HEADER: token}).status_code == 400
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
