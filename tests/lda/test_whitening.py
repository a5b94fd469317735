"""The top-k eigensolvers of M2 on indefinite operators (short documents), and the supported-topics path."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import distdp
from distdp.lda import whitening
from distdp.lda.synthetic import sample_corpus, sample_topics


def _operator(rng, d, positive, negative):
    """A symmetric d×d matrix with the given positive and negative eigenvalues (the rest 0) and its eigenvectors."""
    vals = np.zeros(d)
    vals[:len(positive)] = positive
    vals[len(positive):len(positive) + len(negative)] = negative
    U = np.linalg.qr(rng.standard_normal((d, d)))[0]
    return (U * vals) @ U.T, vals, U


def test_lobpcg_returns_the_algebraic_top_k_where_negatives_dominate():
    """The k largest eigenvalues are small positives; 2k negative ones are up to 10× larger in magnitude.

    Subspace iteration converges to the largest-magnitude subspace, which
    holds the negatives, and finds too few positive directions; LOBPCG
    maximises the Rayleigh quotient and returns exactly the algebraic top k.
    Tolerance: the solver stops at relative residual 1e-6, which bounds the
    eigenvalue error by residual²/gap (≈ 1e-12 relative here: Knyazev 2001,
    Rayleigh–Ritz bounds); 1e-8 leaves rounding room.
    """
    rng = np.random.default_rng(0)
    d, k = 400, 10
    positive = np.linspace(1.0, 0.5, k)
    negative = -np.linspace(10.0, 1.0, 2 * k)
    A, vals, U = _operator(rng, d, positive, negative)
    p = k + 10
    first = A @ rng.standard_normal((d, p))
    got = whitening.lobpcg_top_eigh(lambda X: A @ X, first, k, max_products=200, tol=1e-6)
    assert got.converged
    np.testing.assert_allclose(got.eigenvalues, positive, rtol=1e-8)
    cosines = np.linalg.svd(got.eigenvectors.T @ U[:, :k], compute_uv=False)
    np.testing.assert_allclose(cosines, 1.0, atol=1e-8)
    with pytest.raises(ValueError, match="larger than the data supports"):
        whitening.randomized_top_eigh(lambda X: A @ X, first, k, n_iter=30)


def test_partial_returns_the_supported_pairs():
    """Only 4 positive eigenvalues: ``partial`` returns those 4, without it the solver refuses naming the count."""
    rng = np.random.default_rng(1)
    d, k = 300, 8
    A, vals, U = _operator(rng, d, np.array([4.0, 3.0, 2.0, 1.0]), -np.linspace(6.0, 1.0, 12))
    first = A @ rng.standard_normal((d, k + 10))
    got = whitening.lobpcg_top_eigh(lambda X: A @ X, first, k, max_products=200, tol=1e-6, partial=True)
    np.testing.assert_allclose(got.eigenvalues, [4.0, 3.0, 2.0, 1.0], rtol=1e-8)
    with pytest.raises(ValueError, match="4 of the top 8 are positive"):
        whitening.lobpcg_top_eigh(lambda X: A @ X, first, k, max_products=200, tol=1e-6)
    dense = whitening.dense_top_eigh(A, k, partial=True)
    np.testing.assert_allclose(dense.eigenvalues, [4.0, 3.0, 2.0, 1.0], rtol=1e-10)
    with pytest.raises(ValueError, match="no positive eigenvalue"):
        whitening.supported_top_k(-np.arange(1.0, 5.0), np.eye(4), 2)


def _short_corpus(seed: int, n_docs: int, background: float = 0.3):
    """Documents of ≈ 8 tokens (d = 5,000, k = 20) whose topics share a Zipf background, as words of real text do."""
    rng = np.random.default_rng(seed)
    d, k = 5000, 20
    bg = 1.0 / np.arange(1, d + 1)
    bg = (bg / bg.sum())[rng.permutation(d)]
    tw = (1 - background) * sample_topics(k, d, rng, 0.1) + background * bg[None, :]
    return sample_corpus(n_docs, d, k, rng, doc_length=8.0, alpha0=1.0, topic_word=tw)


def test_short_documents_fit_k_topics_and_recover_them():
    """Short documents make M2 indefinite: the former solver refused k = 20 here ("16 of the top 20 are positive").

    The default fit now finds all 20 topics in its spectral stage and recovers
    them. Tolerance: the oracle floor is the mean L1 error of topics
    estimated from the true token assignments, Σ_w √(2 p_w(1−p_w)/(π n_k))
    with n_k = tokens·α_k/α0 (the mean absolute deviation of a multinomial
    proportion); the spectral fit of a 400k-token corpus of 8-token documents
    measured 3.6–4.4× that floor over three corpus draws (seeds 0–2, refine
    0 and 20 alike). The bound is 5× the floor, and far below the 2 of
    unrelated topics.
    """
    c = _short_corpus(0, 50_000)
    X = c.counts.tocsr()
    assert X.sum() / X.shape[0] == pytest.approx(8.0, rel=0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # no "fewer topics supported" warning
        model = distdp.fit_lda(X, 20, backend="local", seed=0, progress=False, refine=0, coherence=False)
    assert model.info["corpus"]["n_topics_spectral"] == 20
    assert model.info["whitening"]["eigensolver"] == "lobpcg"
    n_k = X.sum() * c.alpha / c.alpha.sum()
    floor = np.sqrt(2 * c.topic_word * (1 - c.topic_word) / (np.pi * n_k[:, None])).sum(axis=1).mean()
    err = distdp.matched_l1(model.topic_word, c.topic_word)[0]
    assert err <= 5 * floor, (err, floor)
