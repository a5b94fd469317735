"""Ray shard actors holding data points for the tensor power methods.

Each :class:`PointShardActor` holds one shard of points (rows of a dense or
CSR matrix, clipped to a public norm bound when asked). The coordinator (the
driver) owns the algorithm: per power iteration it sends the ``d×L`` matrix
of all ``L`` restarts to every shard in ONE round, adds the partial sums in
shard order, and — in private runs — adds the noise once, after the
reduction (:func:`distdp.tensor.dp.private_power_method` calls ``apply``
and noises its result in the driver). Normalisation, deflation and the
choice of restart happen in the driver; the next round broadcasts the new
vectors.

Actors are stateless apart from their data: the streaming read positions
live in the coordinator (:class:`distdp.tensor.online.ShardCursors`), so an
actor restarted by Ray and a retried call consume exactly the same points,
and nothing is released twice (noise is never drawn in an actor).

The in-process twins are :class:`distdp.tensor.power.EmpiricalMoment` and
:class:`distdp.tensor.online.ShardedStream`: same shard split, same partial
sums, same reduction order, hence the same results for the same seed up to rounding
(Ray workers run BLAS on one thread, the driver on more).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import ray
import scipy.sparse as sp

from distdp.tensor import forms
from distdp.tensor.online import ArrayStream, ShardCursors, sum_partials, stream_partial_sums

__all__ = ["PointShardActor", "RayEmpiricalMoment", "RayShardedStream"]

DEFAULT_RESTARTS = 4


@ray.remote
class PointShardActor:
    """One shard of data points; returns partial sums of the empirical third moment."""

    def __init__(self, X, clip_bound: float | None = None):
        X = sp.csr_matrix(X, dtype=float) if sp.issparse(X) else np.asarray(X, dtype=float)
        self.X = X if clip_bound is None else forms.clip_rows(X, clip_bound)

    def shape(self) -> tuple[int, int]:
        """``(n_points, d)`` of this shard."""
        return tuple(int(s) for s in self.X.shape)

    def moment_partial(self, U: np.ndarray) -> np.ndarray:
        """``Σ_ℓ (x_ℓᵀu)² x_ℓ`` over all points of the shard, per column of ``U``."""
        return forms.moment_partial(self.X, U)[0]

    def stream_partial(self, U: np.ndarray, start: int, stop: int, chunk_size: int | None):
        """Partial sums over rows ``start:stop`` (the coordinator's cursor), read in chunks."""
        return stream_partial_sums(ArrayStream(self.X[start:stop]), U, stop - start, chunk_size)


def _actors(shards: Sequence, clip_bound, max_restarts: int, num_cpus: float | None):
    """Start one actor per shard; return the actors, the data refs (kept alive for restarts), sizes, d."""
    opts = dict(max_restarts=max_restarts, max_task_retries=max_restarts)
    if num_cpus is not None:
        opts["num_cpus"] = num_cpus
    refs = [ray.put(s) for s in shards]  # held by the coordinator so a restarted actor can re-read its shard
    actors = [PointShardActor.options(**opts).remote(r, clip_bound) for r in refs]
    shapes = ray.get([a.shape.remote() for a in actors])
    dims = {s[1] for s in shapes}
    if len(dims) != 1:
        raise ValueError(f"shards disagree on the dimension: {sorted(dims)}")
    return actors, refs, [s[0] for s in shapes], dims.pop()


class RayEmpiricalMoment:
    """``(1/n) Σ x⊗x⊗x`` over points held by Ray shard actors, as a ``TensorOperator``.

    Parameters
    ----------
    shards : sequence of (n_s, d) arrays or CSR matrices
        One actor per shard (the split is the caller's; keep it to compare
        with the in-process :class:`distdp.tensor.power.EmpiricalMoment`).
    clip_bound : float, optional
        Clip rows to ``‖x‖₂ ≤ clip_bound`` (for the ``"replace-one-point"`` neighbour).
    max_restarts : int
        Ray restarts of a dead actor (and retries of its pending call).
    num_cpus : float, optional
        CPUs each actor reserves (default: Ray's actor default, none while running,
        so more shards than CPUs still start).
    """

    def __init__(self, shards: Sequence, clip_bound: float | None = None, max_restarts: int = DEFAULT_RESTARTS,
                 num_cpus: float | None = None):
        if len(shards) == 0:
            raise ValueError("no data shards")
        self.clip_bound = None if clip_bound is None else float(clip_bound)
        self.actors, self._refs, sizes, self.dim = _actors(shards, self.clip_bound, max_restarts, num_cpus)
        self.n = int(sum(sizes))
        if self.n == 0:
            raise ValueError("data has no rows")
        self.rounds = 0

    def apply(self, U: np.ndarray) -> np.ndarray:
        """One round: every shard's ``Σ (xᵀu)² x`` for all ``L`` columns, summed in shard order, ``/n``."""
        U_ref = ray.put(np.ascontiguousarray(U, dtype=float))
        parts = ray.get([a.moment_partial.remote(U_ref) for a in self.actors])
        self.rounds += 1
        total = None
        for p in parts:
            total = p if total is None else total + p
        return total / self.n

    def shutdown(self) -> None:
        """Stop the actors."""
        for a in self.actors:
            ray.kill(a, no_restart=True)
        self.actors = []


class RayShardedStream:
    """A stream of points held by Ray shard actors, for the online method (Algorithm 2).

    ``partial_sums(U, n)`` consumes the next ``n`` points (split over the
    shards by :class:`ShardCursors`) in one round and returns the reduced
    ``(Σ (xᵀu)² x, Σ (xᵀu)³, n_read)``.
    """

    def __init__(self, shards: Sequence, chunk_size: int | None = None, max_restarts: int = DEFAULT_RESTARTS,
                 num_cpus: float | None = None):
        if len(shards) == 0:
            raise ValueError("no data shards")
        self.actors, self._refs, sizes, self.dim = _actors(shards, None, max_restarts, num_cpus)
        self.cursors = ShardCursors(sizes)
        self.chunk_size = chunk_size
        self.rounds = 0

    def partial_sums(self, U: np.ndarray, n: int):
        """Reduced partial sums over the next ``n`` points of all shards (one round)."""
        U_ref = ray.put(np.ascontiguousarray(U, dtype=float))
        ranges = self.cursors.take(n)
        parts = ray.get([a.stream_partial.remote(U_ref, s, e, self.chunk_size)
                         for a, (s, e) in zip(self.actors, ranges)])
        self.rounds += 1
        return sum_partials(parts, U)

    def shutdown(self) -> None:
        """Stop the actors."""
        for a in self.actors:
            ray.kill(a, no_restart=True)
        self.actors = []
