"""Shared fixtures: one local Ray instance per test session, shut down at the end; a small ratings tensor;
the synthetic corpora that several test modules fit.

``ray_cluster`` gives a multi-node ``ray.cluster_utils.Cluster`` on this machine
for one test module, then restores the session's local instance.

The tests are laid out like the package (``tests/lda/private/`` tests ``distdp.lda.private``, …) and are
imported with ``--import-mode=importlib`` (pyproject), so two folders may hold test files of one name.
Tests marked ``slow`` (multi-node, Ray jobs, long statistical checks) run in ``make test``;
``make test-fast`` leaves them out.
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


@pytest.fixture(scope="session")
def corpus_a():
    """The issue's recovery setting: N = 20,000, d = 2,000, k = 10, α0 = 1, mean length 100."""
    import numpy as np

    from distdp.lda.synthetic import sample_corpus

    return sample_corpus(20_000, 2_000, 10, np.random.default_rng(11), model="lda", alpha0=1.0)


@pytest.fixture(scope="module")
def small():
    """400 documents of 40 tokens over 60 words, 4 peaked topics (concentration 0.3), α0 = 1."""
    import numpy as np

    from distdp.lda.synthetic import sample_corpus

    return sample_corpus(400, 60, 4, np.random.default_rng(8), alpha0=1.0, doc_length=40, topic_concentration=0.3)
