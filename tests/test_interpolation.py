"""A trained reranker interpolated with its first stage: the weight is chosen on dev by the fixed rule,
stored beside the model, applied by the one loader only over the first stage it was chosen for, and the
build checks each system against its reference as soon as it finishes."""
from __future__ import annotations

import json

import numpy as np
import pytest


def test_minmax_and_mix_by_hand():
    from core.rerank.interpolation import minmax, mix

    assert minmax([2.0, 4.0, 3.0]).tolist() == [0.0, 1.0, 0.5]
    assert minmax([5.0, 5.0]).tolist() == [0.0, 0.0]  # a constant list carries no order
    assert mix([0.2, 0.9], [10.0, 0.0], 0.0).tolist() == [0.2, 0.9]  # α = 0: the reranker's own scores
    # α = .25: .75 · minmax(reranker) + .25 · minmax(first stage)
    assert mix([0.2, 0.9, 0.55], [10.0, 0.0, 5.0], 0.25) == pytest.approx([0.25, 0.75, 0.5])


def test_rule_picks_the_best_dev_mrr_and_prefers_the_reranker_on_ties():
    from core.rerank.interpolation import GRID, choose

    qrels = {"q1": {"a": 1}, "q2": {"c": 1}}
    # the reranker puts the relevant candidate second for q1; BM25 has it first by a wide margin; both agree on q2
    # (no exact tie at a grid point: a tie would be broken by the contract's rule, doc id descending)
    helped = {"q1": (["a", "b"], [0.40, 0.50], [9.0, 1.0]), "q2": (["c", "d"], [0.9, 0.1], [2.0, 1.0])}
    alpha, table = choose(helped, qrels)
    assert alpha > 0 and table[f"{alpha:.1f}"]["mrr@100"] == max(v["mrr@100"] for v in table.values())
    assert table["0.0"]["mrr@100"] == pytest.approx(0.75)  # q1: rank 2, q2: rank 1
    assert set(table) == {f"{a:.1f}" for a in GRID}
    # the reranker is right everywhere: every α that keeps it right ties, the smallest (0) wins
    right = {"q1": (["a", "b"], [0.9, 0.1], [1.0, 9.0]), "q2": (["c", "d"], [0.9, 0.1], [1.0, 2.0])}
    assert choose(right, qrels)[0] == 0.0


class _Fixed:
    """A reranker whose scores are given (the interpolation is the base class's)."""

    @staticmethod
    def make(scores):
        from core.retrieval.base import Reranker

        class Fixed(Reranker):
            name = "fixed"

            def score_pairs(self, queries, docs):
                return np.asarray([scores[d] for d in docs], dtype=float)

        return Fixed()


def test_served_ranking_mixes_only_over_the_first_stage_it_was_chosen_for():
    from core.rerank.interpolation import Interpolation
    from core.retrieval.base import Ranking

    corpus = {"a": "alpha", "b": "beta"}
    reranker = _Fixed.make({"alpha": 0.4, "beta": 0.5})
    bm25 = Ranking("bm25", ["a", "b"], [9.0, 1.0])
    assert reranker.rerank("q", bm25, corpus).doc_ids == ["b", "a"]  # no weight: its own order
    reranker.interpolation = Interpolation(weight=0.5, first_stage="bm25", depth=20)
    mixed = reranker.rerank("q", bm25, corpus)
    assert mixed.doc_ids == ["a", "b"] and mixed.scores == pytest.approx([0.5, 0.5 * 1.0])
    many = reranker.rerank_many({"q": "q"}, {"q": bm25}, corpus)
    assert many["q"].doc_ids == ["a", "b"]  # the batched path serves the same ranking
    other = Ranking("minilm", ["a", "b"], [9.0, 1.0])  # another first stage: the weight does not apply
    assert reranker.rerank("q", other, corpus).doc_ids == ["b", "a"]
    assert reranker.score_pairs(["q", "q"], ["alpha", "beta"]).tolist() == [0.4, 0.5]  # pair scores untouched


def test_a_partner_that_is_not_the_first_stage_is_scored_on_the_same_pairs():
    """FRM and the cross-encoder mix in their reference's score (not BM25's): the partner scores the same
    (query, candidate) pairs in the single and the batched path."""
    from core.rerank.interpolation import Interpolation
    from core.retrieval.base import Ranking

    corpus = {"a": "alpha", "b": "beta"}
    reranker = _Fixed.make({"alpha": 0.4, "beta": 0.5})
    partner = _Fixed.make({"alpha": 1.0, "beta": 0.0})
    bm25 = Ranking("bm25", ["a", "b"], [1.0, 9.0])  # BM25 prefers b: a mix with BM25 would keep b first
    reranker.interpolation = Interpolation(weight=0.6, first_stage="bm25", depth=20, partner="minilm-pairs")
    reranker.partner = partner
    mixed = reranker.rerank("q", bm25, corpus)
    assert mixed.doc_ids == ["a", "b"] and mixed.scores == pytest.approx([0.6, 0.4])
    assert reranker.rerank_many({"q": "q"}, {"q": bm25}, corpus)["q"].doc_ids == ["a", "b"]
    assert reranker.score_pairs(["q"], ["alpha"]).tolist() == [0.4]  # pair scores are the reranker's own


def test_apply_loads_the_partner_through_the_loader(tmp_path):
    from core.rerank.interpolation import Interpolation, apply, write

    reranker = _Fixed.make({})
    write(tmp_path, Interpolation(weight=0.3, first_stage="bm25", depth=20, partner="minilm-pairs"))
    asked = []
    apply(reranker, tmp_path, partner_loader=lambda name: asked.append(name) or "scorer")
    assert asked == ["minilm-pairs"] and reranker.partner == "scorer" and reranker.interpolation.weight == 0.3
    plain = _Fixed.make({})
    write(tmp_path, Interpolation(weight=0.3, first_stage="bm25", depth=20, partner="bm25"))
    apply(plain, tmp_path, partner_loader=lambda name: pytest.fail("the first stage needs no loader"))
    assert plain.partner is None and plain.interpolation.partner == "bm25"


def test_build_chooses_the_weight_stores_it_and_checks_held_out_as_it_goes(built, monkeypatch, capsys):
    """Tiny fixture: BM25 and the CNN reranker; the weight file sits beside the model, the loader applies it,
    and the held-out verdict is printed right after the CNN finishes (before the next system starts)."""
    from core.build import build_all, read_status
    from core.data.datasets import load_dataset
    from core.registry import get_spec, system_dir
    from core.rerank import cnn, interpolation
    from core.serving.loader import load

    order = []
    real = cnn.build

    def small_build(dataset, **kw):
        order.append("cnn-rerank")
        return real(dataset, train_config=cnn.CNNTrainConfig(epochs=1, quick_pair_budget=0, dev_queries=0), **kw)

    monkeypatch.setattr(cnn, "build", small_build)
    build_all("qqp-bimpm", systems=["cnn-rerank"])  # one job: in this process, so the small recipe applies
    out = capsys.readouterr().out
    lines = out.splitlines()
    held = [i for i, line in enumerate(lines) if line.startswith("[held-out] cnn-rerank")]
    done = [i for i, line in enumerate(lines) if line.startswith("[build] cnn-rerank: ready")]
    assert order == ["cnn-rerank"] and held and done and held[0] == done[0] + 1, out  # checked as it finished
    dataset = load_dataset("qqp-bimpm")
    chosen = interpolation.read(system_dir(dataset.name, "cnn-rerank"))
    assert chosen is not None and chosen.first_stage == "bm25" and chosen.weight in interpolation.GRID
    assert set(chosen.dev) == {f"{a:.1f}" for a in interpolation.GRID} and chosen.dev_queries > 0
    status = read_status(dataset, get_spec("cnn-rerank"))
    assert status.metrics["interpolation"]["weight"] == chosen.weight
    served = load("cnn-rerank", dataset)
    assert (served.interpolation is not None) == (chosen.weight > 0)
    stored = json.loads(interpolation.path_for(system_dir(dataset.name, "cnn-rerank")).read_text())
    assert stored["rule"] == interpolation.RULE
