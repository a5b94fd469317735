"""Tensor power methods on explicit tensors and implicit operators.

- :func:`robust_power_method` — Algorithm 1 of Wang & Anandkumar (2016)
  (the robust tensor power method of Anandkumar et al. 2014): ``L`` random
  restarts, ``R`` power iterations ``u ← T(I,u,u)/‖T(I,u,u)‖``, keep the
  restart with the largest ``T(u,u,u)``, deflate, ``k`` times.
- :func:`simultaneous_power_method` — orthogonalised (QR) power iteration on
  all ``k`` components at once, an allowed faster variant (SPEC §3).

The ``L`` restarts are one ``(d, L)`` matrix: every iteration calls the
operator's ``apply`` once with the whole batch, so a distributed operator
costs one round per iteration. Deflation is implicit,
``(T − Σ_j λ_j v_j⊗3)(I,u,u) = T(I,u,u) − Σ_j λ_j v_j (v_jᵀu)²``, so an
explicit tensor is never modified and an operator never needs to be.

Pure numpy: no Ray, no IO. Randomness only from the explicit Generator.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol, runtime_checkable

import numpy as np

from distdp.tensor import forms

__all__ = [
    "TensorOperator", "ExplicitTensor", "EmpiricalMoment", "as_operator", "PowerResult",
    "robust_power_method", "simultaneous_power_method", "default_n_restarts", "default_n_iters",
    "random_unit_vectors", "NoiseHook", "DEFAULT_REL_TOL",
]

#: Target relative accuracy ε/λmax behind the default number of iterations.
DEFAULT_REL_TOL = 1e-6


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
        Must be symmetric (checked to relative tolerance ``rtol``).
    rtol : float
        Symmetry tolerance, relative to ``max |T|``.
    """

    def __init__(self, T: np.ndarray, rtol: float = 1e-8):
        self.T = forms.check_symmetric(T, rtol)
        self.dim = self.T.shape[0]
        self.calls = 0

    def apply(self, U: np.ndarray) -> np.ndarray:
        """``T(I,u,u)`` per column (:func:`distdp.tensor.forms.tensor_apply`)."""
        self.calls += 1
        return forms.tensor_apply(self.T, U)


class EmpiricalMoment:
    """The implicit empirical moment ``(1/n) Σ_ℓ x_ℓ⊗x_ℓ⊗x_ℓ`` of data shards.

    Parameters
    ----------
    shards : array, sparse matrix, or sequence of them, each (n_s, d)
        Data points as rows. The partial sums of the shards are added in the
        given order, which is what the Ray version
        (:class:`distdp.distributed.stream.RayEmpiricalMoment`) does too, so the
        two give bitwise identical results for the same shard split.
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


def as_operator(T_or_op, rtol: float = 1e-8) -> TensorOperator:
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


def _normalize(W: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """Columns of ``W`` scaled to unit norm; a zero column keeps the previous iterate."""
    norms = np.linalg.norm(W, axis=0)
    ok = norms > 0
    out = previous.copy()
    out[:, ok] = W[:, ok] / norms[ok]
    return out


def robust_power_method(T_or_op, k: int, *, n_restarts: int | None = None, n_iters: int | None = None,
                        rng: np.random.Generator, rtol: float = 1e-8,
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
    rtol : float
        Symmetry tolerance for an explicit tensor.
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
    """
    rng = check_generator(rng)
    op = as_operator(T_or_op, rtol)
    d = int(op.dim)
    k = check_rank(k, d)
    L = resolve_restarts(n_restarts, k)
    R = resolve_iters(n_iters, d)

    lam = np.zeros(k)
    V = np.zeros((d, k))
    best = np.zeros(k, dtype=int)
    values = np.zeros((k, L))
    times = []
    applies = 0

    def deflated_apply(U: np.ndarray, i: int) -> np.ndarray:
        W = np.asarray(op.apply(U), dtype=float)
        if W.shape != U.shape:
            raise ValueError(f"operator.apply returned shape {W.shape}, expected {U.shape}")
        return W - forms.deflation_apply(lam[:i], V[:, :i], U)

    for i in range(k):
        t0 = time.perf_counter()
        U = random_unit_vectors(d, L, rng)
        for _ in range(R):
            W = deflated_apply(U, i)
            if noise is not None:
                W = W + noise.apply_noise(U)
            U = _normalize(W, U)
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
    return PowerResult(lam, V, method, L, R, applies, best, values, tuple(times))


def _qr_positive(W: np.ndarray) -> np.ndarray:
    """Orthonormal Q of ``W = QR`` with ``diag(R) ≥ 0`` (keeps each column's direction)."""
    Q, Rm = np.linalg.qr(W)
    s = np.sign(np.diag(Rm))
    s[s == 0] = 1.0
    return Q * s


def simultaneous_power_method(T_or_op, k: int, *, n_iters: int | None = None, rng: np.random.Generator,
                              rtol: float = 1e-8, noise: NoiseHook | None = None) -> PowerResult:
    """Simultaneous (orthogonalised) tensor power iteration on all ``k`` components.

    ``U ← qr(T(I,u_1,u_1), …, T(I,u_k,u_k))`` from a random orthonormal
    ``U`` (d×k), ``R`` times; then ``λ̂_j = T(u_j,u_j,u_j)``, sorted in
    decreasing order. No deflation and no restarts: one ``apply`` of ``k``
    columns per iteration, ``R + 1`` in all (SPEC §3, the faster variant;
    Wang & Lu 2017's simultaneous power iteration).

    Parameters
    ----------
    T_or_op : ndarray (d, d, d) or TensorOperator
    k : int
        ``1 ≤ k ≤ d``.
    n_iters : int, optional
        ``R``; default ``2·default_n_iters(d)`` (orthogonal iteration converges
        linearly, not quadratically as a single power iteration does).
    rng : numpy.random.Generator
    rtol : float
        Symmetry tolerance for an explicit tensor.
    noise : NoiseHook, optional
        Private variant: noise on each column of every release and on each
        eigenvalue (see :func:`distdp.tensor.dp.private_power_method`).

    Returns
    -------
    PowerResult
        ``n_restarts = 1``; ``best_restart`` is all zeros.
    """
    rng = check_generator(rng)
    op = as_operator(T_or_op, rtol)
    d = int(op.dim)
    k = check_rank(k, d)
    R = resolve_iters(n_iters, d, factor=2)
    t0 = time.perf_counter()
    U = _qr_positive(rng.standard_normal((d, k)))
    for _ in range(R):
        W = np.asarray(op.apply(U), dtype=float)
        if noise is not None:
            W = W + noise.apply_noise(U)
        U = _qr_positive(W)
    vals = np.einsum("il,il->l", U, np.asarray(op.apply(U), dtype=float))
    if noise is not None:
        vals = vals + noise.value_noise(U)
    order = np.argsort(-vals, kind="stable")
    method = "simultaneous" if noise is None else "private-simultaneous"
    return PowerResult(vals[order], U[:, order], method, 1, R, R + 1, np.zeros(k, dtype=int),
                       vals[order][:, None], (time.perf_counter() - t0,))
