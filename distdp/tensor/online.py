"""Online (streaming) robust tensor power method (Wang & Anandkumar 2016, Algorithm 2).

Decomposes the raw moment ``E[x⊗x⊗x]`` of a stream of points without ever
forming it: each power iteration reads the *next* ``n`` points, shared by all
``L`` restarts, and accumulates ``(1/n) Σ_ℓ (x_ℓᵀu)² x_ℓ`` and
``(1/n) Σ_ℓ (x_ℓᵀu)³`` for every restart (``nkR`` points in all). Deflation
goes through the stored ``(λ̂_j, v̂_j)``. No diagonal correction is applied.

Typos of the printed algorithm (Wang & Anandkumar 2016, Algorithm 2), fixed here: line 6's ``x_i`` is
``x_ℓ``; line 7's ``ξ_{j,τ} = v̂_jᵀ u_t`` uses the normalised iterate
``u_t`` (not the accumulator ``ũ``).

Eigenvalue of the chosen restart (``eigenvalue=``):

- ``"paper"`` (reproduction): as printed, ``λ̃`` is recomputed in every
  iteration from the same batch as ``ũ_{t+1}``, i.e. at ``u_t``; after the
  last iteration it is evaluated at ``u_(R−1)`` while ``v̂ = u_R``. Uses
  exactly ``nkR`` points.
- ``"final"`` (default): one more batch of ``n`` points evaluates
  ``λ̃ = T(u_R,u_R,u_R)``, so the restart is chosen and deflated with the
  eigenvalue of the vector actually returned (``nk(R+1)`` points).

Memory: the state is ``U`` (d×L), the accumulator (d×L) and ``V̂`` (d×k);
points are read in chunks of ``chunk_size`` rows (default ``k + L``), so
peak memory is O(d(k+L)) whatever ``n`` is (Proposition 3.1).

Sources (pure in-memory; parquet readers are in :mod:`distdp.tensor.files`,
Ray shards in :mod:`distdp.distributed.stream`):

- anything with ``dim`` and ``read(m)`` returning up to ``m`` rows (an
  ndarray or CSR matrix; fewer than ``m`` means the stream is exhausted), or
- anything with ``dim`` and ``partial_sums(U, n)`` returning
  ``(Σ (xᵀu)² x, Σ (xᵀu)³, n_read)`` over its next ``n`` points (a sharded
  stream whose shards compute partial sums where the data lives).
"""
from __future__ import annotations

import time
from typing import Callable, Protocol, Sequence

import numpy as np
import scipy.sparse as sp

from distdp.tensor import forms, power

__all__ = ["PointStream", "ArrayStream", "GeneratorStream", "ShardCursors", "ShardedStream",
           "online_power_method", "stream_partial_sums", "split_count", "sum_partials"]


class PointStream(Protocol):
    """A stream of points of dimension ``dim``; ``read(m)`` returns the next ≤ m rows."""

    dim: int

    def read(self, m: int):  # pragma: no cover - protocol
        ...


class ArrayStream:
    """The rows of an (n, d) array or sparse matrix, in order, each read once."""

    def __init__(self, X):
        self.X = sp.csr_matrix(X, dtype=float) if sp.issparse(X) else np.asarray(X, dtype=float)
        if self.X.ndim != 2:
            raise ValueError(f"points must be an (n, d) array, got shape {self.X.shape}")
        self.dim = int(self.X.shape[1])
        self.position = 0

    def read(self, m: int):
        """The next ≤ m rows (empty when exhausted)."""
        out = self.X[self.position:self.position + m]
        self.position += out.shape[0]
        return out


class GeneratorStream:
    """An unbounded stream of points drawn by ``sample(m, rng) -> (m, d)`` (synthetic data)."""

    def __init__(self, dim: int, sample: Callable[[int, np.random.Generator], np.ndarray],
                 rng: np.random.Generator, limit: int | None = None):
        self.dim = int(dim)
        self.sample = sample
        self.rng = power.check_generator(rng)
        self.limit = limit
        self.position = 0

    def read(self, m: int):
        """``m`` fresh points (fewer once ``limit`` points have been drawn)."""
        if self.limit is not None:
            m = max(0, min(m, self.limit - self.position))
        self.position += m
        return self.sample(m, self.rng)


def split_count(n: int, sizes: Sequence[int]) -> list[int]:
    """Split ``n`` points over shards: ``n // S`` each, the first ``n % S`` shards one more."""
    S = len(sizes)
    return [n // S + (1 if s < n % S else 0) for s in range(S)]


class ShardCursors:
    """Per-shard read positions: which rows of each shard the next batch uses.

    Shared by the in-process :class:`ShardedStream` and the Ray version, so
    both consume exactly the same points in the same order.
    """

    def __init__(self, sizes: Sequence[int]):
        self.sizes = [int(s) for s in sizes]
        self.positions = [0] * len(self.sizes)

    def take(self, n: int) -> list[tuple[int, int]]:
        """Row ranges ``(start, stop)`` of every shard for the next ``n`` points."""
        counts = split_count(n, self.sizes)
        out = []
        for s, c in enumerate(counts):
            start = self.positions[s]
            stop = min(start + c, self.sizes[s])
            out.append((start, stop))
            self.positions[s] = stop
        return out


class ShardedStream:
    """In-process stream over data shards: partial sums per shard, added in shard order."""

    def __init__(self, shards: Sequence, chunk_size: int | None = None):
        self.shards, self.dim = forms.as_point_shards(list(shards))
        self.cursors = ShardCursors([s.shape[0] for s in self.shards])
        self.chunk_size = chunk_size

    def partial_sums(self, U: np.ndarray, n: int):
        """``(Σ (xᵀu)² x, Σ (xᵀu)³, n_read)`` over the next ``n`` points of all shards."""
        parts = [stream_partial_sums(ArrayStream(s[a:b]), U, b - a, self.chunk_size)
                 for s, (a, b) in zip(self.shards, self.cursors.take(n))]
        return sum_partials(parts, U)


def sum_partials(parts, U):
    """Add ``(apply_sum, value_sum, count)`` partials in the given (shard) order."""
    apply_sum = np.zeros(U.shape)
    value_sum = np.zeros(U.shape[1])
    count = 0
    for a, v, c in parts:  # fixed (shard) order; each part is a BLAS product, equal across processes to rounding
        apply_sum = apply_sum + a
        value_sum = value_sum + v
        count += c
    return apply_sum, value_sum, count


def stream_partial_sums(stream, U: np.ndarray, n: int, chunk_size: int | None = None):
    """Partial sums of the empirical moment over the next ``n`` points of ``stream``.

    Reads in chunks of ``chunk_size`` rows (default ``U.shape[1]``) so only
    one chunk is in memory. Returns ``(apply_sum (d, L), value_sum (L,), n_read)``.
    """
    if hasattr(stream, "partial_sums"):
        return stream.partial_sums(U, n)
    chunk = max(1, int(chunk_size or U.shape[1]))
    apply_sum = np.zeros(U.shape)
    value_sum = np.zeros(U.shape[1])
    read = 0
    while read < n:
        X = stream.read(min(chunk, n - read))
        if X.shape[0] == 0:
            break
        a, v = forms.moment_partial(X, U)
        apply_sum += a
        value_sum += v
        read += X.shape[0]
    return apply_sum, value_sum, read


def online_power_method(stream, k: int, *, n_per_iter: int, n_restarts: int | None = None,
                        n_iters: int | None = None, rng: np.random.Generator, eigenvalue: str = "final",
                        chunk_size: int | None = None) -> power.PowerResult:
    """Online robust tensor power method (paper Algorithm 2; see the module docstring).

    Parameters
    ----------
    stream : PointStream or sharded stream
        Source of fresh points (``read(m)`` or ``partial_sums(U, n)``), ``dim`` = d.
    k : int
        Components, ``1 ≤ k ≤ d``.
    n_per_iter : int
        ``n``: points read per iteration, shared by all restarts.
    n_restarts, n_iters : int, optional
        ``L``, ``R``; defaults as :func:`distdp.tensor.power.robust_power_method`.
    rng : numpy.random.Generator
        Starting vectors.
    eigenvalue : {"final", "paper"}
        ``"paper"``: reproduction mode, ``λ̃`` from the last iteration (at
        ``u_(R−1)``); ``"final"``: one more batch evaluates ``λ̃`` at ``u_R``.
    chunk_size : int, optional
        Rows held in memory at once (default ``k + L``).

    Returns
    -------
    PowerResult
        ``method="online"``, ``n_applies`` = batches read, ``n_points`` = points read.

    Raises
    ------
    ValueError
        If the stream runs out before the algorithm has its ``nkR`` (or
        ``nk(R+1)``) points.
    """
    rng = power.check_generator(rng)
    d = int(stream.dim)
    k = power.check_rank(k, d)
    n = power.check_positive_int(n_per_iter, "n_per_iter")
    L = power.resolve_restarts(n_restarts, k)
    R = power.resolve_iters(n_iters, d)
    if eigenvalue not in ("final", "paper"):
        raise ValueError(f"eigenvalue must be 'final' or 'paper', got {eigenvalue!r}")
    chunk = chunk_size if chunk_size is not None else k + L

    lam = np.zeros(k)
    V = np.zeros((d, k))
    best = np.zeros(k, dtype=int)
    values = np.zeros((k, L))
    times = []
    batches = 0
    points = 0

    def batch(U: np.ndarray, i: int):
        """Deflated (1/n) Σ (xᵀu)²x and (1/n) Σ (xᵀu)³ on the next n points (Alg. 2 lines 5–7)."""
        nonlocal batches, points
        a, v, got = stream_partial_sums(stream, U, n, chunk)
        points += got
        if got < n:
            need = n * k * (R + (eigenvalue == "final"))
            raise ValueError(f"the stream ran out after {points} points; Algorithm 2 with n = {n}, k = {k}, "
                             f"R = {R} needs {need}")
        batches += 1
        power.check_finite(a, "the online batch sum Σ (xᵀu)² x")
        a /= n
        v /= n
        a -= forms.deflation_apply(lam[:i], V[:, :i], U)
        v -= forms.deflation_value(lam[:i], V[:, :i], U)
        return a, v

    for i in range(k):
        t0 = time.perf_counter()
        U = power.random_unit_vectors(d, L, rng)
        lam_tilde = None
        for _ in range(R):
            W, lam_tilde = batch(U, i)  # λ̃ at u_t, from the batch that makes u_(t+1)
            U = power.normalize_columns(W, U)
        if eigenvalue == "final":
            _, lam_tilde = batch(U, i)
        tau = int(np.argmax(lam_tilde))
        best[i], values[i] = tau, lam_tilde
        lam[i], V[:, i] = lam_tilde[tau], U[:, tau]
        times.append(time.perf_counter() - t0)
    return power.PowerResult(lam, V, "online", L, R, batches, best, values, tuple(times), None, points)
