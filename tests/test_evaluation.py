"""Our adapters around ranx on a hand-made run (values computed by hand)."""
from __future__ import annotations

import pytest

from core.errors import DataFormatError, UnknownNameError
from core.evaluation import check_metrics, evaluate_run, per_query, read_trec_run, write_trec_run
from core.retrieval.base import Ranking

QRELS = {"a": {"d1": 1, "d2": 1}, "b": {"d3": 1}, "c": {"d9": 1}}
RUN = {"a": Ranking("x", ["d1", "d5", "d2"], [3, 2, 1]), "b": Ranking("x", ["d4", "d3"], [2, 1])}


def test_metrics_by_hand():
    m = evaluate_run(QRELS, RUN, ["mrr@10", "recall@2", "map@10", "P@1", "H@1", "H@10", "ndcg@10"])
    assert m["mrr@10"] == pytest.approx((1 + 0.5 + 0) / 3)  # query c is missing from the run: 0
    assert m["recall@2"] == pytest.approx((0.5 + 1 + 0) / 3)
    assert m["map@10"] == pytest.approx(((1 + 2 / 3) / 2 + 0.5 + 0) / 3)
    assert m["precision@1"] == pytest.approx(1 / 3)
    assert m["hit_rate@1"] == pytest.approx(1 / 3) and m["hit_rate@10"] == pytest.approx(2 / 3)
    import math
    idcg_a = 1 + 1 / math.log2(3)
    dcg_a = 1 + 1 / math.log2(4)
    assert m["ndcg@10"] == pytest.approx((dcg_a / idcg_a + (1 / math.log2(3)) + 0) / 3)


def test_per_query_and_names():
    assert per_query(QRELS, RUN, "mrr@10") == {"a": 1.0, "b": 0.5, "c": 0.0}
    assert check_metrics(["H@10", "P@1"]) == ["hit_rate@10", "precision@1"]
    with pytest.raises(UnknownNameError):
        check_metrics(["bogus@3"])


def test_trec_run_roundtrip_and_errors(tmp_path):
    path = write_trec_run(RUN, tmp_path / "x.trec", "x")
    again = read_trec_run(path)
    assert evaluate_run(QRELS, again, ["map@10"]) == evaluate_run(QRELS, RUN, ["map@10"])
    bad = tmp_path / "bad.trec"
    bad.write_text("a Q0 d1 1 3.0 x\na Q0 d2 one 2.0 x\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="bad.trec:2"):
        read_trec_run(bad)
    bad.write_text("a Q0 d1 1\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="bad.trec:1: expected 6 columns"):
        read_trec_run(bad)


def test_warm_up_compiles_ranx_so_a_later_evaluation_pays_no_compile():
    """The app's background warm-up (app.py) leaves nothing for the first real evaluation to compile."""
    import numba.core.dispatcher as dispatcher

    from core.evaluation import per_query, warm_up

    ids = ("q00007", "q00011", "q00013", "q00017", "q00019")
    assert warm_up(ids) >= 0.0
    compiled = []
    original = dispatcher.Dispatcher.compile

    def spy(self, sig):
        compiled.append(self.py_func.__name__)
        return original(self, sig)

    dispatcher.Dispatcher.compile = spy
    try:
        from ranx import Run

        run = Run.from_dict({"q00023": {"q00029": 1.0, "q00031": 0.5}}, name="r")
        scores = per_query({"q00023": {"q00029": 1}}, run, "map@100")
    finally:
        dispatcher.Dispatcher.compile = original
    assert scores == {"q00023": 1.0}
    assert len(compiled) <= 2, compiled  # ranx's typed dicts/lists were compiled by the warm-up


def test_metrics_from_several_threads_at_once_do_not_abort_the_process():
    """Streamlit sessions are threads: concurrent ranx evaluations must not kill the server (numba's
    workqueue layer, ranx's choice, aborts on concurrent use). Run in a subprocess: an abort is exit 134."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import threading
        import numpy as np
        from ranx import Run
        from core.evaluation import evaluate_run
        rng = np.random.default_rng(0)
        qrels = {f"q{i:04d}": {f"d{j:04d}": 1 for j in rng.choice(500, 3)} for i in range(300)}
        run = Run.from_dict({q: {f"d{j:04d}": float(rng.random()) for j in rng.choice(500, 50)} for q in qrels})
        errors = []
        def work():
            try:
                for _ in range(6):
                    evaluate_run(qrels, run, ["ndcg@10", "map@100", "recall@100"])
            except Exception as exc:
                errors.append(exc)
        threads = [threading.Thread(target=work) for _ in range(3)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert not errors, errors
        print("done")
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=str(__import__("pathlib").Path(__file__).parents[1]),
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and "done" in out.stdout, out.stderr[-2000:]


def test_an_evaluation_leaves_torch_on_the_threads_it_was_given():
    """numba's OpenMP pool, started by the first evaluation, resets the calling thread's OpenMP thread count
    to every core; torch shares that runtime, so a one-thread training ran torch on two threads after its first
    dev evaluation and two trainings side by side oversubscribed the CPU. core.evaluation gives torch its count
    back. Read from the OpenMP runtime itself: torch.get_num_threads() reports its own setting, not the runtime's."""
    import glob
    import os
    import subprocess
    import sys
    import textwrap

    import torch

    if not glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libgomp*")):
        pytest.skip("this torch build does not ship libgomp (the OpenMP runtime numba and torch share here)")
    code = textwrap.dedent("""
        import ctypes, glob, os, torch
        torch.set_num_threads(1)
        (torch.rand(256, 256) @ torch.rand(256, 256)).sum()  # a training step before the first evaluation
        gomp = ctypes.CDLL(glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libgomp*"))[0])
        import numba
        from core.evaluation import evaluate_run
        from ranx import Run
        evaluate_run({"q1": {"d1": 1}, "q2": {"d2": 1}}, Run({"q1": {"d1": .9, "d2": .1}, "q2": {"d1": .5}}), ["ndcg@10"])
        print(numba.threading_layer(), numba.get_num_threads() >= 1, gomp.omp_get_max_threads(), torch.get_num_threads())
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=str(__import__("pathlib").Path(__file__).parents[1]),
                         capture_output=True, text=True, timeout=300,
                         env={k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS")})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["omp", "True", "1", "1"]  # on a machine of 2 or more cores: 1 kept, not every core


def test_evaluating_on_a_subset_of_queries_leaves_the_callers_run_whole():
    """ranx's make_comparable deletes the run's other queries in place; the evaluation module works on a copy,
    so a run scored on some queries still ranks the rest for its next use (the PPI view scores several metrics
    of the same runs on different query sets)."""
    from ranx import Run

    from core.evaluation import compare_runs, evaluate_run, per_query

    run = Run.from_dict({"q1": {"a": 1.0, "b": 0.5}, "q2": {"x": 1.0, "y": 0.2}}, name="r")
    other = Run.from_dict({"q1": {"b": 1.0, "a": 0.5}, "q2": {"y": 1.0, "x": 0.2}}, name="s")
    assert per_query({"q1": {"a": 1}}, run, "ndcg@10") == {"q1": 1.0}
    assert evaluate_run({"q1": {"b": 1}, "q3": {"z": 1}}, run, ["map@100"])["map@100"] == pytest.approx(0.25)
    compare_runs({"q1": {"a": 1}, "q2": {"x": 1}}, [run, other], ["ndcg@10"])
    compare_runs({"q2": {"x": 1}}, [run, other], ["ndcg@10"])
    assert sorted(run.keys()) == ["q1", "q2"] and sorted(other.keys()) == ["q1", "q2"] and run.name == "r"
    assert per_query({"q2": {"x": 1}}, run, "ndcg@10") == {"q2": 1.0}
