"""Differentially private spectral LDA on dense moments (small vocabularies).

Pure numpy/scipy: no Ray, no IO. The four configurations of the DP spectral
LDA paper (dp-spectral-lda-end-to-end, Tables 2/3, Thms 4.1–4.4, App. G) and
Imtiaz & Sarwate's AGN/AVN, applied to LDA's α0-corrected moments (the paper's
Def. 3.1 with the M3 coefficients corrected, :mod:`distdp.lda.moments`).

Moments
-------
A shard computes a :class:`DenseMomentPartial` (sums over its documents,
merged by ``+``); :func:`lda_moments` assembles the exactly unbiased
U-statistic estimators of :mod:`distdp.lda.moments` densely::

    M2 = S2/N − a2/(N(N−1)) (s sᵀ − Q)
    M3 = S3/N − a3 sym3(X) + b3 U3
    X  = (S2⊗s − Σ_n m2_n⊗m1_n) / (N(N−1))
    U3 = (s⊗3 − sym3(Q⊗s) + 2 Σ_n m1_n⊗3) / (N(N−1)(N−2))

with ``s = Σ m1_n``, ``Q = Σ m1_n m1_nᵀ``, ``S2 = Σ m2_n``, ``S3 = Σ m3_n``
and ``a2 = α0/(α0+1)``, ``a3 = α0/(α0+2)``, ``b3 = 2α0²/((α0+1)(α0+2))``.
``X`` and ``U3`` are the averages over ordered pairs / triples of *distinct*
documents. Documents shorter than 3 tokens have zero weight.

Privacy unit
------------
Replace one document (:data:`~distdp.privacy.neighbours.REPLACE_ONE_DOCUMENT`). ``N`` (``n_docs``) is the public
normaliser: the sensitivities below hold for the map corpus → moments with N
fixed, for any replacement document (a short one contributes 0), provided
the number of eligible documents ``n_used`` is ≤ N. In private pipelines N is
a public (or separately released, upward-biased noisy) count.

Guarantees
----------
- ``config1``, ``config1-paper``, ``agn``, ``avn``: noise on M2 and M3 with
  the sensitivities derived here (:func:`m2_sensitivity`,
  :func:`m3_sensitivity`) or the paper's App. G ℓ1 bounds (which also bound
  the ℓ2 change of our estimator); everything after is post-processing:
  ``"proven"``.
- ``config2``, ``config3``, ``config4``: the paper's sensitivities are
  functions of private quantities (σ_k, σ_{k+1}, σ_1 of M̂2, the eigenvalues
  of T̂ and their gap γ_s) and hold only under conditions nobody checks
  privately (Thms 4.2–4.4, G.5–G.8), plus an eigenvector alignment an
  eigensolver does not provide (App. G.5 assumes the neighbour's whitening is
  ``Ŵ A D^(-1/2) Aᵀ``; near-equal top eigenvalues break it):
  ``"paper claim, conditions unchecked"``.
- ``config2`` with :class:`DeclaredBounds`: user-declared public bounds on
  M̂2's spectrum and ‖M̂3‖_F, checked by a private test (propose-test-release,
  :func:`bounds_margin`), sound sensitivities derived from them with the
  cross terms the paper drops (:func:`declared_sensitivities`), and random
  eigenvector signs in place of the alignment: ``"proven"``.
- A seeded run (``reproducible=True``): ``"none (reproducible seed)"``.

``config1`` and ``agn`` are the same mechanism (Gaussian noise on the unique
entries of M2 and M3, one noisy M2 for W and W†) under two names: the LDA
paper's edges (e3, e4, e8) and Imtiaz & Sarwate's AGN.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy import optimize

from distdp.lda import clip_normalise, recover_parameters
from distdp.lda.moments import MomentCoefficients, doc_lengths, doc_weights
from distdp.privacy import accounting as acct
from distdp.privacy import mechanisms
from distdp.privacy.ledger import BudgetNotMetError, PrivacyLedger
from distdp.privacy.neighbours import REPLACE_ONE_DOCUMENT
from distdp.privacy.releases import PrivateReleases
from distdp.privacy.report import PrivacyReport
from distdp.lda.private.single_topic import MAX_DENSE_M3_ENTRIES, whiten_noisy, whiten_tensor
from distdp.tensor import power
from distdp.lda.whitening import Whitening, dense_top_eigh, top_k_from_symmetric

__all__ = [
    "MECHANISMS", "ACCOUNTING", "PROVEN", "PAPER_CLAIM", "NO_GUARANTEE",
    "DenseMomentPartial", "DenseLDAResult", "check_dense_vocab", "dense_moment_partial", "lda_moments",
    "m2_sensitivity", "m3_sensitivity", "paper_delta2_delta3", "m3_l1_norm_bound",
    "whitened_tensor_sensitivity", "unwhitening_sensitivity", "eigengap", "component_sensitivity",
    "output_sensitivities", "DeclaredBounds", "declared_sensitivities", "bounds_margin", "ptr_threshold",
    "PTR_EPSILON_SHARE", "PTR_DELTA_SHARE", "fit_dense", "fit_dense_non_private",
]

#: Mechanisms of :func:`fit_dense`.
MECHANISMS = ("config1", "config1-paper", "config2", "config3", "config4", "agn", "avn")
#: Budget splits of :func:`fit_dense`.
ACCOUNTING = ("tight", "paper")
PROVEN = "proven"
PAPER_CLAIM = "paper claim, conditions unchecked"
NO_GUARANTEE = "none (reproducible seed)"

_SQRT2, _SQRT6 = math.sqrt(2.0), math.sqrt(6.0)
#: Floats of the Khatri–Rao block in :func:`dense_moment_partial` (32 MB).
_KR_FLOATS = 1 << 22
#: Largest ε of a pure stage that :func:`distdp.privacy.accounting.pure_dp_event` can represent (exp overflow).
_MAX_PURE_EPSILON = 700.0
_PUBLIC_N = ("N (n_docs) is public and n_used ≤ N; the replaced document may have any length "
             "(documents with < 3 tokens contribute 0)")


# --------------------------------------------------------------------------- moments

def check_dense_vocab(d: int, max_entries: int = MAX_DENSE_M3_ENTRIES) -> int:
    """Refuse a vocabulary whose dense d×d×d M3 would exceed ``max_entries`` entries.

    Raises
    ------
    ValueError
        Naming the scalable mechanisms ``whitened`` and ``power``.
    """
    d = int(d)
    if d < 2:
        raise ValueError(f"the vocabulary must have at least 2 words, got d = {d}")
    if d ** 3 > max_entries:
        raise ValueError(
            f"dense LDA moments need a {d}×{d}×{d} third moment ({d ** 3:.3g} entries > {max_entries:.3g}): "
            "the mechanisms config1, config1-paper, agn and avn (and this dense module) serve small "
            "vocabularies only. For large d use the scalable mechanisms 'whitened' (noise on the k×k×k "
            "whitened tensor built from projected documents) or 'power' (the distributed DP tensor power "
            "method), which never form M2 or M3")
    return d


def _sym3(X: np.ndarray) -> np.ndarray:
    """``X_abc + X_acb + X_bca`` (= ``sym3(P⊗y)`` of :mod:`distdp.lda.moments` for ``X = P⊗y``, P symmetric)."""
    return X + X.transpose(0, 2, 1) + X.transpose(2, 0, 1)


@dataclass
class DenseMomentPartial:
    """A shard's dense LDA moment sums; merge shards with ``+``.

    Attributes
    ----------
    n_used : int
        Documents with ≥ 3 tokens (the others have zero weight).
    m1 : ndarray (d,)
        ``Σ_n m1_n``.
    m2 : ndarray (d, d)
        ``Σ_n m2_n``.
    m3 : ndarray (d, d, d)
        ``Σ_n m3_n``.
    m1m1 : ndarray (d, d)
        ``Σ_n m1_n m1_nᵀ``.
    m2m1 : ndarray (d, d, d)
        ``Σ_n m2_n⊗m1_n``.
    m1cube : ndarray (d, d, d)
        ``Σ_n m1_n⊗m1_n⊗m1_n``.
    """

    n_used: int
    m1: np.ndarray
    m2: np.ndarray
    m3: np.ndarray
    m1m1: np.ndarray
    m2m1: np.ndarray
    m1cube: np.ndarray

    @property
    def dim(self) -> int:
        """Vocabulary size d."""
        return int(self.m1.shape[0])

    def __add__(self, other: "DenseMomentPartial") -> "DenseMomentPartial":
        if other.dim != self.dim:
            raise ValueError(f"cannot merge partials of vocabularies {self.dim} and {other.dim}")
        return DenseMomentPartial(self.n_used + other.n_used, self.m1 + other.m1, self.m2 + other.m2,
                                  self.m3 + other.m3, self.m1m1 + other.m1m1, self.m2m1 + other.m2m1,
                                  self.m1cube + other.m1cube)


def _as_counts(counts) -> sp.csr_matrix:
    """CSR float64 counts, validated as non-negative integers."""
    C = sp.csr_matrix(counts, dtype=np.float64)
    C.sum_duplicates()
    if C.nnz and (C.data.min() < 0 or not np.all(C.data == np.round(C.data))):
        raise ValueError("counts must be non-negative integers")
    return C


def _weighted_cubes(C: sp.csr_matrix, weights: np.ndarray) -> np.ndarray:
    """``Σ_n w_jn c_n⊗c_n⊗c_n`` for each weight column j of ``weights`` (n×J) → (J, d, d, d).

    Dense blocks of documents: one GEMM of the row-wise Khatri–Rao product
    ``C_b ⊙ C_b`` (b×d²) against the weighted ``C_b``; O(N d³) time.
    """
    n, d = C.shape
    J = weights.shape[1]
    out = np.zeros((d * d, J * d))
    block = max(1, _KR_FLOATS // (d * d))
    for s in range(0, n, block):
        Y = C[s:s + block].toarray()
        kr = (Y[:, :, None] * Y[:, None, :]).reshape(len(Y), d * d)
        wy = (weights[s:s + block, :, None] * Y[:, None, :]).reshape(len(Y), J * d)
        out += kr.T @ wy
    return out.reshape(d, d, J, d).transpose(2, 0, 1, 3).copy()


def dense_moment_partial(counts, max_entries: int = MAX_DENSE_M3_ENTRIES) -> DenseMomentPartial:
    """Dense LDA moment sums of one shard (small vocabularies only).

    Per document (weights ``w1, w2, w3`` of :func:`distdp.lda.moments.doc_weights`,
    zero for documents with < 3 tokens): ``m1 = w1 c``,
    ``m2 = w2 (c cᵀ − diag c)``,
    ``m3 = w3 (c⊗3 − sym3(diag(c)⊗c) + 2 Σ_i c_i e_i⊗3)``,
    ``m2⊗m1 = w1 w2 (c⊗3 − diag(c)⊗c)``, ``m1⊗3 = w1³ c⊗3``.

    Parameters
    ----------
    counts : sparse or dense (n, d) array of non-negative integer counts
    max_entries : int
        Refuse ``d³ > max_entries`` (:func:`check_dense_vocab`).

    Returns
    -------
    DenseMomentPartial
    """
    C = _as_counts(counts)
    d = check_dense_vocab(C.shape[1], max_entries)
    lengths = doc_lengths(C)
    w1, w2, w3 = doc_weights(lengths)
    cubes = _weighted_cubes(C, np.stack([w3, w1 * w2, w1 ** 3], axis=1))
    ct = C.T

    def gram(w):
        return np.asarray((ct @ sp.diags(w) @ C).todense())

    ar = np.arange(d)
    m3 = cubes[0]
    B3 = gram(w3)                                  # Σ w3 c cᵀ: the diag(c)⊗c corrections
    m3[ar, ar, :] -= B3
    m3[ar, :, ar] -= B3
    m3[:, ar, ar] -= B3.T
    m3[ar, ar, ar] += 2.0 * np.asarray(ct @ w3).ravel()
    m2m1 = cubes[1]
    m2m1[ar, ar, :] -= gram(w1 * w2)
    m2 = gram(w2) - np.diag(np.asarray(ct @ w2).ravel())
    return DenseMomentPartial(int(np.sum(lengths >= 3)), np.asarray(ct @ w1).ravel(), m2, m3,
                              gram(w1 * w1), m2m1, cubes[2])


def _check_n_docs(n_docs) -> int:
    if isinstance(n_docs, bool) or not isinstance(n_docs, (int, np.integer)) or n_docs < 3:
        raise ValueError(f"n_docs must be an integer ≥ 3 (the third moment averages over triples of distinct "
                         f"documents), got {n_docs!r}")
    return int(n_docs)


def _check_alpha0(alpha0) -> float:
    try:
        a = float(alpha0)
    except (TypeError, ValueError):
        raise ValueError(f"alpha0 must be a number ≥ 0, got {alpha0!r}") from None
    if not (math.isfinite(a) and a >= 0):
        raise ValueError(f"alpha0 must be finite and ≥ 0 (0 is the single-topic model), got {alpha0!r}")
    return a


def lda_moments(partial: DenseMomentPartial, alpha0: float, n_docs: int) -> tuple[np.ndarray, np.ndarray]:
    """The exactly unbiased LDA moments M2 (d×d) and M3 (d×d×d) from merged sums.

    Parameters
    ----------
    partial : DenseMomentPartial
        Sum of every shard's partial.
    alpha0 : float, ≥ 0
        Dirichlet concentration (0: single-topic model, no corrections).
    n_docs : int, ≥ 3
        The public normaliser N. Unbiased when ``N = partial.n_used``; in
        private mode a public (noisy) count: the sensitivities of this module
        assume the replaced document is one of N, N public, ``n_used ≤ N``.

    Returns
    -------
    M2, M3 : ndarray
        Symmetric (module docstring for the formulas).
    """
    N = float(_check_n_docs(n_docs))
    coef = MomentCoefficients(_check_alpha0(alpha0))
    s, Q = partial.m1, partial.m1m1
    M2 = partial.m2 / N - coef.a2 / (N * (N - 1.0)) * (np.outer(s, s) - Q)
    X = (partial.m2[:, :, None] * s[None, None, :] - partial.m2m1) / (N * (N - 1.0))
    sss = s[:, None, None] * s[None, :, None] * s[None, None, :]
    U3 = (sss - _sym3(Q[:, :, None] * s[None, None, :]) + 2.0 * partial.m1cube) / (N * (N - 1.0) * (N - 2.0))
    M3 = partial.m3 / N - coef.a3 * _sym3(X) + coef.b3 * U3
    return 0.5 * (M2 + M2.T), M3


# --------------------------------------------------------------------------- moment sensitivities

def m2_sensitivity(alpha0: float, n_docs: int) -> float:
    """ℓ2 (Frobenius) sensitivity of M2: ``Δ2 = (√2 + √6·a2)/N``, ``a2 = α0/(α0+1)``.

    Derivation (replace document x by y; ``P, Q`` their m2, ``u = m1_y − m1_x``;
    ``r = Σ_{m≠x} m1_m``, nonnegative with ``‖r‖₁ ≤ n_used − 1 ≤ N − 1``).

    * ``(1/N) Σ m2_n`` moves by ``(Q − P)/N``. P, Q are entrywise ≥ 0 with
      entry sum 1 (or 0 for a short document), so
      ``‖Q − P‖_F² ≤ ‖Q‖_F² + ‖P‖_F² ≤ ‖Q‖₁² + ‖P‖₁² ≤ 2``: at most ``√2/N``.
    * ``Σ_{n≠m} m1_n m1_mᵀ = s sᵀ − Σ m1_n m1_nᵀ`` moves by ``r uᵀ + u rᵀ``,
      whose squared Frobenius norm is ``2‖r‖²‖u‖² + 2(rᵀu)²``. With
      ``‖r‖₂ ≤ ‖r‖₁ ≤ N−1``, ``‖u‖₂² ≤ ‖m1_y‖² + ‖m1_x‖² ≤ 2`` and
      ``|rᵀu| ≤ max(rᵀm1_y, rᵀm1_x) ≤ ‖r‖∞ ≤ N−1`` this is ``≤ 6(N−1)²``;
      divided by ``N(N−1)`` and times ``a2``: ``√6·a2/N``. (Attained:
      ``r = (N−1)e1``, ``x = e2``-document, ``y = e1``-document. The cruder
      ``‖ruᵀ+urᵀ‖ ≤ 2‖r‖‖u‖`` gives ``√2(1+2a2)/N``.)

    The triangle inequality adds the two. The vector of unique entries
    (``i ≤ j``) is a sub-vector, so it moves by no more. At ``α0 = 0`` this
    is the single-topic ``√2/N``; for ``α0 > 0`` the √2/N bound fails
    (e.g. ≈ 1.82/N at α0 = 10 on the example above).
    """
    coef = MomentCoefficients(_check_alpha0(alpha0))
    return (_SQRT2 + _SQRT6 * coef.a2) / _check_n_docs(n_docs)


def m3_sensitivity(alpha0: float, n_docs: int) -> float:
    """ℓ2 (Frobenius) sensitivity of M3: ``Δ3 = √2 (1 + 6·a3 + 3·b3)/N``.

    Derivation (notation of :func:`m2_sensitivity`; ``R = Σ_{n≠x} m2_n`` and
    ``V = Σ_{m≠o, both ≠ x} m1_m⊗m1_o`` are entrywise ≥ 0 with
    ``‖R‖_F ≤ ‖R‖₁ ≤ N−1`` and ``‖V‖_F ≤ ‖V‖₁ ≤ (N−1)(N−2)``).

    * ``(1/N) Σ m3_n``: m3 is the distribution of ordered triples of distinct
      token positions (≥ 0, sum 1), so as for M2: ``√2/N``.
    * ``X = Σ_{n≠m} m2_n⊗m1_m / (N(N−1))`` moves by
      ``[(Q − P)⊗r + R⊗u] / (N(N−1))``, Frobenius
      ``≤ (√2(N−1) + (N−1)√2)/(N(N−1)) = 2√2/N``; ``sym3`` adds three
      permuted copies: ``a3·6√2/N``.
    * ``U3`` (ordered triples of distinct documents) moves by the triples
      holding the replaced document in one of three slots:
      ``u⊗V + (u in the middle) + V⊗u``, each of norm ``≤ √2(N−1)(N−2)``;
      divided by ``N(N−1)(N−2)``: ``b3·3√2/N``.

    Unique entries (``i ≤ j ≤ k``) move by no more. ``α0 = 0`` gives ``√2/N``.
    """
    coef = MomentCoefficients(_check_alpha0(alpha0))
    return _SQRT2 * (1.0 + 6.0 * coef.a3 + 3.0 * coef.b3) / _check_n_docs(n_docs)


def paper_delta2_delta3(alpha0: float, n_docs: int, as_printed: bool = False) -> tuple[float, float]:
    """The paper's ℓ1 sensitivities of M̂2 and M̂3 (App. G, Thms G.3 and G.4).

    ``Δ2 = 2/N + 4α0/(α0+1)·(1/N + 1/(N(N−1)))``,
    ``Δ3 = 2/N + 12α0/(α0+2)·(1/N + 1/(N(N−1)))
    + c_b·[6(N+1)/(N(N−2)) + 18/(N(N−1)(N−2)) + 6/(N−2)]``,
    where the b-part coefficient is printed as ``c_b = α0²/((α0+1)(α0+2))``;
    the correct estimator has ``b3 = 2α0²/((α0+1)(α0+2))``, so by default
    ``c_b`` is doubled (the paper's eq. 14 prints ``a3 = α0²/((α0+1)(α0+2))`` for b,
    corrected in :mod:`distdp.lda.moments`); ``as_printed=True`` gives the literal value.

    Both (even as printed) bound the ℓ1, hence the Frobenius, change of our
    estimator: its ℓ1 change is at most ``2/N + 4a2/N`` and
    ``2/N + 12a3/N + 6b3/N`` by the argument of :func:`m3_sensitivity` with
    ℓ1 norms (``‖Q−P‖₁, ‖u‖₁ ≤ 2``).
    """
    a = _check_alpha0(alpha0)
    N = float(_check_n_docs(n_docs))
    d2 = 2.0 / N + 4.0 * a / (a + 1.0) * (1.0 / N + 1.0 / (N * (N - 1.0)))
    cb = a * a / ((a + 1.0) * (a + 2.0)) * (1.0 if as_printed else 2.0)
    d3 = (2.0 / N + 12.0 * a / (a + 2.0) * (1.0 / N + 1.0 / (N * (N - 1.0)))
          + cb * (6.0 * (N + 1.0) / (N * (N - 2.0)) + 18.0 / (N * (N - 1.0) * (N - 2.0)) + 6.0 / (N - 2.0)))
    return d2, d3


# --------------------------------------------------------------------------- paper sensitivities (2-4)

def m3_l1_norm_bound(alpha0: float, n_docs: int) -> float:
    """The paper's eq. 65 bound on ``‖M̂3‖``: ``1 + 6α0/(α0+2)·N/(N−1) + 6α0²/((α0+1)(α0+2))·N²/((N−1)(N−2))``.

    It bounds our estimator too: ``‖M3‖_F ≤ ‖M3‖₁ ≤ 1 + 3a3 + b3`` (every
    averaged term is ≥ 0 with entry sum ≤ 1), and ``6a3 ≥ 3a3``,
    ``3b3 = 6α0²/((α0+1)(α0+2)) ≥ b3``.
    """
    a = _check_alpha0(alpha0)
    N = float(_check_n_docs(n_docs))
    return 1.0 + 6.0 * a / (a + 2.0) * N / (N - 1.0) + 6.0 * a * a / ((a + 1.0) * (a + 2.0)) * N * N / (
        (N - 1.0) * (N - 2.0))


def _half_gap_floor(sigma_k: float, sigma_k1: float) -> float:
    h = 0.5 * (sigma_k + sigma_k1)
    if not (sigma_k > 0 and h > 0):
        raise ValueError(f"the paper's whitened-tensor sensitivity needs σ_k > 0 and σ_k + σ_k+1 > 0 on M̂2, got "
                         f"σ_k = {sigma_k:.3g}, σ_k+1 = {sigma_k1:.3g}: too few documents for k topics")
    return h


def whitened_tensor_sensitivity(delta2: float, delta3: float, sigma_k: float, sigma_k1: float, k: int,
                                alpha0: float, n_docs: int) -> float:
    """The paper's ``ΔT̂`` (Thm G.6, eq. 67), plug-in eigenvalues of M̂2.

    ``ΔT̂ = B3 (2k)^{3/2} Δ2³ / (σ_k √h)³ + Δ3 k^{3/2} / h^{3/2}``,
    ``h = (σ_k + σ_{k+1})/2``, ``B3`` = :func:`m3_l1_norm_bound`.

    Valid (as the paper claims) only if ``Δ2 ≤ (σ_k − σ_{k+1})/2`` and the
    neighbour's whitening is ``Ŵ A D^{-1/2} Aᵀ``-aligned (App. G.5); note
    that eq. 63 writes ``M3(W,W,W) − M3(W′,W′,W′)`` as ``M3(W−W′, W−W′, W−W′)``,
    dropping the cross terms of the multilinear expansion, which are first
    order in ``‖W − W′‖``. Reproduced as printed: a paper claim.
    """
    h = _half_gap_floor(sigma_k, sigma_k1)
    first = m3_l1_norm_bound(alpha0, n_docs) * (2.0 * k) ** 1.5 * delta2 ** 3 / (sigma_k * math.sqrt(h)) ** 3
    return float(first + delta3 * k ** 1.5 / h ** 1.5)


def unwhitening_sensitivity(delta2: float, sigma_1: float, sigma_k: float, sigma_k1: float, k: int) -> float:
    """Sensitivity of ``M2 W`` (= ``U S^{1/2}``, the un-whitening ``(W†)ᵀ``), d×k, Frobenius.

    ``M2W − M2′W′ = (M2 − M2′)W + M2′(W − W′)``, so
    ``Δ ≤ Δ2 ‖W‖₂ + (‖M2‖₂ + Δ2) ‖W − W′‖_F`` with ``‖W‖₂ = σ_k^{-1/2}`` and
    ``‖W − W′‖_F ≤ √(2k) Δ2 / (σ_k √h)`` (Thm G.5, under its condition and
    alignment), ``h = (σ_k + σ_{k+1})/2``; ``sigma_1`` is ``‖M2‖₂``. The
    paper's App. G.8 uses ``‖W† − W′†‖ ≤ √σ_1 Δ2/σ_k`` (spectral norm).
    """
    h = _half_gap_floor(sigma_k, sigma_k1)
    g5 = math.sqrt(2.0 * k) * delta2 / (sigma_k * math.sqrt(h))
    return float(delta2 / math.sqrt(sigma_k) + (sigma_1 + delta2) * g5)


def eigengap(eigenvalues: np.ndarray) -> float:
    """``γ_s = min_i (λ_i − λ_{i+1})/4`` over the decreasing eigenvalues of T̂, with ``λ_{k+1} = 0``."""
    lam = np.sort(np.abs(np.asarray(eigenvalues, dtype=float)))[::-1]
    return float(np.min(lam - np.append(lam[1:], 0.0)) / 4.0)


def component_sensitivity(delta_t: float, gamma_s: float, k: int) -> float:
    """Per-component sensitivity of the decomposition output (Thm G.7): ``2√k ΔT̂/γ_s``.

    The same for each eigenvector ``v̄_i`` (ℓ2) and eigenvalue ``λ̄_i``. (The
    paper's App. H.2 calibrates with ``√(2k) ΔT̂/γ_s``; we use G.7's value.)
    """
    if not gamma_s > 0:
        raise ValueError(f"the eigengap γ_s of the whitened tensor is {gamma_s:.3g} ≤ 0: the paper's "
                         "decomposition sensitivity is unbounded (equal tensor eigenvalues)")
    return 2.0 * math.sqrt(k) * delta_t / gamma_s


def output_sensitivities(delta_comp: float, delta2: float, sigma_1: float, sigma_k: float, lam: np.ndarray,
                         alpha0: float) -> tuple[float, float]:
    """Per-topic sensitivities ``(Δμ, Δα)`` of the final output (configuration 4).

    ``Δμ`` is Thm G.8's expression,
    ``c [λ_1 √σ_1 Δλ̄ + λ_1 (√σ_1/σ_k) Δ2 + √(σ_1 + Δ2) Δλ̄]`` with
    ``Δλ̄ = Δv̄`` = :func:`component_sensitivity`, ``λ_1`` the largest tensor
    eigenvalue and ``c`` the recovery scale ``μ_i = c λ_i U S^{1/2} v_i``:
    ``c = (α0+2)/2`` (LDA) or 1 (α0 = 0). The paper prints
    ``c = (α0+2)/(2√(α0(α0+1)))``: its ``1/√α_i`` misses the factor
    ``√(α0(α0+1))`` of Lemma 3.2's ``M2 = Σ α_i/(α0(α0+1)) μ_i μ_iᵀ``.

    ``Δα``: the paper derives none. ``α_i = κ/λ_i²`` (``κ = 4α0(α0+1)/(α0+2)²``,
    or 1 at α0 = 0); by the mean value theorem, for ``|λ − λ′| ≤ Δλ̄ < λ_k``,
    ``|α − α′| ≤ 2κ Δλ̄ / (λ_k − Δλ̄)³``. ``Δλ̄ < λ_k`` follows from the
    paper's own condition ``ΔT̂ < γ_s λ_k/(2√k)``; otherwise α is unbounded
    and this raises.

    Raises
    ------
    ValueError
        If ``Δλ̄ ≥ λ_k`` (Δα unbounded).
    """
    lam = np.sort(np.abs(np.asarray(lam, dtype=float)))[::-1]
    a = _check_alpha0(alpha0)
    c = (a + 2.0) / 2.0 if a > 0 else 1.0
    kappa = 4.0 * a * (a + 1.0) / (a + 2.0) ** 2 if a > 0 else 1.0
    d_mu = c * (lam[0] * math.sqrt(sigma_1) * delta_comp + lam[0] * math.sqrt(sigma_1) / sigma_k * delta2
                + math.sqrt(sigma_1 + delta2) * delta_comp)
    if not delta_comp < lam[-1]:
        raise ValueError(f"config4: the eigenvalue sensitivity {delta_comp:.3g} is ≥ the smallest tensor eigenvalue "
                         f"{lam[-1]:.3g} (the paper's condition ΔT̂ < γ_s λ_k/(2√k) fails), so α = κ/λ² has "
                         "unbounded sensitivity: use more documents or another configuration")
    return float(d_mu), float(2.0 * kappa * delta_comp / (lam[-1] - delta_comp) ** 3)


# --------------------------------------------------------------------------- configuration 2 under declared bounds

#: Share of ε spent on the private test of declared bounds (propose-test-release).
PTR_EPSILON_SHARE = 0.1
#: Share of δ reserved for the test's failure probability.
PTR_DELTA_SHARE = 0.5


@dataclass(frozen=True)
class DeclaredBounds:
    """Public bounds on the corpus's moments, declared by the user for configuration 2 with a guarantee.

    The whitened-tensor release is private only where the corpus meets them;
    :func:`fit_dense` checks that privately (:func:`bounds_margin`,
    propose-test-release) before releasing anything that depends on them.

    Attributes
    ----------
    sigma_k : float
        ``λ_k(M̂2) ≥ sigma_k`` (the k-th largest eigenvalue).
    gap : float
        ``λ_i(M̂2) − λ_{i+1}(M̂2) ≥ gap`` for every ``i = 1..k``: each of the
        top-k eigenvectors is determined up to sign.
    sigma_1 : float
        ``λ_1(M̂2) ≤ sigma_1``.
    m3_norm : float
        ``‖M̂3‖_F ≤ m3_norm``.
    """

    sigma_k: float
    gap: float
    sigma_1: float
    m3_norm: float

    def __post_init__(self):
        for name in _BOUND_NAMES:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not (
                    math.isfinite(v) and v > 0):
                raise ValueError(f"declared bound {name} must be a finite number > 0, got {v!r}")
        if self.sigma_1 < self.sigma_k:
            raise ValueError(f"declared bounds: sigma_1 = {self.sigma_1:g} is below sigma_k = {self.sigma_k:g}")

    @classmethod
    def from_model(cls, topic_word: np.ndarray, alpha: np.ndarray, margin: float = 2.0) -> "DeclaredBounds":
        """Bounds from a public model (e.g. fitted on a public corpus), loosened by ``margin``.

        The model's population moments ``M2 = Σ_i c2_i μ_i μ_iᵀ``,
        ``M3 = Σ_i c3_i μ_i^{⊗3}`` (``c2_i = α_i/(α0(α0+1))``,
        ``c3_i = 2α_i/(α0(α0+1)(α0+2))``, α0 = Σα; the single-topic model's
        weights when α0 = 0 is meant: pass ``alpha`` summing to 1 and read
        the LDA form as an approximation) give ``σ_k/margin``, ``gap/margin``
        (with ``λ_{k+1} = 0``), ``σ_1·margin`` and ``‖M3‖_F·margin``. The
        declaration is public; whether the private corpus meets it is what
        the private test checks.
        """
        mu = np.asarray(topic_word, dtype=np.float64)
        a = np.asarray(alpha, dtype=np.float64)
        if mu.ndim != 2 or a.shape != (mu.shape[0],) or not np.all(a > 0) or not float(margin) >= 1.0:
            raise ValueError("from_model needs topic_word (k×d), alpha (k,) > 0 and margin ≥ 1")
        a0 = a.sum()
        c2, c3 = a / (a0 * (a0 + 1.0)), 2.0 * a / (a0 * (a0 + 1.0) * (a0 + 2.0))
        G = mu @ mu.T                                              # μ_iᵀμ_j
        lam = np.sort(np.linalg.eigvalsh(np.sqrt(c2)[:, None] * G * np.sqrt(c2)[None, :]))[::-1]
        lam = np.append(lam, 0.0)
        m3 = math.sqrt(max(float(c3 @ (G ** 3) @ c3), 0.0))
        return cls(float(lam[-2] / margin), float((lam[:-1] - lam[1:]).min() / margin), float(lam[0] * margin),
                   float(m3 * margin))

    @classmethod
    def parse(cls, text: str) -> "DeclaredBounds":
        """From ``"sigma_k=2e-3,gap=1e-4,sigma_1=0.05,m3_norm=0.01"`` (the CLI's ``--declared-bounds``)."""
        fields = {}
        for part in str(text).split(","):
            name, sep, value = part.partition("=")
            name = name.strip()
            if not sep or name not in _BOUND_NAMES or name in fields:
                raise ValueError(f"declared bounds must be sigma_k=…,gap=…,sigma_1=…,m3_norm=… (each once), "
                                 f"got {text!r}")
            try:
                fields[name] = float(value)
            except ValueError:
                raise ValueError(f"declared bound {name}: {value.strip()!r} is not a number") from None
        missing = set(_BOUND_NAMES) - set(fields)
        if missing:
            raise ValueError(f"declared bounds: missing {', '.join(sorted(missing))} in {text!r}")
        return cls(**fields)


#: The declared bounds' names, in the order of their fields (and of the CLI text).
_BOUND_NAMES = tuple(f.name for f in dataclasses.fields(DeclaredBounds))


def declared_sensitivities(bounds: DeclaredBounds, delta2: float, delta3: float, k: int) -> tuple[float, float]:
    """Sound sensitivities ``(ΔT, ΔZ)`` of ``T = M̂3(W,W,W)`` and ``Z = M̂2 W`` where ``bounds`` hold.

    ``W = U Λ^{-1/2}`` from the top-k eigenpairs of M̂2, with the signs of
    the neighbour's eigenvectors aligned to ours (:func:`fit_dense` draws the
    signs at random, which makes the alignment free: see there). For a
    corpus meeting ``bounds`` (``s = sigma_k``, ``g = gap``, ``L = sigma_1``,
    ``F = m3_norm``) and a neighbour (``‖ΔM2‖_op ≤ ‖ΔM2‖_F ≤ Δ2``,
    ``‖ΔM3‖_F ≤ Δ3``):

    * Weyl: ``|λ_i − λ_i′| ≤ Δ2``, so ``λ_k′ ≥ s − Δ2`` and
      ``‖W′‖ ≤ r = (s − Δ2)^{-1/2}``, ``‖W‖ ≤ s^{-1/2}``;
    * Davis–Kahan (Yu, Wang & Samworth 2015, Cor. 1): each top-k
      eigenvector has both neighbouring gaps ≥ g, so with aligned signs
      ``‖u_i − u_i′‖ ≤ e = 2√2 Δ2/g``;
    * columns of W: ``‖w_i − w_i′‖ ≤ e s^{-1/2} + Δ2 r³/2 = ω`` (mean value
      theorem on ``x^{-1/2}``), so ``‖W − W′‖_F ≤ √k ω``;
    * ``T − T′ = ΔM3(W′,W′,W′) + M̂3(W−W′, W, W) + M̂3(W′, W−W′, W) + M̂3(W′, W′, W−W′)``
      (exact multilinear expansion; ``‖A(X,Y,Z)‖_F ≤ ‖A‖_F‖X‖‖Y‖‖Z‖``):
      ``ΔT = Δ3 r³ + F √k ω (1/s + r/√s + r²)``;
    * ``Z = U Λ^{1/2}``: ``‖z_i − z_i′‖ ≤ √L e + Δ2 r/2``, so
      ``ΔZ = √k (√L e + Δ2 r/2)``.

    Both bound the unique entries too (a sub-vector of the symmetric
    tensor's entries). Unlike the paper's Thm G.6 these keep the
    first-order cross terms, which dominate.

    Raises
    ------
    ValueError
        If ``sigma_k ≤ Δ2`` (a neighbour's M̂2 could have ``λ_k ≤ 0``).
    """
    s, g, L, F = bounds.sigma_k, bounds.gap, bounds.sigma_1, bounds.m3_norm
    if not s > delta2:
        raise ValueError(f"declared sigma_k = {s:.4g} must exceed the M2 sensitivity Δ2 = {delta2:.4g}: "
                         "too few documents for a whitening whose neighbour stays positive definite")
    r = 1.0 / math.sqrt(s - delta2)
    e = 2.0 * _SQRT2 * delta2 / g
    omega = e / math.sqrt(s) + 0.5 * delta2 * r ** 3
    d_t = delta3 * r ** 3 + F * math.sqrt(k) * omega * (1.0 / s + r / math.sqrt(s) + r * r)
    d_z = math.sqrt(k) * (math.sqrt(L) * e + 0.5 * delta2 * r)
    return float(d_t), float(d_z)


def bounds_margin(eigenvalues: np.ndarray, m3_frobenius: float, bounds: DeclaredBounds, delta2: float,
                  delta3: float, k: int) -> int:
    """Documents to replace before the corpus can violate ``bounds``: a lower bound, 1-Lipschitz.

    ``min(⌊(λ_k − s)/Δ2⌋, ⌊(min_{i≤k}(λ_i − λ_{i+1}) − g)/(2Δ2)⌋, ⌊(L − λ_1)/Δ2⌋, ⌊(F − ‖M̂3‖_F)/Δ3⌋)``
    over the descending ``eigenvalues`` of M̂2: replacing a document moves
    each eigenvalue by ≤ Δ2 (Weyl), each gap by ≤ 2Δ2 and ``‖M̂3‖_F`` by ≤ Δ3,
    so each term, and their minimum, changes by at most 1 between neighbours
    (the sensitivity of the propose-test-release test), and a corpus with a
    margin ≥ 0 meets every bound.
    """
    lam = np.asarray(eigenvalues, dtype=np.float64)
    gaps = lam[:k] - lam[1:k + 1]
    terms = ((lam[k - 1] - bounds.sigma_k) / delta2, (gaps.min() - bounds.gap) / (2.0 * delta2),
             (bounds.sigma_1 - lam[0]) / delta2, (bounds.m3_norm - float(m3_frobenius)) / delta3)
    return int(math.floor(min(terms)))


def ptr_threshold(epsilon0: float, delta0: float) -> float:
    """Pass the test when ``margin + Laplace(1/ε0)`` exceeds ``ln(1/(2δ0))/ε0``.

    A corpus that violates the bounds has margin ≤ −1, so it passes with
    probability ``½ exp(−ε0 (threshold + 1)) < δ0`` (Dwork & Lei 2009).
    """
    return math.log(1.0 / (2.0 * delta0)) / epsilon0


# --------------------------------------------------------------------------- budget

@dataclass(frozen=True)
class _Stage:
    """One edge of the data-flow graph: ``count`` releases sharing one noise multiplier."""

    name: str
    count: int
    kind: str = "gaussian"          # or "pure" (the ℓ2 vector mechanism)


@dataclass(frozen=True)
class _Plan:
    """Noise multipliers (Gaussian) or ε (pure) per stage, and the paper split's (ε_i, δ_i)."""

    multiplier: dict
    pure_epsilon: dict
    split: tuple


def _calibrate_against_pure(epsilon: float, delta: float, eps_pure: float, pure=None) -> float:
    """Smallest Gaussian multiplier m with PLD ε(Gaussian(m) ∘ pure) ≤ epsilon at delta.

    ``pure`` is an ``eps_pure``-DP event (default the generic one of
    :func:`~distdp.privacy.accounting.pure_dp_event`).
    """
    pure = acct.pure_dp_event(eps_pure) if pure is None else pure

    def gap(m):
        return acct.epsilon_pld(acct.compose(acct.gaussian_event(m), pure), delta) - epsilon

    lo = mechanisms.analytic_gaussian_sigma(epsilon, delta, 1.0)     # no room left for the pure stage
    hi = mechanisms.analytic_gaussian_sigma(epsilon - eps_pure, delta, 1.0)  # basic composition: feasible
    while gap(hi) > 0:
        lo, hi = hi, hi * 1.5
    if gap(lo) <= 0:
        return lo
    m = float(optimize.brentq(gap, lo, hi, xtol=hi * 1e-7))
    while gap(m) > 0:
        m *= 1 + 1e-7
    return m


def _plan(stages: list[_Stage], epsilon: float, delta: float, accounting: str, test: tuple | None = None) -> _Plan:
    """Split (ε, δ) over the stages.

    ``paper``: ε equally over the stages, δ equally over the Gaussian stages
    (basic composition; AVN's pure stage gets δ = 0), each stage calibrated
    by the analytic Gaussian mechanism for its ``count`` releases (exact: they
    compose to one Gaussian with multiplier m/√count). ``tight``: Gaussian
    stages share one PLD-calibrated Gaussian budget equally (``1/m² = Σ
    count_i/m_i²``); a pure stage keeps ε/2 and the Gaussians are calibrated
    by PLD against it.

    ``test = (name, ε0, δ0, event)``: a propose-test-release check first
    (:func:`ptr_threshold`). Paper accounting gives it (ε0, δ0) and splits
    the rest; tight accounting calibrates the Gaussians by PLD against its
    ``event`` at ``δ − δ0`` (δ0 is reserved in the ledger).
    """
    gauss = [s for s in stages if s.kind == "gaussian"]
    pure = [s for s in stages if s.kind == "pure"]
    mult, peps, split = {}, {}, []
    if test is not None:
        if pure:
            raise ValueError("a tested stage cannot be combined with a pure-ε stage")  # pragma: no cover
        name, eps0, delta0, event = test
        if accounting == "paper":
            plan = _plan(stages, epsilon - eps0, delta - delta0, accounting)
            return _Plan(plan.multiplier, {}, ((name, eps0, delta0),) + plan.split)
        m = _calibrate_against_pure(epsilon, delta - delta0, eps0, event)
        return _Plan({s.name: m * math.sqrt(len(gauss) * s.count) for s in gauss}, {}, ())
    if accounting == "paper":
        for s in stages:
            e_i = epsilon / len(stages)
            d_i = delta / len(gauss) if s.kind == "gaussian" else 0.0
            split.append((s.name, e_i, d_i))
            if s.kind == "gaussian":
                mult[s.name] = math.sqrt(s.count) * mechanisms.analytic_gaussian_sigma(e_i, d_i, 1.0)
            else:
                peps[s.name] = e_i
        return _Plan(mult, peps, tuple(split))
    if pure:
        for s in pure:
            peps[s.name] = epsilon / (2.0 * len(pure))
        m = _calibrate_against_pure(epsilon, delta, epsilon / 2.0)
    else:
        m = acct.calibrate_gaussian_multiplier(epsilon, delta, 1, "pld")
    for s in gauss:
        mult[s.name] = m * math.sqrt(len(gauss) * s.count)
    return _Plan(mult, peps, ())


def _gaussian(ctx: "_Ctx", plan: _Plan, stage: _Stage, sensitivity: float, note: str, value: np.ndarray,
              form: str = "plain") -> np.ndarray:
    """``value`` + the planned Gaussian noise of ``stage`` (σ = multiplier × ``sensitivity``), recorded.

    ``form``: ``"plain"`` (every entry), ``"matrix"`` / ``"tensor"`` (the
    unique entries of a symmetric matrix / 3-tensor, mirrored).
    """
    m = plan.multiplier[stage.name]
    sigma = m * sensitivity
    add = {"plain": ctx.releases.gaussian, "matrix": ctx.releases.symmetric_matrix,
           "tensor": ctx.releases.symmetric_tensor}[form]
    return add(stage.name, value, sigma, float(sensitivity), multiplier=m, count=stage.count, note=note,
               noise_scale=float(sigma))


# --------------------------------------------------------------------------- results

@dataclass(frozen=True)
class DenseLDAResult:
    """A (private) dense spectral LDA fit.

    Attributes
    ----------
    topic_word : ndarray (k, d)
        Rows ≥ 0 summing to 1, sorted by decreasing α.
    alpha : ndarray (k,)
        Dirichlet parameters (topic weights for α0 = 0).
    ledger : PrivacyLedger or None
        Every release (None for the non-private fit).
    mechanism : str
    guarantee : str
        :data:`PROVEN`, :data:`PAPER_CLAIM` or :data:`NO_GUARANTEE`.
    assumptions : list of str
        What the guarantee (or claim) rests on.
    notes : list of str
    epsilon, delta : float
        Requested budget.
    epsilon_spent : float
        Tight: the ledger's PLD ε at δ (≤ ε). Paper: the basic-composition
        total of the stage split (= ε).
    accounting : str
    stage_budgets : tuple of (stage, ε_i, δ_i)
        The paper split (empty for tight accounting).
    eigenvalues : ndarray (k,) or None
        Tensor eigenvalues used for recovery, computed from released quantities
        (None for config4, whose exact eigenvalues are not released).
    """

    topic_word: np.ndarray
    alpha: np.ndarray
    ledger: PrivacyLedger | None
    mechanism: str
    guarantee: str
    assumptions: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    epsilon: float = math.inf
    delta: float = 0.0
    epsilon_spent: float = math.inf
    accounting: str = "tight"
    stage_budgets: tuple = ()
    eigenvalues: np.ndarray | None = None

    @property
    def privacy(self) -> PrivacyReport:
        """The fit's :class:`~distdp.privacy.report.PrivacyReport`.

        Private only when :attr:`guarantee` is :data:`PROVEN`; ``epsilon`` is
        :attr:`epsilon_spent`, the request in ``requested_epsilon``. Details:
        ``guarantee``, ``stage_budgets`` and ``alpha``.
        """
        proven = self.guarantee == PROVEN
        details = {"guarantee": self.guarantee, "stage_budgets": [list(s) for s in self.stage_budgets],
                   "alpha": [float(a) for a in self.alpha]}
        if self.ledger is None:
            return PrivacyReport(private=False, mechanism=self.mechanism, neighbour=REPLACE_ONE_DOCUMENT,
                                 not_private_because=(self.guarantee,), assumptions=tuple(self.assumptions),
                                 notes=tuple(self.notes), details=details)
        return PrivacyReport(
            private=proven, mechanism=self.mechanism, neighbour=REPLACE_ONE_DOCUMENT, epsilon=self.epsilon_spent,
            delta=self.delta, requested_epsilon=self.epsilon, requested_delta=self.delta, accounting=self.accounting,
            not_private_because=() if proven else (self.guarantee,), assumptions=tuple(self.assumptions),
            notes=tuple(self.notes), ledger=self.ledger, details=details)

    def to_dict(self) -> dict:
        """JSON-ready privacy report (:attr:`privacy`; no arrays of size d)."""
        return self.privacy.to_dict()


# --------------------------------------------------------------------------- pipeline pieces

def _spectrum(M2: np.ndarray, k: int) -> tuple[Whitening, np.ndarray]:
    """Top-k whitening of the exact M2 and all its eigenvalues (descending)."""
    vals = np.sort(np.linalg.eigvalsh(0.5 * (M2 + M2.T)))[::-1]
    try:
        return dense_top_eigh(M2, k), vals
    except ValueError as err:
        raise ValueError(f"cannot whiten the (non-noisy) M2: {err}") from None


def _model(alpha0: float) -> str:
    return "lda" if alpha0 > 0 else "stm"


def _decompose(T, k, gen, n_restarts, n_iters) -> power.PowerResult:
    return power.robust_power_method(T, k, n_restarts=n_restarts, n_iters=n_iters, rng=gen)


def _raw_output(lam: np.ndarray, V: np.ndarray, unwhiten: np.ndarray, alpha0: float):
    """Un-clipped ``μ_i = c λ_i (W†)ᵀ v_i`` (rows, k×d) and ``α_i = κ/λ_i²`` (as in :func:`recover_parameters`)."""
    sign = np.sign(np.where(lam == 0, 1.0, lam))
    lam, V = np.abs(lam), V * sign[None, :]
    if alpha0 > 0:
        c, kappa = (alpha0 + 2.0) / 2.0, 4.0 * alpha0 * (alpha0 + 1.0) / (alpha0 + 2.0) ** 2
    else:
        c, kappa = 1.0, 1.0
    return ((unwhiten @ V) * (c * lam)[None, :]).T, kappa / lam ** 2


@dataclass
class _Fit:
    """What a mechanism hands back to :func:`fit_dense`."""

    topic_word: np.ndarray
    alpha: np.ndarray
    eigenvalues: np.ndarray | None
    notes: list
    assumptions: list


def _finish_recovery(res_lam, res_V, unwhiten, alpha0, notes, assumptions) -> _Fit:
    tw, al = recover_parameters(res_lam, res_V, unwhiten, alpha0, model=_model(alpha0))
    return _Fit(tw, al, np.asarray(res_lam, dtype=float), notes, assumptions)


# --------------------------------------------------------------------------- mechanisms

@dataclass(frozen=True)
class _Ctx:
    """Inputs every mechanism needs."""

    M2: np.ndarray
    M3: np.ndarray
    k: int
    alpha0: float
    n_docs: int
    delta2: float
    delta3: float
    gen: np.random.Generator
    n_restarts: int | None
    n_iters: int | None
    releases: PrivateReleases


def _noisy_m2(ctx: _Ctx, plan: _Plan, stage: _Stage, note: str) -> np.ndarray:
    return _gaussian(ctx, plan, stage, ctx.delta2, note, ctx.M2, "matrix")


def _noisy_m3(ctx: _Ctx, plan: _Plan, stage: _Stage) -> np.ndarray:
    d = ctx.M3.shape[0]
    if stage.kind == "pure":
        eps = plan.pure_epsilon[stage.name]
        beta = mechanisms.l2_vector_beta(eps, ctx.delta3)
        return ctx.releases.symmetric_tensor_l2(
            stage.name, ctx.M3, beta, float(ctx.delta3), eps,
            note=f"density ∝ exp(−β‖b‖₂), β = ε/Δ3 = {beta:.6g} on the {mechanisms.n_unique_entries(d)} unique "
                 f"entries of M3 (AVN): pure ε = {eps:g}, accounted as a generic (ε, 0) event (binary randomized "
                 "response)")
    return _gaussian(ctx, plan, stage, ctx.delta3,
                     f"Gaussian noise on the {mechanisms.n_unique_entries(d)} unique entries of M3", ctx.M3, "tensor")


def _moment_noise(ctx: _Ctx, plan, stages, paper_two_m2: bool) -> _Fit:
    """config1 / config1-paper / AGN / AVN: noise on M2 (and a second M2) and M3, then post-processing."""
    note = f"symmetric Gaussian noise on the {ctx.M2.shape[0] * (ctx.M2.shape[0] + 1) // 2} unique entries of M2"
    m2a = _noisy_m2(ctx, plan, stages[0], note + (" (for W)" if paper_two_m2 else " (for W and W†)"))
    if paper_two_m2:
        m2b = _noisy_m2(ctx, plan, stages[1], note + " (for W†)")
    m3n = _noisy_m3(ctx, plan, stages[-1])
    wh = whiten_noisy(m2a, ctx.k)
    notes = []
    if paper_two_m2:
        whb = whiten_noisy(m2b, ctx.k)
        # W† from the second noisy M2, aligned with W: (M̃2b)_k W (= U S^½ when the two agree).
        unwhiten = whb.eigenvectors @ (whb.eigenvalues[:, None] * (whb.eigenvectors.T @ wh.W))
        notes.append("W† from the second noisy M2 as (M̃2b)_k·W (rank-k truncation applied to W, post-processing): "
                     "the paper's Σ^½Uᵀ of an independent eigendecomposition has arbitrary signs/rotation "
                     "relative to W")
    else:
        unwhiten = wh.unwhiten
        notes.append("one noisy M2 serves both W and W† (post-processing)")
    res = _decompose(whiten_tensor(m3n, wh.W), ctx.k, ctx.gen, ctx.n_restarts, ctx.n_iters)
    return _finish_recovery(res.eigenvalues, res.eigenvectors, unwhiten, ctx.alpha0, notes, [])


def _paper_assumptions(delta2_name: str) -> list[str]:
    return [f"Δ2 ≤ (σ_k − σ_k+1)/2 on the plug-in eigenvalues of M̂2 (Thm G.5; Δ2 = {delta2_name}), unchecked",
            "N σ_k(M̂2)^1.5 ≥ 1 (Thm G.6), unchecked",
            "eigenvector alignment of App. G.5: the neighbour's whitening is Ŵ A D^(-1/2) Aᵀ (an eigensolver "
            "does not return it; near-equal top eigenvalues break it)",
            "the sensitivities are functions of private quantities (σ_1, σ_k, σ_k+1 of M̂2; λ and γ_s of T̂), used "
            "as plug-ins without a private check (Thms G.5–G.8); the ledger's sensitivities and noise scales "
            "(and these notes) reveal them, outside any guarantee",
            "Thm G.6 as printed: eq. 63 drops the cross terms of M3(W,W,W) − M3(W′,W′,W′)"]


def _whitened_setup(ctx: _Ctx):
    """Exact whitening, T̂, ΔT̂ (G.6) and the un-whitening sensitivity."""
    wh, vals = _spectrum(ctx.M2, ctx.k)
    s1, sk, sk1 = float(np.max(np.abs(vals))), float(vals[ctx.k - 1]), float(vals[ctx.k])
    dT = whitened_tensor_sensitivity(ctx.delta2, ctx.delta3, sk, sk1, ctx.k, ctx.alpha0, ctx.n_docs)
    dZ = unwhitening_sensitivity(ctx.delta2, s1, sk, sk1, ctx.k)
    return wh, whiten_tensor(ctx.M3, wh.W), dT, dZ, s1, sk


def _noisy_unwhiten(ctx, wh, dZ, plan, stage) -> np.ndarray:
    """Release ``Z = M2 W + G`` (d×k), the un-whitening aligned with W."""
    return _gaussian(ctx, plan, stage, dZ, "Gaussian noise on M2·W (= U S^½, the un-whitening aligned with W); "
                                           "sensitivity Δ2/√σ_k + (‖M2‖+Δ2)·G.5 bound", ctx.M2 @ wh.W)


def _config2(ctx: _Ctx, plan, stages, dname) -> _Fit:
    wh, T, dT, dZ, _, _ = _whitened_setup(ctx)
    Tn = _gaussian(ctx, plan, stages[0], dT, f"Gaussian noise on the {mechanisms.n_unique_entries(ctx.k)} unique "
                                             "entries of T̂ = M3(W,W,W); ΔT̂ of Thm G.6 eq. 67", T, "tensor")
    Z = _noisy_unwhiten(ctx, wh, dZ, plan, stages[1])
    res = _decompose(Tn, ctx.k, ctx.gen, ctx.n_restarts, ctx.n_iters)
    return _finish_recovery(res.eigenvalues, res.eigenvectors, Z, ctx.alpha0,
                            [f"ΔT̂ = {dT:.4g}, Δ(M2W) = {dZ:.4g} (plug-in, private)"], _paper_assumptions(dname))


def _config2_declared(ctx: _Ctx, plan, stages, ledger, bounds: DeclaredBounds, test: tuple) -> _Fit:
    """Configuration 2 with a guarantee: a private test of ``bounds``, then noise from :func:`declared_sensitivities`.

    Propose-test-release (Dwork & Lei 2009): the margin of
    :func:`bounds_margin` (sensitivity 1) is released with Laplace noise of
    scale 1/ε0; below :func:`ptr_threshold` the fit stops with an error and
    nothing else is released. Otherwise ``T = M̂3(WS,WS,WS)`` and
    ``Z = M̂2 WS`` are released with Gaussian noise for the sensitivities of
    :func:`declared_sensitivities`, where ``S`` is a uniformly random sign
    per column. The random signs are what make the aligned-sign bounds
    sound: a neighbour's eigensolver may return any signs, but the release
    is the uniform mixture over S of Gaussians whose components pair up
    (``S`` with ``S·s*``, ``s*`` the alignment) at distance within the
    bounds, and the hockey-stick divergence is jointly convex, so the
    mixture is at least as private as each pair. Corpora that violate the
    bounds pass the test with probability < δ0 (reserved in the ledger).
    """
    name, eps0, delta0, _ = test
    vals, vecs = np.linalg.eigh(0.5 * (ctx.M2 + ctx.M2.T))       # ascending; one decomposition serves both
    margin = bounds_margin(vals[::-1], float(np.linalg.norm(ctx.M3)), bounds, ctx.delta2, ctx.delta3, ctx.k)
    threshold = ptr_threshold(eps0, delta0)
    noisy_margin = float(ctx.releases.laplace(
        name, margin, 1.0 / eps0, 1.0, event=acct.laplace_event(1.0 / eps0),
        note=f"propose-test-release: documents to replace before the corpus violates the declared bounds "
             f"(sensitivity 1) + Laplace(1/ε0); passes above ln(1/(2δ0))/ε0 = {threshold:.4g}; δ0 = {delta0:.3g} "
             "reserved"))
    ledger.reserve_delta(delta0)
    if not noisy_margin > threshold:
        raise BudgetNotMetError(f"config2: the private test of the declared bounds failed (noisy margin "
                                f"{noisy_margin:.3g} ≤ {threshold:.3g} documents): this corpus does not meet "
                                f"{bounds} with a margin of ~{threshold:.0f} documents; declare looser bounds "
                                "(a smaller sigma_k, gap; a larger sigma_1, m3_norm) or use config1")
    d_t, d_z = declared_sensitivities(bounds, ctx.delta2, ctx.delta3, ctx.k)
    wh = top_k_from_symmetric(vals, vecs, ctx.k)
    W = wh.W * ctx.gen.choice([-1.0, 1.0], size=ctx.k)[None, :]
    Tn = _gaussian(ctx, plan, stages[0], d_t, f"Gaussian noise on the {mechanisms.n_unique_entries(ctx.k)} unique "
                                              "entries of T̂ = M3(WS,WS,WS), S random signs; ΔT from the declared "
                                              "bounds (declared_sensitivities)", whiten_tensor(ctx.M3, W), "tensor")
    Z = _gaussian(ctx, plan, stages[1], d_z, "Gaussian noise on M2·WS (the un-whitening aligned with WS); ΔZ from "
                                             "the declared bounds", ctx.M2 @ W)
    res = _decompose(Tn, ctx.k, ctx.gen, ctx.n_restarts, ctx.n_iters)
    return _finish_recovery(res.eigenvalues, res.eigenvectors, Z, ctx.alpha0,
                            [f"ΔT = {d_t:.4g}, Δ(M2W) = {d_z:.4g} from the declared bounds (public)"],
                            [f"declared bounds {bounds}, checked by a private test (propose-test-release, "
                             f"ε0 = {eps0:.3g}, δ0 = {delta0:.3g})",
                             "the neighbour's eigenvector signs are aligned by the random signs S (a mixture "
                             "argument), not assumed"])


def _exact_decomposition(ctx: _Ctx):
    wh, T, dT, dZ, s1, sk = _whitened_setup(ctx)
    res = _decompose(T, ctx.k, ctx.gen, ctx.n_restarts, ctx.n_iters)
    lam, V = res.eigenvalues, res.eigenvectors
    sign = np.sign(np.where(lam == 0, 1.0, lam))
    lam, V = np.abs(lam), V * sign[None, :]
    order = np.argsort(-lam, kind="stable")
    lam, V = lam[order], V[:, order]
    d_comp = component_sensitivity(dT, eigengap(lam), ctx.k)
    return wh, lam, V, dT, dZ, s1, sk, d_comp


def _decomposition_assumptions(dname) -> list[str]:
    return _paper_assumptions(dname) + [
        "ΔT̂ ≤ γ_s λ_k(T̂)/(2√k) (Thm 4.3, Thm 1 of [18]), unchecked",
        "the neighbour's decomposition returns the components in the same order and sign "
        "(γ_s = min_i (λ_i − λ_i+1)/4 with λ_k+1 = 0, plug-in)"]


def _config3(ctx: _Ctx, plan, stages, dname) -> _Fit:
    wh, lam, V, dT, dZ, _, _, d_comp = _exact_decomposition(ctx)
    Vn = _gaussian(ctx, plan, stages[0], d_comp, "Gaussian noise on each of the k tensor eigenvectors (ℓ2 "
                                                 "sensitivity 2√k ΔT̂/γ_s per component, Thm G.7)", V)
    Vn = Vn / np.maximum(np.linalg.norm(Vn, axis=0, keepdims=True), 1e-300)
    lam_n = _gaussian(ctx, plan, stages[1], d_comp, "Gaussian noise on each of the k tensor eigenvalues "
                                                    "(2√k ΔT̂/γ_s per component, Thm G.7)", lam)
    if np.any(lam_n == 0):
        raise BudgetNotMetError("a noisy tensor eigenvalue is exactly 0: cannot recover topics")
    Z = _noisy_unwhiten(ctx, wh, dZ, plan, stages[2])
    notes = [f"ΔT̂ = {dT:.4g}, per-component Δ = 2√k ΔT̂/γ_s = {d_comp:.4g} (the paper's H.2 uses √(2k)), "
             f"Δ(M2W) = {dZ:.4g} (plug-in, private)", "noisy eigenvectors renormalised (post-processing)"]
    return _finish_recovery(lam_n, Vn, Z, ctx.alpha0, notes, _decomposition_assumptions(dname))


def _config4(ctx: _Ctx, plan, stages, dname) -> _Fit:
    wh, lam, V, dT, dZ, s1, sk, d_comp = _exact_decomposition(ctx)
    d_mu, d_alpha = output_sensitivities(d_comp, ctx.delta2, s1, sk, lam, ctx.alpha0)
    mu, alpha = _raw_output(lam, V, wh.unwhiten, ctx.alpha0)
    mu_n = _gaussian(ctx, plan, stages[0], d_mu, "Gaussian noise on each topic vector μ_i before clipping (Thm G.8's "
                                                 "Δμ with the recovery scale (α0+2)/2)", mu)
    alpha_n = np.clip(_gaussian(ctx, plan, stages[1], d_alpha, "Gaussian noise on each α_i; Δα = 2κΔλ̄/(λ_k − Δλ̄)³ "
                                                               "by the mean value theorem (the paper derives none)",
                                alpha), 0.0, None)
    order = np.argsort(-alpha_n, kind="stable")
    notes = [f"ΔT̂ = {dT:.4g}, Δλ̄ = {d_comp:.4g}, Δμ = {d_mu:.4g}, Δα = {d_alpha:.4g} (plug-in, private)",
             "noisy μ clipped at 0 and renormalised, noisy α clipped at 0 (post-processing)"]
    assumptions = _decomposition_assumptions(dname) + [
        "Δα by the mean value theorem on α = κ/λ² needs Δλ̄ < λ_k (plug-in λ_k)"]
    # the exact λ are not released: report none (α̃ is the released quantity)
    return _Fit(clip_normalise(mu_n)[order], alpha_n[order], None, notes, assumptions)


def _stages(mechanism: str, k: int) -> list[_Stage]:
    """Stages (edges of the paper's Figure 1) of every mechanism, in release order."""
    return {
        "config1": [_Stage("M2 (e4, e8)", 1), _Stage("M3 (e3)", 1)],
        "agn": [_Stage("M2", 1), _Stage("M3", 1)],
        "avn": [_Stage("M2", 1), _Stage("M3", 1, "pure")],
        "config1-paper": [_Stage("M2 for W (e4)", 1), _Stage("M2 for W† (e8)", 1), _Stage("M3 (e3)", 1)],
        "config2": [_Stage("T (e6)", 1), _Stage("M2·W for W† (e8)", 1)],
        "config3": [_Stage("eigenvectors (e7)", k), _Stage("eigenvalues (e7)", k), _Stage("M2·W for W† (e8)", 1)],
        "config4": [_Stage("mu (e9)", k), _Stage("alpha (e9)", k)],
    }[mechanism]


# --------------------------------------------------------------------------- entry points

def _prepare_moments(partial_or_counts, alpha0, n_docs):
    """Validated partial, N, M2, M3."""
    if isinstance(partial_or_counts, DenseMomentPartial):
        partial = partial_or_counts
        check_dense_vocab(partial.dim)
    else:
        shape = getattr(partial_or_counts, "shape", None)
        if shape is None or len(shape) != 2:
            raise ValueError("partial_or_counts must be a DenseMomentPartial or an (N, d) count matrix")
        check_dense_vocab(shape[1])
        partial = dense_moment_partial(partial_or_counts)
        if n_docs is None:  # the row count is what replace-one keeps public; n_used moves with a short document
            n_docs = shape[0]
    if n_docs is None and partial.n_used < 3:
        raise ValueError(f"need at least 3 documents with ≥ 3 tokens, got {partial.n_used}")
    N = _check_n_docs(partial.n_used if n_docs is None else n_docs)
    if partial.n_used > N:
        raise ValueError(f"n_docs = {N} is below the number of documents used ({partial.n_used}): the public "
                         "count must be an upper bound (bias a noisy count upward), else the sensitivities fail")
    M2, M3 = lda_moments(partial, alpha0, N)
    return partial, N, M2, M3


def _check_k(k, d: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"k must be an integer, got {k!r}")
    if not 1 <= k < d:
        raise ValueError(f"k must satisfy 1 ≤ k < d = {d} (the vocabulary size), got k = {k}")
    return int(k)


def fit_dense_non_private(partial_or_counts, k: int, alpha0: float, *, rng: np.random.Generator,
                          n_docs: int | None = None, n_restarts: int | None = None,
                          n_iters: int | None = None) -> DenseLDAResult:
    """The non-private dense spectral LDA fit (reference for the private ones).

    Parameters as :func:`fit_dense`; ``rng`` seeds the power method.
    """
    alpha0 = _check_alpha0(alpha0)
    _, N, M2, M3 = _prepare_moments(partial_or_counts, alpha0, n_docs)
    k = _check_k(k, M2.shape[0])
    wh, _ = _spectrum(M2, k)
    res = _decompose(whiten_tensor(M3, wh.W), k, power.check_generator(rng), n_restarts, n_iters)
    tw, al = recover_parameters(res.eigenvalues, res.eigenvectors, wh.unwhiten, alpha0, model=_model(alpha0))
    return DenseLDAResult(tw, al, None, "non-private", "none (not private)", [], ["no noise"],
                          eigenvalues=res.eigenvalues)


def fit_dense(partial_or_counts, k: int, alpha0: float, mechanism: str, *, epsilon: float, delta: float,
              rng: np.random.Generator | None = None, reproducible: bool = False, accounting: str = "tight",
              n_restarts: int | None = None, n_iters: int | None = None, n_docs: int | None = None,
              sensitivity: str = "derived", declared_bounds: DeclaredBounds | None = None) -> DenseLDAResult:
    """Differentially private spectral LDA on dense moments.

    Parameters
    ----------
    partial_or_counts : DenseMomentPartial or (N, d) counts
    k : int
        Number of topics, ``1 ≤ k < d``.
    alpha0 : float, ≥ 0
        Dirichlet concentration; 0 is the single-topic model.
    mechanism : str
        One of :data:`MECHANISMS`:

        - ``"config1"``: Gaussian noise on M2 and M3 (unique entries), one
          noisy M2 for both W and W† (post-processing). Proven.
        - ``"config1-paper"``: two independent noisy M2 (W, W†) and M3; ε in
          three. Proven.
        - ``"config2"``: noise on ``T̂ = M3(W,W,W)`` (W from the exact M2,
          ΔT̂ of Thm G.6) and on ``M2·W`` (the un-whitening aligned with W).
        - ``"config3"``: noise on the k tensor eigenvectors and eigenvalues
          (``2√k ΔT̂/γ_s`` each, Thm G.7) and on ``M2·W``.
        - ``"config4"``: noise on the final μ_i and α_i
          (:func:`output_sensitivities`).
        - ``"agn"``, ``"avn"``: Imtiaz & Sarwate with the LDA sensitivities.

        Configurations 2–4 are labelled :data:`PAPER_CLAIM`, except
        configuration 2 with ``declared_bounds``.
    epsilon : float, > 0
    delta : float, in (0, 1)
    rng : numpy.random.Generator, optional
        Only with ``reproducible=True`` (then :data:`NO_GUARANTEE`); by
        default OS entropy (:func:`distdp.privacy.mechanisms.private_generator`).
    reproducible : bool
    accounting : {"tight", "paper"}
        ``"paper"``: ε split equally between the stages, δ equally between
        the Gaussian stages (AVN: all δ to M2), analytic Gaussian per stage;
        the reported total is basic composition (= ε). ``"tight"``: the
        Gaussian stages share one PLD-calibrated budget (AVN: the ℓ2 stage
        keeps ε/2, a pure ε event); the ledger's PLD ε is checked ≤ ε.
        PLD grids grow with ε: above ε ≈ 10³ use ``"paper"`` (at ε = 10⁶
        the PLD does not fit in memory).
    n_restarts, n_iters : int, optional
        Of the robust tensor power method.
    n_docs : int, optional
        Public normaliser N. Default: the number of rows of a count matrix
        (public under replace-one); for a :class:`DenseMomentPartial`, its
        ``n_used``, which is public only if no document has < 3 tokens, so
        pass the row count there. Must be ≥ the number of documents used.
    sensitivity : {"derived", "paper"}
        Δ2, Δ3 from :func:`m2_sensitivity`/:func:`m3_sensitivity` or the
        paper's ℓ1 bounds (:func:`paper_delta2_delta3`, b part doubled); both
        are sound upper bounds for M2, M3.
    declared_bounds : DeclaredBounds, optional
        ``config2`` only: public bounds on M̂2's spectrum and ‖M̂3‖_F. A private
        test (:data:`PTR_EPSILON_SHARE` of ε, :data:`PTR_DELTA_SHARE` of δ)
        checks that the corpus meets them; the releases then use the sound
        :func:`declared_sensitivities` instead of the paper's plug-ins and
        the fit is :data:`PROVEN` (:func:`_config2_declared`). A corpus that
        fails the test raises ValueError. Configurations 3 and 4 take none:
        they release the eigenpairs returned by a randomized power method,
        which no perturbation bound covers (restarts, non-odeco T̂).

    Returns
    -------
    DenseLDAResult

    Raises
    ------
    ValueError
        Invalid parameters; d too large; the noisy M2's k-th eigenvalue ≤ 0
        (budget too small for N); a paper sensitivity that is unbounded on
        the plug-in values (config2–4).
    """
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    if accounting not in ACCOUNTING:
        raise ValueError(f"accounting must be one of {ACCOUNTING}, got {accounting!r}")
    if sensitivity not in ("derived", "paper"):
        raise ValueError(f"sensitivity must be 'derived' or 'paper', got {sensitivity!r}")
    epsilon, delta = mechanisms.check_epsilon(epsilon), mechanisms.check_delta(delta)
    if mechanism == "avn" and epsilon / 2 > _MAX_PURE_EPSILON:
        raise ValueError(f"avn: the pure ε/2 = {epsilon / 2:g} stage cannot be accounted above ε/2 = "
                         f"{_MAX_PURE_EPSILON:g} (randomized-response parameter underflows): use epsilon ≤ "
                         f"{2 * _MAX_PURE_EPSILON:g}")
    alpha0 = _check_alpha0(alpha0)
    gen = mechanisms.noise_generator(rng, reproducible)
    _, N, M2, M3 = _prepare_moments(partial_or_counts, alpha0, n_docs)
    k = _check_k(k, M2.shape[0])
    if sensitivity == "derived":
        d2, d3 = m2_sensitivity(alpha0, N), m3_sensitivity(alpha0, N)
        dname = "(√2 + √6 a2)/N"
    else:
        d2, d3 = paper_delta2_delta3(alpha0, N)
        dname = "the paper's ℓ1 bound (App. G)"
    stages = _stages(mechanism, k)
    ledger = PrivacyLedger(private=not reproducible)
    ctx = _Ctx(M2, M3, k, alpha0, N, d2, d3, gen, n_restarts, n_iters,
               PrivateReleases(ledger, gen, REPLACE_ONE_DOCUMENT))
    test = None
    if declared_bounds is not None:
        if mechanism != "config2":
            raise ValueError(f"declared_bounds apply to config2 only, not {mechanism!r}: configurations 3 and 4 "
                             "release a randomized power method's eigenpairs, which no perturbation bound covers")
        if not isinstance(declared_bounds, DeclaredBounds):
            raise ValueError(f"declared_bounds must be a DeclaredBounds, got {type(declared_bounds).__name__}")
        eps0, delta0 = PTR_EPSILON_SHARE * epsilon, PTR_DELTA_SHARE * delta
        test = ("declared-bounds test (PTR)", eps0, delta0, acct.laplace_event(1.0 / eps0))
    plan = _plan(stages, epsilon, delta, accounting, test)
    if test is not None:
        fit = _config2_declared(ctx, plan, stages, ledger, declared_bounds, test)
    elif mechanism in ("config1", "config1-paper", "agn", "avn"):
        fit = _moment_noise(ctx, plan, stages, mechanism == "config1-paper")
    else:
        fit = {"config2": _config2, "config3": _config3, "config4": _config4}[mechanism](ctx, plan, stages, dname)
    return _result(mechanism, fit, ledger, plan, epsilon, delta, accounting, reproducible, d2, d3, N,
                   tested=test is not None)


def _result(mechanism, fit: _Fit, ledger, plan, epsilon, delta, accounting, reproducible, d2, d3, N,
            tested: bool = False):
    """Budget check, guarantee label and the result record (``tested``: config2 under declared bounds)."""
    if accounting == "tight":
        spent = ledger.check_budget(epsilon, delta, "pld")
    else:
        spent = sum(e for _, e, _ in plan.split)
        if spent > epsilon * (1 + 1e-9) or sum(dl for _, _, dl in plan.split) > delta * (1 + 1e-9):
            raise AssertionError("paper split exceeds the budget")  # pragma: no cover - by construction
    proven = tested or mechanism in ("config1", "config1-paper", "agn", "avn")
    guarantee = NO_GUARANTEE if reproducible else (PROVEN if proven else PAPER_CLAIM)
    assumptions = [_PUBLIC_N] + fit.assumptions
    notes = [f"Δ2 = {d2:.6g}, Δ3 = {d3:.6g} (Frobenius / unique-entry ℓ2, replace one of N = {N} documents)"]
    notes += fit.notes
    if accounting == "paper":
        notes.append("paper accounting: basic composition of the stage budgets " +
                     ", ".join(f"{s}: ({e:.4g}, {dl:.3g})" for s, e, dl in plan.split))
    if reproducible:
        notes.append("not private: the noise came from a user-seeded generator (reproducible mode)")
    return DenseLDAResult(fit.topic_word, fit.alpha, ledger, mechanism, guarantee, assumptions, notes,
                          float(epsilon), float(delta), float(spent), accounting, plan.split, fit.eigenvalues)
