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
        # > 64 px: the grid wraps the text; a typical question fits one line of a lone column (the grid's own row)
        assert size.column_width >= 200 and (size.row_height > 64 if n > 1 else size.row_height == 35)
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


def test_rows_as_tall_as_their_text_and_the_summary_fits_its_rows():
    """One line of text gets the grid's own row height (not 70 px); long questions wrap into taller rows; the
    summary's status column says "not run (see message)" in full."""
    from ui.compare_view import ONE_LINE_ROW, longest_cell

    short = aligned_table(_result(1))
    assert layout(1, len(short), longest_cell(short)).row_height == ONE_LINE_ROW
    assert layout(4, 10, 300).row_height > 64  # wrapped: taller rows
    assert longest_cell(short) == max(len(c) for c in short["sys0"])


def test_compare_summary_and_models_status_show_no_none_and_fit(built):
    """Compare's summary sizes itself to its rows, shows a missing cell as "—" and its status column in full;
    the Models status table and Home's query splits likewise (no cut value)."""
    import json

    from core.evaluation import tie_note
    from tests.conftest import app_test

    at = app_test("pages/1_Compare.py").run()
    at.multiselect(key="compare.systems").set_value(["bm25", "densetrans"]).run()  # densetrans: not built
    at.text_input(key="compare.query").input("How do I learn Python fast?").run()
    assert not at.exception, at.exception
    summary = next(d for d in at.dataframe if "status" in d.value.columns)
    assert summary.proto.placeholder == "—"
    config = json.loads(summary.proto.columns)
    assert config["status"]["width"] == "medium"
    assert not any("ties:" in c.value for c in at.caption)  # a typed question has no qrels: no metrics, no rule
    at.button[0].click().run()  # 🎲 a dataset query with known paraphrases: per-query metrics, and their tie rule
    assert not at.exception, at.exception
    assert any(tie_note() in c.value for c in at.caption), [c.value for c in at.caption]
    home = app_test("app.py").run()
    assert not home.exception, home.exception
    splits = next(m for m in home.metric if m.label == "Query splits")
    assert splits.value.isdigit(), splits.value  # a count fits its box; the names are in a caption
    assert any(c.value.startswith("Query splits: ") for c in home.caption)
    models = app_test("pages/6_Models.py").run()
    assert not models.exception, models.exception
    status = next(d for d in models.dataframe if "seconds" in d.value.columns)
    assert status.proto.placeholder == "—"
