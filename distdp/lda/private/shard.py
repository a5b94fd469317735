"""One shard's clipped per-document sums for the private fit (pure numpy/scipy).

:class:`PrivateShard` adds to :class:`distdp.lda.shard.Shard` the unnormalised
sums of clipped per-document statistics that the private coordinator
(:mod:`distdp.lda.private.pipeline`) releases; their clipping and
sensitivities are stated in :mod:`distdp.lda.private.scalable` (and
:mod:`distdp.lda.private.dense` for the small-vocabulary mechanisms). No
noise is added here: the coordinator adds it once per release.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from distdp.lda import moments, refine
from distdp.lda.private import dense, scalable
from distdp.lda.shard import Shard


class PrivateShard(Shard):
    """A :class:`~distdp.lda.shard.Shard` that also serves the private fit's clipped sums.

    Parameters
    ----------
    counts : scipy.sparse.csr_matrix (n, d)
        Word counts, one row per document.
    doc_ids : array of str, optional
        Identifiers of the rows.
    """

    def __init__(self, counts: sp.csr_matrix, doc_ids=None):
        super().__init__(counts, doc_ids)
        self._norms = None
        self._clip3 = None

    def _doc_norms(self, scales: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:func:`~distdp.lda.private.scalable.doc_norms`, kept for the last ``scales`` (one fit's)."""
        key = None if scales is None else scales.tobytes()
        if self._norms is None or self._norms[0] != key:
            self._norms = (key, scalable.doc_norms(self.counts, scales))
        return self._norms[1]

    def private_counts(self, length_cap: int, m1_edges: np.ndarray, m2_edges: np.ndarray,
                       dense: bool = False, scales: np.ndarray | None = None) -> np.ndarray:
        """``[n_used, Σ min(l_n, L)/L, hist ‖m1_n‖, hist ‖m2_n‖]`` over documents with ≥ 3 tokens.

        ``‖m2_n‖`` is the unique-entry norm with ``dense`` (the dense whitening clips by it), else Frobenius;
        that of ``S m2_n S`` with word ``scales`` (``S = diag(scales)``).
        """
        lengths = moments.doc_lengths(self.counts)
        ok = lengths >= moments.MIN_DOC_LENGTH
        n1, n2f, n2u = self._doc_norms(scales)
        n2 = n2u if dense else n2f
        head = [float(ok.sum()), float(np.minimum(lengths, length_cap).sum()) / length_cap]
        return np.concatenate([head, scalable.histogram(n1[ok], m1_edges),
                               scalable.histogram(n2[ok], m2_edges)])

    def private_scan(self, norm_edges: np.ndarray) -> np.ndarray:
        """``[Σ_n x_n/l_n (d), hist ‖x_n‖₂]`` over documents with ≥ 1 token (the ``scan`` release)."""
        lengths = moments.doc_lengths(self.counts)
        ok = lengths >= 1
        freq = np.asarray(self.counts.T @ np.where(ok, 1.0 / np.maximum(lengths, 1.0), 0.0)).ravel()
        return np.concatenate([freq, scalable.histogram(scalable.count_norms(self.counts)[ok], norm_edges)])

    def private_m1(self, clip1: float) -> np.ndarray:
        """``Σ_n f_n m1_n`` (d,), ``f_n = min(1, C1/‖m1_n‖)``."""
        w1 = moments.doc_weights(moments.doc_lengths(self.counts))[0]
        n1 = (self._norms[1] if self._norms is not None else self._doc_norms())[0]    # ‖m1_n‖: never scaled
        return np.asarray(self.counts.T @ (w1 * scalable.clip_factors(n1, clip1))).ravel()

    def private_m2_product(self, omega: np.ndarray, clip2: float, unique_norm: bool = False,
                           scales: np.ndarray | None = None) -> np.ndarray:
        """``(Σ_n g_n m2_n) Ω`` (d×p), ``g_n = min(1, C2/‖m2_n‖_F)``.

        ``unique_norm``: clip by the unique-entry norm ``‖m2_n‖_u`` instead, so that the
        sum is :meth:`private_m2_dense`'s (the matrix-free form of that release). With word
        ``scales``: ``(Σ_n g_n S m2_n S) Ω``, clipped by the norms of ``S m2_n S``.
        """
        g = scalable.clip_factors(self._doc_norms(scales)[2 if unique_norm else 1], clip2)
        if scales is None:
            return moments.m2_product_partial(self.counts, omega, doc_scale=g).e2
        return scales[:, None] * moments.m2_product_partial(self.counts, scales[:, None] * omega, doc_scale=g).e2

    def private_m2_dense(self, clip2: float, scales: np.ndarray | None = None) -> np.ndarray:
        """``Σ_n g_n m2_n`` (d×d), ``g_n = min(1, C2/‖m2_n‖_u)`` (the unique-entry norm); with word
        ``scales``, ``Σ_n g_n S m2_n S`` clipped by the norms of ``S m2_n S``."""
        total = moments.m2_dense_sum(self.counts, scalable.clip_factors(self._doc_norms(scales)[2], clip2))
        if scales is not None:
            total *= np.outer(scales, scales)
        return total

    def private_tensor_bounds(self, W: np.ndarray, edges: np.ndarray, key=None) -> np.ndarray:
        """Histogram of the bounds ``B_n`` on ``‖m3_n(W,W,W)‖_F`` over documents with ≥ 3 tokens."""
        B = scalable.tensor_norm_bound(self.counts, W, self._project(W, key))
        ok = moments.doc_lengths(self.counts) >= moments.MIN_DOC_LENGTH
        return scalable.histogram(B[ok], edges)

    def _clipped_tensor(self, W: np.ndarray, clip3: float, key, with_cube: bool) -> moments.WhitenedTensor:
        ident = (key, clip3, with_cube)
        if key is None or self._clip3 is None or self._clip3[0] != ident:
            Y = self._project(W, key)
            h = scalable.clip_factors(scalable.tensor_norm_bound(self.counts, W, Y), clip3)
            weights = scalable.ClippedRawWeights(h)
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
        """Dense moment sums of the papers' small-vocabulary mechanisms (:mod:`distdp.lda.private.dense`)."""
        return dense.dense_moment_partial(self.counts)

    def tail_statistics(self, columns: np.ndarray, key, topic_word: np.ndarray, alpha: np.ndarray,
                        norm_cap: float, max_iter: int = 100, tol: float = 1e-3, single_topic: bool = False,
                        scales: np.ndarray | None = None) -> tuple:
        """The ``tail`` release's partial sums ``(Q, G)`` (:func:`distdp.lda.private.scalable.tail_statistics`).

        Each document's topic mixture is the E-step's posterior mean on its
        ``columns`` words (the restricted shard of :meth:`on_columns` with the
        same ``key``) under the (already released) ``topic_word`` over them;
        with ``single_topic``, the one-hot of its single-topic posterior mode
        there (``alpha`` the topic weights). ``scales``: the release's word
        scales (k×d), or None for none.
        """
        sub = self._columns_view(columns, key).counts
        return scalable.tail_statistics(self.counts, self._mixtures(sub, topic_word, alpha, max_iter, tol,
                                                                       single_topic), norm_cap, scales)

    @staticmethod
    def _mixtures(counts, topic_word, alpha, max_iter, tol, single_topic: bool) -> np.ndarray:
        """``θ̂_n`` of an unmixing release: the E-step's posterior means, or one-hot single-topic posterior modes."""
        if single_topic:
            return scalable.single_topic_posterior(counts, topic_word, alpha)
        res = refine.e_step(counts, np.maximum(topic_word, 1e-12), alpha, None, max_iter, tol, False, with_bound=False)
        return refine.theta_from_gamma(res.gamma)

    def unmix_statistics(self, topic_word: np.ndarray, alpha: np.ndarray, norm_cap: float, max_iter: int = 100,
                         tol: float = 1e-3, scales: np.ndarray | None = None, single_topic: bool = False,
                         sharpen: float = scalable.UNMIX_SHARPEN) -> tuple:
        """An ``unmix`` pass's partial sums ``(Q, G)`` (:func:`distdp.lda.private.scalable.unmix_pass_statistics`).

        Each document's topic mixture is the E-step's posterior mean on all
        its words under the (already released) ``topic_word``, floored at
        1e-12 so that no word rules a topic out; with ``single_topic``, the
        one-hot of its single-topic posterior mode (``alpha`` the topic
        weights). ``scales``: the pass's word scales
        (:func:`distdp.lda.private.scalable.word_scales`); ``sharpen``: the
        power of its document weights (``np.inf``: one-hot).
        """
        theta = self._mixtures(self.counts, topic_word, alpha, max_iter, tol, single_topic)
        return scalable.unmix_pass_statistics(self.counts, theta, norm_cap, scales, sharpen)
