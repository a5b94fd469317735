"""Repeated tensor-completion runs and ε sweeps as Ray tasks (:mod:`distdp.completion` itself imports no Ray).

Each task runs :func:`distdp.completion.complete` on the same observations,
put once in the object store. The noise of a private run is drawn inside its
task from OS entropy (``reproducible=False``), so no two tasks share noise;
a task that Ray retries draws fresh noise and releases only its final result.

    >>> from distdp.distributed.completion import epsilon_sweep
    >>> rows = epsilon_sweep(obs, epsilons=[0.5, 1, 2], perturbations=["input", "gradient"],
    ...                      n_runs=5, rank=3, bounds=(0, 1))          # doctest: +SKIP

:func:`sharded_complete` is one ALS fit whose observed entries stay in shards
on Ray actors (large sparse tensors, a parquet COO of 10⁷–10⁸ entries): the
actors compute the partial sums of every factor update, the coordinator adds
them and solves.
"""
from __future__ import annotations

import dataclasses
import itertools
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np
import ray

from distdp.completion.api import CompletionResult, Perturbation, complete
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
                  address: Optional[str] = None, perturbation: Optional[Perturbation] = None,
                  **kwargs) -> list[dict]:
    """Every (perturbation, ε, run) combination as one Ray task.

    ``'none'`` in ``perturbations`` runs once per ``run`` (ε does not apply).
    Run r uses seed ``seed + r`` for its split, initialisation and visiting
    order when ``seed`` is given (the same split across ε and perturbations
    for a given run). ``perturbation``: a :class:`~distdp.completion.Perturbation`
    whose other settings (``delta``, ``clip``, ``reproducible``, ...) every
    private job takes, its ``kind`` and ``epsilon`` replaced by the job's; the
    noise comes from OS entropy unless it says ``reproducible=True``.
    ``kwargs``: the other arguments of :func:`~distdp.completion.complete`.

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
    template = perturbation or Perturbation("none")
    jobs = [dict(kwargs, perturbation=None if p == "none" else dataclasses.replace(template, kind=p, epsilon=e),
                 seed=None if seed is None else seed + r) for p, e, r in keys]
    out = run_many(data, jobs, score=score, address=address)
    return [{"perturbation": p, "epsilon": e, "run": r, "result": res} for (p, e, r), res in zip(keys, out)]


# ----------------------------------------------------------------------------- sharded ALS (one fit, many actors)


def coo_units(path, shape=None) -> tuple[list, tuple]:
    """The (file, row group) units of a parquet COO file or directory, and the tensor shape.

    The shape comes from ``shape`` or the ``distdp.shape`` metadata of the
    first file (a sharded fit does not read every index to find it).
    """
    import pyarrow.parquet as pq

    from distdp.completion.io import META_SHAPE, parquet_files, parse_shape_metadata

    path = Path(path)
    files = parquet_files(path) if path.is_dir() else [path]
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or directory")
    units = []
    for f in files:
        meta = pq.ParquetFile(f)
        units += [(str(f), g) for g in range(meta.num_row_groups)]
        if shape is None and (meta.schema_arrow.metadata or {}).get(META_SHAPE) is not None:
            shape = parse_shape_metadata(meta.schema_arrow.metadata[META_SHAPE], f)
    if shape is None:
        raise ValueError(f"{path}: a sharded fit needs the tensor shape: give shape= (--shape) or write the "
                         "'distdp.shape' metadata (distdp.completion.io.write_coo_parquet does)")
    return units, tuple(int(n) for n in shape)


def _read_units(units, shape):
    """Indices and values of the given (file, row group) units, checked (ranges, finiteness, repeats in the shard)."""
    import pyarrow.parquet as pq

    from distdp.completion.entries import validate_entries
    from distdp.completion.io import COLUMNS

    idx, vals = [], []
    for f, g in units:
        t = pq.ParquetFile(f).read_row_group(g, columns=list(COLUMNS))
        idx.append(np.stack([t.column(c).to_numpy() for c in "ijk"], axis=1).astype(np.int64))
        vals.append(t.column("value").to_numpy().astype(float))
    idx = np.concatenate(idx) if idx else np.zeros((0, 3), np.int64)
    vals = np.concatenate(vals) if vals else np.zeros(0)
    if len(vals):
        validate_entries(shape, idx, vals, source=f"shard of {len(units)} row group(s) from {units[0][0]}")
    return idx, vals


@ray.remote
class CompletionShard:
    """One shard of the observed entries: its train/test split and the ALS partial sums over its training part.

    The split is drawn per shard from ``numpy.random.default_rng([seed, shard])``
    (it uses the entry count only, like :func:`distdp.completion.split_holdout`).
    Every method returns a sum over this shard's entries; the coordinator adds
    them in shard order.
    """

    def __init__(self, model: str, entries, units, shape, holdout: float, seed, shard: int, chunk: int):
        from distdp.completion.entries import Observations, split_holdout

        self.model, self.chunk, self.shape = model, chunk, tuple(shape)
        self.seed, self.shard, self.validation = seed, shard, None
        idx, vals = entries if entries is not None else _read_units(units, self.shape)
        self.error = None
        if len(vals) == 0:
            self.train = self.test = None
            return
        obs = Observations(self.shape, idx, vals) if len(vals) else None
        rng = np.random.default_rng(None if seed is None else [int(seed), int(shard)])
        self.train, self.test = split_holdout(obs, holdout, rng) if holdout > 0 else (obs, None)
        self.stats = None

    def counts(self) -> dict:
        """Training and test entries and Σ of the training values (for the default offset, the training mean)."""
        if self.train is None:
            return {"n_train": 0, "n_test": 0, "sum": 0.0, "sumsq": 0.0}
        v = self.train.values
        return {"n_train": self.train.n, "n_test": 0 if self.test is None else self.test.n,
                "sum": float(v.sum()), "sumsq": float(v @ v)}

    def set_offset(self, offset: float, validation: Optional[float] = None) -> int:
        """Subtract the offset from the training values and sort them for the sweeps.

        With ``validation`` (a share), hold out that share of the training entries (drawn from
        ``numpy.random.default_rng([seed, shard, 1])``, the entry count only) and sort only the rest: the
        sweeps then fit the rest and :meth:`errors` with ``'validation'`` scores the held-out share.
        Returns the number held out.
        """
        from distdp.completion.als import EntryStats
        from distdp.completion.entries import split_holdout

        self.validation = None
        if self.train is None:
            return 0
        fit = self.train
        if validation:
            fit, self.validation = split_holdout(self.train, validation, np.random.default_rng(
                None if self.seed is None else [int(self.seed), int(self.shard), 1]))
        self.stats = EntryStats(self.model, fit.idx, fit.values - offset, self.chunk)
        return 0 if self.validation is None else self.validation.n

    def call(self, method: str, *args):
        """``EntryStats.<method>(*args)`` over this shard's training entries (zeros for an empty shard)."""
        if self.stats is None:
            return None
        return getattr(self.stats, method)(*args)

    def errors(self, factors, offset: float, value_range, which: str) -> tuple:
        """Σ (clamped prediction − x)², Σ (offset − x)², Σ (mid − x)², n over the ``which`` entries."""
        from distdp.completion.sgd import MODELS

        obs = {"train": self.train, "test": self.test, "validation": self.validation}[which]
        if obs is None:
            return 0.0, 0.0, 0.0, 0
        pred = MODELS[self.model].predict(factors, *obs.idx.T) + offset
        if value_range is not None:
            pred = np.clip(pred, *value_range)
        mid = offset if value_range is None else (value_range[0] + value_range[1]) / 2.0
        base = offset if value_range is None else float(np.clip(offset, *value_range))
        sq = lambda r: float(r @ r)   # noqa: E731
        return sq(pred - obs.values), sq(base - obs.values), sq(mid - obs.values), obs.n

    def peak_rss_bytes(self) -> int:
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


class ShardedEntries:
    """The ALS statistics (:class:`distdp.completion.als.EntryStats` interface) summed over shard actors.

    The factors go to the object store once per call; each actor returns its
    partial sums (R×R per factor row, or R³×R³ for the core), added here in
    shard order. Nothing but these sums and the factors crosses the network.
    """

    def __init__(self, actors):
        self.actors = actors

    def _sum(self, method, *args):
        ref = [ray.put(list(a)) if isinstance(a, (list, tuple)) else a for a in args]
        parts = [p for p in ray.get([act.call.remote(method, *ref) for act in self.actors]) if p is not None]
        if isinstance(parts[0], tuple):
            return tuple(sum(p[i] for p in parts[1:]) + parts[0][i] if len(parts) > 1 else parts[0][i]
                         for i in range(len(parts[0])))
        return sum(parts[1:], parts[0])

    def normal_equations(self, factors, mode):
        return self._sum("normal_equations", factors, mode)

    def core_normal_equations(self, factors):
        return self._sum("core_normal_equations", factors)

    def data_term(self, factors):
        return self._sum("data_term", factors)

    def core_rhs(self, factors):
        return self._sum("core_rhs", factors)

    def core_apply(self, factors, V):
        return self._sum("core_apply", factors, V)

    def sum_squares(self):
        return self._sum("sum_squares")


def sharded_complete(source, rank: int, *, model: str = "cp", n_shards: Optional[int] = None, holdout: float = 0.2,
                     seed: Optional[int] = None, lam: Optional[float] = None, lam_core: Optional[float] = None,
                     tol: Optional[float] = None, epochs: Optional[int] = None, offset: Optional[float] = None,
                     bounds: Optional[tuple] = None, init_scale: Optional[float] = None, shape: Optional[tuple] = None,
                     chunk: Optional[int] = None, address: Optional[str] = None, cpus_per_shard: float = 1.0,
                     start_timeout: float = 600.0):
    """Non-private ALS completion with the observed entries held in shards on Ray actors.

    The same fit as :func:`distdp.completion.complete` with
    ``perturbation='none'`` and ALS (same objective eq. 6/7, same updates,
    same initialisation from ``seed``, same stopping rule): each sweep the
    coordinator broadcasts the factors, every actor returns the per-row
    Gram matrices and right-hand sides over its entries
    (:func:`distdp.completion.als.normal_equations`), and the coordinator
    adds them and solves the R×R systems. Private sharded fits are not
    implemented (noise would be added here, once per release, after the
    reduction).

    Parameters
    ----------
    source : Observations, or path of a parquet COO file / directory
        A path is read by the actors themselves, one slice of the
        (file, row group) units each; nothing but the shape passes through
        the driver. Repeated entries are detected within a shard only.
    rank, model, holdout, seed, lam, lam_core, tol, epochs, offset, bounds, init_scale
        As in :func:`distdp.completion.complete`. The hold-out is drawn
        per shard (so it differs from the in-process split; with
        ``holdout=0`` the fits agree). ``offset`` defaults to the midpoint of
        ``bounds``, else the training mean (a reduction over the shards).
    n_shards : int, optional
        Default: the number of CPUs Ray offers (at most the number of units).
    shape : tuple, optional
        Needed for parquet input without ``distdp.shape`` metadata.
    chunk : int, optional
        Entries per chunk of the partial sums (memory per actor).
    address : str, optional
        Existing Ray cluster; default: start or reuse a local instance.
    cpus_per_shard : float
        CPUs each actor reserves (all actors must fit at once).
    start_timeout : float
        Seconds to wait for the actors to start and read their shards.

    Returns
    -------
    CompletionResult
        ``timings`` has ``load`` (actors reading their shards), ``lam_search``
        (the λ path, where it ran), ``als`` and ``total``;
        ``config['n_shards']`` and ``config['peak_rss_bytes']`` (per actor)
        are added.
    """
    from distdp.completion import perturbation as pt
    from distdp.completion.als import CHUNK, ALSConfig, LambdaPath, LambdaSearch, lambda_path, run_als
    from distdp.completion.sgd import MODELS
    from distdp.completion.api import ALS_DEFAULTS, DEFAULT_LAMBDA, CompletionResult, als_lambda
    from distdp.completion.entries import Observations

    t0 = time.perf_counter()
    if model not in DEFAULT_LAMBDA:
        raise ValueError(f"model must be one of {sorted(DEFAULT_LAMBDA)}, got {model!r}")
    if bounds is not None:
        bounds = pt.check_bounds(bounds)
    ensure_ray(address)
    chunk = CHUNK if chunk is None else int(chunk)
    if isinstance(source, Observations):
        shape = source.shape
        n_shards = n_shards or max(1, int(ray.available_resources().get("CPU", 1)))
        cuts = np.linspace(0, source.n, n_shards + 1).astype(int)
        payloads = [(ray.put((source.idx[a:b], source.values[a:b])), None) for a, b in zip(cuts[:-1], cuts[1:])]
    else:
        units, shape = coo_units(source, shape)
        n_shards = min(n_shards or max(1, int(ray.available_resources().get("CPU", 1))), len(units))
        cuts = np.linspace(0, len(units), n_shards + 1).astype(int)
        payloads = [(None, units[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
    actors = [CompletionShard.options(num_cpus=cpus_per_shard).remote(model, e, u, shape, holdout, seed, s, chunk)
              for s, (e, u) in enumerate(payloads)]
    try:
        try:
            counts = ray.get([a.counts.remote() for a in actors], timeout=start_timeout)
        except ray.exceptions.GetTimeoutError:
            raise RuntimeError(f"{len(actors)} shard actors × {cpus_per_shard} CPU could not all start within "
                               f"{start_timeout:.0f} s (the cluster has {ray.cluster_resources().get('CPU', 0)} "
                               "CPUs): use fewer shards (n_shards) or a smaller cpus_per_shard") from None
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, (ValueError, OSError)):
                raise exc.cause from None
            raise
        t_load = time.perf_counter() - t0
        n_train = sum(c["n_train"] for c in counts)
        n_test = sum(c["n_test"] for c in counts)
        if n_train == 0:
            raise ValueError(f"{source}: the observation set is empty")
        if offset is None:
            offset, source_of = ((bounds[0] + bounds[1]) / 2.0, "midpoint of the declared bounds") if bounds else (
                sum(c["sum"] for c in counts) / n_train, "mean of the training values (non-private fit)")
        else:
            source_of = "given"
        dlam, dlam_core = DEFAULT_LAMBDA[model]
        mean = sum(c["sum"] for c in counts) / n_train
        var = max(0.0, sum(c["sumsq"] for c in counts) / n_train - mean ** 2)
        lam, lam_core, lam_source, validate = als_lambda(model, var, lam, lam_core)   # as complete()
        if init_scale is None:        # the in-process ALS default: σ of the values fitted
            init_scale = float(np.sqrt(var)) if var > 0 else 0.1
        cfg = ALSConfig(max_sweeps=ALS_DEFAULTS["epochs"] if epochs is None else int(epochs),
                        tol=ALS_DEFAULTS["tol"] if tol is None else float(tol), lam=dlam if lam is None else lam,
                        lam_core=dlam_core if lam_core is None else lam_core, init_scale=init_scale, chunk=chunk)
        rng = np.random.default_rng(seed)
        search, start, lam_path, t_search = LambdaSearch(), None, None, time.perf_counter()
        n_val = sum(ray.get([a.set_offset.remote(float(offset), search.fraction if validate else None)
                             for a in actors]))
        if validate and n_val >= search.min_entries:
            # λ by the RMSE on a share of every shard's training entries (as complete(); the split is per shard)
            def validation_rmse(factors) -> float:
                fref = ray.put(list(factors))
                return float(np.sqrt(sum(p[0] for p in ray.get(
                    [a.errors.remote(fref, float(offset), None, "validation") for a in actors])) / n_val))

            init = MODELS[model].init_factors(shape, int(rank), cfg.init_scale, rng)
            lam_, lam_core_, steps, start = lambda_path(model, int(rank), cfg, ShardedEntries(actors),
                                                        validation_rmse, init, shape, search)
            cfg = dataclasses.replace(cfg, lam=lam_, lam_core=lam_core_)
            path = LambdaPath(lam_, lam_core_, steps, n_train - n_val, n_val, factor=search.factor)
            lam_path, lam_source = path.report(), path.source(lam_source)
        if n_val:
            ray.get([a.set_offset.remote(float(offset)) for a in actors])        # every training entry again
        t_search = time.perf_counter() - t_search
        factors, trace = run_als(model, None, int(rank), cfg, rng, stats=ShardedEntries(actors), shape=shape,
                                 init=start)
        value_range = None if bounds is None else (float(bounds[0]), float(bounds[1]))
        fref = ray.put(list(factors))

        def sums(which):
            parts = ray.get([a.errors.remote(fref, float(offset), value_range, which) for a in actors])
            return [sum(p[i] for p in parts) for i in range(4)]

        e_train, _, _, _ = sums("train")
        train_rmse = float(np.sqrt(e_train / n_train))
        test_rmse = baselines = None
        if n_test:
            e, e_off, e_mid, _ = sums("test")
            test_rmse = float(np.sqrt(e / n_test))
            baselines = {"offset": {"value": float(offset), "test_rmse": float(np.sqrt(e_off / n_test))}}
            if value_range is not None:
                baselines["midrange"] = {"value": sum(value_range) / 2.0, "test_rmse": float(np.sqrt(e_mid / n_test))}
        rss = ray.get([a.peak_rss_bytes.remote() for a in actors])
    finally:
        for a in actors:
            ray.kill(a, no_restart=True)
    config = {"model": model, "rank": int(rank), "perturbation": "none", "holdout": holdout, "solver": "als",
              "als_layout": "entries", "bounds": None if bounds is None else list(bounds), "lam": cfg.lam,
              "lam_core": cfg.lam_core, "tol": cfg.tol, "epochs": cfg.max_sweeps, "init_scale": init_scale,
              "offset": float(offset), "offset_source": source_of, "seed": seed, "n_shards": len(actors),
              "peak_rss_bytes": rss,
              "split": "per shard: numpy.random.default_rng([seed, shard]); the λ search's hold-out: "
                       "numpy.random.default_rng([seed, shard, 1])", "lam_source": lam_source,
              "lam_path": lam_path}
    return CompletionResult(model=model, rank=int(rank), A=factors[0], B=factors[1], C=factors[2],
                            G=factors[3] if model == "tucker" else None, offset=float(offset), test_rmse=test_rmse,
                            train_rmse=train_rmse, n_train=n_train, n_test=n_test, trace=trace,
                            privacy=pt.none_report(),
                            timings={"load": t_load, **({"lam_search": t_search} if lam_path else {}),
                                     "als": trace.seconds, "total": time.perf_counter() - t0},
                            config=config, value_range=value_range, baselines=baselines)
