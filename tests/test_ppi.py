"""PPI estimator, budget-aware sampler and judge calibration on synthetic problems with known truth."""
from __future__ import annotations

import numpy as np
import pytest

from core.analysis.budget import (budget_order, inclusion_probabilities, poisson_sample, query_uncertainty,
                                  uniform_sample)
from core.analysis.ppi import human_mean, metric_estimates, ppi_mean
from core.judging.calibration import calibration_split, fit_thresholds, relevance_model


def _population(rng: np.random.Generator, n: int = 400, noise: float = 0.05):
    """True per-query values y in [0, 1] and a good judge's values f = y + bias + small noise."""
    y = rng.beta(2, 2, size=n)
    f = np.clip(y + 0.1 + rng.normal(0, noise, size=n), 0, 1)  # biased by +0.1: judge-only is wrong
    return y, f


def test_ppi_covers_truth_and_is_narrower_than_humans_only():
    rng = np.random.default_rng(0)
    y, f = _population(rng)
    truth = y.mean()
    cover_ppi = cover_h = cover_judge = 0
    widths_ppi, widths_h = [], []
    for _ in range(400):
        idx = uniform_sample(len(y), 20, rng)
        ip = ppi_mean(f, idx, y[idx], level=0.9)
        ih = human_mean(len(y), idx, y[idx], level=0.9)
        cover_ppi += ip.covers(truth)
        cover_h += ih.covers(truth)
        widths_ppi.append(ip.width)
        widths_h.append(ih.width)
    assert abs(f.mean() - truth) > 0.05  # the judge alone is biased
    assert 0.86 <= cover_ppi / 400 <= 0.95
    assert 0.86 <= cover_h / 400 <= 0.95
    assert np.mean(widths_ppi) < 0.5 * np.mean(widths_h)


def test_ppi_with_a_useless_judge_is_no_better_than_humans():
    rng = np.random.default_rng(1)
    y = rng.beta(2, 2, size=300)
    f = rng.random(300)  # unrelated to y
    idx = uniform_sample(300, 30, rng)
    assert ppi_mean(f, idx, y[idx]).width > human_mean(300, idx, y[idx]).width * 0.9


def test_full_sample_gives_the_truth_with_zero_width():
    y = np.array([0.1, 0.5, 0.9, 0.3])
    f = np.array([0.2, 0.4, 1.0, 0.0])
    ip = ppi_mean(f, [0, 1, 2, 3], y)
    assert ip.estimate == pytest.approx(y.mean())
    assert ip.width == pytest.approx(0.0)


def test_ppi_rejects_bad_input():
    with pytest.raises(ValueError):
        ppi_mean([0.1, 0.2], [0, 0], [0.1, 0.1])
    with pytest.raises(ValueError):
        ppi_mean([0.1, 0.2], [0, 5], [0.1, 0.1])
    with pytest.raises(ValueError):
        ppi_mean([0.1, 0.2], [0, 1], [0.1, 0.1], probs=[0.0, 0.5])
    assert ppi_mean([0.1, 0.2], [0], [0.1]) is None


def test_metric_estimates_three_ways():
    judge = {"a": 0.5, "b": 0.7, "c": 0.1, "d": 0.3}
    human = {"a": 0.6, "c": 0.0}
    est = metric_estimates("map@100", judge, human, human_labels=20, judge_labels=40)
    assert est.judge_only == pytest.approx(0.4)
    assert est.ppi.estimate == pytest.approx(0.4 + (0.1 - 0.1) / 2)
    assert est.human_only.estimate == pytest.approx(0.3)
    assert est.ppi.n_human == 2 and est.ppi.n_total == 4
    assert est.to_dict()["human_labels"] == 20
    with pytest.raises(ValueError):
        metric_estimates("map@100", judge, {"zz": 1.0})


def test_budget_aware_sampling_is_unbiased_and_covers():
    rng = np.random.default_rng(2)
    n_q = 300
    y, f = _population(rng, n_q, noise=0.02)
    hard = rng.random(n_q) < 0.3  # the judge errs on some queries, and knows they are uncertain
    f[hard] = np.clip(f[hard] + rng.normal(0, 0.4, hard.sum()), 0, 1)
    u = np.where(hard, 1.0, 0.1)
    pi = inclusion_probabilities(u, 30)
    assert pi.sum() == pytest.approx(30)
    assert pi.min() >= 0.3 * 30 / n_q - 1e-9
    truth = y.mean()
    estimates, covered, widths_aware, widths_uniform = [], 0, [], []
    draws = 500
    for _ in range(draws):
        idx = poisson_sample(pi, rng)
        ip = ppi_mean(f, idx, y[idx], probs=pi)
        estimates.append(ip.estimate)
        covered += ip.covers(truth)
        widths_aware.append(ip.width)
        idx_u = uniform_sample(n_q, 30, rng)
        widths_uniform.append(ppi_mean(f, idx_u, y[idx_u]).width)
    se = np.std(estimates) / np.sqrt(draws)
    assert abs(np.mean(estimates) - truth) < 4 * se  # unbiased
    assert covered / draws >= 0.85
    assert np.mean(widths_aware) < np.mean(widths_uniform)  # labels spent where the judge is unsure


def test_inclusion_probabilities_cap_at_one_and_order():
    pi = inclusion_probabilities([100.0, 1.0, 1.0, 1.0], 2, share=0.0)
    assert pi[0] == pytest.approx(1.0) and pi.sum() == pytest.approx(2)
    with pytest.raises(ValueError):
        inclusion_probabilities([1.0, 1.0], 3)
    order = budget_order({"a": 0.99, "b": 0.01, "c": 0.5}, seed=0)
    assert sorted(order) == ["a", "b", "c"] and order == budget_order({"a": 0.99, "b": 0.01, "c": 0.5}, seed=0)
    firsts = [budget_order({"a": 0.9, "b": 0.1}, seed=s)[0] for s in range(200)]
    assert firsts.count("a") > 150
    u = query_uncertainty({"q": [0.5, 0.5], "r": [0.0, 1.0]})
    assert u["q"] == pytest.approx(np.sqrt(0.5)) and u["r"] == 0.0


def test_fit_thresholds_recovers_grades():
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 3, size=300)
    scores = labels * 2.0 + rng.normal(0, 0.3, size=300)  # grade g around 2g
    th = fit_thresholds(scores, labels, 2)
    assert len(th.cuts) == 2 and th.cuts[0] <= th.cuts[1]
    assert 0.5 < th.cuts[0] < 2.0 and 2.5 < th.cuts[1] < 4.0
    assert th.kappa > 0.9
    assert (th.grade(scores) == labels).mean() > 0.9
    binary = fit_thresholds([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1], 1)
    assert binary.grade([0.15, 0.85]).tolist() == [0, 1]
    with pytest.raises(ValueError):
        fit_thresholds([0.1, 0.2], [0, 3], 2)
    p = relevance_model(scores, labels)([-5.0, 10.0])
    assert p[0] < 0.1 and p[1] > 0.9


def test_calibration_split_is_disjoint_and_seeded():
    ids = [f"q{i}" for i in range(21)]
    cal, rep = calibration_split(ids, 0.5, seed=1)
    assert set(cal).isdisjoint(rep) and set(cal) | set(rep) == set(ids)
    assert (cal, rep) == calibration_split(list(reversed(ids)), 0.5, seed=1)
    assert calibration_split(ids, 0.5, seed=2) != (cal, rep)


def test_power_tuned_ppi_is_never_much_wider_than_humans_and_narrower_with_a_good_judge():
    rng = np.random.default_rng(4)
    y = rng.beta(2, 2, size=300)
    useless = rng.random(300)
    good = np.clip(0.5 * y + 0.3 + rng.normal(0, 0.03, size=300), 0, 1)  # correlated but on another scale
    w_useless, w_human, w_good, w_classic, covered = [], [], [], [], 0
    for _ in range(300):
        idx = uniform_sample(300, 30, rng)
        w_useless.append(ppi_mean(useless, idx, y[idx], tuned=True).width)
        w_human.append(human_mean(300, idx, y[idx]).width)
        tuned = ppi_mean(good, idx, y[idx], tuned=True)
        covered += tuned.covers(y.mean())
        w_good.append(tuned.width)
        w_classic.append(ppi_mean(good, idx, y[idx]).width)
    assert np.mean(w_useless) < 1.1 * np.mean(w_human)
    assert np.mean(w_good) < 0.5 * np.mean(w_human) and np.mean(w_good) < np.mean(w_classic)
    assert covered / 300 >= 0.85


# ----------------------------------------------------------------------------- the soft judge
def test_grade_model_rows_are_distributions_and_follow_the_score():
    from core.judging.calibration import grade_model

    rng = np.random.default_rng(5)
    labels = rng.integers(0, 3, size=300)
    scores = labels * 2.0 + rng.normal(0, 0.8, size=300)
    rows = grade_model(scores, labels, 2)([-2.0, 2.0, 6.0])
    assert rows.shape == (3, 3) and np.allclose(rows.sum(axis=1), 1)
    assert rows[0].argmax() == 0 and rows[2].argmax() == 2 and rows[0, 2] < rows[1, 2] < rows[2, 2]
    only = grade_model([0.1, 0.4], [1, 1], 2)([0.0, 5.0])
    assert only.tolist() == [[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]
    with pytest.raises(ValueError):
        grade_model([0.1], [3], 2)


def _shifted_queries(rng: np.random.Generator, queries: int = 60, per: int = 10):
    """Every query's best-scored item is relevant, but each query's scores carry their own offset, so one
    global threshold on the raw score cannot tell relevant from not; the place within the query can."""
    scores, labels, groups = [], [], []
    for q in range(queries):
        base = rng.normal(0, 3)
        s = base + rng.normal(0, 1, size=per)
        top = int(s.argmax())
        scores += s.tolist()
        labels += [int(i == top) for i in range(per)]
        groups += [f"q{q}"] * per
    return np.array(scores), np.array(labels), groups


def test_query_features_place_each_item_among_its_query():
    from core.judging.calibration import query_features

    x = query_features([3.0, 1.0, 2.0, 10.0, 10.0], ["a", "a", "a", "b", "b"])
    assert x.shape == (5, 4)
    assert x[:, 1].tolist() == [0.0, -2.0, -1.0, 0.0, 0.0]  # score − the query's best
    assert np.allclose(x[:3, 2], np.log1p([0, 2, 1]))  # log(1 + rank) within the query
    assert x[3, 3] == 0.0 and x[4, 3] == 0.0  # constant scores: z-score 0, not NaN
    assert query_features([1.0, 2.0], None).shape == (2, 1)
    with pytest.raises(ValueError):
        query_features([1.0, 2.0], ["a"])


def test_within_query_calibration_is_chosen_when_scores_only_rank_within_queries():
    from core.judging.calibration import choose_grade_model, grade_model

    rng = np.random.default_rng(3)
    scores, labels, groups = _shifted_queries(rng)
    choice = choose_grade_model(scores, labels, 1, groups)
    assert choice.features == "score+query"
    assert choice.log_loss["score+query"] < choice.log_loss["score"] - 0.1
    new_s, new_y, new_g = _shifted_queries(np.random.default_rng(4), queries=30)
    p = choice.model(new_s, new_g)[:, 1]
    assert p[new_y == 1].mean() > 0.5 > p[new_y == 0].mean() + 0.3
    with pytest.raises(ValueError, match="query of every item"):
        choice.model(new_s)
    # where the raw score is all there is (no per-query offset), the score alone is kept or ties
    plain = rng.normal(0, 1, size=400)
    plain_y = (plain + rng.normal(0, 0.5, size=400) > 0.8).astype(int)
    plain_g = [f"q{i // 10}" for i in range(400)]
    both = choose_grade_model(plain, plain_y, 1, plain_g)
    assert both.log_loss["score"] <= both.log_loss["score+query"] + 0.02
    assert not grade_model(plain, plain_y, 1).by_query


def test_cross_fitted_probs_come_from_models_that_did_not_see_the_query():
    from core.judging.calibration import choose_grade_model, cross_fitted_probs

    scores, labels, groups = _shifted_queries(np.random.default_rng(8), queries=6, per=8)
    rows = cross_fitted_probs(scores, labels, 1, groups, folds=6)  # six folds, six queries: leave one query out
    assert rows.shape == (48, 2) and np.allclose(rows.sum(axis=1), 1)
    g = np.array(groups)
    for q in ("q0", "q3"):
        others = g != q
        alone = choose_grade_model(scores[others], labels[others], 1, g[others].tolist()).model(
            scores[~others], g[~others].tolist())
        assert np.allclose(rows[~others], alone)
    with pytest.raises(ValueError, match="two queries"):
        cross_fitted_probs(scores[:8], labels[:8], 1, groups[:8])


def test_posterior_samples_certain_labels_give_the_metric_and_paired_draws():
    from ranx import Run

    from core.analysis.ppi import per_query_values, posterior_samples

    run_a = Run.from_dict({"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"x": 2.0, "y": 1.0}}, name="a")
    run_b = Run.from_dict({"q1": {"c": 3.0, "b": 2.0, "a": 1.0}, "q2": {"y": 2.0, "x": 1.0}}, name="b")
    certain = {"q1": {"a": [0.0, 1.0], "b": [1.0, 0.0], "c": [1.0, 0.0]}, "q2": {"x": [1.0, 0.0], "y": [0.0, 1.0]}}
    draws = posterior_samples(certain, {"a": run_a, "b": run_b}, "map@100", ["q1", "q2"], samples=7)
    qrels = {"q1": {"a": 1, "b": 0, "c": 0}, "q2": {"x": 0, "y": 1}}
    for name, run in (("a", run_a), ("b", run_b)):
        assert draws[name].shape == (2, 7) and np.all(draws[name].var(axis=1) == 0)
        assert np.allclose(draws[name][:, 0], per_query_values(qrels, run, "map@100", ["q1", "q2"]))
    coin = {"q1": {"a": [0.5, 0.5], "b": [1.0, 0.0], "c": [1.0, 0.0]}}
    d = posterior_samples(coin, {"a": run_a, "b": run_a}, "precision@1", ["q1"], samples=400, seed=3)
    assert np.array_equal(d["a"], d["b"])  # the same label draws for every run
    assert 0.4 < d["a"].mean() < 0.6 and d["a"].var() > 0.2


def test_variance_floor_applies_under_both_designs():
    f = np.zeros(50)
    y = np.full(3, 0.5)  # three identical rectifiers: the linearised variance is 0
    pi = np.full(50, 3 / 50)
    sigma2 = np.full(50, 0.04)
    no_floor = ppi_mean(f, [0, 1, 2], y, probs=pi)
    floored = ppi_mean(f, [0, 1, 2], y, probs=pi, model_var=sigma2)
    assert no_floor.width == pytest.approx(0) and floored.width > 0.1
    assert floored.estimate == pytest.approx(no_floor.estimate)
    assert ppi_mean(f, [0, 1, 2], y, model_var=sigma2).width > 0.05  # uniform: floored too
    with pytest.raises(ValueError):
        ppi_mean(f, [0, 1, 2], y, probs=pi, model_var=np.full(49, 0.04))


def test_moderated_variance_pulls_toward_the_judge_and_never_below_the_sample():
    from core.analysis.ppi import moderated_variance

    assert moderated_variance(0.0, 0.04, 5, 4.0) == pytest.approx(4 * 0.04 / 8)  # (d0·V_J + (n−1)·0) / (d0+n−1)
    assert moderated_variance(0.0, 0.04, 5, float("inf")) == pytest.approx(0.04)  # the hard floor
    assert moderated_variance(0.0, 0.04, 5, 0.0) == 0.0  # no moderation
    assert moderated_variance(0.09, 0.04, 5, 4.0) == pytest.approx(0.09)  # never below the sample variance
    # more labelled questions weigh the judge's prediction less
    assert moderated_variance(0.0, 0.04, 50, 4.0) < moderated_variance(0.0, 0.04, 5, 4.0)
    with pytest.raises(ValueError):
        moderated_variance(0.01, 0.04, 5, -1.0)
    f, y, sigma2 = np.zeros(50), np.full(5, 0.5), np.full(50, 0.04)
    soft = ppi_mean(f, range(5), y, model_var=sigma2, prior_df=4.0)
    hard = ppi_mean(f, range(5), y, model_var=sigma2, prior_df=float("inf"))
    assert 0 < soft.width < hard.width


def test_sequential_poisson_sample_has_fixed_size_and_follows_the_probabilities():
    from core.analysis.budget import sequential_poisson_sample

    pi = inclusion_probabilities([3.0] + [1.0] * 19, 4, share=0.0)  # π_0 = 12/22
    rng = np.random.default_rng(0)
    hits = np.zeros(20)
    for _ in range(2000):
        idx = sequential_poisson_sample(pi, 4, rng)
        assert len(idx) == 4 and len(set(idx.tolist())) == 4
        hits[idx] += 1
    assert abs(hits[0] / 2000 - pi[0]) < 0.08 and hits[0] > 3 * hits[1:].mean()


def test_posterior_samples_of_a_run_that_ranks_nothing_are_zero():
    from ranx import Run

    from core.analysis.ppi import posterior_samples

    probs = {"q1": {"a": [0.0, 1.0]}}
    empty = Run.from_dict({"q9": {"z": 1.0}}, name="empty")  # ranks another query only
    draws = posterior_samples(probs, {"empty": empty}, "precision@1", ["q1"], samples=4)
    assert draws["empty"].shape == (1, 4) and not draws["empty"].any()


def test_moderated_interval_uses_smyths_degrees_of_freedom():
    """With the judge's variance, the t quantile has n − 1 + d₀ degrees of freedom (normal at d₀ = ∞); humans only
    keep Student t at n − 1."""
    from scipy import stats

    f, y, sigma2 = np.zeros(50), np.array([0.2, 0.4, 0.6, 0.8, 0.5]), np.full(50, 1e-6)  # the sample variance rules
    var = (1 - 5 / 50) * y.var(ddof=1) / 5
    for d0, q in ((4.0, stats.t.ppf(0.95, 8)), (float("inf"), stats.norm.ppf(0.95))):
        iv = ppi_mean(f, range(5), y, model_var=sigma2, prior_df=d0)
        assert iv.width / 2 == pytest.approx(q * np.sqrt(var))
    human = human_mean(50, range(5), y)
    assert human.width / 2 == pytest.approx(stats.t.ppf(0.95, 4) * np.sqrt(var))


def test_variance_scale_is_the_rectifiers_excess_over_the_judges_prediction_and_never_below_one():
    from core.analysis.ppi import variance_scale

    y = [np.array([1.0, 0.0, 1.0, 0.0])]
    f = [np.array([0.5, 0.5, 0.5, 0.5])]  # r² = .25 each
    assert variance_scale(y, f, [np.full(4, 0.125)]) == pytest.approx(2.0)
    assert variance_scale(y, f, [np.full(4, 0.5)]) == 1.0  # a judge over-predicting its error is not trusted
    assert variance_scale(y + y, f + f, [np.full(4, 0.125), np.full(4, 0.25)]) == pytest.approx(2 / 1.5)  # pooled
    assert variance_scale(y, f, [np.zeros(4)]) == 1.0
    with pytest.raises(ValueError):
        variance_scale(y, f, [np.zeros(3)])


def test_campaign_estimates_of_several_metrics_equal_one_metric_at_a_time():
    """Regression: the runs are evaluated on the human-labelled queries for one metric and must still rank
    every query for the next metric's soft judge (ranx used to drop the others from the caller's run)."""
    from ranx import Run

    from core.analysis.ppi import campaign_estimates

    rng = np.random.default_rng(2)
    queries = [f"q{i}" for i in range(12)]
    docs = [f"d{j}" for j in range(6)]
    probs = {q: {d: (lambda p: [1 - p, p])(float(rng.uniform(0.05, 0.95))) for d in docs} for q in queries}
    human = {q: {d: int(rng.random() < 0.4) for d in docs} for q in queries[:6]}

    def runs():
        return [Run.from_dict({q: {d: float(rng.random()) for d in docs} for q in queries}, name=n) for n in ("a", "b")]

    fixed = runs()
    frozen = [{q: dict(r[q]) for q in r.keys()} for r in fixed]
    both = campaign_estimates(human, probs, [Run.from_dict(f, name=r.name) for f, r in zip(frozen, fixed)],
                              ["ndcg@10", "map@100"], calibration=queries[:2], samples=20)
    for metric in ("ndcg@10", "map@100"):
        alone = campaign_estimates(human, probs, [Run.from_dict(f, name=r.name) for f, r in zip(frozen, fixed)],
                                   [metric], calibration=queries[:2], samples=20)
        for sys_both, sys_alone in zip(both, alone):
            got = next(m for m in sys_both.metrics if m.metric == metric)
            assert got.judge_only == pytest.approx(sys_alone.metrics[0].judge_only)
            assert got.ppi.estimate == pytest.approx(sys_alone.metrics[0].ppi.estimate)
