"""Synthetic corpora with known parameters (LDA and the single-topic model).

Two shapes of topics: independent sparse Dirichlet draws (the papers'
experiments), or text-like topics in which a share ``background`` of every
topic's mass is one shared Zipf-law distribution over the words (the frequent
words every topic of real text uses). A semi-real corpus samples documents
from the topics and α of a model fitted to real text (``topic_word``,
``alpha``).

Pure numpy: sampling is vectorised over tokens (topic counts per document by
one batched multinomial, then the words of every topic in one draw), never a
Python loop over documents.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class SyntheticCorpus:
    """A sampled corpus and the parameters that generated it.

    Attributes
    ----------
    counts : csr_matrix (n_docs, vocab_size)
    topic_word : ndarray (k, vocab_size)
        True topic-word distributions (rows sum to 1).
    alpha : ndarray (k,)
        True Dirichlet parameters (LDA) or topic weights (STM, sums to 1).
    theta : ndarray (n_docs, k)
        True per-document topic mixtures (one-hot for STM).
    model : str
    """

    counts: sp.csr_matrix
    topic_word: np.ndarray
    alpha: np.ndarray
    theta: np.ndarray
    model: str


#: Document-length distributions of :func:`sample_corpus`.
LENGTHS = ("poisson", "lognormal")
#: σ of log(length) in the ``lognormal`` mode (document lengths of news and encyclopaedia text spread over
#: about an order of magnitude either side of their median).
LOGNORMAL_SIGMA = 1.0


def zipf_background(vocab_size: int, rng: np.random.Generator, exponent: float = 1.0) -> np.ndarray:
    """A Zipf-law word distribution: the word of rank r has mass ∝ 1/r^exponent; ranks are a random permutation."""
    if exponent <= 0:
        raise ValueError(f"zipf exponent must be > 0, got {exponent}")
    mass = 1.0 / np.arange(1, vocab_size + 1, dtype=np.float64) ** exponent
    return (mass / mass.sum())[rng.permutation(vocab_size)]


def sample_topics(k: int, vocab_size: int, rng: np.random.Generator, concentration: float = 0.1,
                  background: float = 0.0, zipf_exponent: float = 1.0) -> np.ndarray:
    """``k`` topic-word distributions: ``(1 − background)·Dirichlet(concentration) + background·z``.

    ``z`` is one Zipf-law distribution shared by every topic (:func:`zipf_background`); with
    ``background = 0`` (the default) the rows are the Dirichlet draws alone and ``rng`` is used as before.
    """
    if not 0.0 <= background < 1.0:
        raise ValueError(f"background must be in [0, 1), got {background}")
    topics = rng.dirichlet(np.full(vocab_size, concentration), size=k)
    if background == 0.0:
        return topics
    return (1.0 - background) * topics + background * zipf_background(vocab_size, rng, zipf_exponent)[None, :]


def sample_lengths(n_docs: int, doc_length: float, rng: np.random.Generator, lengths: str = "poisson") -> np.ndarray:
    """Document lengths of mean ≈ ``doc_length``, at least 3: ``3 + Poisson(doc_length − 3)`` or a lognormal.

    ``lognormal``: ``max(3, round(L))`` with log L ~ Normal(log(doc_length) − σ²/2, σ²), σ =
    :data:`LOGNORMAL_SIGMA` (mean ``doc_length`` before the floor): long and short documents side by side,
    as in real collections.
    """
    if lengths == "poisson":
        return 3 + rng.poisson(doc_length - 3, size=n_docs)
    if lengths == "lognormal":
        s = LOGNORMAL_SIGMA
        return np.maximum(3, np.rint(rng.lognormal(np.log(doc_length) - s * s / 2, s, size=n_docs))).astype(np.int64)
    raise ValueError(f"lengths must be one of {LENGTHS}, got {lengths!r}")


def sample_corpus(n_docs: int, vocab_size: int, k: int, rng: np.random.Generator, model: str = "lda",
                  alpha0: float = 1.0, doc_length: float = 100.0, topic_concentration: float = 0.1,
                  topic_word: np.ndarray | None = None, alpha: np.ndarray | None = None,
                  background: float = 0.0, zipf_exponent: float = 1.0, lengths: str = "poisson") -> SyntheticCorpus:
    """Sample a corpus from LDA or the single-topic model.

    Parameters
    ----------
    n_docs, vocab_size, k : int
    rng : numpy.random.Generator
    model : {'lda', 'stm'}
    alpha0 : float
        LDA concentration; the α are ``alpha0 ·`` a Dirichlet(10·1) draw
        (mildly unequal). Ignored for STM, whose weights are a Dirichlet(10·1) draw.
    doc_length : float
        Mean document length (:func:`sample_lengths`).
    topic_concentration : float
        Symmetric Dirichlet parameter of the topic-word rows.
    topic_word, alpha : ndarray, optional
        Use these parameters instead of sampling them (a semi-real corpus: a fitted model's).
    background, zipf_exponent : float
        Share of every topic's mass on one shared Zipf-law distribution, and its exponent
        (:func:`sample_topics`); ignored with ``topic_word``.
    lengths : {'poisson', 'lognormal'}
        Distribution of the document lengths (:func:`sample_lengths`).
    """
    if model not in ("lda", "stm"):
        raise ValueError(f"model must be 'lda' or 'stm', got {model!r}")
    if n_docs < 1 or vocab_size < 2 or k < 1:
        raise ValueError(f"need n_docs ≥ 1, vocab_size ≥ 2, k ≥ 1; got {n_docs}, {vocab_size}, {k}")
    if doc_length < 3:
        raise ValueError(f"doc_length must be ≥ 3, got {doc_length}")
    if model == "lda" and alpha0 <= 0:
        raise ValueError(f"alpha0 must be > 0 for LDA, got {alpha0}")
    if topic_word is None:
        mu = sample_topics(k, vocab_size, rng, topic_concentration, background, zipf_exponent)
    else:
        mu = np.asarray(topic_word, dtype=np.float64)
        if mu.shape != (k, vocab_size) or (mu < 0).any() or not np.allclose(mu.sum(axis=1), 1.0):
            raise ValueError(f"topic_word must be {k}×{vocab_size}, non-negative, rows summing to 1; got shape "
                             f"{mu.shape}")
    if alpha is None:
        shape = rng.dirichlet(np.full(k, 10.0))
        alpha = alpha0 * shape if model == "lda" else shape
    alpha = np.asarray(alpha, dtype=np.float64)
    if model == "lda":
        theta = rng.dirichlet(alpha, size=n_docs)
    else:
        theta = np.eye(k)[rng.choice(k, size=n_docs, p=alpha / alpha.sum())]
    per_topic = rng.multinomial(sample_lengths(n_docs, doc_length, rng, lengths), theta)  # (n_docs, k) tokens per topic
    rows, cols = [], []
    for t in range(k):                                      # a loop over topics, not documents
        n_tok = per_topic[:, t]
        rows.append(np.repeat(np.arange(n_docs), n_tok))
        cols.append(rng.choice(vocab_size, size=int(n_tok.sum()), p=mu[t]))
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    counts = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n_docs, vocab_size))
    counts.sum_duplicates()
    return SyntheticCorpus(counts, mu, alpha, theta, model)
