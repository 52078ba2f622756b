"""The judging panel's commit endpoint: labels reach the store without waiting for a Streamlit script run.

``serve.py`` mounts ``routes()`` beside Streamlit through ``st.App(..., routes=...)`` (Streamlit's public
ASGI entry; ``streamlit run serve.py`` finds the ``app`` and serves it with uvicorn). Each render of the panel registers its
``commit`` function under a random handle (``register``) and puts a token into the component's data: an
HMAC-SHA256 signature over the handle, the annotator, the panel's scope and an expiry, with the secret kept in
the artifacts folder (``core.judging.panel_state.secret``). Tokens are short-lived (``TTL_S``, renewed by each
render) and tied to the login: ``revoke(annotator)`` (Log out) forgets every panel of that annotator at once.
Registrations are also kept in ``PanelState``: after a restart a token still valid names a panel the new
process rebuilds through the resolver ``serve.py`` installs (``set_resolver``), so pending labels are stored
without a reload; a revoked registration is deleted there too.

A request is refused before it costs memory: the token is checked first (no byte of the body read), then
``Content-Length`` against ``MAX_BODY``, then the body is read as a stream that stops at ``MAX_BODY``, and
its JSON is parsed (a body nested too deep is refused, not a traceback). Every refusal is one JSON line
(``{"error": ...}``) with a 4xx status and changes nothing; the browser then uses the component value path.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.judging.panel_state import panel_state, secret
from core.paths import var_dir

PATH = "/qrs/labels"
TOKEN_HEADER = "X-QRS-Token"
TTL_S = 15 * 60  # a token (and its handle) lives this long after the panel's last render
MAX_HANDLES = 10_000  # registered panels kept per process (the oldest expiring first)
MAX_BODY = 1_000_000  # bytes: far above MAX_OPS ops

_SECRETS: dict[Path, bytes] = {}  # artifacts folder -> its persisted secret (read once per process)
_RESOLVER: Callable[[str, str], Callable[[list], tuple[list[str], dict[str, str]]] | None] | None = None
_LOCK = threading.Lock()
_HANDLES: dict[str, "Registration"] = {}
_MOUNTED = False


class TokenError(Exception):
    """A token that is malformed, forged, expired or names a panel this process does not know."""


class BodyError(Exception):
    """A body refused before it is committed: ``status`` and the one-line reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Registration:
    """One rendered panel: whose labels it commits, into which scope, until when; ``apply(ops)`` commits a
    request's ops and returns the keys saved and a refusal line per key refused."""

    annotator: str
    scope: str
    apply: Callable[[list], tuple[list[str], dict[str, str]]]
    expires: float


def url_path() -> str:
    """``PATH`` under Streamlit's ``server.baseUrlPath`` (``/studio/qrs/labels`` when the app is served at
    ``/studio/``): where the route is mounted and where the browser posts, so a proxy that forwards only the app's
    prefix forwards the labels too."""
    from streamlit import config

    base = (config.get_option("server.baseUrlPath") or "").strip("/")
    return f"/{base}{PATH}" if base else PATH


def mounted() -> bool:
    """Whether this process serves ``PATH`` (``routes()`` was built): only then does the panel get a token."""
    return _MOUNTED


def _secret() -> bytes:
    folder = var_dir()
    with _LOCK:
        if folder not in _SECRETS:
            _SECRETS[folder] = secret(folder)
        return _SECRETS[folder]


def set_resolver(resolver: Callable[[str, str], Callable[[list], tuple[list[str], dict[str, str]]] | None]) -> None:
    """How a new process rebuilds a panel it did not render: ``resolver(annotator, scope)`` gives the ``apply``
    of that scope (committing through the persisted record of rendered items), or None."""
    global _RESOLVER
    _RESOLVER = resolver


def sign(handle: str, annotator: str, scope: str, expires: float) -> str:
    """The token of one registration: base64url(JSON payload) + "." + hex HMAC-SHA256 of that text."""
    body = base64.urlsafe_b64encode(json.dumps([handle, annotator, scope, int(expires)]).encode()).decode()
    return body + "." + hmac.new(_secret(), body.encode(), hashlib.sha256).hexdigest()


def register(handle: str, annotator: str, scope: str, apply: Callable[[list], tuple[list[str], dict[str, str]]],
             now: float | None = None) -> str:
    """Keep ``apply`` under ``handle`` for ``annotator`` and ``scope``; return the token the browser sends."""
    now = time.time() if now is None else now
    expires = now + TTL_S
    with _LOCK:
        for old in [h for h, r in _HANDLES.items() if r.expires < now]:
            del _HANDLES[old]
        _HANDLES.pop(handle, None)
        while len(_HANDLES) >= MAX_HANDLES:
            del _HANDLES[next(iter(_HANDLES))]
        _HANDLES[handle] = Registration(annotator, scope, apply, expires)
    panel_state().register(handle, annotator, scope, expires)
    return sign(handle, annotator, scope, expires)


def revoke(annotator: str) -> int:
    """Forget every panel of ``annotator`` (Log out): their tokens are refused from now on. Returns how many."""
    with _LOCK:
        gone = [h for h, r in _HANDLES.items() if r.annotator == annotator]
        for handle in gone:
            del _HANDLES[handle]
    return max(len(gone), panel_state().revoke(annotator))


def restore(handle: str, annotator: str, scope: str, now: float) -> Registration | None:
    """The registration of ``handle`` as kept in ``PanelState`` (another process of this server registered it,
    before a restart), rebuilt through the resolver; None when it is unknown, revoked or expired."""
    kept = panel_state().registration(handle)
    if _RESOLVER is None or kept is None or kept[0] != annotator or kept[1] != scope or kept[2] < now:
        return None
    apply = _RESOLVER(annotator, scope)
    if apply is None:
        return None
    reg = Registration(annotator, scope, apply, kept[2])
    with _LOCK:
        _HANDLES.setdefault(handle, reg)
        return _HANDLES[handle]


def verify(token: str, now: float | None = None) -> Registration:
    """The registration a token names, or ``TokenError`` with the one-line reason."""
    now = time.time() if now is None else now
    body, _, mac = (token or "").partition(".")
    good = hmac.new(_secret(), body.encode(), hashlib.sha256).hexdigest()
    if not body or not hmac.compare_digest(mac, good):
        raise TokenError("the label token is not valid (signed by another server?); nothing was changed")
    handle, annotator, scope, expires = json.loads(base64.urlsafe_b64decode(body.encode()))
    if expires < now:
        raise TokenError("the label token has expired; nothing was changed")
    with _LOCK:
        reg = _HANDLES.get(handle)
    if reg is None:
        reg = restore(handle, annotator, scope, now)
    if reg is None or reg.annotator != annotator or reg.scope != scope or reg.expires < now:
        raise TokenError("this server does not know the panel of this token (restarted or logged out?); "
                         "nothing was changed")
    return reg


def declared_length(value: str | None) -> int | None:
    """The request's ``Content-Length`` (None: not sent, the body is streamed); ``BodyError`` when it is over
    ``MAX_BODY`` or not a number."""
    if value is None:
        return None
    if not value.strip().isdigit():
        raise BodyError(400, "the Content-Length header is not a number; nothing was changed")
    if int(value) > MAX_BODY:
        raise BodyError(413, f"the request is over {MAX_BODY} bytes; nothing was changed")
    return int(value)


def parse_body(raw: bytes) -> Any:
    """The JSON of a body, or ``BodyError`` with its one line: not JSON, or nested deeper than the interpreter's
    recursion limit (the C scanner raises ``RecursionError`` there, in linear time, before the stack is at risk)."""
    try:
        return json.loads(raw or b"null")
    except RecursionError:
        raise BodyError(400, "the body nests too deep to be a request; nothing was changed") from None
    except ValueError:
        raise BodyError(400, "the body is not JSON; nothing was changed") from None


def answer(reg: Registration, raw: bytes) -> tuple[int, dict[str, Any]]:
    """Parse a body read within ``MAX_BODY`` and apply it through a verified registration (on a worker thread:
    neither parsing nor the store's commit runs on the event loop)."""
    try:
        payload = parse_body(raw)
    except BodyError as exc:
        return exc.status, {"error": str(exc)}
    return commit_to(reg, payload)


def commit_request(token: str, payload: Any) -> tuple[int, dict[str, Any]]:
    """Answer one POST: the HTTP status and its JSON body (``acked`` keys and ``failed`` lines, or ``error``)."""
    try:
        reg = verify(token)
    except TokenError as exc:
        return 401, {"error": str(exc)}
    return commit_to(reg, payload)


def commit_to(reg: Registration, payload: Any) -> tuple[int, dict[str, Any]]:
    """Apply a parsed body through a verified registration: the HTTP status and its JSON body."""
    if not isinstance(payload, dict) or not isinstance(payload.get("ops"), list):
        return 400, {"error": 'the body must be a JSON object {"ops": [...]}; nothing was changed'}
    acked, failed = reg.apply(payload["ops"])
    return 200, {"acked": acked, "failed": failed}


def routes() -> list:
    """The Starlette route of the endpoint, for ``st.App(routes=...)``; marks this process as serving it."""
    global _MOUNTED
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    def refuse(status: int, message: str) -> JSONResponse:
        # Connection: close -- the unread rest of a refused body is never read into this process
        return JSONResponse({"error": message}, status, headers={"Cache-Control": "no-store", "Connection": "close"})

    async def labels(request: Request) -> JSONResponse:
        try:
            reg = verify(request.headers.get(TOKEN_HEADER, ""))  # before any byte of the body is read
            declared_length(request.headers.get("content-length"))
            raw = bytearray()
            async for chunk in request.stream():
                raw += chunk
                if len(raw) > MAX_BODY:
                    raise BodyError(413, f"the request is over {MAX_BODY} bytes; nothing was changed")
        except TokenError as exc:
            return refuse(401, str(exc))
        except BodyError as exc:
            return refuse(exc.status, str(exc))
        except ClientDisconnect:
            return refuse(400, "the request ended before its body; nothing was changed")
        # parsing and the synchronous store run on a worker thread, never on the event loop Streamlit's socket uses
        status, body = await run_in_threadpool(answer, reg, bytes(raw))
        if status >= 400:
            return refuse(status, body["error"])
        return JSONResponse(body, status, headers={"Cache-Control": "no-store"})

    _MOUNTED = True
    return [Route(url_path(), labels, methods=["POST"])]
