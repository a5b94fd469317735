"""Recovery of topics and α (distdp.lda.recovery): exactly from population moments, statistically on a synthetic corpus."""

import numpy as np
import pytest

import distdp
from distdp import lda
from distdp.lda import whitening
from distdp.lda.synthetic import sample_corpus
from distdp.tensor.power import robust_power_method
from distdp.api import ClusterOptions


@pytest.mark.parametrize("model,alpha0", [("lda", 0.4), ("lda", 3.0), ("stm", 0.0)])
def test_recovery_from_exact_population_moments(model, alpha0):
    """Whitening + power method + recovery return the true (μ, α) from exact moments (α0 ≠ 1)."""
    rng = np.random.default_rng(2)
    k, d = 4, 12
    mu = rng.dirichlet(np.ones(d), size=k)
    alpha = np.array([0.1, 0.2, 0.3, 0.4]) * (alpha0 if model == "lda" else 1.0)
    if model == "lda":
        w2 = alpha / (alpha0 * (alpha0 + 1))
        w3 = 2 * alpha / (alpha0 * (alpha0 + 1) * (alpha0 + 2))
    else:
        w2 = w3 = alpha
    M2 = (mu.T * w2) @ mu
    M3 = np.einsum("r,ri,rj,rk->ijk", w3, mu, mu, mu)
    wh = whitening.dense_top_eigh(M2, k)
    T = np.einsum("ijk,ia,jb,kc->abc", M3, wh.W, wh.W, wh.W)
    res = robust_power_method(T, k, rng=rng)
    topic_word, a_hat = lda.recover_parameters(res.eigenvalues, res.eigenvectors, wh.unwhiten, alpha0, model)
    err, perm = lda.matched_l1(topic_word, mu)
    assert err < 1e-8
    np.testing.assert_allclose(a_hat[perm], alpha, rtol=1e-8)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["lda", "stm"])
def test_recovery_on_synthetic_corpus(model, corpus_a):
    """Mean Hungarian-matched L1 ≤ 0.10 on N=20k, d=2k, k=10, α0=1 (issue 2's acceptance bar).

    Over seeds 0–4 of the corpus and fit the LDA error measured 0.07–0.08 and
    the STM error 0.04–0.05; 0.10 is the issue's bar, not a tuned tolerance.
    """
    c = corpus_a if model == "lda" else sample_corpus(20_000, 2_000, 10, np.random.default_rng(12), model="stm")
    # α0 not given: the spectral stage uses the default 1 (the truth here) and the refinement learns α
    fitted = distdp.fit_lda(c.counts, 10, model=model, seed=0, progress=False,
                            cluster=ClusterOptions(backend="local", workers=2))
    err, perm = lda.matched_l1(fitted.topic_word, c.topic_word)
    assert err <= 0.10
    np.testing.assert_allclose(fitted.topic_word.sum(1), 1.0)
    # α (LDA) or weights (STM) within 25% each: their error is O(1/√N) times a constant of order k.
    np.testing.assert_allclose(fitted.alpha[perm], c.alpha, rtol=0.25)
