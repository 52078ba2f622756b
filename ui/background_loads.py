"""Loads off the page's thread: a page visit never waits for a model to load or a curve to be computed.

A page that asks for a system this server process has not loaded yet waits up to ``QRS_PAGE_WAIT`` seconds
(default 2; one budget for every load of the page run), then gets :class:`LoadingError` (a ``NotReadyError``: shown
as information) while two background threads load the page's systems in the order asked (two: the evaluation's
compile and a model load side by side, no more on two cores). The page draws what is ready, then
:func:`refresh_when_loaded` shows each load's progress (count and time left, as the load reports it) and reruns
the page once every load has finished; a load that failed shows its own error on that rerun and is tried again
on the next visit. Loads are keyed like the process's system cache (``ui.cache.system``), so a key is loaded once.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import streamlit as st

from core.errors import NotReadyError
from core.progress import ProgressFn
from core.settings import settings

__all__ = ["Load", "LoadingError", "in_background", "loading", "page_deadline", "refresh_when_loaded", "start_load", "take_failure"]

POLL_SECONDS = 1.0


class LoadingError(NotReadyError):
    """The system is loading in the background; the page fills in when it is loaded."""


@dataclass
class Load:
    """One background load: what it loads, how far it got, and how it ended."""

    label: str
    started: float = field(default_factory=time.monotonic)
    fraction: float = 0.0
    message: str = "queued"
    error: BaseException | None = None
    finished: threading.Event = field(default_factory=threading.Event)  # set once it ended (error or not)

    def progress(self, fraction: float, message: str) -> None:
        """The load's ``ProgressFn``: keeps the latest fraction and message for the page to show."""
        self.fraction, self.message = min(1.0, max(0.0, float(fraction))), message

    def line(self) -> str:
        """``minilm: encoding 1,200/36,737 · about 40 s left`` (elapsed time when no fraction is known)."""
        elapsed = time.monotonic() - self.started
        if 0.0 < self.fraction < 1.0 and "left" not in self.message:
            tail = f" · about {elapsed * (1 - self.fraction) / self.fraction:.0f} s left"
        else:
            tail = f" · {elapsed:.0f} s"
        return f"{self.label}: {self.message}{tail}"


_LOADS: dict[Hashable, Load] = {}
_GUARD = threading.Lock()
_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="qrs-load")


def start_load(key: Hashable, label: str, work: Callable[[ProgressFn], object]) -> Load:
    """Run ``work(progress)`` for ``key`` in the background once (it keeps its result where the page looks, e.g.
    the process's system cache). A second call for a key already running returns its :class:`Load`."""
    with _GUARD:
        load = _LOADS.get(key)
        if load is not None:
            return load
        load = _LOADS[key] = Load(label)

    def run() -> None:
        load.message = "loading"
        try:
            work(load.progress)
        except BaseException as exc:  # kept for the page's next run, which shows it
            load.error = exc
        finally:
            if load.error is None:
                with _GUARD:
                    _LOADS.pop(key, None)
            load.finished.set()

    _POOL.submit(run)
    return load


def take_failure(key: Hashable) -> BaseException | None:
    """The error a finished background load of ``key`` ended with (forgotten once taken: the next visit retries)."""
    with _GUARD:
        load = _LOADS.get(key)
        if load is None or not load.finished.is_set() or load.error is None:
            return None
        del _LOADS[key]
        return load.error


def page_deadline() -> float:
    """When a page run that starts now stops waiting for its loads (``time.monotonic()``): ``QRS_PAGE_WAIT`` seconds
    for all of them together."""
    return time.monotonic() + settings().page_wait


def in_background(key: Hashable, label: str, work: Callable[[ProgressFn], object], cached: Callable[[], object],
                  until: float, doing: str = "loading"):
    """What ``cached()`` gives for ``key`` (None: not there yet): on a miss ``work(progress)`` starts in the
    background (it puts its result where ``cached`` finds it) and is awaited until ``until`` (the page run's
    :func:`page_deadline`), then :class:`LoadingError` while it runs; a failed run's own error once (the next call
    starts it again)."""
    failure = take_failure(key)
    if failure is not None:
        raise failure
    hit = cached()
    if hit is not None:  # finished between the caller's miss and now
        return hit
    running = start_load(key, label, work)
    if running.finished.wait(max(0.0, until - time.monotonic())):  # a quick one: the page draws it on this run
        failure = take_failure(key)
        if failure is not None:
            raise failure
        return cached()
    raise LoadingError(f"{label}: {doing} in the background ({running.message}); its results appear here when "
                       "it is done")


def loading() -> list[Load]:
    """The loads still running or queued in this process."""
    with _GUARD:
        return [load for load in _LOADS.values() if not load.finished.is_set()]


def refresh_when_loaded() -> None:
    """While background loads run: their progress lines, refreshed every second; the page reruns when they end."""
    if not loading():
        return

    @st.fragment(run_every=POLL_SECONDS)
    def _poll() -> None:
        running = loading()
        if not running:
            st.rerun()
        st.caption("⏳ Loading in the background (this server's first use of these): "
                   + "; ".join(load.line() for load in running))

    _poll()
