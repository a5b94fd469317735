"""Synthetic corpora with known parameters (LDA and the single-topic model).

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


def sample_topics(k: int, vocab_size: int, rng: np.random.Generator, concentration: float = 0.1) -> np.ndarray:
    """``k`` topic-word distributions drawn from a symmetric Dirichlet(concentration)."""
    return rng.dirichlet(np.full(vocab_size, concentration), size=k)


def sample_corpus(n_docs: int, vocab_size: int, k: int, rng: np.random.Generator, model: str = "lda",
                  alpha0: float = 1.0, doc_length: float = 100.0, topic_concentration: float = 0.1,
                  topic_word: np.ndarray | None = None, alpha: np.ndarray | None = None) -> SyntheticCorpus:
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
        Mean document length; lengths are ``3 + Poisson(doc_length − 3)``.
    topic_concentration : float
        Symmetric Dirichlet parameter of the topic-word rows.
    topic_word, alpha : ndarray, optional
        Use these parameters instead of sampling them.
    """
    if model not in ("lda", "stm"):
        raise ValueError(f"model must be 'lda' or 'stm', got {model!r}")
    if n_docs < 1 or vocab_size < 2 or k < 1:
        raise ValueError(f"need n_docs ≥ 1, vocab_size ≥ 2, k ≥ 1; got {n_docs}, {vocab_size}, {k}")
    if doc_length < 3:
        raise ValueError(f"doc_length must be ≥ 3, got {doc_length}")
    if model == "lda" and alpha0 <= 0:
        raise ValueError(f"alpha0 must be > 0 for LDA, got {alpha0}")
    mu = sample_topics(k, vocab_size, rng, topic_concentration) if topic_word is None else np.asarray(topic_word)
    if alpha is None:
        shape = rng.dirichlet(np.full(k, 10.0))
        alpha = alpha0 * shape if model == "lda" else shape
    alpha = np.asarray(alpha, dtype=np.float64)
    if model == "lda":
        theta = rng.dirichlet(alpha, size=n_docs)
    else:
        theta = np.eye(k)[rng.choice(k, size=n_docs, p=alpha / alpha.sum())]
    lengths = 3 + rng.poisson(doc_length - 3, size=n_docs)
    per_topic = rng.multinomial(lengths, theta)            # (n_docs, k) tokens of each topic
    rows, cols = [], []
    for t in range(k):                                      # a loop over topics, not documents
        n_tok = per_topic[:, t]
        rows.append(np.repeat(np.arange(n_docs), n_tok))
        cols.append(rng.choice(vocab_size, size=int(n_tok.sum()), p=mu[t]))
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    counts = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n_docs, vocab_size))
    counts.sum_duplicates()
    return SyntheticCorpus(counts, mu, alpha, theta, model)
