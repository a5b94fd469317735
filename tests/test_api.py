"""Spectral LDA end to end: exact recovery, statistical recovery, API, CLI, bad input."""
import json

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.linalg import subspace_angles

import distdp
from distdp import lda
from distdp.lda import moments, pipeline, whitening
from distdp.cli import main
from distdp.lda.shard import Shard
from distdp.lda.synthetic import sample_corpus
from distdp.tensor.power import robust_power_method


@pytest.fixture(scope="module")
def corpus_a():
    """The issue's recovery setting: N = 20,000, d = 2,000, k = 10, α0 = 1, mean length 100."""
    return sample_corpus(20_000, 2_000, 10, np.random.default_rng(11), model="lda", alpha0=1.0)


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


@pytest.mark.parametrize("model", ["lda", "stm"])
def test_recovery_on_synthetic_corpus(model, corpus_a):
    """Mean Hungarian-matched L1 ≤ 0.10 on N=20k, d=2k, k=10, α0=1 (issue 2's acceptance bar).

    Over seeds 0–4 of the corpus and fit the LDA error measured 0.07–0.08 and
    the STM error 0.04–0.05; 0.10 is the issue's bar, not a tuned tolerance.
    """
    c = corpus_a if model == "lda" else sample_corpus(20_000, 2_000, 10, np.random.default_rng(12), model="stm")
    fitted = distdp.fit_lda(c.counts, 10, alpha0=1.0, model=model, backend="local", workers=2, seed=0, progress=False)
    err, perm = lda.matched_l1(fitted.topic_word, c.topic_word)
    assert err <= 0.10
    np.testing.assert_allclose(fitted.topic_word.sum(1), 1.0)
    # α (LDA) or weights (STM) within 25% each: their error is O(1/√N) times a constant of order k.
    np.testing.assert_allclose(fitted.alpha[perm], c.alpha, rtol=0.25)


def test_implicit_tensor_path_matches_explicit(corpus_a):
    """The implicit path (one T(I,u,u) pass per iteration) gives the explicit path's topics."""
    counts = corpus_a.counts[:4000]
    kw = dict(alpha0=1.0, backend="local", workers=2, seed=3, progress=False, refine=0)
    a = distdp.fit_lda(counts, 10, tensor="explicit", **kw)
    b = distdp.fit_lda(counts, 10, tensor="implicit", **kw)
    np.testing.assert_allclose(a.topic_word, b.topic_word, atol=1e-8)
    np.testing.assert_allclose(a.alpha, b.alpha, rtol=1e-8)


def test_randomized_eigensolver_matches_dense(corpus_a):
    """The randomized top-k eigenpairs of M2 (never d×d) agree with a dense eigendecomposition."""
    shard = Shard(corpus_a.counts[:5000])
    fp = shard.first_pass(np.zeros((2000, 1)))
    coef = moments.MomentCoefficients(1.0)
    dense = moments.m2_product(shard.m2_dense(), fp.m1_sum, np.eye(2000), fp.n_used, coef)
    ref = whitening.dense_top_eigh(dense, 10)
    rng = np.random.default_rng(0)
    om = rng.standard_normal((2000, 20))
    got = whitening.randomized_top_eigh(lambda Q: dense @ Q, dense @ om, 10, n_iter=3)
    np.testing.assert_allclose(got.eigenvalues, ref.eigenvalues, rtol=1e-6)
    # subspace agreement: the cosines of the principal angles are all ≈ 1
    cos = np.linalg.svd(ref.eigenvectors.T @ got.eigenvectors, compute_uv=False)
    assert cos.min() > 1 - 1e-6


def test_randomized_eigensolver_iterates_to_its_tolerance_on_a_flat_spectrum():
    """Real text's M2 spectrum is flat around the k-th eigenvalue; three products then leave the subspace far
    off (topics 0.2–0.26 L1 from the exact ones on 24k documents). With ``tol`` the solver iterates until every
    top-k Ritz pair has relative residual ≤ tol, and Davis–Kahan (sin Θ theorem) bounds the subspace error by
    ‖R‖_F / gap ≤ √k · tol · λ1 / (λk − λk+1): the bound asserted."""
    rng = np.random.default_rng(3)
    d, k = 400, 10
    lam = 1.0 / np.arange(1, d + 1) ** 0.3  # λ10/λ21 = 1.25: slow convergence with a 20-column block
    U, _ = np.linalg.qr(rng.standard_normal((d, d)))
    M = (U * lam) @ U.T
    om = rng.standard_normal((d, 20))
    tol = 1e-3
    bound = np.sqrt(k) * tol * lam[0] / (lam[k - 1] - lam[k])

    def sin_theta(wh):
        return np.sin(subspace_angles(U[:, :k], wh.eigenvectors).max())

    fixed = whitening.randomized_top_eigh(lambda Q: M @ Q, M @ om, k, n_iter=3)
    assert fixed.products == 3 and fixed.converged is None and sin_theta(fixed) > bound
    got = whitening.randomized_top_eigh(lambda Q: M @ Q, M @ om, k, n_iter=200, tol=tol)
    assert got.converged and 3 < got.products < 200
    assert sin_theta(got) <= bound


def test_lobpcg_top_basis_spans_the_top_eigenvectors():
    """A spiked Wigner matrix, as the private whitening's released M2: k = 8 spikes 1.3–3× the bulk's edge
    2√d. The solve stops once the top k Ritz pairs have residual ≤ tol; they then satisfy Davis–Kahan,
    sin Θ ≤ ‖R‖_F / gap ≤ √k·tol / (λ_k − λ_{k+1}), with the gap from the exact spectrum, and their Ritz
    values are within tol of the eigenvalues. Stopping on the top k, not on all p columns as scipy's own test
    does, took 14 products here against scipy's 33 (measured)."""
    rng = np.random.default_rng(11)
    d, k, p = 600, 8, 18
    U, _ = np.linalg.qr(rng.standard_normal((d, k)))
    N = rng.standard_normal((d, d))
    A = (U * np.linspace(3.0, 1.3, k) * 2 * np.sqrt(d)) @ U.T + (N + N.T) / np.sqrt(2)
    vals, vecs = np.linalg.eigh(A)
    vals, vecs = vals[::-1], vecs[:, ::-1]
    tol = 1e-3 * 2 * np.sqrt(d)
    got = whitening.lobpcg_top_basis(lambda X: A @ X, rng.standard_normal((d, p)), k, tol)
    assert got.converged and got.products < 40 and got.basis.shape == (d, p)
    np.testing.assert_allclose(got.basis.T @ got.basis, np.eye(p), atol=1e-10)
    np.testing.assert_allclose(got.product, A @ got.basis, rtol=1e-12, atol=1e-9)
    ritz, y = np.linalg.eigh(got.basis.T @ got.product)
    top = (got.basis @ y[:, ::-1])[:, :k]
    assert np.max(np.abs(ritz[::-1][:k] - vals[:k])) <= tol
    assert np.sin(subspace_angles(vecs[:, :k], top).max()) <= np.sqrt(k) * tol / (vals[k - 1] - vals[k])


def test_lobpcg_top_basis_small_problems_breakdowns_and_tiny_tolerances(monkeypatch):
    rng = np.random.default_rng(12)
    U, _ = np.linalg.qr(rng.standard_normal((300, 4)))
    A = (U * np.array([40.0, 30.0, 20.0, 10.0])) @ U.T + 1e-12 * np.eye(300)   # exact rank 4, no noise
    top = U[:, :4]

    def spans_top(got):  # the top-4 Ritz vectors of the basis span U (to rounding)
        ritz = got.basis @ np.linalg.eigh(got.basis.T @ got.product)[1][:, ::-1][:, :4]
        return np.linalg.svd(top.T @ ritz, compute_uv=False).min() > 1 - 1e-8

    # d < 5p: formed from ⌈d/p⌉ = 4 products of p columns (never a d×d block), diagonalised, one more product.
    widths = []
    got = whitening.lobpcg_top_basis(lambda X: widths.append(X.shape[1]) or A[:40, :40] @ X,
                                     rng.standard_normal((40, 10)), 4, 1e-9)
    assert (got.products, got.converged, got.basis.shape, max(widths)) == (5, True, (40, 10), 10)
    # A tolerance far below A's rounding (a private fit at a huge ε) stops at the relative floor instead.
    X0 = rng.standard_normal((300, 12))
    got = whitening.lobpcg_top_basis(lambda X: A @ X, X0, 4, 1e-30, 300, rel_tol=1e-6)
    assert got.converged and got.products < 100 and spans_top(got)
    # A LOBPCG breakdown (scipy raises from its postprocessing) hands the products to subspace iteration.
    import scipy.sparse.linalg

    def broken(*args, **kwargs):
        raise ValueError("eigh has failed in lobpcg postprocessing")

    monkeypatch.setattr(scipy.sparse.linalg, "lobpcg", broken)
    got = whitening.lobpcg_top_basis(lambda X: A @ X, X0, 4, 1e-6, 50)
    assert got.converged and got.products <= 50 and spans_top(got)
    with pytest.raises(ValueError, match="fewer than k=13"):
        whitening.lobpcg_top_basis(lambda X: A @ X, X0, 13, 1e-6)


def test_simultaneous_method_recovers(corpus_a):
    fitted = distdp.fit_lda(corpus_a.counts, 10, alpha0=1.0, backend="local", seed=0, progress=False,
                            method="simultaneous")
    assert lda.matched_l1(fitted.topic_word, corpus_a.topic_word)[0] <= 0.10


def test_save_load_round_trip(tmp_path, corpus_a):
    fitted = distdp.fit_lda(corpus_a.counts[:3000], 5, backend="local", seed=0, progress=False,
                            vocab=[f"w{i}" for i in range(2000)])
    fitted.save(tmp_path / "m")
    back = distdp.LDAModel.load(tmp_path / "m")
    np.testing.assert_array_equal(back.topic_word, fitted.topic_word)
    assert back.top_words(3) == fitted.top_words(3) and back.info["corpus"]["n_docs"] == 3000
    meta = json.loads((tmp_path / "m" / "model.json").read_text())
    assert set(meta["timings_s"]) >= {"read", "pass1_stats", "whitening", "whitened_tensor", "decomposition", "total"}
    assert (tmp_path / "m" / "top_words.txt").read_text().count("\n") == 5


def test_short_documents_are_set_aside():
    rng = np.random.default_rng(0)
    c = sample_corpus(600, 30, 2, rng, alpha0=0.5, doc_length=20, topic_concentration=0.5)
    first = np.arange(40) % 29
    short = sp.csr_matrix((np.ones(80), (np.repeat(np.arange(40), 2), np.stack([first, first + 1], 1).ravel())),
                          shape=(40, 30))  # 40 two-token documents
    fitted = distdp.fit_lda(sp.vstack([c.counts, short]), 2, alpha0=0.5, backend="local", progress=False, seed=0)
    assert fitted.info["corpus"]["n_docs"] == 640 and fitted.info["corpus"]["n_docs_short"] == 40


@pytest.mark.parametrize("kwargs,needle", [
    (dict(k=30), "k=30 must be smaller than the vocabulary size d=30"),
    (dict(k=0), "k must be a positive integer"),
    (dict(k=2, alpha0=0.0), "alpha0 must be > 0 for LDA"),
    (dict(k=2, alpha0=-1.0), "alpha0 must be > 0 for LDA"),
    (dict(k=2, model="xyz"), "model must be one of"),
    (dict(k=2, tensor="both"), "tensor must be one of"),
    (dict(k=2, method="als"), "method must be one of"),
])
def test_bad_parameters(kwargs, needle):
    X = sample_corpus(100, 30, 2, np.random.default_rng(0)).counts
    args = dict(alpha0=1.0, backend="local", progress=False) | kwargs
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")):
        distdp.fit_lda(X, **args)


def test_k_larger_than_data_supports_still_gives_k_topics():
    """Documents that use only 3 words give an M2 of rank ≤ 3: a fit asked for k = 5 returns 5 topics and says so.

    The spectral stage finds the supported ones, the rest are split and
    separated by EM; stderr (a warning) and ``model.json`` report how many
    came from the spectral stage. The single-topic model, which has no EM,
    fails naming the k that works.
    """
    rng = np.random.default_rng(0)
    X = sp.csr_matrix(np.hstack([rng.integers(1, 5, size=(200, 3)), np.zeros((200, 17))]))
    with pytest.warns(UserWarning, match=r"the data support \d of the k=5 topics"):
        model = distdp.fit_lda(X, 5, backend="local", progress=False, seed=0)
    m = model.info["corpus"]["n_topics_spectral"]
    assert 1 <= m <= 3
    assert model.topic_word.shape == (5, 20) and model.alpha.shape == (5,)
    np.testing.assert_allclose(model.topic_word.sum(axis=1), 1.0)
    assert model.info["refine"]["iterations"] >= 1
    with pytest.raises(ValueError, match=rf"k=5 is larger than the data supports.*Use k ≤ {m}"):
        distdp.fit_lda(X, 5, backend="local", progress=False, seed=0, model="stm")


def test_too_few_documents():
    X = sp.csr_matrix(np.array([[3, 1, 0, 0], [0, 2, 2, 0], [1, 1, 0, 0]]))
    with pytest.raises(ValueError, match="too few documents: 2 of 3 have ≥ 3 tokens"):
        distdp.fit_lda(X, 2, backend="local", progress=False)


def test_cli_make_corpus_and_fit_local(tmp_path, capsys):
    assert main(["make-corpus", str(tmp_path / "c"), "--docs", "3000", "--vocab-size", "300", "--topics", "4",
                 "--shards", "2", "--seed", "1"]) == 0
    assert main(["fit-lda", str(tmp_path / "c"), "--k", "4", "--out", str(tmp_path / "m"), "--local",
                 "--workers", "2", "--seed", "0", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "topic   0" in out and "wrote" in out
    truth = np.load(tmp_path / "c" / "truth" / "topic_word.npy")
    assert lda.matched_l1(np.load(tmp_path / "m" / "topic_word.npy"), truth)[0] < 0.3
    # a second fit into the same directory is refused, and the first output is intact
    assert main(["fit-lda", str(tmp_path / "c"), "--k", "4", "--out", str(tmp_path / "m"), "--local"]) == 2
    assert "already exists" in capsys.readouterr().err
    # a failing fit (k too large) leaves no output directory behind
    assert main(["fit-lda", str(tmp_path / "c"), "--k", "400", "--out", str(tmp_path / "m2"), "--local"]) == 2
    assert not (tmp_path / "m2").exists()
    assert main(["fit-lda", str(tmp_path / "c"), "--k", "4", "--vocab-size", "100", "--out", str(tmp_path / "m3"),
                 "--local"]) == 2
    assert "vocab_size=100 disagrees with the corpus's own vocabulary" in capsys.readouterr().err
    # an output URI is refused before any work (Path would make it a local "s3:/…" directory)
    assert main(["fit-lda", str(tmp_path / "c"), "--k", "4", "--out", "s3://bucket/model", "--local"]) == 2
    assert "not a URI" in capsys.readouterr().err and not Path("s3:").exists()


def test_lda_restarts_default_and_refusal():
    """The LDA default L (pipeline.default_lda_restarts; measurements in its docstring) and --restarts refused
    where it does nothing (the simultaneous method on the k×k×k tensor is one orthogonal iteration)."""
    from distdp.lda.pipeline import SpectralParams, default_lda_restarts

    assert [default_lda_restarts(k) for k in (2, 10, 100, 1000)] == [10, 20, 21, 30]
    assert SpectralParams(10).restarts() == 20 and SpectralParams(10, n_restarts=5).restarts() == 5
    with pytest.raises(ValueError, match="robust method only"):
        SpectralParams(10, method="simultaneous", n_restarts=5).validate(100)
