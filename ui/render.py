"""Rendering helpers: dataset text is always shown escaped (never as HTML or markdown)."""
from __future__ import annotations

import re

import streamlit as st

from core.errors import StudioError


MISSING = "—"  # what a table shows for a missing value (st.dataframe's own placeholder reads "None")


def plain(text: str) -> None:
    """Show untrusted text verbatim: ``st.text`` renders no markdown and no HTML."""
    st.text(text)


_MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character


def literal(text: object) -> str:
    """``text`` (an id, a name) to put inside a Markdown string (``st.caption``, ``st.warning``, ...) and be shown
    as typed: each ASCII punctuation character backslash-escaped (no emphasis, link, image, code span, HTML,
    ``$`` maths or ``:colour[...]`` directive can start), line breaks shown as spaces."""
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", " ".join(str(text).split()))


def error(exc: BaseException) -> None:
    """A clear message for a known error (the CLI's one line, naming the database for store errors);
    a short one plus details for anything else."""
    from core.errors import describe_error

    from core.errors import NotReadyError

    message = describe_error(exc)
    if isinstance(exc, NotReadyError):  # building, queued, a fixed run and a typed query: normal, not a failure
        st.info(str(exc), icon="⏳")
    elif isinstance(exc, StudioError) or message is not None:
        st.error(message or str(exc), icon="⚠️")
    else:
        st.error(f"Unexpected error: {type(exc).__name__}: {exc}", icon="🛑")


def system_line(label: str, message: str) -> str:
    """``label: message`` with the system named once (a build note or a fixed run's message starts with it)."""
    name = label.split(" ", 1)[0]
    return message if message.startswith((label, f"{name}:", f"{name} ")) else f"{label}: {message}"


def system_problem(label: str, message: str, not_ready: bool, outcome: str = "") -> None:
    """One system's problem on a page where the others still show: information for a normal state (building,
    queued, a fixed run and a typed query), an error otherwise; the system named once, after ``outcome`` (what
    the page did about it, e.g. "Left out of the pool") when given."""
    line = (f"{outcome} — " if outcome else "") + system_line(label, message)
    if not_ready:
        st.info(line, icon="⏳")
    else:
        st.error(line, icon="⚠️")


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


def page_judgment_store():
    """The judgment store of the configured database (``core.judging.database.default_url``), or one line naming
    the database and the page stops."""
    from core.judging.database import default_url
    from ui.cache import judgment_store

    try:
        return judgment_store(default_url())
    except Exception as exc:  # noqa: BLE001 - one line naming the database
        error(exc)
        st.stop()
