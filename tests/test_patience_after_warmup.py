"""The paper profiles' patience counts after the learning-rate warm-up: their first evaluations fall while the
rate is still rising, and counted from step 0 they stopped DenseTrans and the dual encoder with the untrained
model as their best (BENCHMARKS "The papers' `paper` profiles on CUDA"). The default build is not changed."""
from __future__ import annotations

from core.training import TrainLog


def test_evaluations_inside_the_grace_steps_do_not_count():
    log = TrainLog("recall@100", patience=2, grace_steps=100)
    log.record(0, 0, 0, 0.5)
    for step in (25, 50, 75, 100):  # the warm-up dip: worse than step 0, not counted
        log.record(step, 0, 0, 0.4)
    assert not log.should_stop and log.bad == 0
    log.record(125, 0, 0, 0.45)
    assert not log.should_stop
    log.record(150, 0, 0, 0.45)
    assert log.should_stop and log.best_step == 0
    again = TrainLog.from_dict(log.to_dict())
    assert again.grace_steps == 100 and again.bad == log.bad


def test_without_grace_the_same_curve_stops_inside_the_warm_up():
    log = TrainLog("recall@100", patience=2)
    for step, dev in ((0, 0.5), (25, 0.4), (50, 0.4)):
        log.record(step, 0, 0, dev)
    assert log.should_stop


def test_only_the_paper_profiles_wait_for_the_warm_up():
    from core.retrieval import densetrans, dual_encoder

    assert densetrans.make_config("paper").plan.grace_steps == 800
    assert dual_encoder.make_config("paper").plan.grace_steps == 2000
    for profile in ("quick", "full"):
        assert densetrans.make_config(profile).plan.grace_steps == 0
        assert densetrans.make_config(profile, "paper-objective").plan.grace_steps == 0
        assert densetrans.make_config(profile, "-AllDense").plan.grace_steps == 0
        assert dual_encoder.make_config(profile).plan.grace_steps == 0
