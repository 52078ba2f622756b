"""Calls run side by side, each in its own thread and all at once: the tests of concurrent writers, claims,
builds and browser sessions start them this way."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait

__all__ = ["side_by_side"]


def side_by_side(fn: Callable[..., object], calls: Sequence[tuple], timeout: float | None = None,
                 what: str = "call") -> list[BaseException]:
    """``fn(*args)`` for every ``args`` of ``calls``, each in a thread of its own, all started at once; what they
    raised, in the order of ``calls`` (empty when none did). A call still running after ``timeout`` seconds fails
    the test, naming ``what`` hung."""
    pool = ThreadPoolExecutor(max_workers=max(1, len(calls)))
    futures = [pool.submit(fn, *args) for args in calls]
    _, running = wait(futures, timeout)
    pool.shutdown(wait=not running)
    if running:
        raise AssertionError(f"{len(running)} {what}(s) of {len(futures)} still running after {timeout} s: hung")
    return [exc for exc in (f.exception() for f in futures) if exc is not None]
