"""The options of a private fit (:class:`PrivacyOptions`), one frozen dataclass.

Taken by :func:`distdp.api.fit_lda` (``privacy=``), :class:`distdp.SpectralLDA`
and :func:`distdp.lda.private.fit.fit_lda_private`; the command line's
``--epsilon``, ``--delta`` and the other private flags build one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from distdp.lda.options import InvalidParameterError, check_bool, check_int, check_real

__all__ = ["PrivacyOptions"]


@dataclass(frozen=True)
class PrivacyOptions:
    """Make the fit (ε, δ)-differentially private (replace-one-document neighbours).

    Given as ``privacy=`` to :func:`distdp.api.fit_lda` or
    :class:`distdp.SpectralLDA`; the private fit
    (:func:`distdp.lda.private.fit.fit_lda_private`) reads every field. Change
    one field of a frozen instance with ``dataclasses.replace(options, epsilon=2.0)``.

    Parameters
    ----------
    epsilon, delta : float
        The guarantee: (ε, δ)-differential privacy for replace-one-document
        neighbours (:mod:`distdp.lda.private.fit`). ε > 0; δ in (0, 1), and
        the fit refuses one that is not below 1/N (N the number of documents).
    mechanism : str, default='auto'
        Private mechanism (:data:`distdp.lda.private.fit.MECHANISMS`):
        ``'auto'`` (``'whitened'`` for k ≤ 100, else ``'power'``),
        ``'whitened'``, ``'power'``, or one of the papers' small-vocabulary
        mechanisms (``'config1'``, ``'config1-paper'``, ``'config2'``,
        ``'config3'``, ``'config4'``, ``'agn'``, ``'avn'``).
    refine_budget : float, optional
        Fraction of the budget (after the 2% scan) given to the refinement:
        the tail release when the working vocabulary is smaller than the
        vocabulary (0.3 of it before unmixing passes, 0.5 before EM alone),
        then the unmixing passes and EM iterations in equal parts
        (:func:`distdp.lda.private.fit.budget_plan`). Default 0.75 with a
        tail release, else 0.5; the spectral stages get the rest, so lower it
        when the spectral stage reports that the budget cannot be met.
    length_cap : int, default=100
        Public cap on tokens per document in the private token count.
    reproducible : bool, default=False
        Seed the noise from the fit's ``seed`` (``SpectralLDA.random_state``):
        the arithmetic of a private fit, reported as NOT private. Required to
        give a seed to a private fit.
    public_corpus : str, Path or sparse matrix, optional
        A corpus you declare public, on which the topics' coherence is
        measured (coherence on the private training corpus would be a further
        release).
    working_vocab : int or 'auto', optional
        The spectral stage runs on this many most frequent words (chosen from
        a noisy release); a tail release, the unmixing passes and EM then
        cover every word. Default ``min(d, 100·k, 4000)`` with a refinement
        (unmixing or EM), else ``d``. ``'auto'``: that default, but before
        unmixing passes (LDA) the spectral stage restarts on twice the words
        when the noisy frequencies and a first release show the margin for
        it, within the same budget (``info["corpus"]["working_vocab_restart"]``;
        docs/design/private-fit.md, *The working vocabulary's size*: it gained
        on synthetic corpora and lost on topics fitted from real text).
    unmix : int, optional
        Scalable mechanisms (LDA or single-topic): unmixing passes on every
        word after the spectral stage and tail release
        (:func:`distdp.lda.private.pipeline.unmix_private`). Default 2 when the
        fit's ``refine`` is not given, else 0.
    declared_bounds : DeclaredBounds or str, optional
        ``mechanism='config2'`` only: public bounds on the corpus's moments
        (:class:`distdp.lda.private.dense.DeclaredBounds`, or its text form
        ``"sigma_k=…,gap=…,sigma_1=…,m3_norm=…"``), checked by a private test;
        the fit is then proven private instead of a paper claim.
    whitening : {'auto', 'dense', 'matrix-free', 'power'}, optional
        Scalable mechanisms: the private whitening releases the working
        vocabulary's second moment once, formed as a dense matrix (``dense``)
        or only multiplied, its noise regenerated for each product
        (``matrix-free``: the same release and privacy, O(d·k) memory), or
        runs the noisy power method on it (``power``: one release per
        product, much more noise). Default ``auto``: dense up to
        :data:`distdp.lda.private.scalable.DENSE_WHITENING_MAX_WORDS` words,
        matrix-free above.
    vocab_public : bool, default=False
        Declare that the corpus's vocabulary was not chosen from its
        documents. Only ``prepare.json`` (written by ``distdp prepare``)
        records where a vocabulary came from; a private fit of a corpus
        without it is refused unless this is given (the guarantee then rests
        on the declaration, recorded in ``privacy.vocabulary``), and it is an
        error where ``prepare.json`` says the words were chosen from the text
        (:func:`distdp.lda.private.fit.vocabulary_entry`). A count matrix's
        columns are the caller's and are treated as public.

    Raises
    ------
    InvalidParameterError
        A field of the wrong type or out of range, naming the field.
    """

    epsilon: float
    delta: float
    mechanism: str = "auto"
    refine_budget: float | None = None
    length_cap: int = 100
    reproducible: bool = False
    public_corpus: Any = None
    working_vocab: int | str | None = None
    unmix: int | None = None
    declared_bounds: Any = None
    whitening: str | None = None
    vocab_public: bool = False

    def __post_init__(self):
        check_real("PrivacyOptions.epsilon", self.epsilon, optional=False)
        check_real("PrivacyOptions.delta", self.delta, below_one=True, optional=False)
        if not isinstance(self.mechanism, str):
            raise InvalidParameterError(f"PrivacyOptions.mechanism must be a string, got {self.mechanism!r}")
        check_real("PrivacyOptions.refine_budget", self.refine_budget, below_one=True)
        check_int("PrivacyOptions.length_cap", self.length_cap, 1, optional=False)
        check_bool("PrivacyOptions.reproducible", self.reproducible)
        if self.working_vocab != "auto":
            check_int("PrivacyOptions.working_vocab", self.working_vocab, 1)
        check_int("PrivacyOptions.unmix", self.unmix, 0)
        if self.whitening is not None and not isinstance(self.whitening, str):
            raise InvalidParameterError(f"PrivacyOptions.whitening must be a string or None, got {self.whitening!r}")
        check_bool("PrivacyOptions.vocab_public", self.vocab_public)
