"""The fitted model (distdp.lda.model): save/load round trip and ``transform`` (topic mixtures)."""

import json

import numpy as np
import scipy.sparse as sp

import distdp
from distdp.lda.synthetic import sample_corpus
from distdp.api import ClusterOptions


def test_save_load_round_trip(tmp_path, corpus_a):
    fitted = distdp.fit_lda(corpus_a.counts[:3000], 5, seed=0, progress=False, vocab=[f"w{i}" for i in range(2000)],
                            cluster=ClusterOptions(backend="local"))
    fitted.save(tmp_path / "m")
    back = distdp.LDAModel.load(tmp_path / "m")
    np.testing.assert_array_equal(back.topic_word, fitted.topic_word)
    assert back.top_words(3) == fitted.top_words(3) and back.info["corpus"]["n_docs"] == 3000
    meta = json.loads((tmp_path / "m" / "model.json").read_text())
    assert set(meta["timings_s"]) >= {"read", "pass1_stats", "whitening", "whitened_tensor", "decomposition", "total"}
    assert (tmp_path / "m" / "top_words.txt").read_text().count("\n") == 5


def test_transform_recovers_true_mixtures():
    """θ̂ from the E-step with the true topics is close to the true θ.

    An estimator that knew every token's topic would still have mean L1 error
    E Σ_k |n_k/L − θ_k| ≈ √(2/π) Σ_k √(θ_k(1−θ_k)/L) ≤ √(2/π) √((k−1)/L) (Cauchy–Schwarz);
    at k = 4, L = 200 that is 0.098. Words shared between topics add error,
    the Dirichlet prior removes some; we require the oracle bound itself.
    """
    k, L = 4, 200
    c = sample_corpus(2000, 500, k, np.random.default_rng(5), alpha0=2.0, doc_length=L, topic_concentration=0.05)
    model = distdp.LDAModel(c.topic_word, c.alpha, 2.0)
    theta = model.transform(c.counts)
    bound = np.sqrt(2 / np.pi) * np.sqrt((k - 1) / L)
    assert np.abs(theta - c.theta).sum(1).mean() <= bound
    np.testing.assert_allclose(theta.sum(1), 1.0, rtol=1e-10)


def test_transform_empty_documents_get_prior_mean(small):
    model = distdp.LDAModel(small.topic_word, small.alpha, 1.0)
    X = sp.vstack([small.counts[:3], sp.csr_matrix((2, 60))]).tocsr()
    theta = model.transform(X)
    np.testing.assert_allclose(theta[3:], np.tile(small.alpha / small.alpha.sum(), (2, 1)), rtol=1e-12)
