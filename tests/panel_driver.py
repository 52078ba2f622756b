"""Drive the judging panel under AppTest, which runs no JavaScript: read the data the page gives the panel
and send the panel's triggers (``ops``, ``nav``) the way the browser does, as the component's trigger widget."""
from __future__ import annotations

import json
import uuid
from typing import Any

from streamlit.components.v2.bidi_component.main import _make_trigger_id
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.testing.v1 import AppTest


def panel(at: AppTest, key: str):
    """The panel element with user key ``key`` (AppTest shows it as an unknown element)."""
    for node in at._tree:
        if getattr(node, "type", None) == "bidi_component" and node.key == key:
            return node
    raise AssertionError(f"no judging panel with key {key!r} on the page")


def panel_data(at: AppTest, key: str) -> dict:
    """The JSON the page handed the panel on the last run."""
    return json.loads(panel(at, key).proto.json)


def send(at: AppTest, key: str, event: str, value: Any) -> AppTest:
    """Rerun as if the panel had called ``setTriggerValue(event, value)``."""
    states = at._tree.get_widget_states()
    ws = WidgetState(id=_make_trigger_id(panel(at, key).proto.id, "events"))
    ws.json_trigger_value = json.dumps([{"event": event, "value": value}])
    states.widgets.append(ws)
    return at._run(states)


def label_op(item: dict, label: int, key: str | None = None, rationale: str | None = None) -> dict:
    """The op the panel sends for a label on ``item`` (one of ``panel_data(...)["items"]``)."""
    return {"key": key or str(uuid.uuid4()), "kind": "label", "uid": item["uid"], "item": item["id"],
            "group": item["group"], "label": label, "rationale": rationale}


def undo_op(item: dict, key: str | None = None) -> dict:
    return {"key": key or str(uuid.uuid4()), "kind": "undo", "uid": item["uid"], "item": item["id"],
            "group": item["group"]}


def annotate_env(monkeypatch, tmp_path, repo) -> None:
    """What an Annotate page test runs in: its own artifacts folder and judgment store, no autobuild, at the
    repository's root (the pages' relative paths)."""
    monkeypatch.setenv("QRS_VAR", str(tmp_path / "var"))
    monkeypatch.setenv("QRS_DB_URL", f"sqlite:///{tmp_path / 'var' / 'j.sqlite'}")
    monkeypatch.setenv("QRS_AUTOBUILD", "0")
    monkeypatch.chdir(repo)
