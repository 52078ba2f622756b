"""One pair-scoring contract on every dataset kind: a first stage scores a candidate list by its own scores restricted
to the candidates unless it declares a faster scorer; the three crashes it ends are named tests here, on user/answers
(a tiny imported candidate list, the shape of TrecQA)."""
from __future__ import annotations

import pytest

from core.data.pipeline import terms
from tests.byod_env import byod  # noqa: F401  (user/answers: a tiny candidate list in a private var)
from tests.conftest import app_test
from tests.user_system_env import plugins  # noqa: F401  (a toy plugin that defines only retrieve)


def _listed_query(ds, size: int = 3) -> str:
    return next(q for q in ds.candidates if len(ds.candidates[q]) >= size and q in ds.queries)


def test_a_first_stage_with_only_retrieve_ranks_candidate_lists(byod, plugins):  # noqa: F811
    """Was: "toy-overlap cannot score a candidate list (it has no pair scorer or encoder)"."""
    from core.serving.runner import SystemChoice, rank_many, rank_one

    _, ds = byod
    qid = _listed_query(ds)
    ranking = rank_one(SystemChoice("toy-overlap"), ds, ds.queries[qid], k=50, query_id=qid)
    assert sorted(ranking.doc_ids) == sorted(ds.candidates[qid])  # its own candidates, each scored
    query_terms = set(terms(ds.queries[qid]))
    want = {d: float(len(query_terms & set(terms(ds.corpus[d])))) for d in ds.candidates[qid]}
    assert ranking.scores == [want[d] for d in ranking.doc_ids]  # its own retrieval scores, restricted
    assert ranking.scores == sorted(ranking.scores, reverse=True)
    many = rank_many(SystemChoice("toy-overlap"), ds, {qid: ds.queries[qid]})
    assert many[qid].doc_ids == ranking.doc_ids


def test_retrieval_default_refuses_free_text_and_offers_no_occlusion(byod, plugins):  # noqa: F811
    from core.analysis.keywords import offered_methods
    from core.errors import StudioError
    from core.serving.loader import load
    from core.serving.pair_scoring import pair_scores

    _, ds = byod
    scorer = load("toy-overlap", ds)
    assert offered_methods(scorer) == []  # occlusion asks for texts outside the collection
    qid = _listed_query(ds)
    first = ds.corpus[ds.candidates[qid][0]]
    assert pair_scores(scorer, ds.corpus)([ds.queries[qid]], [first]).shape == (1,)
    with pytest.raises(StudioError, match="scores only texts of its own collection"):
        scorer.score_pairs([ds.queries[qid]], ["a text nowhere in the collection"])


def test_keywords_on_a_candidate_list_offers_the_questions_own_answers(byod):  # noqa: F811
    """Was: AttributeError: 'BM25PairScorer' object has no attribute 'search' (pages/3_Keywords.py)."""
    _, ds = byod
    qid = _listed_query(ds)
    at = app_test("pages/3_Keywords.py")
    at.session_state["dataset"] = ds.name
    at.query_params["qid"] = qid
    at.run()
    assert not at.exception, at.exception
    picker = next(box for box in at.selectbox if box.label == "Candidate A")
    own = {ds.display(d)[:80] for d in ds.candidates[qid]}
    assert all(label.split(": ", 1)[1] in own for label in picker.options[:-1]) and len(picker.options) > 1
    assert any("its own answers" in c.value for c in at.caption), [c.value for c in at.caption]
    assert at.metric, "candidate A is scored"


def test_fused_column_on_a_candidate_list(byod, plugins):  # noqa: F811
    """Was: AttributeError: 'CandidateFusion' object has no attribute 'depth' (pages/1_Compare.py)."""
    _, ds = byod
    qid = _listed_query(ds)
    at = app_test("pages/1_Compare.py")
    for key, value in {"dataset": ds.name, "qid": qid, "systems": "bm25",
                       "fuse": "bm25+toy-overlap:rrf"}.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    assert any("whole candidate list" in c.value for c in at.caption), [c.value for c in at.caption]
    fused = [r for r in at.dataframe[0].value["system"].tolist() if r.startswith("fusion@")]
    assert fused, at.dataframe[0].value


def test_core_explain_on_a_candidate_list_uses_the_questions_own_answers(byod):  # noqa: F811
    import json

    from tests.conftest import run_main

    _, ds = byod
    qid = _listed_query(ds)
    code, out, err = run_main("explain", "--dataset", ds.name, "--system", "bm25", "--json", ds.queries[qid])
    assert code == 0, err
    got = json.loads(out)
    assert got["query"] and got["score"] > 0  # the pair with the question's top answer by BM25
    code, out, err = run_main("explain", "--dataset", ds.name, "--system", "bm25", "a question typed by hand")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--candidate" in err, err
