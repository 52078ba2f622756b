"""Error Analysis timed in a real browser (bench/error_analysis_speed.py's ``time_visitor``): opening the page from
the sidebar and switching the significance test, with generous bounds for a shared CI machine; the figures of a
realistic (QQP) build are in bench/reports/error_analysis_speed.json."""
from __future__ import annotations

import pytest

pytest.importorskip("selenium")

# generous: the targets are 5 s to open and 2 s per widget change on an idle 2-core machine (see the report)
OPEN_BOUND = 30.0
WIDGET_BOUND = 10.0


def test_error_analysis_opens_and_reacts_within_bounds(second_browser, app_server):
    from bench.error_analysis_speed import time_visitor

    seconds = time_visitor(second_browser, app_server)
    print(f"\n[e2e] Error Analysis seconds: {seconds}")
    assert seconds["open"] <= OPEN_BOUND, seconds
    assert len(seconds["widget_change"]) == 2 and max(seconds["widget_change"]) <= WIDGET_BOUND, seconds
