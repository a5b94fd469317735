"""CP model of a 3-way tensor: predictions, per-entry partial derivatives, objective (paper eq. 6).

The CP model is x̂_ijk = Σ_r a_ir b_jr c_kr = ⟦A, B, C⟧_ijk (paper §3). The
completion objective (eq. 6) is

    f(A, B, C) = ‖P_Ω(X − ⟦A, B, C⟧)‖²_F + λ (‖A‖²_F + ‖B‖²_F + ‖C‖²_F).

Every function works on a batch of observed entries given as index arrays
``i, j, k`` (one element per entry): no Python loop over entries.
"""
from __future__ import annotations

import numpy as np


def predict(factors: tuple[np.ndarray, ...], i: np.ndarray, j: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Model values x̂ at the entries (i, j, k) (paper §3, CP decomposition).

    Parameters
    ----------
    factors : tuple (A, B, C)
        Factor matrices, shapes (n1, R), (n2, R), (n3, R).
    i, j, k : ndarray of int, shape (b,)
        Entry indices.

    Returns
    -------
    ndarray, shape (b,)
    """
    A, B, C = factors
    return np.einsum("br,br,br->b", A[i], B[j], C[k])


def partials(factors: tuple[np.ndarray, ...], i: np.ndarray, j: np.ndarray, k: np.ndarray):
    """Model values and their partial derivatives with respect to the rows a_i, b_j, c_k.

    ∂x̂_ijk/∂a_i = b_j ∘ c_k, ∂x̂_ijk/∂b_j = a_i ∘ c_k, ∂x̂_ijk/∂c_k = a_i ∘ b_j.

    Returns
    -------
    pred : ndarray, shape (b,)
    rows : tuple of three ndarrays, each (b, R)
        Partial derivatives w.r.t. a_i, b_j, c_k.
    """
    A, B, C = factors
    a, b, c = A[i], B[j], C[k]
    da = b * c
    return np.einsum("br,br->b", a, da), (da, a * c, a * b)


def core_partials_sum(factors, i, j, k, weights):
    """CP has no core tensor: returns ``None`` (the uniform interface of :mod:`tucker`)."""
    return None


def core_partial_sqnorm(factors, i, j, k) -> np.ndarray:
    """CP has no core tensor: zeros (so per-entry gradient norms see only the factor rows)."""
    return np.zeros(len(i))


def objective(factors: tuple[np.ndarray, ...], idx: np.ndarray, values: np.ndarray, lam: float,
              lam_core: float = 0.0) -> float:
    """The regularised CP completion objective, paper eq. (6).

    Parameters
    ----------
    factors : tuple (A, B, C)
    idx : ndarray of int, shape (n, 3)
        Observed entries Ω.
    values : ndarray, shape (n,)
        Observed values x_ijk.
    lam : float
        λ in eq. (6).
    lam_core : float
        Unused (CP has no core); accepted for a uniform signature with :func:`tucker.objective`.
    """
    resid = values - predict(factors, idx[:, 0], idx[:, 1], idx[:, 2])
    return float(resid @ resid + lam * sum(np.sum(F * F) for F in factors))


def init_factors(shape: tuple[int, int, int], rank: int, scale: float, rng: np.random.Generator):
    """Random initial factors: entries iid N(0, s²) with s = scale^(1/3)/R^(1/6).

    The choice (the paper says only "random") makes the initial model entries
    Σ_r a_ir b_jr c_kr have standard deviation ``scale``, whatever the rank.
    It uses no data, so it costs no privacy.
    """
    s = scale ** (1.0 / 3.0) / rank ** (1.0 / 6.0)
    return tuple(s * rng.standard_normal((n, rank)) for n in shape)


def full_tensor(factors: tuple[np.ndarray, ...]) -> np.ndarray:
    """The dense tensor ⟦A, B, C⟧ (small tensors: tests and benchmarks)."""
    A, B, C = factors
    return np.einsum("ir,jr,kr->ijk", A, B, C)


__all__ = ["predict", "partials", "core_partials_sum", "core_partial_sqnorm", "objective", "init_factors",
           "full_tensor"]
