"""The judging panel: a Streamlit components v2 element that answers each key in the browser.

The HTML, CSS and JavaScript are files of this repository (``ui/components/judging/``), read once and given
inline to ``st.components.v2.component``: no build step, nothing fetched at run time. The page hands the
panel the items it may show (the current query's candidates and the next ones, or a campaign's queue);
0/1/2 paint the next item at once and send the label as the trigger ``ops`` with an idempotency key made in
the browser. ``apply_ops`` commits each op through the store exactly once (the key goes into
``label_requests`` with the label) and the next render tells the browser which keys are saved
(``acked``) or refused (``failed``, with the one-line reason); the browser resends the rest, also after a
reload (it keeps them in ``localStorage`` per annotator and campaign or dataset). The server decides what a label is
about: an op names an item's ``uid`` and nothing else is taken from the browser; the item (its id, group and
``ref``) comes from the panel's own record of what it rendered in this session (``RECORD``), else from what
the server rendered in that scope before (``core.judging.panel_state``, kept across restarts); an op naming an
item never rendered in its scope is not applied (nor refused: it waits in the browser). Served by ``serve.py``, the
panel also gets a signed token (``ui.label_endpoint``): the browser then POSTs its ops to the commit endpoint,
which applies them through the same ``commit`` with the same keys at once (no script run), and uses the
trigger only when the endpoint refuses or cannot be reached. ``commit`` may then run outside a script run: it
must not read ``st.session_state`` (capture what it needs when the page runs).
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import streamlit as st

from core.errors import StudioError
from core.judging.database import StoreBusyError
from core.judging.panel_state import panel_state
from ui import label_endpoint

ASSETS = Path(__file__).resolve().parent / "components" / "judging"
SOURCES = {"html": "judge.html", "css": "judge.css", "js": "judge.js"}
KEEP_ACKED = 2000  # acknowledged keys kept per panel and session (the browser drops them on the next render)
MAX_OPS = 200  # ops applied from one trigger (the browser sends at most this many at once)
RECORD = 5000  # rendered items the server remembers per panel and session (the oldest forgotten first)


def component_sources() -> dict[str, str]:
    """The panel's HTML, CSS and JavaScript, read from the repository."""
    return {kind: (ASSETS / name).read_text(encoding="utf-8") for kind, name in SOURCES.items()}


_PANEL = st.components.v2.component("qrs_judging_panel", isolate_styles=False, **component_sources())


@dataclass(frozen=True)
class PanelItem:
    """One item the panel may show; ``uid`` is unique in the panel, ``group`` is its query (list mode),
    ``ref`` what the server commits it as (free judging: query, query id and document); never sent to the browser."""

    uid: str
    id: int | str
    group: str
    query: str
    text: str
    label: int | None = None
    cant: str | None = None
    rationale: str | None = None
    judged: bool = False
    ref: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Op:
    """One request from the panel: ``kind`` is ``label``, ``cant`` or ``undo``; ``key`` its idempotency key."""

    key: str
    kind: str
    uid: str
    item: Any
    group: str
    label: int | None = None
    reason: str | None = None
    rationale: str | None = None
    ref: Mapping[str, Any] = field(default_factory=dict)


def parse_ops(payload: Any) -> tuple[list[Op], dict[str, str]]:
    """The well-formed ops of a trigger payload, and a refusal line for each malformed one (by key)."""
    raw = payload.get("ops") if isinstance(payload, Mapping) else None
    ops: list[Op] = []
    bad: dict[str, str] = {}
    for entry in (raw if isinstance(raw, list) else [])[:MAX_OPS]:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("key"), str):
            continue
        key, kind = entry["key"], entry.get("kind")
        label = entry.get("label")
        if kind not in ("label", "cant", "undo") or not isinstance(entry.get("uid"), str):
            bad[key] = "malformed request; nothing was changed"
            continue
        if kind == "label" and (isinstance(label, bool) or not isinstance(label, int)):
            bad[key] = f"label must be an integer, got {label!r}; nothing was changed"
            continue
        text = {k: entry.get(k) if isinstance(entry.get(k), str) else None for k in ("reason", "rationale")}
        ref = entry.get("ref") if isinstance(entry.get("ref"), Mapping) else {}
        ops.append(Op(key, kind, entry["uid"], entry.get("item"), str(entry.get("group", "")),
                      label if kind == "label" else None, text["reason"], text["rationale"], ref))
    return ops, bad


def apply_ops(ops: Sequence[Op], commit: Callable[[Op], object], acked: list[str], failed: dict[str, str]) -> int:
    """Commit each op not yet acknowledged, in order, through ``commit`` (which passes ``op.key`` to the
    store as the request's idempotency key). Saved (or already saved) keys go to ``acked``; a refused op's
    line to ``failed``; a busy database stops here and the browser resends the rest. Returns ops applied."""
    seen = set(acked)
    done = 0
    for op in ops:
        if op.key in seen or op.key in failed:
            continue
        try:
            commit(op)
        except StoreBusyError:
            break  # not acknowledged: the browser keeps it and sends it again
        except StudioError as exc:
            failed[op.key] = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
            continue
        acked.append(op.key)
        seen.add(op.key)
        done += 1
    del acked[:-KEEP_ACKED]
    return done


def kept(item: PanelItem) -> dict[str, Any]:
    """What the persisted record keeps of a rendered item: what the server commits it as."""
    return {"id": item.id, "group": item.group, "ref": dict(item.ref)}


def as_rendered(ops: Sequence[Op], record: Mapping[str, PanelItem], scope: str | None = None) -> list[Op]:
    """The ops naming an item of ``record`` (what the panel rendered), or one the server rendered in ``scope``
    before (the persisted record), each about that item as the server holds it (id, group and ``ref`` from the
    record, whatever the browser sent); the others are left out."""
    out = []
    for op in ops:
        item = record.get(op.uid)  # one read each: a render may add to the record meanwhile
        held = kept(item) if item is not None else panel_state().rendered(scope, op.uid) if scope else None
        if held is not None:
            out.append(replace(op, item=held["id"], group=held["group"], ref=held["ref"]))
    return out


def commit_now(raw: list, commit: Callable[[Op], object], record: Mapping[str, PanelItem],
               scope: str | None = None) -> tuple[list[str], dict[str, str]]:
    """The commit endpoint's path (``ui.label_endpoint``): parse and apply one request's ops through
    ``commit``, as the trigger does; the keys saved (or saved before) and a refusal line per key refused."""
    ops, failed = parse_ops({"ops": raw})
    acked: list[str] = []
    apply_ops(as_rendered(ops, record, scope), commit, acked, failed)
    return acked, failed


def remember(record: dict[str, PanelItem], items: Sequence[PanelItem],
             scope: str | None = None) -> dict[str, PanelItem]:
    """Add what a render shows to the panel's record (a shown item moves to the newest end); keep ``RECORD``.
    With ``scope``, the items new to the record (or changed) are also kept in the persisted record."""
    if scope is not None:
        fresh = {i.uid: kept(i) for i in items if i.uid not in record or kept(record[i.uid]) != kept(i)}
        panel_state().remember(scope, fresh)
    for item in items:
        record.pop(item.uid, None)
        record[item.uid] = item
    for uid in list(record)[:max(0, len(record) - RECORD)]:
        del record[uid]
    return record


def resolver(commit_for: Callable[[str, str], Callable[[Op], object] | None]) -> Callable[
        [str, str], Callable[[list], tuple[list[str], dict[str, str]]] | None]:
    """The endpoint's resolver (``label_endpoint.set_resolver``) from ``commit_for(annotator, scope)``: a panel
    rebuilt after a restart commits through the persisted record of its scope only."""
    def resolve(annotator: str, scope: str) -> Callable[[list], tuple[list[str], dict[str, str]]] | None:
        commit = commit_for(annotator, scope)
        return None if commit is None else (lambda raw: commit_now(raw, commit, {}, scope))

    return resolve


def _on_ops(key: str, commit: Callable[[Op], object]) -> None:
    payload = (st.session_state.get(key) or {}).get("ops")
    ops, bad = parse_ops(payload)
    failed = st.session_state.setdefault(f"{key}.failed", {})
    failed.update(bad)
    record = st.session_state.setdefault(f"{key}.record", {})
    apply_ops(as_rendered(ops, record, st.session_state.get(f"{key}.scope")), commit, st.session_state.setdefault(f"{key}.acked", []), failed)


def _on_nav(key: str, on_nav: Callable[[Mapping], None] | None) -> None:
    value = (st.session_state.get(key) or {}).get("nav")
    if on_nav is not None and isinstance(value, Mapping):
        on_nav(value)


def judging_panel(
    key: str,
    *,
    scope: str,
    annotator: str,
    items: Sequence[PanelItem],
    commit: Callable[[Op], object],
    start: str | None = None,
    enabled: bool = True,
    can_cant: bool = False,
    max_label: int = 2,
    labels: Mapping[int, str] | None = None,
    status: str = "",
    group: str | None = None,
    more: Mapping[str, bool] | None = None,
    on_nav: Callable[[Mapping], None] | None = None,
    empty: str = "",
) -> None:
    """Show the panel. ``scope`` names whose unsaved labels the browser keeps (annotator and campaign or
    dataset); ``commit(op)`` writes one op through the store with ``request=op.key``; ``on_nav`` moves a
    free-judging window when the annotator goes past the loaded queries (``group`` the current one)."""
    failed = st.session_state.get(f"{key}.failed", {})
    if st.session_state.get(f"{key}.scope") != scope:  # another dataset or annotator: its own record
        st.session_state[f"{key}.scope"], st.session_state[f"{key}.record"] = scope, {}
    record = remember(st.session_state.setdefault(f"{key}.record", {}), items, scope)
    endpoint: dict[str, str] = {}
    if label_endpoint.mounted() and annotator:  # served by serve.py: labels go straight to the store
        handle = st.session_state.setdefault(f"{key}.handle", uuid.uuid4().hex)
        endpoint = {"url": label_endpoint.url_path(), "header": label_endpoint.TOKEN_HEADER,
                    "token": label_endpoint.register(handle, annotator, scope,
                                                     lambda raw: commit_now(raw, commit, record, scope))}
    data = {
        "scope": scope,
        "annotator": annotator,
        "items": [{k: v for k, v in i.__dict__.items() if k != "ref"} for i in items],  # ref stays here
        "start": start,
        "enabled": bool(enabled and annotator),
        "can_cant": can_cant,
        "max_label": max_label,
        "labels": {int(k): v for k, v in (labels or {}).items()},
        "status": status,
        "group": group,
        "navigable": on_nav is not None,
        "window": f"{group}|{len(items)}",
        "more": dict(more or {}),
        "acked": list(st.session_state.get(f"{key}.acked", []))[-500:],
        "failed": dict(list(failed.items())[-200:]),
        "empty": empty,
        "endpoint": endpoint,
    }
    _PANEL(key=key, data=data, on_ops_change=lambda: _on_ops(key, commit),
           on_nav_change=lambda: _on_nav(key, on_nav))
