"""Repeated tensor-completion runs and ε sweeps as Ray tasks (:mod:`distdp.completion` itself imports no Ray).

Each task runs :func:`distdp.completion.complete` on the same observations,
put once in the object store. The noise of a private run is drawn inside its
task from OS entropy (``reproducible=False``), so no two tasks share noise;
a task that Ray retries draws fresh noise and releases only its final result.

    >>> from distdp.distributed.completion import epsilon_sweep
    >>> rows = epsilon_sweep(obs, epsilons=[0.5, 1, 2], perturbations=["input", "gradient"],
    ...                      n_runs=5, rank=3, bounds=(0, 1))          # doctest: +SKIP
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Optional, Sequence

import ray

from distdp.completion.api import CompletionResult, complete
from distdp.distributed.backend import ensure_ray


@ray.remote(max_retries=2)
def _complete_task(data, kwargs: dict, score: Optional[Callable[[CompletionResult], Any]], errors: str):
    try:
        result = complete(data, **kwargs)
    except (ValueError, FloatingPointError) as exc:
        if errors == "raise":
            raise
        return {"error": f"{type(exc).__name__}: {exc}"}
    return result if score is None else score(result)


def run_many(data, jobs: Sequence[dict], score=None,
             address: Optional[str] = None, num_cpus: Optional[float] = 1.0, errors: str = "raise") -> list:
    """Run ``complete(data, **job)`` for every job as parallel Ray tasks; results in job order.

    Parameters
    ----------
    data : Observations or ndarray, or a list of them (one per job)
        Each distinct object is put in the object store once.
    jobs : sequence of dict
        Keyword arguments of :func:`complete` (``rank`` included).
    score : callable(CompletionResult) -> Any, or a list of them (one per job), optional
        Applied inside the task (return small summaries instead of whole results).
    address : str, optional
        Existing Ray cluster; default: start or reuse a local instance.
    num_cpus : float
        CPUs each task reserves.
    errors : {'raise', 'return'}
        On a ValueError or a diverged SGD (FloatingPointError): raise it, or
        return ``{"error": message}`` for that job.
    """
    if errors not in ("raise", "return"):
        raise ValueError(f"errors must be 'raise' or 'return', got {errors!r}")
    ensure_ray(address)
    datas = data if isinstance(data, list) else [data] * len(jobs)
    if len(datas) != len(jobs):
        raise ValueError(f"{len(datas)} data objects for {len(jobs)} jobs")
    refs_by_id: dict[int, Any] = {}
    for d in datas:
        if id(d) not in refs_by_id:
            refs_by_id[id(d)] = ray.put(d)
    opts = {} if num_cpus is None else {"num_cpus": num_cpus}
    scores = score if isinstance(score, list) else [score] * len(jobs)
    if len(scores) != len(jobs):
        raise ValueError(f"{len(scores)} score functions for {len(jobs)} jobs")
    refs = [_complete_task.options(**opts).remote(refs_by_id[id(d)], dict(job), sc, errors)
            for d, job, sc in zip(datas, jobs, scores)]
    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as exc:  # surface the user's error (bad parameter) as itself
        if isinstance(exc.cause, (ValueError, FloatingPointError)):
            raise exc.cause from None
        raise


def epsilon_sweep(data, epsilons: Sequence[float], perturbations: Sequence[str], n_runs: int,
                  score: Optional[Callable[[CompletionResult], Any]] = None, seed: Optional[int] = None,
                  address: Optional[str] = None, **kwargs) -> list[dict]:
    """Every (perturbation, ε, run) combination as one Ray task.

    ``perturbation='none'`` runs once per ``run`` (ε does not apply). Run r
    uses seed ``seed + r`` for its split, initialisation and visiting order
    when ``seed`` is given (the same split across ε and perturbations for a
    given run); the noise comes from OS entropy unless ``reproducible=True``
    is in ``kwargs``.

    Returns
    -------
    list of dict
        ``{"perturbation", "epsilon", "run", "result"}`` where ``result`` is
        the CompletionResult or ``score(result)``.
    """
    if n_runs < 1:
        raise ValueError(f"n_runs must be ≥ 1, got {n_runs}")
    keys = []
    for pert in perturbations:
        eps_list = [None] if pert == "none" else list(epsilons)
        keys += [(pert, eps, r) for eps, r in itertools.product(eps_list, range(n_runs))]
    jobs = [dict(kwargs, perturbation=p, epsilon=e, seed=None if seed is None else seed + r) for p, e, r in keys]
    out = run_many(data, jobs, score=score, address=address)
    return [{"perturbation": p, "epsilon": e, "run": r, "result": res} for (p, e, r), res in zip(keys, out)]
