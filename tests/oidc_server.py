"""A real OpenID Connect provider on 127.0.0.1 for the login tests: ``oidc-provider-mock`` (0.3.x runs on
Python 3.11) served by werkzeug in a thread. Any client id/secret is accepted; the authorization form
takes the subject (``sub``) to log in as, and ``add_user`` sets the claims (e.g. ``email``) it returns.

Outside CI a missing package skips the login tests with the reason; with ``CI`` set they fail.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the OIDC login tests are mandatory in CI: {reason}")
    pytest.skip(f"no OIDC provider to test login against: {reason} (pip install oidc-provider-mock==0.3.4)")


class OidcProvider:
    """One running provider: ``url`` is its issuer (``/.well-known/openid-configuration`` below it)."""

    def __init__(self) -> None:
        try:
            import oidc_provider_mock
            import werkzeug.serving
        except ImportError as exc:
            _unavailable(f"{exc.name} is not installed")
        self.server = werkzeug.serving.make_server("127.0.0.1", 0, oidc_provider_mock.app(), threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def add_user(self, sub: str, **claims: str) -> None:
        """Claims the provider returns for ``sub`` (``email=...``, ``name=...``)."""
        import httpx

        r = httpx.put(f"{self.url}/users/{quote(sub, safe='')}", json=claims, timeout=10)
        if r.status_code != 204:
            raise RuntimeError(f"the OIDC provider refused user {sub!r}: HTTP {r.status_code}")

    def secrets_toml(self, app_url: str, owners: list[str], path: Path) -> Path:
        """A ``.streamlit/secrets.toml`` for an app at ``app_url`` logging in through this provider."""
        owners_toml = ", ".join(f'"{o}"' for o in owners)
        path.write_text(
            "[auth]\n"
            f'redirect_uri = "{app_url}/oauth2callback"\n'
            'cookie_secret = "test-cookie-secret-0123456789abcdef"\n'
            'client_id = "studio"\nclient_secret = "studio-secret"\n'
            f'server_metadata_url = "{self.url}/.well-known/openid-configuration"\n'
            f"[qrs]\nowners = [{owners_toml}]\n", encoding="utf-8")
        return path

    def stop(self) -> None:
        self.server.shutdown()
        self.thread.join(5)
        self.server.server_close()


@pytest.fixture(scope="session")
def oidc_provider() -> Iterator[OidcProvider]:
    """A local OIDC provider for the whole session (skipped outside CI, failed in CI, when unavailable)."""
    provider = OidcProvider()
    try:
        yield provider
    finally:
        provider.stop()
