"""One shard of a corpus and the partial sums it contributes to each pass.

Pure: a :class:`Shard` wraps a CSR count matrix and exposes the narrow methods
the coordinator calls, each returning small arrays (d×p, k×k×k, k×L). The same
object runs in-process (tests, tiny data) and inside a Ray actor
(:mod:`distdp.distributed`), so both paths compute identical numbers. The
private fit's clipped sums are those of the subclass
:class:`distdp.lda.private.shard.PrivateShard`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from distdp.lda import gibbs, moments, refine


@dataclass
class FirstPass:
    """Pass-1 statistics of a shard; merge by adding.

    Attributes
    ----------
    n_total : int
        Documents read (all lengths).
    n_used : int
        Documents with at least three tokens (those that feed the moments).
    n_tokens : float
        Tokens in the used documents.
    m1_sum : ndarray (d,)
        ``Σ_n m1_n`` over used documents.
    m2 : M2ProductPartial
        Partial sums of ``M2 Ω0`` for the coordinator's first test block.
    """

    n_total: int
    n_used: int
    n_tokens: float
    m1_sum: np.ndarray
    m2: moments.M2ProductPartial

    def __add__(self, other: "FirstPass") -> "FirstPass":
        return FirstPass(self.n_total + other.n_total, self.n_used + other.n_used,
                         self.n_tokens + other.n_tokens, self.m1_sum + other.m1_sum,
                         self.m2 + other.m2)


class Shard:
    """A shard's documents (CSR, rows = documents) and its partial sums.

    Documents shorter than three tokens have zero moment weights
    (:func:`distdp.lda.moments.doc_weights`): they are counted and drop out of every
    moment, which keeps one set of documents for all of them and the
    U-statistics exact. Variational EM, ``transform`` and coherence use every
    document.

    Parameters
    ----------
    counts : scipy.sparse.csr_matrix (n, d)
        Word counts, one row per document.
    doc_ids : array of str, optional
        Identifiers of the rows (kept for ``transform``).
    """

    def __init__(self, counts: sp.csr_matrix, doc_ids=None):
        self.counts = sp.csr_matrix(counts, dtype=np.float64)
        self.n_total = int(self.counts.shape[0])
        self.doc_ids = doc_ids
        self._proj_key = None
        self._Y = None
        self._gamma_key = None
        self._gamma = None
        self._view = None
        self._chain = None

    @property
    def nnz(self) -> int:
        """Stored (document, word) counts."""
        return int(self.counts.nnz)

    @property
    def vocab_size(self) -> int:
        """Number of columns ``d``."""
        return int(self.counts.shape[1])

    def row_count(self) -> int:
        """Number of documents (rows) of the shard: public under replace-one neighbours."""
        return self.n_total

    def used_documents(self) -> int:
        """Documents with at least :data:`~distdp.lda.moments.MIN_DOC_LENGTH` tokens (those the moments use)."""
        return moments.used_documents(self.counts)

    def first_pass(self, omega: np.ndarray, precision: str = "float64", q_scale: float | None = None) -> FirstPass:
        """Counts, ``Σ m1_n`` and the partial ``M2 Ω0`` (its products in ``precision``; ``q_scale`` folds the
        U-statistic term as in :meth:`m2_product`) in one pass."""
        lengths = moments.doc_lengths(self.counts)
        eligible = lengths >= moments.MIN_DOC_LENGTH
        m1_sum = np.asarray(self.counts.T @ moments.doc_weights(lengths)[0]).ravel()
        return FirstPass(self.n_total, int(eligible.sum()), float(lengths[eligible].sum()), m1_sum,
                         moments.m2_product_partial(self.counts, omega, q_scale, dtype=np.dtype(precision)))

    def m2_product(self, omega: np.ndarray, q_scale: float | None = None,
                   precision: str = "float64") -> moments.M2ProductPartial:
        """Partial sums of ``M2 Ω``, the products in ``precision`` (:func:`distdp.lda.moments.m2_product_partial`)."""
        return moments.m2_product_partial(self.counts, omega, q_scale, dtype=np.dtype(precision))

    def m2_dense(self) -> moments.M2ProductPartial:
        """Dense d×d partial sums of M2 (small vocabularies only)."""
        return moments.m2_dense_partial(self.counts)

    def _project(self, W: np.ndarray, key) -> np.ndarray:
        """``Y = C W``, cached under ``key`` (recomputed after an actor restart)."""
        if key is None or key != self._proj_key:
            self._Y = np.asarray(self.counts @ W)
            self._proj_key = key
        return self._Y

    def tensor_partial(self, W: np.ndarray, weights: moments.TensorWeights, with_cube: bool = True,
                       key=None, precision: str = "float64") -> moments.TensorPartial:
        """Partial sums of the whitened tensor (:func:`distdp.lda.moments.tensor_partial`).

        The explicit path (``with_cube``) computes ``Y = C W`` in row blocks, its products in
        ``precision``; the implicit path keeps ``Y`` (n×k, float64) for its per-iteration
        :meth:`cube_apply` passes.
        """
        Y = None if with_cube else self._project(W, key)
        return moments.tensor_partial(self.counts, W, weights, with_cube=with_cube, Y=Y, dtype=np.dtype(precision))

    def cube_apply(self, W: np.ndarray, weights: moments.TensorWeights, U: np.ndarray,
                   key=None) -> np.ndarray:
        """This shard's ``(Σ ω_n y_n⊗3)(I,u,u)`` for the columns of ``U`` (k×L): O(n k L)."""
        Y = self._project(W, key)
        return moments.cube_apply_partial(self.counts, Y, weights, U)

    def on_columns(self, columns: np.ndarray, key, method, *args):
        """``<shard>.<method>(*args)`` on the documents restricted to ``columns`` (a working vocabulary);
        ``method`` is a method of the shard class (``Shard.m2_product``), run by name on the restricted shard.

        The restricted shard is built once per ``key`` and rebuilt after an
        actor restart, so the caller needs no state on the shard.
        """
        return getattr(self._columns_view(columns, key), method.__name__)(*args)

    def _columns_view(self, columns: np.ndarray, key) -> "Shard":
        if self._view is None or self._view[0] != key:
            self._view = (key, type(self)(self.counts[:, columns]))
        return self._view[1]

    # ------------------------------------------------------------------ variational EM
    def e_step(self, exp_elog_beta: np.ndarray, elog_beta: np.ndarray, alpha: np.ndarray, key=None,
               max_iter: int = 100, tol: float = 1e-3, norm_cap: float | None = None,
               scales: np.ndarray | None = None, relative_tol: bool = False) -> tuple:
        """E-step on every document: ``(sstats k×d, doc_bound, n_docs, inner iterations, Σ_n E[log θ_n])``.

        γ is kept between calls with the same ``key`` (warm start of the next
        EM iteration); after a restart it is re-initialised. With
        ``norm_cap = C`` (private EM) each document's statistic ``x ∘ φ`` is
        scaled by ``C/‖x ∘ φ‖_F``, so it has Frobenius norm C
        (:func:`distdp.lda.private.scalable.em_sensitivity`); its posterior
        comes from the unscaled counts. ``scales``: the norm is that of
        ``(x ∘ φ) ∘ S`` (private EM's word scales). Private EM does not use the
        evidence bound (it is not released), so it is not computed then (NaN).
        ``relative_tol``: :func:`distdp.lda.refine.e_step`'s document convergence test.
        """
        warm = self._gamma if (key is not None and key == self._gamma_key) else None
        res = refine.e_step(self.counts, exp_elog_beta, alpha, warm, max_iter, tol, True, elog_beta,
                            contribution_cap=None if norm_cap is None else float(norm_cap),
                            contribution_scales=scales, with_bound=norm_cap is None, relative_tol=relative_tol)
        self._gamma, self._gamma_key = res.gamma, key
        return res.sstats, res.doc_bound, self.n_total, res.iterations, res.elog_theta_sum

    def transform(self, exp_elog_beta: np.ndarray, alpha: np.ndarray, max_iter: int = 100,
                  tol: float = 1e-3) -> tuple:
        """Topic mixtures of every document: ``(θ n×k float32, in-vocabulary tokens per document, doc ids)``."""
        res = refine.e_step(self.counts, exp_elog_beta, alpha, None, max_iter, tol, False, with_bound=False)
        return (refine.theta_from_gamma(res.gamma).astype(np.float32),
                moments.doc_lengths(self.counts), self.doc_ids)

    # ------------------------------------------------------------------ collapsed Gibbs sampling
    def integral_counts(self) -> bool:
        """Whether every count is a whole number (:func:`distdp.lda.gibbs.integral_counts`)."""
        return gibbs.integral_counts(self.counts)

    def gibbs_start(self, key, phi_wk: np.ndarray, alpha: np.ndarray, seed: np.random.SeedSequence,
                    threads: int = 1) -> np.ndarray:
        """Draw every token's first topic from ``phi_wk`` (d×k); return this shard's topic-word counts (d×k,
        int32 where they fit: :func:`distdp.lda.gibbs.compact_counts`)."""
        self._chain = (key, gibbs.ShardChain(self.counts, phi_wk, alpha, seed, threads))
        return gibbs.compact_counts(self._chain[1].nwk)

    def gibbs_sweep(self, key, nwk: np.ndarray, alpha: np.ndarray, eta: float, seed: np.random.SeedSequence,
                    threads: int = 1, histograms: bool = False) -> tuple:
        """One sweep against the global counts: ``(this shard's counts d×k, histograms or None, restarted)``.

        After an actor restart (no chain under ``key``) the shard draws its
        tokens' topics again from the current topics ``(n_wk + η)/(n_k + dη)``
        and returns those counts without sweeping (``restarted`` True), so the
        coordinator's next sum is consistent again.
        """
        if self._chain is None or self._chain[0] != key:
            chain = gibbs.ShardChain(self.counts, gibbs.topics_from_counts(nwk, eta).T, alpha, seed, threads)
            self._chain = (key, chain)
            return gibbs.compact_counts(chain.nwk), chain.count_histograms() if histograms else None, True
        chain = self._chain[1]
        counts = chain.sweep(nwk, alpha, eta)
        return gibbs.compact_counts(counts), chain.count_histograms() if histograms else None, False

    def cooccurrence(self, words: np.ndarray) -> refine.CooccurrencePartial:
        """Document frequencies of ``words`` and of their pairs."""
        return refine.cooccurrence(self.counts, words)

    def term_frequency(self) -> np.ndarray:
        """Total count of every word (d,)."""
        return np.asarray(self.counts.sum(axis=0)).ravel()
