"""AGN, AVN and DP-TPM on the single-topic model (Imtiaz & Sarwate 2018, Algorithm 1).

Pure numpy/scipy: no Ray, no IO.

Moments
-------
For a document with counts ``c`` and length ``l ≥ 3`` the unbiased
single-topic estimators (dp-spectral-lda-end-to-end, eqs. 7–9: the LDA
estimators with α0 → 0) are

- ``m2 = (c cᵀ − diag(c)) / (l(l−1))``,
- ``m3 = [c⊗c⊗c − Σ_ij c_i c_j (e_i e_i e_j + e_i e_j e_i + e_j e_i e_i)
  + 2 Σ_i c_i e_i⊗3] / (l(l−1)(l−2))``,

and ``M2 = (1/N) Σ_n m2_n``, ``M3 = (1/N) Σ_n m3_n``, with
``E[M2] = Σ_k w_k a_k⊗a_k`` and ``E[M3] = Σ_k w_k a_k⊗a_k⊗a_k`` (the paper's
``E[t1⊗t2]`` and ``E[t1⊗t2⊗t3]``, §2, averaged over all ordered pairs/triples
of distinct token positions instead of the first two/three words).

Sensitivity (replace one document, N public, every length ≥ 3)
----------------------------------------------------------------
The relation is :data:`~distdp.privacy.neighbours.REPLACE_ONE_DOCUMENT`; that
every document has length ≥ 3 is an assumption of these mechanisms
(:data:`ASSUMPTIONS`), not part of the relation.

``m2_n`` is the empirical distribution of the ordered pairs of distinct
token positions of document n, ``m3_n`` that of the ordered triples: both are
entrywise ≥ 0, symmetric, and sum to 1. For any two such arrays A, B,
``‖A − B‖_F² = ‖A‖_F² + ‖B‖_F² − 2⟨A, B⟩ ≤ ‖A‖_F² + ‖B‖_F² ≤ ‖A‖₁² + ‖B‖₁² = 2``
(⟨A, B⟩ ≥ 0 as both are ≥ 0; ‖·‖_F ≤ ‖·‖₁). Replacing one document moves M2
and M3 by ``(m_n − m_n′)/N``, so by at most ``√2/N`` in Frobenius norm; the
vector of unique entries (``i ≤ j``, resp. ``i ≤ j ≤ k``) is a sub-vector of
the entries, so it moves by no more. The bound is attained: a document of
identical words ``i`` has ``m = e_i^⊗p`` (norm 1), and replacing it with one of
identical words ``j ≠ i`` moves the unique-entry vector by exactly ``√2/N``.
This is the paper's Δ2 = Δ3 = √2/N (§2), now for the estimators actually used.

Mechanisms
----------
- AGN: Gaussian noise (Analyze Gauss) on the unique entries of M2 at
  ``(ε/2, δ/2)``, then on the ``C(d+2,3)`` unique entries of M3 at ``(ε/2, δ/2)``,
  both calibrated by the analytic Gaussian mechanism (Balle & Wang 2018)
  rather than the paper's classical ``√(2 ln(1.25/δ))Δ/ε`` (Alg. 1 steps 1, 5).
- AVN: M2 as AGN with all of δ, ``(ε/2, δ)``; M3 gets the ℓ2 vector noise,
  density ∝ ``exp(−β‖b‖₂)``, ``β = (ε/2)/Δ3`` (Alg. 1 step 5): pure ε/2-DP.
- DP-TPM (Wang & Anandkumar 2016, Alg. 3, as used by Imtiaz & Sarwate §4):
  M2 as AGN at ``(ε/2, δ/2)``; then no noise on M3: the power iterations on
  the whitened tensor ``T = M3(W, W, W)`` release every ``T(I,u,u)`` and
  ``T(u,u,u)`` with Gaussian noise at a total of ``(ε/2, δ/2)``; see
  :func:`dp_tpm`.

Every release is recorded by a :class:`distdp.privacy.releases.PrivateReleases`
in a :class:`distdp.privacy.ledger.PrivacyLedger`, and a fit reports a
:class:`distdp.privacy.report.PrivacyReport` (:attr:`STMResult.privacy`); the reported (ε, δ) is the
ledger's PLD total (the ℓ2 vector release is counted as a generic pure
(ε/2, 0) event, i.e. binary randomized response, its worst case).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from distdp.lda import clip_normalise, recover_parameters
from distdp.privacy import mechanisms
from distdp.privacy.ledger import BudgetNotMetError, PrivacyLedger, Release
from distdp.privacy.neighbours import REPLACE_ONE_DOCUMENT
from distdp.privacy.releases import PrivateReleases
from distdp.privacy.report import PrivacyReport
from distdp.tensor import dp as tensor_dp
from distdp.tensor import power
from distdp.lda.whitening import Whitening, dense_top_eigh

__all__ = [
    "MAX_DENSE_M3_ENTRIES", "MECHANISMS", "STMMoments", "STMResult", "check_dense_dim", "stm_moments",
    "moment_sensitivity", "unique_m2", "release_m2", "release_m3_gaussian", "release_m3_l2",
    "whiten_noisy", "whiten_tensor", "whitened_sensitivity_bound", "non_private", "agn", "avn", "dp_tpm", "fit_stm",
    "e_comp", "random_vectors",
]

#: Largest ``d³`` for which the dense M3 (and its noise) is formed: 10⁸ entries, 0.8 GB.
MAX_DENSE_M3_ENTRIES = mechanisms.MAX_DENSE_NOISE_ENTRIES

#: Mechanisms of :func:`fit_stm`.
MECHANISMS = ("non-private", "agn", "avn", "dp-tpm")

#: What the guarantees of AGN, AVN and DP-TPM rest on, besides the relation.
ASSUMPTIONS = ("every document has at least 3 tokens: the sensitivity √2/N of M2 and M3 (module docstring) is "
               "derived for such documents",)

_DOC_BLOCK = 20_000


# --------------------------------------------------------------------------- moments

def check_dense_dim(d: int, max_entries: int = MAX_DENSE_M3_ENTRIES) -> int:
    """Refuse a vocabulary whose dense d×d×d M3 would exceed ``max_entries`` entries.

    Raises
    ------
    ValueError
        Naming the scalable alternatives, which never form M3.
    """
    d = int(d)
    if d < 2:
        raise ValueError(f"the vocabulary must have at least 2 words, got d = {d}")
    if d ** 3 > max_entries:
        raise ValueError(
            f"AGN/AVN need the dense {d}×{d}×{d} third moment ({d ** 3:.3g} entries > {max_entries:.3g}, "
            f"{n_unique(d):.3g} unique entries to noise): they serve small vocabularies only. For large d "
            "use a mechanism that never forms M3: the distributed DP tensor power method (noise per "
            "T(I,u,u) release, distdp.tensor.dp.private_power_method) with private whitening by the noisy "
            "power method on M2, or noise on the whitened k×k×k tensor / the decomposition output "
            "(configurations 2-4 of the DP spectral LDA paper)")
    return d


def n_unique(d: int) -> int:
    """``C(d+2, 3)`` unique entries of a symmetric d×d×d tensor."""
    return mechanisms.n_unique_entries(d)


@dataclass(frozen=True)
class STMMoments:
    """Empirical single-topic moments of a corpus.

    Attributes
    ----------
    m2 : ndarray (d, d)
        ``M2 = (1/N) Σ_n m2_n``, symmetric.
    m3 : ndarray (d, d, d)
        ``M3 = (1/N) Σ_n m3_n``, symmetric.
    n_docs : int
        ``N`` (public).
    """

    m2: np.ndarray
    m3: np.ndarray
    n_docs: int

    @property
    def dim(self) -> int:
        """Vocabulary size d."""
        return int(self.m2.shape[0])


def _pair_products(counts: sp.csr_matrix, weights: np.ndarray) -> sp.csr_matrix:
    """Rows ``w_n vec(c_n c_nᵀ)`` (N × d², sparse): the weighted row-wise Khatri–Rao product ``C ⊙ C``."""
    n, d = counts.shape
    indptr, idx, val = counts.indptr, counts.indices, counts.data
    nnz_row = np.diff(indptr)
    row_of = np.repeat(np.arange(n), nnz_row)                     # row of every stored entry
    reps = nnz_row[row_of]                                        # partners of every stored entry
    left = np.repeat(np.arange(idx.size), reps)
    block_start = np.repeat(np.cumsum(reps) - reps, reps)
    right = indptr[row_of[left]] + (np.arange(left.size) - block_start)
    rows = row_of[left]
    data = val[left] * val[right] * weights[rows]
    return sp.csr_matrix((data, (rows, idx[left] * d + idx[right])), shape=(n, d * d))


def stm_moments(counts, max_entries: int = MAX_DENSE_M3_ENTRIES) -> STMMoments:
    """Symmetric empirical moments M2 (d×d) and M3 (d×d×d) of the single-topic model.

    Computed from the sparse counts: ``Σ_n w3_n c⊗c⊗c = Cᵀ · diag(w3)(C ⊙ C)``
    (one sparse product per block of documents, O(Σ_n nnz_n³)), then the
    diagonal corrections of the estimator (module docstring; dp-spectral-lda-end-to-end, eq. 9).

    Parameters
    ----------
    counts : sparse or dense (N, d) array of non-negative integer counts
        Every document must have length ``l_n ≥ 3``.
    max_entries : int
        Refuse ``d³ > max_entries`` (:func:`check_dense_dim`).

    Returns
    -------
    STMMoments
    """
    C = sp.csr_matrix(counts, dtype=np.float64)
    C.sum_duplicates()
    n, d = C.shape
    check_dense_dim(d, max_entries)
    if n < 1:
        raise ValueError("the corpus has no documents")
    if C.nnz and (C.data.min() < 0 or not np.all(C.data == np.round(C.data))):
        raise ValueError("counts must be non-negative integers")
    lengths = np.asarray(C.sum(axis=1)).ravel()
    if lengths.min() < 3:
        raise ValueError(f"every document needs length ≥ 3 for the third moment; {int(np.sum(lengths < 3))} "
                         "documents are shorter (drop them first: the neighbour relation assumes l ≥ 3)")
    w2 = 1.0 / (lengths * (lengths - 1.0))
    w3 = w2 / (lengths - 2.0)
    # M2: Σ w2 c cᵀ − diag(Σ w2 c)
    g2 = np.asarray(C.T @ w2).ravel()
    m2 = np.asarray((C.T @ C.multiply(w2[:, None])).todense()) - np.diag(g2)
    # M3: Σ w3 c⊗c⊗c − sym corrections + 2 diag3(Σ w3 c)
    cube = np.zeros((d, d * d))
    for s in range(0, n, _DOC_BLOCK):
        Cb = C[s:s + _DOC_BLOCK]
        cube += np.asarray((Cb.T @ _pair_products(Cb, w3[s:s + _DOC_BLOCK])).todense())
    m3 = cube.reshape(d, d, d)
    B = np.asarray((C.T @ C.multiply(w3[:, None])).todense())     # Σ w3 c cᵀ
    g3 = np.asarray(C.T @ w3).ravel()
    ar = np.arange(d)
    m3[ar, ar, :] -= B          # e_i⊗e_i⊗e_j
    m3[ar, :, ar] -= B          # e_i⊗e_j⊗e_i
    m3[:, ar, ar] -= B.T        # e_j⊗e_i⊗e_i
    m3[ar, ar, ar] += 2.0 * g3
    return STMMoments(m2 / n, m3 / n, int(n))


def moment_sensitivity(n_docs: int) -> float:
    """``Δ2 = Δ3 = √2/N``: ℓ2 sensitivity of the unique-entry vectors of M2 and M3 (module docstring)."""
    if isinstance(n_docs, bool) or int(n_docs) != n_docs or n_docs < 1:
        raise ValueError(f"n_docs must be a positive integer, got {n_docs!r}")
    return math.sqrt(2.0) / int(n_docs)


def unique_m2(M: np.ndarray) -> np.ndarray:
    """The ``C(d+1,2)`` entries ``M_ij``, ``i ≤ j`` (row-major upper triangle)."""
    return M[np.triu_indices(M.shape[0])]


# --------------------------------------------------------------------------- releases

def release_m2(m2: np.ndarray, n_docs: int, epsilon: float, delta: float,
               rng: np.random.Generator) -> tuple[np.ndarray, Release]:
    """Analyze Gauss on M2 (Alg. 1 steps 1–2): ``M2 + E``, E symmetric, iid ``N(0, τ1²)`` for ``j ≤ i``.

    ``τ1`` = analytic Gaussian σ at ``(epsilon, delta)`` for ``Δ2 = √2/N``.

    Returns
    -------
    noisy : ndarray (d, d)
    release : Release
    """
    epsilon, delta = mechanisms.check_epsilon(epsilon), mechanisms.check_delta(delta)
    sens = moment_sensitivity(n_docs)
    tau = mechanisms.analytic_gaussian_sigma(epsilon, delta, sens)
    rec = _releases(rng)
    noisy = rec.symmetric_matrix("M2", m2, tau, sens, note=(
        f"Analyze Gauss on the {m2.shape[0] * (m2.shape[0] + 1) // 2} unique entries of the symmetric "
        f"M2, analytic Gaussian at (ε, δ) = ({epsilon:g}, {delta:g})"))
    return noisy, rec.ledger.releases[-1]


def _releases(rng: np.random.Generator) -> PrivateReleases:
    """A one-release recorder (its own ledger) under :data:`~distdp.privacy.neighbours.REPLACE_ONE_DOCUMENT`."""
    return PrivateReleases(PrivacyLedger(), rng, REPLACE_ONE_DOCUMENT)


def release_m3_gaussian(m3: np.ndarray, n_docs: int, epsilon: float, delta: float,
                        rng: np.random.Generator) -> tuple[np.ndarray, Release]:
    """AGN step 5–7: Gaussian ``N(0, τ2²)`` on the ``C(d+2,3)`` unique entries of M3, mirrored.

    ``τ2`` = analytic Gaussian σ at ``(epsilon, delta)`` for ``Δ3 = √2/N``.
    """
    epsilon, delta = mechanisms.check_epsilon(epsilon), mechanisms.check_delta(delta)
    d = check_dense_dim(m3.shape[0])
    sens = moment_sensitivity(n_docs)
    tau = mechanisms.analytic_gaussian_sigma(epsilon, delta, sens)
    rec = _releases(rng)
    noisy = rec.symmetric_tensor("M3", m3, tau, sens, note=(
        f"Gaussian noise on the {n_unique(d)} unique entries of the symmetric M3 (AGN), analytic "
        f"Gaussian at (ε, δ) = ({epsilon:g}, {delta:g})"))
    return noisy, rec.ledger.releases[-1]


def release_m3_l2(m3: np.ndarray, n_docs: int, epsilon: float,
                  rng: np.random.Generator) -> tuple[np.ndarray, Release]:
    """AVN step 5–7: ``b`` with density ∝ ``exp(−β‖b‖₂)``, ``β = ε/Δ3``, on the unique entries of M3.

    ``‖b‖ ~ Gamma(C(d+2,3), 1/β)`` times a uniform direction
    (:func:`distdp.privacy.mechanisms.l2_vector_noise`); pure ε-DP, recorded
    as a generic (ε, 0) event.
    """
    epsilon = mechanisms.check_epsilon(epsilon)
    d = check_dense_dim(m3.shape[0])
    sens = moment_sensitivity(n_docs)
    beta = mechanisms.l2_vector_beta(epsilon, sens)
    rec = _releases(rng)
    noisy = rec.symmetric_tensor_l2("M3", m3, beta, sens, epsilon, note=(
        f"ℓ2 vector noise ∝ exp(−β‖b‖₂), β = ε/Δ3 = {beta:.6g}, on the {n_unique(d)} unique entries of "
        f"M3 (AVN): pure ε = {epsilon:g}, accounted as a generic (ε, 0) event"))
    return noisy, rec.ledger.releases[-1]


# --------------------------------------------------------------------------- decomposition

def whiten_noisy(m2: np.ndarray, k: int) -> Whitening:
    """Top-k eigenpairs of a noisy M2 (Alg. 1 steps 3–4); ``σ_k ≤ 0`` fails as a budget not met."""
    try:
        return dense_top_eigh(m2, k)
    except ValueError as err:
        raise BudgetNotMetError(f"cannot whiten the noisy M2: {err} The privacy budget is too small for this "
                                "number of documents (the noise swamps the k-th eigenvalue): raise epsilon or N, "
                                "or lower k.") from None


def whiten_tensor(m3: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``M3(W, W, W)`` (Alg. 1 step 8), symmetrised against rounding; (k, k, k)."""
    T = np.tensordot(m3, W, axes=([2], [0]))                      # (d, d, k)
    T = np.tensordot(T, W, axes=([1], [0]))                       # (d, k, k)
    T = np.tensordot(W, T, axes=([0], [0]))                       # (k, k, k)
    perms = ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0))
    return sum(T.transpose(p) for p in perms) / 6.0


def whitened_sensitivity_bound(W: np.ndarray, n_docs: int) -> float:
    """``2 r³/N``, ``r = max_a ‖W_a‖₂`` (row norms of W): sensitivity of ``T(I,u,u)`` and ``T(u,u,u)``.

    For ``T = M3(W,W,W)`` with W fixed (public: computed from the released
    noisy M2) and a unit ``u``, one document contributes
    ``m3_n(W,W,W)(I,u,u)/N = Σ_abc m3_n[abc] W_a (W_b·u)(W_c·u) / N``, a convex
    combination (m3_n is a distribution over ordered triples) of vectors of
    norm ≤ ``r·r²``; replacing the document moves it by at most ``2r³/N``.
    Likewise ``|ΔT(u,u,u)| ≤ 2r³/N``.
    """
    r = float(np.max(np.linalg.norm(W, axis=1)))
    return 2.0 * r ** 3 * moment_sensitivity(n_docs) / math.sqrt(2.0)      # 2r³ · (1/N)


def _decompose(T: np.ndarray, k: int, rng: np.random.Generator, n_restarts, n_iters) -> power.PowerResult:
    """Robust tensor power method on the (noisy) whitened tensor (post-processing)."""
    return power.robust_power_method(T, k, n_restarts=n_restarts, n_iters=n_iters, rng=rng)


def _recover(res, wh: Whitening) -> tuple[np.ndarray, np.ndarray]:
    """``â_k = λ_k U S^(1/2) v_k``, ``ŵ_k = 1/λ_k²`` (single-topic model), clipped and renormalised."""
    return recover_parameters(res.eigenvalues, res.eigenvectors, wh.unwhiten, 0.0, model="stm")


@dataclass(frozen=True)
class STMResult:
    """A (private) single-topic fit.

    Attributes
    ----------
    mechanism : str
    topic_word : ndarray (k, d)
        Recovered ``â_k``, negatives clipped, rows renormalised, sorted by weight.
    weights : ndarray (k,)
        Recovered ``ŵ_k = 1/λ_k²``.
    eigenvalues : ndarray (k,)
    whitening : Whitening
        From the (noisy) M2.
    ledger : PrivacyLedger or None
        None for the non-private fit.
    epsilon, delta : float
        Target budget (``inf``, 0 for the non-private fit).
    epsilon_spent : float
        PLD total ε of the ledger at ``delta`` (≤ ``epsilon``).
    private : bool
        False for the non-private fit and for a seeded (reproducible) run.
    notes : tuple of str
    """

    mechanism: str
    topic_word: np.ndarray
    weights: np.ndarray
    eigenvalues: np.ndarray
    whitening: Whitening
    ledger: PrivacyLedger | None
    epsilon: float
    delta: float
    epsilon_spent: float
    private: bool
    notes: tuple = field(default=())

    @property
    def status(self) -> str:
        """``"private"`` or ``"not private"``."""
        return "private" if self.private else "not private"

    @property
    def privacy(self) -> PrivacyReport:
        """The fit's :class:`~distdp.privacy.report.PrivacyReport`.

        ``epsilon`` is the ledger's PLD total (:attr:`epsilon_spent`), the
        request in ``requested_epsilon``; details: ``epsilon_rdp`` (the RDP
        total) and ``weights``. The non-private fit certifies nothing.
        """
        weights = [float(x) for x in self.weights]
        if self.ledger is None:
            return PrivacyReport(private=False, mechanism=self.mechanism, neighbour=REPLACE_ONE_DOCUMENT,
                                 not_private_because=tuple(self.notes), details={"weights": weights})
        reasons = tuple(n for n in self.notes if n.startswith(("not private", "paper claim")))
        return PrivacyReport(
            private=self.private, mechanism=self.mechanism, neighbour=REPLACE_ONE_DOCUMENT,
            epsilon=self.epsilon_spent, delta=self.delta, requested_epsilon=self.epsilon, requested_delta=self.delta,
            accounting="pld", not_private_because=reasons, assumptions=ASSUMPTIONS,
            notes=tuple(n for n in self.notes if n not in reasons), ledger=self.ledger,
            details={"epsilon_rdp": self.ledger.epsilon(self.delta, "rdp"), "weights": weights})

    def to_dict(self) -> dict:
        """JSON-ready privacy report (:attr:`privacy`; no arrays of size d)."""
        return self.privacy.to_dict()


def _finish(mechanism, res, wh, ledger, epsilon, delta, private, notes) -> STMResult:
    topic_word, weights = _recover(res, wh)
    spent = ledger.check_budget(epsilon, delta, "pld")
    if not private:
        notes = tuple(notes) + ("not private: the noise came from a user-seeded generator (reproducible mode)",)
    return STMResult(mechanism, topic_word, weights, res.eigenvalues, wh, ledger, float(epsilon), float(delta),
                     spent, private, tuple(notes))


def _prepare(moments, k, epsilon, delta, rng, reproducible):
    if not isinstance(moments, STMMoments):
        moments = stm_moments(moments)
    epsilon, delta = mechanisms.check_epsilon(epsilon), mechanisms.check_delta(delta)
    k = power.check_rank(k, moments.dim)
    gen = mechanisms.noise_generator(rng, reproducible)
    return moments, k, epsilon, delta, gen


def non_private(moments, k: int, *, rng: np.random.Generator, n_restarts: int | None = None,
                n_iters: int | None = None) -> STMResult:
    """The non-private method (Anandkumar et al. 2014): whiten with M2, decompose ``M3(W,W,W)``, recover.

    Parameters
    ----------
    moments : STMMoments or (N, d) counts
    k : int
    rng : numpy.random.Generator
        Starting vectors of the power method.
    n_restarts, n_iters : int, optional
        Of :func:`distdp.tensor.power.robust_power_method`.
    """
    if not isinstance(moments, STMMoments):
        moments = stm_moments(moments)
    k = power.check_rank(k, moments.dim)
    rng = power.check_generator(rng)
    wh = dense_top_eigh(moments.m2, k)
    res = _decompose(whiten_tensor(moments.m3, wh.W), k, rng, n_restarts, n_iters)
    topic_word, weights = _recover(res, wh)
    return STMResult("non-private", topic_word, weights, res.eigenvalues, wh, None, math.inf, 0.0, math.inf,
                     False, ("non-private: no noise",))


def agn(moments, k: int, *, epsilon: float, delta: float, rng: np.random.Generator | None = None,
        reproducible: bool = False, n_restarts: int | None = None, n_iters: int | None = None) -> STMResult:
    """AGN (Imtiaz & Sarwate 2018, Algorithm 1 with Gaussian b), then decomposition and recovery.

    Budget split as in the paper (§4): ``ε1 = ε2 = ε/2``, ``δ1 = δ2 = δ/2``;
    each stage is the analytic Gaussian mechanism with ``Δ = √2/N`` on the
    unique entries of the symmetric moment. The ledger's PLD total is ≤ ε
    (two Gaussians compose better than basic composition).

    Parameters
    ----------
    moments : STMMoments or (N, d) counts
    k : int
        Number of topics.
    epsilon : float, > 0
    delta : float, in (0, 1)
    rng : numpy.random.Generator, optional
        None (private: OS entropy). A seeded generator only with ``reproducible=True``.
    reproducible : bool
        Accept ``rng``; the result then says "not private".
    n_restarts, n_iters : int, optional
        Of the robust power method (post-processing of the noisy tensor).

    Returns
    -------
    STMResult

    Raises
    ------
    ValueError
        Bad ε, δ, k; d too large for a dense M3; σ_k of the noisy M2 ≤ 0.
    """
    moments, k, epsilon, delta, gen = _prepare(moments, k, epsilon, delta, rng, reproducible)
    ledger = PrivacyLedger(private=not reproducible)
    m2n, rel = release_m2(moments.m2, moments.n_docs, epsilon / 2, delta / 2, gen)
    ledger.record(rel)
    m3n, rel = release_m3_gaussian(moments.m3, moments.n_docs, epsilon / 2, delta / 2, gen)
    ledger.record(rel)
    wh = whiten_noisy(m2n, k)
    res = _decompose(whiten_tensor(m3n, wh.W), k, gen, n_restarts, n_iters)
    return _finish("agn", res, wh, ledger, epsilon, delta, not reproducible,
                   ("budget split (ε/2, δ/2) + (ε/2, δ/2) as in the paper; analytic Gaussian calibration",))


def avn(moments, k: int, *, epsilon: float, delta: float, rng: np.random.Generator | None = None,
        reproducible: bool = False, n_restarts: int | None = None, n_iters: int | None = None) -> STMResult:
    """AVN (Imtiaz & Sarwate 2018, Algorithm 1 with ``b ∝ exp(−β‖b‖₂)``), then decomposition and recovery.

    M2: Analyze Gauss at ``(ε/2, δ)`` (all of δ, Alg. 1 step 1); M3: ℓ2 vector
    noise with ``β = (ε/2)/Δ3`` on its unique entries, pure (ε/2, 0)-DP.
    Parameters and errors as :func:`agn`.
    """
    moments, k, epsilon, delta, gen = _prepare(moments, k, epsilon, delta, rng, reproducible)
    ledger = PrivacyLedger(private=not reproducible)
    m2n, rel = release_m2(moments.m2, moments.n_docs, epsilon / 2, delta, gen)
    ledger.record(rel)
    m3n, rel = release_m3_l2(moments.m3, moments.n_docs, epsilon / 2, gen)
    ledger.record(rel)
    wh = whiten_noisy(m2n, k)
    res = _decompose(whiten_tensor(m3n, wh.W), k, gen, n_restarts, n_iters)
    return _finish("avn", res, wh, ledger, epsilon, delta, not reproducible,
                   ("budget split (ε/2, δ) Gaussian + (ε/2, 0) ℓ2-vector as in the paper",))


def dp_tpm(moments, k: int, *, epsilon: float, delta: float, rng: np.random.Generator | None = None,
           reproducible: bool = False, n_restarts: int | None = None, n_iters: int | None = None,
           sensitivity: str = "whitened", accounting: str = "tight") -> STMResult:
    """DP-TPM (Wang & Anandkumar 2016, Alg. 3) on the whitened STM tensor, as compared in Imtiaz & Sarwate §4.

    Reading of the paper: DP-TPM needs an orthogonally decomposable input,
    so the whitening W comes from M2 noised as in AGN (``(ε/2, δ/2)``); the
    exact M3 is whitened, ``T = M3(W,W,W)``, and the robust power method
    releases every ``T(I,u,u)`` and ``T(u,u,u)`` with Gaussian noise
    (:func:`distdp.tensor.dp.private_power_method`, ``K = k·L·(R+1)``
    releases) at a total of ``(ε/2, δ/2)``.

    The other parameters, the result and the errors are those of :func:`agn`.

    Parameters
    ----------
    sensitivity : {"whitened", "paper"}
        ``"whitened"`` (sound): ``Δ1 = Δ2 = 2r³/N`` with ``r`` the largest row
        norm of W (:func:`whitened_sensitivity_bound`), a replace-one-document
        bound for the tensor actually iterated. ``"paper"``: the paper's
        ``Δ1 = 2‖u‖∞²``, ``Δ2 = 2‖u‖∞³`` divided by N (their ν assignment with
        the 1/N of their Δ3): it bounds the change of the *raw* M3 applied to
        u, not of the whitened tensor, so it is a labelled reproduction, not
        a guarantee.
    accounting : {"tight", "paper"}
        PLD calibration of the power-iteration noise, or the printed recipe
        of Alg. 3 (classical Gaussian + advanced composition).
    """
    moments, k, epsilon, delta, gen = _prepare(moments, k, epsilon, delta, rng, reproducible)
    if sensitivity not in ("whitened", "paper"):
        raise ValueError(f"sensitivity must be 'whitened' or 'paper', got {sensitivity!r}")
    ledger = PrivacyLedger(private=not reproducible)
    m2n, rel = release_m2(moments.m2, moments.n_docs, epsilon / 2, delta / 2, gen)
    ledger.record(rel)
    wh = whiten_noisy(m2n, k)
    T = whiten_tensor(moments.m3, wh.W)
    N = moments.n_docs
    if sensitivity == "whitened":
        s = whitened_sensitivity_bound(wh.W, N)
        nb = tensor_dp.Neighbour(REPLACE_ONE_DOCUMENT, s, s, "data",
                                 f"N = {N} documents; T = M3(W,W,W) with W from the released M2, "
                                 "Δ = 2r³/N, r = max row norm of W", variant="whitened STM")
    else:
        nb = tensor_dp.Neighbour(REPLACE_ONE_DOCUMENT, 2.0 / N, 2.0 / N, "entry",
                                 "Imtiaz & Sarwate's Δ = 2‖u‖∞²/N, 2‖u‖∞³/N applied to the whitened tensor "
                                 "(paper reproduction; not a replace-one-document bound for it)",
                                 variant="imtiaz-sarwate/N")
    res = tensor_dp.private_power_method(T, k, epsilon=epsilon / 2, delta=delta / 2, n_restarts=n_restarts,
                                         n_iters=n_iters, accounting=accounting, neighbour=nb,
                                         rng=gen if reproducible else None, reproducible=reproducible)
    for r in res.privacy.ledger.releases:
        ledger.record(r)
    notes = [f"power iterations: {res.privacy.details['releases']} Gaussian releases at total (ε/2, δ/2), "
             f"noise multiplier {res.privacy.details['noise_multiplier']:.4g}, neighbour {nb.name}"]
    private = not reproducible
    if sensitivity == "paper":
        notes.append("paper claim, conditions unchecked: the sensitivity 2‖u‖∞²/N is that of the raw M3, "
                     "not of the whitened tensor iterated; no guarantee is claimed")
        private = False
    out = _finish("dp-tpm", res, wh, ledger, epsilon, delta, private, notes)
    return out


def fit_stm(counts_or_moments, k: int, mechanism: str, *, epsilon: float | None = None,
            delta: float | None = None, rng: np.random.Generator | None = None, reproducible: bool = False,
            **kwargs) -> STMResult:
    """Dispatch to :func:`non_private`, :func:`agn`, :func:`avn` or :func:`dp_tpm` by name."""
    if mechanism == "non-private":
        return non_private(counts_or_moments, k, rng=rng, **kwargs)
    fns = {"agn": agn, "avn": avn, "dp-tpm": dp_tpm}
    if mechanism not in fns:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    return fns[mechanism](counts_or_moments, k, epsilon=epsilon, delta=delta, rng=rng,
                          reproducible=reproducible, **kwargs)


# --------------------------------------------------------------------------- error metric

def e_comp(estimated: np.ndarray, truth: np.ndarray) -> float:
    """Imtiaz & Sarwate §4: ``(1/K) Σ_k min_k′ ‖â_k − a_k′‖₂`` (â clipped at 0 and renormalised first).

    Parameters
    ----------
    estimated : ndarray (K, d)
    truth : ndarray (K, d)
    """
    est = clip_normalise(np.asarray(estimated, dtype=float))
    dist = np.linalg.norm(est[:, None, :] - np.asarray(truth, dtype=float)[None, :, :], axis=2)
    return float(dist.min(axis=1).mean())


def random_vectors(k: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """The paper's "random vectors" baseline: standard normal rows, clipped at 0 and renormalised."""
    return clip_normalise(rng.standard_normal((k, d)))
