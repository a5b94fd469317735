"""Shared fixtures: one local Ray instance per test session, shut down at the end; a small ratings tensor.

``ray_cluster`` gives a multi-node ``ray.cluster_utils.Cluster`` on this machine
for one test module, then restores the session's local instance.
"""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("TQDM_DISABLE", "1")

LOCAL_RAY = dict(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray instance (2 CPUs, no dashboard) shared by every test that asks for it."""
    import ray

    if not ray.is_initialized():
        ray.init(**LOCAL_RAY)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def ray_cluster():
    """A Ray cluster of a head node and two worker nodes (1 CPU each) on this machine.

    Yields the ``Cluster``; worker nodes can be removed with ``cluster.remove_node``.
    """
    import ray
    from ray.cluster_utils import Cluster

    was_local = ray.is_initialized()
    if was_local:
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    cluster.wait_for_nodes()
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        if was_local:
            ray.init(**LOCAL_RAY)


@pytest.fixture
def ratings():
    """1–5 ratings: a positive rank-2 tensor 15×12×10 scaled to [1, 5], half observed (mean ≈ 1.8)."""
    import numpy as np

    from distdp.completion import from_dense

    rng = np.random.default_rng(0)
    X = np.einsum("ir,jr,kr->ijk", *[rng.uniform(0, 1, (n, 2)) for n in (15, 12, 10)])
    X = 1 + 4 * X / X.max()
    X[rng.random(X.shape) < 0.5] = np.nan
    return from_dense(X)
