"""Algorithm 1 (robust, batched restarts) and the simultaneous variant (distdp.tensor.power)."""
import math

import numpy as np
import pytest

from distdp.tensor import forms
from distdp.tensor.power import (EmpiricalMoment, default_n_iters, default_n_restarts, robust_power_method,
                                 simultaneous_power_method)


def orthogonal_tensor(d, k, rng, lam=None):
    V = np.linalg.qr(rng.standard_normal((d, k)))[0]
    lam = np.linspace(2.0, 1.0, k) if lam is None else np.asarray(lam)
    return forms.rank_one_sum(lam, V), lam, V


def matched(V_true, V_hat):
    """Column of V_hat matched to each true column (by largest |cosine|)."""
    return np.argmax(np.abs(V_true.T @ V_hat), axis=1)


@pytest.mark.parametrize("method", [robust_power_method, simultaneous_power_method])
@pytest.mark.parametrize("d,k", [(5, 5), (12, 4), (30, 3)])
def test_exact_recovery_on_noiseless_orthogonal_tensors(method, d, k):
    """Noise-free orthogonal tensors are decomposed to machine precision (quadratic convergence)."""
    rng = np.random.default_rng(d * 10 + k)
    T, lam, V = orthogonal_tensor(d, k, rng)
    res = method(T, k, rng=rng)
    perm = matched(V, res.eigenvectors)
    assert sorted(perm) == list(range(k))
    np.testing.assert_allclose(res.eigenvalues[perm], lam, atol=1e-10)
    np.testing.assert_allclose(res.eigenvectors[:, perm], V, atol=1e-8)  # signs fixed: λ > 0


def test_robust_method_finds_components_in_decreasing_order_and_reports_diagnostics():
    rng = np.random.default_rng(1)
    T, lam, V = orthogonal_tensor(10, 4, rng, lam=[4.0, 3.0, 2.0, 1.0])
    res = robust_power_method(T, 4, n_restarts=15, n_iters=12, rng=rng)
    np.testing.assert_allclose(res.eigenvalues, lam, atol=1e-10)
    assert (res.n_restarts, res.n_iters, res.n_applies) == (15, 12, 4 * 13)
    assert res.restart_values.shape == (4, 15) and res.best_restart.shape == (4,)
    np.testing.assert_allclose(res.restart_values[np.arange(4), res.best_restart], res.eigenvalues)
    assert res.to_dict()["n_applies"] == 52


class RecordingOperator:
    """An implicit operator that records the shape of every apply call."""

    def __init__(self, T):
        self.T, self.dim, self.shapes = T, T.shape[0], []

    def apply(self, U):
        self.shapes.append(U.shape)
        return forms.tensor_apply(self.T, U)


def test_operator_gets_the_whole_restart_batch_once_per_iteration():
    rng = np.random.default_rng(2)
    T, lam, V = orthogonal_tensor(9, 3, rng)
    op = RecordingOperator(T)
    res = robust_power_method(op, 3, n_restarts=7, n_iters=9, rng=np.random.default_rng(3))
    assert op.shapes == [(9, 7)] * (3 * 10)  # k(R+1) rounds, each with all L restarts
    ref = robust_power_method(T, 3, n_restarts=7, n_iters=9, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(res.eigenvectors, ref.eigenvectors)  # same seed, same result
    np.testing.assert_allclose(res.eigenvalues, lam[matched(V, res.eigenvectors).argsort()], atol=1e-10)


def test_empirical_moment_operator_equals_explicit_moment():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((300, 6)) + 0.5
    M = forms.empirical_moment(X)
    a = robust_power_method(EmpiricalMoment([X[:100], X[100:]]), 2, rng=np.random.default_rng(5))
    b = robust_power_method(M, 2, rng=np.random.default_rng(5))
    np.testing.assert_allclose(a.eigenvalues, b.eigenvalues, rtol=1e-9)
    np.testing.assert_allclose(a.eigenvectors, b.eigenvectors, atol=1e-9)


def test_default_parameters_follow_the_stated_formulas():
    assert default_n_restarts(1) == 10 and default_n_restarts(10) == math.ceil(10 * math.log(100))
    assert default_n_iters(10) == math.ceil(math.log(10 / 1e-6)) == 17
    assert default_n_iters(100_000) == 26


def test_bad_inputs_fail_clearly():
    rng = np.random.default_rng(0)
    T, _, _ = orthogonal_tensor(4, 2, rng)
    with pytest.raises(ValueError, match="1 ≤ k ≤ d = 4"):
        robust_power_method(T, 5, rng=rng)
    with pytest.raises(ValueError, match="1 ≤ k ≤ d"):
        simultaneous_power_method(T, 0, rng=rng)
    with pytest.raises(ValueError, match="not symmetric"):
        robust_power_method(T + rng.standard_normal(T.shape), 2, rng=rng)
    with pytest.raises(TypeError, match="Generator"):
        robust_power_method(T, 2, rng=0)
    with pytest.raises(ValueError, match="n_restarts"):
        robust_power_method(T, 2, n_restarts=0, rng=rng)
    with pytest.raises(ValueError, match="n_iters"):
        simultaneous_power_method(T, 2, n_iters=-1, rng=rng)
    with pytest.raises(TypeError, match="operator"):
        robust_power_method([[1.0]], 1, rng=rng)
