"""ui.charts: the per-query Δ chart stays one area path, and a brush maps back to the ranks it covers."""
from ui.charts import BRUSH, brushed_ranks, delta_chart


def test_delta_chart_is_one_area_with_a_rank_brush():
    spec = delta_chart([("q1", 0.5), ("q2", 0.0), ("q3", -0.25)], "mrr: a − b").to_dict()
    assert spec["mark"]["type"] == "area"
    assert [p["name"] for p in spec["params"]] == [BRUSH]
    assert spec["params"][0]["select"]["encodings"] == ["x"]


def test_brushed_ranks_cover_whole_ranks_inside_the_brush():
    assert brushed_ranks(None, 10) is None
    assert brushed_ranks({}, 10) is None
    assert brushed_ranks({BRUSH: {}}, 10) is None
    assert brushed_ranks({BRUSH: {"rank": [2.4, 5.0]}}, 10) == range(3, 6)
    assert brushed_ranks({BRUSH: {"rank": [9.2, 0.5]}}, 10) == range(1, 10)
    assert brushed_ranks({BRUSH: {"rank": [0, 40]}}, 10) == range(1, 11)
    assert brushed_ranks({BRUSH: {"rank": [3.2, 3.8]}}, 10) is None  # no whole rank inside
