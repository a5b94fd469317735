"""Completion on Ray (distdp.distributed.completion): an ε sweep runs as Ray tasks."""

import numpy as np
import pytest

from distdp.completion import complete, from_dense
from distdp.completion import CompletionSolver


def small_obs(seed=0, shape=(5, 6, 7), frac=0.6):
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal(shape)
    Y[rng.random(shape) > frac] = np.nan
    return from_dense(Y)


def test_epsilon_sweep_runs_as_ray_tasks(ray_session):
    from distdp.distributed.completion import epsilon_sweep

    obs = small_obs(shape=(6, 6, 6), frac=0.8)
    rows = epsilon_sweep(obs, epsilons=[0.5, 4.0], perturbations=["none", "input", "gradient"], n_runs=2, seed=10,
                         rank=2, bounds=(-3.0, 3.0), solver=CompletionSolver(epochs=3),
                         score=lambda r: (r.test_rmse, r.privacy.private, r.privacy.epsilon, float(r.A.sum())))
    assert len(rows) == 2 + 2 * 2 * 2
    none = [r for r in rows if r["perturbation"] == "none"]
    local = complete(obs, 2, seed=10, bounds=(-3.0, 3.0), solver=CompletionSolver(epochs=3))   # the sweep's kwargs
    assert none[0]["result"][0] == pytest.approx(local.test_rmse)   # same seed, same numbers as in-process
    grad = [r["result"] for r in rows if r["perturbation"] == "gradient"]
    assert all(p and e == pytest.approx(eps, rel=1e-3)
               for (_, p, e, _), eps in zip(grad, [0.5, 0.5, 4.0, 4.0]))
    inputs = [r["result"][3] for r in rows if r["perturbation"] == "input" and r["run"] == 0]
    assert inputs[0] != inputs[1]                                     # independent OS-entropy noise per task
