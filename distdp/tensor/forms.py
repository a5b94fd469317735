"""Multilinear forms of symmetric third-order tensors, explicit or given by data.

Notation (Wang & Anandkumar 2016, §1.2): for a symmetric ``T`` (d×d×d),
``T(I,u,u)_i = Σ_jk T_ijk u_j u_k`` and ``T(u,u,u) = uᵀ T(I,u,u)``.
Every function takes a batch ``U`` of ``L`` vectors as the columns of a
``(d, L)`` matrix and returns one column (or one value) per vector, so the
``L`` restarts of a power method are one matrix product, never a Python loop.

The empirical moment of data ``X`` (rows ``x_1..x_n``) is
``T = (1/n) Σ_ℓ x_ℓ⊗x_ℓ⊗x_ℓ``; its forms are computed from ``Y = X U`` as
``T(I,U,U) = Xᵀ (Y∘Y) / n`` and ``T(u,u,u) = mean(Y∘Y∘Y)`` (paper Alg. 2,
line 6), in O(nnz(X)·L) time, without forming the d³ tensor.

Pure numpy/scipy: no Ray, no IO.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = [
    "tensor_apply", "tensor_value", "PackedTensor", "pack_pairs", "packed_apply", "moment_apply",
    "moment_value", "moment_partial",
    "deflation_apply", "deflation_value", "rank_one_sum", "symmetrize", "is_symmetric",
    "check_symmetric", "symmetry_tolerance", "empirical_moment", "clip_rows", "as_columns",
    "SYMMETRY_RTOL", "SYMMETRY_ULPS",
]

#: Smallest relative symmetry tolerance (the historical default, kept for float64 input).
SYMMETRY_RTOL = 1e-8
#: Units of roundoff of the input's dtype allowed in ``max |T − T^σ| / max |T|``.
SYMMETRY_ULPS = 64


def as_columns(U: np.ndarray) -> np.ndarray:
    """Return ``U`` as a float ``(d, L)`` matrix (a 1-D vector becomes one column)."""
    U = np.asarray(U, dtype=float)
    if U.ndim == 1:
        return U[:, None]
    if U.ndim != 2:
        raise ValueError(f"U must be a vector or a (d, L) matrix, got shape {U.shape}")
    return U


def _check_cubic(T: np.ndarray, name: str = "tensor") -> np.ndarray:
    """``T`` as a float64 cubic array; ``ValueError`` naming ``name`` otherwise.

    Complex input is refused (casting would silently drop the imaginary
    part), as are non-numeric dtypes and an empty (d = 0) tensor.
    """
    T = np.asarray(T)
    if np.iscomplexobj(T):
        raise ValueError(f"{name} has complex entries (dtype {T.dtype}): a real symmetric tensor is required")
    if T.dtype != bool and not np.issubdtype(T.dtype, np.number):
        raise ValueError(f"{name} must be a numeric array, got dtype {T.dtype}")
    if T.ndim != 3 or not (T.shape[0] == T.shape[1] == T.shape[2]):
        raise ValueError(f"{name} must be cubic d×d×d, got shape {T.shape}")
    if T.shape[0] == 0:
        raise ValueError(f"{name} is empty (shape {T.shape})")
    return np.asarray(T, dtype=float)


def tensor_apply(T: np.ndarray, U: np.ndarray) -> np.ndarray:
    """``T(I, u_l, u_l)`` for every column ``u_l`` of ``U`` (paper §1.2 multilinear form).

    Parameters
    ----------
    T : ndarray, shape (d, d, d)
        Tensor (symmetry is not required here; the form contracts modes 2 and 3).
    U : ndarray, shape (d, L) or (d,)

    Returns
    -------
    ndarray, shape (d, L)
        Column ``l`` is ``Σ_jk T_ijk U_jl U_kl``. Cost O(d³L), one BLAS product.
    """
    T = _check_cubic(T)
    U = as_columns(U)
    d = T.shape[0]
    if U.shape[0] != d:
        raise ValueError(f"U has {U.shape[0]} rows, tensor dimension is {d}")
    TU = (T.reshape(d * d, d) @ U).reshape(d, d, U.shape[1])  # [i, j, l] = Σ_k T_ijk U_kl
    return np.einsum("ijl,jl->il", TU, U)


@dataclass(frozen=True)
class PackedTensor:
    """A d×d×d tensor's modes 2 and 3 folded onto their pairs ``j ≤ l`` (:func:`pack_pairs`).

    ``matrix[i, p] = (2 − δ_jl)·(T_ijl + T_ilj)/2`` for the ``p``-th pair
    ``(rows[p], cols[p])`` of ``numpy.triu_indices(d)``: a ``(d, d(d+1)/2)``
    array, half of ``T``.
    """

    matrix: np.ndarray
    rows: np.ndarray
    cols: np.ndarray


def pack_pairs(T: np.ndarray) -> PackedTensor:
    """Fold ``T``'s modes 2 and 3 onto their pairs ``j ≤ l`` for :func:`packed_apply`; O(d³) once."""
    T = _check_cubic(T)
    rows, cols = np.triu_indices(T.shape[0])
    weight = np.where(rows == cols, 0.5, 1.0)               # (2 − δ_jl)/2
    return PackedTensor(np.ascontiguousarray((T[:, rows, cols] + T[:, cols, rows]) * weight), rows, cols)


def packed_apply(P: PackedTensor, U: np.ndarray) -> np.ndarray:
    """:func:`tensor_apply` of the packed tensor: ``Σ_{j≤l} matrix[:, (j,l)] u_j u_l`` per column.

    The same sum as ``Σ_jl T_ijl u_j u_l`` (each off-diagonal pair once,
    with both entries), in ``d²(d+1)/2`` products per column instead of
    ``d³``, as one BLAS product with the columns' pair products
    ``u_j u_l``. The rounding differs from :func:`tensor_apply`'s.
    """
    U = as_columns(U)
    if U.shape[0] != P.matrix.shape[0]:
        raise ValueError(f"U has {U.shape[0]} rows, tensor dimension is {P.matrix.shape[0]}")
    return P.matrix @ (U[P.rows] * U[P.cols])


def tensor_value(T: np.ndarray, U: np.ndarray) -> np.ndarray:
    """``T(u_l, u_l, u_l)`` for every column of ``U``; shape (L,)."""
    U = as_columns(U)
    return np.einsum("il,il->l", U, tensor_apply(T, U))


def _check_data(X, U: np.ndarray):
    U = as_columns(U)
    if X.ndim != 2 or X.shape[1] != U.shape[0]:
        raise ValueError(f"data must be (n, d) with d = {U.shape[0]} (rows of U), got shape {X.shape}")
    return U


def moment_partial(X, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unnormalised partial sums of the empirical third moment over the rows of ``X``.

    Parameters
    ----------
    X : ndarray or scipy sparse matrix, shape (n, d)
        Data points as rows.
    U : ndarray, shape (d, L)

    Returns
    -------
    apply_sum : ndarray, shape (d, L)
        ``Σ_ℓ (x_ℓᵀu)² x_ℓ`` per column (paper Alg. 2, line 6, without 1/n).
    value_sum : ndarray, shape (L,)
        ``Σ_ℓ (x_ℓᵀu)³`` per column.

    Notes
    -----
    These are sums, so shards compute them on their rows and the coordinator
    adds them (in a fixed order, for bitwise-reproducible results).
    """
    U = _check_data(X, U)
    Y = X @ U
    Y = np.asarray(Y)
    Y2 = Y * Y
    apply_sum = np.asarray(X.T @ Y2)
    return apply_sum, np.einsum("nl,nl->l", Y2, Y)


def moment_apply(X, U: np.ndarray) -> np.ndarray:
    """``T(I,u,u)`` of the empirical moment ``T = (1/n) Σ x⊗x⊗x``; shape (d, L)."""
    n = X.shape[0]
    if n == 0:
        raise ValueError("data has no rows")
    return moment_partial(X, U)[0] / n


def moment_value(X, U: np.ndarray) -> np.ndarray:
    """``T(u,u,u)`` of the empirical moment ``T = (1/n) Σ x⊗x⊗x``; shape (L,)."""
    n = X.shape[0]
    if n == 0:
        raise ValueError("data has no rows")
    return moment_partial(X, U)[1] / n


def deflation_apply(eigenvalues: np.ndarray, eigenvectors: np.ndarray, U: np.ndarray) -> np.ndarray:
    """``D(I,u,u)`` for ``D = Σ_j λ_j v_j⊗v_j⊗v_j``: ``V diag(λ) (VᵀU)²``; shape (d, L).

    Deflation ``T ← T − D`` (paper Alg. 1 line 6, Alg. 2 line 7, Alg. 3 line 11)
    is applied implicitly through this term, in O(d k L).
    """
    V = as_columns(eigenvectors)
    lam = np.asarray(eigenvalues, dtype=float)
    if V.shape[1] == 0:
        return np.zeros(as_columns(U).shape)
    xi = V.T @ as_columns(U)
    return V @ (lam[:, None] * xi * xi)


def deflation_value(eigenvalues: np.ndarray, eigenvectors: np.ndarray, U: np.ndarray) -> np.ndarray:
    """``D(u,u,u) = Σ_j λ_j (v_jᵀu)³`` for ``D = Σ_j λ_j v_j⊗3``; shape (L,)."""
    V = as_columns(eigenvectors)
    lam = np.asarray(eigenvalues, dtype=float)
    if V.shape[1] == 0:
        return np.zeros(as_columns(U).shape[1])
    xi = V.T @ as_columns(U)
    return lam @ (xi * xi * xi)


def rank_one_sum(eigenvalues: np.ndarray, eigenvectors: np.ndarray) -> np.ndarray:
    """The explicit tensor ``Σ_j λ_j v_j⊗v_j⊗v_j`` (paper eq. 2); shape (d, d, d)."""
    V = as_columns(eigenvectors)
    return np.einsum("r,ir,jr,kr->ijk", np.asarray(eigenvalues, dtype=float), V, V, V)


def symmetrize(T: np.ndarray) -> np.ndarray:
    """Average of ``T`` over the six permutations of its modes."""
    T = _check_cubic(T)
    return sum(np.transpose(T, p) for p in itertools.permutations(range(3))) / 6.0


def _asymmetry(T: np.ndarray) -> float:
    return max(float(np.max(np.abs(T - np.transpose(T, p)))) for p in ((1, 0, 2), (0, 2, 1)))


def symmetry_tolerance(dtype) -> float:
    """Default relative symmetry tolerance for a tensor stored in ``dtype``.

    ``max(SYMMETRY_RTOL, SYMMETRY_ULPS · eps(dtype))``: 1e-8 for float64 and
    integers, 64·2⁻²³ ≈ 7.6e-6 for float32, 0.0625 for float16.

    Why: a tensor computed in its own precision (a rank-one sum, an empirical
    moment, or ``symmetrize`` itself) holds ``T_ijk`` and ``T_jik`` as sums of
    the same terms rounded in different orders, so they differ by up to
    ``~2m·u·Σ|terms|`` for ``m`` terms (``u = eps/2``, the standard bound on
    recursive summation). The float32 tensors we measured (rank-one sums, a
    float32 ``symmetrize``, a 1000-point moment) differ by 0.15–1 eps of
    ``max |T|``; 64 eps leaves room for longer sums with some cancellation,
    while a genuinely non-symmetric tensor is asymmetric by O(max |T|). The
    1e-8 floor keeps the previous (float64) behaviour: float64 moments
    accumulate far more than 64 eps64 ≈ 1.4e-14.
    """
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.floating):
        return max(SYMMETRY_RTOL, SYMMETRY_ULPS * float(np.finfo(dtype).eps))
    return SYMMETRY_RTOL


def is_symmetric(T: np.ndarray, rtol: float | None = None) -> bool:
    """Whether ``max |T − T^σ| ≤ rtol · max |T|`` for all mode permutations σ.

    ``rtol`` defaults to :func:`symmetry_tolerance` of ``T``'s dtype. The two
    transpositions (1,0,2) and (0,2,1) generate the symmetric group, so
    checking them suffices.
    """
    rtol = symmetry_tolerance(np.asarray(T).dtype) if rtol is None else float(rtol)
    T = _check_cubic(T)
    return _asymmetry(T) <= rtol * float(np.max(np.abs(T)))


def check_symmetric(T: np.ndarray, rtol: float | None = None, name: str = "tensor") -> np.ndarray:
    """``T`` as a float64 array; ``ValueError`` naming ``name`` if it is not real, cubic and symmetric.

    Parameters
    ----------
    T : array_like, shape (d, d, d)
        Real, finite, and symmetric to ``max |T − T^σ| ≤ rtol · max |T|``.
    rtol : float, optional
        Relative tolerance; default :func:`symmetry_tolerance` of ``T``'s
        dtype (so a float32 tensor is judged at float32 precision).
    name : str
        How error messages call ``T`` (e.g. the file it came from).

    Returns
    -------
    ndarray
        ``T`` in float64 (not symmetrised: an asymmetry within the tolerance
        is rounding of the input's precision, and the forms contract modes 2
        and 3 of ``T`` as given).
    """
    dtype = np.asarray(T).dtype
    rtol = symmetry_tolerance(dtype) if rtol is None else float(rtol)
    if not (rtol >= 0 and np.isfinite(rtol)):
        raise ValueError(f"symmetry tolerance must be finite and ≥ 0, got {rtol!r}")
    T = _check_cubic(T, name)
    if not np.all(np.isfinite(T)):
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(T))[0])
        raise ValueError(f"{name} has non-finite entries (first at index {bad})")
    asym = _asymmetry(T)
    scale = float(np.max(np.abs(T)))
    if asym > rtol * scale:
        raise ValueError(f"{name} is not symmetric: max |T_ijk − T_jik|, |T_ijk − T_ikj| = {asym:.3g} = "
                         f"{asym / scale:.3g}·max|T| exceeds the tolerance {rtol:.3g}·max|T| for dtype {dtype} "
                         "(symmetrize it first, or raise the tolerance)")
    return T


def empirical_moment(X) -> np.ndarray:
    """The explicit ``(1/n) Σ x⊗x⊗x`` (d³ memory: small d and tests only)."""
    X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=float)
    return np.einsum("ni,nj,nk->ijk", X, X, X) / X.shape[0]


def clip_rows(X, bound: float):
    """Scale every row with ``‖x‖₂ > bound`` down to norm ``bound`` (dense or CSR).

    Clipping bounds the per-point sensitivity of the empirical moment used by
    the data-level neighbour notion of :mod:`distdp.tensor.dp`.
    """
    if not bound > 0:
        raise ValueError(f"clip bound must be > 0, got {bound}")
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=float)
        norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
        scale = np.minimum(1.0, bound / np.maximum(norms, np.finfo(float).tiny))
        return sp.diags(scale) @ X
    X = np.asarray(X, dtype=float)
    norms = np.linalg.norm(X, axis=1)
    scale = np.minimum(1.0, bound / np.maximum(norms, np.finfo(float).tiny))
    return X * scale[:, None]


def as_point_shards(shards) -> tuple[list, int]:
    """Data shards as float CSR or dense arrays, and their common dimension.

    Raises
    ------
    ValueError
        No shards, or shards of different dimensions.
    """
    if sp.issparse(shards) or isinstance(shards, np.ndarray):
        shards = [shards]
    out = [sp.csr_matrix(s, dtype=float) if sp.issparse(s) else np.asarray(s, dtype=float) for s in shards]
    if not out:
        raise ValueError("no data shards")
    dims = {s.shape[1] for s in out}
    if len(dims) != 1:
        raise ValueError(f"shards disagree on the dimension: {sorted(dims)}")
    return out, dims.pop()
