"""Who someone is, in one canonical form, and who the configuration names as owners and researchers.

- ``canonical_identity``: whitespace collapsed; an e-mail address (anything with ``@``) lower-cased, so
  ``Bob@Lab.Example``, ``bob@lab.example`` and an identity provider's ``BOB@lab.example`` are one person.
  Other names (a provider's ``sub``, a name typed in single-user mode) are kept as written: a ``sub`` is
  an opaque, case-sensitive id. The judgment store, the campaign store, the login and the CLI all call it,
  and schema version 5 rewrote stored e-mail names the same way.
- ``configured_people``: the ``owners`` / ``researchers`` lists of the configuration: the environment
  (``QRS_OWNERS`` / ``QRS_RESEARCHERS``, comma-separated) first, else ``[qrs]`` in ``.streamlit/secrets.toml``
  (the working directory's, then the home directory's: where Streamlit looks). The app reads the same keys
  through ``st.secrets`` (``ui/auth.py``); this reader serves the CLI, which has no Streamlit.

The CLI's trust model: whoever holds the database URL can write to the database, so the CLI is for the
lab's trusted operators; ``--as`` is checked against the owners of the configuration (and of the campaign),
never trusted because it was typed.
"""
from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path

from core.settings import settings

OWNERS_ENV, RESEARCHERS_ENV = "QRS_OWNERS", "QRS_RESEARCHERS"
ROLES_ENV = {"owners": OWNERS_ENV, "researchers": RESEARCHERS_ENV}


def canonical_identity(name: object) -> str:
    """One form per person: whitespace collapsed, NULs dropped, e-mail addresses lower-cased ("" if empty)."""
    cleaned = " ".join(str(name or "").replace("\x00", " ").split())
    return cleaned.lower() if "@" in cleaned else cleaned


def identity_set(value: object) -> frozenset[str]:
    """Canonical names from a comma-separated string or a TOML array (empty entries dropped)."""
    items: Iterable = value.split(",") if isinstance(value, str) else list(value or [])
    return frozenset(n for n in (canonical_identity(v) for v in items) if n)


def secrets_files() -> list[Path]:
    """Where Streamlit reads ``secrets.toml`` by default: the working directory's ``.streamlit``, then home."""
    return [Path.cwd() / ".streamlit" / "secrets.toml", Path.home() / ".streamlit" / "secrets.toml"]


def _qrs_section(files: Iterable[Path]) -> Mapping:
    merged: dict = {}
    for path in reversed(list(files)):  # the first file wins, as in Streamlit
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            continue
        if isinstance(data.get("qrs"), Mapping):
            merged.update(data["qrs"])
    return merged


def configured_people(role: str, files: Iterable[Path] | None = None) -> frozenset[str]:
    """The configuration's ``owners`` or ``researchers`` (environment first, then ``[qrs]`` of the secrets)."""
    if role not in ROLES_ENV:
        raise ValueError(f"role must be one of {', '.join(ROLES_ENV)}, got {role!r}")
    env = settings().people(role)
    if env:
        return identity_set(env)
    return identity_set(_qrs_section(secrets_files() if files is None else files).get(role))
