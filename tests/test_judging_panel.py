"""The judging panel's code is the repository's own (no URL, nothing fetched at run time but the app's own
commit endpoint the server names), its keyboard map is complete and listed in its help overlay, and its ops are
parsed strictly and applied once each."""
from __future__ import annotations

import re

import pytest

from core.judging.database import JudgmentError, StoreBusyError
from ui import judging_panel as jp

URL = re.compile(r"""(https?:)?//[\w.-]+\.[a-z]{2,}|\bimport\s*\(|\bfetch\s*\((?!ep\.url,)|XMLHttpRequest|WebSocket\(|src\s*=|href\s*=""",
                 re.IGNORECASE)


def test_the_component_is_the_repositorys_files_and_fetches_nothing():
    sources = jp.component_sources()
    assert set(sources) == {"html", "css", "js"}
    for kind, name in jp.SOURCES.items():
        path = jp.ASSETS / name
        assert path.is_file() and sources[kind] == path.read_text(encoding="utf-8")
        assert not URL.search(sources[kind]), f"{name} names a URL or loads code: {URL.search(sources[kind])}"
    assert "@import" not in sources["css"] and "url(" not in sources["css"]
    assert "innerHTML" not in sources["js"]  # texts go in with textContent only
    assert sources["js"].count("fetch(") == 1  # one request: to the endpoint the server put into the data


def test_the_keyboard_map_is_handled_listed_and_on_labelled_controls():
    js, html = jp.component_sources()["js"], jp.component_sources()["html"]
    keymap = js[js.index("const KEYMAP"):js.index("];", js.index("const KEYMAP"))]
    for key in ("0 / 1 / 2", '"U"', '"P"', '"N"', '"J / K"', '"S"', '"R"', '"L"', '"?"'):
        assert key in keymap, f"{key} is missing from the help overlay"
    handler = js[js.index("  key(e) {"):]
    for k in ("0", "1", "2", "u", "p", "n", "j", "k", "s", "r", "l", "?"):
        assert f'k === "{k}"' in handler, f"the key {k} is not handled"
    for shortcut in ('"S"', '"P"', '"N"', '"U"', '"R"', '"L"', '"?"'):
        assert shortcut in js[js.index("buildStatic()"):js.index("focus() {")]  # each action is a button too
    assert 'role="dialog"' in html and 'role="toolbar"' in html and 'role="listbox"' in html
    assert 'role="status"' in html and "aria-label" in html
    assert "if (textLike(e.target)) { return; }" in handler  # typing in a box never labels


def test_the_panel_resends_on_reconnect_and_says_what_waits_since_when():
    """Unsaved labels are resent on a timer, when the browser is back online and when the tab is shown again;
    the status line names how many wait and since when (the oldest); ops carry no ref for the server to trust."""
    js = jp.component_sources()["js"]
    ctor = js[js.index("  constructor(root) {"):js.index("  buildStatic() {")]
    assert "setInterval(() => this.resend(false), RESEND_MS)" in ctor
    assert 'addEventListener("online", this.onOnline)' in ctor and "this.resend(true)" in ctor
    assert 'addEventListener("visibilitychange", this.onVisible)' in ctor
    assert 'removeEventListener("visibilitychange", this.onVisible)' in ctor  # nothing left behind
    render = js[js.index("  render() {"):]
    assert "waiting since" in render and "this.outbox.map((op) => op.t" in render
    assert "ref:" not in js and "it.ref" not in js


def test_an_op_is_about_the_item_the_server_rendered():
    record = jp.remember({}, [jp.PanelItem("u1", 3, "q", "query", "text", ref={"doc": "d3"})])
    ops, _ = jp.parse_ops({"ops": [_op("a", item=99, group="forged", ref={"doc": "d9"}), {**_op("b"), "uid": "u9"}]})
    (only,) = jp.as_rendered(ops, record)
    assert (only.key, only.item, only.group, only.ref) == ("a", 3, "q", {"doc": "d3"})
    for i in range(jp.RECORD + 5):
        jp.remember(record, [jp.PanelItem(f"x{i}", i, "g", "q", "t")])
    assert len(record) == jp.RECORD and "u1" not in record  # bounded: the oldest forgotten first


def _op(key: str, kind: str = "label", **extra) -> dict:
    return {"key": key, "kind": kind, "uid": "u1", "item": 3, "group": "q", "label": 1, **extra}


def test_parse_ops_keeps_well_formed_ops_and_names_the_malformed():
    ops, bad = jp.parse_ops({"ops": [_op("a"), _op("b", kind="drop"), _op("c", label=True), "junk", {"kind": "label"},
                                     _op("d", kind="cant", reason="unclear", label=None), _op("e", rationale=7)]})
    assert [o.key for o in ops] == ["a", "d", "e"] and set(bad) == {"b", "c"}
    assert ops[1].reason == "unclear" and ops[1].label is None and ops[2].rationale is None
    assert jp.parse_ops(None) == ([], {}) and jp.parse_ops({"ops": "x"}) == ([], {})


def test_apply_ops_commits_each_key_once_and_stops_at_a_busy_database():
    seen: list[str] = []

    def commit(op):
        if op.key == "busy":
            raise StoreBusyError("judgments database x is busy")
        if op.key == "bad":
            raise JudgmentError("label must be an integer from 0 to 2, got 9")
        seen.append(op.key)

    acked: list[str] = []
    failed: dict[str, str] = {}
    ops, _ = jp.parse_ops({"ops": [_op("a"), _op("bad"), _op("b"), _op("busy"), _op("c")]})
    assert jp.apply_ops(ops, commit, acked, failed) == 2
    assert seen == ["a", "b"] and acked == ["a", "b"] and list(failed) == ["bad"]  # "c" waits behind "busy"
    assert jp.apply_ops(ops, commit, acked, failed) == 0 and seen == ["a", "b"]  # resent: nothing twice
    ops2, _ = jp.parse_ops({"ops": [_op("a"), _op("c")]})
    assert jp.apply_ops(ops2, commit, acked, failed) == 1 and seen == ["a", "b", "c"]


@pytest.mark.parametrize("count", [jp.KEEP_ACKED + 5])
def test_the_acknowledged_keys_kept_are_bounded(count):
    acked: list[str] = []
    ops, _ = jp.parse_ops({"ops": [_op(str(i)) for i in range(jp.MAX_OPS)]})
    for _ in range(count // jp.MAX_OPS + 1):
        ops = [jp.Op(o.key + "x", o.kind, o.uid, o.item, o.group, o.label) for o in ops]
        jp.apply_ops(ops, lambda op: None, acked, {})
    assert len(acked) == jp.KEEP_ACKED
