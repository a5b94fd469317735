"""Ray shard actors and the backend the coordinator talks to.

Each :class:`ShardActor` reads its row groups of the parquet corpus once and
keeps them (or, out of core, reads them again for every pass), as an instance
of the shard class it is given (a class taking a
CSR count matrix and document ids, such as :class:`distdp.lda.shard.Shard`),
across passes. The driver calls one shard method on every actor and gets
small arrays back; large arguments (``W``, test blocks) go through the object
store once per pass. This module is the transport only: it imports no model
code.

Fault tolerance: actors are created with ``max_restarts`` and
``max_task_retries``. An actor that dies (process killed, node lost) is
restarted by Ray, re-reads its row groups in ``__init__`` and the pending
call is retried; a shard's only other state is a projection cache keyed by
the coordinator, rebuilt on the first call after a restart. Noise (in
private fits) is added by the coordinator after the reduction, so a retried
call never releases anything twice.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Sequence

import numpy as np
import ray

from distdp.io.corpus import Unit, UnitBlocks, read_doc_ids, read_units

DEFAULT_RESTARTS = 4


def method_name(method: Callable) -> str:
    """The name of a shard method given as a function of its class (``Shard.m2_product`` → ``"m2_product"``).

    Raises
    ------
    TypeError
        ``method`` is not a function (a method's name as a string is refused: call sites name the method
        itself, so that a renamed or missing method fails where it is referenced).
    """
    if isinstance(method, str) or not callable(method) or not hasattr(method, "__name__"):
        raise TypeError(f"a shard method is given as a function of the shard class (Shard.m2_product), "
                        f"got {method!r}")
    return method.__name__


@ray.remote
class ShardActor:
    """Holds one shard (its documents, or out of core its row groups to read again) and serves the passes."""

    def __init__(self, shard_class: type, units: Sequence[Unit] | None, vocab_size: int, counts=None,
                 with_doc_ids: bool = False, stream: bool = False):
        self.error = None
        self.t_read = time.perf_counter()
        try:
            if stream:          # an out-of-core shard: given its row groups to read again for every pass
                self.shard = shard_class(UnitBlocks(units, vocab_size, with_doc_ids), None)
            else:
                ids = read_doc_ids(units) if with_doc_ids and units is not None else None
                self.shard = shard_class(counts if counts is not None else read_units(units, vocab_size), ids)
        except (ValueError, OSError) as exc:  # reported by ready(), so the driver sees the message
            self.error = exc
        self.t_read = time.perf_counter() - self.t_read

    def ready(self) -> dict:
        """Raise the read/validation error, if any; else report size, read time, pid and node."""
        if self.error is not None:
            raise self.error
        return {"n_docs": self.shard.n_total, "nnz": int(self.shard.nnz), "read_s": self.t_read,
                "pid": os.getpid(), "node": ray.get_runtime_context().get_node_id()}

    def call(self, name: str, *args: Any) -> tuple[Any, float]:
        """Run ``<shard>.<name>(*args)`` (the driver sends the method's name, :func:`method_name`).

        Returns the result and the seconds the shard spent on it (the rest of a round is transport and
        waiting for the slowest shard).
        """
        t0 = time.perf_counter()
        out = getattr(self.shard, name)(*args)
        return out, time.perf_counter() - t0

    def peak_rss_bytes(self) -> int:
        """Peak resident memory of this actor's process."""
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def ensure_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Connect to ``address`` (an existing cluster) or start/reuse a local Ray instance."""
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if address:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False, logging_level="ERROR", log_to_driver=False)


class RayBackend:
    """Shards in Ray actors; ``call`` returns results in shard order (fixed reduction order).

    Parameters
    ----------
    groups : list of list of Unit
        The row groups of each shard (:func:`distdp.io.corpus.partition`).
    vocab_size : int
    shard_class : type
        The class each actor hosts, built as ``shard_class(counts, doc_ids)``
        (e.g. :class:`distdp.lda.shard.Shard`).
    cpus_per_worker : float
        CPUs each actor reserves (scheduling only).
    max_restarts : int
        Restarts of a dead actor (and retries of its pending call).
    matrices : list of csr_matrix, optional
        In-memory shards instead of parquet row groups (``groups`` is then ignored).
    start_timeout : float
        Seconds to wait for every actor to be placed and to read its shard.
    with_doc_ids : bool
        Also read the documents' ids (for ``transform``).
    stream : bool
        Out of core: each actor builds ``shard_class`` on a :class:`~distdp.io.corpus.UnitBlocks` of its row
        groups, read again for every pass, instead of on their counts read once
        (:class:`distdp.lda.streaming.StreamingShard`).
    """

    def __init__(self, groups: Sequence[Sequence[Unit]] | None, vocab_size: int, shard_class: type,
                 cpus_per_worker: float = 1.0,
                 max_restarts: int = DEFAULT_RESTARTS, matrices=None, start_timeout: float = 600.0,
                 with_doc_ids: bool = False, stream: bool = False):
        opts = dict(num_cpus=cpus_per_worker, max_restarts=max_restarts, max_task_retries=max_restarts,
                    scheduling_strategy="SPREAD")
        if matrices is not None:
            self.actors = [ShardActor.options(**opts).remote(shard_class, None, vocab_size, m) for m in matrices]
        else:
            self.actors = [ShardActor.options(**opts).remote(shard_class, list(g), vocab_size, None,
                                                               with_doc_ids, stream) for g in groups]
        self.n_shards = len(self.actors)
        self.cores_per_shard = max(1, int(cpus_per_worker))
        try:
            self.info = self._get([a.ready.remote() for a in self.actors], timeout=start_timeout)
        except ray.exceptions.GetTimeoutError:
            self.shutdown()
            raise RuntimeError(
                f"{self.n_shards} shard actors × {cpus_per_worker} CPU could not all start within "
                f"{start_timeout:.0f} s; the cluster has {ray.cluster_resources().get('CPU', 0)} CPUs. "
                "Use fewer workers or a smaller cpus_per_worker.") from None
        self.traffic: dict[str, list[int]] = {}
        self.rounds: dict[str, list[tuple[float, float]]] = {}

    @staticmethod
    def _get(refs, timeout: float | None = None):
        try:
            return ray.get(refs, timeout=timeout)
        except ray.exceptions.RayTaskError as exc:  # surface the shard's own error (bad input)
            if isinstance(exc.cause, (ValueError, OSError)):
                raise exc.cause from None
            raise

    def call(self, method: Callable, *args: Any) -> list:
        """Run ``<shard>.<method>(*args)`` on every actor in one round; results in shard order.

        ``method`` is a method of the hosted shard class (``Shard.m2_product``); the actors look it up by name
        on their shard, so a subclass's override runs. The bytes of array payload returned per round are
        recorded in ``traffic[<method name>]``.
        """
        return self._round(method_name(method), [(a, args) for a in self.actors])

    def call_each(self, method: Callable, args: list) -> list:
        """Run ``<shard>.<method>(*args[i])`` on actor i in one round; results in shard order."""
        return self._round(method_name(method), list(zip(self.actors, args)))

    def _round(self, name: str, calls: list) -> list:
        """One round of calls; its result bytes, wall seconds and slowest shard's seconds recorded under ``name``."""
        t0 = time.perf_counter()
        timed = self._get([a.call.remote(name, *x) for a, x in calls])
        out = [r for r, _ in timed]
        self.traffic.setdefault(name, []).append(sum(payload_nbytes(r) for r in out))
        self.rounds.setdefault(name, []).append((time.perf_counter() - t0, max(s for _, s in timed)))
        return out

    def round_seconds(self) -> dict[str, dict[str, float]]:
        """Per shard method: rounds, their summed wall seconds and the summed seconds of each round's slowest
        shard (the difference is transport, the coordinator's waiting and Ray's scheduling)."""
        return {name: {"rounds": len(v), "wall_s": sum(w for w, _ in v), "slowest_shard_s": sum(s for _, s in v)}
                for name, v in self.rounds.items()}

    def broadcast(self, value: Any) -> Any:
        """Put ``value`` in the object store once; actors receive it zero-copy per node."""
        return ray.put(value) if isinstance(value, np.ndarray) and value.nbytes > 100_000 else value

    def peak_rss_bytes(self) -> list[int]:
        """Peak resident memory of every actor process."""
        return ray.get([a.peak_rss_bytes.remote() for a in self.actors])

    def shutdown(self) -> None:
        """Stop the actors."""
        for a in self.actors:
            ray.kill(a, no_restart=True)
        self.actors = []


def payload_nbytes(obj) -> int:
    """Bytes of the numpy arrays inside a result (arrays, dataclasses, tuples)."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, (tuple, list)):
        return sum(payload_nbytes(x) for x in obj)
    if hasattr(obj, "__dict__"):
        return sum(payload_nbytes(x) for x in vars(obj).values())
    return 0
