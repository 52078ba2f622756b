"""AppTest: home, Compare and Models pages on the tiny fixture."""
from __future__ import annotations


from tests.conftest import app_test


_app = app_test


def test_home_shows_dataset_and_systems(built):
    at = _app("app.py").run()
    assert not at.exception
    assert at.metric[0].value == "123" or int(at.metric[0].value.replace(",", "")) > 100
    assert any("bm25" in str(df.value) for df in at.dataframe)


def test_compare_one_column_per_system_and_missing_artifact(built):
    at = _app("pages/1_Compare.py").run()
    assert not at.exception
    at.multiselect(key="compare.systems").set_value(["bm25", "densetrans"]).run()
    at.text_input(key="compare.query").input("How do I learn Python fast ?").run()
    assert not at.exception
    assert [h.value for h in at.subheader][:2] == ["bm25", "densetrans"]
    assert len(at.dataframe) >= 1  # bm25's column
    assert any("python -m core train --system densetrans" in e.value or "not implemented" in e.value
               or "densetrans" in e.value for e in at.error)


def test_compare_dataset_query_marks_relevance(built):
    at = _app("pages/1_Compare.py")
    at.query_params["qid"] = "q00000"
    at.run()
    assert not at.exception
    assert any("removed from its own ranking" in c.value for c in at.caption)
    table = at.dataframe[0].value
    assert "q00000" not in table.to_string()


def test_compare_rejects_huge_query(built):
    at = _app("pages/1_Compare.py").run()
    at.text_input(key="compare.query").input("why " * 600).run()
    assert not at.exception
    assert any("limit" in e.value for e in at.error)


def test_models_page(built):
    at = _app("pages/6_Models.py").run()
    assert not at.exception
    assert "bm25" in at.dataframe[0].value["system"].tolist()
