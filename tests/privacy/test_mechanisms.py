"""Noise mechanisms and their calibration (distdp.privacy.mechanisms)."""
import math

import numpy as np
import pytest
from scipy import stats

from distdp.privacy import mechanisms as M


def test_analytic_gaussian_meets_the_exact_condition_and_beats_the_classical_formula():
    for eps, delta in [(0.1, 1e-5), (0.5, 1e-6), (1.0, 1e-5), (5.0, 1e-8)]:
        s = M.analytic_gaussian_sigma(eps, delta, sensitivity=2.0)
        assert M.gaussian_delta(s, eps, 2.0) == pytest.approx(delta, rel=1e-6)  # tight: δ(σ) = δ
        assert M.gaussian_delta(0.99 * s, eps, 2.0) > delta
        assert M.gaussian_epsilon(s, delta, 2.0) == pytest.approx(eps, rel=1e-6)
        if eps < 1:
            assert s < M.classical_gaussian_sigma(eps, delta, 2.0)
    # Balle & Wang (2018) Thm 8 at ε = 1, δ = 1e-5, Δ = 1 (value from their closed form, computed independently):
    a = 1 / (2 * 3.7306316) - 3.7306316
    assert M.gaussian_delta(3.7306316, 1.0) == pytest.approx(
        stats.norm.cdf(1 / (2 * 3.7306316) - 3.7306316) - math.e * stats.norm.cdf(a - 1 / 3.7306316), rel=1e-9)


def test_classical_gaussian_is_refused_for_epsilon_at_least_one():
    assert M.classical_gaussian_sigma(0.5, 1e-5) == pytest.approx(math.sqrt(2 * math.log(1.25e5)) / 0.5)
    with pytest.raises(ValueError, match="epsilon < 1"):
        M.classical_gaussian_sigma(1.0, 1e-5)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "x"])
def test_bad_epsilon_is_refused(bad):
    with pytest.raises(ValueError, match="epsilon"):
        M.analytic_gaussian_sigma(bad, 1e-5)


@pytest.mark.parametrize("bad", [0, 1, -0.1, 1.5])
def test_bad_delta_is_refused(bad):
    with pytest.raises(ValueError, match="delta"):
        M.analytic_gaussian_sigma(1.0, bad)


def test_laplace_noise_has_scale_sensitivity_over_epsilon():
    """KS test against Laplace(b) (fixed seed; p > 1e-3 under a correct scale, see test_tensor_dp)."""
    b = M.laplace_scale(0.5, 2.0)
    assert b == 4.0
    x = M.laplace_noise(20000, b, np.random.default_rng(0))
    assert stats.kstest(x, "laplace", args=(0, b)).pvalue > 1e-3


def test_l2_vector_noise_norm_is_gamma_and_direction_uniform():
    """‖b‖ ~ Gamma(dim, 1/β) (KS), direction uniform (mean of unit vectors ≈ 0 within 5/√n)."""
    dim, beta, n = 7, M.l2_vector_beta(2.0, 0.5), 20000
    assert beta == 4.0
    b = M.l2_vector_noise(dim, beta, np.random.default_rng(1), size=n)
    r = np.linalg.norm(b, axis=1)
    assert stats.kstest(r, "gamma", args=(dim, 0, 1 / beta)).pvalue > 1e-3
    assert np.all(np.abs((b / r[:, None]).mean(axis=0)) < 5 / math.sqrt(n))
    assert M.l2_vector_noise(3, 1.0, np.random.default_rng(0)).shape == (3,)


def test_symmetric_noise_is_symmetric_with_iid_unique_entries():
    rng = np.random.default_rng(2)
    E = M.symmetric_matrix_noise(30, 2.0, rng)
    np.testing.assert_array_equal(E, E.T)
    assert stats.kstest(E[np.triu_indices(30)] / 2.0, "norm").pvalue > 1e-3
    T = M.symmetric_tensor_noise(12, 0.5, rng)
    for p in [(1, 0, 2), (0, 2, 1), (2, 1, 0)]:
        np.testing.assert_array_equal(T, np.transpose(T, p))
    u = M.unique_entries(T)
    assert u.shape == (M.n_unique_entries(12),) == (math.comb(14, 3),)
    assert stats.kstest(u / 0.5, "norm").pvalue > 1e-3
    np.testing.assert_array_equal(M.from_unique_entries(u, 12), T)
    L2 = M.symmetric_tensor_noise(4, 3.0, rng, kind="l2")
    np.testing.assert_array_equal(L2, np.transpose(L2, (1, 0, 2)))


def test_symmetric_noise_operator_is_one_fixed_matrix_of_the_dense_form():
    # d = 37 with 8-row tiles: diagonal, off-diagonal and ragged tiles all occur.
    op = M.SymmetricNoiseOperator(37, 2.0, np.random.default_rng(4), block=8)
    E = op.dense()
    np.testing.assert_array_equal(E, E.T)
    X = np.random.default_rng(5).standard_normal((37, 3))
    np.testing.assert_allclose(op.matmat(X), E @ X, rtol=1e-12, atol=1e-12)   # every product: the same matrix
    np.testing.assert_allclose(op.matmat(X[:, 0]), E @ X[:, 0], rtol=1e-12, atol=1e-12)
    assert op.products == 3
    # Same entropy source → same matrix; another → another.
    np.testing.assert_array_equal(M.SymmetricNoiseOperator(37, 2.0, np.random.default_rng(4), block=8).dense(), E)
    assert not np.allclose(M.SymmetricNoiseOperator(37, 2.0, np.random.default_rng(6), block=8).dense(), E)
    # Unique entries iid N(0, 2²), pooled over tile sizes that place the diagonal/off-diagonal split
    # differently (one tile included); fixed seeds. Normal shape by KS; each variance, diagonal and off, within
    # 4 standard errors of σ² (s.e. σ²√(2/n)); different tiles uncorrelated (|r| ≤ 4/√n). A doubled diagonal
    # (variance 4σ²) or tiles drawn from one stream (r = 1) fail these.
    mats = [M.SymmetricNoiseOperator(120, 2.0, np.random.default_rng(s), block=b).dense()
            for s, b in ((7, 8), (8, 50), (9, 1000), (10, 8), (11, 8))]
    upper = np.concatenate([m[np.triu_indices(120, 1)] for m in mats])
    diag = np.concatenate([np.diag(m) for m in mats])
    assert stats.kstest(np.concatenate([upper, diag]) / 2.0, "norm").pvalue > 1e-3
    for x in (upper, diag):
        assert abs(x.var() - 4.0) <= 4 * 4.0 * math.sqrt(2 / x.size)
    eights = [mats[i] for i in (0, 3, 4)]    # the 8-row tiles (0, 1) and (1, 2) of each
    a = np.concatenate([m[:8, 8:16].ravel() for m in eights])
    b = np.concatenate([m[8:16, 16:24].ravel() for m in eights])
    assert abs(np.corrcoef(a, b)[0, 1]) <= 4 / math.sqrt(a.size)
    with pytest.raises(ValueError, match="expected 37 rows"):
        op.matmat(np.ones((36, 2)))
    with pytest.raises(ValueError, match="block"):
        M.SymmetricNoiseOperator(5, 1.0, np.random.default_rng(0), block=0)


def test_symmetric_tensor_noise_refuses_tensors_that_do_not_fit():
    with pytest.raises(ValueError, match="DP tensor power method"):
        M.symmetric_tensor_noise(10_000, 1.0, np.random.default_rng(0))


def test_private_generator_is_not_reproducible():
    assert M.private_generator().integers(2 ** 62) != M.private_generator().integers(2 ** 62)
