"""The top-k eigensolvers of M2 (distdp.lda.whitening): randomized, LOBPCG and dense agree, indefinite operators
(short documents), and the supported-topics path."""

import warnings

import numpy as np
import pytest
from scipy.linalg import subspace_angles

import distdp
from distdp.lda import whitening
from distdp.lda.synthetic import sample_corpus, sample_topics
from distdp.lda import moments
from distdp.lda.shard import Shard
from distdp.api import ClusterOptions


def _operator(rng, d, positive, negative):
    """A symmetric d×d matrix with the given positive and negative eigenvalues (the rest 0) and its eigenvectors."""
    vals = np.zeros(d)
    vals[:len(positive)] = positive
    vals[len(positive):len(positive) + len(negative)] = negative
    U = np.linalg.qr(rng.standard_normal((d, d)))[0]
    return (U * vals) @ U.T, vals, U


def test_orthonormal_basis_spans_the_columns_and_drops_their_null_directions():
    """SVQB on a rank-6 block of 10 columns of very different norms: 6 orthonormal columns (to rounding: the
    second pass, run where the first leaves ‖QᵀQ − I‖ above ORTHO_TOL, brings it to a few ε·p), spanning A to
    rounding, and Q = A T."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((500, 6)) @ rng.standard_normal((6, 10)) * np.logspace(-3, 3, 10)[None, :]
    Q, T = whitening.orthonormal_basis(A)
    assert Q.shape == (500, 6)
    np.testing.assert_allclose(Q.T @ Q, np.eye(6), atol=1e-13)
    assert np.linalg.norm(A - Q @ (Q.T @ A)) <= 1e-12 * np.linalg.norm(A)
    np.testing.assert_allclose(A @ T, Q, atol=1e-12)
    assert whitening.orthonormal_basis(np.zeros((5, 2)))[0].shape == (5, 0)


def test_residual_basis_is_projected_again_where_orthonormalising_lost_orthogonality():
    """Residual columns nearly dependent (10⁻⁵ relative) after their projection off span(X): SVQB's map then
    amplifies the ε-sized X-components left by the projections by up to 10⁵, beyond ORTHO_TOL, so the basis
    must be projected again. The result is orthonormal, orthogonal to X within ORTHO_TOL, and spans R's part
    off span(X) (3 directions: the smallest scaled singular value, ≈ 10⁻⁵, is far above GRAM_RCOND)."""
    rng = np.random.default_rng(3)
    d = 2000
    X = np.linalg.qr(rng.standard_normal((d, 40)))[0]
    off = rng.standard_normal((d, 3))
    off -= X @ (X.T @ off)
    R = X @ rng.standard_normal((40, 3)) * 1e3 + np.column_stack([off[:, 0], off[:, 0] + 1e-5 * off[:, 1],
                                                                  off[:, 2]])
    projected = R - X @ (X.T @ R)
    projected -= X @ (X.T @ projected)
    once = whitening.orthonormal_basis(projected)[0]
    assert np.abs(X.T @ once).max() > whitening.ORTHO_TOL       # the case needs the second projection
    Z = whitening._orthonormal_against(R, X, 1.0)
    assert Z.shape == (d, 3)
    np.testing.assert_allclose(Z.T @ Z, np.eye(3), atol=1e-13)
    assert np.abs(X.T @ Z).max() <= whitening.ORTHO_TOL
    np.testing.assert_allclose(subspace_angles(Z, off), 0.0, atol=1e-8)


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


def test_lanczos_returns_the_algebraic_top_k_with_one_column_products():
    """The operator of the test above (negatives up to 10× the top k in magnitude): ARPACK's Lanczos with
    ``which='LA'`` returns exactly the algebraic top k (tolerance as above: residual 1e-6 bounds the eigenvalue
    error by residual²/gap). Its products have one column, except the check's k columns at the end."""
    rng = np.random.default_rng(0)
    d, k = 400, 10
    positive = np.linspace(1.0, 0.5, k)
    A, vals, U = _operator(rng, d, positive, -np.linspace(10.0, 1.0, 2 * k))
    first = A @ rng.standard_normal((d, k + 10))
    widths = []
    got = whitening.lanczos_top_eigh(lambda X: widths.append(X.shape[1]) or A @ X, first, k, max_products=200,
                                     tol=1e-6)
    assert got.converged and got.products == len(widths)
    assert set(widths[:-1]) == {1} and widths[-1] == k
    np.testing.assert_allclose(got.eigenvalues, positive, rtol=1e-8)
    cosines = np.linalg.svd(got.eigenvectors.T @ U[:, :k], compute_uv=False)
    np.testing.assert_allclose(cosines, 1.0, atol=1e-8)
    # the start does not see last-bit differences of the first product (its shards' sums in process or on Ray)
    v = first[:, 0]
    nudged = np.nextafter(v, np.inf)                                 # every entry one ulp up
    np.testing.assert_array_equal(whitening.start_vector(v), whitening.start_vector(nudged))


def test_lanczos_hands_over_to_lobpcg(monkeypatch):
    """Where ARPACK stops short (one restart allowed) LOBPCG finishes from what it found; the products of both
    are counted; k ≥ d − 1 (beyond ARPACK) is LOBPCG's. Tolerances as above (the partial path:
    test_partial_returns_the_supported_pairs)."""
    rng = np.random.default_rng(1)
    d = 300
    positive = np.geomspace(10.0, 1.05, 12)
    A, vals, U = _operator(rng, d, np.concatenate([positive, np.linspace(1.0, 0.1, 100)]), -np.linspace(3.0, 0.5, 10))
    first = A @ rng.standard_normal((d, 22))
    monkeypatch.setattr(whitening, "LANCZOS_MAX_RESTARTS", 1)
    widths = []
    got = whitening.lanczos_top_eigh(lambda X: widths.append(X.shape[1]) or A @ X, first, 12, max_products=300,
                                     tol=1e-6)
    assert got.converged and got.products == len(widths) and max(widths) > 1      # LOBPCG's block products
    np.testing.assert_allclose(got.eigenvalues, positive, rtol=1e-8)

    small = np.diag([3.0, 2.0, 1.0, -1.0])
    got = whitening.lanczos_top_eigh(lambda X: small @ X, small @ np.eye(4), 3, tol=1e-8)
    np.testing.assert_allclose(got.eigenvalues, [3.0, 2.0, 1.0], rtol=1e-12)


def test_auto_eigensolver_runs_lanczos_on_small_corpora():
    """``auto``: Lanczos up to LANCZOS_MAX_PRODUCT_COST (counts + cost·documents), whatever the backend (so that
    in process and on Ray give the same numbers: tests/distributed); LOBPCG for larger corpora and where the size
    is unknown (a private fit, which refuses an explicit choice)."""
    from distdp.lda import options, pipeline

    cap, per_doc = pipeline.LANCZOS_MAX_PRODUCT_COST, pipeline.LANCZOS_DOCUMENT_COST
    assert pipeline.auto_eigensolver(cap - per_doc * 10, 10) == "lanczos"
    assert pipeline.auto_eigensolver(cap - per_doc * 10 + 1, 10) == "lobpcg"
    assert pipeline.auto_eigensolver(None, None) == "lobpcg"
    opts = options.SolverOptions()
    assert opts.spectral_params(5, 1.0, "lda", 1000, 100).eigensolver == "lanczos"
    assert opts.spectral_params(5, 1.0, "lda").eigensolver == "lobpcg"
    assert options.SolverOptions(eigensolver="lobpcg").spectral_params(5, 1.0, "lda", 1000, 100).eigensolver == "lobpcg"
    X = sample_corpus(2000, 200, 4, np.random.default_rng(0), doc_length=30.0).counts
    model = distdp.fit_lda(X, 4, seed=0, progress=False, refine=0, coherence=False,
                           cluster=ClusterOptions(backend="local"))
    assert model.info["parameters"]["eigensolver"] == model.info["whitening"]["eigensolver"] == "lanczos"
    assert model.info["whitening"]["converged"]
    with pytest.raises(ValueError, match="--eigensolver: not used by a private fit"):
        distdp.fit_lda(X, 4, progress=False, solver=options.SolverOptions(eigensolver="lanczos"),
                       privacy=distdp.PrivacyOptions(epsilon=1.0, delta=1e-6), cluster=ClusterOptions(backend="local"))


def test_lobpcg_soft_locking_multiplies_only_the_unconverged_columns():
    """Top k = 12 eigenvalues spread from 10 down to 1.05 above a bulk of 100 in [0.1, 1] (the k-th converges
    slowly, the top ones fast): with soft locking a converged top pair adds no column, so the products
    multiply fewer columns in all; both runs pass the same stopping test and find the exact top k (1e-8: see
    the test above for the tolerance). The columns follow residual_active."""
    rng = np.random.default_rng(3)
    d, k = 400, 12
    positive = np.geomspace(10.0, 1.05, k)
    A, vals, U = _operator(rng, d, np.concatenate([positive, np.linspace(1.0, 0.1, 100)]),
                           -np.linspace(3.0, 0.5, 10))
    first = A @ rng.standard_normal((d, k + 10))
    columns = {}
    for locking in (False, True):
        widths = []
        got = whitening.lobpcg_top_eigh(lambda X: widths.append(X.shape[1]) or A @ X, first, k, max_products=300,
                                        tol=1e-6, soft_locking=locking)
        assert got.converged
        np.testing.assert_allclose(got.eigenvalues, positive, rtol=1e-8)
        columns[locking] = sum(widths)
    assert columns[True] < 0.95 * columns[False], columns
    theta = np.array([3.0, 2.0, 1.0, 0.5])
    np.testing.assert_array_equal(whitening.residual_active(np.array([1e-9, 1.0, 1e-9]), theta, 3, 1e-6),
                                  [False, True, False, True])                    # the 4th (oversampling) always
    assert whitening.residual_active(np.zeros(3), theta, 3, None).all()         # no tolerance: no locking
    assert whitening.residual_active(np.zeros(3), -theta, 3, 1e-6).all()        # θ_k ≤ 0: no locking


@pytest.mark.parametrize("solve", [whitening.lobpcg_top_eigh, whitening.lanczos_top_eigh])
def test_partial_returns_the_supported_pairs(solve):
    """Only 4 positive eigenvalues: ``partial`` returns those 4, without it the solver refuses naming the count
    (Lanczos: its ARPACK run meets "no shifts" on this rank-16 operator and LOBPCG finishes)."""
    rng = np.random.default_rng(1)
    d, k = 300, 8
    A, vals, U = _operator(rng, d, np.array([4.0, 3.0, 2.0, 1.0]), -np.linspace(6.0, 1.0, 12))
    first = A @ rng.standard_normal((d, k + 10))
    got = solve(lambda X: A @ X, first, k, max_products=200, tol=1e-6, partial=True)
    np.testing.assert_allclose(got.eigenvalues, [4.0, 3.0, 2.0, 1.0], rtol=1e-8)
    with pytest.raises(ValueError, match="4 of the top 8 are positive"):
        solve(lambda X: A @ X, first, k, max_products=200, tol=1e-6)
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


@pytest.mark.slow
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
        model = distdp.fit_lda(X, 20, seed=0, progress=False, refine=0, coherence=False,
                               cluster=ClusterOptions(backend="local"))
    assert model.info["corpus"]["n_topics_spectral"] == 20
    assert model.info["whitening"]["eigensolver"] == "lobpcg"
    n_k = X.sum() * c.alpha / c.alpha.sum()
    floor = np.sqrt(2 * c.topic_word * (1 - c.topic_word) / (np.pi * n_k[:, None])).sum(axis=1).mean()
    err = distdp.matched_l1(model.topic_word, c.topic_word)[0]
    assert err <= 5 * floor, (err, floor)


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
