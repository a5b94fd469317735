"""Python API: ``fit_lda`` over a parquet corpus or an in-memory matrix, local or on Ray."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np
import scipy.sparse as sp

from distdp import pipeline
from distdp.io import corpus as cio
from distdp.io.atomic import check_output_dir
from distdp.lda import LDAModel, validate_fit_params
from distdp.shard import Shard


def _progress_bar(enabled: bool) -> tuple[Callable | None, Callable[[], None]]:
    """A tqdm bar over passes and power iterations, and its closer."""
    if not enabled:
        return None, lambda: None
    from tqdm.auto import tqdm

    bar = tqdm(desc="fit", unit="pass", leave=False)

    def update(stage, done, total):
        bar.set_description(stage)
        bar.update(1)

    return update, bar.close


def _split_rows(counts: sp.csr_matrix, n: int) -> list[sp.csr_matrix]:
    bounds = np.linspace(0, counts.shape[0], max(1, min(n, counts.shape[0])) + 1).astype(int)
    return [counts[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def fit_lda(corpus, k: int, *, alpha0: float = 1.0, model: str = "lda", vocab=None,
            vocab_size: int | None = None, workers: int | None = None, backend: str = "ray",
            address: str | None = None, seed: int | None = None, out: str | Path | None = None,
            overwrite: bool = False, progress: bool = True, cpus_per_worker: float | None = None,
            **solver) -> LDAModel:
    """Fit a spectral LDA (or single-topic) model by the method of moments.

    Parameters
    ----------
    corpus : str, Path or scipy.sparse matrix
        A parquet corpus (file or directory, SPEC §2) or a documents×words count matrix.
    k : int
        Number of topics.
    alpha0 : float
        Dirichlet concentration Σα (LDA). Must be > 0.
    model : {'lda', 'stm'}
        ``stm`` is the single-topic model (α0 → 0).
    vocab : str, Path or list of str, optional
        Vocabulary file (one word per line) or list of words.
    vocab_size : int, optional
        Vocabulary size when no vocabulary is given.
    workers : int, optional
        Shards (Ray actors); default: the CPUs Ray sees, at most one per row group.
    backend : {'ray', 'local'}
        ``local`` runs the same shards in this process, no Ray (same numbers).
    address : str, optional
        Address of an existing Ray cluster (default: start or reuse a local instance).
    seed : int, optional
        Seeds the eigensolver's test block and the power method's restarts.
    out : str or Path, optional
        Save the model there (atomically).
    overwrite : bool
        Replace an existing ``out``.
    progress : bool
        Show a progress bar over passes and iterations.
    cpus_per_worker : float, optional
        CPUs each Ray actor reserves; default 1, or less when ``workers``
        exceeds the cluster's CPUs, so that every actor can be placed.
    **solver
        Further :class:`distdp.pipeline.SpectralParams` fields (``eigensolver``,
        ``eig_iters``, ``oversample``, ``tensor``, ``method``, ``n_restarts``, ``n_iters``).

    Returns
    -------
    LDAModel
    """
    t_start = time.perf_counter()
    if out is not None:
        check_output_dir(out, overwrite)
    words = None
    if vocab is not None and not isinstance(vocab, (str, Path)):
        words, vocab = list(vocab), None
    in_memory = sp.issparse(corpus) or isinstance(corpus, np.ndarray)
    if in_memory:
        counts = sp.csr_matrix(corpus, dtype=np.float64)
        d = counts.shape[1]
        if words is None and vocab is not None:
            words = cio.load_vocab(vocab)
        if words is not None and len(words) != d:
            raise ValueError(f"vocabulary has {len(words)} words but the matrix has {d} columns")
        if (counts.data < 0).any():
            raise ValueError("corpus matrix has negative counts")
    else:
        d, file_words = cio.resolve_vocab(corpus, vocab, vocab_size if words is None else len(words))
        words = words if words is not None else file_words
        units = cio.plan_units(cio.discover(corpus))
    params = pipeline.SpectralParams(k=k, alpha0=alpha0, model=model, **solver)
    validate_fit_params(k, alpha0, model, d)

    rb = None
    t0 = time.perf_counter()
    if backend == "local":
        n = workers or 1
        mats = _split_rows(counts, n) if in_memory else [cio.read_units(g, d) for g in cio.partition(units, n)]
        be = pipeline.LocalBackend([Shard(m) for m in mats])
    elif backend == "ray":
        from distdp.distributed import RayBackend, ensure_ray

        import ray

        ensure_ray(address)
        cpus = ray.cluster_resources().get("CPU", 1.0)
        if workers is None:
            workers = max(1, int(cpus // (cpus_per_worker or 1.0)))
        if cpus_per_worker is None:
            cpus_per_worker = min(1.0, cpus / workers)
        if in_memory:
            be = rb = RayBackend(None, d, cpus_per_worker, matrices=_split_rows(counts, workers))
        else:
            be = rb = RayBackend(cio.partition(units, workers), d, cpus_per_worker)
    else:
        raise ValueError(f"backend must be 'ray' or 'local', got {backend!r}")
    t_read = time.perf_counter() - t0

    update, close = _progress_bar(progress)
    rng = np.random.default_rng(seed)
    resources = {}
    try:
        res = pipeline.fit_spectral(be, d, params, rng, progress=update)
        if rb is not None:
            resources = {"actor_peak_rss_bytes": rb.peak_rss_bytes(),
                         "actor_read_s": [i["read_s"] for i in rb.info],
                         "nodes": len({i["node"] for i in rb.info}),
                         "result_bytes_per_round": {m: max(v) for m, v in rb.traffic.items()}}
    finally:
        close()
        if rb is not None:
            rb.shutdown()
    timings = {"read": t_read, **res.timings, "total": time.perf_counter() - t_start}
    info = {
        "method": "spectral",
        "parameters": {"k": k, "alpha0": alpha0, "model": model, "seed": seed, "backend": backend,
                       "workers": be.n_shards, **{f: getattr(params, f) for f in
                                                  ("eigensolver", "eig_iters", "oversample", "tensor",
                                                   "method", "n_restarts", "n_iters")}},
        "corpus": {"source": "in-memory matrix" if in_memory else str(corpus), **res.stats},
        "timings_s": timings,
        "resources": resources,
        "m2_eigenvalues": res.m2_eigenvalues,
        "tensor_eigenvalues": res.tensor_eigenvalues,
        "privacy": {"private": False, "note": "non-private fit: no noise was added at any edge"},
    }
    fitted = LDAModel(res.topic_word, res.alpha, float(params.moment_alpha0), model, words, info)
    if out is not None:
        fitted.save(out, overwrite=overwrite)
    return fitted
