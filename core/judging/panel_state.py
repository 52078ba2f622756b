"""What a judging panel's pending label needs to outlive a server restart, kept under the artifacts folder.

* ``secret()``: the label tokens' HMAC key, one file (``label_secret``, mode 0600, created atomically: the
  first process to link it wins, the others read it), so a token signed before a restart verifies after it.
* ``PanelState``: a small SQLite file (``label_panels.sqlite``) holding the registrations (handle, annotator,
  scope, expiry: what a token names) and the record of rendered items (scope, uid -> what the server commits
  that uid as). Log out deletes the annotator's registrations, so a revoked token stays refused after a
  restart. Nothing here comes from the browser: the server writes both tables when it renders a panel.
"""
from __future__ import annotations

import json
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.paths import var_dir

SECRET_FILE = "label_secret"
STATE_FILE = "label_panels.sqlite"
KEEP_S = 7 * 24 * 3600  # rendered items older than this (not shown again since) are forgotten


def secret(folder: Path | None = None) -> bytes:
    """The persisted 32-byte token secret of ``folder`` (the artifacts folder by default), made on first use."""
    path = (folder or var_dir()) / SECRET_FILE
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        pass
    tmp = path.with_name(f".{SECRET_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32))
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)  # atomic and never replaces: a concurrent first start keeps one secret
        except FileExistsError:
            pass
    finally:
        tmp.unlink(missing_ok=True)
    return bytes.fromhex(path.read_text().strip())


class PanelState:
    """Registrations and rendered items in one SQLite file; every call commits at once, thread-safe."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or var_dir() / STATE_FILE
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30, isolation_level=None)
        os.chmod(self.path, 0o600)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS panels (handle TEXT PRIMARY KEY, annotator TEXT NOT NULL, "
                         "scope TEXT NOT NULL, expires REAL NOT NULL)")
        self._db.execute("CREATE TABLE IF NOT EXISTS rendered (scope TEXT NOT NULL, uid TEXT NOT NULL, "
                         "item TEXT NOT NULL, seen REAL NOT NULL, PRIMARY KEY (scope, uid))")

    def register(self, handle: str, annotator: str, scope: str, expires: float) -> None:
        """Keep what ``handle``'s token names (replacing an earlier registration of that handle)."""
        with self._lock:
            self._db.execute("DELETE FROM panels WHERE expires < ?", (time.time(),))
            self._db.execute("INSERT OR REPLACE INTO panels VALUES (?, ?, ?, ?)", (handle, annotator, scope, expires))

    def registration(self, handle: str) -> tuple[str, str, float] | None:
        """(annotator, scope, expires) of ``handle``, or None (never registered, expired away or revoked)."""
        with self._lock:
            row = self._db.execute("SELECT annotator, scope, expires FROM panels WHERE handle = ?",
                                   (handle,)).fetchone()
        return (row[0], row[1], float(row[2])) if row else None

    def revoke(self, annotator: str) -> int:
        """Forget every registration of ``annotator``; how many."""
        with self._lock:
            return self._db.execute("DELETE FROM panels WHERE annotator = ?", (annotator,)).rowcount

    def remember(self, scope: str, items: Mapping[str, Mapping[str, Any]]) -> None:
        """Record what ``scope``'s panel rendered: uid -> a JSON object (the item as the server commits it)."""
        if not items:
            return
        now = time.time()
        rows = [(scope, uid, json.dumps(dict(item), sort_keys=True), now) for uid, item in items.items()]
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.executemany("INSERT OR REPLACE INTO rendered VALUES (?, ?, ?, ?)", rows)
                self._db.execute("DELETE FROM rendered WHERE seen < ?", (now - KEEP_S,))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def rendered(self, scope: str, uid: str) -> dict[str, Any] | None:
        """The item ``scope``'s panel rendered under ``uid``, or None when it never did."""
        with self._lock:
            row = self._db.execute("SELECT item FROM rendered WHERE scope = ? AND uid = ?", (scope, uid)).fetchone()
        return json.loads(row[0]) if row else None


_STATES: dict[Path, PanelState] = {}
_STATES_LOCK = threading.Lock()


def panel_state() -> PanelState:
    """The ``PanelState`` of the current artifacts folder (one connection per folder and process)."""
    path = var_dir() / STATE_FILE
    with _STATES_LOCK:
        if path not in _STATES:
            _STATES[path] = PanelState(path)
        return _STATES[path]
