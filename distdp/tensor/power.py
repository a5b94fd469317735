"""Tensor power methods on explicit tensors and implicit operators.

- :func:`robust_power_method` — Algorithm 1 of Wang & Anandkumar (2016)
  (the robust tensor power method of Anandkumar et al. 2014): ``L`` random
  restarts, ``R`` power iterations ``u ← T(I,u,u)/‖T(I,u,u)‖``, keep the
  restart with the largest ``T(u,u,u)``, deflate, ``k`` times.
- :func:`simultaneous_power_method` — all ``k`` components at once, a faster
  variant (not one of Wang & Anandkumar's algorithms, which remain
  available to reproduce their results): Algorithm 1's ``k`` stages run concurrently,
  staggered by a few rounds, each component's ``L`` candidates projected off
  the current best candidates of the earlier ones (deflation by
  projection); the same releases in ``(k−1)·S + R + 1`` rounds instead of
  ``k(R + 1)``. With ``L = 1`` it is plain orthogonal (QR) iteration, which
  finds *some* ``k`` components, not the top ``k`` unless ``k = d``.

The ``L`` restarts are one ``(d, L)`` matrix: every iteration calls the
operator's ``apply`` once with the whole batch, so a distributed operator
costs one round per iteration. Deflation is implicit,
``(T − Σ_j λ_j v_j⊗3)(I,u,u) = T(I,u,u) − Σ_j λ_j v_j (v_jᵀu)²``, so an
explicit tensor is never modified and an operator never needs to be.

Scaling: the iterations are invariant to scaling ``T``, but ``‖T(I,u,u)‖``
overflows for entries above ~1e154. Norms are computed overflow-safely, and
a non-private run on an explicit tensor first divides it by the power of two
nearest ``max |T|`` (exact in floating point, so results are unchanged
whenever nothing overflows) and multiplies the eigenvalues back. A private
run never does: ``max |T|`` depends on the data, and the noise is calibrated
in the tensor's own units.

Pure numpy: no Ray, no IO. Randomness only from the explicit Generator.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol, runtime_checkable

import numpy as np

from distdp.tensor import forms

__all__ = [
    "TensorOperator", "ExplicitTensor", "EmpiricalMoment", "as_operator", "PowerResult",
    "robust_power_method", "simultaneous_power_method", "default_n_restarts", "default_n_iters",
    "random_unit_vectors", "NoiseHook", "DEFAULT_REL_TOL", "default_simultaneous_restarts",
    "SIMULTANEOUS_NO_RESTARTS_NOTE", "resolve_simultaneous", "simultaneous_rounds", "column_norms",
]

#: Target relative accuracy ε/λmax behind the default number of iterations.
DEFAULT_REL_TOL = 1e-6


#: Dimension from which an explicit tensor is applied packed (:func:`distdp.tensor.forms.packed_apply`): half the
#: products; per apply of 21 columns 1.12x as fast at d = 32, 1.23x at 50, 2.3x at 100 (the d³ array leaves the
#: cache). Below, the unpacked product, whose numbers earlier releases reproduce to the bit.
PACKED_APPLY_DIM = 32


@runtime_checkable
class TensorOperator(Protocol):
    """A symmetric d×d×d tensor known only through ``T(I,u,u)``.

    ``apply(U)`` takes a ``(dim, L)`` matrix and returns the ``(dim, L)``
    matrix whose column ``l`` is ``T(I, u_l, u_l)``. ``T(u,u,u)`` is then
    ``uᵀ T(I,u,u)``, so nothing else is needed.
    """

    dim: int

    def apply(self, U: np.ndarray) -> np.ndarray:  # pragma: no cover - protocol
        ...


class ExplicitTensor:
    """An explicit symmetric tensor as a :class:`TensorOperator`.

    Parameters
    ----------
    T : ndarray, shape (d, d, d)
        Real and symmetric (checked to relative tolerance ``rtol``).
    rtol : float, optional
        Symmetry tolerance relative to ``max |T|``; default
        :func:`distdp.tensor.forms.symmetry_tolerance` of ``T``'s dtype.
    name : str
        How error messages call ``T``.
    """

    def __init__(self, T: np.ndarray, rtol: float | None = None, name: str = "tensor"):
        self.T = forms.check_symmetric(T, rtol, name)
        self.dim = self.T.shape[0]
        self.calls = 0
        self._packed = None

    def rescaled(self) -> tuple["ExplicitTensor", float]:
        """``(T / 2^e, 2^e)`` with ``2^e`` the power of two nearest ``max |T|`` (exact scaling).

        Only for non-private runs: ``max |T|`` is a function of the data.
        Returns ``(self, 1.0)`` when ``max |T|`` is within ``[2⁻⁶⁴, 2⁶⁴]``,
        where nothing can overflow, to avoid a copy of the tensor.
        """
        m = float(np.max(np.abs(self.T)))
        if m == 0.0 or 2.0 ** -64 <= m <= 2.0 ** 64:
            return self, 1.0
        e = math.frexp(m)[1]
        return ExplicitTensor._trusted(np.ldexp(self.T, -e)), math.ldexp(1.0, e)

    @classmethod
    def _trusted(cls, T: np.ndarray) -> "ExplicitTensor":
        """Wrap a float64 tensor already checked (a rescaled copy): skips the O(d³) checks."""
        out = cls.__new__(cls)
        out.T, out.dim, out.calls, out._packed = T, T.shape[0], 0, None
        return out

    def apply(self, U: np.ndarray) -> np.ndarray:
        """``T(I,u,u)`` per column: :func:`distdp.tensor.forms.tensor_apply`, or from
        :data:`PACKED_APPLY_DIM` on, :func:`~distdp.tensor.forms.packed_apply` of the tensor packed once."""
        self.calls += 1
        if self.dim < PACKED_APPLY_DIM:
            return forms.tensor_apply(self.T, U)
        if self._packed is None:
            self._packed = forms.pack_pairs(self.T)
        return forms.packed_apply(self._packed, U)


class EmpiricalMoment:
    """The implicit empirical moment ``(1/n) Σ_ℓ x_ℓ⊗x_ℓ⊗x_ℓ`` of data shards.

    Parameters
    ----------
    shards : array, sparse matrix, or sequence of them, each (n_s, d)
        Data points as rows. The partial sums of the shards are added in the
        given order, which is what the Ray version
        (:class:`distdp.distributed.stream.RayEmpiricalMoment`) does too. The
        two agree to rounding, not bitwise: each shard's partial sum is a
        BLAS product, and Ray workers run BLAS single-threaded (Ray sets
        ``OMP_NUM_THREADS=1``) while this process may use several threads,
        which split the sums differently (measured: 4e-15 on a 6000×30
        moment; bitwise equal with one BLAS thread here too).
    clip_bound : float, optional
        Scale every row with ``‖x‖₂ > clip_bound`` down to that norm first
        (bounds the per-point sensitivity for the ``"replace-one-point"``
        neighbour of :func:`distdp.tensor.dp.private_power_method`).
    """

    def __init__(self, shards, clip_bound: float | None = None):
        self.shards, self.dim = forms.as_point_shards(shards)
        self.clip_bound = None if clip_bound is None else float(clip_bound)
        if self.clip_bound is not None:
            self.shards = [forms.clip_rows(s, self.clip_bound) for s in self.shards]
        self.n = int(sum(s.shape[0] for s in self.shards))
        if self.n == 0:
            raise ValueError("data has no rows")
        self.calls = 0

    def apply(self, U: np.ndarray) -> np.ndarray:
        """``(1/n) Σ_ℓ (x_ℓᵀu)² x_ℓ`` per column: one pass over every shard."""
        self.calls += 1
        total = None
        for s in self.shards:
            part = forms.moment_partial(s, U)[0]
            total = part if total is None else total + part
        return total / self.n


def as_operator(T_or_op, rtol: float | None = None) -> TensorOperator:
    """Wrap an ndarray as :class:`ExplicitTensor`; pass an operator through (checked)."""
    if isinstance(T_or_op, np.ndarray):
        return ExplicitTensor(T_or_op, rtol)
    if not (hasattr(T_or_op, "apply") and hasattr(T_or_op, "dim")):
        raise TypeError("expected a symmetric d×d×d ndarray or an operator with .dim and .apply(U)")
    return T_or_op


def default_n_restarts(k: int) -> int:
    """``L = max(10, ⌈k·ln(10k)⌉)``: the paper's ``L = Θ(k log k)`` (Thm 2.2, 4.2).

    Corollary C.1 gives ``L = Ω(k log(1/η̃))`` restarts for one component to
    succeed with probability ``1 − η̃``; ``η̃ = 1/(10k)`` makes all ``k``
    deflation steps succeed with probability ≥ 0.9 (union bound), constant 1.
    """
    return max(10, math.ceil(k * math.log(10 * k)))


def default_n_iters(d: int, rel_tol: float = DEFAULT_REL_TOL) -> int:
    """``R = ⌈ln(d/rel_tol)⌉``: the paper's ``R = Θ(log(λmax·d/ε))`` (Thm 2.2, 4.2).

    The power iteration is invariant to scaling ``T``, so only the ratio
    ``λmax/ε`` matters; ``rel_tol = ε/λmax`` defaults to 1e-6 (R = 17 at
    d = 10, 19 at d = 100, 26 at d = 10⁵).
    """
    if d < 1:
        raise ValueError(f"dimension must be ≥ 1, got {d}")
    if not 0 < rel_tol < 1:
        raise ValueError(f"rel_tol must be in (0, 1), got {rel_tol}")
    return math.ceil(math.log(d / rel_tol))


def random_unit_vectors(d: int, L: int, rng: np.random.Generator) -> np.ndarray:
    """``L`` independent vectors uniform on the unit sphere S^(d−1), as columns (d, L)."""
    G = rng.standard_normal((d, L))
    return G / np.linalg.norm(G, axis=0)


class NoiseHook(Protocol):
    """Noise added to each release by a private variant (see :mod:`distdp.tensor.dp`)."""

    def apply_noise(self, U: np.ndarray) -> np.ndarray:  # pragma: no cover - protocol
        """Noise for the release ``T(I,u,u)`` of every column of ``U``; shape (d, L)."""

    def value_noise(self, U: np.ndarray) -> np.ndarray:  # pragma: no cover - protocol
        """Noise for the release ``T(u,u,u)`` of every column of ``U``; shape (L,)."""


@dataclass(frozen=True)
class PowerResult:
    """Eigenpairs found by a tensor power method.

    Attributes
    ----------
    eigenvalues : ndarray, shape (k,)
        ``λ̂_i`` in the order found (robust method) or decreasing (simultaneous).
    eigenvectors : ndarray, shape (d, k)
        ``v̂_i`` as columns, unit norm.
    method : str
        ``"robust"``, ``"simultaneous"``, ``"online"``, or ``"private-robust"``...
    n_restarts, n_iters : int
        ``L`` and ``R`` used.
    n_applies : int
        Calls of the operator's ``apply`` (distributed rounds): ``k(R+1)`` for
        Algorithm 1.
    best_restart : ndarray of int, shape (k,)
        Index ``τ*`` of the chosen restart for each component.
    restart_values : ndarray, shape (k, L)
        ``T(u_R,u_R,u_R)`` (noisy under DP) of every restart, per component.
    timings_s : tuple of float
        Wall time of each component.
    privacy : object or None
        The privacy report of a private run (:class:`distdp.tensor.dp.PrivacyReport`).
    n_points : int or None
        Data points read (online method, Algorithm 2).
    notes : tuple of str
        Caveats about the result (also issued as warnings).
    """

    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    method: str
    n_restarts: int
    n_iters: int
    n_applies: int
    best_restart: np.ndarray
    restart_values: np.ndarray
    timings_s: tuple = ()
    privacy: Optional[object] = field(default=None, compare=False)
    n_points: Optional[int] = None
    notes: tuple = ()

    def to_dict(self) -> dict:
        """JSON-ready diagnostics (no arrays of size d)."""
        out = {"method": self.method, "k": int(self.eigenvalues.shape[0]), "dim": int(self.eigenvectors.shape[0]),
               "n_restarts": self.n_restarts, "n_iters": self.n_iters, "n_applies": self.n_applies,
               "eigenvalues": [float(x) for x in self.eigenvalues],
               "best_restart": [int(x) for x in self.best_restart],
               "timings_s": [float(x) for x in self.timings_s]}
        if self.n_points is not None:
            out["n_points"] = int(self.n_points)
        if self.privacy is not None:
            out["privacy"] = self.privacy.to_dict()
        if self.notes:
            out["notes"] = list(self.notes)
        return out


def check_rank(k, d: int) -> int:
    """Validate the number of components ``1 ≤ k ≤ d``; return it as int."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"k must be an integer, got {k!r}")
    if not 1 <= k <= d:
        raise ValueError(f"k must satisfy 1 ≤ k ≤ d = {d}, got k = {k}")
    return int(k)


def resolve_restarts(n_restarts, k: int) -> int:
    """``n_restarts`` validated, or :func:`default_n_restarts` when None."""
    return check_positive_int(n_restarts if n_restarts is not None else default_n_restarts(k), "n_restarts")


def resolve_iters(n_iters, d: int, factor: int = 1) -> int:
    """``n_iters`` validated, or ``factor ·`` :func:`default_n_iters` when None."""
    return check_positive_int(n_iters if n_iters is not None else factor * default_n_iters(d), "n_iters")


def check_positive_int(value, name: str) -> int:
    """Validate a positive integer parameter (``n_restarts``, ``n_iters``)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_generator(rng) -> np.random.Generator:
    """Require an explicit ``numpy.random.Generator`` (no global RNG)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def column_norms(W: np.ndarray) -> np.ndarray:
    """Euclidean norms of the columns of ``W``, without overflow or underflow.

    ``np.linalg.norm`` squares the entries, so a column with entries above
    ~1e154 gets norm ``inf`` (and below ~1e-162, 0). Such columns are
    recomputed as ``m·‖w/m‖`` with ``m = max |w|``; the others are exactly
    ``np.linalg.norm``'s.
    """
    with np.errstate(over="ignore", under="ignore"):
        norms = np.linalg.norm(W, axis=0)
    bad = ~np.isfinite(norms) | (norms < 1e-150)
    if np.any(bad):
        Wb = W[:, bad]
        m = np.max(np.abs(Wb), axis=0)
        ok = (m > 0) & np.isfinite(m)
        safe = np.where(ok, m, 1.0)
        norms[bad] = np.where(ok, m * np.linalg.norm(Wb / safe, axis=0), np.where(m > 0, np.inf, 0.0))
    return norms


def normalize_columns(W: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """Columns of ``W`` scaled to unit norm; a zero column keeps the previous iterate."""
    norms = column_norms(W)
    ok = norms > 0
    out = previous.copy()
    out[:, ok] = W[:, ok] / norms[ok]
    return out


def check_finite(W: np.ndarray, what: str) -> np.ndarray:
    """Refuse a non-finite ``T(I,u,u)`` (overflow) instead of returning zeros (``ValueError``)."""
    if not np.all(np.isfinite(W)):
        raise ValueError(f"{what} is not finite (overflow): the tensor's entries or the data are too large for "
                         "float64 — divide them by a public constant first")
    return W


def _apply(op, U: np.ndarray) -> np.ndarray:
    """``op.apply(U)`` as floats, its shape and finiteness checked."""
    W = np.asarray(op.apply(U), dtype=float)
    if W.shape != U.shape:
        raise ValueError(f"operator.apply returned shape {W.shape}, expected {U.shape}")
    return check_finite(W, "T(I,u,u)")


def _public_rescaling(op, noise) -> tuple[object, float]:
    """``(operator, factor)``: an exactly rescaled explicit tensor in non-private runs, else ``(op, 1)``.

    A private run (``noise`` given) is never rescaled: ``max |T|`` depends on
    the data, and its noise is calibrated in the tensor's own units.
    """
    if noise is None and isinstance(op, ExplicitTensor):
        return op.rescaled()
    return op, 1.0


def robust_power_method(T_or_op, k: int, *, n_restarts: int | None = None, n_iters: int | None = None,
                        rng: np.random.Generator, rtol: float | None = None,
                        noise: NoiseHook | None = None,
                        on_component: Callable[[int, float], None] | None = None) -> PowerResult:
    """Robust tensor power method with batched restarts (paper Algorithm 1).

    For ``i = 1..k``: draw ``L`` unit vectors (one ``(d, L)`` matrix), iterate
    ``U ← T̃(I,U,U)`` column-normalised ``R`` times where
    ``T̃ = T − Σ_{j<i} λ̂_j v̂_j⊗3`` (implicit deflation), evaluate
    ``T̃(u,u,u)`` at the final iterates, keep the restart ``τ*`` with the
    largest value: ``λ̂_i = T̃(u_R^τ*, …)``, ``v̂_i = u_R^τ*``.

    Parameters
    ----------
    T_or_op : ndarray (d, d, d) or TensorOperator
        A symmetric tensor, or anything with ``.dim`` and ``.apply(U)``.
    k : int
        Number of components, ``1 ≤ k ≤ d``.
    n_restarts : int, optional
        ``L``; default :func:`default_n_restarts` = ``max(10, ⌈k ln(10k)⌉)``.
    n_iters : int, optional
        ``R``; default :func:`default_n_iters` = ``⌈ln(d/10⁻⁶)⌉``.
    rng : numpy.random.Generator
        Source of the random starting vectors.
    rtol : float, optional
        Symmetry tolerance for an explicit tensor (default: by its dtype,
        :func:`distdp.tensor.forms.symmetry_tolerance`).
    noise : NoiseHook, optional
        Adds noise to every release (Algorithm 3, :mod:`distdp.tensor.dp`);
        then the restart is chosen by the noisy value and deflation uses the
        noisy ``λ̂`` (Alg. 3 lines 10–11).
    on_component : callable, optional
        Progress callback ``(i, seconds)`` after each component.

    Returns
    -------
    PowerResult
        ``n_applies = k(R+1)``: R iterations plus the evaluation of ``T(u,u,u)``.

    Raises
    ------
    ValueError
        ``T(I,u,u)`` overflowed (possible for an implicit operator or a
        private run, which are not rescaled, or ``max |T|`` ≳ 1e305).
    """
    rng = check_generator(rng)
    op = as_operator(T_or_op, rtol)
    d = int(op.dim)
    k = check_rank(k, d)
    L = resolve_restarts(n_restarts, k)
    R = resolve_iters(n_iters, d)
    op, factor = _public_rescaling(op, noise)

    lam = np.zeros(k)
    V = np.zeros((d, k))
    best = np.zeros(k, dtype=int)
    values = np.zeros((k, L))
    times = []
    applies = 0

    def deflated_apply(U: np.ndarray, i: int) -> np.ndarray:
        return _apply(op, U) - forms.deflation_apply(lam[:i], V[:, :i], U)

    for i in range(k):
        t0 = time.perf_counter()
        U = random_unit_vectors(d, L, rng)
        for _ in range(R):
            W = deflated_apply(U, i)
            if noise is not None:
                W = W + noise.apply_noise(U)
            U = normalize_columns(W, U)
        vals = np.einsum("il,il->l", U, deflated_apply(U, i))
        applies += R + 1
        if noise is not None:
            vals = vals + noise.value_noise(U)
        tau = int(np.argmax(vals))
        best[i], values[i] = tau, vals
        lam[i], V[:, i] = vals[tau], U[:, tau]
        times.append(time.perf_counter() - t0)
        if on_component is not None:
            on_component(i, times[-1])
    method = "robust" if noise is None else "private-robust"
    return PowerResult(lam * factor, V, method, L, R, applies, best, values * factor, tuple(times))


def _qr_positive(W: np.ndarray) -> np.ndarray:
    """Orthonormal Q of ``W = QR`` with ``diag(R) ≥ 0`` (keeps each column's direction)."""
    Q, Rm = np.linalg.qr(W)
    s = np.sign(np.diag(Rm))
    s[s == 0] = 1.0
    return Q * s


#: A component's best candidate has switched to another component when its cosine with the
#: previous best falls below this (two orthonormal eigenvectors have cosine 0, two iterates of
#: one converging candidate close to 1).
SWITCH_COSINE = 0.5

#: Iterations between the starts of consecutive components in :func:`simultaneous_power_method`.
#: Measured on random orthogonal tensors (d ≤ 60, rank ≤ 30, k ≤ 20, λ in [1, 4], with and without
#: noise): the component of a component's best candidate stops changing 2–5 iterations after the
#: previous component's has (quadratic convergence decides the winner early).
DEFAULT_STAGGER = 5


def default_simultaneous_restarts(k: int, d: int) -> int:
    """``L`` of :func:`simultaneous_power_method`: 1 when ``k = d``, else :func:`default_n_restarts`.

    With ``k = d`` orthogonal iteration spans the whole space and finds every
    component of an orthogonal tensor, so restarts are unnecessary; with
    ``k < d`` it finds *some* ``k`` components (those its random start
    favours), and the top ``k`` need Algorithm 1's restarts and selection.
    """
    return 1 if k >= d else default_n_restarts(k)


#: Note (and warning) of a simultaneous run without restarts on ``k < d`` components.
SIMULTANEOUS_NO_RESTARTS_NOTE = (
    "simultaneous method with 1 restart and k < d: orthogonal iteration converges to the k components its "
    "random start favours, not to the k largest (a rank-4 tensor with k = 3 misses a top-3 component for "
    "28% of seeds); use restarts (the default) or the robust method")


def resolve_simultaneous(n_restarts, n_iters, k: int, d: int) -> tuple[int, int]:
    """``(L, R)`` of :func:`simultaneous_power_method`, validated, defaults filled in."""
    L = check_positive_int(n_restarts if n_restarts is not None else default_simultaneous_restarts(k, d),
                           "n_restarts")
    return L, resolve_iters(n_iters, d, factor=2 if L == 1 else 1)


def simultaneous_rounds(k: int, n_restarts: int, n_iters: int, stagger: int = DEFAULT_STAGGER) -> int:
    """Rounds (``apply`` calls) of :func:`simultaneous_power_method`: ``R+1``, or ``(k−1)S + R + 1`` for ``L > 1``."""
    return n_iters + 1 if n_restarts == 1 else (k - 1) * stagger + n_iters + 1


def _project_off(Q: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``W`` minus its projection on the orthonormal columns of ``Q``, done twice (numerically orthogonal)."""
    if Q.shape[1] == 0:
        return W
    W = W - Q @ (Q.T @ W)
    return W - Q @ (Q.T @ W)


def _fresh(Q: np.ndarray, d: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """``m`` random unit vectors orthogonal to the columns of ``Q``; shape (d, m)."""
    G = _project_off(Q, rng.standard_normal((d, m)))
    return G / column_norms(G)


def simultaneous_power_method(T_or_op, k: int, *, n_restarts: int | None = None, n_iters: int | None = None,
                              rng: np.random.Generator, rtol: float | None = None,
                              noise: NoiseHook | None = None, stagger: int = DEFAULT_STAGGER) -> PowerResult:
    """All ``k`` components in one pipeline: Algorithm 1's stages run concurrently.

    With ``L > 1`` (the default when ``k < d``): component ``j`` (0-based)
    gets ``L`` random candidates at round ``j·S`` (``S = stagger``), iterates
    them ``R`` times and evaluates ``T(u,u,u)`` in the next round, exactly as
    a stage of :func:`robust_power_method`; every round is ONE ``apply`` on
    the candidates of all running components. Deflation is by projection:
    after each ``W = T(I,U,U)``, component ``j``'s candidates are projected
    off the current best candidates of components ``0..j−1`` (best = largest
    ``uᵀT(I,u,u)``, a function of the released ``W``; the finished ones by
    their eigenvalue), which for an orthogonal tensor is Algorithm 1's
    deflation ``T − Σ λ_i v_i⊗3`` on vectors orthogonal to the ``v_i``. If
    an earlier component's best switches to another component, the later
    running components restart (their deflation was wrong, and every
    eigenvector of an orthogonal tensor is an attracting fixed point), as
    does a candidate that had converged onto an earlier best. Same releases
    and flops as Algorithm 1 (``kL(R+1)`` columns), in ``(k−1)S + R + 1``
    rounds instead of ``k(R+1)``; and, like Algorithm 1, the top ``k`` with
    high probability when the eigenvalues are separated (with nearly equal
    eigenvalues both may return a close runner-up).

    With ``L = 1`` (the default when ``k = d``) it is orthogonal (QR)
    iteration on ``k`` columns (Wang & Lu 2017's simultaneous power
    iteration): ``R + 1`` rounds of ``k`` columns. It converges to the ``k``
    components its random start favours — all of them when ``k = d`` (or
    ``k`` ≥ the rank), but *not* the ``k`` largest otherwise: a warning says so.

    Parameters
    ----------
    T_or_op : ndarray (d, d, d) or TensorOperator
    k : int
        ``1 ≤ k ≤ d``.
    n_restarts : int, optional
        ``L`` candidates per component; default
        :func:`default_simultaneous_restarts` (1 if ``k = d``, else
        :func:`default_n_restarts`).
    n_iters : int, optional
        ``R``: iterations per component (``L > 1``; default
        :func:`default_n_iters`), or in all (``L = 1``; default
        ``2·default_n_iters(d)``, as orthogonal iteration's later columns
        settle only after the earlier ones).
    rng : numpy.random.Generator
    rtol : float, optional
        Symmetry tolerance for an explicit tensor (default by its dtype).
    noise : NoiseHook, optional
        Private variant: noise on each column of every release and on each
        eigenvalue (see :func:`distdp.tensor.dp.private_power_method`).
    stagger : int
        ``S``, rounds between the starts of consecutive components (``L > 1``).

    Returns
    -------
    PowerResult
        Eigenpairs sorted by decreasing eigenvalue; ``n_applies`` = rounds;
        ``best_restart`` and ``restart_values`` (``(k, L)``) per component,
        in the sorted order.

    Warns
    -----
    UserWarning
        ``L = 1`` with ``k < d`` (also recorded in ``PowerResult.notes``).
    """
    rng = check_generator(rng)
    op = as_operator(T_or_op, rtol)
    d = int(op.dim)
    k = check_rank(k, d)
    L, R = resolve_simultaneous(n_restarts, n_iters, k, d)
    S = check_positive_int(stagger, "stagger")
    op, factor = _public_rescaling(op, noise)
    notes = ()
    if L == 1 and k < d:
        notes = (SIMULTANEOUS_NO_RESTARTS_NOTE,)
        warnings.warn(SIMULTANEOUS_NO_RESTARTS_NOTE, UserWarning, stacklevel=2)

    method = "simultaneous" if noise is None else "private-simultaneous"
    t0 = time.perf_counter()
    if L == 1:  # orthogonal iteration
        U = _qr_positive(rng.standard_normal((d, k)))
        for _ in range(R):
            W = _apply(op, U)
            U = _qr_positive(W if noise is None else W + noise.apply_noise(U))
        vals = np.einsum("il,il->l", U, _apply(op, U))
        if noise is not None:
            vals = vals + noise.value_noise(U)
        order = np.argsort(-vals, kind="stable")
        return PowerResult(vals[order] * factor, U[:, order], method, 1, R, R + 1, np.zeros(k, dtype=int),
                           vals[order][:, None] * factor, (time.perf_counter() - t0,), notes=notes)

    U = np.zeros((d, k, L))        # candidates of component j: U[:, j, :]
    best = np.zeros((d, k))        # current best candidate of each component
    lam = np.zeros(k)
    chosen = np.zeros(k, dtype=int)
    values = np.zeros((k, L))
    rounds = simultaneous_rounds(k, L, R, S)
    for t in range(rounds):
        first = [j for j in range(k) if t == j * S]
        for j in first:  # a new stage: L random starts, orthogonal to the earlier bests
            U[:, j, :] = _fresh(best[:, :j], d, L, rng)
        active = [j for j in range(k) if j * S <= t <= j * S + R]
        iterating = [j for j in active if t < j * S + R]
        finishing = [j for j in active if t == j * S + R]
        cols = U[:, active, :].reshape(d, len(active) * L)
        W = _apply(op, cols).reshape(d, len(active), L)
        pos = {j: a for a, j in enumerate(active)}
        if iterating and noise is not None:
            idx = [pos[j] for j in iterating]
            W[:, idx, :] += noise.apply_noise(U[:, iterating, :].reshape(d, -1)).reshape(d, len(idx), L)
        restart = False
        for j in finishing:  # T(u,u,u) of the final iterates; the stage's best is frozen
            v = np.einsum("il,il->l", U[:, j, :], W[:, pos[j], :])
            if noise is not None:
                v = v + noise.value_noise(U[:, j, :])
            values[j] = v
            chosen[j] = int(np.argmax(v))
            lam[j] = v[chosen[j]]
            restart |= abs(U[:, j, chosen[j]] @ best[:, j]) < SWITCH_COSINE
            best[:, j] = U[:, j, chosen[j]]
        for j in iterating:  # in order: j's candidates are deflated by the bests of 0..j−1 of this round
            Q = best[:, :j]
            Wj = W[:, pos[j], :]
            score = np.einsum("il,il->l", U[:, j, :], Wj)
            if restart:
                Uj = _fresh(Q, d, L, rng)
            else:
                P = _project_off(Q, Wj)
                lost = column_norms(P) <= np.sqrt(np.finfo(float).eps) * column_norms(Wj)
                if np.any(lost):  # converged onto an earlier best: only rounding is left
                    P[:, lost] = _fresh(Q, d, int(lost.sum()), rng)
                Uj = normalize_columns(P, U[:, j, :])
            U[:, j, :] = Uj
            new_best = Uj[:, int(np.argmax(score))]
            if t > j * S and abs(new_best @ best[:, j]) < SWITCH_COSINE:
                restart = True  # later components were deflated by another vector: start them again
            best[:, j] = new_best
    order = np.argsort(-lam, kind="stable")
    return PowerResult(lam[order] * factor, best[:, order], method, L, R, rounds, chosen[order],
                       values[order] * factor, (time.perf_counter() - t0,), notes=notes)
