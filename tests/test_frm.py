"""FRM's model: keyword sets, the 4 assignment rules, Eq. (9), BM25 weights, overfitting a toy set, the ablations and
the keyword-agreement loss. FRM as a system (build, rerank, the real training loop): tests/test_frm_system.py."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core.data.keywords import (LexicalStats, assign_pairs, jaccard_bucket, keyword_candidates, keyword_sets,
                           pair_weight)
from models.frm import FRM, FRMConfig, assign_levels, frm_loss, level_masks

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # one intra-op thread (tests.conftest)

FIG1_Q = ["how", "to", "keep", "the", "mobile", "phone", "cool"]
FIG1_W = [0.3, 0.1, 0.5, 0.05, 0.4, 0.85, 0.8]


# ----------------------------------------------------------------------------- keyword sets
def test_keyword_candidates_dedupe_and_cap():
    kws, mapping = keyword_candidates("How do I do it ? How", max_keywords=3)
    assert kws == ["How", "do", "I"]
    assert mapping == [0, 1, 2, 1, -1, 0]


def test_keyword_sets_figure1():
    levels = keyword_sets(FIG1_W)
    assert len(levels) == 7
    words = [[FIG1_Q[i] for i in s] for s in levels]
    assert words[0] == FIG1_Q
    assert words[1] == ["how", "to", "keep", "mobile", "phone", "cool"]  # "the" (0.05) removed
    assert words[2] == ["how", "keep", "mobile", "phone", "cool"]  # then "to" (0.1)
    assert words[-1] == ["phone"]


def test_keyword_sets_ties_remove_later_first():
    assert keyword_sets([1.0, 1.0, 1.0]) == [[0, 1, 2], [0, 1], [0]]


@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=12))
@settings(max_examples=40, deadline=None)
def test_level_masks_match_reference(weights):
    w = torch.tensor([weights], dtype=torch.float32)
    mask = torch.ones_like(w, dtype=torch.bool)
    got = level_masks(w, mask)[0].numpy()
    for level, members in enumerate(keyword_sets(np.asarray(w[0]))):
        assert sorted(np.flatnonzero(got[level]).tolist()) == members


# ----------------------------------------------------------------------------- assignment rules
def test_assignment_figure1_example():
    # paper §1: KS1(q)-KS1(d1), KS2-KS1, KS3-KS2, KS4-KS3, KS5-KS3, KS6-KS4, KS7-KS5
    assert assign_pairs(7, 5) == [(0, 0), (1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (6, 4)]


def test_rule1_equal_ratio():
    # q ratios 1, .75, .5, .25 ; d ratios 1, .5 -> level 3 of q (ratio .5) pairs level 2 of d (equal)
    assert assign_pairs(4, 2)[2] == (2, 1)
    assert assign_pairs(4, 2)[0] == (0, 0)


def test_rule2_no_equal_ratio_takes_closest_larger():
    # q ratio 2/3 has no equal in d (1, 1/2): closest larger is 1 -> d level 1
    assert assign_pairs(3, 2)[1] == (1, 0)
    # q ratio 0.6 vs d ratios 1, .75, .5, .25 -> .75
    assert assign_pairs(5, 4)[2] == (2, 1)


def test_rule3_single_keyword_levels():
    assert assign_pairs(1, 3) == [(0, 2)]  # |KS(q)| = 1 pairs d's one-keyword set
    assert assign_pairs(3, 1) == [(0, 0), (1, 0), (2, 0)]
    assert assign_pairs(2, 5)[-1] == (1, 4)


def test_rule4_no_pairs_for_empty_question():
    assert assign_pairs(0, 3) == []
    assert assign_pairs(3, 0) == []


def test_vectorised_assignment_matches_rules():
    nq, nd = np.meshgrid(np.arange(0, 13), np.arange(0, 13))
    nq, nd = torch.as_tensor(nq.ravel()), torch.as_tensor(nd.ravel())
    assigned, valid = assign_levels(nq, nd, 12, 12)
    for i in range(len(nq)):
        ref = dict(assign_pairs(int(nq[i]), int(nd[i])))
        got = {m: int(assigned[i, m]) for m in range(12) if valid[i, m]}
        assert got == ref, (int(nq[i]), int(nd[i]))


# ----------------------------------------------------------------------------- Eq. (9)
def test_pair_weight_hand_computed():
    imp_q, imp_d = [0.5, 1.0, 0.25], [0.8, 0.2]
    # (0.5 + 1.0) / 3 * 0.8 / 2 = 0.2
    assert pair_weight(imp_q, [0, 1], imp_d, [0]) == pytest.approx(0.2)


def _toy_batch(b=2, lq=4, ld=3, h=8, seed=0, tfidf_q=None, tfidf_d=None):
    g = torch.Generator().manual_seed(seed)
    def side(length, tfidf):
        mask = torch.ones(b, length, dtype=torch.bool)
        return {"cls": torch.randn(b, h, generator=g), "kw": torch.randn(b, length, h, generator=g), "mask": mask,
                "idf_bucket": torch.randint(0, 100, (b, length), generator=g), "pos": torch.randint(1, 10, (b, length), generator=g),
                "stop": torch.zeros(b, length), "bm25w": torch.rand(b, length, generator=g),
                "tfidf": tfidf if tfidf is not None else torch.rand(b, length, generator=g)}
    q, d = side(lq, tfidf_q), side(ld, tfidf_d)
    eq = torch.zeros(b, lq, ld)
    eq[:, 0, 0] = 1
    return {"q": q, "d": d, "eq": eq}


def test_model_pair_weights_equal_eq9():
    wq = torch.tensor([[0.9, 0.2, 0.6, 0.4]] * 2)
    wd = torch.tensor([[0.3, 0.7, 0.5]] * 2)
    model = FRM(FRMConfig(hidden=8, importance="tfidf", max_keywords=8)).eval()
    out = model.views(_toy_batch(tfidf_q=wq, tfidf_d=wd))
    lq, ld = keyword_sets(wq[0].numpy()), keyword_sets(wd[0].numpy())
    for m, n in assign_pairs(4, 3):
        assert float(out["pair_w"][0, m]) == pytest.approx(pair_weight(wq[0].numpy(), lq[m], wd[0].numpy(), ld[n]), rel=1e-5)


def test_max_levels_keeps_only_first_pairs():
    model = FRM(FRMConfig(hidden=8, max_keywords=8, max_levels=2)).eval()
    out = model.views(_toy_batch())
    assert out["valid"][:, 2:].sum() == 0 and out["valid"][:, :2].all()


# ----------------------------------------------------------------------------- lexical features
def test_bm25_weights_equal_bm25s_score():
    from core.retrieval.bm25 import BM25Config, BM25Retriever

    corpus = {"a": "how do i lose weight fast", "b": "what is the best phone", "c": "how to keep the phone cool",
              "d": "best way to lose weight"}
    retriever = BM25Retriever.index(corpus, BM25Config())
    stats = LexicalStats.from_texts(corpus.values())
    query = "lose weight phone"
    for doc_id, text in corpus.items():
        kws, _ = keyword_candidates(text)
        w = stats.bm25_weights(text, kws)
        ours = sum(wi for k, wi in zip(kws, w) if k.lower() in query.split())
        assert ours == pytest.approx(float(retriever.score_texts(query, [doc_id])[0]), rel=1e-5)


def test_jaccard_buckets_figure2():
    assert jaccard_bucket(1, 0.1) == "hard" and jaccard_bucket(0, 0.8) == "hard"
    assert jaccard_bucket(1, 0.9) == "easy" and jaccard_bucket(0, 0.0) == "easy"
    assert jaccard_bucket(1, 0.5) == "middle" and jaccard_bucket(0, 0.5) == "middle"


# ----------------------------------------------------------------------------- training
def test_frm_overfits_toy_set_and_importance_gets_gradients():
    torch.manual_seed(0)
    batch = _toy_batch(b=16, lq=5, ld=4, h=16, seed=1)
    labels = torch.tensor([i % 2 for i in range(16)], dtype=torch.float32)
    model = FRM(FRMConfig(hidden=16, mlp_dim=32, match_dim=16, att_dim=16, att_heads=2, dropout=0.0, max_keywords=8))
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    for step in range(150):
        loss = frm_loss(model(batch), labels)
        opt.zero_grad()
        loss.backward()
        if step == 0:
            grads = [p.grad for p in model.importance_net.parameters() if p.grad is not None]
            assert grads and any(float(g.abs().sum()) > 0 for g in grads)  # cross-task weak supervision
        opt.step()
    assert loss.item() < 0.1
    assert ((model(batch) > 0).float() == labels).all()


@pytest.mark.parametrize("variant", ["-m_mlp", "-m_att", "-m_lm", "FRM-1"])
def test_ablations_run(variant):
    from core.rerank.frm import model_config

    cfg = model_config(variant, hidden=8, max_keywords=8)
    logits = FRM(cfg).eval()(_toy_batch())
    assert logits.shape == (2,) and torch.isfinite(logits).all()


def test_keyword_agreement_loss_targets_hand_computed():
    """The weak keyword target: shared & paraphrase → 1, missing & non-paraphrase → 1, else 0; padding ignored."""
    from models.frm import keyword_agreement_loss

    # q = [how, weight, lose], d = [how, weight, gain, <pad>]; "how" and "weight" are shared
    eq = torch.zeros(2, 3, 4)
    eq[:, 0, 0] = eq[:, 1, 1] = 1.0
    w_q = torch.tensor([[0.2, 0.7, 0.9]] * 2)
    w_d = torch.tensor([[0.4, 0.6, 0.3, 0.0]] * 2)
    mask_q = torch.ones(2, 3, dtype=torch.bool)
    mask_d = torch.tensor([[True, True, True, False]] * 2)
    views = {"w_q": w_q, "w_d": w_d, "mask_q": mask_q, "mask_d": mask_d}
    labels = torch.tensor([1.0, 0.0])
    target_q = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])  # row 0 paraphrase, row 1 not
    target_d = torch.tensor([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
    bce = lambda w, t: -(t * torch.log(w.clamp(1e-6, 1 - 1e-6)) + (1 - t) * torch.log((1 - w).clamp(1e-6, 1)))  # noqa: E731
    expected = (bce(w_q, target_q).sum() + (bce(w_d, target_d) * mask_d).sum()) / (mask_q.sum() + mask_d.sum())
    got = keyword_agreement_loss(views, eq, labels)
    assert torch.allclose(got, expected, atol=1e-5)
    # it pulls a shared keyword of a paraphrase pair up and a shared keyword of a non-paraphrase pair down
    w = w_q.clone().requires_grad_(True)
    keyword_agreement_loss({**views, "w_q": w}, eq, labels).backward()
    assert w.grad[0, 1] < 0 < w.grad[1, 1]
