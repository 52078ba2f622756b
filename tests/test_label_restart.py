"""What a pending label needs survives a server restart: the token secret (a 0600 file, one per artifacts folder),
the panels' registrations (Log out deletes them) and the record of rendered items (an op resolves through it in
its own scope only). A "restart" here is a process's in-memory state dropped; the e2e kill test
(tests/e2e/test_restart_labels.py) kills a real server."""
from __future__ import annotations

import stat

import pytest

from core.judging import panel_state as ps
from ui import judging_panel as jp
from ui import label_endpoint as le


@pytest.fixture
def var(tmp_path, monkeypatch):
    monkeypatch.setenv("QRS_VAR", str(tmp_path))
    monkeypatch.setattr(le, "_HANDLES", {})
    monkeypatch.setattr(le, "_SECRETS", {})
    monkeypatch.setattr(le, "_RESOLVER", None)
    monkeypatch.setattr(ps, "_STATES", {})
    return tmp_path


def _restart(monkeypatch) -> None:
    """A new process: no handle, no secret read, no open state file."""
    monkeypatch.setattr(le, "_HANDLES", {})
    monkeypatch.setattr(le, "_SECRETS", {})
    monkeypatch.setattr(ps, "_STATES", {})


def test_the_secret_is_one_private_file_made_once(var):
    first = ps.secret(var)
    assert len(first) == 32 and ps.secret(var) == first
    assert stat.S_IMODE((var / ps.SECRET_FILE).stat().st_mode) == 0o600
    assert [p.name for p in var.iterdir()] == [ps.SECRET_FILE]  # no temporary file left behind
    (var / "other").mkdir()
    assert ps.secret(var / "other") != first  # one per artifacts folder


def test_a_token_and_its_items_outlive_a_restart_until_log_out(var, monkeypatch):
    stored: list[tuple[str, object, dict]] = []

    def commit_for(annotator: str, scope: str):
        return (lambda op: stored.append((op.key, op.item, dict(op.ref)))) if scope.startswith("free|") else None

    le.set_resolver(jp.resolver(commit_for))
    item = jp.PanelItem("q|d1", "d1", "q", "query", "text", ref={"query": "query", "doc": "d1", "text": "t"})
    jp.remember({}, [item], "free|ds|ann")
    jp.remember({}, [jp.PanelItem("q|d9", "d9", "q", "query", "other")], "free|ds|bob")  # another scope's item
    token = le.register("h1", "ann", "free|ds|ann", lambda raw: ([], {}))
    _restart(monkeypatch)
    ops = [{"key": "k1", "kind": "label", "uid": "q|d1", "label": 2, "ref": {"doc": "forged"}},
           {"key": "k2", "kind": "label", "uid": "q|d9", "label": 1}]
    assert le.commit_request(token, {"ops": ops}) == (200, {"acked": ["k1"], "failed": {}})
    assert stored == [("k1", "d1", {"query": "query", "doc": "d1", "text": "t"})]  # the server's record, not the op's
    assert le.revoke("ann") == 1
    _restart(monkeypatch)
    status, body = le.commit_request(token, {"ops": ops})
    assert status == 401 and "does not know the panel" in body["error"] and len(stored) == 1


def test_a_restored_token_still_expires_and_names_only_its_scope(var, monkeypatch):
    le.set_resolver(jp.resolver(lambda annotator, scope: lambda op: None))
    token = le.register("h2", "ann", "free|ds|ann", lambda raw: ([], {}), now=1000.0)
    _restart(monkeypatch)
    with pytest.raises(le.TokenError, match="expired"):
        le.verify(token)
    ps.panel_state().register("h3", "ann", "free|ds|ann", 1e12)
    forged = le.sign("h3", "ann", "campaign|c|ann", 1e12)  # a valid signature, another scope than registered
    with pytest.raises(le.TokenError, match="does not know"):
        le.verify(forged)
