"""Python API: fit, refine, transform, coherence and export, local or on Ray.

Every function takes a corpus as a parquet path (file or directory, in the
format of :mod:`distdp.io.corpus`)
or a documents×words sparse matrix, and runs on shards held either in this
process (``backend="local"``) or in Ray actors (``backend="ray"``).
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from distdp.io import corpus as cio
from distdp.io.atomic import atomic_directory, atomic_file, check_output_dir, local_output
from distdp.lda import LDAModel, metrics, pipeline
from distdp.lda.options import InvalidParameterError, SolverOptions, check_int, check_option, check_real
from distdp.lda.private.options import PrivacyOptions
from distdp.lda.shard import Shard
from distdp.lda.streaming import StreamingShard
from distdp.privacy.neighbours import REPLACE_ONE_DOCUMENT
from distdp.privacy.report import PrivacyReport
from distdp.progress import progress_bar

__all__ = ["ClusterOptions", "OpenCorpus", "PrivacyOptions", "SolverOptions", "TopicMixtures", "coherence", "export",
           "fit_lda", "open_corpus", "transform"]

BACKENDS = ("auto", "ray", "local")


@dataclass(frozen=True)
class ClusterOptions:
    """Where the corpus's shards are read and the passes run.

    Taken as ``cluster=`` by :func:`fit_lda`, :func:`transform`,
    :func:`coherence`, :func:`export`, :func:`open_corpus` and
    :class:`distdp.SpectralLDA`.

    Parameters
    ----------
    backend : {'auto', 'ray', 'local'}, default='auto'
        ``local``: the shards live in this process, no Ray (the same numbers);
        ``ray``: in Ray actors; ``auto``: ``local`` for a corpus of at most
        :data:`AUTO_LOCAL_MAX_NONZEROS` stored counts when no ``address`` is
        given and Ray is not already running in this process, else ``ray``
        (:func:`auto_backend`).
    address : str, optional
        Address of an existing Ray cluster (default: start or reuse a local
        instance).
    workers : int, optional
        Shards (Ray actors, or in-process shards with ``local``); default: the
        CPUs Ray sees, one shard in process (:func:`distdp.io.corpus.partition`
        splits the row groups).
    cpus_per_worker : float, optional
        CPUs each Ray actor reserves (default 1, less if ``workers`` exceeds
        the CPUs).
    out_of_core : bool, optional
        ``True``: the shards keep no documents between passes but read their
        row groups again for every pass (:class:`distdp.lda.streaming.StreamingShard`;
        each holds one row group at a time), for a parquet corpus larger than
        the memory; refinement is then by EM, as Gibbs sampling keeps a topic
        per token. ``False``: the shards hold their counts. Default: out of
        core where the counts would take more than :data:`OUT_OF_CORE_SHARE`
        of the memory (:func:`auto_out_of_core`).

    Raises
    ------
    InvalidParameterError
        A field of the wrong type or out of range, naming the field.
    """

    backend: str = "auto"
    address: str | None = None
    workers: int | None = None
    cpus_per_worker: float | None = None
    out_of_core: bool | None = None

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise InvalidParameterError(f"ClusterOptions.backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.address is not None and not isinstance(self.address, str):
            raise InvalidParameterError(f"ClusterOptions.address must be a string or None, got {self.address!r}")
        check_int("ClusterOptions.workers", self.workers, 1)
        check_real("ClusterOptions.cpus_per_worker", self.cpus_per_worker)
        if self.out_of_core not in (None, True, False):
            raise InvalidParameterError(f"ClusterOptions.out_of_core must be True, False or None, got "
                                        f"{self.out_of_core!r}")


def _split_rows(counts: sp.csr_matrix, n: int) -> list[sp.csr_matrix]:
    bounds = np.linspace(0, counts.shape[0], max(1, min(n, counts.shape[0])) + 1).astype(int)
    return [counts[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


@dataclass
class OpenCorpus:
    """Shards of a corpus ready to serve passes, and what is known about it."""

    backend: pipeline.Backend
    ray_backend: object | None
    vocab_size: int
    vocab: list[str] | None
    source: str
    read_seconds: float
    out_of_core: bool = False

    @property
    def kind(self) -> str:
        """``"ray"`` or ``"local"``: where the shards live."""
        return "local" if self.ray_backend is None else "ray"

    @property
    def documents(self) -> int:
        """Documents (rows) over every shard."""
        if self.ray_backend is None:
            return int(sum(s.n_total for s in self.backend.shards))
        return int(sum(i["n_docs"] for i in self.ray_backend.info))

    @property
    def nonzeros(self) -> int:
        """Stored (document, word) counts over every shard."""
        if self.ray_backend is None:
            return int(sum(s.nnz for s in self.backend.shards))
        return int(sum(i["nnz"] for i in self.ray_backend.info))

    def resources(self) -> dict:
        """Per-actor peak memory, read time, nodes, bytes per round and rounds' seconds (Ray only)."""
        rb = self.ray_backend
        if rb is None:
            return {}
        return {"actor_peak_rss_bytes": rb.peak_rss_bytes(), "actor_read_s": [i["read_s"] for i in rb.info],
                "nodes": len({i["node"] for i in rb.info}),
                "result_bytes_per_round": {m: max(v) for m, v in rb.traffic.items()},
                "round_s": rb.round_seconds()}

    def close(self) -> None:
        if self.ray_backend is not None:
            self.ray_backend.shutdown()


#: The spectral stage's Σα when the user gives none; the refinement then learns α from the data.
DEFAULT_ALPHA0 = 1.0

#: With ``backend="auto"`` and no cluster address, a corpus of at most this many stored (document, word)
#: counts is fitted in this process: starting Ray and its actors (3–5 s) would cost more than the fit.
AUTO_LOCAL_MAX_NONZEROS = 5_000_000


#: With ``out_of_core=None``, a corpus streams when its counts (:data:`CSR_BYTES_PER_NONZERO` each) would take
#: more than this share of the memory: the in-memory fit's processes peaked at 2.3× the counts' bytes in all
#: (``benchmarks/scale.py``: driver, Ray's daemons, actors), so 0.4 leaves room for the rest of the machine.
OUT_OF_CORE_SHARE = 0.4
#: Bytes a shard holds per stored count: a float64 value and an int32 column index.
CSR_BYTES_PER_NONZERO = 12


def available_memory(backend: str) -> int | None:
    """Bytes the fit's shards may use: Ray's ``memory`` resource of the cluster, or this machine's available
    memory (``MemAvailable``); None where neither is known."""
    if backend == "ray":
        import ray

        mem = ray.cluster_resources().get("memory")
        return int(mem) if mem else None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def auto_out_of_core(nonzeros: int, memory: int | None) -> bool:
    """What ``out_of_core=None`` means: stream when the counts' bytes exceed :data:`OUT_OF_CORE_SHARE` of
    ``memory`` (never where the memory is unknown)."""
    return memory is not None and CSR_BYTES_PER_NONZERO * nonzeros > OUT_OF_CORE_SHARE * memory


def auto_backend(address: str | None, nonzeros: int) -> str:
    """What ``backend="auto"`` means: ``"ray"`` where a cluster is named (``address``, ``RAY_ADDRESS``) or
    already joined (a Ray job's driver), or the corpus has more than :data:`AUTO_LOCAL_MAX_NONZEROS` stored
    counts; else ``"local"``."""
    ray = sys.modules.get("ray")
    if address is not None or os.environ.get("RAY_ADDRESS") or (ray is not None and ray.is_initialized()):
        return "ray"
    return "local" if nonzeros <= AUTO_LOCAL_MAX_NONZEROS else "ray"


@contextlib.contextmanager
def open_corpus(corpus, *, vocab=None, vocab_size: int | None = None, cluster: ClusterOptions | None = None,
                with_doc_ids: bool = False, shard_class: type = Shard):
    """Read a corpus into shards (in process or in Ray actors); stop the actors on exit.

    ``corpus``, ``vocab`` and ``vocab_size`` are those of :func:`fit_lda`; ``cluster`` says where the shards
    live (:class:`ClusterOptions`; its backend ``auto`` is settled by :func:`auto_backend` on the matrix's
    nonzeros or the parquet metadata's value counts, no data read). ``shard_class`` is the class holding each
    shard (:class:`distdp.lda.private.shard.PrivateShard` for a private fit). Yields an :class:`OpenCorpus`.
    """
    cluster = check_option("cluster", cluster, ClusterOptions) or ClusterOptions()
    workers, backend, address, cpus_per_worker, stream = (cluster.workers, cluster.backend, cluster.address,
                                                          cluster.cpus_per_worker, cluster.out_of_core)
    t0 = time.perf_counter()
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
        if vocab_size is not None and vocab_size != d:
            raise ValueError(f"vocab_size={vocab_size} but the matrix has {d} columns")
        if counts.nnz and counts.data.min() < 0:
            raise ValueError("corpus matrix has negative counts")
        ids = np.arange(counts.shape[0]).astype(str) if with_doc_ids else None
    else:
        d, file_words = cio.resolve_vocab(corpus, vocab, vocab_size if words is None else len(words))
        words = words if words is not None else file_words
        units = cio.plan_units(cio.discover(corpus))
    if backend == "auto":
        backend = auto_backend(address, counts.nnz if in_memory else sum(u.nonzeros for u in units))
    if stream and (in_memory or shard_class is not Shard):
        raise ValueError("out_of_core=True reads a parquet corpus again for every pass of a non-private fit; "
                         + ("this corpus is a matrix in memory" if in_memory else
                            "a private fit holds its shards in memory"))
    rb = None
    if backend == "ray":
        import ray

        from distdp.distributed import ensure_ray

        ensure_ray(address)
    if stream is None:
        stream = (not in_memory and shard_class is Shard
                  and auto_out_of_core(sum(u.nonzeros for u in units), available_memory(backend)))
    if backend == "local":
        n = workers or 1
        if stream:
            shards = [StreamingShard(cio.UnitBlocks(g, d, with_doc_ids)) for g in cio.partition(units, n)]
        elif in_memory:
            mats = _split_rows(counts, n)
            bounds = np.cumsum([0] + [m.shape[0] for m in mats])
            shards = [shard_class(m, None if ids is None else ids[a:b]) for m, a, b in zip(mats, bounds[:-1], bounds[1:])]
        else:
            groups = cio.partition(units, n)
            shards = [shard_class(cio.read_units(g, d), cio.read_doc_ids(g) if with_doc_ids else None) for g in groups]
        be = pipeline.LocalBackend(shards)
    else:                                                   # "ray" (ClusterOptions checked the name)
        from distdp.distributed import RayBackend

        cpus = ray.cluster_resources().get("CPU", 0.0)
        if workers is None:
            if cpus <= 0:
                raise ValueError("the Ray cluster has no CPUs yet (worker nodes still starting under a head with "
                                 "CPU 0, as in cluster.yaml?): wait until `ray status` shows them, or pass "
                                 "--workers N (the shard actors then wait for the autoscaler's nodes)")
            workers = max(1, int(cpus // (cpus_per_worker or 1.0)))
        if cpus_per_worker is None:
            cpus_per_worker = min(1.0, cpus / workers) if cpus > 0 else 1.0
        if in_memory:
            be = rb = RayBackend(None, d, shard_class, cpus_per_worker, matrices=_split_rows(counts, workers))
        else:
            be = rb = RayBackend(cio.partition(units, workers), d, StreamingShard if stream else shard_class,
                                 cpus_per_worker, with_doc_ids=with_doc_ids, stream=stream)
    oc = OpenCorpus(be, rb, d, words, "in-memory matrix" if in_memory else str(corpus), time.perf_counter() - t0,
                    out_of_core=bool(stream))
    try:
        yield oc
    finally:
        oc.close()


def fit_lda(corpus, k: int, *, alpha0: float | None = None, model: str = "lda", refine: int | None = None,
            refiner: str | None = None, eta: float | None = None, vocab=None, vocab_size: int | None = None,
            seed: int | None = None, coherence: bool = True, out: str | Path | None = None, overwrite: bool = False,
            progress: bool = True, privacy: PrivacyOptions | None = None, solver: SolverOptions | None = None,
            cluster: ClusterOptions | None = None) -> LDAModel:
    """Fit a spectral LDA (or single-topic) model, refined by collapsed Gibbs sampling or variational EM.

    Parameters
    ----------
    corpus : str, Path or scipy.sparse matrix
        A parquet corpus (file or directory, format of :mod:`distdp.io.corpus`) or a documents×words
        count matrix.
    k : int
        Number of topics.
    alpha0 : float, optional
        Dirichlet concentration Σα (LDA), > 0. Not given (the default): the
        spectral stage uses :data:`DEFAULT_ALPHA0` and the refinement learns
        α from the data (its Σα is ``info["refine"]["learned_alpha0"]``; from
        α0 = 0.1 to 20 it converged to the same value on real corpora, see
        the refinement guide). Given: the spectral stage uses it and the
        refinement keeps α fixed at α0/k for every topic (the prior of
        scikit-learn's ``doc_topic_prior``), so the user's α0 wins.
    model : {'lda', 'stm'}
        ``stm`` is the single-topic model (α0 → 0).
    vocab : str, Path or list of str, optional
        Vocabulary file (one word per line) or list of words.
    vocab_size : int, optional
        Vocabulary size when no vocabulary is given.
    seed : int, optional
        Seeds the eigensolver's test block and the power method's restarts.
    refine : int, optional
        Iterations of the refinement after the spectral fit, on the same
        shards (LDA only; 0: the pure spectral fit). With ``refiner="gibbs"``:
        collapsed Gibbs sweeps started from the spectral topics (default
        :data:`distdp.lda.pipeline.DEFAULT_SWEEPS`; :func:`distdp.lda.pipeline.refine_gibbs`).
        With ``refiner="em"``: most batch variational EM iterations (default
        :data:`distdp.lda.pipeline.DEFAULT_REFINE`, stopped earlier once the
        bound's relative change is below :data:`distdp.lda.pipeline.EM_STOP_TOL`).
        Both learn α (Minka's fixed point). Where the spectral stage cannot
        run (fewer than k + 1 documents of at least 3 tokens, e.g. a corpus
        of one- and two-word queries), a refined fit starts from topics split
        from the word frequencies (:func:`distdp.lda.pipeline.frequency_start`;
        default :data:`distdp.lda.pipeline.FALLBACK_SWEEPS` Gibbs sweeps), says
        so on stderr and in ``model.json`` (``corpus.spectral_skipped``); with
        ``refine=0`` it is an error. In a private fit the refinement is
        private EM: it follows the unmixing passes, α stays the released
        spectral one, and giving ``refine`` (even 0) turns the default
        unmixing passes off.
    eta : float, optional
        Topic-word Dirichlet prior of the refinement (default
        :data:`distdp.lda.pipeline.GIBBS_ETA` for Gibbs sampling, 1/k for EM).
    refiner : {'gibbs', 'em'}, optional
        Non-private fits: the refinement. Default ``gibbs`` (collapsed Gibbs
        sampling, distributed as AD-LDA; needs whole-number counts), ``em``
        where a count is not a whole number. Private fits refine by private EM
        only.
    coherence : bool
        Record the NPMI coherence of the topics on the training corpus (one more pass).
    out : str or Path, optional
        Save the model there (atomically; checked before any work).
    overwrite : bool
        Replace an existing ``out``.
    progress : bool
        Show a progress bar over passes and iterations.
    privacy : PrivacyOptions, optional
        Make the fit (ε, δ)-differentially private for replace-one-document
        neighbours (:class:`PrivacyOptions`: the budget, the mechanism and the
        private refinement; :mod:`distdp.lda.private.fit`). The refinement is
        then private EM (``refiner`` 'em' or None).
    solver : SolverOptions, optional
        The spectral solver's settings (:class:`SolverOptions`; default: its defaults).
    cluster : ClusterOptions, optional
        Where the shards live (:class:`ClusterOptions`; default: ``backend='auto'``).

    Returns
    -------
    LDAModel
    """
    t_start = time.perf_counter()
    if out is not None:
        check_output_dir(out, overwrite)
    alpha_given = alpha0 is not None
    alpha0 = DEFAULT_ALPHA0 if alpha0 is None else alpha0
    if refiner not in (None, "gibbs", "em"):
        raise ValueError(f"refiner must be 'gibbs' or 'em', got {refiner!r}")
    privacy = check_option("privacy", privacy, PrivacyOptions)
    solver = check_option("solver", solver, SolverOptions) or SolverOptions()
    cluster = check_option("cluster", cluster, ClusterOptions) or ClusterOptions()
    if privacy is not None:
        if refiner == "gibbs":
            raise ValueError("refiner='gibbs' is not private: a private fit refines by private EM (leave refiner "
                             "out, or pass refiner='em')")
        from distdp.lda.private import fit as private_fit
        from distdp.lda.private.shard import PrivateShard

        opener = functools.partial(open_corpus, corpus, vocab=vocab, vocab_size=vocab_size, cluster=cluster,
                                   shard_class=PrivateShard)
        public = functools.partial(_public_coherence, cluster=ClusterOptions(backend=cluster.backend,
                                                                             address=cluster.address))
        return private_fit.fit_lda_private(
            corpus, k, opener, public, privacy, alpha0=alpha0, model=model, seed=seed, refine=refine, eta=eta,
            out=out, overwrite=overwrite, progress=progress, coherence=coherence, solver=solver)
    if refine and model != "lda":
        raise ValueError("refine (Gibbs sampling or variational EM) applies to model='lda' only")
    update, close = progress_bar(progress)
    rng = np.random.default_rng(seed)
    with open_corpus(corpus, vocab=vocab, vocab_size=vocab_size, cluster=cluster) as oc:
        params = solver.spectral_params(k, alpha0, model, oc.nonzeros, oc.documents)
        params.validate(oc.vocab_size)
        refiner = _choose_refiner(oc.backend, model, refiner, refine, oc.out_of_core)
        refine_given = refine is not None
        refine = refine if refine_given else _default_refine(model, refiner)
        eta = (pipeline.GIBBS_ETA if refiner == "gibbs" else 1.0 / k) if eta is None else float(eta)
        try:
            try:
                res = pipeline.fit_spectral(oc.backend, oc.vocab_size, params, rng, progress=update)
            except pipeline.TooFewDocuments as err:
                if not refine:
                    raise ValueError(f"{err}. Refined (the default for model='lda'), the fit starts from the "
                                     "word frequencies instead; the pure spectral fit (refine=0) cannot.") from None
                res = pipeline.frequency_start(oc.backend, oc.vocab_size, k, alpha0, rng, err)
                refine = refine if refine_given else _default_refine(model, refiner, from_frequencies=True)
            n_em = _em_iterations(res, k, model, refine)
            topic_word, alpha, variational, em = res.topic_word, res.alpha, None, None
            start = np.full(k, alpha0 / k) if alpha_given else pipeline.em_start_alpha(res.alpha)
            if n_em and refiner == "gibbs":
                em = pipeline.refine_gibbs(oc.backend, res.topic_word, start, n_em, eta, rng, progress=update,
                                           alpha_every=None if alpha_given else pipeline.ALPHA_EVERY)
                topic_word, alpha, variational = em.topic_word, em.alpha, em.variational
            elif n_em:
                em = pipeline.refine_em(oc.backend, res.topic_word, start, res.stats["n_tokens"], n_em, eta,
                                        progress=update, learn_alpha=not alpha_given, stop_tol=pipeline.EM_STOP_TOL)
                alpha = em.alpha if em.alpha is not None else start
                topic_word, variational = em.topic_word, em.variational
            if em is not None:                                  # topics by decreasing learned α, as the spectral ones
                order = np.argsort(-alpha, kind="stable")
                topic_word, alpha, variational = topic_word[order], alpha[order], variational[order]
                moved = float(np.abs(topic_word - res.topic_word[order]).sum(1).mean())
            coh = metrics.coherence_on(oc.backend, topic_word) if coherence else None
            resources = oc.resources()
        finally:
            close()
    timings = {"read": oc.read_seconds, **res.timings}
    gibbs_run = isinstance(em, pipeline.GibbsResult)
    skipped = "spectral_skipped" in res.stats        # the refinement started from pipeline.frequency_start
    start_from, start_topics, start_alpha = (
        ("word frequencies", "topics split from the word frequencies", "split topics") if skipped
        else ("spectral", "spectral topics", "spectral"))
    info = {
        "method": start_from + ("" if em is None else f" + {len(em.seconds) - 1} collapsed Gibbs sweeps" if gibbs_run
                                else f" + {len(em.elbo)} variational EM iterations"),
        "parameters": {"k": k, "alpha0": alpha0, "alpha0_given": alpha_given, "model": model, "seed": seed,
                       "backend": oc.kind, "workers": oc.backend.n_shards, "out_of_core": oc.out_of_core,
                       "refine": refine,
                       "refiner": refiner if em is not None else None, "eta": eta if em is not None else None,
                       **{f: getattr(params, f) for f in ("eigensolver", "precision", "eig_iters", "eig_tol",
                                                          "oversample", "tensor", "method", "n_iters")},
                       "n_restarts": params.restarts() if params.method == "robust" else None},
        "corpus": {"source": oc.source, **res.stats},
        "whitening": res.whitening,
        "timings_s": timings,
        "resources": resources,
        "m2_eigenvalues": res.m2_eigenvalues,
        "tensor_eigenvalues": res.tensor_eigenvalues,
        "privacy": PrivacyReport(private=False, mechanism="none", neighbour=REPLACE_ONE_DOCUMENT,
                                 not_private_because=("non-private fit: no noise was added at any edge",)).to_dict(),
    }
    if em is not None:
        timings["refine"] = float(sum(em.seconds))
        learned = (f"learned every {pipeline.ALPHA_EVERY} sweeps (Minka's fixed point on the topic-count histograms)"
                   if gibbs_run else "learned (Minka's Newton fixed point)")
        shared = {"alpha": (f"fixed at alpha0/k = {alpha0 / k:g} (alpha0 given)" if alpha_given else
                            learned + f", started symmetric at Σα/k of the {start_alpha} α"),
                  "learned_alpha0": None if alpha_given else float(alpha.sum()),
                  "spectral_alpha": res.alpha, "seconds": em.seconds, "spectral_topic_word_l1_change": moved}
        if gibbs_run:
            info["refine"] = {"sweeps": len(em.seconds) - 1,
                              "sampler": "collapsed Gibbs (Griffiths & Steyvers 2004), shards as AD-LDA (Newman et "
                                         f"al. 2009), started from the {start_topics}",
                              "log_likelihood": em.log_likelihood, "restarted_shards": em.restarts, **shared}
        else:
            info["refine"] = {"iterations": len(em.elbo), "converged": em.converged, "stop_tol": pipeline.EM_STOP_TOL,
                              "elbo": em.elbo, "inner_iterations": em.inner_iterations, **shared}
    if coh is not None:
        info["coherence"] = {"measure": "NPMI", "top_n": coh["top_n"], "corpus": "training corpus",
                             "mean": coh["mean"], "per_topic": coh["per_topic"], "c_v": coh["c_v"],
                             "diversity": coh["diversity"], "diversity_top_n": coh["diversity_top_n"]}
    timings["total"] = time.perf_counter() - t_start
    fitted = LDAModel(topic_word, alpha, float(params.moment_alpha0), model, oc.vocab, info, variational)
    if out is not None:
        fitted.save(out, overwrite=overwrite)
    return fitted


def _choose_refiner(backend, model: str, refiner: str | None, refine: int | None, out_of_core: bool = False) -> str:
    """The refinement of a non-private fit: ``refiner`` if given, else ``gibbs`` where it can run, else ``em``.

    Gibbs sampling needs numba, whole-number counts and the documents in
    memory (a topic per token); asked for where it cannot run, it is an error
    naming why.
    """
    from distdp.lda import gibbs

    if model != "lda" or refine == 0 or refiner == "em":
        return refiner or "em"
    why = ("the fit is out of core (the chain keeps a topic per token in memory)" if out_of_core else
           "numba is not installed" if not gibbs.available() else
           "the corpus has counts that are not whole numbers" if not all(backend.call(Shard.integral_counts)) else None)
    if why is None:
        return "gibbs"
    if refiner == "gibbs":
        raise ValueError(f"refiner='gibbs' samples whole tokens with numba, but {why}: use refiner='em'")
    return "em"


def _default_refine(model: str, refiner: str, from_frequencies: bool = False) -> int:
    """Refinement iterations when the user gives none: none for the single-topic model; EM's
    :data:`distdp.lda.pipeline.DEFAULT_REFINE`; Gibbs sweeps, more where the chain starts from the word frequencies
    (:data:`~distdp.lda.pipeline.FALLBACK_SWEEPS`) than from spectral topics
    (:data:`~distdp.lda.pipeline.DEFAULT_SWEEPS`)."""
    if model != "lda":
        return 0
    if refiner != "gibbs":
        return pipeline.DEFAULT_REFINE
    return pipeline.FALLBACK_SWEEPS if from_frequencies else pipeline.DEFAULT_SWEEPS


def _em_iterations(res: pipeline.SpectralResult, k: int, model: str, refine: int) -> int:
    """EM iterations to run: ``refine``, at least :data:`distdp.lda.pipeline.FILL_REFINE` when topics were filled.

    Where M2 supports only ``m < k`` topics the spectral stage's ``m`` are
    completed by split topics (:func:`distdp.lda.fill_topics`), which EM
    must separate: that is said on stderr and in ``model.json``
    (``corpus.n_topics_spectral``). The single-topic model has no EM, so it
    cannot be completed: it fails, naming the ``k`` that works.
    """
    m = res.n_supported
    if m == k:
        return refine
    if "spectral_skipped" in res.stats:
        warnings.warn(f"the spectral stage did not run ({res.stats['spectral_skipped']}); {refine} refinement "
                      f"iterations separated them (model.json: corpus.spectral_skipped)", stacklevel=3)
        return refine
    if model != "lda":
        raise ValueError(f"k={k} is larger than the data supports: M2 has {m} positive eigenvalues among its top "
                         f"{k} (λ_{m + 1} ≤ 0); the single-topic model cannot complete them. Use k ≤ {m}, or "
                         "model='lda'.")
    n = max(refine, pipeline.FILL_REFINE)
    warnings.warn(f"the data support {m} of the k={k} topics (M2 has {m} positive eigenvalues among its top {k}); "
                  f"the other {k - m} were split from the heaviest spectral topics and separated by {n} refinement "
                  f"iterations (model.json: corpus.n_topics_spectral). Use k ≤ {m} for spectral topics only.",
                  stacklevel=3)
    return n


# ------------------------------------------------------------------ coherence
def coherence(model: LDAModel, corpus, *, top_n: int = metrics.COHERENCE_TOP_N,
              cluster: ClusterOptions | None = None) -> dict:
    """NPMI and C_V coherence of each topic's ``top_n`` words from document co-occurrence in ``corpus``.

    One pass over the shards (the corpus is never gathered). Returns
    ``{"mean": float, "per_topic": ndarray (k,), "top_n": int}`` for NPMI
    (Bouma 2009, a pair never together −1: :func:`distdp.lda.refine.npmi`), with
    ``"c_v": {"mean", "per_topic", "window": "document"}`` (gensim's
    ``coherence='c_v'``, Röder et al. 2015, each document one window: the
    same as gensim's 110-token windows on documents of at most 110 tokens;
    :func:`distdp.lda.metrics.c_v`), and ``"diversity"`` (Dieng et al. 2020:
    distinct words among all topics' top ``"diversity_top_n"`` = 25).
    In a private setting, coherence on the private training corpus is itself
    a release: compute it on a corpus you may publish statistics of.
    ``cluster``: where the shards live (:class:`ClusterOptions`).
    """
    with _open_for_model(model, corpus, cluster) as oc:
        return metrics.coherence_on(oc.backend, model.topic_word, top_n)


def _public_coherence(model: LDAModel, corpus, cluster: ClusterOptions) -> np.ndarray:
    """NPMI per topic of ``model`` on a corpus declared public (a private fit's ``public_corpus``)."""
    return coherence(model, corpus, cluster=cluster)["per_topic"]


def _open_for_model(model: LDAModel, corpus, cluster: ClusterOptions | None, with_doc_ids: bool = False):
    """Open ``corpus`` after checking that its vocabulary is the model's.

    A parquet corpus's own vocabulary (``vocab.txt`` or metadata) must have
    the model's size (and words, when both are known); a corpus without one
    is read with the model's vocabulary size.
    """
    d = model.topic_word.shape[1]
    if not (sp.issparse(corpus) or isinstance(corpus, np.ndarray)):
        own = cio.corpus_vocab(corpus)
        d_corpus, words = (own[0], own[1]) if own is not None else (d, None)
        if d_corpus != d:
            raise ValueError(f"{corpus}: the corpus has vocabulary size {d_corpus} but the model has {d}")
        if words is not None and model.vocab is not None and words != model.vocab:
            raise ValueError(f"{corpus}: the corpus's vocabulary differs from the model's (same size, other words)")
    return open_corpus(corpus, vocab_size=d, cluster=cluster, with_doc_ids=with_doc_ids)


# ------------------------------------------------------------------ transform and export
@dataclass
class TopicMixtures:
    """Per-document topic mixtures from :func:`transform`.

    Attributes
    ----------
    theta : ndarray (n, k) float32
        Posterior-mean topic proportions; rows sum to 1.
    n_tokens : ndarray (n,)
        In-vocabulary tokens of each document.
    doc_ids : ndarray of str (n,)
    status : ndarray of str (n,)
        ``"ok"``, or ``"empty"`` for a document with no in-vocabulary token,
        whose θ is then the prior mean α/Σα.
    """

    theta: np.ndarray
    n_tokens: np.ndarray
    doc_ids: np.ndarray
    status: np.ndarray


def _gather_mixtures(parts: list) -> TopicMixtures:
    theta = np.vstack([p[0] for p in parts])
    n_tok = np.concatenate([p[1] for p in parts])
    ids = np.concatenate([np.asarray(p[2]) for p in parts]) if parts[0][2] is not None \
        else np.arange(len(theta)).astype(str)
    return TopicMixtures(theta, n_tok, ids, np.where(n_tok > 0, "ok", "empty"))


def transform(model: LDAModel, corpus, *, out: str | Path | None = None, overwrite: bool = False,
              max_iter: int = 100, tol: float = 1e-3, cluster: ClusterOptions | None = None) -> TopicMixtures:
    """Topic mixtures θ of every document of ``corpus`` (E-step with the topics fixed).

    ``out`` (a ``.parquet`` file, written atomically) gets columns
    ``doc_id``, ``theta`` (list<float32>), ``n_tokens`` and ``status``;
    ``cluster``: where the shards live (:class:`ClusterOptions`).
    The output of ``transform`` on private documents is private data.
    """
    if out is not None:
        out = local_output(out)
        if out.exists() and not overwrite:
            raise FileExistsError(f"{out} already exists (pass overwrite=True / --overwrite)")
    with _open_for_model(model, corpus, cluster, with_doc_ids=True) as oc:
        mix = _gather_mixtures(oc.backend.call(Shard.transform, model.exp_elog_beta(), model.alpha, max_iter, tol))
    if out is not None:
        write_mixtures(mix, out)
    return mix


def write_mixtures(mix: TopicMixtures, out: Path) -> None:
    """Write topic mixtures as parquet, atomically (temporary file, then rename)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    k = mix.theta.shape[1]
    theta = pa.FixedSizeListArray.from_arrays(pa.array(mix.theta.astype(np.float32).ravel()), k)
    table = pa.table({"doc_id": pa.array(mix.doc_ids.astype(str)), "theta": theta.cast(pa.list_(pa.float32())),
                      "n_tokens": pa.array(mix.n_tokens.astype(np.int64)), "status": pa.array(mix.status.astype(str))})
    with atomic_file(out) as tmp:
        pq.write_table(table, tmp)


def export(model: LDAModel, corpus, out: str | Path, *, overwrite: bool = False,
           cluster: ClusterOptions | None = None) -> Path:
    """Write the arrays pyLDAvis needs, and the top words, to directory ``out`` (atomically).

    Files: ``topic_term_dists.npy`` (k×d), ``doc_topic_dists.npy`` (n×k),
    ``doc_lengths.npy`` (n), ``term_frequency.npy`` (d), ``vocab.json``,
    ``top_words.txt``. Open them with::

        import json, numpy as np, pyLDAvis
        a = {n: np.load(f"{out}/{n}.npy") for n in
             ("topic_term_dists", "doc_topic_dists", "doc_lengths", "term_frequency")}
        vis = pyLDAvis.prepare(vocab=json.load(open(f"{out}/vocab.json")), **a)

    ``cluster``: where the shards live (:class:`ClusterOptions`).
    """
    check_output_dir(out, overwrite)
    with _open_for_model(model, corpus, cluster, with_doc_ids=True) as oc:
        mix = _gather_mixtures(oc.backend.call(Shard.transform, model.exp_elog_beta(), model.alpha, 100, 1e-3))
        tf = pipeline.sum_partials(oc.backend.call(Shard.term_frequency))
    vocab = model.vocab or [str(i) for i in range(model.topic_word.shape[1])]
    with atomic_directory(out, overwrite=overwrite) as tmp:
        np.save(tmp / "topic_term_dists.npy", model.topic_word)
        np.save(tmp / "doc_topic_dists.npy", mix.theta.astype(np.float64))
        np.save(tmp / "doc_lengths.npy", mix.n_tokens)
        np.save(tmp / "term_frequency.npy", tf)
        (tmp / "vocab.json").write_text(json.dumps(vocab))
        (tmp / "top_words.txt").write_text(model.format_top_words())
    return Path(out)
