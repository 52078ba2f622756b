"""One encode per model: a system another process is building (the CLI's `systems add`, a build) is never built a
second time by a first use in the server; the page's loader says where that build stands, then uses its result."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT

HOLDER = """
import sys, time
import core
from core.build_status import BuildStatus, system_lock, write_status
with system_lock("qqp-bimpm", "bm25") as taken:
    assert taken
    write_status("qqp-bimpm", BuildStatus("bm25", "building", 0.42, "encoding 42/100"))
    print("held", flush=True)
    sys.stdin.readline()  # until the test lets go
"""


def test_a_first_use_waits_for_the_other_processs_build_instead_of_building_again(tiny_data, fresh_var):
    from core.build_status import building_elsewhere
    from core.data.datasets import load_dataset
    from core.errors import BuildPendingError
    from core.retrieval import bm25
    from core.serving.loader import load

    ds = load_dataset("qqp-bimpm")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        note = building_elsewhere(ds.name, "bm25")
        assert note and "being built by another process, 42% (encoding 42/100)" in note
        with pytest.raises(BuildPendingError, match="being built by another process"):
            load("bm25", ds)
        assert not bm25.is_built(ds)  # nothing was built here
    finally:
        holder.communicate("go\n", timeout=60)
    deadline = time.monotonic() + 30
    while building_elsewhere(ds.name, "bm25") is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert load("bm25", ds).search("How do I learn Python fast ?", 3).doc_ids  # the lock is free: built once here
    assert bm25.is_built(ds)
