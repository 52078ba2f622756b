"""AppTest: Compare page state <-> URL, saving a comparison, the Case Studies page after a restart."""
from __future__ import annotations

import streamlit as st

from tests.conftest import app_test


_app = app_test


def test_link_reproduces_the_comparison_and_changes_go_back_to_the_url(built):
    at = _app("pages/1_Compare.py")
    for key, value in {"dataset": "qqp-bimpm", "qid": "q00000", "k": "3", "baseline": "bm25", "index": "hnsw"}.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception
    assert at.slider(key="compare.k").value == 3 and at.selectbox(key="compare.baseline").value == "bm25"
    assert at.selectbox(key="compare.index").value == "hnsw"
    assert at.text_input(key="compare.query").value  # the dataset query's text
    ranking = at.dataframe[1].value  # [0] is the per-system summary, [1] the aligned ranking table
    assert len(ranking) == 3 and "q00000" not in ranking.to_string() and "#" in ranking.columns
    at.slider(key="compare.k").set_value(4).run()
    assert not at.exception
    params = {k: at.query_params[k] for k in at.query_params}
    assert _last(params["k"]) == "4" and _last(params["qid"]) == "q00000" and _last(params["baseline"]) == "bm25"
    assert len(at.dataframe[1].value) == 4


def _last(value):
    return value[-1] if isinstance(value, list) else value


def test_bad_link_falls_back_with_a_visible_note(built):
    at = _app("pages/1_Compare.py")
    for key, value in {"dataset": "no-such", "k": "999", "systems": "bm25,<b>x</b>", "q": "How do I learn Python?",
                       "baseline": "nobody", "junk": "1"}.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception
    assert any("link" in w.value for w in at.warning)
    notes = "\n".join(t.value for t in at.text)
    for fragment in ("'no-such'", "k='999'", "'<b>x</b>'", "'nobody'", "'junk'"):
        assert fragment in notes
    assert at.slider(key="compare.k").value == 10 and at.multiselect(key="compare.systems").value == ["bm25"]
    assert at.text_input(key="compare.query").value == "How do I learn Python?"
    assert len(at.dataframe[1].value) == 10 and at.dataframe[0].value["system"].tolist() == ["bm25"]


def test_save_then_reopen_after_restart_with_exports(built):
    at = _app("pages/1_Compare.py")
    at.query_params["qid"] = "q00000"
    at.query_params["k"] = "3"
    at.run()
    at.text_input(key="compare.save_title").input("Funding *case* <b>1</b>")
    at.text_input(key="compare.save_author").input("Ada")
    at.text_area(key="compare.save_note").input("bm25 finds it at #1")
    at.button[[b.label for b in at.button].index("💾 Save this comparison")].click().run()
    assert not at.exception
    assert any("Saved as case study #1" in s.value for s in at.success)
    assert any(b.label == "⬇️ LaTeX" for b in at.get("download_button"))

    st.cache_resource.clear()  # an app restart: nothing cached survives, only the database
    page = _app("pages/7_Case_Studies.py").run()
    assert not page.exception
    listing = page.dataframe[0].value
    assert listing["title"].tolist() == ["Funding *case* <b>1</b>"] and listing["author"].tolist() == ["Ada"]
    texts = [t.value for t in page.text]
    assert "Title:   Funding *case* <b>1</b>" in texts and "Note:    bm25 finds it at #1" in texts
    assert not any("<b>" in m.value for m in page.markdown)  # user text only through st.text / st.dataframe
    saved = page.dataframe[1].value
    assert len(saved) == 3 and saved["#"].tolist() == [1, 2, 3]

    page.toggle(key="cases.rerun.1").set_value(True).run()
    assert not page.exception
    assert any("RBO vs saved 1.00" in c.value and "unchanged" in c.value for c in page.caption)
    assert page.dataframe[2].value["change"].tolist() == ["=", "=", "="]

    form = [t for t in page.text_input if t.label == "Title"][0]
    form.set_value("Renamed")
    page.button[[b.label for b in page.button].index("Save changes")].click().run()
    assert not page.exception
    assert page.dataframe[0].value["title"].tolist() == ["Renamed"]

    page.checkbox(key="cases.sure.1").check().run()
    page.button(key="cases.delete.1").click().run()
    assert not page.exception
    assert any("No saved case studies" in i.value for i in page.info)


def test_compare_why_explains_a_row_and_the_saved_case_keeps_it(built):
    """Compare's "why": any row of any system, a heatmap and the top words in one line; the saved case study and
    its Markdown export keep the explanation."""
    from core.judging.case_tables import escape_markdown, to_markdown
    from core.judging.database import default_url
    from ui.cache import case_store

    at = _app("pages/1_Compare.py")
    at.query_params["qid"] = "q00000"
    at.query_params["k"] = "3"
    at.run()
    assert not at.exception
    at.selectbox(key="compare.why.system").set_value("bm25").run()
    at.selectbox(key="compare.why.rank.bm25").set_value(1).run()
    at.checkbox(key="compare.why.on").check().run()
    assert not at.exception, at.exception
    line = next(t.value for t in at.text if t.value.startswith("bm25 (occlusion, score"))
    assert "query words" in line and "candidate words" in line
    assert any("per pair" in c.value and "exact values on hover" in c.value for c in at.caption)
    assert any("keeps 1 explained row" in c.value for c in at.caption)
    at.text_input(key="compare.save_title").input("why")
    at.text_input(key="compare.save_author").input("Ada")
    at.button[[b.label for b in at.button].index("💾 Save this comparison")].click().run()
    assert not at.exception
    saved = case_store(default_url()).list()[0]
    kept = saved.table.explanations
    assert len(kept) == 1 and kept[0].system == "bm25" and kept[0].rank == 2 and kept[0].method == "occlusion"
    md = to_markdown(saved.table)
    assert "Why (word importance" in md and escape_markdown(kept[0].line()) in md
