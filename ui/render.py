"""Rendering helpers: dataset text is always shown escaped (never as HTML or markdown)."""
from __future__ import annotations

import streamlit as st

from core.errors import StudioError


def plain(text: str) -> None:
    """Show untrusted text verbatim: ``st.text`` renders no markdown and no HTML."""
    st.text(text)


def error(exc: BaseException) -> None:
    """A clear message for a known error (the CLI's one line, naming the database for store errors);
    a short one plus details for anything else."""
    from core.errors import describe_error

    message = describe_error(exc)
    if isinstance(exc, StudioError) or message is not None:
        st.error(message or str(exc), icon="⚠️")
    else:
        st.error(f"Unexpected error: {type(exc).__name__}: {exc}", icon="🛑")


def build_banner(dataset_name: str) -> None:
    """One line on every page while the background build runs (what is building, how far)."""
    from core.build import progress_line

    line = progress_line(_dataset(dataset_name))
    if line:
        st.caption(line)


def _dataset(name: str):
    from ui.cache import dataset

    return dataset(name)


def page_dataset(name: str | None = None, banner: bool = True):
    """Load the page's dataset (the current one by default), or show why not and stop the page.

    Also shows the background-build line, so every page reports build progress (``banner=False``: the page
    draws it itself, as Models does beside its status table so both show the same numbers).
    """
    from ui.state import current_dataset

    name = name or current_dataset()
    try:
        ds = _dataset(name)
    except Exception as exc:
        error(exc)
        st.stop()
    if banner:
        build_banner(name)
    return ds
