"""tests.side_by_side, the way concurrency tests start their calls: all at once, errors returned, a hang named."""
from __future__ import annotations

import threading

import pytest

from tests.side_by_side import side_by_side


def test_every_call_runs_at_once_and_what_they_raised_comes_back_in_order():
    barrier = threading.Barrier(3, timeout=10)  # passes only when all three calls run at the same time

    def call(i: int) -> None:
        barrier.wait()
        if i:
            raise ValueError(f"call {i}")

    assert [str(e) for e in side_by_side(call, [(0,), (1,), (2,)])] == ["call 1", "call 2"]
    assert side_by_side(lambda: None, [(), ()]) == []


def test_a_call_still_running_after_the_timeout_fails_naming_what_hung():
    release = threading.Event()
    try:
        with pytest.raises(AssertionError, match=r"1 session\(s\) of 2 still running after 0.2 s: hung"):
            side_by_side(lambda i: release.wait(10) if i else None, [(0,), (1,)], timeout=0.2, what="session")
    finally:
        release.set()
