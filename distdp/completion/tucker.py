"""Tucker model of a 3-way tensor: predictions, per-entry partial derivatives, objective (paper eq. 7).

The Tucker model is x̂_ijk = Σ_pqt g_pqt a_ip b_jq c_kt = ⟦G; A, B, C⟧_ijk
(paper §3) with an R×R×R core G, as in the paper. The completion objective
(eq. 7) is

    f(A, B, C, G) = ‖P_Ω(X − ⟦G; A, B, C⟧)‖²_F + λo (‖A‖² + ‖B‖² + ‖C‖²) + λg ‖G‖².

Every function works on a batch of observed entries given as index arrays
``i, j, k``: no Python loop over entries.
"""
from __future__ import annotations

import numpy as np


def predict(factors: tuple[np.ndarray, ...], i: np.ndarray, j: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Model values x̂ at the entries (i, j, k) (paper §3, Tucker decomposition).

    Parameters
    ----------
    factors : tuple (A, B, C, G)
        Factor matrices (n1, R), (n2, R), (n3, R) and core (R, R, R).
    i, j, k : ndarray of int, shape (b,)

    Returns
    -------
    ndarray, shape (b,)
    """
    return partials(factors, i, j, k)[0]


def partials(factors: tuple[np.ndarray, ...], i: np.ndarray, j: np.ndarray, k: np.ndarray):
    """Model values and their partial derivatives with respect to the rows a_i, b_j, c_k.

    ∂x̂/∂a_i = G ×2 b_j ×3 c_k, ∂x̂/∂b_j = G ×1 a_i ×3 c_k, ∂x̂/∂c_k = G ×1 a_i ×2 b_j
    (mode-n products of paper §3 with vectors).

    Returns
    -------
    pred : ndarray, shape (b,)
    rows : tuple of three ndarrays, each (b, R)
    """
    A, B, C, G = factors
    a, b, c = A[i], B[j], C[k]
    R = G.shape[0]
    M = np.einsum("pqt,bt->bpq", G, c)                       # G ×3 c_k, (b, R, R)
    da = np.einsum("bpq,bq->bp", M, b)
    db = np.einsum("bpq,bp->bq", M, a)
    dc = (a[:, :, None] * b[:, None, :]).reshape(len(i), R * R) @ G.reshape(R * R, R)
    return np.einsum("bp,bp->b", a, da), (da, db, dc)


def core_partials_sum(factors, i, j, k, weights: np.ndarray) -> np.ndarray:
    """Σ_e w_e ∂x̂_e/∂G = Σ_e w_e a_i ⊗ b_j ⊗ c_k over a batch of entries (R×R×R)."""
    A, B, C, _ = factors
    return np.einsum("b,bp,bq,bt->pqt", weights, A[i], B[j], C[k], optimize=True)


def core_partial_sqnorm(factors, i, j, k) -> np.ndarray:
    """‖∂x̂_e/∂G‖²_F = ‖a_i‖² ‖b_j‖² ‖c_k‖² per entry (norm of an outer product)."""
    A, B, C, _ = factors
    return np.einsum("br,br->b", A[i], A[i]) * np.einsum("br,br->b", B[j], B[j]) * np.einsum("br,br->b", C[k], C[k])


def objective(factors: tuple[np.ndarray, ...], idx: np.ndarray, values: np.ndarray, lam: float,
              lam_core: float) -> float:
    """The regularised Tucker completion objective, paper eq. (7).

    Parameters
    ----------
    factors : tuple (A, B, C, G)
    idx : ndarray of int, shape (n, 3)
    values : ndarray, shape (n,)
    lam : float
        λo, on the factor matrices.
    lam_core : float
        λg, on the core.
    """
    resid = values - predict(factors, idx[:, 0], idx[:, 1], idx[:, 2])
    A, B, C, G = factors
    return float(resid @ resid + lam * (np.sum(A * A) + np.sum(B * B) + np.sum(C * C)) + lam_core * np.sum(G * G))


def init_factors(shape: tuple[int, int, int], rank: int, scale: float, rng: np.random.Generator):
    """Random initial factors and core: all entries iid N(0, s²), s = (scale²/R³)^(1/8).

    The paper says only "random"; this choice balances the four blocks and
    makes the initial model entries have standard deviation ``scale``
    (Var x̂ = R³ s⁸). It uses no data, so it costs no privacy.
    """
    s = (scale ** 2 / rank ** 3) ** (1.0 / 8.0)
    A, B, C = (s * rng.standard_normal((n, rank)) for n in shape)
    return A, B, C, s * rng.standard_normal((rank, rank, rank))


def full_tensor(factors: tuple[np.ndarray, ...]) -> np.ndarray:
    """The dense tensor ⟦G; A, B, C⟧ (small tensors: tests and benchmarks)."""
    A, B, C, G = factors
    return np.einsum("pqt,ip,jq,kt->ijk", G, A, B, C, optimize=True)
