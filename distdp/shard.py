"""One shard of a corpus and the partial sums it contributes to each pass.

Pure: a :class:`Shard` wraps a CSR count matrix and exposes the narrow methods
the coordinator calls, each returning small arrays (d×p, k×k×k, k×L). The same
object runs in-process (tests, tiny data) and inside a Ray actor
(:mod:`distdp.distributed`), so both paths compute identical numbers.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from distdp import moments, refine
from distdp.privacy import lda_private


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
    (:func:`distdp.moments.doc_weights`): they are counted and drop out of every
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
        self._norms = None
        self._clip3 = None
        self._view = None

    @property
    def vocab_size(self) -> int:
        """Number of columns ``d``."""
        return int(self.counts.shape[1])

    def row_count(self) -> int:
        """Number of documents (rows) of the shard: public under replace-one neighbours."""
        return self.n_total

    def first_pass(self, omega: np.ndarray) -> FirstPass:
        """Counts, ``Σ m1_n`` and the partial ``M2 Ω0`` in one pass."""
        lengths = moments.doc_lengths(self.counts)
        eligible = lengths >= moments.MIN_DOC_LENGTH
        m1_sum = np.asarray(self.counts.T @ moments.doc_weights(lengths)[0]).ravel()
        return FirstPass(self.n_total, int(eligible.sum()), float(lengths[eligible].sum()), m1_sum,
                         moments.m2_product_partial(self.counts, omega))

    def m2_product(self, omega: np.ndarray, q_scale: float | None = None) -> moments.M2ProductPartial:
        """Partial sums of ``M2 Ω`` (:func:`distdp.moments.m2_product_partial`)."""
        return moments.m2_product_partial(self.counts, omega, q_scale)

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
                       key=None) -> moments.TensorPartial:
        """Partial sums of the whitened tensor (:func:`distdp.moments.tensor_partial`)."""
        Y = self._project(W, key)
        return moments.tensor_partial(self.counts, W, weights, with_cube=with_cube, Y=Y)

    def cube_apply(self, W: np.ndarray, weights: moments.TensorWeights, U: np.ndarray,
                   key=None) -> np.ndarray:
        """This shard's ``(Σ ω_n y_n⊗3)(I,u,u)`` for the columns of ``U`` (k×L): O(n k L)."""
        Y = self._project(W, key)
        return moments.cube_apply_partial(self.counts, Y, weights, U)

    # ------------------------------------------------------------------ private spectral fit
    # Unnormalised sums of clipped per-document statistics
    # (:mod:`distdp.privacy.lda_private`); the coordinator adds the noise.
    def _doc_norms(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._norms is None:
            self._norms = lda_private.doc_norms(self.counts)
        return self._norms

    def private_counts(self, length_cap: int, m1_edges: np.ndarray, m2_edges: np.ndarray,
                       dense: bool = False) -> np.ndarray:
        """``[n_used, Σ min(l_n, L)/L, hist ‖m1_n‖, hist ‖m2_n‖]`` over documents with ≥ 3 tokens.

        ``‖m2_n‖`` is the unique-entry norm with ``dense`` (the dense whitening clips by it), else Frobenius.
        """
        lengths = moments.doc_lengths(self.counts)
        ok = lengths >= moments.MIN_DOC_LENGTH
        n1, n2f, n2u = self._doc_norms()
        n2 = n2u if dense else n2f
        head = [float(ok.sum()), float(np.minimum(lengths, length_cap).sum()) / length_cap]
        return np.concatenate([head, lda_private.histogram(n1[ok], m1_edges),
                               lda_private.histogram(n2[ok], m2_edges)])

    def private_scan(self, norm_edges: np.ndarray) -> np.ndarray:
        """``[Σ_n x_n/l_n (d), hist ‖x_n‖₂]`` over documents with ≥ 1 token (the ``scan`` release)."""
        lengths = moments.doc_lengths(self.counts)
        ok = lengths >= 1
        freq = np.asarray(self.counts.T @ np.where(ok, 1.0 / np.maximum(lengths, 1.0), 0.0)).ravel()
        return np.concatenate([freq, lda_private.histogram(lda_private.count_norms(self.counts)[ok], norm_edges)])

    def on_columns(self, columns: np.ndarray, key, method: str, *args):
        """``Shard.<method>(*args)`` on the documents restricted to ``columns`` (a working vocabulary).

        The restricted shard is built once per ``key`` and rebuilt after an
        actor restart, so the caller needs no state on the shard.
        """
        return getattr(self._columns_view(columns, key), method)(*args)

    def _columns_view(self, columns: np.ndarray, key) -> "Shard":
        if self._view is None or self._view[0] != key:
            self._view = (key, Shard(self.counts[:, columns]))
        return self._view[1]

    def private_m1(self, clip1: float) -> np.ndarray:
        """``Σ_n f_n m1_n`` (d,), ``f_n = min(1, C1/‖m1_n‖)``."""
        w1 = moments.doc_weights(moments.doc_lengths(self.counts))[0]
        return np.asarray(self.counts.T @ (w1 * lda_private.clip_factors(self._doc_norms()[0], clip1))).ravel()

    def private_m2_product(self, omega: np.ndarray, clip2: float, unique_norm: bool = False) -> np.ndarray:
        """``(Σ_n g_n m2_n) Ω`` (d×p), ``g_n = min(1, C2/‖m2_n‖_F)``.

        ``unique_norm``: clip by the unique-entry norm ``‖m2_n‖_u`` instead, so that the
        sum is :meth:`private_m2_dense`'s (the matrix-free form of that release).
        """
        g = lda_private.clip_factors(self._doc_norms()[2 if unique_norm else 1], clip2)
        return moments.m2_product_partial(self.counts, omega, doc_scale=g).e2

    def private_m2_dense(self, clip2: float) -> np.ndarray:
        """``Σ_n g_n m2_n`` (d×d), ``g_n = min(1, C2/‖m2_n‖_u)`` (the unique-entry norm)."""
        return moments.m2_dense_sum(self.counts, lda_private.clip_factors(self._doc_norms()[2], clip2))

    def private_tensor_bounds(self, W: np.ndarray, edges: np.ndarray, key=None) -> np.ndarray:
        """Histogram of the bounds ``B_n`` on ``‖m3_n(W,W,W)‖_F`` over documents with ≥ 3 tokens."""
        B = lda_private.tensor_norm_bound(self.counts, W, self._project(W, key))
        ok = moments.doc_lengths(self.counts) >= moments.MIN_DOC_LENGTH
        return lda_private.histogram(B[ok], edges)

    def _clipped_tensor(self, W: np.ndarray, clip3: float, key, with_cube: bool) -> moments.WhitenedTensor:
        ident = (key, clip3, with_cube)
        if key is None or self._clip3 is None or self._clip3[0] != ident:
            Y = self._project(W, key)
            h = lda_private.clip_factors(lda_private.tensor_norm_bound(self.counts, W, Y), clip3)
            weights = lda_private.ClippedRawWeights(h)
            tp = moments.tensor_partial(self.counts, W, weights, with_cube=with_cube, Y=Y)
            wt = moments.WhitenedTensor(W, tp, np.zeros(self.vocab_size), moments.TensorWeights(3, 0.0))
            self._clip3 = (ident, weights, wt)
        return self._clip3[1], self._clip3[2]

    def private_tensor(self, W: np.ndarray, clip3: float, key=None) -> np.ndarray:
        """``Σ_n h_n m3_n(W,W,W)`` (k,k,k), ``h_n = min(1, C3/B_n)``."""
        return self._clipped_tensor(W, clip3, key, True)[1].dense()

    def private_cube_apply(self, W: np.ndarray, clip3: float, U: np.ndarray, key=None) -> np.ndarray:
        """``(Σ_n h_n m3_n(W,W,W))(I,u,u)`` for every column of ``U`` (k×L): O(n k L)."""
        weights, wt = self._clipped_tensor(W, clip3, key, False)
        Y = self._project(W, key)
        w1, w2, w3 = moments.doc_weights(moments.doc_lengths(self.counts))
        return moments.cube_apply(Y, weights.omega(w1, w2, w3), U) + wt.correction_apply(U)

    def dense_moments(self):
        """Dense moment sums of the papers' small-vocabulary mechanisms (:mod:`distdp.privacy.lda_dense`)."""
        from distdp.privacy import lda_dense

        return lda_dense.dense_moment_partial(self.counts)

    # ------------------------------------------------------------------ variational EM
    def e_step(self, exp_elog_beta: np.ndarray, elog_beta: np.ndarray, alpha: np.ndarray, key=None,
               max_iter: int = 100, tol: float = 1e-3, norm_cap: float | None = None,
               scales: np.ndarray | None = None, relative_tol: bool = False) -> tuple:
        """E-step on every document: ``(sstats k×d, doc_bound, n_docs, inner iterations, Σ_n E[log θ_n])``.

        γ is kept between calls with the same ``key`` (warm start of the next
        EM iteration); after a restart it is re-initialised. With
        ``norm_cap = C`` (private EM) each document's statistic ``x ∘ φ`` is
        scaled by ``C/‖x ∘ φ‖_F``, so it has Frobenius norm C
        (:func:`distdp.privacy.lda_private.em_sensitivity`); its posterior
        comes from the unscaled counts. ``scales``: the norm is that of
        ``(x ∘ φ) ∘ S`` (private EM's word scales). Private EM does not use the
        evidence bound (it is not released), so it is not computed then (NaN).
        ``relative_tol``: :func:`distdp.refine.e_step`'s document convergence test.
        """
        warm = self._gamma if (key is not None and key == self._gamma_key) else None
        res = refine.e_step(self.counts, exp_elog_beta, alpha, warm, max_iter, tol, True, elog_beta,
                            contribution_cap=None if norm_cap is None else float(norm_cap),
                            contribution_scales=scales, with_bound=norm_cap is None, relative_tol=relative_tol)
        self._gamma, self._gamma_key = res.gamma, key
        return res.sstats, res.doc_bound, self.n_total, res.iterations, res.elog_theta_sum

    def tail_statistics(self, columns: np.ndarray, key, topic_word: np.ndarray, alpha: np.ndarray,
                        norm_cap: float, max_iter: int = 100, tol: float = 1e-3, single_topic: bool = False,
                        scales: np.ndarray | None = None) -> tuple:
        """The ``tail`` release's partial sums ``(Q, G)`` (:func:`distdp.privacy.lda_private.tail_statistics`).

        Each document's topic mixture is the E-step's posterior mean on its
        ``columns`` words (the restricted shard of :meth:`on_columns` with the
        same ``key``) under the (already released) ``topic_word`` over them;
        with ``single_topic``, the one-hot of its single-topic posterior mode
        there (``alpha`` the topic weights). ``scales``: the release's word
        scales (k×d), or None for none.
        """
        sub = self._columns_view(columns, key).counts
        return lda_private.tail_statistics(self.counts, self._mixtures(sub, topic_word, alpha, max_iter, tol,
                                                                       single_topic), norm_cap, scales)

    @staticmethod
    def _mixtures(counts, topic_word, alpha, max_iter, tol, single_topic: bool) -> np.ndarray:
        """``θ̂_n`` of an unmixing release: the E-step's posterior means, or one-hot single-topic posterior modes."""
        if single_topic:
            return lda_private.single_topic_posterior(counts, topic_word, alpha)
        res = refine.e_step(counts, np.maximum(topic_word, 1e-12), alpha, None, max_iter, tol, False, with_bound=False)
        return refine.theta_from_gamma(res.gamma)

    def unmix_statistics(self, topic_word: np.ndarray, alpha: np.ndarray, norm_cap: float, max_iter: int = 100,
                         tol: float = 1e-3, scales: np.ndarray | None = None, single_topic: bool = False,
                         sharpen: float = lda_private.UNMIX_SHARPEN) -> tuple:
        """An ``unmix`` pass's partial sums ``(Q, G)`` (:func:`distdp.privacy.lda_private.unmix_pass_statistics`).

        Each document's topic mixture is the E-step's posterior mean on all
        its words under the (already released) ``topic_word``, floored at
        1e-12 so that no word rules a topic out; with ``single_topic``, the
        one-hot of its single-topic posterior mode (``alpha`` the topic
        weights). ``scales``: the pass's word scales
        (:func:`distdp.privacy.lda_private.word_scales`); ``sharpen``: the
        power of its document weights (``np.inf``: one-hot).
        """
        theta = self._mixtures(self.counts, topic_word, alpha, max_iter, tol, single_topic)
        return lda_private.unmix_pass_statistics(self.counts, theta, norm_cap, scales, sharpen)

    def transform(self, exp_elog_beta: np.ndarray, alpha: np.ndarray, max_iter: int = 100,
                  tol: float = 1e-3) -> tuple:
        """Topic mixtures of every document: ``(θ n×k float32, in-vocabulary tokens per document, doc ids)``."""
        res = refine.e_step(self.counts, exp_elog_beta, alpha, None, max_iter, tol, False, with_bound=False)
        return (refine.theta_from_gamma(res.gamma).astype(np.float32),
                moments.doc_lengths(self.counts), self.doc_ids)

    def cooccurrence(self, words: np.ndarray) -> refine.CooccurrencePartial:
        """Document frequencies of ``words`` and of their pairs."""
        return refine.cooccurrence(self.counts, words)

    def term_frequency(self) -> np.ndarray:
        """Total count of every word (d,)."""
        return np.asarray(self.counts.sum(axis=0)).ravel()
