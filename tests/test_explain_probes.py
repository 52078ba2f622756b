"""bench.explain_probes on the tiny fixture: every system answers both probes as ``core explain`` does (its top four
query words and whether they pass the issue's rule), a system not built is listed as not measured, and the
Markdown marks the failures and the default."""
from __future__ import annotations

import json

from bench.explain_decision import PROBES


def test_probes_on_bm25_follow_the_rule_and_an_unbuilt_system_is_not_measured(built):
    from bench.explain_probes import markdown, probe_rows
    from core.data.datasets import load_dataset
    from tests.conftest import run_main

    ds = load_dataset("qqp-bimpm")
    rows, skipped = probe_rows(["bm25", "densetrans"], ds)
    assert [r["system"] for r in rows] == ["bm25"] and "densetrans" in skipped and "not built" in skipped["densetrans"]
    (row,) = rows
    depression, tea = (row["probes"][q] for q in PROBES)
    assert depression["passes"] == ({w.lower() for w in depression["top4"][:2]} == {"depression", "stop"})
    assert tea["passes"] == (len({w.lower() for w in tea["top4"]} & {"health", "benefits", "green", "tea"}) >= 3)
    assert row["passes_both"] == (depression["passes"] and tea["passes"]) and row["minilm_derived"] is False
    code, out, err = run_main("explain", "--system", "bm25", "How can I stop my depression?", "--json")
    assert code == 0, err
    shown = json.loads(out.strip().splitlines()[-1])["query"]  # what `core explain` shows first
    assert depression["top4"] == [w for w, _ in sorted(shown, key=lambda x: -x[1])][:4]
    text = markdown({"command": "c", "commit": "abc", "dataset": ds.name, "default": {"system": "bm25"},
                     "rows": rows, "skipped": skipped})
    assert "| bm25 (the default) |" in text and "Not measured: densetrans" in text
    assert ("(fails)" in text) == (not row["passes_both"])
