"""Occlusion for any system that scores a pair: faithful by construction on a model whose answer is known, one
batched call per pair, BM25's exact per-term contributions, bi-encoders through their own similarity, the CLI
for retrievers and a user bi-encoder, and one line for bad input or a system that cannot score a pair."""
from __future__ import annotations

import json

import numpy as np
import pytest

from core.retrieval.base import Reranker


class CountingModel(Reranker):
    """A pair model that reads only "depression" (and "stop", a little) in the query and "overcome" in the
    candidate; counts its calls."""

    name = "toy-pairs"

    def __init__(self) -> None:
        self.calls = 0

    def score_pairs(self, queries, docs):
        self.calls += 1
        q = np.asarray([0.6 * ("depression" in x.split()) + 0.2 * ("stop" in x.split()) for x in queries])
        return q + np.asarray([0.1 * ("overcome" in d.split()) for d in docs])


def _cli(argv, capsys):
    from core.cli.main import main

    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_occlusion_names_what_the_model_reads_in_one_call():
    from core.analysis.keywords import offered_methods, word_importance

    model = CountingModel()
    assert offered_methods(model) == ["occlusion"]
    got = word_importance(model, "How can I stop my depression?", "How do I overcome depression?")
    assert model.calls == 1  # every variant of the pair in one call
    q, d = dict(got.query), dict(got.candidate)
    assert got.top(2) == ["depression", "stop"]
    assert q["depression"] == pytest.approx(0.6) and q["stop"] == pytest.approx(0.2)
    assert all(q[w] == 0 for w in ("How", "can", "I", "my"))
    assert d["overcome"] == pytest.approx(0.1) and got.score == pytest.approx(0.9)


def test_one_word_sides_and_a_long_candidate_are_handled():
    from core.analysis.keywords import word_importance

    got = word_importance(CountingModel(), "depression", "overcome " + "word " * 1200)  # > 5,000 characters
    assert got.query == [("depression", pytest.approx(0.7))]  # a lone word carries the whole score
    assert any("one word" in n for n in got.notes)
    assert [w for w, _ in got.candidate] == ["overcome", "word"]
    assert dict(got.candidate)["overcome"] == pytest.approx(0.1)


def test_bm25_terms_are_exact_and_occlusion_equals_them_on_the_query(built):
    from core.analysis.keywords import offered_methods, word_importance
    from core.data.datasets import load_dataset
    from core.serving.loader import load

    ds = load_dataset("qqp-bimpm")
    bm25 = load("bm25", ds)
    assert offered_methods(bm25) == ["occlusion", "terms"]
    query = ds.queries[next(iter(ds.queries))]
    hits = bm25.search(query, 5)
    texts = [ds.corpus[d] for d in hits.doc_ids]
    assert bm25.score_text_pairs([query] * len(texts), texts) == pytest.approx(hits.scores, rel=1e-5)
    for text, score in zip(texts, hits.scores):
        exact = word_importance(bm25, query, text, "terms")
        assert sum(x for _, x in exact.query) == pytest.approx(score, rel=1e-5)
        assert sum(x for _, x in exact.candidate) == pytest.approx(score, rel=1e-5)
        occluded = word_importance(bm25, query, text, "occlusion")
        assert [w for w, _ in occluded.query] == [w for w, _ in exact.query]
        assert [x for _, x in occluded.query] == pytest.approx([x for _, x in exact.query], abs=1e-5)


def test_a_bi_encoder_is_explained_through_its_own_similarity(built):
    from core.analysis.keywords import word_importance
    from core.data.datasets import load_dataset
    from core.serving.loader import load
    from core.serving.pair_scoring import pair_scores

    ds = load_dataset("qqp-bimpm")
    glove = load("glove-mean", ds)
    q, d = "How can I stop my depression?", "How do I overcome depression?"
    score = pair_scores(glove)
    hit = glove.search(q, 1)
    assert score([q], [ds.corpus[hit.doc_ids[0]]])[0] == pytest.approx(hit.scores[0], abs=1e-4)
    got = word_importance(glove, q, d)
    assert got.method == "occlusion" and len(got.query) == 6 and any(abs(x) > 1e-4 for _, x in got.query)


def test_a_system_that_cannot_score_a_pair_is_one_line():
    from core.analysis.keywords import offered_methods, word_importance
    from core.errors import StudioError
    from core.registry import get_spec

    class Ranked:
        name = "fixed"

    assert offered_methods(Ranked()) == []
    with pytest.raises(StudioError, match="fixed cannot score a .query, candidate. pair"):
        word_importance(Ranked(), "How can I stop my depression?", "How do I overcome depression?")
    with pytest.raises(StudioError, match="tree-bert cannot score"):
        word_importance(CountingModel(), "a b c", "d e f", spec=get_spec("tree-bert"))


@pytest.mark.parametrize("system", ["bm25", "glove-mean"])
def test_cli_explains_retrievers_by_occlusion(built, capsys, system):
    code, out, err = _cli(["explain", "--system", system, "How can I stop my depression?", "--candidate",
                           "How do I overcome depression?", "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    assert got["method"] == "occlusion" and got["system"] == system
    assert [w for w, _ in got["query"]] == ["How", "can", "I", "stop", "my", "depression"]


@pytest.mark.parametrize("argv, says", [
    (["--system", "tree-bert", "How can I stop my depression?"], "tree-bert cannot score"),
    (["--system", "fusion", "How can I stop my depression?"], "cannot score"),
    (["--system", "bm25", ""], "the query is empty"),
    (["--system", "bm25", "depression", "--candidate", "x" * 10_001], "the candidate has 10,001 characters"),
    (["--system", "bm25", "--method", "magic", "depression"], "unknown method"),
])
def test_cli_bad_input_is_one_line_and_exit_2(built, capsys, argv, says):
    code, out, err = _cli(["explain", *argv], capsys)
    assert code == 2 and out == "" and says in err and len(err.strip().splitlines()) == 1


def test_cli_one_word_query_and_long_candidate(built, capsys):
    code, out, err = _cli(["explain", "--system", "bm25", "depression", "--candidate",
                           "depression " + "help " * 1000, "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    assert [w for w, _ in got["query"]] == ["depression"] and any("one word" in n for n in got["notes"])


def test_cli_explains_a_user_bi_encoder_and_refuses_a_fixed_run(built, capsys, tmp_path):
    from core import registry
    from tests.user_system_env import model_copy

    registry.refresh()
    try:
        folder = model_copy(tmp_path)
        assert _cli(["systems", "add", "my-minilm", "--bi-encoder", str(folder), "--dataset", "qqp-bimpm"],
                    capsys)[0] == 0
        code, out, err = _cli(["explain", "--system", "my-minilm", "How can I stop my depression?", "--candidate",
                               "How do I overcome depression?", "--json"], capsys)
        assert code == 0, err
        got = json.loads(out)
        assert got["method"] == "occlusion" and len(got["query"]) == 6
        assert -1.0 <= got["score"] <= 1.0 + 1e-6 and any(abs(x) > 1e-4 for _, x in got["query"])

        run_file = tmp_path / "bm25.trec"
        assert _cli(["eval", "--system", "bm25", "--split", "all", "--run-out", str(run_file)], capsys)[0] == 0
        assert _cli(["systems", "add", "my-run", "--run", str(run_file), "--dataset", "qqp-bimpm"], capsys)[0] == 0
        code, out, err = _cli(["explain", "--system", "my-run", "How can I stop my depression?", "--candidate",
                               "How do I overcome depression?"], capsys)
        assert code == 2 and out == "" and "my-run shows no per-word importance" in err  # a fixed run scores no free text
        assert len(err.strip().splitlines()) == 1
    finally:
        registry.refresh()


def test_top_words_of_the_model_beat_random_and_a_wrong_explanation_does_not():
    from core.analysis.explanation_quality import pairwise_faithfulness

    model = CountingModel()
    pairs = [("How can I stop my depression ?", f"How do I overcome depression {i} ?") for i in range(40)]
    pairs += [("What can I do to stop my depression now ?", "Is depression curable ?")] * 10
    right = pairwise_faithfulness(pairs, lambda q, d: [(w, 1.0 if w == "depression" else .5 if w == "stop" else 0.)
                                                       for w in q.split()], model.score_pairs)
    wrong = pairwise_faithfulness(pairs, lambda q, d: [(w, 0.0 if w in ("depression", "stop") else 1.0)
                                                       for w in q.split()], model.score_pairs)
    assert right.summary["more_faithful_than_random"] and right.summary["verdict"].startswith("more faithful")
    assert not wrong.summary["more_faithful_than_random"]
    assert wrong.summary["verdict"].startswith("NOT more faithful than random")
    comp = right.summary["comprehensiveness"]["top_minus_random"]
    assert comp[1] > 0 and comp[1] <= comp[0] <= comp[2] and right.pairs == 50
    assert right.summary["gain"] > wrong.summary["gain"]


def test_a_case_study_keeps_its_explanations_through_save_and_export():
    from core.analysis.keywords import word_importance
    from core.judging.case_explanations import CaseExplanation
    from core.judging.case_tables import CaseTable, escape_markdown, to_markdown

    why = word_importance(CountingModel(), "How can I stop my depression?", "How do I overcome depression?")
    kept = CaseExplanation.of("toy-pairs", 2, "q7", why)
    table = CaseTable("qqp-bimpm", "How can I stop my depression?", None, 3, (), explanations=(kept,))
    again = CaseTable.from_dict(table.to_dict())
    assert again.explanations == (kept,)
    md = to_markdown(again)
    assert kept.line().startswith("toy-pairs #2 (occlusion, score 0.900): query depression +0.600, stop +0.200")
    assert escape_markdown(kept.line()) in md
