"""AGN, AVN and DP-TPM on the single-topic model (distdp.lda.private.single_topic)."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, stats

from distdp.privacy import accounting as acct
from distdp.privacy import mechanisms
from distdp.lda.private import single_topic as md
from distdp.privacy.ledger import BudgetNotMetError
from distdp.privacy.neighbours import REPLACE_ONE_DOCUMENT
from distdp.lda.synthetic import sample_corpus

SQRT2 = math.sqrt(2.0)


def counts_of(docs, d):
    """(N, d) CSR counts of token-id lists."""
    C = np.zeros((len(docs), d))
    for n, t in enumerate(docs):
        np.add.at(C[n], np.asarray(t, dtype=int), 1)
    return sp.csr_matrix(C)


def brute_moments(docs, d):
    """M2, M3 as averages over ordered pairs/triples of distinct token positions (the definition)."""
    M2, M3 = np.zeros((d, d)), np.zeros((d, d, d))
    for t in docs:
        l = len(t)
        for a, b in itertools.permutations(range(l), 2):
            M2[t[a], t[b]] += 1.0 / (l * (l - 1))
        for a, b, c in itertools.permutations(range(l), 3):
            M3[t[a], t[b], t[c]] += 1.0 / (l * (l - 1) * (l - 2))
    return M2 / len(docs), M3 / len(docs)


def moment_change(docs, other, d):
    """ℓ2 change of the unique-entry vectors (and Frobenius norms) of M2, M3 when docs[-1] → other."""
    a = md.stm_moments(counts_of(docs, d))
    b = md.stm_moments(counts_of(docs[:-1] + [other], d))
    return (np.linalg.norm(md.unique_m2(a.m2) - md.unique_m2(b.m2)),
            np.linalg.norm(mechanisms.unique_entries(a.m3) - mechanisms.unique_entries(b.m3)),
            np.linalg.norm(a.m2 - b.m2), np.linalg.norm(a.m3 - b.m3), a, b)


# --------------------------------------------------------------------------- moments

def test_moments_match_definition():
    rng = np.random.default_rng(1)
    d = 5
    docs = [list(rng.integers(0, d, size=rng.integers(3, 7))) for _ in range(15)]
    m = md.stm_moments(counts_of(docs, d))
    B2, B3 = brute_moments(docs, d)
    np.testing.assert_allclose(m.m2, B2, atol=1e-15)
    np.testing.assert_allclose(m.m3, B3, atol=1e-15)


def test_moments_unbiased_for_model():
    """E[M2] = Σ w a aᵀ, E[M3] = Σ w a⊗3: sampling error only, O(1/√N)."""
    rng = np.random.default_rng(2)
    c = sample_corpus(40_000, 6, 3, rng, model="stm", doc_length=8, topic_concentration=0.5)
    m = md.stm_moments(c.counts)
    M2 = np.einsum("k,ki,kj->ij", c.alpha, c.topic_word, c.topic_word)
    M3 = np.einsum("k,ki,kj,kl->ijl", c.alpha, c.topic_word, c.topic_word, c.topic_word)
    # entries ≤ 1 averaged over 4·10⁴ documents: standard error ≤ 1/√N = 0.005; 0.01 is two of them
    assert np.abs(m.m2 - M2).max() < 0.01
    assert np.abs(m.m3 - M3).max() < 0.01


# --------------------------------------------------------------------------- sensitivity

docs_strategy = st.integers(2, 6).flatmap(lambda d: st.tuples(
    st.just(d),
    st.lists(st.lists(st.integers(0, d - 1), min_size=3, max_size=8), min_size=1, max_size=5),
    st.lists(st.integers(0, d - 1), min_size=3, max_size=8)))


@settings(max_examples=60, deadline=None)
@given(docs_strategy)
def test_sensitivity_random_neighbours(case):
    d, docs, other = case
    N = len(docs)
    bound = md.moment_sensitivity(N)
    u2, u3, f2, f3, _, _ = moment_change(docs, other, d)
    # exact arithmetic gives ≤ √2/N; 1e-12 absorbs rounding of sums of ≤ 10³ terms of size ≤ 1
    assert u2 <= f2 + 1e-12 and u3 <= f3 + 1e-12
    assert f2 <= bound + 1e-12 and f3 <= bound + 1e-12


@pytest.mark.parametrize("d", [3, 4])
def test_sensitivity_exhaustive_length3(d):
    """Every pair of length-3 documents over d words: the max is exactly √2/N (identical-word documents)."""
    docs = [list(t) for t in itertools.combinations_with_replacement(range(d), 3)]
    base = [[0, 1, 2]]
    worst2 = worst3 = 0.0
    for a, b in itertools.product(docs, docs):
        u2, u3, *_ = moment_change(base + [a], b, d)
        worst2, worst3 = max(worst2, u2), max(worst3, u3)
    bound = md.moment_sensitivity(2)
    assert worst2 == pytest.approx(bound, rel=1e-12) and worst3 == pytest.approx(bound, rel=1e-12)


def test_sensitivity_adversarial_cases():
    d, N = 6, 4
    filler = [[0, 1, 2]] * (N - 1)
    bound = md.moment_sensitivity(N)
    # identical words i vs identical words j: attains the bound
    u2, u3, *_ = moment_change(filler + [[3, 3, 3]], [4, 4, 4], d)
    assert u2 == pytest.approx(bound, rel=1e-12) and u3 == pytest.approx(bound, rel=1e-12)
    # 3 identical vs 3 distinct: ‖e_i⊗3 − (1/6)Σ perms‖ = √(1 + 6/36) (M3), unique entries √(1 + 1/36)
    u2, u3, f2, f3, _, _ = moment_change(filler + [[3, 3, 3]], [3, 4, 5], d)
    assert f3 == pytest.approx(math.sqrt(1 + 6 / 36) / N, rel=1e-12)
    assert u3 == pytest.approx(math.sqrt(1 + 1 / 36) / N, rel=1e-12)
    assert max(u2, u3, f2, f3) <= bound
    # long documents of one word vs many distinct words
    u2, u3, f2, f3, _, _ = moment_change(filler + [[5] * 40], list(range(6)) * 7, d)
    assert max(u2, u3, f2, f3) <= bound + 1e-15


@settings(max_examples=30, deadline=None)
@given(docs_strategy, st.integers(0, 2 ** 32 - 1))
def test_whitened_tensor_sensitivity(case, seed):
    """DP-TPM's Δ = 2r³/N bounds the change of T(I,u,u) and T(u,u,u) for the whitened T = M3(W,W,W)."""
    d, docs, other = case
    rng = np.random.default_rng(seed)
    k = min(d, 2)
    W = rng.standard_normal((d, k)) * rng.uniform(0.1, 5.0)
    *_, a, b = moment_change(docs, other, d)
    Ta, Tb = md.whiten_tensor(a.m3, W), md.whiten_tensor(b.m3, W)
    U = rng.standard_normal((k, 7))
    U /= np.linalg.norm(U, axis=0)
    dT = Ta - Tb
    apply = np.einsum("ijk,jl,kl->il", dT, U, U)
    value = np.einsum("il,il->l", U, apply)
    s = md.whitened_sensitivity_bound(W, len(docs))
    assert np.all(np.linalg.norm(apply, axis=0) <= s * (1 + 1e-12))
    assert np.all(np.abs(value) <= s * (1 + 1e-12))


def test_whitened_tensor_sensitivity_is_attained():
    """The bound is 2r³/N exactly, and tight: with W's rows w and −w (r = ‖w‖), replacing a document of
    word 0 alone by one of word 1 alone moves T(I,u,u) at u = w/r by w·r² − (−w·r²), of norm 2r³/N.
    (A bound N² too large once passed the one-sided test above.)"""
    d, n = 4, 7
    w = np.array([0.6, -1.3])
    W = np.vstack([w, -w, 0.1 * w, np.zeros(2)])
    r = np.linalg.norm(w)
    filler = [[2, 3, 2], [3, 2, 2, 3]] * 3
    *_, a, b = moment_change(filler + [[0] * 5], [1] * 5, d)
    assert len(filler) + 1 == n
    u = w / r
    change = np.einsum("ijk,j,k->i", md.whiten_tensor(a.m3, W) - md.whiten_tensor(b.m3, W), u, u)
    s = md.whitened_sensitivity_bound(W, n)
    assert s == pytest.approx(2 * r ** 3 / n, rel=1e-14)
    assert np.linalg.norm(change) == pytest.approx(s, rel=1e-12)


# --------------------------------------------------------------------------- noise distributions

@pytest.fixture(scope="module")
def small_moments():
    rng = np.random.default_rng(3)
    c = sample_corpus(500, 6, 2, rng, model="stm", doc_length=6)
    return md.stm_moments(c.counts)


# Goodness of fit: KS tests with a fixed seed, rejection at p < 1e-3. Under the stated
# distribution the p-value is uniform, so a correct sampler fails with probability 1e-3
# (for this seed: deterministically passes or not); each test also checks that a 10 %
# error in the scale IS rejected, so the sample is large enough for the test to mean something.
P_REJECT = 1e-3


def test_agn_noise_scale(small_moments):
    m, N = small_moments, small_moments.n_docs
    rng = np.random.default_rng(4)
    eps, delta = 0.7, 1e-5
    tau = mechanisms.analytic_gaussian_sigma(eps, delta, SQRT2 / N)
    e2 = np.concatenate([md.unique_m2(md.release_m2(m.m2, N, eps, delta, rng)[0] - m.m2) for _ in range(200)])
    e3 = np.concatenate([mechanisms.unique_entries(md.release_m3_gaussian(m.m3, N, eps, delta, rng)[0] - m.m3)
                         for _ in range(60)])
    for e in (e2, e3):  # 4200 and 3360 samples
        assert stats.kstest(e / tau, "norm").pvalue > P_REJECT
        assert stats.kstest(e / (1.1 * tau), "norm").pvalue < P_REJECT
    noisy, rel = md.release_m3_gaussian(m.m3, N, eps, delta, rng)
    assert rel.noise_scale == pytest.approx(tau) and rel.sensitivity == pytest.approx(SQRT2 / N)
    np.testing.assert_array_equal(noisy, noisy.transpose(1, 0, 2))
    np.testing.assert_array_equal(noisy, noisy.transpose(2, 1, 0))


def test_avn_noise_law(small_moments):
    """‖b‖ ~ Gamma(C(d+2,3), 1/β) and b/‖b‖ uniform on the sphere (first coordinate² ~ Beta(1/2, (D−1)/2))."""
    m, N = small_moments, small_moments.n_docs
    rng = np.random.default_rng(5)
    eps = 0.9
    beta = eps / (SQRT2 / N)
    D = mechanisms.n_unique_entries(m.dim)
    B = np.array([mechanisms.unique_entries(md.release_m3_l2(m.m3, N, eps, rng)[0] - m.m3) for _ in range(1500)])
    r = np.linalg.norm(B, axis=1)
    assert stats.kstest(r, stats.gamma(D, scale=1 / beta).cdf).pvalue > P_REJECT
    assert stats.kstest(r, stats.gamma(D, scale=1.1 / beta).cdf).pvalue < P_REJECT
    assert stats.kstest((B[:, 0] / r) ** 2, stats.beta(0.5, (D - 1) / 2).cdf).pvalue > P_REJECT
    rel = md.release_m3_l2(m.m3, N, eps, rng)[1]
    assert rel.noise_scale == pytest.approx(1 / beta) and rel.mechanism == "l2-vector"


# --------------------------------------------------------------------------- accounting

@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(6)
    c = sample_corpus(20_000, 8, 3, rng, model="stm", doc_length=10, topic_concentration=0.2)
    return c, md.stm_moments(c.counts)


def pld_tol(eps):
    """PLD uses pessimistic rounding on a grid of 1e-4·max(1, ε) (accounting.epsilon_pld): ≤ 2 cells above."""
    return 2e-4 * max(1.0, eps)


@pytest.mark.parametrize("eps,delta", [(0.5, 1e-6), (2.0, 1e-5)])
def test_agn_ledger_closed_form(corpus, eps, delta):
    _, m = corpus
    r = md.agn(m, 3, epsilon=eps, delta=delta, rng=np.random.default_rng(0), reproducible=True)
    assert [x.stage for x in r.ledger.releases] == ["M2", "M3"]
    mult = mechanisms.analytic_gaussian_sigma(eps / 2, delta / 2, 1.0)
    for x in r.ledger.releases:
        assert x.noise_scale / x.sensitivity == pytest.approx(mult, rel=1e-9)
    exact = acct.gaussian_composition_epsilon(mult, 2, delta)   # two Gaussians = one with m/√2
    assert exact - 1e-9 <= r.epsilon_spent <= exact + pld_tol(eps)
    assert r.epsilon_spent <= eps                                # basic composition: ε/2 + ε/2
    assert r.status == "not private"


@pytest.mark.parametrize("eps,delta", [(0.5, 1e-6), (2.0, 1e-5)])
def test_avn_ledger_closed_form(corpus, eps, delta):
    _, m = corpus
    r = md.avn(m, 3, epsilon=eps, delta=delta, rng=np.random.default_rng(0), reproducible=True)
    g, v = r.ledger.releases
    assert (g.mechanism, v.mechanism) == ("gaussian", "l2-vector")
    mult = mechanisms.analytic_gaussian_sigma(eps / 2, delta, 1.0)
    assert g.noise_scale / g.sensitivity == pytest.approx(mult, rel=1e-9)
    # Gaussian ∘ ε0-pure (worst case: randomized response with privacy loss ±ε0):
    # δ(ε) = p·δ_G(ε − ε0) + (1 − p)·δ_G(ε + ε0), p = e^ε0/(1 + e^ε0)
    e0 = eps / 2
    p = math.exp(e0) / (1 + math.exp(e0))

    def delta_of(e):
        return p * mechanisms.gaussian_delta(mult, e - e0) + (1 - p) * mechanisms.gaussian_delta(mult, e + e0)

    exact = optimize.brentq(lambda e: delta_of(e) - delta, 0.0, 10 * eps, xtol=1e-12)
    assert exact - 1e-9 <= r.epsilon_spent <= exact + pld_tol(eps) * 3
    assert r.epsilon_spent <= eps


def test_dp_tpm_ledger_closed_form(corpus):
    _, m = corpus
    eps, delta = 1.0, 1e-5
    r = md.dp_tpm(m, 3, epsilon=eps, delta=delta, rng=np.random.default_rng(0), reproducible=True,
                  n_restarts=5, n_iters=6)
    stages = [x.stage for x in r.ledger.releases]
    assert stages == ["M2", "power_iteration", "eigenvalue"]
    m0 = mechanisms.analytic_gaussian_sigma(eps / 2, delta / 2, 1.0)
    K = 3 * 5 * (6 + 1)
    mK = acct.calibrate_gaussian_multiplier(eps / 2, delta / 2, K, "pld")
    assert sum(x.count for x in r.ledger.releases[1:]) == K
    m_tot = 1.0 / math.sqrt(1 / m0 ** 2 + K / mK ** 2)          # all Gaussian: one Gaussian
    exact = mechanisms.gaussian_epsilon(m_tot, delta)
    assert exact - 1e-9 <= r.epsilon_spent <= exact + pld_tol(eps)
    assert r.epsilon_spent <= eps * (1 + 1e-9)


# --------------------------------------------------------------------------- utility and modes

def test_recovery_and_modes(corpus):
    c, m = corpus
    base = md.non_private(m, 3, rng=np.random.default_rng(0))
    assert md.e_comp(base.topic_word, c.topic_word) < 0.05
    rand = md.e_comp(md.random_vectors(3, 8, np.random.default_rng(0)), c.topic_word)
    a = md.agn(m, 3, epsilon=50.0, delta=1e-5)                   # private mode: OS entropy
    assert a.private and a.status == "private" and a.ledger.private
    assert md.e_comp(a.topic_word, c.topic_word) < 0.1 < rand
    r1 = md.avn(m, 3, epsilon=5.0, delta=1e-5, rng=np.random.default_rng(9), reproducible=True)
    r2 = md.avn(m, 3, epsilon=5.0, delta=1e-5, rng=np.random.default_rng(9), reproducible=True)
    np.testing.assert_array_equal(r1.topic_word, r2.topic_word)
    assert not r1.private and any("not private" in n for n in r1.notes)
    d = r1.to_dict()
    assert d["private"] is False and any("not private" in n for n in d["not_private_because"])
    assert r1.privacy.neighbour is REPLACE_ONE_DOCUMENT and d["neighbour"]["name"] == "replace-one-document"
    assert all(rel["neighbour"] == str(REPLACE_ONE_DOCUMENT) for rel in d["ledger"])
    assert d["requested"] == {"epsilon": 5.0, "delta": 1e-5} and d["epsilon"] == r1.epsilon_spent
    p = md.dp_tpm(m, 3, epsilon=5.0, delta=1e-5, rng=np.random.default_rng(0), reproducible=True,
                  sensitivity="paper", n_restarts=5, n_iters=6)
    assert not p.private and any("conditions unchecked" in n for n in p.notes)


# --------------------------------------------------------------------------- bad parameters

@pytest.mark.parametrize("fn", [md.agn, md.avn, md.dp_tpm])
@pytest.mark.parametrize("eps", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_epsilon(corpus, fn, eps):
    with pytest.raises(ValueError, match="epsilon"):
        fn(corpus[1], 3, epsilon=eps, delta=1e-5)


@pytest.mark.parametrize("fn", [md.agn, md.avn, md.dp_tpm])
@pytest.mark.parametrize("delta", [0.0, 1.0, -0.1, 1.5])
def test_bad_delta(corpus, fn, delta):
    with pytest.raises(ValueError, match="delta"):
        fn(corpus[1], 3, epsilon=1.0, delta=delta)


def test_bad_inputs(corpus):
    m = corpus[1]
    big = sp.csr_matrix((np.full(3, 3.0), ([0, 1, 2], [0, 1, 499])), shape=(3, 500))
    with pytest.raises(ValueError, match="power method"):
        md.stm_moments(big)
    with pytest.raises(ValueError, match="power method"):
        md.check_dense_dim(10, max_entries=999)
    with pytest.raises(ValueError, match="length ≥ 3"):
        md.stm_moments(sp.csr_matrix(np.array([[1.0, 1.0, 0.0], [3.0, 0.0, 0.0]])))
    with pytest.raises(ValueError, match="reproducible"):
        md.agn(m, 3, epsilon=1.0, delta=1e-5, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="k must"):
        md.avn(m, 9, epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="mechanism"):
        md.fit_stm(m, 3, "laplace", epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="sensitivity"):
        md.dp_tpm(m, 3, epsilon=1.0, delta=1e-5, sensitivity="made-up")


def test_noisy_m2_without_positive_sigma_k_fails_clearly():
    rng = np.random.default_rng(7)
    c = sample_corpus(20, 8, 3, rng, model="stm", doc_length=5)
    # k = d: the k-th eigenvalue of a noise-dominated symmetric matrix is its most negative one
    with pytest.raises(BudgetNotMetError, match="cannot whiten.*budget.*count it against the privacy budget"):
        md.agn(c.counts, 8, epsilon=0.01, delta=1e-6, rng=np.random.default_rng(1), reproducible=True)
