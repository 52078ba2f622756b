"""Who is using the app: single-user (default), OpenID Connect login, or a trusted proxy header.

Configuration (nothing configured = today's single-user tool on 127.0.0.1, no login):

- **OIDC**: an ``[auth]`` section in ``.streamlit/secrets.toml`` (Streamlit's own ``st.login`` /
  ``st.user``, the ``streamlit[auth]`` extra = Authlib): ``redirect_uri``, ``cookie_secret``,
  ``client_id``, ``client_secret``, ``server_metadata_url``. The annotator is the logged-in subject's
  ``identity_claim`` (default ``email``, else ``sub``).
- **Trusted header**: ``QRS_TRUSTED_HEADER=X-Forwarded-User`` (or ``trusted_header`` under ``[qrs]`` in
  the secrets) for a reverse proxy that authenticates users and sets that header. Honoured only
  when configured; a request without the header is refused.
- **Owners**: ``QRS_OWNERS=a@lab,b@lab`` or ``owners = [...]`` under ``[qrs]``. Owners create campaigns,
  edit guidelines, adjudicate and export.
- **Researchers**: ``QRS_RESEARCHERS=...`` or ``researchers = [...]`` under ``[qrs]``: with login on, they and
  the owners see the pages that reveal systems' rankings (``ui.nav``); everyone else logged in is an
  annotator and sees Annotate only.

Names are compared in their canonical form (``core.judging.identity.canonical_identity``: e-mail
addresses lower-cased). With login on, a visitor who is not logged in sees the login page and nothing
else (``gate``), not even page names in the sidebar.
"""
from __future__ import annotations

import getpass
from collections.abc import Mapping
from dataclasses import dataclass

import streamlit as st

from core.judging.identity import canonical_identity, identity_set
from core.settings import settings

NONE, OIDC, HEADER = "none", "oidc", "header"


@dataclass(frozen=True)
class AuthConfig:
    """How identities are established, and who the owners are."""

    mode: str
    header: str | None = None
    owners: frozenset[str] = frozenset()
    researchers: frozenset[str] = frozenset()
    identity_claim: str = "email"
    provider: str | None = None  # the [auth.NAME] provider st.login uses, when there are several

    @property
    def login_required(self) -> bool:
        return self.mode != NONE


@dataclass(frozen=True)
class Identity:
    """The current user. ``name`` None: not logged in. In single-user mode everyone is an owner."""

    name: str | None
    mode: str
    is_owner: bool
    is_researcher: bool = False

    @property
    def authenticated(self) -> bool:
        return self.mode == NONE or self.name is not None

    @property
    def sees_rankings(self) -> bool:
        """Whether the pages that reveal systems' rankings are open to this user (owners and researchers;
        everyone in single-user mode). An annotator judging blind must not see them."""
        return self.mode == NONE or (self.name is not None and (self.is_owner or self.is_researcher))


def _section(name: str) -> Mapping:
    """A secrets section, or {} when there is no secrets file or no such section (never raises)."""
    try:
        secrets = st.secrets
        if hasattr(secrets, "load_if_toml_exists") and not secrets.load_if_toml_exists() and not len(secrets):
            return {}
        return dict(secrets[name]) if name in secrets else {}
    except Exception:  # noqa: BLE001 - a missing or unreadable secrets file means: not configured
        return {}


def auth_config() -> AuthConfig:
    """Read the configuration (environment first, then ``[qrs]`` / ``[auth]`` in the secrets)."""
    qrs = _section("qrs")
    owners = identity_set(settings().owners or qrs.get("owners"))
    researchers = identity_set(settings().researchers or qrs.get("researchers"))
    header = (settings().trusted_header or str(qrs.get("trusted_header") or "")).strip()
    claim = str(qrs.get("identity_claim") or "email")
    if header:
        return AuthConfig(HEADER, header=header, owners=owners, researchers=researchers, identity_claim=claim)
    if _section("auth"):
        return AuthConfig(OIDC, owners=owners, researchers=researchers, identity_claim=claim,
                          provider=qrs.get("provider") or None)
    return AuthConfig(NONE, owners=owners, researchers=researchers, identity_claim=claim)


def local_user() -> str:
    """The single-user mode's name for owner actions (``QRS_USER`` or the OS login name)."""
    try:
        return settings().user or getpass.getuser() or "local"
    except Exception:  # noqa: BLE001 - no login name in some containers
        return "local"


def request_headers() -> Mapping[str, str]:
    """The headers of the visitor's request (``st.context.headers``; the tests replace this function)."""
    return st.context.headers


def current_identity(config: AuthConfig | None = None) -> Identity:
    """The current user under ``config`` (not logged in: ``name`` None)."""
    config = config or auth_config()
    if config.mode == NONE:
        return Identity(local_user(), NONE, True)
    name = None
    if config.mode == HEADER:
        value = request_headers().get(config.header) if config.header else None
        name = canonical_identity(value)[:80] or None if value else None
    else:
        user = st.user
        if user.get("is_logged_in", False):
            raw = user.get(config.identity_claim) or user.get("sub")
            name = canonical_identity(raw)[:80] or None if raw else None
    return Identity(name, config.mode, name is not None and name in config.owners,
                    name is not None and name in config.researchers)


def log_out(name: str | None) -> None:
    """Log out: the judging panels' label tokens of ``name`` are refused at once (``ui.label_endpoint.revoke``),
    then Streamlit ends the login."""
    from ui.label_endpoint import revoke

    if name:
        revoke(name)
    st.logout()


def gate(show_user: bool = False) -> Identity:
    """Stop the run with the login page unless the visitor is authenticated; returns the identity.

    ``show_user``: also put "Signed in as" and "Log out" in the sidebar. Only the entry (``app.py``) asks for it:
    a page calls ``gate()`` again inside the same run (``ensure_navigation``), and a second "Log out" button
    would be a duplicate widget key (StreamlitDuplicateElementKey on every page once logged in).
    """
    config = auth_config()
    ident = current_identity(config)
    if ident.authenticated:
        if show_user and config.mode == OIDC:
            with st.sidebar:
                st.caption("Signed in as")
                st.text(ident.name)
                st.button("Log out", key="auth.logout", on_click=log_out, args=(ident.name,))
        return ident
    st.title("Question Retrieval Studio")
    if config.mode == HEADER:
        st.error(f"Not authenticated: the request has no {config.header} header from the lab's login proxy.",
                 icon="🔒")
    else:
        st.info("Log in to judge and to see this lab's campaigns.", icon="🔒")
        st.button("Log in", key="auth.login", type="primary", on_click=st.login,
                  args=(config.provider,) if config.provider else ())
    st.stop()
    raise AssertionError("unreachable")  # pragma: no cover - st.stop() ends the run
