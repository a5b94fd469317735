"""A scikit-learn estimator over :func:`distdp.api.fit_lda`: :class:`SpectralLDA`, and its option groups.

``SpectralLDA(n_components=…).fit(X).transform(X)`` works as scikit-learn's
``LatentDirichletAllocation`` does, on a documents×words count matrix (an
array or a sparse matrix, e.g. the output of ``CountVectorizer``) or on a
parquet corpus given by its path or URI. The options that are not the
model's own come grouped in three frozen dataclasses, the same that
:func:`distdp.api.fit_lda` takes: :class:`PrivacyOptions` (make the fit
differentially private), :class:`SolverOptions` (the spectral solver) and
:class:`ClusterOptions` (where the shards run). ``fit_lda`` stays the
function underneath.

This module is API level: it imports :mod:`distdp.api` and :mod:`distdp.lda`
only, and nothing below the API imports it.
"""
from __future__ import annotations

import numbers
import os

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, check_non_negative, validate_data

from distdp.api import ClusterOptions, PrivacyOptions, SolverOptions, fit_lda
from distdp.api import transform as transform_corpus
from distdp.lda import MODELS, LDAModel
from distdp.lda.options import InvalidParameterError, check_bool, check_int, check_option, check_real, is_int

__all__ = ["ClusterOptions", "InvalidParameterError", "PrivacyOptions", "SolverOptions", "SpectralLDA"]


# ------------------------------------------------------------------ the estimator
def _is_corpus_path(X) -> bool:
    """Whether ``X`` names a parquet corpus (a local path or a URI) rather than holding counts."""
    return isinstance(X, (str, os.PathLike))


def _seed(random_state) -> int | None:
    """``random_state`` as ``fit_lda``'s seed: None stays None (fresh entropy, never NumPy's global generator);
    an integer is the seed; a ``RandomState`` or ``Generator`` given by the caller draws one."""
    if random_state is None:
        return None
    if is_int(random_state):
        if random_state < 0:
            raise InvalidParameterError(f"random_state must be a non-negative integer, got {random_state!r}")
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(np.iinfo(np.int32).max))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(np.iinfo(np.int64).max))
    raise InvalidParameterError("random_state must be None, a non-negative integer, a numpy.random.RandomState or "
                                f"a numpy.random.Generator, got {random_state!r}")


class SpectralLDA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Spectral LDA (or the single-topic model), optionally refined and differentially private.

    A scikit-learn estimator over :func:`distdp.api.fit_lda`, used as
    ``LatentDirichletAllocation``: ``SpectralLDA(n_components=10).fit(X)``,
    then ``transform`` for the documents' topic mixtures; it fits in a
    ``Pipeline`` after ``CountVectorizer``. The constructor only stores its
    parameters; :meth:`fit` checks them.

    Parameters
    ----------
    n_components : int, default=10
        Number of topics k; smaller than the number of words d.
    alpha0 : float, optional
        Dirichlet concentration Σα of the documents' topic mixtures (LDA), > 0.
        None (default): 1 for the spectral stage, then α learned by the
        refinement; given: the refinement keeps α fixed at alpha0/k.
    model : {'lda', 'stm'}, default='lda'
        ``'stm'``: the single-topic model (one topic per document, α0 → 0).
    refine : int, optional
        Iterations of the refinement after the spectral fit (LDA only):
        collapsed Gibbs sweeps or variational EM iterations (``refiner``);
        None: ``fit_lda``'s default (150 sweeps; 20 EM iterations, stopped
        earlier on convergence; in a private fit, unmixing passes instead);
        0: the pure spectral fit.
    refiner : {'gibbs', 'em'}, optional
        Non-private fits: collapsed Gibbs sampling from the spectral topics
        (default where the counts are whole numbers) or batch variational EM.
    eta : float, optional
        Topic-word Dirichlet prior of the refinement (default 0.01 for Gibbs
        sampling, 1/k for EM).
    privacy : PrivacyOptions, optional
        Make the fit differentially private. The topics are then released
        under the guarantee; ``transform`` of private documents is private data.
        With a ``public_corpus`` the topics' coherence is measured on it, even
        when ``coherence`` is False.
    solver : SolverOptions, optional
        Options of the spectral solver (default: ``SolverOptions()``).
    cluster : ClusterOptions, optional
        Where the shards live (default: ``ClusterOptions()``, in this process
        for a small corpus).
    random_state : int, RandomState or Generator, optional
        Seeds the eigensolver and the power method (and, with
        ``PrivacyOptions(reproducible=True)``, the noise; a private fit refuses
        a seed otherwise). None: fresh entropy on every fit.
    vocabulary : list of str or str, optional
        Word of each column (or a vocabulary file, one word per line), kept in
        ``model_.vocab``. A corpus path has its own vocabulary; a pandas
        DataFrame's string column names are used when this is None.
    coherence : bool, default=False
        Record the topics' NPMI and C_V coherence on the training corpus in
        ``model_.info["coherence"]`` (one more pass). A private fit measures it
        only on ``PrivacyOptions.public_corpus``, and always does there.
    progress : bool, default=False
        Show a progress bar over passes and iterations.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Topic-word distributions (``model_.topic_word``); each row sums to 1.
        scikit-learn's ``LatentDirichletAllocation`` stores the variational
        pseudo-counts λ there instead, which a spectral (or private) fit does
        not have; its documented ``components_ / components_.sum(axis=1)[:, None]``
        gives the topics in both. After EM refinement λ is ``model_.variational``.
    exp_dirichlet_component_ : ndarray of shape (n_components, n_features)
        ``exp(E[log β])``, as in scikit-learn: from λ after EM refinement, else
        from the topic rows (floored away from 0); what :meth:`transform` uses.
    alpha_ : ndarray of shape (n_components,)
        Dirichlet parameters of the documents' topic mixtures (LDA) or the
        topic weights (single-topic model).
    n_features_in_ : int
        Number of words d.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names of a pandas DataFrame ``X`` given to :meth:`fit`, when
        they are all strings (scikit-learn's convention); absent otherwise.
    model_ : LDAModel
        The fitted model (save it with ``model_.save(path)``); ``model_.info``
        holds parameters, corpus statistics, timings and diagnostics.
    privacy_report_ : dict
        ``model_.info["privacy"]``: for a private fit ε, δ, the mechanism, the
        ledger of releases and whether the result is private (a reproducible
        fit is not); for another fit ``{"private": False, "note": …}``.

    Notes
    -----
    The spectral stage uses the documents with at least 3 tokens (others are
    skipped) and needs at least ``max(3, n_components + 1)`` of them; with
    fewer, a refined fit (the default) starts from topics split from the word
    frequencies instead and warns (``info_["corpus"]["spectral_skipped"]``),
    and ``refine=0`` raises a ``ValueError``. Counts must be
    non-negative; fractional counts (e.g. tf-idf) are accepted as in
    scikit-learn, though the moment estimators assume counts.

    scikit-learn's ``check_estimator`` passes on ``SpectralLDA(n_components=1)``
    and ``SpectralLDA(n_components=2)`` (with ``ClusterOptions(backend="local")``)
    except for checks whose data cannot be a corpus for spectral LDA, each
    expected to fail with its reason in ``tests/test_estimator.py``: with
    ``n_components=2`` only, the checks that fit data of 2 columns
    (``check_estimators_overwrite_params``,
    ``check_estimators_fit_returns_self``, ``check_readonly_memmap_input``,
    ``check_fit_idempotent``, ``check_fit_check_is_fitted``,
    ``check_n_features_in``): ``n_components`` must be smaller than the
    number of words. They pass with ``n_components=1``.

    Examples
    --------
    >>> from sklearn.feature_extraction.text import CountVectorizer
    >>> from sklearn.pipeline import make_pipeline
    >>> pipe = make_pipeline(CountVectorizer(), SpectralLDA(n_components=5, random_state=0))
    >>> theta = pipe.fit_transform(documents)  # doctest: +SKIP
    """

    def __init__(self, n_components: int = 10, *, alpha0: float | None = None, model: str = "lda",
                 refine: int | None = None, eta: float | None = None, privacy: PrivacyOptions | None = None,
                 solver: SolverOptions | None = None, cluster: ClusterOptions | None = None,
                 random_state=None, vocabulary=None, coherence: bool = False, progress: bool = False,
                 refiner: str | None = None):
        self.n_components = n_components
        self.alpha0 = alpha0
        self.model = model
        self.refine = refine
        self.refiner = refiner
        self.eta = eta
        self.privacy = privacy
        self.solver = solver
        self.cluster = cluster
        self.random_state = random_state
        self.vocabulary = vocabulary
        self.coherence = coherence
        self.progress = progress

    # -------------------------------------------------------------- parameters
    def _check_params(self) -> int | None:
        """Check every parameter, naming the one that is wrong; return the seed for ``fit_lda``."""
        check_int("n_components", self.n_components, 1, optional=False)
        if self.model not in MODELS:
            raise InvalidParameterError(f"model must be one of {MODELS}, got {self.model!r}")
        if self.model == "lda":
            check_real("alpha0", self.alpha0)
        elif self.alpha0 is not None and (not isinstance(self.alpha0, numbers.Real) or isinstance(self.alpha0, bool)):
            raise InvalidParameterError(f"alpha0 must be a number (ignored by model='stm'), got {self.alpha0!r}")
        check_int("refine", self.refine, 0)
        if self.refine and self.model != "lda":
            raise InvalidParameterError(f"refine (Gibbs sampling or variational EM) applies to model='lda' only, got "
                                        f"refine={self.refine!r} with model={self.model!r}")
        if self.refiner not in (None, "gibbs", "em"):
            raise InvalidParameterError(f"refiner must be 'gibbs', 'em' or None, got {self.refiner!r}")
        check_real("eta", self.eta)
        for name, cls in (("privacy", PrivacyOptions), ("solver", SolverOptions), ("cluster", ClusterOptions)):
            check_option(name, getattr(self, name), cls)
        check_bool("coherence", self.coherence)
        check_bool("progress", self.progress)
        if self.vocabulary is not None and not isinstance(self.vocabulary, (str, os.PathLike)):
            if isinstance(self.vocabulary, dict) or not all(isinstance(w, str) for w in self.vocabulary):
                raise InvalidParameterError("vocabulary must be a list of words (str), a vocabulary file or None, "
                                            f"got {type(self.vocabulary).__name__}")
        seed = _seed(self.random_state)
        if seed is not None and self.privacy is not None and not self.privacy.reproducible:
            raise InvalidParameterError("random_state would seed the privacy noise, and a seeded fit is not private: "
                                        "pass privacy=PrivacyOptions(..., reproducible=True) to accept that, or "
                                        "leave random_state=None")
        return seed

    def _check_shape(self, n_samples: int, n_features: int) -> None:
        """Reject a count matrix too small for ``n_components`` topics, before any pass."""
        k = self.n_components
        if n_features <= k:
            raise ValueError(f"X has {n_features} feature(s) (words) but n_components={k}: the number of topics must "
                             "be smaller than the number of words")
        if not self._spectral_only():
            return                  # too few documents for the spectral stage: fit_lda starts from word frequencies
        need = max(3, k + 1)
        if n_samples < need:
            raise ValueError(f"X has n_samples={n_samples} document(s) but spectral LDA with n_components={k} needs "
                             f"at least max(3, n_components + 1) = {need} documents (without refinement, "
                             "refine=0, or with model='stm' or privacy)")

    def _spectral_only(self) -> bool:
        """Whether the fit has no refinement to start from word frequencies where the spectral stage cannot run."""
        return self.refine == 0 or self.model != "lda" or self.privacy is not None

    def _fit_kwargs(self, seed: int | None) -> dict:
        public = self.privacy is not None and self.privacy.public_corpus is not None
        return {"alpha0": None if self.alpha0 is None else float(self.alpha0), "model": self.model,
                "refine": self.refine, "eta": self.eta, "refiner": self.refiner, "seed": seed,
                "progress": bool(self.progress), "coherence": bool(self.coherence) or public,
                "privacy": self.privacy, "solver": self.solver, "cluster": self.cluster}

    # -------------------------------------------------------------- fit / transform
    def fit(self, X, y=None):
        """Fit the topic model to the documents ``X``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), str or Path
            Word counts of each document (non-negative), or a parquet corpus
            (file or directory; a local path or a URI such as ``s3://…``) read
            by the shards where they run.
        y : None
            Ignored.

        Returns
        -------
        self : SpectralLDA
            The fitted estimator.

        Raises
        ------
        ValueError
            A bad parameter (naming it), negative counts, too few words or
            documents for ``n_components``, or (``refine=0``) too few documents
            of at least 3 tokens.
        """
        seed = self._check_params()
        kw = self._fit_kwargs(seed)
        if _is_corpus_path(X):
            self._reset_fitted()
            model = fit_lda(X, self.n_components, vocab=self.vocabulary, **kw)
        else:
            _refuse_raw_text(X)
            X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=True)
            check_non_negative(X, f"{type(self).__name__}.fit")
            self._check_shape(*X.shape)
            vocab = self.vocabulary
            if vocab is None and hasattr(self, "feature_names_in_"):
                vocab = [str(w) for w in self.feature_names_in_]
            model = fit_lda(X, self.n_components, vocab=vocab, **kw)
        self._set_fitted(model)
        return self

    def _reset_fitted(self) -> None:
        """Forget a previous fit's input description (a corpus path has no column names)."""
        for name in ("n_features_in_", "feature_names_in_"):
            self.__dict__.pop(name, None)

    def _set_fitted(self, model: LDAModel) -> None:
        self.model_ = model
        self.components_ = model.topic_word
        self.exp_dirichlet_component_ = model.exp_elog_beta()
        self.alpha_ = np.asarray(model.alpha, dtype=np.float64)
        self.n_features_in_ = int(model.topic_word.shape[1])
        self.privacy_report_ = model.info.get("privacy", {"private": False})

    def transform(self, X):
        """Topic mixtures θ of the documents ``X`` (the E-step with the topics fixed).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), str or Path
            Word counts over the fitted vocabulary, or a parquet corpus with it
            (computed where ``cluster`` says, row order as in the corpus).

        Returns
        -------
        theta : ndarray of shape (n_samples, n_components)
            Posterior-mean topic proportions, rows summing to 1; a document
            with no counts gets the prior mean ``alpha_ / alpha_.sum()``.
            The mixtures of private documents are private data.
        """
        check_is_fitted(self, "model_")
        if _is_corpus_path(X):
            mix = transform_corpus(self.model_, X, cluster=self.cluster)
            return np.asarray(mix.theta, dtype=np.float64)
        _refuse_raw_text(X)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        check_non_negative(X, f"{type(self).__name__}.transform")
        return self.model_.transform(X)

    @property
    def _n_features_out(self) -> int:
        """Number of topics, for ``get_feature_names_out`` (``spectrallda0``, ``spectrallda1``, …)."""
        return self.components_.shape[0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64"]
        # Without a seed the privacy noise comes from OS entropy: two fits differ.
        tags.non_deterministic = self.privacy is not None and not self.privacy.reproducible
        return tags


def _refuse_raw_text(X) -> None:
    """A list of strings is raw text, not counts: say what to put before the estimator."""
    if isinstance(X, (list, tuple)) and X and all(isinstance(x, str) for x in X):
        raise ValueError("X is a list of strings: SpectralLDA takes word counts; put a "
                         "sklearn.feature_extraction.text.CountVectorizer before it (make_pipeline(CountVectorizer(), "
                         "SpectralLDA(...))), or pass one corpus path as a str")
