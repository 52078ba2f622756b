"""Progress reporting shared by every layer: a callback ``(fraction in [0, 1], message) -> None``.

Long jobs (indexing, training, encoding, imports) take a ``ProgressFn``; the CLI passes a tqdm bar and the
pages a Streamlit progress bar. ``no_progress`` is the silent default.
"""
from __future__ import annotations

from collections.abc import Callable

ProgressFn = Callable[[float, str], None]


def no_progress(fraction: float, message: str) -> None:  # noqa: ARG001
    return None
