"""``python -m core explain``: the Keywords page's per-word importance from the same function, as JSON or
text; bad input is one line and exit 2. Faithfulness and plausibility measures on toy scorers whose
answer is known by construction, and on a fixture-trained FRM."""
from __future__ import annotations

import json

import numpy as np
import pytest


def _cli(argv, capsys):
    from core.cli.main import main

    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_explain_json_is_what_the_page_shows(built_frm, capsys):
    from core.analysis.keywords import word_importance
    from core.serving.loader import load

    query, cand = "How can I stop my depression?", "How do I overcome depression?"
    code, out, err = _cli(["explain", "--system", "frm", "--method", "w", query, "--candidate", cand, "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    assert [w for w, _ in got["query"]] == ["How", "can", "I", "stop", "my", "depression"]
    assert [w for w, _ in got["candidate"]] == ["How", "do", "I", "overcome", "depression"]
    page = word_importance(load("frm", built_frm), query, cand, "w")  # the page's function
    assert [w for w, _ in got["query"]] == [w for w, _ in page.query]
    assert [x for _, x in got["query"]] == pytest.approx([x for _, x in page.query], abs=1e-6)
    e = load("frm", built_frm).explain(query, cand)
    assert [x for _, x in got["query"]] == pytest.approx(e.query_importance, abs=1e-6)


def test_explain_gradient_and_default_candidate(built_frm, capsys):
    code, out, err = _cli(["explain", "--system", "frm", "--method", "gradient", "What is the best phone to buy?"],
                          capsys)
    assert code == 0, err
    assert "input × gradient" in out and "candidate:" in out  # BM25's top hit stands in for the candidate
    code, out, _ = _cli(["explain", "--system", "frm", "--method", "gradient", "What is the best phone to buy?",
                         "--candidate", "Which phone should I buy?", "--json"], capsys)
    got = json.loads(out)
    assert len(got["query"]) == 7 and any(abs(x) > 0 for _, x in got["query"])


@pytest.mark.parametrize("query", ["???", "   ", "?!."])
def test_explain_bad_query_is_one_line_and_exit_2(tiny_data, fresh_var, capsys, query):
    code, out, err = _cli(["explain", "--system", "frm", query], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("error:")


def test_explain_a_method_a_system_does_not_offer_says_so(built_frm, capsys):
    code, _, err = _cli(["explain", "--system", "bm25", "--method", "w", "How can I stop my depression?"], capsys)
    assert code == 2 and "no per-word importance by 'w'" in err and "occlusion" in err
    assert len(err.strip().splitlines()) == 1


def test_frm_shows_occlusion_beside_its_own_w_with_their_rank_agreement(built_frm, capsys):
    from core.analysis.occlusion import spearman

    query, cand = "How can I stop my depression?", "How do I overcome depression?"
    code, out, err = _cli(["explain", "--system", "frm", "--method", "occlusion", query, "--candidate", cand,
                           "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    assert got["method"] == "occlusion" and [w for w, _ in got["query"]] == ["How", "can", "I", "stop", "my",
                                                                             "depression"]
    _, out, _ = _cli(["explain", "--system", "frm", "--method", "w", query, "--candidate", cand, "--json"], capsys)
    w = json.loads(out)["query"]
    assert got["spearman_with_w"] == pytest.approx(spearman(got["query"], w), abs=1e-4)


# ----------------------------------------------------------------------------- the measures
WORDS = "How can I stop my depression".split()


def _depression_model(queries, docs):
    """A pair model that only looks at whether the query still says "depression" (and "stop", a little)."""
    return np.asarray([0.1 + 0.8 * ("depression" in q.split()) + 0.05 * ("stop" in q.split()) for q in queries])


def test_faithfulness_prefers_the_explanation_that_names_what_the_model_uses():
    from core.analysis.keyword_quality import faithfulness

    pairs = [("How can I stop my depression ?", "How do I overcome depression ?")] * 3
    right = faithfulness(pairs, lambda q, d: [(w, 1.0 if w == "depression" else 0.5 if w == "stop" else 0.0)
                                              for w in WORDS], _depression_model)
    wrong = faithfulness(pairs, lambda q, d: [(w, 0.0 if w == "depression" else 1.0) for w in WORDS],
                         _depression_model)
    assert right.passes and not wrong.passes
    # deleting the top word drops p(duplicate) from .95 to .15 (k = 1), top-2 and top-3 to .10: AOPC (.8+.85+.85)/3
    assert right.comprehensiveness["top"] == pytest.approx((0.8 + 0.85 + 0.85) / 3, abs=1e-4)
    assert wrong.comprehensiveness["top"] == pytest.approx(0.0, abs=1e-9)  # How, can, I: the model never looks
    assert right.sufficiency["top"] < right.sufficiency["random"]


def test_plausibility_spearman_with_idf_and_stop_share():
    from core.analysis.keyword_quality import plausibility

    idf = {"how": 1.0, "can": 1.5, "i": 0.5, "stop": 4.0, "my": 2.0, "depression": 6.2}
    by_idf = [[(w, idf[w.lower()]) for w in WORDS]]
    inverted = [[(w, -idf[w.lower()]) for w in WORDS]]
    stops = {"how", "can", "i", "my"}
    look = lambda ws: np.asarray([idf[w.lower()] for w in ws])  # noqa: E731
    good, bad = plausibility(by_idf, look, stops), plausibility(inverted, look, stops)
    assert good.spearman_idf == pytest.approx(1.0) and good.stop_share_top2 == 0.0 and good.passes
    assert bad.spearman_idf == pytest.approx(-1.0) and bad.stop_share_top2 == 1.0 and not bad.passes


def test_faithfulness_runs_on_a_fixture_trained_frm(built_frm):
    from core.analysis.keyword_quality import faithfulness
    from core.analysis.keywords import word_importance
    from core.serving.loader import load

    rr = load("frm", built_frm)
    pairs = [(built_frm.corpus[p.id1], built_frm.corpus[p.id2]) for p in built_frm.pairs["test"][:4]]
    for method in ("w", "gradient"):
        f = faithfulness(pairs, lambda q, d: word_importance(rr, q, d, method).query, rr.score_pairs, draws=1)
        assert f.pairs > 0 and set(f.comprehensiveness) == {"top", "random", "bottom"}
        assert all(-1 <= v <= 1 for v in (*f.comprehensiveness.values(), *f.sufficiency.values()))
