"""Serve the app with the judging panel's commit endpoint: ``streamlit run serve.py`` (what ``make run`` does).

``app.py`` stays the Streamlit script (``streamlit run app.py`` still works: the panel then sends labels
through the component's value only); this file is the ASGI app around it, ``st.App`` with one more route
(``ui.label_endpoint``), so labels are committed without waiting for a script run. Every request, page,
WebSocket and endpoint alike, must name an allowed host (``QRS_ALLOWED_HOSTS``, loopback names by default):
a page of another site that a DNS rebinding points at this server gets a 400.
"""
from __future__ import annotations

import sys

import streamlit as st
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware

from core.settings import SettingsError, settings
from ui.label_endpoint import routes
from ui.label_scopes import install


def middleware() -> list[Middleware]:
    """The host allow-list (``QRS_ALLOWED_HOSTS``) as Starlette's ``TrustedHostMiddleware``; a malformed setting
    ends the server with its one line (exit code 2) before it listens."""
    try:
        allowed = settings().allowed_hosts
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    hosts = [f"[{h}]" if ":" in h else h for h in allowed]  # an IPv6 Host header is bracketed
    return [Middleware(TrustedHostMiddleware, allowed_hosts=hosts)]


install()  # after a restart, the endpoint rebuilds the panels whose tokens are still valid
app = st.App("app.py", routes=routes(), middleware=middleware())
