"""A zero-shot system builds on first use, as the other untrained ones do: ``minilm-pairs`` on an imported dataset
ranks without ``core train``, reporting its encoding's progress (the loader's and the CLI's bar)."""
from __future__ import annotations

from tests.conftest import run_main
from tests.byod_env import byod  # noqa: F401  (user/cqa and user/answers imported in a private var)


def test_minilm_pairs_encodes_on_first_use_with_progress(byod):  # noqa: F811
    from core.rerank import biencoder
    from core.serving.loader import load

    _cqa, answers = byod
    assert not biencoder.is_built(answers)
    seen: list[tuple[float, str]] = []
    scorer = load("minilm-pairs", answers, progress=lambda f, m: seen.append((f, m)))
    assert biencoder.is_built(answers) and scorer.name == "minilm-pairs"
    assert seen and seen[-1][0] == 1.0 and any(0.0 < f < 1.0 for f, _ in seen)
    q = next(iter(answers.candidates))
    from core.serving.candidates import rank_candidates

    assert sorted(rank_candidates(scorer, answers, q).doc_ids) == sorted(answers.candidates[q])


def test_cli_eval_of_minilm_pairs_needs_no_train(byod):  # noqa: F811
    code, out, err = run_main("eval", "--system", "minilm-pairs", "--dataset", "user/answers", "--metrics", "map@100")
    assert code == 0, err
    assert "note: building the minilm-pairs zero-shot encoding (no training) for user/answers" in err
    assert "load minilm-pairs" in err  # the load's progress bar
    assert "map@100" in out
