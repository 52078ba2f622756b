"""Fusion on candidate lists: every part (BM25 as a pair scorer, a user's run file) ranks each query's own
candidates, and the fusion is the parts' scores fused per query (RRF by hand here), tuned on dev like anywhere."""
from __future__ import annotations

import numpy as np
import pytest

from tests.byod_env import byod  # noqa: F401  (user/cqa and user/answers imported in a private var)


@pytest.fixture
def with_run(byod, tmp_path):  # noqa: F811
    from core import registry
    from core.user_systems import add_user_system

    _cqa, answers = byod
    rng = np.random.default_rng(0)
    lines = [f"{q} Q0 {d} {i} {float(s)!r} mine" for q in answers.candidates
             for i, (d, s) in enumerate(zip(answers.candidates[q], rng.normal(size=len(answers.candidates[q]))), 1)]
    path = tmp_path / "mine.trec"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    registry.refresh()
    add_user_system("my-run", "run", path, "user/answers")
    yield answers
    registry.refresh()


def _rrf(rankings: list[list[str]], k: int = 60) -> dict[str, float]:
    out: dict[str, float] = {}
    for ranked in rankings:
        for r, d in enumerate(ranked, 1):
            out[d] = out.get(d, 0.0) + 1.0 / (k + r)
    return out


def test_fusion_ranks_each_querys_candidates_with_any_parts(with_run):
    from core.serving.runner import SystemChoice, rank_many

    answers = with_run
    queries = dict(answers.queries)
    fused = rank_many(SystemChoice("fusion", "bm25+my-run:rrf", options=(("untuned_ok", True),)), answers, queries)
    bm25 = rank_many(SystemChoice("bm25"), answers, queries)
    mine = rank_many(SystemChoice("my-run"), answers, queries)
    assert set(fused) == set(answers.candidates)
    for q, ranking in fused.items():
        assert sorted(ranking.doc_ids) == sorted(answers.candidates[q])  # its own candidates, nothing else
        want = _rrf([bm25[q].doc_ids, mine[q].doc_ids])
        assert ranking.scores == pytest.approx([want[d] for d in ranking.doc_ids])
        assert ranking.scores == sorted(ranking.scores, reverse=True)


def test_fusion_on_candidates_tunes_on_dev_and_serves_the_tuned_weights(with_run):
    from core.registry import system_module
    from core.serving.loader import load, part_loader

    answers = with_run
    metrics = system_module("fusion").build(answers, variant="bm25+my-run:wsum", loader=part_loader(answers))
    assert "dev" in metrics["tuned_on"] or "defaults" in metrics["tuned_on"]
    fused = load("fusion", answers, variant="bm25+my-run:wsum")
    assert fused.tuned and len(fused.params["weights"]) == 2
    q = next(iter(answers.candidates))
    from core.serving.candidates import rank_candidates

    ranking = rank_candidates(fused, answers, q)
    assert sorted(ranking.doc_ids) == sorted(answers.candidates[q])


def test_a_reranker_part_on_a_collection_is_one_line(tiny_data, fresh_var):
    from core.data.datasets import load_dataset
    from core.errors import StudioError
    from core.serving.loader import load

    with pytest.raises(StudioError, match="frm cannot search a collection"):
        load("fusion", load_dataset("qqp-bimpm"), variant="bm25+frm:rrf", untuned_ok=True)
