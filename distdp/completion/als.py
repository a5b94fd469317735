"""Alternating least squares (ALS) on the completion objectives (paper eqs. 6–7).

The objectives are those of the SGD (:mod:`distdp.completion.sgd`), unchanged:

    (6)  f(A, B, C)    = ‖P_Ω(X − ⟦A, B, C⟧)‖²_F + λ (‖A‖²_F + ‖B‖²_F + ‖C‖²_F)
    (7)  f(A, B, C, G) = ‖P_Ω(X − ⟦G; A, B, C⟧)‖²_F + λo (‖A‖² + ‖B‖² + ‖C‖²) + λg ‖G‖²

Both models are linear in each block when the others are fixed, and the
objective separates over the rows of a factor matrix. For row ``a_i`` of A:

    x̂_e = a_i · z_e,   z_e = b_j ∘ c_k (CP)   or   z_e = G ×2 b_j ×3 c_k (Tucker),

so the exact minimiser of f over a_i (everything else fixed) is the ridge
solution

    (Σ_{e ∈ Ω_i} z_e z_eᵀ + λ I) a_i = Σ_{e ∈ Ω_i} x_e z_e,

Ω_i the observed entries of slice i (likewise B, C). Tucker's core enters
linearly too, x̂_e = vec(G) · (a_i ⊗ b_j ⊗ c_k), and its exact block minimiser is
one R³×R³ ridge system with λg: solved directly for R ≤ 4, by conjugate gradients
warm-started at the current core above (O(|Ω|R³) per iteration instead of
O(|Ω|R⁶) to form the system; every CG iterate lowers the objective). One *sweep* updates A, B, C (then G) in turn;
each update is the exact minimiser of f over its block, so f never increases
(up to rounding) — the property :func:`run_als` records and the tests check.

Vectorisation: the entries are sorted once by each mode's index (Ω is public,
so is this order); the per-row Gram matrices and right-hand sides are segment
sums (``np.add.reduceat``) of per-entry outer products, computed in chunks of
entries to bound memory, and the R×R systems of all rows are solved at once by
``np.linalg.solve`` on the stacked (n, R, R) array. There is no Python loop over
entries or rows. A row with no observed entry gets 0 (its ridge solution with
λ > 0); with λ = 0 a singular system falls back to the minimum-norm solution
(``np.linalg.pinv``).

Extrapolation: after each sweep, the step X + β (X − X_prev) along the
sweep's change of every block is tried and kept only where it lowers f (ALS
with line search, :func:`extrapolate`), so f still never increases; where
ALS crawls (a "swamp"), one such step covers many sweeps.

Stopping: after each sweep, stop when (f_prev − f)/f_prev < ``tol`` (the
relative decrease of the objective); ``converged`` says whether that happened
within ``max_sweeps``. The sufficient statistics (per-row Gram matrices and
right-hand sides) are sums over entries: :func:`normal_equations` computes them
for any subset of the entries, so sharded workers can compute partial sums
that a coordinator adds (``distdp.distributed.completion``).

Choosing λ: the ridge weight that predicts best differs between tensors by
orders of magnitude (a low-noise low-rank tensor wants it small, a tensor whose
rank-R model fits noise wants it large), and no rule computed from the values'
scale alone gets both. :func:`choose_lambda` holds out a share of the training
entries, fits a geometric path of λ around a starting value (moving in the
direction in which the held-out error falls) and returns the λ with the
smallest held-out error: the usual validation choice along a regularisation
path (Hastie, Tibshirani & Friedman, *The Elements of Statistical Learning*,
2nd ed., §7.10; glmnet's and softImpute's λ paths).
"""
from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, replace
from typing import Callable, Optional

import numpy as np

from distdp.completion import cp, tucker
from distdp.completion.entries import Observations, split_holdout
from distdp.completion.sgd import SGDDivergedError, SGDTrace

MODELS = {"cp": cp, "tucker": tucker}
CHUNK = 1 << 18          # entries per chunk of the segment sums: bounds the (chunk, R²) temporaries


@dataclass(frozen=True)
class ALSConfig:
    """Settings of the ALS.

    Attributes
    ----------
    max_sweeps : int
        At most this many sweeps (one sweep updates every block once).
    tol : float
        Stop when the relative decrease (f_prev − f)/f_prev of the objective
        over a sweep falls below ``tol``. 0: run all ``max_sweeps``.
    lam : float
        λ of eq. (6), λo of eq. (7).
    lam_core : float
        λg of eq. (7) (Tucker only).
    init_scale : float
        Standard deviation of the initial model entries (the data-independent
        initialisation of :func:`cp.init_factors` / :func:`tucker.init_factors`).
    extrapolate : bool
        After each sweep, try the step ``X + β (X − X_prev)`` along the
        sweep's change and keep it where it lowers the objective (ALS with
        line search; :func:`extrapolate`).
    chunk : int
        Entries per chunk of the segment sums (memory: chunk·R² floats; Tucker
        core: chunk·R³).
    dense : bool or None
        Form the sums from the dense mask and values (:class:`DenseStats`)
        instead of entry by entry (:class:`EntryStats`); None chooses by
        :func:`dense_enough`. The same objective and sweeps, other rounding.
    """

    max_sweeps: int = 500
    tol: float = 1e-7
    lam: float = 0.01
    lam_core: float = 0.0
    init_scale: float = 0.1
    extrapolate: bool = True
    chunk: int = CHUNK
    dense: Optional[bool] = None

    def __post_init__(self):
        if self.dense not in (None, True, False):
            raise ValueError(f"dense must be True, False or None, got {self.dense!r}")
        if not (isinstance(self.max_sweeps, (int, np.integer)) and self.max_sweeps >= 1):
            raise ValueError(f"max_sweeps must be an integer ≥ 1, got {self.max_sweeps!r}")
        if not (isinstance(self.chunk, (int, np.integer)) and self.chunk >= 1):
            raise ValueError(f"chunk must be an integer ≥ 1, got {self.chunk!r}")
        for name in ("tol", "lam", "lam_core"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be finite and ≥ 0, got {v!r}")
        if not (math.isfinite(self.init_scale) and self.init_scale > 0):
            raise ValueError(f"init_scale must be finite and > 0, got {self.init_scale!r}")


@dataclass(frozen=True)
class ModeOrder:
    """The entries sorted by one mode's index, with the segments of each non-empty row (public: Ω only).

    Attributes
    ----------
    mode : int
    order : ndarray of int or None
        Permutation sorting the entries by ``idx[:, mode]`` (stable); None
        when the entries are already sorted (then chunks are slices).
    rows : ndarray of int
        The distinct row indices present, ascending.
    starts : ndarray of int
        Start of each row's segment in the sorted order.
    """

    mode: int
    order: Optional[np.ndarray]
    rows: np.ndarray
    starts: np.ndarray

    @classmethod
    def build(cls, idx: np.ndarray, mode: int) -> "ModeOrder":
        """Sort ``idx`` (n×3) by column ``mode`` and find the row segments."""
        order = np.argsort(idx[:, mode], kind="stable")
        sorted_index = idx[order, mode]
        rows, starts = np.unique(sorted_index, return_index=True)
        return cls(mode, order, rows, starts)


def unfold(T: np.ndarray, mode: int) -> np.ndarray:
    """The mode-``mode`` unfolding (n_mode, rest) of a 3-way array, the other modes in order (C-contiguous)."""
    return np.ascontiguousarray(np.moveaxis(T, mode, 0)).reshape(T.shape[mode], -1)


def design(model_name: str, factors, idx: np.ndarray, mode: int) -> np.ndarray:
    """Per-entry design rows z_e (n, R) of the block ``mode``: x̂_e = F_mode[idx_e] · z_e.

    CP: z_e is the Hadamard product of the other two factors' rows. Tucker:
    z_e = G_(mode) (u ⊗ v), the mode-``mode`` unfolding of the core times the
    Kronecker product of the other two factors' rows (in mode order).
    """
    o1, o2 = [m for m in range(3) if m != mode]
    U, V = factors[o1][idx[:, o1]], factors[o2][idx[:, o2]]
    if model_name == "cp":
        return U * V
    R = factors[3].shape[0]
    Gm = unfold(factors[3], mode)                           # (R, R·R), columns ordered (o1, o2)
    return (U[:, :, None] * V[:, None, :]).reshape(len(idx), R * R) @ Gm.T


def normal_equations(model_name: str, factors, idx: np.ndarray, values: np.ndarray, mode: int,
                     order: Optional[ModeOrder] = None, chunk: int = CHUNK):
    """Per-row Gram matrices and right-hand sides of the block ``mode`` over the given entries.

    Returns Σ_{e ∈ Ω_i} z_e z_eᵀ and Σ_{e ∈ Ω_i} x_e z_e for every row i of
    factor ``mode`` (zeros for rows without an entry): additive over disjoint
    sets of entries, so shards can compute partial sums.

    Parameters
    ----------
    model_name : {'cp', 'tucker'}
    factors : sequence of ndarray
    idx : ndarray (n, 3)
    values : ndarray (n,)
    mode : int in {0, 1, 2}
    order : ModeOrder, optional
        Precomputed sort of ``idx`` by ``mode`` (computed if absent).
    chunk : int

    Returns
    -------
    gram : ndarray (n_mode, R, R)
    rhs : ndarray (n_mode, R)
    """
    if order is None:
        order = ModeOrder.build(idx, mode)
    n_rows, R = factors[mode].shape
    gram = np.zeros((n_rows, R, R))
    rhs = np.zeros((n_rows, R))
    n = len(values)
    # chunk boundaries at row-segment starts (the first segment start ≥ each multiple of ``chunk``), so that
    # every row's segment lies in one chunk
    seg_starts = order.starts
    cut = np.searchsorted(seg_starts, np.arange(0, n, chunk))
    bounds = np.unique(np.append(np.where(cut < len(seg_starts), seg_starts[np.minimum(cut, len(seg_starts) - 1)],
                                          n), n))
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        sel = slice(lo, hi) if order.order is None else order.order[lo:hi]
        s_lo, s_hi = np.searchsorted(seg_starts, [lo, hi])
        rows = order.rows[s_lo:s_hi]
        starts = seg_starts[s_lo:s_hi] - lo
        Z = design(model_name, factors, idx[sel], mode)
        gram[rows] = np.add.reduceat(np.einsum("br,bs->brs", Z, Z).reshape(len(Z), R * R), starts,
                                     axis=0).reshape(len(rows), R, R)
        rhs[rows] = np.add.reduceat(Z * values[sel, None], starts, axis=0)
    return gram, rhs


def solve_rows(gram: np.ndarray, rhs: np.ndarray, lam: float) -> np.ndarray:
    """Solve (gram_i + λI) f_i = rhs_i for every row at once (stacked ``np.linalg.solve``).

    With λ = 0 a singular row system (fewer observed entries than R) falls
    back to the minimum-norm least-squares solution via ``np.linalg.pinv``;
    rows without entries then get 0, as with λ > 0.
    """
    R = gram.shape[-1]
    M = gram + lam * np.eye(R)
    try:
        return np.linalg.solve(M, rhs[..., None])[..., 0]
    except np.linalg.LinAlgError:
        return np.einsum("nrs,ns->nr", np.linalg.pinv(M, hermitian=True), rhs)


def core_normal_equations(factors, idx: np.ndarray, values: np.ndarray, chunk: int = CHUNK):
    """Tucker core: Σ_e w_e w_eᵀ (R³×R³) and Σ_e x_e w_e (R³), w_e = a_i ⊗ b_j ⊗ c_k (additive over entries)."""
    A, B, C, G = factors
    R = G.shape[0]
    gram = np.zeros((R ** 3, R ** 3))
    rhs = np.zeros(R ** 3)
    for lo in range(0, len(values), chunk):
        e = idx[lo:lo + chunk]
        W = np.einsum("bp,bq,bt->bpqt", A[e[:, 0]], B[e[:, 1]], C[e[:, 2]]).reshape(len(e), R ** 3)
        gram += W.T @ W
        rhs += W.T @ values[lo:lo + chunk]
    return gram, rhs


def solve_core(gram: np.ndarray, rhs: np.ndarray, lam_core: float, R: int) -> np.ndarray:
    """The core minimising eq. (7) given the factors: (gram + λg I) vec(G) = rhs (pinv if singular)."""
    M = gram + lam_core * np.eye(len(rhs))
    try:
        g = np.linalg.solve(M, rhs)
    except np.linalg.LinAlgError:
        g = np.linalg.pinv(M, hermitian=True) @ rhs
    return g.reshape(R, R, R)


def rebalance(model_name: str, factors: list, lam: float, lam_core: float) -> None:
    """Rescale the blocks in place without changing the model, so that the penalty of eq. (6)/(7) is smallest.

    CP: component r is a_r ∘ b_r ∘ c_r; scaling a_r, b_r, c_r by s₁, s₂, s₃
    with s₁s₂s₃ = 1 leaves it unchanged, and λ(‖s₁a_r‖² + ‖s₂b_r‖² + ‖s₃c_r‖²)
    is smallest (AM–GM) when the three norms are equal, to (‖a_r‖‖b_r‖‖c_r‖)^(1/3).
    Tucker, one mode at a time: A → AM and G_(1) → M⁻¹G_(1) (the mode-1
    unfolding) leave ⟦G; A, B, C⟧ unchanged for any invertible M. With
    S = MMᵀ, P = AᵀA and Q = G_(1)G_(1)ᵀ the penalty is
    λo tr(PS) + λg tr(QS⁻¹), convex in S ≻ 0, minimal where S P S = (λg/λo) Q:
    S = P^(-1/2) (P^(1/2) (λg/λo) Q P^(1/2))^(1/2) P^(-1/2), M = S^(1/2)
    (skipped when P or Q is singular, or λo or λg is 0). Each step is an exact
    minimisation over a gauge that leaves the data term unchanged, so the
    objective never increases: ALS stays monotone, and this removes the slow
    drift along the gauge that plain ALS with a ridge shows (paper eqs. 6–7
    penalise the factors, so the gauge is not free).
    """
    if model_name == "cp":
        norms = np.stack([np.sqrt(np.einsum("nr,nr->r", F, F)) for F in factors[:3]])    # (3, R)
        ok = np.all(norms > 0, axis=0)
        target = np.cbrt(np.prod(norms, axis=0))
        for m in range(3):
            factors[m] = factors[m] * np.where(ok, target / np.where(ok, norms[m], 1.0), 1.0)
        return
    if lam <= 0 or lam_core <= 0:
        return
    R = factors[3].shape[0]
    c = lam_core / lam
    for m in range(3):
        P = factors[m].T @ factors[m]
        Gm = unfold(factors[3], m)
        Q = Gm @ Gm.T
        wp, Vp = np.linalg.eigh(P)
        if wp.min() <= 1e-12 * max(wp.max(), 1e-300) or np.linalg.eigvalsh(Q).min() <= 0:
            continue                  # a rank-deficient block: leave the gauge alone
        P_half = (Vp * np.sqrt(wp)) @ Vp.T
        P_mhalf = (Vp / np.sqrt(wp)) @ Vp.T
        wk, Vk = np.linalg.eigh(P_half @ (c * Q) @ P_half)
        S = P_mhalf @ ((Vk * np.sqrt(np.maximum(wk, 0))) @ Vk.T) @ P_mhalf
        ws, Vs = np.linalg.eigh((S + S.T) / 2)
        if ws.min() <= 0:
            continue
        M = (Vs * np.sqrt(ws)) @ Vs.T                      # M Mᵀ = S
        M_inv = (Vs / np.sqrt(ws)) @ Vs.T
        factors[m] = factors[m] @ M
        factors[3] = np.moveaxis((M_inv @ Gm).reshape(R, R, R), 0, m)


class EntryStats:
    """Sufficient statistics of the ALS over one set of entries held in memory (the whole set, or one shard).

    The entries are sorted once per mode (an order that depends on Ω only) so
    that every row's entries are contiguous; :meth:`normal_equations` then
    slices instead of gathering. Every method returns a sum over this set's
    entries, so a coordinator can add the results of several shards
    (:mod:`distdp.distributed.completion`).

    Parameters
    ----------
    model_name : {'cp', 'tucker'}
    idx : ndarray (n, 3)
    values : ndarray (n,)
    chunk : int
    """

    def __init__(self, model_name: str, idx: np.ndarray, values: np.ndarray, chunk: int = CHUNK):
        self.model_name = model_name
        self.chunk = int(chunk)
        self.n = len(values)
        self.idx, self.values = idx, values
        self._cols = None
        self._sorted = []
        for mode in range(3):
            order = ModeOrder.build(idx, mode)
            sidx, svals = np.asfortranarray(idx[order.order]), values[order.order]   # contiguous columns
            self._sorted.append((sidx, svals, ModeOrder(mode, None, order.rows, order.starts)))

    def normal_equations(self, factors, mode: int):
        """Per-row Gram matrices and right-hand sides of block ``mode`` (:func:`normal_equations`)."""
        sidx, svals, order = self._sorted[mode]
        return normal_equations(self.model_name, factors, sidx, svals, mode, order, self.chunk)

    def core_normal_equations(self, factors):
        """Tucker core: Σ w wᵀ and Σ x w (:func:`core_normal_equations`)."""
        return core_normal_equations(factors, self.idx, self.values, self.chunk)

    def _ab_c(self, factors, sl):
        """(a_i ⊗ b_j) as (b, R²) rows and c_k (b, R) for the entries in slice ``sl``."""
        i, j, k = self._columns()
        A, B, C = factors[:3]
        a, b = A[i[sl]], B[j[sl]]
        R = A.shape[1]
        return (a[:, :, None] * b[:, None, :]).reshape(len(a), R * R), C[k[sl]]

    def core_rhs(self, factors) -> np.ndarray:
        """Σ_e x_e a_i ⊗ b_j ⊗ c_k (R, R, R), two BLAS products per chunk."""
        R = factors[0].shape[1]
        out = np.zeros((R * R, R))
        for sl in self._slices():
            ab, c = self._ab_c(factors, sl)
            out += (ab * self.values[sl, None]).T @ c
        return out.reshape(R, R, R)

    def core_apply(self, factors, V: np.ndarray) -> np.ndarray:
        """Σ_e w_e (w_eᵀ vec V), w_e = a_i ⊗ b_j ⊗ c_k: the core Gram matrix times V, in O(|Ω| R³)."""
        R = factors[0].shape[1]
        Vm = V.reshape(R * R, R)
        out = np.zeros((R * R, R))
        for sl in self._slices():
            ab, c = self._ab_c(factors, sl)
            s = np.einsum("bt,bt->b", ab @ Vm, c)
            out += (ab * s[:, None]).T @ c
        return out.reshape(R, R, R)

    def _columns(self):
        if self._cols is None:     # contiguous index columns: gathers from strided columns are slow
            self._cols = [np.ascontiguousarray(self.idx[:, m]) for m in range(3)]
        return self._cols

    def _slices(self):
        return [slice(lo, lo + self.chunk) for lo in range(0, self.n, self.chunk)]

    def data_term(self, factors) -> float:
        """Σ_e (x_e − x̂_e)² over this set's entries (the data term of eq. 6/7)."""
        model = MODELS[self.model_name]
        i, j, k = self._columns()
        total = 0.0
        for lo in range(0, self.n, self.chunk):
            sl = slice(lo, lo + self.chunk)
            r = self.values[sl] - model.predict(factors, i[sl], j[sl], k[sl])
            total += float(r @ r)
        return total

    def sum_squares(self) -> float:
        """Σ x² (the all-zero model's data term)."""
        return float(self.values @ self.values)


#: The dense layout (:class:`DenseStats`) serves tensors of at most this many cells (its six unfolded copies
#: of the mask and the values take 48 bytes a cell).
DENSE_MAX_CELLS = 1 << 23


def dense_enough(shape, n_observed: int, rank: int, model_name: str = "cp") -> bool:
    """Whether :class:`DenseStats` should serve a tensor of ``shape`` with ``n_observed`` entries.

    A sweep of the dense layout costs about the same per cell whatever the share observed
    (memory-bound BLAS products: 10–35 ns a cell for R = 3–8 on a 2-core machine), the entry
    layout's about 30 ns per entry and R² terms (CP) or 20 ns per entry and R³ terms (Tucker,
    whose core products are cubic in R). So the dense layout serves tensors of at most
    :data:`DENSE_MAX_CELLS` cells of which at least 1/(2R²) (CP) or 1/R³ (Tucker) are observed:
    5.6% / 3.7% at R = 3, 2% / 0.8% at R = 5, near where the measured times cross.
    """
    cells = math.prod(int(n) for n in shape)
    terms = 2 * int(rank) ** 2 if model_name == "cp" else int(rank) ** 3
    return cells <= DENSE_MAX_CELLS and n_observed * terms >= cells


@functools.lru_cache(maxsize=None)
def upper_triangle(R: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.triu_indices(R)``, made once per R (a sweep asks for it once per mode; read-only)."""
    rows, cols = np.triu_indices(R)
    rows.flags.writeable = cols.flags.writeable = False
    return rows, cols


class DenseStats:
    """The sufficient statistics of :class:`EntryStats`, from the dense mask and values (small, dense tensors).

    Holds the 0/1 mask M of Ω and the values X (0 outside Ω) unfolded along each mode, and forms
    every sum over the entries as products of these with the factors: the Gram matrices of block
    ``m`` are M_(m) Q, Q the row-wise outer products of the design rows of every cell, and the
    right-hand sides X_(m) Z (the MTTKRP of the masked tensor, as in Tomasi & Bro 2005's masked
    ALS); the Tucker core's products are multilinear products of the masked tensor with Aᵀ, Bᵀ,
    Cᵀ, O(n1·n2·n3·R) instead of O(|Ω|·R³). The same sums as :class:`EntryStats` (to rounding);
    each costs a multiple of the number of cells rather than of entries, so it pays where a fair
    share of the cells is observed (:func:`dense_enough`).

    Parameters
    ----------
    model_name : {'cp', 'tucker'}
    idx : ndarray (n, 3)
        Distinct entries.
    values : ndarray (n,)
    shape : tuple of 3 int
    chunk : int
        Columns of an unfolding per block of design rows (memory: chunk·R² floats), and cells per block
        of the residual. The Tucker core's products hold two arrays of n1·n2·n3 floats.
    """

    def __init__(self, model_name: str, idx: np.ndarray, values: np.ndarray, shape, chunk: int = CHUNK):
        self.model_name = model_name
        self.shape = tuple(int(n) for n in shape)
        self.chunk = int(chunk)
        mask = np.zeros(self.shape)
        mask[tuple(idx.T)] = 1.0
        x = np.zeros(self.shape)
        x[tuple(idx.T)] = values
        self._sum_squares = float(values @ values)
        self._unfolded = [(unfold(mask, m), unfold(x, m)) for m in range(3)]

    def _design_blocks(self, factors, mode: int, columns: int):
        """(cols, Z) for blocks of about ``columns`` columns of the mode-``mode`` unfolding: Z their design rows."""
        o1, o2 = [m for m in range(3) if m != mode]
        U, V = factors[o1], factors[o2]
        n2 = len(V)
        step = max(1, columns // n2)
        Gm = unfold(factors[3], mode) if self.model_name == "tucker" else None
        for lo in range(0, len(U), step):
            u = U[lo:lo + step]
            if Gm is None:
                Z = (u[:, None, :] * V[None, :, :]).reshape(len(u) * n2, -1)
            else:
                Z = (u[:, None, :, None] * V[None, :, None, :]).reshape(len(u) * n2, -1) @ Gm.T
            yield slice(lo * n2, (lo + len(u)) * n2), Z

    def normal_equations(self, factors, mode: int):
        """Per-row Gram matrices and right-hand sides of block ``mode`` (as :func:`normal_equations`)."""
        M, X = self._unfolded[mode]
        R = factors[mode].shape[1]
        upper, lower = upper_triangle(R)           # the Gram matrices are symmetric: form the upper triangle
        tri = np.zeros((len(M), len(upper)))
        rhs = np.zeros((len(M), R))
        for cols, Z in self._design_blocks(factors, mode, self.chunk):            # Z: chunk × R floats
            tri += M[:, cols] @ (Z[:, upper] * Z[:, lower])
            rhs += X[:, cols] @ Z
        gram = np.empty((len(M), R, R))
        gram[:, upper, lower] = tri
        gram[:, lower, upper] = tri
        return gram, rhs

    def data_term(self, factors) -> float:
        """Σ_e (x_e − x̂_e)² over Ω: the masked residual M ∘ (X − X̂), X̂ formed block by block."""
        M, X = self._unfolded[0]
        total = 0.0
        for cols, Z in self._design_blocks(factors, 0, self.chunk // len(M)):        # residual: chunk cells
            r = X[:, cols] - M[:, cols] * (factors[0] @ Z.T)
            total += float(np.einsum("ij,ij->", r, r))
        return total

    def sum_squares(self) -> float:
        """Σ x² (the all-zero model's data term)."""
        return self._sum_squares

    def _project(self, T0: np.ndarray, factors) -> np.ndarray:
        """T ×1 Aᵀ ×2 Bᵀ ×3 Cᵀ of a tensor given as its mode-0 unfolding (n1, n2·n3): (R, R, R)."""
        A, B, C = factors[:3]
        n1, n2, n3 = self.shape
        T = (A.T @ T0).reshape(-1, n2, n3)
        return np.tensordot(np.tensordot(T, B, axes=(1, 0)), C, axes=(1, 0))

    def core_rhs(self, factors) -> np.ndarray:
        """Σ_e x_e a_i ⊗ b_j ⊗ c_k (R, R, R): the masked values projected on A, B, C."""
        return self._project(self._unfolded[0][1], factors)

    def core_apply(self, factors, V: np.ndarray) -> np.ndarray:
        """Σ_e w_e (w_eᵀ vec V): ⟦V; A, B, C⟧ masked to Ω, projected on A, B, C."""
        A, B, C = factors[:3]
        M = self._unfolded[0][0]
        BC = np.tensordot(np.tensordot(V, B, axes=(1, 1)), C, axes=(1, 1))        # (R, n2, n3)
        return self._project(M * (A @ BC.reshape(len(V), -1)), factors)

    def core_normal_equations(self, factors):
        """Tucker core: Σ w wᵀ (R³×R³) and Σ x w (R³), w = a ⊗ b ⊗ c, from the mask's products."""
        R = factors[3].shape[0]
        A2, B2, C2 = [(F[:, :, None] * F[:, None, :]).reshape(len(F), R * R) for F in factors[:3]]
        gram = self._project(self._unfolded[0][0], (A2, B2, C2))                  # (R², R², R²)
        gram = gram.reshape((R,) * 6).transpose(0, 2, 4, 1, 3, 5).reshape(R ** 3, R ** 3)
        return gram, self.core_rhs(factors).reshape(R ** 3)


def entry_stats(model_name: str, train: Observations, rank: int, chunk: int = CHUNK,
                dense: Optional[bool] = None):
    """The statistics object :func:`run_als` uses for ``train``: :class:`DenseStats` or :class:`EntryStats`.

    ``dense`` None chooses by :func:`dense_enough`.
    """
    if dense is None:
        dense = dense_enough(train.shape, train.n, rank, model_name)
    if dense:
        return DenseStats(model_name, train.idx, train.values, train.shape, chunk)
    return EntryStats(model_name, train.idx, train.values, chunk)


def penalty(factors, lam: float, lam_core: float) -> float:
    """λ(‖A‖² + ‖B‖² + ‖C‖²) (+ λg‖G‖² for Tucker): the regulariser of eq. (6)/(7)."""
    out = lam * sum(float(np.sum(F * F)) for F in factors[:3])
    return out + (lam_core * float(np.sum(factors[3] ** 2)) if len(factors) == 4 else 0.0)


def core_cg(stats, factors, lam_core: float, max_iter: int, rtol: float = 1e-10) -> np.ndarray:
    """Tucker core by conjugate gradients on (Σ w wᵀ + λg I) vec(G) = Σ x w, started at the current core.

    Each iteration costs one product Σ_e w_e (w_eᵀ v), O(|Ω| R³) (against
    O(|Ω| R⁶) to form the R³×R³ Gram matrix). CG started at the current core
    decreases the quadratic (the objective of eq. 7 as a function of G) at
    every iteration, so ALS stays monotone; it stops when the residual is
    below ``rtol`` times the right-hand side's norm, or after ``max_iter``.
    """
    G = factors[3]
    b = stats.core_rhs(factors)

    def apply(v):
        return stats.core_apply(factors, v) + lam_core * v

    x = G.copy()
    r = b - apply(x)
    p = r.copy()
    rr = float(np.sum(r * r))
    stop = (rtol * float(np.sqrt(np.sum(b * b)))) ** 2
    for _ in range(max_iter):
        if rr <= stop:
            break
        Ap = apply(p)
        alpha = rr / float(np.sum(p * Ap))
        x = x + alpha * p
        r = r - alpha * Ap
        rr_new = float(np.sum(r * r))
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x


#: The extrapolation step β of :func:`extrapolate`: its first value, the factor it grows by after a step that
#: lowered the objective, the factor it shrinks by after one that did not, and its bound.
STEP_START, STEP_GROW, STEP_SHRINK, STEP_MAX = 0.5, 1.5, 4.0, 8.0


def extrapolate(factors: list, before: list, f: float, beta: float, objective_of: Callable) -> tuple:
    """One extrapolation after a sweep: ``X + β (X − X_prev)`` for every block, kept if it lowers the objective.

    ALS crawls through "swamps", where every sweep moves the blocks a little in the same direction
    (Bro 1998; Rajih, Comon & Harshman 2008, "enhanced line search"): a step along the sweep's change
    covers many sweeps at once. The step is kept only where the objective falls, so the iterates stay
    monotone; β adapts as in Ang & Gillis (2019): ×:data:`STEP_GROW` after a kept step (at most
    :data:`STEP_MAX`), ÷:data:`STEP_SHRINK` after a refused one. Costs one objective evaluation
    (O(|Ω| R), Tucker O(|Ω| R³)) against a sweep's normal equations (O(|Ω| R²) per mode).

    Returns
    -------
    factors : list of ndarray
        The extrapolated blocks, or ``factors`` unchanged.
    f : float
        Their objective.
    beta : float
        The next step.
    """
    trial = [F + beta * (F - G) for F, G in zip(factors, before)]
    if all(np.isfinite(F).all() for F in trial):
        f_trial = objective_of(trial)
        if f_trial < f:
            return trial, f_trial, min(beta * STEP_GROW, STEP_MAX)
    return factors, f, beta / STEP_SHRINK


DIRECT_CORE_MAX = 64      # R³ up to this (R ≤ 4): form the R³×R³ system; above: conjugate gradients
CORE_CG_ITERS = 5         # CG iterations per sweep (warm-started: the core keeps improving across sweeps)


def run_als(model_name: str, train: Optional[Observations], rank: int, cfg: ALSConfig, rng: np.random.Generator,
            progress: Optional[Callable[[int, int, float], None]] = None,
            init: Optional[tuple] = None, stats=None, shape: Optional[tuple] = None):
    """Fit CP (eq. 6) or Tucker (eq. 7) factors to the training entries by ALS.

    Parameters
    ----------
    model_name : {'cp', 'tucker'}
    train : Observations or None
        Training entries (values as the fit should see them: offset removed,
        perturbed values under input perturbation). None with ``stats``.
    rank : int
    cfg : ALSConfig
    rng : numpy.random.Generator
        The data-independent initialisation (unused with ``init``).
    progress : callable(sweep, max_sweeps, objective), optional
    init : tuple of ndarray, optional
        Initial factors (copied).
    stats : object, optional
        Where the sums over the entries come from: anything with the methods
        of :class:`EntryStats` (``normal_equations(factors, mode)``,
        ``core_normal_equations(factors)``, ``data_term(factors)``,
        ``sum_squares()``), e.g. the sharded entries of
        :mod:`distdp.distributed.completion`. Default: :func:`entry_stats`
        over ``train``.
    shape : tuple, optional
        Tensor shape when ``train`` is None.

    Returns
    -------
    factors : tuple of ndarray
        (A, B, C) or (A, B, C, G).
    trace : SGDTrace
        ``epochs_run`` = ``steps`` = sweeps run; ``objective`` before the
        first sweep and after each; ``step_norm`` the change of all blocks
        over each sweep; ``converged`` whether the relative decrease fell
        below ``tol``; ``zero_objective`` Σ x² over the values given.

    Raises
    ------
    SGDDivergedError
        Non-finite factors (values too large for float64).
    """
    if model_name not in MODELS:
        raise ValueError(f"model must be one of {sorted(MODELS)}, got {model_name!r}")
    if not isinstance(rank, (int, np.integer)) or rank <= 0:
        raise ValueError(f"rank must be a positive integer, got {rank!r}")
    model = MODELS[model_name]
    t0 = time.perf_counter()
    if stats is None:
        stats = entry_stats(model_name, train, int(rank), cfg.chunk, cfg.dense)
    shape = train.shape if shape is None else shape
    factors = [F.copy() for F in init] if init is not None else list(
        model.init_factors(shape, int(rank), cfg.init_scale, rng))

    def objective_of(fs):
        return stats.data_term(fs) + penalty(fs, cfg.lam, cfg.lam_core)

    f = objective_of(factors)
    objective, step_norm, converged, beta = [f], [], False, STEP_START
    for sweep in range(1, cfg.max_sweeps + 1):
        before = [F.copy() for F in factors]
        for mode in range(3):
            gram, rhs = stats.normal_equations(factors, mode)
            factors[mode] = solve_rows(gram, rhs, cfg.lam)
        if model_name == "tucker":
            if int(rank) ** 3 <= DIRECT_CORE_MAX:
                gram, rhs = stats.core_normal_equations(factors)
                factors[3] = solve_core(gram, rhs, cfg.lam_core, int(rank))
            else:
                factors[3] = core_cg(stats, factors, cfg.lam_core, max_iter=CORE_CG_ITERS)
        rebalance(model_name, factors, cfg.lam, cfg.lam_core)
        if not all(np.isfinite(F).all() for F in factors):
            raise SGDDivergedError(f"ALS produced non-finite factors in sweep {sweep}: rescale the values", sweep)
        f_new = objective_of(factors)
        if cfg.extrapolate and sweep > 1:
            factors, f_new, beta = extrapolate(factors, before, f_new, beta, objective_of)
        objective.append(f_new)
        step_norm.append(float(np.sqrt(sum(np.sum((F - G) ** 2) for F, G in zip(factors, before)))))
        if progress is not None:
            progress(sweep, cfg.max_sweeps, f_new)
        if cfg.tol > 0 and (f - f_new) <= cfg.tol * max(abs(f), 1e-300):
            converged = True
            break
        f = f_new
    trace = SGDTrace(epochs_run=len(step_norm), steps=len(step_norm), objective=tuple(objective),
                     step_norm=tuple(step_norm), converged=converged, seconds=time.perf_counter() - t0,
                     clipped_fraction=0.0, zero_objective=stats.sum_squares(), diverged_pass=None)
    return tuple(factors), trace


@dataclass(frozen=True)
class LambdaSearch:
    """How :func:`choose_lambda` searches λ.

    Attributes
    ----------
    fraction : float
        Share of the training entries held out to score each λ.
    factor : float
        Ratio of neighbouring λ on the path (λ·factor^j; Tucker's λg keeps its
        ratio to λo).
    max_steps : int
        The path goes at most this many steps from the starting λ.
    min_gain : float
        Go on along the path while a step lowers the held-out RMSE by at least
        this share; a λ other than the start is chosen only where it beats the
        start by this share.
    sweeps : int
        The most sweeps of each path fit.
    tol : float
        The path fits' stopping tolerance (the larger of this and the fit's own).
        The path only ranks the λ, so its fits stop early; a λ other than the
        start is then confirmed (:func:`lambda_path`), since an early-stopped
        fit at a small λ can score better than it will once converged (its fit
        drifts towards the noise as it converges: the kinetic tensor's Tucker
        path, its fits stopped at a relative decrease of 10⁻⁴, chose λ₀/16,
        whose fit on every entry then had 7× the test error).
    min_entries : int
        With fewer held-out entries than this, no search: the starting λ.
    """

    fraction: float = 0.1
    factor: float = 4.0
    max_steps: int = 4
    min_gain: float = 0.01
    sweeps: int = 30
    tol: float = 1e-3
    min_entries: int = 20

    def __post_init__(self):
        if not 0 < self.fraction < 1:
            raise ValueError(f"fraction must be in (0, 1), got {self.fraction!r}")
        if not (math.isfinite(self.factor) and self.factor > 1):
            raise ValueError(f"factor must be finite and > 1, got {self.factor!r}")
        for name in ("max_steps", "sweeps", "min_entries"):
            v = getattr(self, name)
            if not (isinstance(v, (int, np.integer)) and v >= 1):
                raise ValueError(f"{name} must be an integer ≥ 1, got {v!r}")
        if not (math.isfinite(self.min_gain) and 0 <= self.min_gain < 1):
            raise ValueError(f"min_gain must be in [0, 1), got {self.min_gain!r}")
        if not (math.isfinite(self.tol) and self.tol >= 0):
            raise ValueError(f"tol must be finite and ≥ 0, got {self.tol!r}")


#: The search for noisy values (input perturbation): path fits of up to 100 sweeps, stopped at 10⁻⁶. There the
#: early-stopped path of :class:`LambdaSearch`'s defaults (with the final fit stopped at 10⁻⁵) predicted worse:
#: over 4 reproducible noise draws of the private sweep's 30×25×20 tensor, mean test RMSE 8–44% higher at
#: ε = 1–16, equal at ε = 64 (``benchmarks/completion_lambda.py --noisy-search``).
NOISY_SEARCH = LambdaSearch(sweeps=100, tol=1e-6)


@dataclass(frozen=True)
class LambdaPath:
    """The λ chosen by :func:`choose_lambda` and the path that chose it.

    Attributes
    ----------
    lam, lam_core : float
        The chosen λ (λo) and λg.
    steps : tuple of dict
        One per λ fitted, in the order fitted: ``step`` j (λ = start·factor^j),
        ``lam``, ``lam_core``, ``validation_rmse`` (None where the fit's factors
        became non-finite), ``sweeps``, ``converged``.
    n_fit, n_validation : int
        Entries the path fits saw and entries that scored them.
    start : tuple of ndarray or None
        The chosen λ's path fit (a warm start for the fit on every entry);
        None when no search ran.
    factor : float
        The path's ratio (:attr:`LambdaSearch.factor`).
    """

    lam: float
    lam_core: float
    steps: tuple
    n_fit: int
    n_validation: int
    start: Optional[tuple] = None
    factor: float = LambdaSearch.factor

    def report(self) -> dict:
        """The path as plain JSON values (no factors)."""
        return {"lam": self.lam, "lam_core": self.lam_core, "n_fit": self.n_fit,
                "n_validation": self.n_validation, "steps": [dict(s) for s in self.steps]}

    def source(self, start: str) -> str:
        """How λ was set, for ``config['lam_source']``; ``start`` says how the path's start was set."""
        return (f"validated: the smallest RMSE on {self.n_validation} held-out training entries along "
                f"λ = ({start})·{self.factor:g}^j (config.lam_path)")


def lambda_path(model_name: str, rank: int, cfg: ALSConfig, stats, validation_rmse: Callable[[tuple], float],
                start: tuple, shape: tuple, search: LambdaSearch = LambdaSearch()) -> tuple:
    """Fit a path of λ (λo; λg in proportion) and pick the λ whose fit predicts held-out entries best.

    The fits use ``stats`` (the entries kept for fitting); ``validation_rmse`` scores a fit on the entries held
    out. The path starts at λ = ``cfg.lam`` from ``start``, then fits λ·f and λ/f (f = ``search.factor``), and
    goes on in the direction of the smaller held-out RMSE while each step lowers it by ``search.min_gain`` (at
    most ``search.max_steps`` steps), each fit limited to ``search.sweeps`` sweeps and stopped at ``search.tol``.
    A fit with a larger λ starts from the previous fit; one with a smaller λ from ``start`` (a larger λ can
    switch components off for good). The λ with the smallest held-out RMSE is chosen where it beats ``cfg.lam``
    by ``search.min_gain``, and where its fit, continued to ``cfg``'s own tolerance and sweeps (as the final
    fit will run), still does; otherwise ``cfg.lam``. The confirmation is listed in the steps with
    ``"confirm": True``.

    Returns
    -------
    lam, lam_core : float
    steps : tuple of dict
        As :attr:`LambdaPath.steps`.
    factors : tuple of ndarray
        The chosen λ's path fit.
    """
    path_cfg = replace(cfg, max_sweeps=min(search.sweeps, cfg.max_sweeps), tol=max(search.tol, cfg.tol))
    fits, steps = {}, []

    def score(j: int, init: tuple, fit_cfg: ALSConfig = path_cfg, confirm: bool = False) -> float:
        scale = search.factor ** j
        try:
            factors, trace = run_als(model_name, None, int(rank), replace(fit_cfg, lam=cfg.lam * scale,
                                                                           lam_core=cfg.lam_core * scale),
                                     None, init=init, stats=stats, shape=shape)
            rmse, sweeps, converged = float(validation_rmse(factors)), trace.epochs_run, trace.converged
        except SGDDivergedError as exc:          # non-finite factors at this λ: never chosen
            factors, rmse, sweeps, converged = init, math.inf, exc.epoch, False
        fits[j] = (rmse, factors)
        steps.append({"step": j, "lam": cfg.lam * scale, "lam_core": cfg.lam_core * scale,
                      "validation_rmse": rmse if math.isfinite(rmse) else None, "sweeps": sweeps,
                      "converged": converged, **({"confirm": True} if confirm else {})})
        return rmse

    def gains(j: int, prev: int) -> bool:
        return fits[j][0] < (1.0 - search.min_gain) * fits[prev][0]

    # Upwards each fit starts from the previous one; downwards from ``start``: a larger λ can switch a component
    # off, and a zero component is a fixed point of ALS (its rows' Gram matrices and right-hand sides vanish)
    score(0, start)
    up, down = score(1, fits[0][1]), score(-1, start)
    d = 1 if up < down else -1
    j = d
    while gains(j, j - d) and abs(j) < search.max_steps:
        j += d
        score(j, fits[j - d][1] if d > 0 else start)
    best = min(fits, key=lambda q: fits[q][0])
    if best != 0 and gains(best, 0):
        score(best, fits[best][1], cfg, confirm=True)        # converged as the final fit will be, scored again
    if not gains(best, 0):
        best = 0
    scale = search.factor ** best
    return cfg.lam * scale, cfg.lam_core * scale, tuple(steps), fits[best][1]


def choose_lambda(model_name: str, train: Observations, rank: int, cfg: ALSConfig, rng: np.random.Generator,
                  search: LambdaSearch = LambdaSearch()) -> LambdaPath:
    """Choose λ (λo; λg in proportion) by the RMSE on held-out training entries (:func:`lambda_path`).

    ``search.fraction`` of ``train`` is held out (drawn by ``rng`` from the entry count only); the rest is
    fitted along the path from factors drawn by ``rng`` (as :func:`run_als` draws them). Uses only the
    values given (post-processing under input perturbation). With fewer than ``search.min_entries``
    held-out entries, no search: ``cfg.lam``, no steps.

    Parameters
    ----------
    model_name : {'cp', 'tucker'}
    train : Observations
        The entries as the fit sees them (offset removed).
    rank : int
    cfg : ALSConfig
        The fit's settings; ``lam``, ``lam_core`` are the path's start.
    rng : numpy.random.Generator
    search : LambdaSearch

    Returns
    -------
    LambdaPath
    """
    n_val = int(round(train.n * search.fraction))
    if n_val < search.min_entries or train.n - n_val < 1:
        return LambdaPath(cfg.lam, cfg.lam_core, (), train.n, 0)
    fit, val = split_holdout(train, search.fraction, rng)
    model = MODELS[model_name]

    def validation_rmse(factors) -> float:
        resid = model.predict(factors, *val.idx.T) - val.values
        return math.sqrt(float(resid @ resid) / val.n)

    start = model.init_factors(train.shape, int(rank), cfg.init_scale, rng)
    lam, lam_core, steps, factors = lambda_path(model_name, rank, cfg,
                                                entry_stats(model_name, fit, int(rank), cfg.chunk, cfg.dense),
                                                validation_rmse, start, train.shape, search)
    return LambdaPath(lam, lam_core, steps, fit.n, val.n, factors, search.factor)


__all__ = ["ALSConfig", "LambdaSearch", "NOISY_SEARCH", "LambdaPath", "ModeOrder", "EntryStats", "DenseStats",
           "dense_enough", "entry_stats", "unfold", "design", "normal_equations", "solve_rows", "core_normal_equations",
           "solve_core", "core_cg", "rebalance", "penalty", "extrapolate", "run_als", "lambda_path", "choose_lambda"]
