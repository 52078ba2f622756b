"""The one executor (Ray): the build as a graph of jobs whose edges come from the registrations, run on a
local two-node Ray cluster (one CPU per node) with jobs on both nodes; a worker killed during a training job is
retried and the models equal a sequential build's, bit for bit; a bad ``QRS_RAY_ADDRESS`` is one line."""
from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from core import build
from core.build_graph import build_jobs
from core.data.datasets import load_dataset
from core.registry import default_build_targets, get_spec, system_path
from tests.conftest import run_main
from tests.ray_cluster import two_node_cluster  # noqa: F401 - a fixture

TRAINED = ("dual-encoder",)  # trained on the tiny fixture in seconds
TARGETS = ("bm25", "glove-mean", *TRAINED)


def _jobs_by_key(targets):
    return {j.key: j for j in build_jobs("qqp-bimpm", targets, build.build_job)}


def test_edges_come_from_the_registrations(tiny_data):
    jobs = _jobs_by_key(default_build_targets(load_dataset("qqp-bimpm")))
    for key, job in jobs.items():
        spec = get_spec(key.split("@")[0])
        assert set(spec.needs) & set(jobs) <= set(job.needs), key  # every declared input that is built too
        if spec.reference and spec.reference in jobs:
            assert spec.reference in job.needs, key  # its held-out verdict reads the reference
        if spec.kind == "reranker":
            assert "bm25" in job.needs  # the default first stage its runs rerank
        assert job.threads == spec.threads
    assert "minilm" in jobs["tree-bert"].needs and "bm25" not in jobs["glove-mean"].needs
    assert jobs["frm"].needs and "frm" not in jobs["frm@kw-loss"].needs  # the two FRMs run side by side
    # what unblocks more goes first: MiniLM (the tree, fusion, the pair scorer and everything trained on it)
    # before GloVe, the cross-encoder (the interaction tree waits for it) before the FRMs
    assert jobs["minilm"].priority > jobs["glove-mean"].priority > jobs["densetrans"].priority
    assert jobs["minilm-pairs"].priority > jobs["cross-encoder"].priority > jobs["frm"].priority


def test_a_registration_adds_its_own_edge(tiny_data):
    spec = replace(get_spec("glove-mean"), needs=("minilm",))
    jobs = _jobs_by_key([(get_spec("minilm"), None), (spec, None)])
    assert jobs["glove-mean"].needs == ("minilm",) and jobs["minilm"].needs == ()


def test_a_bad_cluster_address_is_one_line_and_writes_nothing(no_shared_ray, tiny_data, fresh_var, monkeypatch):
    monkeypatch.setenv("QRS_RAY_ADDRESS", "127.0.0.1:9")  # the discard port: nothing listens
    code, out, err = run_main("build", "--dataset", "qqp-bimpm", "--systems", "bm25,glove-mean")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "QRS_RAY_ADDRESS" in err, err
    assert not (fresh_var / "build").exists() and not (fresh_var / "systems").exists()


def test_a_second_build_while_one_runs_is_one_line(tiny_data, fresh_var):
    with build.build_lock("qqp-bimpm"):
        code, out, err = run_main("build", "--dataset", "qqp-bimpm", "--systems", "bm25")
    assert code == 2 and err.startswith("error: another build for qqp-bimpm is running"), err


def _weights(var: Path, system: str) -> dict[str, torch.Tensor]:
    state = torch.load(var / "systems" / "qqp-bimpm" / system / "model.pt", map_location="cpu", weights_only=True)

    def flat(value, prefix=""):
        if isinstance(value, torch.Tensor):
            return {prefix: value}
        if isinstance(value, dict):
            return {k: t for key, v in value.items() for k, t in flat(v, f"{prefix}.{key}").items()}
        return {}

    return flat(state)


@pytest.fixture(scope="module")
def sequential_build(tmp_path_factory):
    """Each system built alone in this process (one job at a time: the sequential build)."""
    var = tmp_path_factory.mktemp("sequential")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QRS_VAR", str(var))
        mp.setenv("QRS_DATA", str(Path(__file__).parent / "fixtures" / "data"))
        for system in TARGETS:
            (status,) = build.build_all("qqp-bimpm", [system], echo=False)
            assert status.state == "ready", status.error
    return var


def _kill_first_training_worker(var: Path, killed: list[int], stop: threading.Event) -> None:
    """Watch the status files; SIGKILL the worker process that is training the first trained system."""
    path = var / "build" / "qqp-bimpm" / f"{TRAINED[0]}.json"
    import json

    while not stop.is_set():
        try:
            status = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            status = {}
        if status.get("state") == "building" and status.get("pid") and status["pid"] != os.getpid():
            time.sleep(0.5)  # inside the training loop
            os.kill(status["pid"], signal.SIGKILL)
            killed.append(status["pid"])
            return
        time.sleep(0.05)


def test_the_build_on_two_nodes_survives_a_killed_worker_with_the_sequential_models(
        two_node_cluster, sequential_build, tiny_data, fresh_var):
    from core.executor import run_jobs

    targets = [(get_spec(s), None) for s in TARGETS]
    killed: list[int] = []
    stop = threading.Event()
    watcher = threading.Thread(target=_kill_first_training_worker, args=(fresh_var, killed, stop), daemon=True)
    watcher.start()
    try:
        results = run_jobs(build_jobs("qqp-bimpm", targets, build.build_job))
    finally:
        stop.set()
        watcher.join()
    assert killed, "the watcher never saw the training job building"
    assert {r.value["state"] for r in results.values()} == {"ready"}, {k: r.error for k, r in results.items()}
    assert len({r.node for r in results.values()}) == 2  # jobs ran on both nodes
    assert results[TRAINED[0]].pid not in killed  # the retry ran in another worker
    for system in TRAINED:
        expected, got = _weights(sequential_build, system), _weights(fresh_var, system)
        assert expected.keys() == got.keys() and expected
        differ = [k for k in expected if not torch.equal(expected[k], got[k])]
        assert not differ, f"{system}: weights differ from the sequential build: {differ[:4]}"
    for system in TARGETS:  # the collection vectors the systems serve, too
        folder = system_path("qqp-bimpm", system)
        if (folder / "embeddings.npy").is_file():
            assert np.array_equal(np.load(folder / "embeddings.npy"),
                                  np.load(sequential_build / "systems" / "qqp-bimpm" / system / "embeddings.npy"))


def test_cancelling_a_background_build_stops_its_jobs_and_leaves_nothing_half_written(tiny_data, fresh_var):
    import json

    systems = ["glove-mean", "dual-encoder", "sdml-cnn"]
    assert build.start_background_build("qqp-bimpm", systems=systems)
    status_dir = fresh_var / "build" / "qqp-bimpm"
    deadline = time.time() + 240
    while time.time() < deadline:  # cancel while a training job builds
        states = {s: json.loads((status_dir / f"{s}.json").read_text()).get("state")
                  for s in TRAINED if (status_dir / f"{s}.json").is_file()}
        if "building" in states.values():
            break
        time.sleep(0.2)
    assert build.cancel_build("qqp-bimpm")
    while time.time() < deadline and build.build_running("qqp-bimpm"):
        time.sleep(0.2)
    assert not build.build_running("qqp-bimpm")
    ds = load_dataset("qqp-bimpm")
    statuses = {s: build.read_status(ds, get_spec(s)) for s in systems}
    assert "building" not in {s.state for s in statuses.values()}
    cancelled = [s for s, st in statuses.items() if st.state == "not built"]
    assert cancelled and all(statuses[s].message == "cancelled" for s in cancelled), statuses
    for system in cancelled:  # nothing half-written: not built, no metrics, no temporary of a cut write
        folder = system_path("qqp-bimpm", system)
        assert not build.system_module(system).is_built(ds) and not (folder / "metrics.json").exists(), system
        assert not [p.name for p in folder.glob(".*")] if folder.is_dir() else True, system
    assert not build.cancel_build("qqp-bimpm")  # nothing left to cancel
    log = (status_dir / "build.log").read_text(encoding="utf-8")
    assert "\r" not in log and "[build] glove-mean started" in log  # one readable line per event, no bars
    assert max(len(line) for line in log.splitlines()) < 400


def test_a_head_started_here_waits_longer_for_its_gcs_port_unless_the_operator_says(monkeypatch):
    from core.executor import GCS_PORT_WAIT_S, patient_head_start

    monkeypatch.delenv("RAY_gcs_server_port_wait_time_s", raising=False)
    patient_head_start()
    assert os.environ["RAY_gcs_server_port_wait_time_s"] == str(GCS_PORT_WAIT_S) and GCS_PORT_WAIT_S > 30
    monkeypatch.setenv("RAY_gcs_server_port_wait_time_s", "45")
    patient_head_start()
    assert os.environ["RAY_gcs_server_port_wait_time_s"] == "45"
