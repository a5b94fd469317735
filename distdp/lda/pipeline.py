"""The coordinator of the spectral fit (dp-spectral-lda-end-to-end, §3.1): reduce, release, decompose.

Pure: the coordinator sees the shards only through a :class:`Backend`, which
calls a named :class:`distdp.lda.shard.Shard` method on every shard and returns
the results in shard order. :class:`LocalBackend` runs the shards in this
process; :class:`distdp.distributed.RayBackend` runs them in Ray actors. Both
reduce in the same order, so they give identical numbers for the same seed.

:func:`fit_spectral` is the one loop of every spectral fit, private or not:
its release object decides, stage by stage, what the shards compute and what
leaves them (:class:`SpectralStages`). Non-private (:class:`NonPrivate`,
:class:`ExactStages`), every quantity that leaves the data goes through
``releases.release(edge, value)`` at one of the data-flow edges of the DP
spectral LDA paper (Fig. 1):

* ``"m2_whitening"`` (e3) — each ``M2 Ω`` product used to find ``W``;
* ``"whitened_tensor"`` (e6) — the dense ``T = M3(W,W,W)``;
* ``"tensor_apply"`` (e6, implicit path) — each ``T(I,u,u)`` batch;
* ``"decomposition"`` (e7) — the eigenvalues and eigenvectors of ``T``;
* ``"output"`` (e9) — the final topic-word matrix and α;
* ``"em_sstats"`` — each variational EM iteration's summed sufficient
  statistics ``Σ_n c_nw φ_nwk`` (k×d), see :func:`refine_em`.

The private fit's stages (:class:`distdp.lda.private.pipeline.PrivateStages`)
release clipped sums with noise instead, and its EM is :func:`refine_em` with a
noisy ``release``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np

from distdp import lda
from distdp.lda import gibbs, moments, refine, whitening
from distdp.lda.moments import sum_partials
from distdp.lda.shard import Shard
from distdp.tensor.power import default_n_restarts, robust_power_method, simultaneous_power_method


def default_lda_restarts(k: int) -> int:
    """Restarts of the robust power method on the k×k×k whitened tensor: ``min(max(10, ⌈k ln 10k⌉), max(20, 3⌈ln 10k⌉))``.

    The theory's ``L = ⌈k ln 10k⌉`` (:func:`distdp.tensor.power.default_n_restarts`:
    a union bound over the k deflation stages) made the power method 90% of
    a fit at k = 100 (230 of 261 s on 24k documents, L = 691). Here the
    tensor has dimension k and all k components are extracted, so every
    start converges to one of them; the restarts only choose which comes
    first. Measured (non-private, k = 20, 50, 100; synthetic LDA and two
    real corpora, 2 seeds): from L = 10 to the theory's L, topic L1 on
    synthetic data identical to 4 decimals and real-text NPMI within the
    seed spread (≤ 0.002); L ≤ 3 lost NPMI or duplicated topics. This keeps
    twice the margin over L = 10 (20 at k = 10, 21 at k = 100).
    """
    return min(default_n_restarts(k), max(20, 3 * math.ceil(math.log(10 * k))))


#: Most products with M2 of the non-private eigensolvers, and their stopping residual (SpectralParams).
EIG_MAX_ITERS, EIG_TOL = 30, 1e-3

#: Variational EM iterations after a non-private spectral fit unless the user says otherwise (``refine``), and the
#: relative ELBO change that stops them earlier (:func:`refine_em`).
DEFAULT_REFINE, EM_STOP_TOL = 20, 1e-3
#: EM iterations a fit runs at least when its spectral stage found fewer than k topics (the split ones must separate).
FILL_REFINE = 20


def em_start_alpha(alpha: np.ndarray) -> np.ndarray:
    """The α that EM starts from: symmetric at the spectral ``Σα/k``.

    A spectral topic whose α came out tiny (its tensor eigenvalue large) is
    otherwise never revived by EM: its documents' γ stay at the prior.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    return np.full_like(alpha, alpha.sum() / len(alpha))


#: The non-private eigensolvers of :class:`SpectralParams`, and the precisions of the shards' M2 products.
EIGENSOLVERS = ("lobpcg", "lanczos", "randomized", "dense")
PRECISIONS = ("float64", "float32")
#: ``eigensolver="auto"`` (:class:`distdp.lda.options.SolverOptions`) runs Lanczos where one product with M2
#: costs at most this many stored counts, each document counting for :data:`LANCZOS_DOCUMENT_COST` (a product's
#: per-document work): there LOBPCG's d × 3p orthonormalisations, not the products, are the whitening's cost.
#: On the real corpora of benchmarks/topic_quality.py (d = 5,000, k = 10–50, in process), Lanczos whitened
#: 1.5–2.5× faster at costs of 18k–116k and 1.2–1.4× at 637k (the news articles), 1.4–1.6× slower at 1.3M (the
#: tweets): benchmarks/eigensolvers.py, docs/benchmarks/speed.md#lanczos-in-process.
LANCZOS_MAX_PRODUCT_COST = 500_000
LANCZOS_DOCUMENT_COST = 15


def auto_eigensolver(nonzeros: int | None, documents: int | None) -> str:
    """What ``eigensolver="auto"`` means: ``"lanczos"`` for a corpus whose product cost
    (``nonzeros + LANCZOS_DOCUMENT_COST·documents``) is at most :data:`LANCZOS_MAX_PRODUCT_COST`, else ``"lobpcg"``
    (also where the size is not given).

    The same on every backend, so that in process and on Ray a seed gives the same numbers. Such a corpus
    is fitted in process unless Ray is asked for (:func:`distdp.api.auto_backend`); on Ray each of Lanczos's
    ≈ 5·k products is a round of calls, ≈ 1 ms each here, where LOBPCG makes ≈ 12.
    """
    if nonzeros is None or documents is None:
        return "lobpcg"
    return "lanczos" if nonzeros + LANCZOS_DOCUMENT_COST * documents <= LANCZOS_MAX_PRODUCT_COST else "lobpcg"


#: ``precision="auto"`` (:class:`distdp.lda.options.SolverOptions`) multiplies in float32 from this many stored
#: counts: there the products dominate the fit and float32 made the whitening 1.4–1.7× faster on 13–28 M counts
#: (benchmarks/precision.py); below, a fit takes seconds either way and keeps float64's numbers.
AUTO_FLOAT32_NONZEROS = 20_000_000

EDGES = ("m2_whitening", "whitened_tensor", "tensor_apply", "decomposition", "output", "em_sstats")


class Backend(Protocol):
    """Where the shards live. ``call`` returns one result per shard, in shard order.

    ``method`` is a method of the shard class, given as the function itself
    (``Shard.m2_product``), never as a string: a renamed or missing method then
    fails where it is referenced. Each shard runs its own class's method of
    that name, so a subclass's override (:class:`distdp.lda.private.shard.PrivateShard`)
    runs where it exists.
    """

    n_shards: int

    def call(self, method: Callable, *args: Any) -> list: ...

    def call_each(self, method: Callable, args: list) -> list: ...

    def broadcast(self, value: Any) -> Any: ...


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS has one, as on Linux; else all)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                                   # macOS, Windows
        return os.cpu_count() or 1


class LocalBackend:
    """Shards held in this process (tests, tiny data, and the reference for Ray).

    ``cores_per_shard``: the cores a shard may use in threads (this process's, shared by the shards).
    """

    def __init__(self, shards):
        self.shards = list(shards)
        self.n_shards = len(self.shards)
        self.cores_per_shard = max(1, usable_cores() // max(self.n_shards, 1))

    def call(self, method: Callable, *args: Any) -> list:
        """Run ``<shard>.<method>(*args)`` on every shard, in order."""
        return [getattr(s, method.__name__)(*args) for s in self.shards]

    def call_each(self, method: Callable, args: list) -> list:
        """Run ``<shard>.<method>(*args[i])`` on shard i, in order."""
        return [getattr(s, method.__name__)(*a) for s, a in zip(self.shards, args)]

    def broadcast(self, value: Any) -> Any:
        """In-process, a broadcast value is the value itself."""
        return value


class NonPrivate:
    """The identity release: nothing is added at any edge, and nothing is clipped on the shards.

    A release object (``releases``) is what a coordinator loop asks at each
    edge of :data:`EDGES`: ``release(edge, value)`` returns what may leave,
    ``spectral_stages(...)`` the stages :func:`fit_spectral` runs, and
    ``e_step_args(lam, backend)`` the per-document clipping the shards apply
    before their EM statistics are summed (:func:`refine_em`). The private
    fits run the same loops with a noisy release
    (:class:`distdp.lda.private.pipeline.PrivateRelease`,
    :class:`distdp.lda.private.pipeline.NoisyEMRelease`).
    """

    private = False

    def release(self, edge: str, value):
        """Return ``value`` unchanged."""
        return value

    def spectral_stages(self, backend: Backend, vocab_size: int, params: "SpectralParams", rng: np.random.Generator,
                        stages: "Stages") -> "ExactStages":
        """The exact stages of :func:`fit_spectral`, each value passed through :meth:`release`."""
        return ExactStages(self, backend, vocab_size, params, rng, stages)

    def e_step_args(self, lam: np.ndarray, backend) -> tuple:
        """The E-step's ``(norm_cap, scales, relative_tol)``: no clipping; documents converge relative to their
        length (:meth:`distdp.lda.shard.Shard.e_step`)."""
        return None, None, True


@dataclass(frozen=True)
class SpectralParams:
    """Parameters of the spectral fit.

    Attributes
    ----------
    k : int
        Number of topics.
    alpha0 : float
        Dirichlet concentration Σα (LDA); ignored (taken as 0) for ``model='stm'``.
    model : {'lda', 'stm'}
    eigensolver : {'lobpcg', 'lanczos', 'randomized', 'dense'}
        ``lobpcg`` (default) finds the algebraically largest eigenpairs of the
        indefinite M2 (:func:`distdp.lda.whitening.lobpcg_top_eigh`);
        ``lanczos`` too, by ARPACK's one-column products, faster where the
        products are cheap (:func:`distdp.lda.whitening.lanczos_top_eigh`);
        ``randomized`` is subspace iteration, which converges to the
        largest-magnitude ones (:func:`distdp.lda.whitening.randomized_top_eigh`);
        ``dense`` forms the d×d M2 (small vocabularies only).
    eig_iters : int
        Most products with M2 after the first; each is one pass. The solver
        stops earlier once converged (``eig_tol``).
    eig_tol : float or None
        Relative residual ``‖M2 u − θ u‖/θ`` at which the solver stops; None:
        always ``eig_iters`` products.
    oversample : int or None
        Extra columns of the test block (default 10).
    tensor : {'auto', 'explicit', 'implicit'}
        ``explicit`` forms the k×k×k whitened tensor once (O(N k³), one pass);
        ``implicit`` never forms it and runs one distributed ``T(I,u,u)`` pass
        per power iteration (O(N k L) each). ``auto``: explicit for k ≤ 100.
    method : {'robust', 'simultaneous'}
        Tensor power method: the paper's Algorithm 1 with restarts and
        deflation, or orthogonalised simultaneous iteration.
    n_restarts, n_iters : int or None
        Power-method restarts L (robust method; default
        :func:`default_lda_restarts`) and iterations R (default the power
        method's, from Wang & Anandkumar 2016, Thm 4.2).
    precision : {'float64', 'float32'}
        Precision of the shards' sparse products with M2's test blocks
        (:func:`distdp.lda.moments.m2_product_partial`) and of the explicit
        whitened tensor's row blocks (:func:`distdp.lda.moments.tensor_partial`);
        the coordinator's arithmetic is float64 either way. In float32 the
        first pass also folds the U-statistic term into its product (after a
        count of the documents with at least 3 tokens), as every later product
        does: one transposed sparse product instead of two.
    soft_locking : bool
        LOBPCG's soft locking (:func:`distdp.lda.whitening.lobpcg_top_eigh`):
        converged pairs add no columns to the M2 products.
    """

    k: int
    alpha0: float = 1.0
    model: str = "lda"
    eigensolver: str = "lobpcg"
    eig_iters: int = EIG_MAX_ITERS
    eig_tol: float | None = EIG_TOL
    oversample: int | None = None
    tensor: str = "auto"
    method: str = "robust"
    n_restarts: int | None = None
    n_iters: int | None = None
    precision: str = "float64"
    soft_locking: bool = False

    @property
    def moment_alpha0(self) -> float:
        """The α0 that enters the moments (0 for the single-topic model)."""
        return 0.0 if self.model == "stm" else float(self.alpha0)

    def block_columns(self, vocab_size: int) -> int:
        """Columns ``p = min(d, k + oversample)`` of the eigensolvers' blocks (oversample 10 by default)."""
        return min(vocab_size, self.k + (self.oversample if self.oversample is not None else 10))

    def restarts(self) -> int:
        """``n_restarts``, or the LDA default :func:`default_lda_restarts` (robust method)."""
        return self.n_restarts if self.n_restarts is not None else default_lda_restarts(self.k)

    def use_implicit(self) -> bool:
        """Whether the whitened tensor stays implicit."""
        return self.tensor == "implicit" or (self.tensor == "auto" and self.k > 100)

    def validate(self, vocab_size: int) -> None:
        """Reject bad parameters before any pass over the data, naming the parameter."""
        lda.validate_fit_params(self.k, self.alpha0, self.model, vocab_size)
        for name, allowed in (("tensor", ("auto", "explicit", "implicit")), ("method", ("robust", "simultaneous")),
                              ("eigensolver", EIGENSOLVERS), ("precision", PRECISIONS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.eig_iters < 1:
            raise ValueError(f"eig_iters must be ≥ 1, got {self.eig_iters}")
        if self.n_restarts is not None and self.method != "robust":
            raise ValueError("n_restarts (--restarts) applies to the robust method only: the simultaneous method "
                             "on the k×k×k whitened tensor is one orthogonal iteration")
        if self.eig_tol is not None and not self.eig_tol > 0:
            raise ValueError(f"eig_tol must be > 0 (or None), got {self.eig_tol}")


@dataclass
class SpectralResult:
    """Everything the spectral fit produced (before it becomes an :class:`LDAModel`)."""

    topic_word: np.ndarray
    alpha: np.ndarray
    m2_eigenvalues: np.ndarray
    tensor_eigenvalues: np.ndarray
    stats: dict
    timings: dict = field(default_factory=dict)
    whitening: dict = field(default_factory=dict)

    @property
    def n_supported(self) -> int:
        """Topics the spectral stage found (``< k`` where M2 supports fewer, see :func:`fit_spectral`)."""
        return len(self.m2_eigenvalues)


class Stages:
    """Wall time per stage, and an optional progress callback ``progress(stage, done, total)``."""

    def __init__(self, progress: Callable | None):
        self.progress = progress
        self.timings: dict[str, float] = {}

    def step(self, stage: str, done: int = 1, total: int = 1):
        if self.progress is not None:
            self.progress(stage, done, total)

    @contextlib.contextmanager
    def timed(self, stage: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings[stage] = self.timings.get(stage, 0.0) + time.perf_counter() - t0


@dataclass(frozen=True)
class WhitenedBasis:
    """What the whitening stage hands on to the rest of the loop.

    Attributes
    ----------
    eigenvalues : ndarray (m,)
        M2's top eigenvalues, descending (``m ≤ k``: the topics M2 supports).
    W : ndarray (d, m)
        The whitening matrix the shards project their documents with.
    unwhiten : ndarray (d, m)
        What :func:`distdp.lda.recover_parameters` maps the tensor's eigenvectors back with.
    """

    eigenvalues: np.ndarray
    W: np.ndarray
    unwhiten: np.ndarray

    @classmethod
    def of(cls, wh: whitening.Whitening) -> "WhitenedBasis":
        """The basis of a whitening of M2 itself."""
        return cls(wh.eigenvalues, wh.W, wh.unwhiten)


class SpectralStages(Protocol):
    """The stages of one spectral fit, as :func:`fit_spectral` runs them in order.

    Each stage decides what the shards compute and what leaves them (exact
    sums through the identity release, or clipped sums with noise), and keeps
    what later stages need. :class:`ExactStages` is the non-private fit;
    :class:`distdp.lda.private.pipeline.PrivateStages` the private one.
    """

    def first_pass(self) -> None:
        """Pass 1: the counts and first moments (and, where the solver starts there, the first M2 product)."""

    def whiten(self) -> WhitenedBasis:
        """The top eigenpairs of M2 and the whitening derived from them."""

    def tensor(self, basis: WhitenedBasis, W_ref, key: str) -> None:
        """The whitened third moment, formed or prepared for implicit products (``W_ref``: ``basis.W`` as broadcast
        to the shards, ``key``: its :func:`matrix_key`)."""

    def decompose(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        """The tensor's top ``m`` eigenpairs ``(λ, V)``, eigenvalues descending."""

    def output(self, topic_word: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The recovered topics and α as they may leave the fit."""

    def stats(self) -> dict:
        """``SpectralResult.stats``: counts and settings (for a private fit: released or public only)."""

    def solver(self) -> dict:
        """``SpectralResult.whitening``: how the eigenpairs of M2 were found."""


def fit_spectral(backend: Backend, vocab_size: int, params: SpectralParams, rng: np.random.Generator,
                 releases=None, progress: Callable | None = None) -> SpectralResult:
    """Spectral LDA / single-topic fit over the shards of ``backend``: the coordinator loop of every fit.

    The loop is the same for private and non-private fits; ``releases``
    decides, stage by stage, what the shards compute and what leaves them
    (:class:`SpectralStages`). Non-private (:class:`ExactStages`), the passes
    over the data are: one for the counts, ``Σ m1`` and the first ``M2 Ω``;
    up to ``eig_iters`` more for the eigensolver (until converged:
    ``eig_tol``); one for the whitened tensor; and, on the implicit path, one
    per power iteration.

    Parameters
    ----------
    backend : Backend
    vocab_size : int
    params : SpectralParams
    rng : numpy.random.Generator
        Draws the eigensolver's test block and the power method's starts (and, private, the noise).
    releases : object with ``spectral_stages(backend, vocab_size, params, rng, stages)``, optional
        The release seam: default :class:`NonPrivate` (exact sums; its ``release(edge, value)`` is called at
        each edge of :data:`EDGES`); :class:`distdp.lda.private.pipeline.PrivateRelease` for a private fit.
    progress : callable, optional
        ``progress(stage, done, total)`` after each pass / iteration.

    Raises
    ------
    ValueError
        Bad parameters, too few documents, or ``σ_k(M2) ≤ 0``.
    """
    releases = releases or NonPrivate()
    k, d = params.k, vocab_size
    params.validate(d)
    st = Stages(progress)
    fit = releases.spectral_stages(backend, d, params, rng, st)
    with st.timed("pass1_stats"):
        fit.first_pass()
    st.step("pass1_stats")
    with st.timed("whitening"):
        basis = fit.whiten()
    m = len(basis.eigenvalues)        # topics M2 supports: k, or fewer (the rest are filled below)
    with st.timed("whitened_tensor"):
        fit.tensor(basis, backend.broadcast(basis.W), matrix_key(basis.W))
    st.step("whitened_tensor")
    with st.timed("decomposition"):
        lam, V = fit.decompose(m)
    with st.timed("recovery"):
        topic_word, alpha = fit.output(*lda.recover_parameters(lam, V, basis.unwhiten, params.alpha0, params.model))
        if m < k:
            topic_word, alpha = lda.fill_topics(topic_word, alpha, k, rng)
    return SpectralResult(topic_word, alpha, basis.eigenvalues, np.asarray(lam), fit.stats(), st.timings,
                          fit.solver())


class TooFewDocuments(ValueError):
    """The spectral stage cannot run: fewer than ``max(3, k + 1)`` documents have at least 3 tokens.

    The third-moment estimator averages over documents of at least 3 tokens
    (:func:`distdp.lda.moments.doc_weights`), and k topics need k + 1 of
    them. A refined fit starts from the word frequencies instead
    (:func:`frequency_start`).
    """

    def __init__(self, n_used: int, n_total: int, k: int):
        self.n_used, self.n_total, self.k = int(n_used), int(n_total), int(k)
        super().__init__(f"too few documents: {self.n_used} of {self.n_total} have ≥ 3 tokens; "
                         f"need at least max(3, k+1) = {max(3, self.k + 1)}")


#: Gibbs sweeps of a fit that starts from the word frequencies (:func:`frequency_start`) unless the user says
#: otherwise: a start with no topic structure, where the chain needs more sweeps than from spectral topics.
#: Measured on five real corpora cut to 2 tokens a document, k = 10 and 20 (``benchmarks/fallback_quality.py``,
#: docs/topic_quality.md): NPMI at or above tomotopy's at 200 iterations in 4 of 10 rows at 150 sweeps and 9 of 10
#: at 300 (the tenth 0.001 below); 500 gained at most 0.03 more, at 1.4–1.9× the time of 300.
FALLBACK_SWEEPS = 300


def frequency_start(backend: Backend, vocab_size: int, k: int, alpha0: float, rng: np.random.Generator,
                    reason: TooFewDocuments) -> SpectralResult:
    """The start of a refinement where the spectral stage cannot run: ``k`` topics split from the word frequencies.

    The corpus's word frequencies are one topic of weight α0, split ``k − 1``
    times by :func:`distdp.lda.fill_topics` (each child the parent times a
    log-normal perturbation, the parent's weight halved between them): a start
    with no topic structure, which the refinement then separates (from a
    symmetric α, as after a spectral start). The result has no spectral topics
    (``n_topics_spectral`` 0, no eigenvalues) and says why in
    ``stats["spectral_skipped"]``.

    Parameters
    ----------
    backend : Backend
    vocab_size : int
    k : int
    alpha0 : float
    rng : numpy.random.Generator
        Draws the splits' perturbations.
    reason : TooFewDocuments
        Why the spectral stage did not run.
    """
    st = Stages(None)
    with st.timed("frequency_start"):
        freq = sum_partials(backend.call(Shard.term_frequency)).astype(np.float64)
        if not freq.sum() > 0:
            raise ValueError("the corpus has no tokens: every document is empty")
        topic_word, alpha = lda.fill_topics(freq[None, :] / freq.sum(), np.array([float(alpha0)]), k, rng)
    stats = {**_corpus_stats(reason.n_total, reason.n_used, 0, float(freq.sum()), vocab_size, backend.n_shards, None),
             "spectral_skipped": f"{reason}: the topics were split from the word frequencies"}
    return SpectralResult(topic_word, alpha, np.zeros(0), np.zeros(0), stats, st.timings, {})


def _corpus_stats(n_total: int, n_used: int, n_topics: int, n_tokens: float, vocab_size: int, n_shards: int,
                  tensor_path: str | None) -> dict:
    """``SpectralResult.stats`` of a non-private fit: documents (all, used by the spectral stage, too short), the
    topics M2 supports, tokens, words, shards and the tensor's path."""
    return {"n_docs": n_total, "n_docs_used": n_used, "n_docs_short": n_total - n_used, "n_topics_spectral": n_topics,
            "n_tokens": n_tokens, "vocab_size": vocab_size, "n_shards": n_shards, "tensor_path": tensor_path}


class ExactStages:
    """The non-private stages of :func:`fit_spectral`: exact sums, each passed through ``releases.release(edge, …)``.

    Parameters
    ----------
    releases : NonPrivate
        The identity release (or a subclass that records or alters the edges).
    backend, vocab_size, params, rng, stages
        As :func:`fit_spectral` received them (``stages``: its :class:`Stages`).
    """

    def __init__(self, releases, backend: Backend, vocab_size: int, params: SpectralParams,
                 rng: np.random.Generator, stages: Stages):
        self.releases, self.backend, self.d, self.params, self.rng, self.st = (releases, backend, vocab_size,
                                                                               params, rng, stages)
        self.coef = moments.MomentCoefficients(params.moment_alpha0)
        self.p = params.block_columns(vocab_size)
        self.implicit = params.use_implicit()

    def first_pass(self) -> None:
        params, backend, d = self.params, self.backend, self.d
        self.omega0 = self.rng.standard_normal((d, self.p)) if params.eigensolver != "dense" else np.zeros((d, 1))
        q0 = None
        if params.precision == "float32" and params.eigensolver != "dense":
            # N first (a count per shard), so that the first product folds the U-statistic term like the later
            # ones: one transposed sparse product instead of two. float64 keeps the unfolded first pass (and so
            # every small fit's numbers to the bit)
            n_used = sum(backend.call(Shard.used_documents))
            q0 = moments.q_fold_scale(n_used, self.coef) if n_used >= 2 else None
        self.fp = sum_partials(backend.call(Shard.first_pass, backend.broadcast(self.omega0), params.precision, q0))
        self.N = self.fp.n_used
        if self.N < max(3, params.k + 1):
            raise TooFewDocuments(self.N, self.fp.n_total, params.k)

    def _m2_times(self, partial, block):
        return self.releases.release("m2_whitening",
                                     moments.m2_product(partial, self.fp.m1_sum, block, self.N, self.coef))

    def whiten(self) -> WhitenedBasis:
        params, backend = self.params, self.backend
        # partial: M2 may support m < k topics; fit_spectral fills the rest (the private stages decide on k themselves)
        if params.eigensolver != "dense":
            q_scale = moments.q_fold_scale(self.N, self.coef)

            def apply(Q):
                out = self._m2_times(sum_partials(backend.call(Shard.m2_product, backend.broadcast(Q), q_scale,
                                                               params.precision)), Q)
                self.st.step("whitening")
                return out
            solve = {"lobpcg": whitening.lobpcg_top_eigh, "lanczos": whitening.lanczos_top_eigh,
                     "randomized": whitening.randomized_top_eigh}[params.eigensolver]
            first = self._m2_times(self.fp.m2, self.omega0)
            self.fp, self.omega0 = dataclasses.replace(self.fp, m2=None), None  # d×p arrays not needed from here on
            lock = {"soft_locking": params.soft_locking} if params.eigensolver == "lobpcg" else {}
            self.wh = solve(apply, first, params.k, params.eig_iters, params.eig_tol, partial=True, **lock)
        else:
            dense = self._m2_times(sum_partials(backend.call(Shard.m2_dense)), np.eye(self.d))
            self.st.step("whitening")
            self.wh = whitening.dense_top_eigh(dense, params.k, partial=True)
        return WhitenedBasis.of(self.wh)

    def tensor(self, basis: WhitenedBasis, W_ref, key: str) -> None:
        weights = moments.TensorWeights(self.N, self.params.moment_alpha0)
        tp = sum_partials(self.backend.call(Shard.tensor_partial, W_ref, weights, not self.implicit, key,
                                            self.params.precision))
        self.wt = moments.WhitenedTensor(basis.W, tp, self.fp.m1_sum, weights)
        self.W_ref, self.key, self.weights = W_ref, key, weights

    def decompose(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        params = self.params
        if self.implicit:
            target = _ImplicitTensor(self.backend, self.W_ref, self.weights, self.key, self.wt, self.releases, self.st)
        else:
            target = self.releases.release("whitened_tensor", self.wt.dense())
        power = robust_power_method if params.method == "robust" else simultaneous_power_method
        kwargs = {"rng": self.rng}
        if params.n_iters is not None:
            kwargs["n_iters"] = params.n_iters
        if params.method == "robust":
            kwargs["n_restarts"] = params.restarts()
        res = power(target, m, **kwargs)
        return self.releases.release("decomposition", (np.asarray(res.eigenvalues), np.asarray(res.eigenvectors)))

    def output(self, topic_word: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.releases.release("output", (topic_word, alpha))

    def stats(self) -> dict:
        return _corpus_stats(self.fp.n_total, self.N, len(self.wh.eigenvalues), self.fp.n_tokens, self.d,
                             self.backend.n_shards, "implicit" if self.implicit else "explicit")

    def solver(self) -> dict:
        wh = self.wh
        return {"eigensolver": self.params.eigensolver, "m2_products": 1 if wh.products is None else 1 + wh.products,
                "converged": wh.converged}


def matrix_key(W: np.ndarray) -> str:
    """A digest of ``W`` that names it in the shards' projection caches (same W, same key)."""
    return hashlib.blake2b(np.ascontiguousarray(W).tobytes(), digest_size=16).hexdigest()


class _ImplicitTensor:
    """``T(I,u,u)`` for a batch of vectors without forming T: one pass per call.

    The shards return ``(Σ ω_n y_n⊗3)(I,u,u)``; the coordinator adds the
    structured corrections (O(d k L)) and releases the sum once.
    """

    def __init__(self, backend, W_ref, weights, key, wt: moments.WhitenedTensor, releases, stages):
        self.backend, self.W_ref, self.weights, self.key = backend, W_ref, weights, key
        self.wt, self.releases, self.stages = wt, releases, stages
        self.dim = wt.W.shape[1]
        self.calls = 0

    def apply(self, U: np.ndarray) -> np.ndarray:
        """``T(I, u_l, u_l)`` for every column of ``U`` (k×L)."""
        data = sum_partials(self.backend.call(Shard.cube_apply, self.W_ref, self.weights, U, self.key))
        self.calls += 1
        self.stages.step("power_iteration", self.calls, 0)
        return self.releases.release("tensor_apply", data + self.wt.correction_apply(U))


@dataclass
class RefineResult:
    """Variational EM from the spectral start.

    Attributes
    ----------
    variational : ndarray (k, d)
        Final topic Dirichlet parameters λ; topics are its normalised rows.
    elbo : list of float
        Evidence lower bound at iteration t: after its E-step, before its M-step.
    inner_iterations : list of int
        Largest number of E-step iterations any shard needed, per EM iteration.
    seconds : list of float
        Wall time per EM iteration.
    alpha : ndarray (k,) or None
        The Dirichlet α after the last M-step (learned), or None where it was kept fixed.
    converged : bool or None
        Whether the relative ELBO change fell below the stopping tolerance
        before the iteration cap (None: no stopping rule).
    """

    variational: np.ndarray
    elbo: list
    inner_iterations: list
    seconds: list
    alpha: np.ndarray | None = None
    converged: bool | None = None

    @property
    def topic_word(self) -> np.ndarray:
        """Posterior-mean topic-word rows ``λ_k / Σ_w λ_kw``."""
        return self.variational / self.variational.sum(axis=1, keepdims=True)


def check_em_args(n_iter: int, eta: float) -> None:
    """Reject a negative number of EM iterations or a non-positive smoothing η."""
    if n_iter < 0:
        raise ValueError(f"refine (EM iterations) must be ≥ 0, got {n_iter}")
    if not (np.isfinite(eta) and eta > 0):
        raise ValueError(f"eta (topic-word smoothing) must be > 0, got {eta}")


def refine_em(backend: Backend, topic_word: np.ndarray, alpha: np.ndarray, n_tokens: float, n_iter: int,
              eta: float, releases=None, progress: Callable | None = None, max_inner: int = 100,
              tol: float = 1e-3, learn_alpha: bool = False, stop_tol: float | None = None) -> RefineResult:
    """Batch variational EM started from spectral topics (:mod:`distdp.lda.refine`).

    Per iteration: broadcast ``exp E[log β]`` (k×d), every shard runs the
    E-step on its documents (warm-started from its previous γ; each
    document's statistic clipped as ``releases.e_step_args`` says) and
    returns its k×d statistics, its part of the bound and ``Σ_n E[log θ_n]``;
    the coordinator sums them, releases the sum once
    (``releases.release("em_sstats", ·)``), and sets ``λ = η + Ê_β ∘ Σ``.
    A private release (``releases.private``) keeps the bound and the inner
    iteration counts on the shards: ``elbo`` and ``inner_iterations`` stay
    empty. Traffic per iteration is O(k·d) per shard, whatever the number of
    documents; shard work is O(nnz·k) per inner iteration. A
    document's E-step stops at ``tol`` relative to its length
    (:func:`distdp.lda.refine.e_step`'s ``relative_tol``).

    Parameters
    ----------
    alpha : ndarray (k,)
        The E-step's Dirichlet α, and the start of its updates.
    learn_alpha : bool
        Update α after each E-step by :func:`distdp.lda.refine.update_alpha`
        (Minka's Newton fixed point; it never lowers the ELBO).
    stop_tol : float, optional
        Stop once the ELBO's relative change between two iterations is below
        this (at most ``n_iter`` iterations either way).
    """
    check_em_args(n_iter, eta)
    releases = releases or NonPrivate()
    if releases.private and (learn_alpha or stop_tol is not None):
        raise ValueError("a private EM release fixes α and the number of iterations (learn_alpha and stop_tol "
                         "read unreleased statistics)")
    alpha = np.asarray(alpha, dtype=np.float64)
    lam = refine.init_lambda(topic_word, alpha, n_tokens, eta)
    key = time.time_ns()  # names this EM run in the shards' γ caches
    elbo, inner, secs, converged = [], [], [], (None if stop_tol is None else False)
    for t in range(n_iter):
        t0 = time.perf_counter()
        elog = refine.dirichlet_expectation(lam)
        eeb = np.exp(elog)
        parts = backend.call(Shard.e_step, backend.broadcast(eeb), backend.broadcast(elog), alpha, key, max_inner, tol,
                             *releases.e_step_args(lam, backend))
        sstats = eeb * sum_partials([p[0] for p in parts])
        if not releases.private:
            elbo.append(float(sum(p[1] for p in parts) + refine.topic_bound(lam, eta)))
            inner.append(int(max(p[3] for p in parts)))
        lam = eta + releases.release("em_sstats", sstats)
        if learn_alpha:
            alpha = refine.update_alpha(alpha, sum_partials([p[4] for p in parts]), sum(p[2] for p in parts))
        secs.append(time.perf_counter() - t0)
        if progress is not None:
            progress("refine", t + 1, n_iter)
        if stop_tol is not None and t > 0 and abs(elbo[-1] - elbo[-2]) <= stop_tol * abs(elbo[-2]):
            converged = True
            break
    return RefineResult(lam, elbo, inner, secs, alpha if learn_alpha else None, converged)


#: Collapsed Gibbs sweeps of the default refinement, the sweeps between two α updates, and the topic-word
#: prior η of the sampler (MALLET's and tomotopy's 0.01). Chosen on the eight real corpora of
#: ``benchmarks/topic_quality.py`` (docs/topic_quality.md).
DEFAULT_SWEEPS, ALPHA_EVERY, GIBBS_ETA = 150, 10, 0.01


@dataclass
class GibbsResult:
    """Collapsed Gibbs sampling from the spectral start (:mod:`distdp.lda.gibbs`).

    Attributes
    ----------
    counts : ndarray (d, k)
        Topic-word counts ``n_wk`` of the last sweep.
    eta : float
        The topic-word prior.
    alpha : ndarray (k,)
        The Dirichlet α after the last update (the start where α was kept fixed).
    log_likelihood : list of (int, float)
        ``(sweep, log p(w | z))`` every :data:`ALPHA_EVERY` sweeps and at the end (the chain's trace).
    seconds : list of float
        Wall time per sweep (the first: drawing the start).
    restarts : int
        Shards that lost their chain (actor restarts) and were seeded again.
    """

    counts: np.ndarray
    eta: float
    alpha: np.ndarray
    log_likelihood: list
    seconds: list
    restarts: int = 0

    @property
    def variational(self) -> np.ndarray:
        """The posterior Dirichlet parameters of the topics given the last sample, ``n_kw + η`` (k×d)."""
        return self.counts.T + self.eta

    @property
    def topic_word(self) -> np.ndarray:
        """Posterior-mean topics ``(n_kw + η)/(n_k + dη)``."""
        return gibbs.topics_from_counts(self.counts, self.eta)


def refine_gibbs(backend: Backend, topic_word: np.ndarray, alpha: np.ndarray, n_sweeps: int, eta: float,
                 rng: np.random.Generator, progress: Callable | None = None,
                 alpha_every: int | None = ALPHA_EVERY) -> GibbsResult:
    """Collapsed Gibbs sampling started from spectral topics, distributed as AD-LDA (:mod:`distdp.lda.gibbs`).

    Every token's first topic is drawn from ``topic_word``; then per sweep
    the coordinator broadcasts the topic-word counts (d×k), every shard
    sweeps its tokens against them and returns its own counts, and the
    coordinator sums them in shard order. Traffic is O(d·k) per shard per
    sweep (int32 counts: 4·d·k bytes each way); shard work O(tokens·k), or
    O(tokens × their words' topics) where the sweep is sparse
    (:data:`distdp.lda.gibbs.SPARSE_K`, :data:`~distdp.lda.gibbs.SPARSE_SHARE`).
    Every ``alpha_every`` sweeps the shards also return their histograms of
    the documents' topic counts and α takes Minka's fixed point on them
    (:func:`distdp.lda.gibbs.update_alpha`).

    Parameters
    ----------
    topic_word : ndarray (k, d)
        The spectral topics (rows summing to 1).
    alpha : ndarray (k,)
        The start of α.
    n_sweeps : int
        Sweeps after the start (≥ 1).
    eta : float
        Topic-word prior.
    rng : numpy.random.Generator
        Seeds the shards' streams.
    alpha_every : int or None
        Sweeps between two α updates; None: α stays fixed (the trace is
        still recorded every :data:`ALPHA_EVERY` sweeps).
    """
    check_em_args(n_sweeps, eta)
    learn = alpha_every is not None
    alpha_every = alpha_every or ALPHA_EVERY
    entropy = int(rng.integers(2 ** 63))
    seeds = [np.random.SeedSequence(entropy, spawn_key=(i,)) for i in range(backend.n_shards)]
    threads = getattr(backend, "cores_per_shard", 1)
    alpha = np.asarray(alpha, dtype=np.float64)
    key = time.time_ns()
    t0 = time.perf_counter()
    # floored: a word no spectral topic gives weight still draws a topic ∝ n_dk + α_k
    phi = backend.broadcast(np.ascontiguousarray(np.maximum(topic_word, 1e-12).T))
    nwk = gibbs.add_counts(backend.call_each(Shard.gibbs_start, [(key, phi, alpha, s, threads) for s in seeds]))
    secs, trace, restarts = [time.perf_counter() - t0], [], 0
    for t in range(1, n_sweeps + 1):
        t0 = time.perf_counter()
        hist = t % alpha_every == 0 or t == n_sweeps
        sweep_seeds = [np.random.SeedSequence(entropy, spawn_key=(i, t)) for i in range(backend.n_shards)]
        ref = backend.broadcast(gibbs.compact_counts(nwk))
        parts = backend.call_each(Shard.gibbs_sweep, [(key, ref, alpha, eta, s, threads, hist) for s in sweep_seeds])
        nwk = gibbs.add_counts([p[0] for p in parts])
        restarts += sum(bool(p[2]) for p in parts)
        if hist:
            H, L = gibbs.sum_histograms([p[1] for p in parts])
            if learn and t % alpha_every == 0:
                alpha = gibbs.update_alpha(alpha, H, L)
            trace.append((t, gibbs.word_log_likelihood(nwk, eta)))
        secs.append(time.perf_counter() - t0)
        if progress is not None:
            progress("refine", t, n_sweeps)
    return GibbsResult(nwk, float(eta), alpha, trace, secs, restarts)
