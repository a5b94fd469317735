"""Moment estimators: exact unbiasedness, population identities, brute-force equality, merging.

All comparisons here are exact identities, so tolerances are rounding-level
(1e-12 relative), not statistical.
"""
import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from distdp.lda import moments
from distdp.lda.moments import MomentCoefficients, TensorWeights, WhitenedTensor
from distdp.tensor.forms import check_symmetric

ALPHA0S = [0.0, 0.35, 2.5]  # never 1: the paper's wrong M3 coefficients coincide with the right ones at α0 = 1


# --------------------------------------------------------------------- references
def m1_ref(c):
    return c / c.sum()


def m2_ref(c):
    l = c.sum()
    return (np.outer(c, c) - np.diag(c)) / (l * (l - 1))


def m3_ref(c):
    """The per-document m3 of dp-spectral-lda-end-to-end, eq. 9 (= eq. 44 with its last term a single
    sum over i), written term by term with explicit basis tensors."""
    c = c.astype(float)
    d, l = len(c), c.sum()
    t = np.einsum("i,j,k->ijk", c, c, c)
    for i, j in itertools.product(range(d), repeat=2):
        e = np.zeros((d, d, d))
        e[i, i, j] += 1
        e[i, j, i] += 1
        e[j, i, i] += 1
        t -= c[i] * c[j] * e
    for i in range(d):
        t[i, i, i] += 2 * c[i]
    return t / (l * (l - 1) * (l - 2))


def compositions(total, parts):
    """All count vectors of ``parts`` non-negative integers summing to ``total``."""
    for cuts in itertools.combinations(range(total + parts - 1), parts - 1):
        edges = (-1,) + cuts + (total + parts - 1,)
        yield np.array([edges[i + 1] - edges[i] - 1 for i in range(parts)])


def multinomial_pmf(c, p):
    from math import factorial

    coef = factorial(int(c.sum()))
    for x in c:
        coef //= factorial(int(x))
    return coef * np.prod(p ** c)


def brute_force_estimates(C, alpha0):
    """M2 and M3 estimators with explicit sums over distinct documents (U-statistics)."""
    N = len(C)
    coef = MomentCoefficients(alpha0)
    pairs = [(a, b) for a in range(N) for b in range(N) if a != b]
    M2 = sum(m2_ref(c) for c in C) / N - coef.a2 * sum(np.outer(m1_ref(C[a]), m1_ref(C[b])) for a, b in pairs) / (N * (N - 1))
    X = sum(np.einsum("ij,k->ijk", m2_ref(C[a]), m1_ref(C[b])) for a, b in pairs) / (N * (N - 1))
    U3 = sum(np.einsum("i,j,k->ijk", m1_ref(C[a]), m1_ref(C[b]), m1_ref(C[c]))
             for a, b, c in itertools.permutations(range(N), 3)) / (N * (N - 1) * (N - 2))
    M3 = (sum(m3_ref(c) for c in C) / N - coef.a3 * (X + X.transpose(0, 2, 1) + X.transpose(2, 0, 1))
          + coef.b3 * U3)
    return M2, M3


@pytest.fixture
def tiny_corpus():
    rng = np.random.default_rng(7)
    C = rng.integers(0, 4, size=(7, 5)).astype(float)
    C[:, 0] += 3  # every document has ≥ 3 tokens
    return C, sp.csr_matrix(C), rng.standard_normal((5, 3))


# --------------------------------------------------------------------- per-document unbiasedness
@pytest.mark.parametrize("length", [3, 4, 6])
def test_per_document_estimators_are_exactly_unbiased(length):
    """E[m1] = p, E[m2] = ppᵀ, E[m3] = p⊗p⊗p under Multinomial(l, p), by exact enumeration."""
    p = np.array([0.5, 0.3, 0.15, 0.05])
    e1 = e2 = e3 = 0.0
    for c in compositions(length, len(p)):
        w = multinomial_pmf(c, p)
        e1, e2, e3 = e1 + w * m1_ref(c), e2 + w * m2_ref(c), e3 + w * m3_ref(c)
    np.testing.assert_allclose(e1, p, atol=1e-14)
    np.testing.assert_allclose(e2, np.outer(p, p), atol=1e-14)
    np.testing.assert_allclose(e3, np.einsum("i,j,k->ijk", p, p, p), atol=1e-14)


# --------------------------------------------------------------------- population identities
def dirichlet_moments(alpha):
    """Exact E[h⊗h] and E[h⊗h⊗h] of h ~ Dirichlet(alpha)."""
    a0, k = alpha.sum(), len(alpha)
    I = np.eye(k)
    E2 = alpha[:, None] * (alpha[None, :] + I) / (a0 * (a0 + 1))
    E3 = (alpha[:, None, None] * (alpha[None, :, None] + I[:, :, None])
          * (alpha[None, None, :] + I[:, None, :] + I[None, :, :])) / (a0 * (a0 + 1) * (a0 + 2))
    return E2, E3


@pytest.mark.parametrize("alpha", [np.array([0.3, 0.7, 1.5]), np.array([0.05, 0.1, 0.2]), np.array([2.0, 3.0, 5.0])])
def test_lda_moment_identities(alpha):
    """dp-spectral-lda-end-to-end, Lemma 3.2 (eqs. 5–6): M2 = Σ α_i/(α0(α0+1)) μ_i⊗μ_i and
    M3 = Σ 2α_i/(α0(α0+1)(α0+2)) μ_i⊗3 exactly, with M2 as in Def. 3.1 (eq. 2) and M3 with the
    corrected coefficients −α0/(α0+2) and 2α0²/((α0+1)(α0+2)) (eqs. 3 and 29 print wrong ones)."""
    rng = np.random.default_rng(0)
    mu = rng.dirichlet(np.ones(4), size=3).T  # d×k, columns are topics
    a0 = alpha.sum()
    E2h, E3h = dirichlet_moments(alpha)
    M1 = mu @ alpha / a0
    E2 = mu @ E2h @ mu.T
    E3 = np.einsum("abc,ia,jb,kc->ijk", E3h, mu, mu, mu)
    coef = MomentCoefficients(a0)
    X = np.einsum("ij,k->ijk", E2, M1)
    M2 = E2 - coef.a2 * np.outer(M1, M1)
    M3 = E3 - coef.a3 * (X + X.transpose(0, 2, 1) + X.transpose(2, 0, 1)) + coef.b3 * np.einsum("i,j,k->ijk", M1, M1, M1)
    np.testing.assert_allclose(M2, (mu * (alpha / (a0 * (a0 + 1)))) @ mu.T, atol=1e-14)
    np.testing.assert_allclose(M3, np.einsum("r,ir,jr,kr->ijk", 2 * alpha / (a0 * (a0 + 1) * (a0 + 2)), mu, mu, mu),
                               atol=1e-14)


# --------------------------------------------------------------------- estimator = brute force
@pytest.mark.parametrize("alpha0", ALPHA0S)
def test_m2_product_equals_brute_force(tiny_corpus, alpha0):
    C, Cs, _ = tiny_corpus
    M2, _ = brute_force_estimates(C, alpha0)
    omega = np.random.default_rng(1).standard_normal((5, 4))
    part = moments.m2_product_partial(Cs, omega)
    got = moments.m2_product(part, (C / C.sum(1, keepdims=True)).sum(0), omega, len(C), MomentCoefficients(alpha0))
    np.testing.assert_allclose(got, M2 @ omega, rtol=1e-12, atol=1e-15)
    dense = moments.m2_dense_partial(Cs)
    got_dense = moments.m2_product(dense, (C / C.sum(1, keepdims=True)).sum(0), np.eye(5), len(C),
                                   MomentCoefficients(alpha0))
    np.testing.assert_allclose(got_dense, M2, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("alpha0", ALPHA0S)
def test_whitened_tensor_equals_brute_force(tiny_corpus, alpha0):
    """T from projected documents (never d³) equals M3(W,W,W) of the brute-force U-statistic M3."""
    C, Cs, W = tiny_corpus
    _, M3 = brute_force_estimates(C, alpha0)
    tw = TensorWeights(len(C), alpha0)
    wt = WhitenedTensor(W, moments.tensor_partial(Cs, W, tw), (C / C.sum(1, keepdims=True)).sum(0), tw)
    expected = np.einsum("ijk,ia,jb,kc->abc", M3, W, W, W)
    np.testing.assert_allclose(wt.dense(), expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("alpha0", ALPHA0S)
def test_implicit_apply_equals_explicit(tiny_corpus, alpha0):
    """The implicit T(I,u,u) path (cube on shards + O(dkL) corrections) equals the dense tensor."""
    C, Cs, W = tiny_corpus
    tw = TensorWeights(len(C), alpha0)
    m1 = (C / C.sum(1, keepdims=True)).sum(0)
    wt = WhitenedTensor(W, moments.tensor_partial(Cs, W, tw), m1, tw)
    U = np.random.default_rng(3).standard_normal((3, 8))
    implicit = moments.cube_apply_partial(Cs, Cs @ W, tw, U) + wt.correction_apply(U)
    np.testing.assert_allclose(implicit, np.einsum("abc,bl,cl->al", wt.dense(), U, U), rtol=1e-12, atol=1e-14)


def test_shard_partials_merge_to_one_shard_result(tiny_corpus):
    """Sums of per-shard partials equal the single-shard partials (any split)."""
    C, Cs, W = tiny_corpus
    tw = TensorWeights(len(C), 0.35)
    whole = moments.tensor_partial(Cs, W, tw)
    merged = moments.tensor_partial(Cs[:2], W, tw) + moments.tensor_partial(Cs[2:5], W, tw) + moments.tensor_partial(Cs[5:], W, tw)
    for name in ("cube", "z", "g", "sum_m2", "sum_m1m1"):
        np.testing.assert_allclose(getattr(merged, name), getattr(whole, name), rtol=1e-12, atol=1e-15)
    omega = np.ones((5, 2))
    a = moments.m2_product_partial(Cs, omega)
    b = moments.m2_product_partial(Cs[:3], omega) + moments.m2_product_partial(Cs[3:], omega)
    np.testing.assert_allclose(a.e2, b.e2, rtol=1e-12)
    np.testing.assert_allclose(a.q, b.q, rtol=1e-12)


@pytest.mark.parametrize("k", [4, moments.HALF_CUBE_K + 3])
def test_weighted_cube_sum_blocks_agree(k):
    """Blocking over documents, and (from HALF_CUBE_K topics) computing only the entries whose first index is
    the smallest, by blocks of CUBE_TOPIC_BLOCK topics (k = 35: a short last block), do not change Σ ω y⊗3
    beyond rounding (relative 1e-12: sums of 50 products of O(1) terms). From HALF_CUBE_K topics every
    permutation of an entry is a copy of one computed entry, in float32 too."""
    rng = np.random.default_rng(5)
    Y, w = rng.standard_normal((50, k)), rng.random(50)
    ref = np.einsum("n,na,nb,nc->abc", w, Y, Y, Y)
    got = moments.weighted_cube_sum(Y, w, block=7)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())
    np.testing.assert_array_equal(got, got.transpose(1, 0, 2))
    if k >= moments.HALF_CUBE_K:
        low = moments.weighted_cube_sum(Y.astype(np.float32), w.astype(np.float32), block=7)
        for axes in [(1, 0, 2), (0, 2, 1), (2, 1, 0), (1, 2, 0), (2, 0, 1)]:
            np.testing.assert_array_equal(got, got.transpose(axes))
            np.testing.assert_array_equal(low, low.transpose(axes))


@pytest.mark.parametrize("alpha0", ALPHA0S)
def test_folded_m2_product_equals_unfolded(tiny_corpus, alpha0):
    """Folding Σ m1m1ᵀΩ into e2 once N is known gives the same M2 Ω."""
    C, Cs, _ = tiny_corpus
    coef = MomentCoefficients(alpha0)
    omega = np.random.default_rng(4).standard_normal((5, 3))
    m1 = (C / C.sum(1, keepdims=True)).sum(0)
    plain = moments.m2_product(moments.m2_product_partial(Cs, omega), m1, omega, len(C), coef)
    folded = moments.m2_product_partial(Cs, omega, moments.q_fold_scale(len(C), coef))
    np.testing.assert_allclose(moments.m2_product(folded, m1, omega, len(C), coef), plain, rtol=1e-12, atol=1e-16)


def test_short_documents_have_zero_weight(tiny_corpus):
    """Documents with < 3 tokens (including empty ones) drop out of every partial sum exactly."""
    C, Cs, W = tiny_corpus
    short = sp.csr_matrix(np.array([[1, 1, 0, 0, 0], [0, 0, 0, 0, 0], [0, 2, 0, 0, 0]], dtype=float))
    mixed = sp.vstack([Cs[:3], short, Cs[3:]]).tocsr()
    assert np.all(np.stack(moments.doc_weights(moments.doc_lengths(short))) == 0.0)
    tw = TensorWeights(len(C), 0.35)
    a, b = moments.tensor_partial(Cs, W, tw), moments.tensor_partial(mixed, W, tw)
    for name in ("cube", "z", "g", "sum_m2", "sum_m1m1"):
        np.testing.assert_allclose(getattr(b, name), getattr(a, name), rtol=1e-12, atol=1e-15)
    omega = np.random.default_rng(2).standard_normal((5, 3))
    pa, pb = moments.m2_product_partial(Cs, omega), moments.m2_product_partial(mixed, omega)
    np.testing.assert_allclose(pb.e2, pa.e2, rtol=1e-12)
    np.testing.assert_allclose(pb.q, pa.q, rtol=1e-12)


def test_row_sums_in_chunks_equal_the_whole_matrix_sums():
    # Empty rows (first, last, in runs), a row longer than the chunk, chunks of 1 and of everything.
    rng = np.random.default_rng(4)
    dense = rng.poisson(0.3, size=(40, 25)).astype(float)
    dense[[0, 7, 8, 9, 39]] = 0.0
    dense[20] = rng.integers(1, 4, size=25)
    C = sp.csr_matrix(dense)
    for fn in (np.square, lambda x: (x * x - x) ** 2):
        want = np.asarray(sp.csr_matrix((fn(C.data), C.indices, C.indptr), shape=C.shape).sum(axis=1)).ravel()
        for chunk in (1, 3, 7, 25, C.nnz + 1):
            np.testing.assert_allclose(moments.row_sums(C, fn, chunk), want, rtol=1e-13, atol=0)
    assert moments.row_sums(sp.csr_matrix((3, 4)), np.square).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("folded", [False, True])
def test_float32_products_stay_within_their_rounding_bound(folded, monkeypatch):
    """The float32 products of m2_product_partial against float64, entry by entry, within a derived bound.

    Each block entry e2_wj = Σ_i C_iw f_i (Σ_v C_iv Ω_vj) is an inner sum of at most L terms (L: the most
    nonzeros in a row), then an outer sum of at most R terms (R: the rows of a block), after rounding Ω and
    f to float32 and one product more: n = L + R + 3 roundings of unit u = 2⁻²⁴ on each path. A sum of n
    products in precision u errs by at most γ_n = nu/(1 − nu) times the sum of their absolute values
    (Higham 2002, §3.1), here |C|ᵀ(|f| ∘ |C||Ω|); the blocks' float64 sum and the float64 diagonal term add
    rounding of order 1e-16 of the same, covered by the bound's slack. The rows are split into blocks of
    ≤ 300 so that the block sums are exercised.
    """
    rng = np.random.default_rng(0)
    C = sp.random(1500, 80, density=0.2, random_state=1, data_rvs=lambda n: rng.integers(1, 6, n)).tocsr()
    C.data = C.data.astype(np.float64)
    omega = rng.standard_normal((80, 12))
    q_scale = 1e-3 if folded else None
    monkeypatch.setattr(moments, "PRODUCT_BLOCK_ENTRIES", 300 * 12)
    exact = moments.m2_product_partial(C, omega, q_scale)
    low = moments.m2_product_partial(C, omega, q_scale, dtype=np.float32)
    assert low.e2.dtype == np.float64
    w1, w2, _ = moments.doc_weights(moments.doc_lengths(C))
    f = w2 + (q_scale * w1 * w1 if folded else 0.0)
    absC = abs(C)
    magnitude = absC.T @ (np.abs(f)[:, None] * (absC @ np.abs(omega)))
    n = int(np.diff(C.indptr).max()) + 300 + 3
    u = 2.0 ** -24
    bound = n * u / (1 - n * u) * magnitude + 1e-12 * np.abs(exact.e2)
    assert np.all(np.abs(low.e2 - exact.e2) <= bound)
    assert np.abs(low.e2 - exact.e2).max() > 0          # float32 was used (the bound is not vacuous here)
    if not folded:
        q_mag = absC.T @ ((w1 * w1)[:, None] * (absC @ np.abs(omega)))
        assert np.all(np.abs(low.q - exact.q) <= n * u / (1 - n * u) * q_mag + 1e-12 * np.abs(exact.q))


@pytest.mark.parametrize("k", [6, moments.HALF_CUBE_K])
def test_float32_tensor_partial_stays_within_its_rounding_bound(k, monkeypatch):
    """The float32 row-block products of tensor_partial against float64, entry by entry, within a derived bound.

    y = C W is an inner sum of at most L terms after rounding W to float32: |ŷ − y| ≤ γ_{L+1} a, a = |C||W|.
    Each block entry is then at most three such factors, three more roundings (the weight's cast, the
    products) and an outer sum of at most R terms (the rows of a block): n = 3(L + 1) + R + 3 roundings of
    u = 2⁻²⁴, so the error is at most γ_n = nu/(1 − nu) times the entry's sum of absolute terms with a in place
    of |y| (Higham 2002, §3.1 and Lemma 3.3): Σ |ω| a⊗a⊗a for the cube, |C|ᵀ(|v| ∘ a) for z, aᵀ(|w| ∘ a) for the
    k×k sums (the cube's mean over its mode permutations, below HALF_CUBE_K, and its copies of one computed
    entry to all six, from it, keep the bound: the magnitude is symmetric). The
    blocks' float64 sum adds rounding of order 1e-16 of the same (the bound's 1e-12 slack). The
    rows are split into blocks of ≤ 300 (the cube's products into smaller ones) so that the block sums are
    exercised; k = 6 takes the full Khatri–Rao product, k = HALF_CUBE_K the blocks of the symmetric sum.
    """
    rng = np.random.default_rng(0)
    C = sp.random(1500, 80, density=0.2, random_state=1, data_rvs=lambda n: rng.integers(1, 6, n)).tocsr()
    C.data = C.data.astype(np.float64)
    W = rng.standard_normal((80, k))
    tw = moments.TensorWeights(1500, 1.0)
    monkeypatch.setattr(moments, "PRODUCT_BLOCK_ENTRIES", 300 * k)
    exact = moments.tensor_partial(C, W, tw)
    low = moments.tensor_partial(C, W, tw, dtype=np.float32)
    w1, w2, w3 = moments.doc_weights(moments.doc_lengths(C))
    omega, v = np.abs(tw.omega(w1, w2, w3)), np.abs(tw.v(w1, w2, w3))
    a = abs(C) @ np.abs(W)
    L, R = int(np.diff(C.indptr).max()), 300
    n = 3 * (L + 1) + R + 3
    gamma = n * 2.0 ** -24 / (1 - n * 2.0 ** -24)
    pairs = [(low.cube, exact.cube, np.einsum("n,ni,nj,nl->ijl", omega, a, a, a)),
             (low.z, exact.z, abs(C).T @ (v[:, None] * a)),
             (low.sum_m2, exact.sum_m2, a.T @ (np.abs(w2)[:, None] * a)),
             (low.sum_m1m1, exact.sum_m1m1, a.T @ ((w1 * w1)[:, None] * a))]
    for got, want, magnitude in pairs:
        assert got.dtype == np.float64
        assert np.all(np.abs(got - want) <= gamma * magnitude + 1e-12 * np.abs(want))
        assert np.abs(got - want).max() > 0          # float32 was used (the bound is not vacuous here)
    np.testing.assert_array_equal(low.g, exact.g)     # the diagonal weights stay float64
    # symmetric as the exact sums are (the means over the index permutations), to float64 rounding, so the
    # whitened tensor passes the power method's symmetry check
    assert max(np.abs(low.cube - low.cube.transpose(p)).max() for p in [(0, 2, 1), (1, 0, 2), (2, 1, 0)]) \
        <= 1e-15 * np.abs(low.cube).max()
    for S in (low.sum_m2, low.sum_m1m1):
        assert np.abs(S - S.T).max() <= 1e-15 * np.abs(S).max()
    m1 = np.asarray(C.multiply(1.0 / C.sum(axis=1)).sum(axis=0)).ravel()
    check_symmetric(WhitenedTensor(W, low, m1, tw).dense(), 1e-8, "the float32 whitened tensor")
