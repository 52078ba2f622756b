"""A local two-node Ray cluster (one CPU per node) for the tests that run work across nodes: the build
(tests/test_executor.py) and the encoding to shards (tests/test_vector_shards.py)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def two_node_cluster():
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    if ray.is_initialized():  # the session's one-node Ray (tests.conftest.shared_ray): this test needs two nodes
        ray.shutdown()
    from core.executor import patient_head_start

    patient_head_start()  # the suite runs beside this start: Ray's 30 s for the GCS port is not always enough
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR",
             runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}})
    yield cluster
    ray.shutdown()
    cluster.shutdown()
    os.environ.pop("RAY_ADDRESS", None)  # ray.init(address=...) leaves it for the processes started after
