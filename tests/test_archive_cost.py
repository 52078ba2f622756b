"""bench.archive_cost on a tiny archive (the cheap stages only: the heavy ones are benchmarks, not tests): each stage
runs in its own process with its seconds and the peak memory of its process tree, stages not asked for are recorded
as not measured, and BENCHMARKS.md's table renders from the report saying the archive is synthetic and the machine
shared, with "not measured" in the cells the run did not measure."""
from __future__ import annotations

import json


def test_the_cheap_stages_are_measured_and_the_rest_said_not_measured(tiny_data, tmp_path, monkeypatch):
    from bench import archive_cost, table_format
    from bench.archive_cost_table import archive_cost_table

    out = tmp_path / "reports" / "archive_cost.json"
    out.parent.mkdir()
    assert archive_cost.main(["--sizes", "150", "--encode-sizes", "--work", str(tmp_path / "work"),
                              "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    (row,) = report["rows"]
    assert row["n"] == 150 and row["generate"]["documents"] == 150 and row["import"]["dataset"] == "user/archive-150"
    for stage in ("generate", "import", "bm25"):
        assert row[stage]["peak_all_mb"] > 0 and row[stage]["driver_peak_mb"] > 0 and row[stage]["wall_seconds"] > 0
    assert row["bm25"]["index_bytes"] > 0 and row["bm25"]["query"]["n"] > 0
    assert all(row[s] == {"not_measured": True} for s in ("encode", "index", "tree"))
    assert report["finished"] and "cost, not quality" in report["archive"] and report["python_speed_before"] > 0
    monkeypatch.setattr(table_format, "REPORTS", out.parent)
    text = "\n".join(archive_cost_table())
    assert "### Cost as the archive grows" in text and "cost, not quality" in text and "shared with other work" in text
    assert "| N = 150 |" in text and text.count("not measured") >= 9
    assert "| MiniLM encode to shards (Ray Data pool): s · peak | not measured |" in text
    assert "linear, not measured" in text and "| BM25 build | 150 |" in text
    assert set(report["projection"]["stages"]) == {"generate", "import", "bm25"}  # nothing projected unmeasured
