"""AppTest: home, Compare and Models pages on the tiny fixture."""
from __future__ import annotations


from tests.conftest import app_test


_app = app_test


def test_home_shows_dataset_and_systems(built):
    at = _app("app.py").run()
    assert not at.exception
    from core.data.datasets import load_dataset

    stats = load_dataset("qqp-bimpm").stats()  # the tiny fixture: 244 questions, 123 queries
    shown = {m.label: m.value for m in at.metric}
    assert shown["Collection"] == f"{stats['collection']:,}" and shown["Queries"] == f"{stats['queries']:,}", shown
    assert shown["Judged pairs (qrels)"] == f"{stats['judged pairs (qrels)']:,}", shown
    assert any("bm25" in str(df.value) for df in at.dataframe)


def test_compare_one_column_per_system_and_missing_artifact(built):
    at = _app("pages/1_Compare.py").run()
    assert not at.exception
    at.multiselect(key="compare.systems").set_value(["bm25", "densetrans"]).run()
    at.text_input(key="compare.query").input("How do I learn Python fast ?").run()
    assert not at.exception
    summary, aligned = at.dataframe[0].value, at.dataframe[1].value
    assert summary["system"].tolist() == ["bm25", "densetrans"]
    assert list(aligned.columns) == ["#", "bm25"]  # one aligned table: a column per system that ran
    assert aligned["#"].tolist() == list(range(1, len(aligned) + 1))
    assert all("python" in c.lower() or "learn" in c.lower() for c in aligned["bm25"][:2]), aligned["bm25"][:2]
    assert any(e.value.startswith("densetrans:") and "python -m core train --system densetrans" in e.value
               for e in at.error), [e.value for e in at.error]


def test_compare_dataset_query_marks_relevance(built):
    at = _app("pages/1_Compare.py")
    at.query_params["qid"] = "q00000"
    at.run()
    assert not at.exception
    assert any("removed from its own ranking" in c.value for c in at.caption)
    table = at.dataframe[1].value  # the aligned table (the first one is the per-system summary)
    assert "q00000" not in table.to_string()
    assert any(c.startswith("✅") for c in table["bm25"]), table["bm25"].tolist()  # its paraphrase, marked


def test_compare_rejects_huge_query(built):
    at = _app("pages/1_Compare.py").run()
    at.text_input(key="compare.query").input("why " * 600).run()
    assert not at.exception
    assert any("limit" in e.value for e in at.error)


def test_compare_refuses_a_query_without_words(built):
    at = _app("pages/1_Compare.py").run()
    at.multiselect(key="compare.systems").set_value(["bm25"]).run()
    for text in ("???", "!!"):
        at.text_input(key="compare.query").input(text).run()
        assert not at.exception
        assert [e.value for e in at.error if "no words" in e.value] and len(at.error) == 1, [e.value for e in at.error]
        assert not at.dataframe  # no ranking


def test_compare_user_label_mark_however_the_question_is_typed(built):
    """A label given to "How do I learn Python fast?" marks the same hit for "how do i learn python fast"."""
    from core.data.datasets import load_dataset
    from core.judging.database import default_url
    from core.judging.judgments import JudgmentStore
    from core.serving.runner import SystemChoice, rank_one

    ds = load_dataset("qqp-bimpm")
    query = "How do I learn Python fast?"
    top = rank_one(SystemChoice("bm25"), ds, query, 3).doc_ids
    JudgmentStore(default_url()).set_label("alice", ds.name, query, top[1], ds.corpus[top[1]], 2)
    at = _app("pages/1_Compare.py").run()
    at.multiselect(key="compare.systems").set_value(["bm25"]).run()
    at.text_input(key="compare.query").input("how do i learn python fast").run()
    assert not at.exception
    column = at.dataframe[1].value["bm25"].tolist()
    assert "👤2" in column[1], column


def test_models_page(built):
    at = _app("pages/6_Models.py").run()
    assert not at.exception
    assert "bm25" in at.dataframe[0].value["system"].tolist()


def test_compare_fused_column_names_missing_parts_and_bad_links(built):
    at = _app("pages/1_Compare.py")
    at.query_params["fuse"] = "bm25+nosuch:rrf"
    at.run()
    assert not at.exception
    assert any("fusion 'bm25+nosuch:rrf' ignored" in t.value for t in at.text), [t.value for t in at.text]
    at.multiselect(key="compare.fuse_parts").set_value(["bm25", "densetrans"]).run()
    at.text_input(key="compare.query").input("How do I learn Python fast ?").run()
    assert not at.exception
    assert at.dataframe[0].value["system"].tolist() == ["bm25", "fusion@bm25+densetrans:rrf"]
    assert any(e.value.startswith("fusion@bm25+densetrans:rrf:") and "python -m core train --system densetrans"
               in e.value for e in at.error), [e.value for e in at.error]
    assert at.query_params["fuse"] == "bm25+densetrans:rrf"  # the link keeps the fused column


def test_compare_marks_user_labels(built):
    """The 👤 mark (a label from Annotate) shows on Compare; it never could (a missing import was swallowed)."""
    from core.data.datasets import load_dataset
    from core.judging.database import default_url
    from core.judging.judgments import JudgmentStore
    from core.serving.runner import SystemChoice, rank_one

    ds = load_dataset("qqp-bimpm")
    query = "How do I learn Python fast?"
    top = rank_one(SystemChoice("bm25"), ds, query, 3).doc_ids
    store = JudgmentStore(default_url())
    store.set_label("alice", ds.name, query, top[1], ds.corpus[top[1]], 2)
    at = _app("pages/1_Compare.py").run()
    at.multiselect(key="compare.systems").set_value(["bm25"]).run()
    at.text_input(key="compare.query").input(query).run()
    assert not at.exception
    column = at.dataframe[1].value["bm25"].tolist()
    assert "👤2" in column[1] and not any("👤" in c for c in column[:1] + column[2:]), column
