"""Differentially private vocabulary selection (Gaussian partition selection with a public cap).

The vocabulary of a corpus is information about the corpus: a word
that occurs in one document only reveals that document. This module chooses
the vocabulary from document frequencies with a DP mechanism (privacy unit:
one document: :data:`~distdp.privacy.neighbours.REPLACE_ONE_DOCUMENT`, N
public), pure numpy/scipy.

Mechanism (Gopi, Gulhane, Kulkarni, Shen, Shokouhi & Yekhanin 2020,
"Differentially private set union", Gaussian policy with Δ0 = L0; Wilson,
Zhang, Lam, Desfontaines, Simmons-Marengo & Gipson 2020, "Differentially
private SQL with bounded user contribution", τ-thresholding):

1. **Contribution cap (L0).** Each document contributes to at most
   ``L0 = max_words_per_doc`` (public) of its *distinct* words. A longer
   document keeps the L0 words with the smallest priority
   ``h(salt, document index, word string)`` (a keyed 32-bit hash; ties
   broken alphabetically). The kept set of document j is
   a function of document j and the random ``salt`` only, never of other
   documents, and the document index of the replaced document is the same in
   both neighbours (N fixed).
2. **Capped document frequencies.** ``df_w`` = number of documents that kept
   ``w``; its support ``supp(D)`` is the set of words with ``df_w ≥ 1``.
3. **Gaussian noise.** ``ñ_w = df_w + N(0, σ²)`` for every ``w ∈ supp(D)``
   (no noise, no release, for words outside the support).
4. **Threshold.** Release ``{(w, ñ_w) : ñ_w > τ}``.
5. **Too-common words (post-processing, optional).** With ``max_df < 1``,
   drop the released words whose noisy frequency ``ñ_w > max_df · N`` (N,
   the number of documents, is public; ``ñ_w`` is of the *capped* df, so a
   word is judged by the documents that kept it).
6. **Top-k (post-processing).** Keep the ``max_vocab`` words of largest
   ``ñ_w``, sorted by ``ñ_w`` descending (ties alphabetical).

Steps 5 and 6 use only the released pairs ``(w, ñ_w)`` and public
parameters: they cost no privacy, and the guarantee below is that of
steps 1–4.

Sensitivity. Let D, D′ differ by document x replaced by x′, with kept sets
K(x), K(x′) (|K| ≤ L0). Then ``df(D′) − df(D) = 1[K(x′)] − 1[K(x)]``:
±1 on the words of the symmetric difference K(x) Δ K(x′) (a word kept by
both is unchanged), 0 elsewhere. Hence
``‖df(D) − df(D′)‖₂ = √|K(x) Δ K(x′)| ≤ √(|K(x)| + |K(x′)|) ≤ √(2·L0)``,
attained when x and x′ keep L0 words each and share none. ``‖·‖∞ ≤ 1``.

Threshold and privacy (derivation). Split the words into
C = supp(D) ∩ supp(D′), A = supp(D) ∖ supp(D′) (words only x kept;
df_D = 1) and A′ = supp(D′) ∖ supp(D) (only x′; df_D′ = 1); |A|, |A′| ≤ L0.
The noise on C, A, A′ is independent. On C the mechanism is the Gaussian
mechanism with ℓ2 sensitivity ≤ √(2L0) followed by post-processing (the
threshold): call its output distributions P_H, Q_H; σ is calibrated so that
this is (ε, δ_G)-DP (analytic Gaussian, Balle & Wang 2018). Let
``q = P(some word of A is released | D)`` and
``q′ = P(some word of A′ is released | D′)``; both are ≤
``p_excl := 1 − (1 − Φ̄((τ − 1)/σ))^L0``. Outputs that contain a word of A
have probability q under D and 0 under D′; outputs containing a word of A′
have probability 0 under D; on the remaining outputs the two laws are
``(1 − q)·P_H`` and ``(1 − q′)·Q_H``. So the hockey-stick divergence is
exactly ``δ(ε) = q + (1 − q)·HS_{e^ε(1−q′)/(1−q)}(P_H ‖ Q_H)``. Using
``HS_{γ′} ≤ HS_γ + (γ − γ′)·Q_H(dP_H/dQ_H > γ′) ≤ HS_γ + (γ − γ′)/γ′`` for
γ′ < γ, this is ≤ ``HS_{e^ε}(P_H‖Q_H) + q + (1 − q)(q′ − q)₊/(1 − q′)``,
whose last two terms are largest at q = 0: ``≤ q′/(1 − q′)``. The same holds
in the other direction, and for any adaptive composition in which P_H, Q_H
are replaced by the joint laws of (H, later releases). Choosing τ with
``p_excl = δ_thr/(1 + δ_thr)``, i.e. ``p_excl/(1 − p_excl) = δ_thr``::

    τ = 1 + σ · Φ⁻¹((1 − p_excl)^(1/L0)),   p_excl = δ_thr / (1 + δ_thr)

the selection is (ε, δ_G + δ_thr)-DP, and more generally **any** composition
of this release with later ones is (ε_G(δ), δ + δ_thr)-DP, where ε_G(δ) is
the ε that accounting of the Gaussian events alone (this release's
``dp_event`` and the later ones) gives at δ. The user's δ is split as
``δ_thr = threshold_fraction·δ``, ``δ_G = δ − δ_thr`` (default: half each).

What a later fit must do. The ledger event of this release
(:attr:`VocabularySelection.release`) is the Gaussian event only; the
threshold's δ_thr is NOT in it. A fit that composes it into its ledger must
compute ε at its own δ from the composed events and then report the total
δ as ``δ + delta_threshold``. (Evaluating ε at ``δ + δ_thr`` and reporting
``δ + δ_thr`` would leave δ_thr out of the claim: the truth would then be
``δ + 2·δ_thr``.)
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from distdp.privacy import accounting, mechanisms
from distdp.privacy.ledger import PrivacyLedger, Release
from distdp.privacy.neighbours import REPLACE_ONE_DOCUMENT
from distdp.privacy.releases import PrivateReleases
from distdp.privacy.report import PrivacyReport

__all__ = ["VocabularySelection", "dp_select_vocabulary", "capped_document_frequency", "capped_pairs",
           "vocabulary_sensitivity", "selection_threshold", "exclusive_release_probability",
           "word_hashes", "check_max_df", "max_df_limit", "MECHANISM", "DEFAULT_MAX_WORDS_PER_DOC"]

#: Name of the mechanism in ledgers and ``prepare.json``.
MECHANISM = "gaussian-threshold"
#: Default public cap L0 on the distinct words a document contributes.
DEFAULT_MAX_WORDS_PER_DOC = 100

_U64 = np.uint64
_FNV_OFFSET, _FNV_PRIME = _U64(0xCBF29CE484222325), _U64(0x100000001B3)


# --------------------------------------------------------------------------- hashing

def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser (Steele, Lea & Flood 2014), elementwise on a uint64 array (wrapping)."""
    x = np.asarray(x, dtype=_U64) + _U64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def word_hashes(words) -> np.ndarray:
    """64-bit FNV-1a hash of each word's UTF-8 bytes, vectorised over words.

    Parameters
    ----------
    words : sequence of str

    Returns
    -------
    ndarray of uint64, shape (len(words),)
        Depends on the word string only (not on its position or on other words).
    """
    arr = np.asarray(words, dtype=str)
    if arr.size == 0:
        return np.zeros(0, dtype=_U64)
    raw = np.char.encode(arr, "utf-8")
    mat = raw.view(np.uint8).reshape(raw.size, raw.itemsize)
    h = np.full(raw.size, _FNV_OFFSET, dtype=_U64)
    for col in mat.T:  # loop over byte positions (≤ the longest word), not over words
        b = col.astype(_U64)
        h = np.where(col != 0, (h ^ b) * _FNV_PRIME, h)  # 'S' pads with zero bytes: skip them
    return h


# --------------------------------------------------------------------------- capping

def _check_tokens(doc_of, word_of, n_words: int) -> tuple[np.ndarray, np.ndarray]:
    doc = np.asarray(doc_of)
    word = np.asarray(word_of)
    if doc.shape != word.shape or doc.ndim != 1:
        raise ValueError(f"doc_of and word_of must be 1-d arrays of the same length, got shapes "
                         f"{doc.shape} and {word.shape}")
    for name, a in (("doc_of", doc), ("word_of", word)):
        if a.size and not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"{name} must hold integers, got dtype {a.dtype}")
        if a.size and a.min() < 0:
            raise ValueError(f"{name} must be ≥ 0")
    if word.size and word.max() >= n_words:
        raise ValueError(f"word_of holds id {int(word.max())} but there are only {n_words} words")
    return doc.astype(np.int64), word.astype(np.int64)


def _check_l0(max_words_per_doc) -> int:
    if isinstance(max_words_per_doc, bool) or int(max_words_per_doc) != max_words_per_doc or max_words_per_doc < 1:
        raise ValueError(f"max_words_per_doc must be an integer ≥ 1, got {max_words_per_doc!r}")
    return int(max_words_per_doc)


def _alphabetical(words) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(words sorted, original id of each rank, rank of each original id): orders set by the strings only."""
    arr = np.asarray(words, dtype=object).astype(str)
    order = np.argsort(arr, kind="stable")
    if arr.size > 1 and np.any(arr[order][1:] == arr[order][:-1]):
        raise ValueError("words must be distinct")
    rank = np.empty(arr.size, dtype=np.int64)
    rank[order] = np.arange(arr.size)
    return arr[order], order, rank


def capped_pairs(doc_of, word_of, words, max_words_per_doc: int, salt: int) -> tuple[np.ndarray, np.ndarray]:
    """The (document, word) pairs kept under the L0 cap on distinct words per document.

    Parameters
    ----------
    doc_of : array of int, shape (n_tokens,)
        Document index of each token (the row number: the same in both neighbours).
    word_of : array of int, shape (n_tokens,)
        Index into ``words`` of each token.
    words : sequence of str
        The distinct words.
    max_words_per_doc : int, ≥ 1
        L0 (public).
    salt : int
        Key of the priority hash (from the noise generator in private mode).

    Returns
    -------
    docs, word_ids : ndarray of int64
        One row per kept pair, sorted by document; at most L0 per document.
        A document with more distinct words keeps the L0 of smallest priority
        (the top 32 bits of ``splitmix64(hash(word) ^ splitmix64(document ^ salt))``),
        ties broken alphabetically: a function of that document and ``salt`` only.
    """
    l0 = _check_l0(max_words_per_doc)
    doc, word = _check_tokens(doc_of, word_of, len(words))
    sorted_words, id_of_rank, rank = _alphabetical(words)
    m = max(len(words), 1)
    pairs = np.sort(doc * m + rank[word])
    pairs = pairs[np.r_[True, pairs[1:] != pairs[:-1]]] if pairs.size else pairs
    pdoc, pword = pairs // m, pairs % m              # sorted by (document, word alphabetically)
    if pairs.size == 0:
        return pdoc, pword
    if pdoc[-1] >= 2 ** 32:
        raise ValueError(f"at most 2**32 documents are supported, got document index {int(pdoc[-1])}")
    doc_key = _splitmix64(pdoc.astype(_U64) ^ _U64(int(salt) & 0xFFFFFFFFFFFFFFFF))
    priority = _splitmix64(word_hashes(sorted_words)[pword] ^ doc_key) >> _U64(32)
    # one stable sort on (document, 32-bit priority): equal priorities stay alphabetical
    order = np.argsort((pdoc.astype(_U64) << _U64(32)) | priority, kind="stable")
    d_sorted = pdoc[order]
    starts = np.flatnonzero(np.r_[True, d_sorted[1:] != d_sorted[:-1]])
    within = np.arange(d_sorted.size) - np.repeat(starts, np.diff(np.r_[starts, d_sorted.size]))
    keep = np.sort(order[within < l0])
    return pdoc[keep], id_of_rank[pword[keep]]


def capped_document_frequency(doc_of, word_of, words, max_words_per_doc: int, salt: int) -> np.ndarray:
    """Document frequency of each word under the L0 cap (see :func:`capped_pairs`).

    Returns
    -------
    ndarray of int64, shape (len(words),)
        Replace-one ℓ2 sensitivity ≤ √(2·L0) (:func:`vocabulary_sensitivity`).
    """
    _, kept = capped_pairs(doc_of, word_of, words, max_words_per_doc, salt)
    return np.bincount(kept, minlength=len(words)).astype(np.int64)


def check_max_df(max_df) -> float:
    """``max_df`` as a float in (0, 1] (a fraction of the documents; 1 = no filter).

    Raises
    ------
    ValueError
        Not a real number in (0, 1] (bools, NaN and integers > 1 included), naming ``max_df``/``--max-df``.
    """
    value = float(max_df) if isinstance(max_df, numbers.Real) and not isinstance(max_df, bool) else math.nan
    if not 0.0 < value <= 1.0:     # NaN fails the comparison
        raise ValueError(f"max_df (--max-df) must be a fraction of the documents in (0, 1] (1 = no filter), "
                         f"got {max_df!r}")
    return value


def max_df_limit(max_df: float, n_docs: int) -> float:
    """The largest document frequency ``max_df`` keeps in ``n_docs`` documents: ``max_df · n_docs``.

    A word is kept when its (noisy) document frequency is ≤ this limit, as in
    scikit-learn's ``max_df``. The product is widened by a relative 1e-12 so
    that a decimal fraction keeps the frequency it names exactly (0.57 × 100
    is 56.99999999999999 in floating point; 57 documents are kept).
    """
    return float(max_df) * int(n_docs) * (1.0 + 1e-12)


# --------------------------------------------------------------------------- calibration

def vocabulary_sensitivity(max_words_per_doc: int) -> float:
    """ℓ2 sensitivity ``√(2·L0)`` of the capped df vector under replace-one neighbours."""
    return math.sqrt(2.0 * _check_l0(max_words_per_doc))


def selection_threshold(sigma: float, delta_threshold: float, max_words_per_doc: int) -> float:
    """τ such that the ≤ L0 words only the differing document holds add at most δ_thr.

    ``τ = 1 + σ·Φ⁻¹((1 − p)^(1/L0))`` with ``p = δ_thr/(1 + δ_thr)``: each
    such word has df 1, so one is released with probability
    ``1 − (1 − Φ̄((τ−1)/σ))^L0 = p``, and ``p/(1 − p) = δ_thr`` is what the
    selection adds to δ (module docstring).
    """
    delta_threshold = mechanisms.check_delta(delta_threshold, "delta_threshold")
    l0 = _check_l0(max_words_per_doc)
    p = delta_threshold / (1.0 + delta_threshold)
    per_word = -math.expm1(math.log1p(-p) / l0)      # 1 − (1 − p)^(1/L0), accurate for small p
    return 1.0 + float(sigma) * float(-special.ndtri(per_word))


def exclusive_release_probability(sigma: float, threshold: float, max_words_per_doc: int, count: int = 1) -> float:
    """Probability that at least one of ``max_words_per_doc`` words of df ``count`` passes ``threshold``."""
    per_word = float(special.ndtr((count - threshold) / sigma))
    return -math.expm1(max_words_per_doc * math.log1p(-per_word))


# --------------------------------------------------------------------------- selection

@dataclass(frozen=True)
class VocabularySelection:
    """A DP vocabulary and how it was chosen.

    Attributes
    ----------
    words : list of str
        The selected words, by noisy document frequency descending (ties alphabetical).
    noisy_df : ndarray
        Their noisy (capped) document frequencies (part of the DP release).
    release : Release
        Ledger record of the Gaussian part (δ_thr is not in its event: add
        :attr:`delta_threshold` to the δ of any fit composing it).
    epsilon, delta : float
        The selection's (ε, δ); ``delta = delta_gaussian + delta_threshold``.
    delta_gaussian, delta_threshold : float
        The split of δ between the Gaussian noise and the threshold.
    threshold : float
        τ.
    sigma : float
        Noise standard deviation per word.
    sensitivity : float
        ``√(2·L0)``.
    max_words_per_doc : int
        L0.
    max_vocab : int or None
        Public cap on the size (post-processing).
    n_candidates_released : int
        Words whose noisy df passed τ (before the ``max_df`` filter and the ``max_vocab`` cap; DP).
    private : bool
        False when the noise came from a caller's generator (reproducible, no guarantee).
    max_df : float
        Released words of noisy df > ``max_df · N`` were dropped before the cap (post-processing; 1 = none).
    n_above_max_df : int
        How many released words that filter dropped.
    """

    words: list
    noisy_df: np.ndarray = field(repr=False)
    release: Release
    epsilon: float
    delta: float
    delta_gaussian: float
    delta_threshold: float
    threshold: float
    sigma: float
    sensitivity: float
    max_words_per_doc: int
    max_vocab: int | None
    n_candidates_released: int
    private: bool
    max_df: float = 1.0
    n_above_max_df: int = 0

    @property
    def delta_total(self) -> float:
        """δ of the selection alone (``delta_gaussian + delta_threshold`` = :attr:`delta`)."""
        return self.delta

    def report(self) -> PrivacyReport:
        """The selection's :class:`~distdp.privacy.report.PrivacyReport` (its ledger: :attr:`release`).

        Details: the δ split, the cap, τ, σ, the sensitivity and the counts.
        """
        return PrivacyReport(
            private=self.private, mechanism=MECHANISM, neighbour=REPLACE_ONE_DOCUMENT, epsilon=self.epsilon,
            delta=self.delta, requested_epsilon=self.epsilon, requested_delta=self.delta,
            accounting=("Gaussian noise calibrated to (epsilon, delta_gaussian); the threshold adds delta_threshold "
                        "outside the event (Gopi et al. 2020; Wilson et al. 2020)"),
            not_private_because=() if self.private else ("noise from a seeded (reproducible) generator",),
            assumptions=(f"each document contributes to at most L0 = {self.max_words_per_doc} of its distinct words "
                         "(a keyed hash chooses them from that document alone)",),
            ledger=PrivacyLedger([self.release], self.private),
            details={"delta_gaussian": self.delta_gaussian, "delta_threshold": self.delta_threshold,
                     "max_words_per_doc": self.max_words_per_doc, "max_vocab": self.max_vocab,
                     "threshold": self.threshold, "noise_sigma": self.sigma, "sensitivity": self.sensitivity,
                     "n_candidates_released": self.n_candidates_released, "max_df": self.max_df,
                     "n_above_max_df": self.n_above_max_df, "vocab_size": len(self.words)})

    def to_dict(self) -> dict:
        """JSON-ready report (:meth:`report`; no noisy counts), as recorded in ``prepare.json``."""
        return self.report().to_dict()


def _check_selection_args(epsilon, delta, threshold_fraction, max_vocab) -> tuple[float, float, float, float]:
    epsilon, delta = mechanisms.check_epsilon(epsilon), mechanisms.check_delta(delta)
    if not 0 < float(threshold_fraction) < 1:
        raise ValueError(f"threshold_fraction must be in (0, 1), got {threshold_fraction!r}")
    if max_vocab is not None and (isinstance(max_vocab, bool) or int(max_vocab) != max_vocab or max_vocab < 1):
        raise ValueError(f"max_vocab must be None or an integer ≥ 1, got {max_vocab!r}")
    delta_thr = delta * float(threshold_fraction)
    return epsilon, delta, delta - delta_thr, delta_thr


def _note(sigma, threshold, l0, delta_thr, private) -> str:
    """The ledger note of the selection's release."""
    return (f"Gaussian partition selection of the vocabulary: each document contributes to ≤ L0 = {l0} distinct "
            f"words (df +1 each), Gaussian noise σ = {sigma:.6g} on the capped document frequencies of the words "
            f"present, words with noisy df > τ = {threshold:.6g} released, then the top max_vocab (post-processing). "
            f"The threshold adds delta_threshold = {delta_thr:.3g} that this Gaussian event does not contain: a fit "
            f"composing this release must add it to its delta (Gopi et al. 2020; Wilson et al. 2020)."
            + ("" if private else " Noise from a seeded generator: NOT private."))


def dp_select_vocabulary(doc_of, word_of, words, *, epsilon: float, delta: float,
                         max_words_per_doc: int = DEFAULT_MAX_WORDS_PER_DOC, max_vocab: int | None = None,
                         threshold_fraction: float = 0.5, rng: np.random.Generator | None = None,
                         accountant: str = "pld", max_df: float = 1.0,
                         n_docs: int | None = None) -> VocabularySelection:
    """Choose a vocabulary from a tokenised corpus with (ε, δ)-DP (replace-one document).

    Parameters
    ----------
    doc_of : array of int, shape (n_tokens,)
        Document (row) index of each token.
    word_of : array of int, shape (n_tokens,)
        Index into ``words`` of each token.
    words : sequence of str
        The distinct words (any order; never released except through the mechanism).
    epsilon : float, > 0
    delta : float, in (0, 1)
        Total δ of the selection: ``δ_thr = threshold_fraction·δ`` for the
        threshold, the rest for the Gaussian noise.
    max_words_per_doc : int, ≥ 1
        L0, the public cap on the distinct words a document contributes.
    max_vocab : int, optional
        Keep at most this many words (largest noisy df; post-processing).
    threshold_fraction : float, in (0, 1)
        Share of δ given to the threshold.
    rng : numpy.random.Generator, optional
        Source of the noise and of the cap's hash key. ``None`` (private
        mode): OS entropy. A caller's generator makes the result reproducible
        and ``private=False``.
    accountant : {"pld", "analytic", "rdp"}
        Calibration of σ (:func:`distdp.privacy.accounting.calibrate_gaussian_multiplier`):
        ``"pld"`` guarantees the ledger's PLD accounting certifies ε at δ_G.
    max_df : float, in (0, 1]
        Drop the released words whose noisy df exceeds ``max_df · n_docs``
        (:func:`max_df_limit`) before the ``max_vocab`` cap: post-processing
        of the release, no privacy cost. 1 (default): no filter.
    n_docs : int, optional
        N, the number of documents (public under replace-one neighbours; it
        counts documents without tokens, so it is not inferred from
        ``doc_of``). Required when ``max_df < 1``.

    Returns
    -------
    VocabularySelection

    Notes
    -----
    Vectorised: one sort of the (document, word) pairs, one stable sort for
    the cap, a ``bincount``; noise is drawn for the words present only.
    """
    epsilon, delta, delta_g, delta_thr = _check_selection_args(epsilon, delta, threshold_fraction, max_vocab)
    l0 = _check_l0(max_words_per_doc)
    max_df = check_max_df(max_df)
    if n_docs is not None:
        if isinstance(n_docs, bool) or int(n_docs) != n_docs or n_docs < 1:
            raise ValueError(f"n_docs must be an integer ≥ 1, got {n_docs!r}")
        doc = np.asarray(doc_of)
        if doc.size and int(doc.max()) >= n_docs:
            raise ValueError(f"doc_of holds document index {int(doc.max())} but n_docs is {n_docs}")
    elif max_df < 1.0:
        raise ValueError("n_docs (the public number of documents) is required with max_df < 1")
    private = rng is None
    rng = mechanisms.private_generator() if rng is None else rng
    sensitivity = vocabulary_sensitivity(l0)
    multiplier = accounting.calibrate_gaussian_multiplier(epsilon, delta_g, 1, accountant)
    sigma = multiplier * sensitivity
    tau = selection_threshold(sigma, delta_thr, l0)

    salt = int(rng.integers(0, 2 ** 63, dtype=np.int64))
    df = capped_document_frequency(doc_of, word_of, words, l0, salt)
    present = np.flatnonzero(df > 0)
    # the number of words present is private: the sampler and its lattice depend only on the public L0 (a
    # replace-one neighbour changes ≤ 2·L0 capped counts, which bounds the lattice's rounding in ℓ2)
    releases = PrivateReleases(PrivacyLedger(private=private), rng, REPLACE_ONE_DOCUMENT)
    noisy = releases.gaussian("vocabulary", df[present], sigma, sensitivity, multiplier=multiplier, n=2 * l0,
                              method="lattice", mechanism=MECHANISM, note=_note(sigma, tau, l0, delta_thr, private))
    passed = noisy > tau
    cand, cand_noisy = present[passed], noisy[passed]
    n_released = int(cand.size)
    if max_df < 1.0:     # post-processing of the released (w, ñ_w): N and max_df are public
        common = cand_noisy > max_df_limit(max_df, n_docs)
        cand, cand_noisy = cand[~common], cand_noisy[~common]
    names = np.asarray(words, dtype=object).astype(str)[cand]
    order = np.lexsort((names, -cand_noisy))[: (None if max_vocab is None else int(max_vocab))]
    return VocabularySelection(
        words=[str(w) for w in names[order]], noisy_df=cand_noisy[order], release=releases.ledger.releases[-1],
        epsilon=epsilon, delta=delta, delta_gaussian=delta_g, delta_threshold=delta_thr,
        threshold=tau, sigma=sigma, sensitivity=sensitivity, max_words_per_doc=l0,
        max_vocab=None if max_vocab is None else int(max_vocab), n_candidates_released=n_released,
        private=private, max_df=max_df, n_above_max_df=n_released - int(cand.size))
