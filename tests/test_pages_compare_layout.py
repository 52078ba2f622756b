"""The Compare page's aligned layout as data (ui/compare_view.py): 1–8 systems, marks, stacking."""
from __future__ import annotations

from core.analysis.compare import Comparison, Hit, SystemChoice, SystemResult
from core.retrieval.base import Ranking
from ui.compare_view import MAX_PER_TABLE, aligned_table, layout, mark, stacks, summary_rows


def _result(n_systems: int, k: int = 5, baseline: str | None = None) -> Comparison:
    results = []
    for s in range(n_systems):
        docs = [f"d{(s + i) % 7}" for i in range(k - (s % 2))]  # odd systems return one hit fewer
        ranking = Ranking(f"sys{s}", docs, [1.0 - 0.1 * i for i in range(len(docs))], 0.002)
        hits = [Hit(i + 1, d, f"question {d} <b>not html</b>", 1.0 - 0.1 * i, 1 if d == "d0" else None,
                    2 if d == "d1" else None, None, 1) for i, d in enumerate(docs)]
        results.append(SystemResult(SystemChoice(f"sys{s}"), ranking, hits))
    results.append(SystemResult(SystemChoice("broken"), error="not built: python -m core train --system broken"))
    return Comparison("q", None, k, baseline, results, {}, {}, [])


def test_one_to_eight_systems_fit_balanced_tables():
    for n in range(1, 9):
        groups = stacks(n)
        assert sum(len(g) for g in groups) == n and all(len(g) <= MAX_PER_TABLE for g in groups)
        assert max(len(g) for g in groups) - min(len(g) for g in groups) <= 1
        size = layout(max(len(g) for g in groups), 10)
        assert size.column_width >= 200 and size.row_height > 64  # > 64 px: the grid wraps the text
    assert [len(g) for g in stacks(8)] == [4, 4] and [len(g) for g in stacks(5)] == [3, 2]


def test_aligned_table_rank_rows_system_columns_and_marks():
    result = _result(8)
    tables = [aligned_table(result, g) for g in stacks(8)]
    assert [list(t.columns) for t in tables] == [["#", "sys0", "sys1", "sys2", "sys3"], ["#", "sys4", "sys5", "sys6", "sys7"]]
    first = tables[0]
    assert first["#"].tolist() == [1, 2, 3, 4, 5]
    assert first["sys1"].iloc[-1] == ""  # a shorter ranking leaves its last rank empty
    assert first["sys0"].iloc[0].startswith("✅") and "question d0 <b>not html</b>" in first["sys0"].iloc[0]
    assert first["sys0"].iloc[1].startswith("👤2")
    assert first["sys0"].iloc[0].endswith("(1.000)")
    rows = summary_rows(result)
    assert [r["system"] for r in rows][-1] == "broken" and rows[-1]["status"].startswith("not run")
    assert rows[0]["ms"] == 2.0


def test_marks_sharing_and_movement():
    hit = Hit(1, "d", "t", 0.5, None, None, 3, 8)
    assert mark(hit, 8) == "▫️◆" and mark(Hit(1, "d", "t", 0.5, 1, 0, None, 1), 8) == "✅👤0◇"
    table = aligned_table(_result(2, baseline="sys0"))
    assert "· new)" in table["sys0"].iloc[0]  # movement against the baseline is in the cell
