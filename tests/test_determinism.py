"""Deterministic builds: a commit and a seed give the same model whether the machine is
idle or both cores are busy. Training stops by step caps and dev patience only (no wall-clock budget), so
a second training run next to CPU-burning processes must give bit-identical weights and the same test
numbers as the first.
"""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from tests.synonym_clusters import synonym_clusters

BURN = "import time\nend = time.time() + 120\nwhile time.time() < end:\n    pass\n"


def _train_once(monkeypatch, tmp, dataset):
    from core.retrieval import densetrans as dt

    monkeypatch.setenv("QRS_VAR", str(tmp))
    cfg = dt.make_config("quick", None, d_model=24, embeddings="random", max_steps=36, eval_every=12,
                         batch_queries=16, lr=1e-3, dev_distractors=0, patience=6)
    metrics = dt.build(dataset, "quick", config=cfg, resume=False)
    state = torch.load(dt._folder(dataset, None) / "model.pt", map_location="cpu", weights_only=True)
    return metrics, state


def _tensors(state):
    """Every tensor of a saved checkpoint (nested dicts flattened)."""
    if isinstance(state, torch.Tensor):
        return {"": state}
    if isinstance(state, dict):
        return {f"{k}.{n}": t for k, v in state.items() for n, t in _tensors(v).items()}
    return {}


@pytest.fixture(scope="module")
def idle_run(tmp_path_factory):
    """One uninterrupted training on an idle machine, shared by both tests (the reference run)."""
    with pytest.MonkeyPatch.context() as mp:
        dataset = synonym_clusters(n_concepts=40)
        metrics, state = _train_once(mp, tmp_path_factory.mktemp("idle"), dataset)
        yield dataset, metrics, state


def test_training_on_a_busy_machine_gives_the_same_model_and_numbers(idle_run, tmp_path, monkeypatch):
    dataset, idle_metrics, idle_state = idle_run
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(2)]  # both cores busy
    try:
        busy_metrics, busy_state = _train_once(monkeypatch, tmp_path / "busy", dataset)
    finally:
        for p in burners:
            p.kill()
            p.wait()
    idle_tensors, busy_tensors = _tensors(idle_state), _tensors(busy_state)
    assert idle_tensors and idle_tensors.keys() == busy_tensors.keys()
    different = [k for k in idle_tensors if not torch.equal(idle_tensors[k], busy_tensors[k])]
    assert not different, f"weights differ between the idle and the busy run: {different[:5]}"
    assert idle_metrics["test"] == busy_metrics["test"]
    untimed = lambda curve: [{k: v for k, v in point.items() if "second" not in k} for point in curve]  # noqa: E731
    assert untimed(idle_metrics["training"]["curve"]) == untimed(busy_metrics["training"]["curve"])
    assert idle_metrics["training"]["stopped"] in ("cap", "patience")


class _Killed(Exception):
    pass


def test_a_training_killed_and_resumed_ends_with_the_uninterrupted_model(idle_run, tmp_path, monkeypatch):
    """Dropout (0.2 in the quick profile) draws from torch's RNG: last.pt carries its state, so a build
    killed after a checkpoint and resumed gives the same weights as one that was never interrupted."""
    from core.retrieval import densetrans as dt

    dataset, whole_metrics, whole_state = idle_run

    monkeypatch.setenv("QRS_VAR", str(tmp_path / "killed"))
    cfg = dt.make_config("quick", None, d_model=24, embeddings="random", max_steps=36, eval_every=12,
                         batch_queries=16, lr=1e-3, dev_distractors=0, patience=6)
    assert cfg.dropout > 0

    def kill_after_step_12(fraction, message):  # noqa: ARG001
        if "step 12/" in message:
            raise _Killed(message)

    try:
        dt.build(dataset, "quick", config=cfg, resume=False, progress=kill_after_step_12)
    except _Killed:
        pass
    else:
        raise AssertionError("the training was not interrupted")
    torch.manual_seed(999)  # a new process starts with another RNG state
    resumed = dt.build(dataset, "quick", config=cfg, resume=True)
    state = torch.load(dt._folder(dataset, None) / "model.pt", map_location="cpu", weights_only=True)
    a, b = _tensors(whole_state), _tensors(state)
    assert [k for k in a if not torch.equal(a[k], b[k])] == []
    assert resumed["test"] == whole_metrics["test"]


def test_frm_trained_in_a_fresh_process_equals_frm_trained_after_another(tmp_path):
    """A fresh Ray worker and the build's own process after an earlier job must train one FRM. The first dev AUC
    used to import core.evaluation mid-training, whose numba pool reset the one-thread training to every core:
    a cold process's FRM differed from a warm one's in the last bits from its first step on."""
    import os
    import textwrap
    from pathlib import Path

    from tests.conftest import TINY_DATA

    code = textwrap.dedent("""
        import hashlib, shutil, torch
        from core.data.datasets import load_dataset
        from core.paths import var_dir
        from core.rerank import frm
        torch.set_num_threads(1)
        ds = load_dataset("qqp-bimpm")
        for run in ("cold", "warm"):
            shutil.rmtree(var_dir() / "systems" / "qqp-bimpm" / "frm", ignore_errors=True)
            frm.build(ds, train_config=frm.FRMTrainConfig(train_pairs=48, max_epochs=2, batch_size=8, eval_every=3))
            weights = torch.load(var_dir() / "systems" / "qqp-bimpm" / "frm" / "weights.pt", weights_only=True)
            print(run, hashlib.sha1(b"".join(v.numpy().tobytes() for v in weights["model"].values())).hexdigest())
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS")}
    env.update(QRS_DATA=str(TINY_DATA), QRS_VAR=str(tmp_path / "var"))
    out = subprocess.run([sys.executable, "-c", code], cwd=str(Path(__file__).parents[1]), env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    digests = dict(line.split() for line in out.stdout.splitlines() if line.startswith(("cold ", "warm ")))
    assert digests["cold"] == digests["warm"], digests
