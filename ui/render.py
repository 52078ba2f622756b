"""Rendering helpers: dataset text is always shown escaped (never as HTML or markdown)."""
from __future__ import annotations

import streamlit as st

from core.errors import StudioError


def plain(text: str) -> None:
    """Show untrusted text verbatim: ``st.text`` renders no markdown and no HTML."""
    st.text(text)


def error(exc: BaseException) -> None:
    """A clear message for a known error; a short one plus details for anything else."""
    if isinstance(exc, StudioError):
        st.error(str(exc), icon="⚠️")
    else:
        st.error(f"Unexpected error: {type(exc).__name__}: {exc}", icon="🛑")
