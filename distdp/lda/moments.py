"""Spectral-LDA moment estimators as mergeable per-shard partial sums.

Pure numpy/scipy: no Ray, no IO. Every quantity a shard computes is a sum over
its documents, so the coordinator merges shards by adding their partials; the
estimators are then assembled from the merged sums and the public constants
(the number of documents ``N`` and the Dirichlet concentration ``alpha0``).

Notation (dp-spectral-lda-end-to-end, App. A, eqs. 7–9). A document is a
count vector ``c`` of length ``l = Σ c``, with per-document weights ``w1 = 1/l``, ``w2 = 1/(l(l-1))``,
``w3 = 1/(l(l-1)(l-2))``. The unbiased per-document estimators are

* ``m1 = c w1``
* ``m2 = (c cᵀ - diag c) w2``
* ``m3 = (c⊗c⊗c - sym3(Σ_i c_i e_i⊗e_i ⊗ c) + 2 Σ_i c_i e_i⊗e_i⊗e_i) w3``

where ``sym3(P⊗y)_abc = P_ab y_c + P_ac y_b + P_bc y_a``. The paper's eq. 44
carries a double sum ``2 Σ_{i,j} c_i e_i⊗3`` in the last term; it is a single
sum over ``i`` (as in its eq. 9), else the term is multiplied by ``d``.

The cross terms of M2 and M3 with M1 use U-statistics over *distinct*
documents, so that every estimator below is exactly unbiased (the plug-in M̂1
would carry an O(1/N) bias):

* ``M2 = (1/N) Σ m2_n - a2 /(N(N-1)) Σ_{n≠m} m1_n m1_mᵀ``,
  ``a2 = α0/(α0+1)``;
* ``M3 = (1/N) Σ m3_n - a3 sym3(X) + b3 U3`` with ``a3 = α0/(α0+2)``,
  ``b3 = 2α0²/((α0+1)(α0+2))``, ``X = 1/(N(N-1)) Σ_{n≠m} m2_n ⊗ m1_m`` and
  ``U3 = 1/(N(N-1)(N-2)) Σ_{n,m,o distinct} m1_n⊗m1_m⊗m1_o``.

(dp-spectral-lda-end-to-end, eqs. 12–14, corrected: as printed, B1 has
coefficient ``+a2 = α0/(α0+1)`` where ``−α0/(α0+2)`` is needed; ``[B3]_ijk =
[B1]_kij`` repeats B2 and must be ``[B1]_jki``; and b needs the coefficient
``2α0²/((α0+1)(α0+2))`` and ``+2 Σ_n m1_n⊗3``. The estimator above is derived
from Def. 3.1 / Lemma 3.2 with the corrected M3 coefficients and tested
against exact expectations.)

Documents with fewer than three tokens cannot feed the third-moment estimator;
their weights are zero (:func:`doc_weights`), so they are excluded from every
moment, and ``N`` counts the other (eligible) documents only.
"""
from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse as sp

#: Documents shorter than this cannot feed the third-moment estimator.
MIN_DOC_LENGTH = 3

#: Documents are processed in blocks of this many rows when a dense
#: per-document array (k² wide) is needed, bounding memory at O(block·k²).
DOC_BLOCK = 8192

#: Dense per-document entries (rows × columns) of one block of the sparse products
#: (:func:`row_blocks`): their temporaries are O(this) = 32 MB, not O(n·p) for a whole shard.
PRODUCT_BLOCK_ENTRIES = 1 << 22


def sum_partials(parts):
    """The sum of partial results in their given order (row blocks, or shards), starting from the first.

    A fixed order makes runs reproducible, and no zero is added: one part is returned as it is, so a
    matrix that fits in one block gives exactly its unblocked result.
    """
    return functools.reduce(operator.add, parts)


def row_blocks(counts: sp.csr_matrix, width: int, entries: int | None = None):
    """``(start, stop, block)`` over consecutive rows of ``counts``, ``rows × width ≤ entries`` per block.

    A block shares the matrix's ``data`` and ``indices`` (no copy). A matrix
    that fits in one block is yielded whole, so small shards compute exactly
    what an unblocked product computes. ``entries`` defaults to :data:`PRODUCT_BLOCK_ENTRIES`.
    """
    n = counts.shape[0]
    rows = max(1, (PRODUCT_BLOCK_ENTRIES if entries is None else entries) // max(1, int(width)))
    if n <= rows:
        yield 0, n, counts
        return
    ip = counts.indptr
    for a in range(0, n, rows):
        b = min(n, a + rows)
        blk = sp.csr_matrix((b - a, counts.shape[1]), dtype=counts.dtype)
        # set, not passed to the constructor: scipy copies a view of a larger array there (prune)
        blk.data, blk.indices, blk.indptr = counts.data[ip[a]:ip[b]], counts.indices[ip[a]:ip[b]], ip[a:b + 1] - ip[a]
        yield a, b, blk


# --------------------------------------------------------------------------
# Coefficients
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class MomentCoefficients:
    """Coefficients of the LDA moments for concentration ``alpha0`` (dp-spectral-lda-end-to-end, Def. 3.1, corrected).

    The paper's M2 coefficient (eq. 2) is right; its M3 coefficients in eqs. 3
    and 29 are wrong, as is its eq. 27. The correct form is
    ``M3 = E[x1⊗x2⊗x3] − α0/(α0+2)·(E[x1⊗x2⊗M1] + E[x1⊗M1⊗x2] + E[M1⊗x1⊗x2])
    + 2α0²/((α0+1)(α0+2))·M1⊗M1⊗M1 = Σ_i 2α_i/(α0(α0+1)(α0+2)) μ_i⊗3`` (eq. 6);
    the wrong and right coefficients coincide at α0 = 1.

    ``alpha0 = 0`` gives the single-topic model, whose moments are the raw
    cross-moments (every correction vanishes).
    """

    alpha0: float

    @property
    def a2(self) -> float:
        """Coefficient of M1⊗M1 in M2: α0/(α0+1)."""
        return self.alpha0 / (self.alpha0 + 1.0)

    @property
    def a3(self) -> float:
        """Coefficient of each E[x1⊗x2⊗M1] term in M3: α0/(α0+2)."""
        return self.alpha0 / (self.alpha0 + 2.0)

    @property
    def b3(self) -> float:
        """Coefficient of M1⊗M1⊗M1 in M3: 2α0²/((α0+1)(α0+2))."""
        a = self.alpha0
        return 2.0 * a * a / ((a + 1.0) * (a + 2.0))


def doc_lengths(counts: sp.csr_matrix) -> np.ndarray:
    """Length ``l_n = Σ_i c_ni`` of every row of a CSR count matrix (float64)."""
    return np.asarray(counts.sum(axis=1), dtype=np.float64).ravel()


def used_documents(counts: sp.csr_matrix) -> int:
    """Rows of a CSR count matrix with at least :data:`MIN_DOC_LENGTH` tokens: the documents the moments use."""
    return int((doc_lengths(counts) >= MIN_DOC_LENGTH).sum())


#: Nonzeros per chunk of :func:`row_sums`: its temporaries are O(this), not O(nnz).
ROW_SUM_CHUNK = 1 << 22


def row_sums(counts: sp.csr_matrix, fn: Callable[[np.ndarray], np.ndarray], chunk: int = ROW_SUM_CHUNK,
             column_weights: np.ndarray | None = None) -> np.ndarray:
    """``Σ_j fn(c_nj)`` (``Σ_j v_j fn(c_nj)`` with ``column_weights`` v) over the nonzeros of every row of a
    CSR matrix (float64; 0 for an empty row).

    Rows are taken in chunks of about ``chunk`` nonzeros (a longer row whole), so the
    temporaries ``fn`` makes are O(chunk) and the matrix is not copied: the per-document
    norms of the private fit's first pass peaked at 2.5× the corpus's ``data`` array when
    computed on a copy of the whole matrix.
    """
    indptr, n = counts.indptr, counts.shape[0]
    out = np.zeros(n)
    r0 = 0
    while r0 < n:
        r1 = min(n, max(r0 + 1, int(np.searchsorted(indptr, indptr[r0] + chunk, side="right")) - 1))
        starts = indptr[r0:r1] - indptr[r0]
        filled = indptr[r0 + 1:r1 + 1] > indptr[r0:r1]
        if filled.any():
            vals = np.asarray(fn(counts.data[indptr[r0]:indptr[r1]]), dtype=np.float64)
            if column_weights is not None:
                vals = vals * column_weights[counts.indices[indptr[r0]:indptr[r1]]]
            out[r0:r1][filled] = np.add.reduceat(vals, starts[filled])
        r0 = r1
    return out


def doc_weights(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-document weights ``(w1, w2, w3)`` = ``1/l, 1/(l(l-1)), 1/(l(l-1)(l-2))``.

    All three are 0 for documents shorter than :data:`MIN_DOC_LENGTH` tokens,
    so such documents drop out of every partial sum below.
    """
    l = np.asarray(lengths, dtype=np.float64)
    ok = l >= MIN_DOC_LENGTH
    safe = np.where(ok, l, float(MIN_DOC_LENGTH))
    w1 = 1.0 / safe
    w2 = w1 / (safe - 1.0)
    w3 = w2 / (safe - 2.0)
    return np.where(ok, w1, 0.0), np.where(ok, w2, 0.0), np.where(ok, w3, 0.0)


# --------------------------------------------------------------------------
# Small dense helpers
# --------------------------------------------------------------------------
#: Topics from which :func:`weighted_cube_sum` computes only the entries with i ≤ j, l (and
#: :func:`weighted_pair_sum` only the ``i ≤ j`` half of the Khatri–Rao product).
HALF_CUBE_K = 32

#: Topics of the first mode per product in :func:`weighted_cube_sum` (from :data:`HALF_CUBE_K` topics).
CUBE_TOPIC_BLOCK = 10

#: Entries of one Khatri–Rao block of :func:`weighted_cube_sum` (rows × :data:`CUBE_TOPIC_BLOCK`·k): 2 MiB in
#: float32, so that its product reads it from cache (measured on 2 cores, k = 32–200: 2¹⁸–2²⁰ within 10%).
CUBE_BLOCK_ENTRIES = 1 << 19


def weighted_cube_sum(Y: np.ndarray, weights: np.ndarray, block: int = DOC_BLOCK) -> np.ndarray:
    """``Σ_n weights_n y_n⊗y_n⊗y_n`` for the rows ``y_n`` of ``Y`` (n×k) → (k,k,k).

    The sum is symmetric in its three modes, so it is computed only where the first index is the
    smallest: for each block I of :data:`CUBE_TOPIC_BLOCK` topics starting at i₀, one GEMM of the
    weighted row-wise Khatri–Rao product of ``Y[:, I]`` and ``Y[:, i₀:]`` against ``Y[:, i₀:]`` gives
    every entry (i, j, l) with i ∈ I and j, l ≥ i₀; the rest are copies (:func:`cube_order`). That is
    ≈ k³/3 products a row instead of k³/2 for the ``i ≤ j`` half (:func:`weighted_pair_sum`), on blocks
    small enough to stay in cache: 1.25–1.5× faster at k = 32–100 in float32 and float64 (one thread).
    Below :data:`HALF_CUBE_K` topics, the full Khatri–Rao product of :func:`weighted_pair_sum` (the
    GEMM's shape changes, so BLAS may pick another kernel for small k). The products run in ``Y``'s
    precision; each block's product is added to a float64 sum. O(n k³) time; memory
    O(:data:`CUBE_BLOCK_ENTRIES` + k³).
    """
    n, k = Y.shape
    if k < HALF_CUBE_K:
        out = weighted_pair_sum(Y, weights, Y, block)
        return out if Y.dtype == np.float64 else symmetrize(out)
    rows = max(1, min(block, CUBE_BLOCK_ENTRIES // (CUBE_TOPIC_BLOCK * k)))
    weights = weights.astype(Y.dtype, copy=False)
    acc = np.zeros((k, k, k))
    for start in range(0, n, rows):
        Yb = Y[start:start + rows]
        Yw = Yb * weights[start:start + rows, None]
        for i0 in range(0, k, CUBE_TOPIC_BLOCK):
            i1 = min(k, i0 + CUBE_TOPIC_BLOCK)
            kr = (Yw[:, i0:i1, None] * Yb[:, None, i0:]).reshape(len(Yb), (i1 - i0) * (k - i0))
            acc[i0:i1, i0:, i0:] += (kr.T @ Yb[:, i0:]).reshape(i1 - i0, k - i0, k - i0)
    return acc.reshape(-1)[cube_order(k)].reshape(k, k, k)


@functools.lru_cache(maxsize=4)
def cube_order(k: int) -> np.ndarray:
    """For every (i, j, l), the flat index of its indices sorted (i ≤ j ≤ l): entries that
    :func:`weighted_cube_sum` computes, one for all six permutations (read-only; k³ int32, made once per k)."""
    i, j, l = np.meshgrid(*(np.arange(k, dtype=np.int64),) * 3, indexing="ij", sparse=True)
    lo, hi = np.minimum(np.minimum(i, j), l), np.maximum(np.maximum(i, j), l)
    flat = ((lo * k + (i + j + l - lo - hi)) * k + hi).astype(np.int32 if k ** 3 < 2 ** 31 else np.int64)
    flat.flags.writeable = False
    return flat.reshape(-1)


def weighted_pair_sum(Y: np.ndarray, weights: np.ndarray | None, B: np.ndarray,
                      block: int = DOC_BLOCK) -> np.ndarray:
    """``Σ_n weights_n y_n⊗y_n⊗b_n`` for the rows of ``Y`` (n×k) and ``B`` (n×m) → (k,k,m); ``weights`` None:
    every weight 1 (no pass over the products to apply them).

    One GEMM per block of rows of the weighted row-wise Khatri–Rao product
    ``Y ⊙ Y`` against ``B``, the block at most ``block`` rows and
    :data:`PRODUCT_BLOCK_ENTRIES` entries. From :data:`HALF_CUBE_K` topics
    only the products ``y_i y_j`` with ``i ≤ j`` are formed (the sum is
    symmetric in its first two modes) and mirrored: half the time (40,000 ×
    100: 0.86 s against 2.2 s), the same entries to the bit where measured
    (k = 50, 100; the GEMM's shape changes, so BLAS may pick another kernel
    for small k: below, the full product is kept).
    """
    n, k = Y.shape
    m = B.shape[1]
    block = max(1, min(block, PRODUCT_BLOCK_ENTRIES // (k * k)))
    weights = None if weights is None else weights.astype(Y.dtype, copy=False)
    if k < HALF_CUBE_K:
        out = np.zeros((k * k, m))
        for start in range(0, n, block):
            Yb = Y[start:start + block]
            kr = (Yb[:, :, None] * Yb[:, None, :]).reshape(len(Yb), k * k)
            if weights is not None:
                kr = kr * weights[start:start + block, None]
            out += kr.T @ B[start:start + block]
        return out.reshape(k, k, m)
    rows_i, cols_j = np.triu_indices(k)
    offsets = np.concatenate([[0], np.cumsum(np.arange(k, 0, -1))])    # row i's pairs (i, i..k-1)
    half = np.zeros((len(rows_i), m))
    for start in range(0, n, block):
        Yb = Y[start:start + block]
        kr = np.empty((len(Yb), len(rows_i)), dtype=Y.dtype)
        for i in range(k):
            np.multiply(Yb[:, i:i + 1], Yb[:, i:], out=kr[:, offsets[i]:offsets[i + 1]])
        if weights is not None:
            kr *= weights[start:start + block, None]
        half += kr.T @ B[start:start + block]
    out = np.empty((k, k, m))
    out[rows_i, cols_j] = half
    out[cols_j, rows_i] = half
    return out


def symmetrize(T: np.ndarray) -> np.ndarray:
    """The mean of a k×k×k array over the six permutations of its modes (the nearest symmetric tensor).

    Float32 products round the entries of a symmetric sum differently (``T_ijl`` and ``T_ilj`` come
    from different places of the GEMM); their mean is symmetric to float64 rounding, and no farther from
    the exact sum than the worst of them.
    """
    return (T + T.transpose(0, 2, 1) + T.transpose(1, 0, 2) + T.transpose(1, 2, 0) + T.transpose(2, 0, 1)
            + T.transpose(2, 1, 0)) / 6.0


def sym3_outer(P: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``sym3(P⊗y)_abc = P_ab y_c + P_ac y_b + P_bc y_a`` for symmetric ``P`` (k×k)."""
    t = P[:, :, None] * y[None, None, :]
    return t + t.transpose(0, 2, 1) + t.transpose(2, 0, 1)


def sym3_rows(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``sym3(Σ_i A_i⊗A_i⊗B_i)`` for row matrices ``A``, ``B`` (d×k) → (k,k,k).

    :func:`weighted_pair_sum` without weights, on blocks of at most
    :data:`PRODUCT_BLOCK_ENTRIES` / k² rows (the row-wise ``A ⊙ A`` is d×k²:
    4 GB at d = 50,000, k = 100 if formed whole).
    """
    d, k = A.shape
    t = weighted_pair_sum(A, None, B, max(1, PRODUCT_BLOCK_ENTRIES // (k * k)))
    return t + t.transpose(0, 2, 1) + t.transpose(2, 0, 1)


def cube_rows(A: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``Σ_i g_i A_i⊗A_i⊗A_i`` for the rows of ``A`` (d×k) → (k,k,k)."""
    return weighted_cube_sum(A, g)


# --------------------------------------------------------------------------
# Pass 1: first-order statistics and the first M2 product
# --------------------------------------------------------------------------
@dataclass
class M2ProductPartial:
    """A shard's partial sums for ``M2 Ω`` (d×p): merge by adding.

    ``e2 = Σ_n m2_n Ω`` and ``q = Σ_n m1_n m1_nᵀ Ω``; the coordinator combines
    them with ``s = Σ_n m1_n`` and the public ``N`` (:func:`m2_product`). ``q``
    is the scalar 0 when :func:`m2_product_partial` folded it into ``e2`` (so
    a shard returns one d×p array per product, not two).
    """

    e2: np.ndarray
    q: np.ndarray

    def __add__(self, other: "M2ProductPartial") -> "M2ProductPartial":
        return M2ProductPartial(self.e2 + other.e2, self.q + other.q)


def with_value_dtype(counts: sp.csr_matrix, dtype) -> sp.csr_matrix:
    """``counts`` with its values in ``dtype``: a cast of the values only (the indices are shared), one pass
    over the nonzeros; ``counts`` itself when it already has that type."""
    if counts.dtype == dtype:
        return counts
    return sp.csr_matrix((counts.data.astype(dtype), counts.indices, counts.indptr), shape=counts.shape)


def m2_product_partial(counts: sp.csr_matrix, omega: np.ndarray, q_scale: float | None = None,
                       doc_scale: np.ndarray | None = None, dtype=np.float64) -> M2ProductPartial:
    """Partial sums of ``M2 Ω`` from a shard's eligible documents (never d×d).

    ``Σ_n m2_n Ω = Cᵀ(w2 ∘ CΩ) − (Cᵀw2) ∘ Ω`` and
    ``Σ_n m1_n m1_nᵀ Ω = Cᵀ(w1² ∘ CΩ)``: sparse products, O(nnz·p) each.
    Once ``N`` is known the coordinator passes ``q_scale = a2/(N−1)`` and the
    second sum is folded into the first, ``e2 = Cᵀ((w2 + q_scale·w1²) ∘ CΩ) −
    (Cᵀw2) ∘ Ω`` with ``q = 0`` (a scalar): one transposed product instead of two.

    The products run over row blocks (:func:`row_blocks`), so the dense
    ``CΩ`` is never formed for a whole shard: O(block·p + d·p) memory.

    Parameters
    ----------
    counts : scipy.sparse.csr_matrix, shape (n, d)
        Count vectors of documents with at least three tokens.
    omega : ndarray, shape (d, p)
        The block to multiply.
    q_scale : float, optional
        Fold ``q_scale · Σ m1 m1ᵀ Ω`` into ``e2``.
    doc_scale : ndarray (n,), optional
        Per-document factors on ``m2_n`` (the clipping of the private fit).
    dtype : {numpy.float64, numpy.float32}
        Precision of the two sparse products of each row block (the counts,
        whole numbers, are exact in either). ``float32`` halves the bytes they
        move (2.5× faster measured on 11M nonzeros × 110 columns); each block's
        result is added in float64, and the diagonal term stays float64. Its
        rounding is at most γ_n (Higham 2002, §3.1) times the entry's sum of
        absolute terms, n the terms of the longest inner and outer sums.
    """
    w1, w2, _ = doc_weights(doc_lengths(counts))
    if doc_scale is not None:
        w2 = w2 * doc_scale
    ct = counts.T  # a CSC view: scattering into d×p rows is ~5× faster than a transposed CSR copy
    diag = (ct @ w2)[:, None] * omega
    work = np.dtype(dtype)
    om = omega if omega.dtype == work else omega.astype(work)

    def block(a, b, blk):  # C Ω for one row block: O(block·p) memory
        blk = with_value_dtype(blk, work)
        c_omega, bt = np.asarray(blk @ om), blk.T
        if q_scale is not None:
            folded = (w2[a:b] + q_scale * w1[a:b] * w1[a:b]).astype(work, copy=False)
            e2 = np.asarray(bt @ (c_omega * folded[:, None]), dtype=np.float64)
            return M2ProductPartial(e2, np.float64(0.0))
        w2b, w1sq = w2[a:b, None].astype(work, copy=False), (w1[a:b] * w1[a:b])[:, None].astype(work, copy=False)
        return M2ProductPartial(np.asarray(bt @ (c_omega * w2b), dtype=np.float64),
                                np.asarray(bt @ (c_omega * w1sq), dtype=np.float64))

    total = sum_partials(block(*b) for b in row_blocks(counts, omega.shape[1]))
    return M2ProductPartial(np.asarray(total.e2 - diag), np.asarray(total.q) if q_scale is None else total.q)


def q_fold_scale(n_docs: int, coef: MomentCoefficients) -> float:
    """The ``q_scale`` of :func:`m2_product_partial` that folds the U-statistic term: ``a2/(N−1)``."""
    return coef.a2 / (n_docs - 1.0)


def m2_product(partial: M2ProductPartial, m1_sum: np.ndarray, omega: np.ndarray,
               n_docs: int, coef: MomentCoefficients) -> np.ndarray:
    """Assemble the unbiased ``M2 Ω`` from merged partial sums.

    ``M2 Ω = e2/N − a2/(N(N−1)) · (s (sᵀΩ) − q)`` where ``s = Σ_n m1_n``
    (``q = 0`` when it was folded into ``e2``).
    """
    N = float(n_docs)
    cross = np.outer(m1_sum, m1_sum @ omega) - partial.q
    return partial.e2 / N - coef.a2 / (N * (N - 1.0)) * cross


def m2_dense_sum(counts: sp.csr_matrix, doc_scale: np.ndarray | None = None) -> np.ndarray:
    """Dense ``Σ_n s_n m2_n`` (d×d) with per-document factors ``doc_scale`` (default 1)."""
    w2 = doc_weights(doc_lengths(counts))[1]
    if doc_scale is not None:
        w2 = w2 * doc_scale
    ct = counts.T
    return (ct @ sp.diags(w2) @ counts).toarray() - np.diag(ct @ w2)


def m2_dense_partial(counts: sp.csr_matrix) -> M2ProductPartial:
    """Dense ``Σ m2_n`` and ``Σ m1_n m1_nᵀ`` (d×d): the small-vocabulary option.

    The result plays the role of :func:`m2_product_partial` with ``Ω = I``.
    """
    w1 = doc_weights(doc_lengths(counts))[0]
    q = (counts.T @ sp.diags(w1 * w1) @ counts).toarray()
    return M2ProductPartial(m2_dense_sum(counts), q)


# --------------------------------------------------------------------------
# Whitened third moment T = M3(W, W, W)
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class TensorWeights:
    """Per-document weights that fold the U-statistic cross terms into one sum.

    Collecting the ``y⊗y⊗y`` and ``sym3(P_n⊗y_n)`` terms of ``(1/N)Σ B_n``,
    ``−a3 sym3(X)`` and ``b3 U3`` (module docstring) gives, per document,

    * ``ω_n = w3/N + 3 a3 w1 w2/(N(N−1)) + 2 b3 w1³/(N(N−1)(N−2))`` on ``y_n⊗3``,
    * ``v_n = −w3/N − a3 w1 w2/(N(N−1))`` on ``sym3(P_n⊗y_n)``,
    * ``2 w3/N`` on ``Σ_i c_ni W_i⊗3``,

    with ``P_n = Wᵀ diag(c_n) W`` and ``y_n = Wᵀ c_n``.
    """

    n_docs: int
    alpha0: float

    def _scales(self) -> tuple[float, float, float]:
        N = float(self.n_docs)
        c = MomentCoefficients(self.alpha0)
        return 1.0 / N, c.a3 / (N * (N - 1.0)), c.b3 / (N * (N - 1.0) * (N - 2.0))

    def omega(self, w1, w2, w3):
        """Weight of ``y_n⊗y_n⊗y_n``."""
        s1, s2, s3 = self._scales()
        return s1 * w3 + 3.0 * s2 * w1 * w2 + 2.0 * s3 * w1 ** 3

    def v(self, w1, w2, w3):
        """Weight of ``sym3(P_n⊗y_n)``."""
        s1, s2, _ = self._scales()
        return -s1 * w3 - s2 * w1 * w2

    def diag(self, w3):
        """Weight of ``Σ_i c_ni W_i⊗W_i⊗W_i``."""
        return 2.0 * self._scales()[0] * w3


@dataclass
class TensorPartial:
    """A shard's partial sums for the whitened tensor; merge by adding.

    Attributes
    ----------
    cube : ndarray (k,k,k) or None
        ``Σ_n ω_n y_n⊗3`` (None on the implicit path, where it stays on the shard).
    z : ndarray (d,k)
        ``Cᵀ(v ∘ Y)``, so that ``Σ_n v_n sym3(P_n⊗y_n) = sym3(Σ_i W_i⊗W_i⊗z_i)``.
    g : ndarray (d,)
        ``Cᵀ(2w3/N)``, so that the diagonal term is ``Σ_i g_i W_i⊗3``.
    sum_m2 : ndarray (k,k)
        ``Σ_n Wᵀ m2_n W = Σ_n w2 (y yᵀ − P_n)``.
    sum_m1m1 : ndarray (k,k)
        ``Σ_n (Wᵀm1_n)(Wᵀm1_n)ᵀ = Σ_n w1² y yᵀ``.
    """

    cube: np.ndarray | None
    z: np.ndarray
    g: np.ndarray
    sum_m2: np.ndarray
    sum_m1m1: np.ndarray

    def __add__(self, other: "TensorPartial") -> "TensorPartial":
        cube = None if self.cube is None else self.cube + other.cube
        return TensorPartial(cube, self.z + other.z, self.g + other.g,
                             self.sum_m2 + other.sum_m2, self.sum_m1m1 + other.sum_m1m1)


def tensor_partial(counts: sp.csr_matrix, W: np.ndarray, weights: TensorWeights,
                   with_cube: bool = True, Y: np.ndarray | None = None, dtype=np.float64) -> TensorPartial:
    """Partial sums of the whitened tensor from a shard (never d×d×d, never d×d).

    Cost O(nnz·k + n k³) with the cube, O(nnz·k + n k²) without.

    Parameters
    ----------
    counts : csr_matrix (n, d)
        Eligible documents (length ≥ 3).
    W : ndarray (d, k)
        Whitening matrix.
    weights : TensorWeights
        Public constants ``N`` (all shards) and ``alpha0``.
    with_cube : bool
        Form ``Σ ω_n y_n⊗3`` (explicit path); the implicit path leaves it out.
    Y : ndarray (n, k), optional
        ``C W`` if already computed (the implicit path keeps it for its
        per-iteration passes); else it is computed in row blocks
        (:func:`row_blocks`), O(block·k) memory.
    dtype : {numpy.float64, numpy.float32}
        Precision of each row block's products when ``Y`` is not given (``C W``,
        the cube, ``Cᵀ(v ∘ Y)`` and the k×k sums; the counts, whole numbers,
        are exact in either); each block's results are added in float64, as in
        :func:`m2_product_partial`.
    """
    w1, w2, w3 = doc_weights(doc_lengths(counts))
    ct = counts.T
    g = np.asarray(ct @ weights.diag(w3))
    h2 = np.asarray(ct @ w2)
    omega, v = weights.omega(w1, w2, w3), weights.v(w1, w2, w3)
    work = np.dtype(dtype) if Y is None else Y.dtype
    Wc = W.astype(work, copy=False)

    def f64(x, symmetric=False):     # float32 rounds Yᵀ D Y's (i, j) and (j, i) differently: their mean
        x = np.asarray(x, dtype=np.float64)
        return (x + x.T) / 2.0 if symmetric and work != np.float64 else x

    def block(a, b, blk, Yb=None):  # Y = C W for one row block unless given: O(block·k) memory
        blk = with_value_dtype(blk, work)
        Yb = np.asarray(blk @ Wc) if Yb is None else Yb
        vb, w2b, w1sq = (x.astype(work, copy=False) for x in (v[a:b], w2[a:b], w1[a:b] * w1[a:b]))
        return TensorPartial(weighted_cube_sum(Yb, omega[a:b]) if with_cube else None,
                             f64(blk.T @ (Yb * vb[:, None])), 0.0, f64((Yb * w2b[:, None]).T @ Yb, True),
                             f64((Yb * w1sq[:, None]).T @ Yb, True))

    total = block(0, counts.shape[0], counts, Y) if Y is not None else \
        sum_partials(block(*b) for b in row_blocks(counts, W.shape[1]))
    return TensorPartial(total.cube, total.z, g, total.sum_m2 - (W * h2[:, None]).T @ W, total.sum_m1m1)


def cube_apply(Y: np.ndarray, weights_vec: np.ndarray, U: np.ndarray) -> np.ndarray:
    """``Σ_n ω_n y_n (y_nᵀu)²`` for every column ``u`` of ``U`` (k×L) → (k, L). O(n k L)."""
    YU = Y @ U
    return Y.T @ (weights_vec[:, None] * YU * YU)


def cube_apply_partial(counts: sp.csr_matrix, Y: np.ndarray, weights: TensorWeights,
                       U: np.ndarray) -> np.ndarray:
    """A shard's share of ``(Σ_n ω_n y_n⊗3)(I, u, u)`` for the L columns of ``U``."""
    w1, w2, w3 = doc_weights(doc_lengths(counts))
    return cube_apply(Y, weights.omega(w1, w2, w3), U)


@dataclass
class WhitenedTensor:
    """The whitened third moment ``T = M3(W,W,W)`` in structured form.

    ``T = cube + sym3(Σ_i W_i⊗W_i⊗z_i) + Σ_i g_i W_i⊗3
    − a3/(N(N−1)) sym3(ΣA ⊗ S) + b3/(N(N−1)(N−2)) (S⊗3 − sym3(Q⊗S))``
    where ``S = Wᵀ Σ_n m1_n``, ``ΣA = sum_m2`` and ``Q = sum_m1m1``.
    ``cube`` is either dense (k,k,k) or, on the implicit path, applied by a
    callable ``cube_apply(U) -> (k, L)`` (a distributed pass in practice).
    """

    W: np.ndarray
    partial: TensorPartial
    m1_sum: np.ndarray
    weights: TensorWeights

    def _globals(self):
        N = float(self.weights.n_docs)
        coef = MomentCoefficients(self.weights.alpha0)
        S = self.W.T @ self.m1_sum
        return S, coef.a3 / (N * (N - 1.0)), coef.b3 / (N * (N - 1.0) * (N - 2.0))

    def correction_dense(self) -> np.ndarray:
        """Every term but ``cube``, as a dense (k,k,k) array (O(d k³))."""
        p = self.partial
        S, ca, cb = self._globals()
        t = sym3_rows(self.W, p.z) + cube_rows(self.W, p.g)
        t -= ca * sym3_outer(p.sum_m2, S)
        t += cb * (S[:, None, None] * S[None, :, None] * S[None, None, :] - sym3_outer(p.sum_m1m1, S))
        return t

    def dense(self) -> np.ndarray:
        """The full whitened tensor (k,k,k); requires the explicit ``cube``."""
        if self.partial.cube is None:
            raise ValueError("this WhitenedTensor was built without its cube (implicit path)")
        return self.partial.cube + self.correction_dense()

    def correction_apply(self, U: np.ndarray) -> np.ndarray:
        """Every term but ``cube``, contracted as ``(I, u, u)`` for each column of U (k×L).

        O(d k L): never forms a k³ array.
        """
        p = self.partial
        S, ca, cb = self._globals()
        WU = self.W @ U
        ZU = p.z @ U
        out = 2.0 * self.W.T @ (WU * ZU) + p.z.T @ (WU * WU)
        out += self.W.T @ (p.g[:, None] * WU * WU)
        Su = S @ U
        for M, c in ((p.sum_m2, -ca), (p.sum_m1m1, -cb)):
            MU = M @ U
            out += c * (2.0 * MU * Su[None, :] + S[:, None] * np.einsum("kl,kl->l", U, MU)[None, :])
        out += cb * S[:, None] * (Su * Su)[None, :]
        return out
