"""The scalable mechanisms' math (distdp.lda.private.scalable): unmixing solves and their noise levels, word scales,
thresholds, the tensor's assembly, histograms, and the budget plan's splits."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distdp.lda import moments, refine
from distdp.lda.private import fit as pf
from distdp.privacy import mechanisms
from distdp.lda.private import scalable as lda_private
from distdp.privacy.ledger import BudgetNotMetError
from distdp.lda.private.shard import PrivateShard as Shard
from private_neighbours import D, K, corpora, csr, neighbours, public_scales
from distdp.lda.synthetic import sample_corpus


def test_unmixing_inverts_the_mixing_exactly():
    # With counts equal to their expectation l_n θ_nᵀβ and θ̂ = θ, Q = Gβ exactly, so G⁻¹Q returns β
    # (brute-force identity check of lda_private.tail_statistics and unmix_topics, no noise).
    rng = np.random.default_rng(0)
    beta = rng.dirichlet(np.full(D, 0.5), size=K)
    theta = rng.dirichlet(np.full(K, 0.3), size=60)
    lengths = rng.integers(5, 50, size=60).astype(float)
    expected = sp.csr_matrix(lengths[:, None] * theta @ beta)
    cap = 4.0  # the weights w_n differ between documents (each is scaled to the cap)
    w = lda_private.unmix_weights(lda_private.count_norms(expected), lengths, cap, np.linalg.norm(theta, axis=1))
    assert 0 < w.min() < w.max()
    Q, G = lda_private.tail_statistics(expected, theta, cap)
    np.testing.assert_allclose(G, (theta * (w * lengths)[:, None]).T @ theta)
    np.testing.assert_allclose(lda_private.unmix_topics(Q, G, 0.0, 0.0).topic_word, beta, atol=1e-10)
    # Thresholding at t·σ_Q‖(G⁻¹)_i‖₂ zeroes exactly the entries below it, then rows are renormalised.
    sig = 1e-3
    B = np.linalg.solve(G, Q)
    got = lda_private.unmix_topics(Q, G, sig, 2.0)
    dev = sig * np.linalg.norm(np.linalg.inv(G), axis=1)[:, None] * np.ones(D)
    keep = B > 2.0 * dev
    mass = np.where(keep, B, 0).sum(1, keepdims=True)
    np.testing.assert_allclose(got.topic_word, np.where(keep, B, 0) / mass)
    np.testing.assert_allclose(got.deviation, dev / mass)      # on the normalised topics' scale
    # With word scales the documents' weights change (each term's scaled norm is set to the cap), Q carries the
    # scales, and G⁻¹(Q/S) is β again.
    S = lda_private.word_scales(beta, beta.mean(axis=0))
    Qs, Gs = lda_private.tail_statistics(expected, theta, cap, S)
    unit = theta / np.linalg.norm(theta, axis=1, keepdims=True)
    ws = lda_private.unmix_weights(lda_private.pass_norms(expected, unit, S), lengths, cap,
                                   np.linalg.norm(theta, axis=1))
    assert not np.allclose(ws, w)
    np.testing.assert_allclose(Gs, (theta * (ws * lengths)[:, None]).T @ theta)
    np.testing.assert_allclose(Qs / S, (theta * ws[:, None]).T @ expected.toarray())
    np.testing.assert_allclose(lda_private.unmix_topics(Qs, Gs, 0.0, 0.0, scales=S).topic_word, beta, atol=1e-10)
    with pytest.raises(ValueError, match="not positive definite"):
        lda_private.unmix_topics(Q, -G, 0.0, 0.0)
    with pytest.raises(ValueError, match="no word above the noise"):
        lda_private.unmix_topics(Q, G, 1e9, 2.0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpora, st.floats(0.5, 30.0), st.sampled_from([False, "scaled", "support"]),
       st.sampled_from([1.0, 2.0, 3.5, np.inf]))
def test_unmix_pass_statistics_sensitivity(data, cap, scaled, sharpen):
    # The replaced document may carry any mixture θ̂ (it is a function of that document); the others keep theirs.
    a, b, rng = neighbours(data)
    rows, _, i, _ = data
    theta = rng.dirichlet(np.full(K, 0.3), size=len(rows))
    theta_b = theta.copy()
    theta_b[i % len(rows)] = rng.dirichlet(np.full(K, 0.3))
    S = public_scales(rng, scaled)
    qa, ga = lda_private.unmix_pass_statistics(a.counts, theta, cap, S, sharpen)
    qb, gb = lda_private.unmix_pass_statistics(b.counts, theta_b, cap, S, sharpen)
    sens_q, sens_g = lda_private.tail_sensitivities(cap)
    assert np.linalg.norm(qa - qb) <= sens_q * (1 + 1e-9)
    assert np.linalg.norm(ga - gb) <= sens_g * (1 + 1e-9)


def test_single_topic_posterior_is_the_brute_force_mode():
    # Each document's one-hot is the argmax over topics of log π_i + Σ_v x_v log β̃_iv, β̃ the topics mixed
    # with the uniform distribution (weight s), computed by a loop; with it the pass's G is diagonal and
    # the solve of expected counts returns β.
    rng = np.random.default_rng(3)
    beta = rng.dirichlet(np.full(D, 0.5), size=K)
    beta[0, 2] = 0.0                                       # a zero entry is smoothed (or floored), not -inf
    beta /= beta.sum(axis=1, keepdims=True)
    weights = np.array([0.5, 0.3, 0.2])
    counts = rng.poisson(2.0, size=(40, D))
    for s in (lda_private.SINGLE_TOPIC_SMOOTHING, 0.0):
        theta = lda_private.single_topic_posterior(csr(counts), beta, 3 * weights, s)   # weights are normalised
        for row, x in zip(theta, counts):
            scores = [math.log(w) + sum(c * math.log(max((1 - s) * b + s / D, 1e-12)) for c, b in zip(x, topic))
                      for w, topic in zip(weights, beta)]
            assert row.sum() == 1.0 and row[int(np.argmax(scores))] == 1.0
    lengths = rng.integers(5, 50, size=40).astype(float)
    Q, G = lda_private.unmix_pass_statistics(sp.csr_matrix(lengths[:, None] * theta @ beta), theta, 4.0)
    assert np.count_nonzero(G - np.diag(np.diag(G))) == 0
    noisy_g = G + 1e-3 * np.abs(G).max() * rng.standard_normal(G.shape)
    # Off-diagonal noise is dropped (post-processing: G is diagonal by construction).
    np.testing.assert_allclose(lda_private.unmix_topics(Q, noisy_g * (1 - np.eye(K)) + np.diag(np.diag(G)), 0.0,
                                                        0.0, symmetric=False, diagonal=True).topic_word, beta,
                               atol=1e-10)


def test_unmix_diagonal_keeps_the_start_of_a_topic_without_documents():
    # A diagonal G (single-topic θ̂): row i is Q_i/g_i thresholded at 2σ_Q/g_i and normalised; a topic whose
    # noisy g_i is not above 2σ_G received no documents above the noise and keeps its start's row.
    Q = np.array([[10.0, 0.5, 30.0], [3.0, 0.1, 0.2], [0.0, 8.0, 8.0]])
    g = np.array([4.0, 0.9, 2.0])
    previous = np.array([[0.2, 0.2, 0.6], [0.5, 0.0, 1.5], [1.0, 1.0, 1.0]])
    out = lda_private.unmix_diagonal(Q, g, sigma_q=1.0, sigma_g=0.5, threshold=2.0, previous=previous)
    np.testing.assert_allclose(out.topic_word[0], [10.0, 0.0, 30.0] / np.float64(40.0))  # 0.5/4 < 2·1/4: 0
    np.testing.assert_allclose(out.topic_word[1], [0.25, 0.0, 0.75])                     # 0.9 ≤ 2·0.5: the start
    np.testing.assert_allclose(out.topic_word[2], [0.0, 0.5, 0.5])
    # Deviations σ_Q/g_i over the row's sum of Q_i/g_i kept; 0 on the row kept from the start.
    np.testing.assert_allclose(out.deviation, [[0.25 / 10.0] * 3, [0.0] * 3, [0.5 / 8.0] * 3])
    # Through unmix_topics the noisy off-diagonal entries of G are not used.
    G = np.diag(g) + np.array([[0.0, 7.0, -3.0], [2.0, 0.0, 5.0], [1.0, 1.0, 0.0]])
    np.testing.assert_allclose(lda_private.unmix_topics(Q, G, 1.0, 2.0, symmetric=False, diagonal=True,
                                                        sigma_g=0.5, previous=previous).topic_word, out.topic_word)
    with pytest.raises(BudgetNotMetError, match="no documents above the noise"):
        lda_private.unmix_diagonal(Q, g, 1.0, 0.5, 2.0)


def test_mixture_topics_floors_only_the_zeroed_entries():
    # Entries the solve set to 0 get floor × their deviation, the others stay; rows renormalised. Without
    # deviations (a spectral start) or with floor 0 the topics come back normalised and otherwise unchanged.
    topics = np.array([[0.5, 0.0, 0.5], [0.0, 1.0, 0.0]])
    dev = np.array([[0.1, 0.2, 0.1], [0.3, 0.05, 0.5]])
    start = lda_private.UnmixedTopics(topics, topics, dev)        # the solve's rows sum to 1: deviation = dev
    np.testing.assert_allclose(start.deviation, dev)
    got = lda_private.mixture_topics(start, floor=0.2)
    np.testing.assert_allclose(got, [[0.5 / 1.04, 0.04 / 1.04, 0.5 / 1.04], [0.06 / 1.16, 1.0 / 1.16, 0.1 / 1.16]])
    for start, floor in ((lda_private.UnmixedTopics(2 * topics), 0.2), (start, 0.0)):
        np.testing.assert_allclose(lda_private.mixture_topics(start, floor), topics)


def test_combine_unmixed_by_hand():
    # Two solves of one topic over 4 words. D = y_e − y_l = (0.2, −0.2, 0.2, −0.2): mean D² = 0.04, mean n_l² =
    # 0.01, mean n_e² = 0.01, so κ = (0.04 − 0.01)/0.01 = 3 and the precisions are 1/0.03 and 1/0.01: weights
    # ¼ and ¾, deviation (1/0.03 + 1/0.01)^{-1/2} = 0.0866. Firm threshold at 1.5 and 3 of that (0.130, 0.260):
    # 0.05 → 0, 0.45 kept, 0.15 and 0.25 on the ramp 3·dev(y − 1.5·dev)/(1.5·dev) = 2y − 3·dev; the row is
    # divided by their sum 1.25 − 6·dev, and so is the deviation.
    earlier = lda_private.UnmixedTopics(np.zeros((1, 4)), np.array([[0.6, 0.0, 0.4, -0.1]]), np.full((1, 4), 0.1))
    later = lda_private.UnmixedTopics(np.zeros((1, 4)), np.array([[0.4, 0.2, 0.2, 0.1]]), np.full((1, 4), 0.1))
    got = lda_private.combine_unmixed(earlier, later, threshold=2.0)
    solve = np.array([[0.45, 0.15, 0.25, 0.05]])
    dev = (1 / 0.03 + 1 / 0.01) ** -0.5
    np.testing.assert_allclose(got.solve, solve)
    np.testing.assert_allclose(got.solve_deviation, np.full((1, 4), dev))
    mass = 1.25 - 6 * dev
    np.testing.assert_allclose(got.topic_word, [[0.45 / mass, (0.3 - 3 * dev) / mass, (0.5 - 3 * dev) / mass, 0.0]])
    np.testing.assert_allclose(got.deviation, np.full((1, 4), dev / mass))
    # Solves that agree within their noise: κ = 1 (never below), plain inverse-variance weights.
    same = lda_private.UnmixedTopics(later.topic_word, later.solve, np.full((1, 4), 0.2))
    np.testing.assert_allclose(lda_private.combine_unmixed(same, later, 2.0).solve, later.solve)
    np.testing.assert_allclose(lda_private.combine_unmixed(same, later, 2.0).solve_deviation,
                               (1 / 0.04 + 1 / 0.01) ** -0.5)
    # Without a solve on either side (a spectral start), or on a row kept from a start: the other release's.
    assert lda_private.combine_unmixed(lda_private.UnmixedTopics(np.ones((1, 4)) / 4), later, 2.0) is later
    kept = lda_private.UnmixedTopics(later.topic_word, np.zeros((1, 4)), np.full((1, 4), np.inf))
    got = lda_private.combine_unmixed(earlier, kept, 2.0)
    np.testing.assert_allclose(got.solve, earlier.solve)
    np.testing.assert_allclose(got.topic_word, [[0.6, 0.0, 0.4, 0.0]])


def test_combine_unmixed_measures_the_earlier_bias():
    # Topics β (Dirichlet(0.1) rows, k = 4, d = 4,000); the earlier solve carries bias b = 0.5·n_e·(±1) on
    # every entry plus noise n_e, the later one noise n_l = n_e/√2 only. The model's κ = 1 + 0.5² = 1.25; κ̂ is
    # a mean over 4,000 words of squares of Gaussians of relative s.d. √2, so its s.e. is ≈ (2.25/1.25)·√(2/4000)
    # · 1.25 ≈ 0.05 (a relative 4%): a tolerance of 0.15 is 3 standard errors. The combination's mean squared
    # error must then match 1/(1/(κ n_e²) + 1/n_l²) (κ = 1.25: n_e²/2.8) within 3 standard errors of a mean of
    # 4·4,000 squares (relative 3·√(2/16000) ≈ 3.4%; 5% allowed), below the later solve's own (0.5 n_e²).
    rng = np.random.default_rng(11)
    k, d, ne = 4, 4000, 1e-4
    beta = rng.dirichlet(np.full(d, 0.1), size=k)
    bias = 0.5 * ne * rng.choice([-1.0, 1.0], size=(k, d))
    earlier = lda_private.UnmixedTopics(beta, beta + bias + ne * rng.standard_normal((k, d)), np.full((k, d), ne))
    nl = ne / math.sqrt(2.0)
    later = lda_private.UnmixedTopics(beta, beta + nl * rng.standard_normal((k, d)), np.full((k, d), nl))
    got = lda_private.combine_unmixed(earlier, later, 2.0)
    kappa = (got.solve_deviation[:, 0] ** -2 - nl ** -2) ** -1 / ne ** 2
    np.testing.assert_allclose(kappa, 1.25, atol=0.15)
    mse = float(np.mean((got.solve - beta) ** 2)) / ne ** 2
    assert mse == pytest.approx(1.0 / (1.0 / 1.25 + 2.0), rel=0.05) and mse < 0.5
    np.testing.assert_allclose(got.topic_word.sum(axis=1), 1.0)


def _mixed_solves(rng, k=4, d=4000, ne=1e-4, nl=1e-4, mix=0.1):
    """Topics β (Dirichlet(0.1) rows), a mixing A = I + mix·(off-diagonal uniform), and noisy solves A β, β."""
    beta = rng.dirichlet(np.full(d, 0.1), size=k)
    A = np.eye(k) + mix * rng.uniform(-1.0, 1.0, size=(k, k)) * (1.0 - np.eye(k))
    return beta, A, A @ beta + ne * rng.standard_normal((k, d)), beta + nl * rng.standard_normal((k, d))


def test_align_mixing_recovers_the_mixing():
    rng = np.random.default_rng(5)
    # Without noise the map is exact: R = A⁻¹ and the aligned solve is β.
    beta, A, _, _ = _mixed_solves(rng)
    aligned, dev, R = lda_private.align_mixing(A @ beta, np.zeros_like(beta), beta, np.zeros_like(beta))
    np.testing.assert_allclose(R, np.linalg.inv(A), atol=1e-10)
    np.testing.assert_allclose(aligned, beta, atol=1e-12)
    # With noise on both, over 40 draws: the least squares on noisy y_e alone would shrink R by the noise-to-signal
    # energy ratio r_i = Σ_v n_e²/‖(Aβ)_i‖² (here ≈ 1.5–2.5%); the errors-in-variables correction removes it. One
    # draw's R has s.d. ≈ (n_l + n_e‖A⁻¹‖)·√diag((ββᵀ)⁻¹) per entry (the regression of d noisy entries on k
    # rows), so the mean of 40 has s.e. s = that/√40, and 4 s is allowed — less than the shrinkage it must remove.
    ne = nl = 1e-4
    products, bounds, ratios = [], [], []
    for i in range(40):
        beta, A, ye, yl = _mixed_solves(np.random.default_rng([5, i]), ne=ne, nl=nl)
        R = lda_private.align_mixing(ye, np.full_like(ye, ne), yl, np.full_like(yl, nl))[2]
        products.append(R @ A)
        bounds.append((nl + ne * np.linalg.norm(np.linalg.inv(A), 2))
                      * np.sqrt(np.diag(np.linalg.inv(beta @ beta.T))).max())
        ratios.append(beta.shape[1] * ne ** 2 / np.einsum("iv,iv->i", A @ beta, A @ beta).min())
    s = max(bounds) / math.sqrt(40)
    assert 4 * s < min(ratios)
    np.testing.assert_allclose(np.mean(products, axis=0), np.eye(4), atol=4 * s)


def test_align_mixing_leaves_what_it_cannot_fit():
    rng = np.random.default_rng(6)
    beta, A, ye, yl = _mixed_solves(rng)
    ne = np.full_like(ye, 1e-4)
    # A row kept from a start (infinite deviation) on either side is left out of the map and unchanged.
    ne_kept = ne.copy()
    ne_kept[1] = np.inf
    aligned, dev, R = lda_private.align_mixing(ye, ne_kept, yl, ne)
    np.testing.assert_array_equal(aligned[1], ye[1])
    assert np.all(np.isinf(dev[1])) and R[1, 1] == 1.0 and not R[1, [0, 2, 3]].any() and not R[[0, 2, 3], 1].any()
    assert not np.allclose(aligned[[0, 2, 3]], ye[[0, 2, 3]])
    # Noise energy above ALIGN_MAX_NOISE of a row's signal, fewer than 2 rows, or two identical rows: R = I.
    loud = np.full_like(ye, np.sqrt(0.06 * np.einsum("iv,iv->i", ye, ye).max() / ye.shape[1]))
    twins = np.vstack([ye[:1], ye[:1]])
    zero = np.zeros_like(twins)
    for args in ((ye, loud, yl, ne), (ye[:1], ne[:1], yl[:1], ne[:1]), (twins, zero, yl[:2], zero)):
        aligned, dev, R = lda_private.align_mixing(*args)
        np.testing.assert_array_equal(aligned, args[0])
        np.testing.assert_array_equal(R, np.eye(len(args[0])))


def test_combine_unmixed_removes_a_mixing_bias():
    # The earlier solve is A β + noise (a worse θ̂ mixes the topics, align_mixing), the later β + noise of the same
    # deviation. Aligned, the earlier's bias is gone, κ̂ ≈ 1 and the average halves the later's mean squared error:
    # 1/(1/n² + 1/n²) = n²/2, within 3 standard errors of a mean of 16,000 squares (relative 3·√(2/16000) ≈ 3.4%;
    # 5% allowed, plus the k²/(k·d) = 0.1% of the noise the fitted map absorbs). Without the alignment the bias
    # (0.1 × the topics' entries, ≫ n on the large ones) is only weighted down by κ > 1: 0.58 n² here.
    rng = np.random.default_rng(12)
    n = 1e-4
    beta, A, ye, yl = _mixed_solves(rng, ne=n, nl=n)
    earlier = lda_private.UnmixedTopics(beta, ye, np.full_like(ye, n))
    later = lda_private.UnmixedTopics(beta, yl, np.full_like(yl, n))
    got = lda_private.combine_unmixed(earlier, later, 2.0)
    mse = float(np.mean((got.solve - beta) ** 2)) / n ** 2
    assert mse == pytest.approx(0.5, rel=0.05)


def test_pass_weights():
    # g_n = θ̂_n^p/‖θ̂_n^p‖₂, by a loop; p = ∞ is the one-hot of argmax θ̂_n; an empty row stays 0.
    theta = np.array([[0.6, 0.3, 0.1], [0.2, 0.2, 0.6], [0.0, 0.0, 0.0]])
    for p in (1.0, 2.0, 3.5):
        expected = [[t ** p / math.sqrt(sum(u ** (2 * p) for u in row)) if any(row) else 0.0 for t in row]
                    for row in theta]
        np.testing.assert_allclose(lda_private.pass_weights(theta, p), expected, rtol=1e-12)
    np.testing.assert_array_equal(lda_private.pass_weights(theta, np.inf), [[1, 0, 0], [0, 0, 1], [0, 0, 0]])
    for bad in (0.0, -1.0, np.nan):
        with pytest.raises(ValueError, match="sharpen must be > 0"):
            lda_private.pass_weights(theta, bad)


@pytest.mark.parametrize("sharpen", [1.0, lda_private.UNMIX_SHARPEN, np.inf])
def test_unmix_pass_bounds_attained_and_identity(sharpen):
    # Bounds: against an empty document, a long one-word document reaches C for Q, and a long one with
    # θ̂ one-hot (‖θ̂‖ = 1, so g = θ̂) spread over every word reaches C² for G (w·l·‖θ̂‖ = C²).
    one = np.array([[1.0, 0.0, 0.0]])
    empty = csr([[0] * D])
    q, _ = lda_private.unmix_pass_statistics(csr([[400, 0, 0, 0, 0, 0, 0]]), one, 3.0, sharpen=sharpen)
    q0, g0 = lda_private.unmix_pass_statistics(empty, one, 3.0, sharpen=sharpen)
    assert np.linalg.norm(q - q0) == pytest.approx(3.0)
    _, g = lda_private.unmix_pass_statistics(csr([[10] * D]), one, 2.0, sharpen=sharpen)
    assert np.linalg.norm(g - g0) == pytest.approx(4.0)
    # Identity: counts equal to their expectation l θᵀβ and θ̂ = θ give Q = Gβ for any weights g(θ̂), so the
    # solve returns β; G is symmetric only for g ∝ θ̂.
    rng = np.random.default_rng(1)
    beta = rng.dirichlet(np.full(D, 0.5), size=K)
    theta = rng.dirichlet(np.full(K, 0.3), size=60)
    lengths = rng.integers(5, 50, size=60).astype(float)
    expected = sp.csr_matrix(lengths[:, None] * theta @ beta)
    Q, G = lda_private.unmix_pass_statistics(expected, theta, 4.0, sharpen=sharpen)
    assert np.allclose(G, G.T) == (sharpen == 1.0)
    np.testing.assert_allclose(lda_private.unmix_topics(Q, G, 0.0, 0.0, symmetric=False).topic_word, beta,
                               atol=1e-10)
    with pytest.raises(ValueError, match="real part"):
        lda_private.unmix_topics(Q, -G, 0.0, 0.0, symmetric=False)
    # The same with word scales: Q/S = Gβ, so the scaled solve returns β too, with other weights.
    S = lda_private.word_scales(rng.dirichlet(np.full(D, 0.5), size=K), beta.mean(0))
    Qs, Gs = lda_private.unmix_pass_statistics(expected, theta, 4.0, S, sharpen)
    assert not np.allclose(Gs, G)
    np.testing.assert_allclose(lda_private.unmix_topics(Qs, Gs, 0.0, 0.0, symmetric=False, scales=S).topic_word,
                               beta, atol=1e-10)
    # The weights and norms against a loop over documents: w_n = min(C/‖(g_n x_nᵀ)∘S‖_F, C²/(l_n‖θ̂_n‖₂)).
    g = lda_private.pass_weights(theta, sharpen)
    X = expected.toarray()
    w = [min(4.0 / math.sqrt(sum(gi ** 2 * float(((x * s) ** 2).sum()) for gi, s in zip(gn, S))),
             16.0 / (x.sum() * float(np.linalg.norm(t)))) for x, gn, t in zip(X, g, theta)]
    np.testing.assert_allclose(Qs, sum(wn * np.outer(gn, x) for wn, gn, x in zip(w, g, X)) * S, rtol=1e-10)
    np.testing.assert_allclose(Gs, sum(wn * x.sum() * np.outer(gn, t) for wn, gn, x, t in zip(w, g, X, theta)),
                               rtol=1e-10)


def test_scaled_unmix_noise_level():
    # unmix_topics thresholds entry (i, v) of G⁻¹(Q/S) at t·σ(Σ_j (G⁻¹)_ij²/S_jv²)^{1/2}: that is the exact
    # standard deviation of G⁻¹(Z/S) for Z with iid N(0, σ²) entries. Checked by Monte Carlo (seeded,
    # 20,000 draws: the sample sd's relative error has sd 1/√(2·20000) = 0.005; tolerance 0.025 = 5 of those).
    rng = np.random.default_rng(3)
    G = np.eye(K) * 5.0 + rng.uniform(0.0, 1.0, (K, K))
    S = lda_private.word_scales(rng.dirichlet(np.full(D, 0.3), size=K), rng.dirichlet(np.ones(D)))
    Ginv = np.linalg.inv(G)
    draws = np.einsum("ij,njv->niv", Ginv, rng.normal(0.0, 2.0, (20_000, K, D)) / S)
    np.testing.assert_allclose(draws.std(axis=0), 2.0 * np.sqrt((Ginv ** 2) @ S ** -2.0), rtol=0.025)
    # The firm threshold uses exactly that level (t = 2: ends a = 1.5·sd, b = 3·sd): entries at 0.99a go to 0,
    # those at 1.01a and at the ramp's middle 2.25·sd to b(y − a)/(b − a) = 2y − 3·sd, those at 3.3·sd stay.
    sd = 2.0 * np.sqrt((Ginv ** 2) @ S ** -2.0)
    levels = np.array([0.99 * 1.5, 1.01 * 1.5, 2.25, 3.3])
    B = levels[rng.integers(0, 4, (K, D))] * sd
    B[:, 0] = 10.0 * sd[:, 0]                                 # every topic keeps a word
    got = lda_private.unmix_topics((G @ B) * S, G, 2.0, 2.0, symmetric=False, scales=S)   # G⁻¹(Q/S) = B
    firm = np.where(B < 1.5 * sd, 0.0, np.where(B > 3.0 * sd, B, 2.0 * B - 3.0 * sd))
    mass = firm.sum(1, keepdims=True)
    np.testing.assert_allclose(got.topic_word, firm / mass)
    np.testing.assert_allclose(got.deviation, sd / mass)


def _support_problem(rng, k=4, d=30):
    """A non-symmetric, diagonally dominant G, topics β with exact zeros, a support holding them and word scales."""
    G = np.eye(k) * 6.0 + rng.uniform(0.0, 1.0, (k, k))
    support = rng.random((k, d)) < 0.6
    support[rng.integers(0, k, d), np.arange(d)] = True
    beta = np.where(support & (rng.random((k, d)) < 0.8), rng.uniform(0.1, 1.0, (k, d)), 0.0)
    S = np.where(support, rng.uniform(0.5, 2.0, (k, d)), 0.0)
    return G, beta, support, S


@pytest.mark.slow
def test_solve_on_support_is_each_words_subsystem():
    rng = np.random.default_rng(21)
    G, beta, support, S = _support_problem(rng)
    k, d = beta.shape
    # Q/S = Gβ on the released entries when β is 0 off them: each word's solve returns β exactly, in any blocks.
    Q = np.where(support, (G @ beta) * S, 0.0)
    for block in (lda_private.SUPPORT_BLOCK, 3 * k * k, 1):
        solve, dev = lda_private.solve_on_support(Q, G, S, 0.5, block=block)
        np.testing.assert_allclose(solve, beta, atol=1e-12)
        assert np.all(np.isinf(dev[~support])) and np.all(np.isfinite(dev[support]))
    # Brute force on noisy data, word by word: G[R, R] x = (Q/S)[R], 0 off R.
    noisy = np.where(support, Q + rng.normal(0.0, 0.5, Q.shape), 0.0)
    solve, dev = lda_private.solve_on_support(noisy, G, S, 0.5)
    for v in range(d):
        r = np.flatnonzero(support[:, v])
        want = np.zeros(k)
        want[r] = np.linalg.solve(G[np.ix_(r, r)], noisy[r, v] / S[r, v])
        np.testing.assert_allclose(solve[:, v], want, rtol=1e-10, atol=1e-12)
    # The deviations are the solve's exact standard deviations: Monte Carlo over 20,000 draws of the noise on
    # the released entries (the sample sd's relative error has sd 1/√(2·20000) = 0.005; 0.025 = 5 of those).
    draws = np.stack([lda_private.solve_on_support(np.where(support, rng.normal(0.0, 0.5, Q.shape), 0.0), G, S,
                                                   0.5)[0] for _ in range(20_000)])
    np.testing.assert_allclose(draws.std(axis=0)[support], dev[support], rtol=0.025)
    # unmix_topics solves this way when some scales are 0; all-positive scales keep the square solve.
    got = lda_private.unmix_topics(Q, G, 0.0, 0.0, symmetric=False, scales=S)
    np.testing.assert_allclose(got.topic_word, beta / beta.sum(1, keepdims=True), atol=1e-12)
    full = np.where(support, S, 1.0)
    np.testing.assert_allclose(lda_private.unmix_topics((G @ beta) * full, G, 0.0, 0.0, symmetric=False,
                                                        scales=full).solve, beta, atol=1e-12)
    # A word whose released topics' G is not positive definite fails clearly, though G itself is (eigenvalues
    # (1 ± i√3)/2) : its one released topic has G_00 = 0.
    G2 = np.array([[0.0, 1.0], [-1.0, 1.0]])
    with pytest.raises(ValueError, match="restricted to a word's released topics"):
        lda_private.unmix_topics(np.ones((2, 3)), G2, 0.0, 0.0, symmetric=False,
                                 scales=np.array([[1.0, 1.0, 1.0], [0.0, 1.0, 1.0]]))


def test_working_share():
    # By hand: negative noisy frequencies count as 0; the share is floored at 10⁻³ and at most 1.
    f = np.array([3.0, -1.0, 1.0, 0.0, 4.0])
    assert lda_private.working_share(f, np.array([0, 4])) == pytest.approx(7.0 / 8.0)
    assert lda_private.working_share(f, np.arange(5)) == 1.0
    assert lda_private.working_share(f, np.array([1, 3])) == 1e-3
    assert lda_private.working_share(-f, np.array([0])) == 1e-3


def test_pass_support():
    # Released: the entries a start's solve puts above t deviations, each word's largest, and every entry of a row
    # kept from a start (infinite deviation); None when there is no solve or nothing is left out.
    solve = np.array([[0.5, -1.0, 3.0, -0.2], [-2.0, -3.0, 0.1, 0.3], [0.0, 0.0, 0.0, 0.0]])
    dev = np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0], [np.inf] * 4])
    start = lda_private.UnmixedTopics(np.full((3, 4), 0.25), solve, dev)
    np.testing.assert_array_equal(lda_private.pass_support(start, 0.0), [[True, False, True, False],
                                                                         [False, False, True, True],
                                                                         [True, True, True, True]])
    assert lda_private.PASS_SUPPORT == -0.5                   # the default: -0.2 now clears it
    np.testing.assert_array_equal(lda_private.pass_support(start)[:2], [[True, False, True, True],
                                                                        [False, False, True, True]])
    got = lda_private.pass_support(start, 1.0)    # only 3.0 clears one deviation; argmaxes 0.5, 0 (row 2), 3, 0.3
    np.testing.assert_array_equal(got[:2], [[True, False, True, False], [False, False, False, True]])
    assert lda_private.pass_support(lda_private.UnmixedTopics(np.full((3, 4), 0.25))) is None
    assert lda_private.pass_support(start, -10.0) is None


def test_a_pass_on_a_support_recovers_sparse_topics_and_aligns():
    # With counts at their expectation l_n θ_nᵀβ, θ̂ = θ and β zero off the support, the pass's statistics on the
    # support (each document's norm, hence weight, taken there) solve to β exactly: E[Q/S] = G_RR β_R word by word.
    rng = np.random.default_rng(22)
    k, d, n = 4, 30, 80
    _, beta, support, S = _support_problem(rng, k, d)
    beta = beta / beta.sum(1, keepdims=True)
    theta = rng.dirichlet(np.full(k, 0.3), size=n)
    lengths = rng.integers(5, 50, size=n).astype(float)
    expected = sp.csr_matrix(lengths[:, None] * theta @ beta)
    Q, G = lda_private.unmix_pass_statistics(expected, theta, 4.0, S)
    assert not Q[~support].any()
    np.testing.assert_allclose(lda_private.unmix_topics(Q, G, 0.0, 0.0, symmetric=False, scales=S).topic_word, beta,
                               atol=1e-10)
    # align_mixing fits a later solve with unreleased entries (infinite deviation, value 0 = β there): exact map.
    A = np.eye(k) + 0.1 * rng.uniform(-1.0, 1.0, (k, k)) * (1 - np.eye(k))
    later_dev = np.where(support, 1e-9, np.inf)
    aligned, _, R = lda_private.align_mixing(A @ beta, np.zeros((k, d)), beta, later_dev)
    np.testing.assert_allclose(R, np.linalg.inv(A), atol=1e-8)
    # combine_unmixed takes the earlier solve where the later released nothing, the precision average elsewhere.
    earlier = lda_private.UnmixedTopics(beta, beta + 0.01, np.full((k, d), 0.1))
    later = lda_private.UnmixedTopics(beta, np.where(support, beta, 0.0), np.where(support, 0.1, np.inf))
    got = lda_private.combine_unmixed(earlier, later, 0.0)
    np.testing.assert_allclose(got.solve_deviation, np.where(support, 0.1 / math.sqrt(2), 0.1))
    np.testing.assert_allclose(got.solve[~support], beta[~support] + 0.01, atol=1e-9)


def test_word_scales():
    # s = b^{-p} on b = ½(β̂ + f̂) floored at 1/(2d), rows normalised to Σ b s² = Σ b; p = 0 gives ones.
    rng = np.random.default_rng(4)
    tw = rng.dirichlet(np.full(D, 0.3), size=K)
    tw[0, :3] = 0.0                                           # thresholded words
    f = rng.dirichlet(np.ones(D))
    f[1] = -0.01                                              # noisy frequencies can be negative
    np.testing.assert_allclose(lda_private.word_scales(tw, f, 0.0), 1.0)
    s = lda_private.word_scales(tw, f)
    fp = np.maximum(f, 0) / np.maximum(f, 0).sum()
    b = np.maximum(0.5 * (tw / tw.sum(1, keepdims=True) + fp), 0.5 / D)
    np.testing.assert_allclose((b * s * s).sum(1), b.sum(1))
    np.testing.assert_allclose(s * b ** (1 / 3), (s * b ** (1 / 3))[:, :1] * np.ones(D))   # ∝ b^{-1/3} per row
    assert np.all(np.isfinite(s)) and s.max() / s.min() <= (1 / (0.5 / D)) ** (1 / 3)   # the floor bounds s
    with pytest.raises(ValueError, match="frequencies must have shape"):
        lda_private.word_scales(tw, f[:-1])


def test_unmix_weights_scale_each_document_to_the_cap():
    # w = min(C/‖x‖, C²/l): the Q term's norm w‖x‖ is exactly C unless the Gram bound w·l ≤ C² binds
    # (third document: 4/5 > 16/30); an empty document gets weight 0.
    norms, lengths = np.array([2.0, 5.0, 5.0, 0.0]), np.array([4.0, 5.0, 30.0, 0.0])
    w = lda_private.unmix_weights(norms, lengths, 4.0)
    np.testing.assert_allclose(w, [2.0, 0.8, 16.0 / 30.0, 0.0])
    assert np.all(w * norms <= 4.0 + 1e-12) and np.all(w * lengths <= 16.0 + 1e-12)
    # With ‖θ̂‖₂ the terms themselves are capped: ‖θ̂‖‖x‖ ≤ C and ‖θ̂‖²l ≤ C², so mixed documents weigh more.
    norms, lengths, t = np.array([2.0, 10.0, 5.0, 0.0]), np.array([4.0, 10.0, 100.0, 0.0]), np.array([1, 0.5, 0.5, 0.7])
    wt = lda_private.unmix_weights(norms, lengths, 4.0, t)
    np.testing.assert_allclose(wt, [2.0, 0.8, 0.64, 0.0])
    np.testing.assert_allclose(lda_private.unmix_weights(norms, lengths, 4.0), [2.0, 0.4, 0.16, 0.0])
    assert np.all(wt * t * norms <= 4.0 + 1e-12) and np.all(wt * t * t * lengths <= 16.0 + 1e-12)


def test_em_contribution_cap_scales_each_document_to_the_cap_and_keeps_its_posterior():
    # Brute force: each document's own statistic x_n∘φ_n (an E-step on it alone), scaled to Frobenius
    # norm exactly C (an empty document contributes 0), summed, equals the capped E-step on the whole
    # corpus; γ is the uncapped posterior.
    rng = np.random.default_rng(4)
    X = rng.poisson(1.5, size=(30, D)).astype(float)
    X[7] = 0.0
    C = sp.csr_matrix(X)
    beta = rng.dirichlet(np.ones(D), size=K)
    alpha = np.full(K, 0.4)
    cap = 3.0
    full = refine.e_step(C, beta, alpha, None, 200, 1e-10, True, contribution_cap=cap)
    free = refine.e_step(C, beta, alpha, None, 200, 1e-10, True)
    np.testing.assert_allclose(full.gamma, free.gamma)
    own = [beta * refine.e_step(C[n], beta, alpha, None, 200, 1e-10, True).sstats for n in range(C.shape[0])]
    norms = np.array([np.linalg.norm(o) for o in own])
    assert norms[7] == 0 and norms.min(initial=np.inf, where=norms > 0) < cap < norms.max()  # scaled up and down
    expected = sum(o * cap / nrm for o, nrm in zip(own, norms) if nrm > 0)
    np.testing.assert_allclose(beta * full.sstats, expected, rtol=1e-8)


def test_working_columns_and_embedding():
    f = np.array([0.05, 0.4, -0.01, 0.3, 0.2, 0.06])
    cols = lda_private.working_columns(f, 3)
    np.testing.assert_array_equal(cols, [1, 3, 4])
    tw = np.array([[0.5, 0.5, 0.0], [0.0, 0.2, 0.8]])
    full = lda_private.embed_topics(tw, cols, f, 6)
    np.testing.assert_allclose(full.sum(axis=1), 1.0)
    share = 0.9 / 1.01  # mass of the working words among the floored frequencies
    np.testing.assert_allclose(full[:, cols], share * tw)
    np.testing.assert_allclose(full[0, [0, 2, 5]], (1 - share) * np.array([0.05, 0.0, 0.06]) / 0.11)
    with pytest.raises(ValueError, match="working_vocab"):
        lda_private.working_columns(f, 7)


def test_threshold_noisy_is_firm():
    # t = 2, σ = 1: 0 up to 1.5σ, the entry itself from 3σ, linear between (3(y − 1.5)/1.5), so continuous;
    # per-entry σ scales both ends; t = 0 is the floor at 0.
    y = np.array([-1.0, 1.0, 1.5, 2.0, 2.5, 3.0, 7.0])
    np.testing.assert_allclose(lda_private.threshold_noisy(y, 1.0, 2.0), [0, 0, 0, 1.0, 2.0, 3.0, 7.0])
    np.testing.assert_allclose(lda_private.threshold_noisy(2 * y, np.full(7, 2.0), 2.0),
                               2 * np.array([0, 0, 0, 1.0, 2.0, 3.0, 7.0]))
    np.testing.assert_array_equal(lda_private.threshold_noisy(y, 1.0, 0.0), np.maximum(y, 0))
    np.testing.assert_array_equal(lda_private.threshold_noisy(y, np.inf, 2.0), np.zeros(7))   # rows kept from a start
    # Ends low = high = 1: the hard threshold at t·σ (entries at or below it set to 0), which benchmarks still use.
    np.testing.assert_array_equal(lda_private.threshold_noisy(y, 1.0, 2.0, low=1.0, high=1.0), np.where(y > 2.0, y, 0.0))
    grid = np.linspace(0, 5, 5001)
    assert np.abs(np.diff(lda_private.threshold_noisy(grid, 1.0, 2.0))).max() <= 2.0 * (grid[1] - grid[0]) + 1e-12


def test_doc_norms_match_the_dense_per_document_moments():
    # Brute force: m2_n = (c cᵀ − diag c)/(l(l−1)) formed densely; the unique-entry norm is that of its
    # upper triangle with the diagonal (what the dense release's noise is added to).
    counts = csr([[3, 1, 0, 2, 0, 0, 0], [0, 0, 5, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0]])
    n1, n2f, n2u = lda_private.doc_norms(counts)
    for i, c in enumerate(counts.toarray().astype(float)):
        l = c.sum()
        if l < 3:
            assert n1[i] == n2f[i] == n2u[i] == 0.0
            continue
        m2 = (np.outer(c, c) - np.diag(c)) / (l * (l - 1))
        assert n1[i] == pytest.approx(np.linalg.norm(c / l))
        assert n2f[i] == pytest.approx(np.linalg.norm(m2))
        assert n2u[i] == pytest.approx(np.linalg.norm(m2[np.triu_indices(D)]))
    # With word scales: the norms of S m2_n S (m1's unchanged).
    s = np.linspace(0.2, 1.0, D)
    s1, s2f, s2u = lda_private.doc_norms(counts, s)
    np.testing.assert_array_equal(s1, n1)
    for i, c in enumerate(counts.toarray().astype(float)):
        l = c.sum()
        m2 = (np.outer(c, c) - np.diag(c)) / (l * (l - 1)) * np.outer(s, s) if l >= 3 else np.zeros((D, D))
        assert s2f[i] == pytest.approx(np.linalg.norm(m2))
        assert s2u[i] == pytest.approx(np.linalg.norm(m2[np.triu_indices(D)]))


def test_spectral_word_scales():
    f = np.array([0.5, 0.1, 0.01, 0.0, -0.001])
    s = lda_private.spectral_word_scales(f, 0.25)
    assert s.max() == 1.0 and s[0] < s[1] < s[2] < s[3] == s[4]          # frequent words weigh less; ≤ 1
    np.testing.assert_allclose(s[:3] / s[2], (f[:3] / 0.01) ** -0.25)
    assert s[3] == pytest.approx((0.5e-3 / 0.01) ** -0.25 * s[2])          # floored at 1e-3 of the largest
    # ... and at the frequencies' noise deviation: words it hides weigh alike
    t = lda_private.spectral_word_scales(f, 0.25, noise=0.02)
    assert t[2] == t[3] == t[4] == 1.0 and t[1] < 1.0
    assert lda_private.spectral_word_scales(f, 0.0) is None


def test_assembled_tensor_equals_lda_moment_in_expectation_of_noise():
    # Without noise the assembly is the plug-in LDA tensor; the plug-in and
    # the U-statistic differ by O(1/N): |ΔT| ≲ a few · max|T| / N at N = 4000.
    c = sample_corpus(4000, 40, 3, np.random.default_rng(1), alpha0=0.5)
    sh = Shard(c.counts)
    n = int((moments.doc_lengths(c.counts) >= 3).sum())
    W = np.random.default_rng(2).standard_normal((40, 3))
    tw = moments.TensorWeights(n, 0.5)
    fp = sh.first_pass(np.eye(40))
    T = moments.WhitenedTensor(W, moments.tensor_partial(c.counts, W, tw), fp.m1_sum, tw).dense()
    m1 = sh.private_m1(np.inf) / n
    e2w = W.T @ (sh.private_m2_product(W, np.inf) / n)
    T2 = lda_private.assemble_tensor(sh.private_tensor(W, np.inf) / n, e2w, W.T @ m1, W.T @ W, 0.0, 0.5)
    assert np.abs(T - T2).max() <= 10 * np.abs(T).max() / n
    U = np.random.default_rng(3).standard_normal((3, 4))
    applied = lda_private.assemble_tensor_apply(sh.private_cube_apply(W, np.inf, U) / n, U, e2w, W.T @ m1,
                                                W.T @ W, 0.0, 0.5)
    np.testing.assert_allclose(applied, np.einsum("ijk,jl,kl->il", T2, U, U), atol=1e-10)


def test_m1_noise_debiasing_is_exact():
    # E[m̂⊗3] = m⊗3 + v·sym3(G⊗m): averaging the debiased cube over many
    # draws converges to m⊗3 (Monte Carlo error ~ v^(3/2)/√draws, far below 0.02).
    rng = np.random.default_rng(4)
    W = rng.standard_normal((6, 2))
    m1, v = rng.uniform(0, 1, 6), 0.3
    draws = m1 + rng.normal(0, math.sqrt(v), size=(200_000, 6))
    m_hat = draws @ W
    cube = np.einsum("ni,nj,nk->ijk", m_hat, m_hat, m_hat) / len(m_hat)
    sym = np.mean([moments.sym3_outer(W.T @ W, x) for x in m_hat[:20_000]], axis=0)
    m = W.T @ m1
    target = np.einsum("i,j,k->ijk", m, m, m)
    assert np.abs(cube - v * sym - target).max() < 0.05 * np.abs(target).max()


def test_quantile_from_histogram():
    edges = lda_private.log_grid(1e-3, 1.0, 30)
    vals = np.random.default_rng(5).uniform(0.01, 0.5, 10_000)
    q = lda_private.quantile_from_histogram(lda_private.histogram(vals, edges), edges, 0.9)
    i = np.searchsorted(edges, np.quantile(vals, 0.9))
    assert edges[i - 1] <= q <= edges[i + 1]
    assert lda_private.quantile_from_histogram(-np.ones(30), edges, 0.9) == edges[-1]
    # Noise on the empty bins past the data: floored at 0 it moves the quantile up to the noise's
    # bins; thresholded at 2σ (σ the bins' known noise scale) it stays within a bin of the truth.
    # Fixed seeds: 3,000 values in 5 bins, 15 empty bins above them, noise σ = 100 per bin; the
    # floored noise adds ≈ 15·0.4σ = 600 (20%) of mass above the data, the data bins hold ≈ 6σ each.
    few = np.random.default_rng(5).uniform(0.01, 0.03, 3000)
    j = np.searchsorted(edges, np.quantile(few, 0.9))
    hist = lda_private.histogram(few, edges) + np.random.default_rng(0).normal(0, 100.0, 30)
    assert lda_private.quantile_from_histogram(hist, edges, 0.9) > 2 * edges[j + 1]
    assert edges[j - 1] <= lda_private.quantile_from_histogram(hist, edges, 0.9, sigma=100.0) <= edges[j + 1]


def test_budget_split_composes_to_the_request():
    cfg = lda_private.PrivateSpectralConfig(1.0, 1e-6)
    plan = lda_private.plan_noise(cfg, {"em_sstats": (0.3, 5)})
    inv = sum(s.mu2 for s in plan.values())
    m = math.sqrt(1 / inv)
    assert mechanisms.gaussian_epsilon(m, 1e-6) == pytest.approx(1.0, rel=1e-4)
    basic = lda_private.plan_noise(cfg, accounting_mode="basic")
    assert all(b.multiplier > plan[s].multiplier for s, b in basic.items())


def test_whitening_form_and_its_releases():
    cap = lda_private.DENSE_WHITENING_MAX_WORDS
    assert lda_private.whitening_form("auto", cap) == "dense"
    assert lda_private.whitening_form("auto", cap + 1) == "matrix-free"
    assert lda_private.whitening_form("dense", 10 ** 6) == "dense" and lda_private.whitening_form("power", 10) == "power"
    with pytest.raises(ValueError, match="whitening must be one of"):
        lda_private.whitening_form("eigh", 10)
    with pytest.raises(ValueError, match="dense_whitening"):
        lda_private.PrivateSpectralConfig(1.0, 1e-6, dense_whitening="yes").validate()
    with pytest.raises(ValueError, match="power form"):
        lda_private.PrivateSpectralConfig(1.0, 1e-6, matrix_free=True).validate()
    dense = lda_private.PrivateSpectralConfig(1.0, 1e-6, dense_whitening=True)
    free = lda_private.PrivateSpectralConfig(1.0, 1e-6, dense_whitening=True, matrix_free=True)
    power = lda_private.PrivateSpectralConfig(1.0, 1e-6)
    assert (dense.form, free.form, power.form) == ("dense", "matrix-free", "power")
    for form in ("dense", "matrix-free", "power"):   # the config a fit builds from a form reports that form
        r = pf.resolve_refinement(5000, 10)
        assert pf.spectral_config(1.0, 1e-6, r, whitening=form).form == form
    assert (dense.releases("m2_whitening"), free.releases("m2_whitening"), power.releases("m2_whitening")) == \
        (1, 1, power.eig_iters + 1)
    assert lda_private.plan_noise(free) == lda_private.plan_noise(dense)   # the same release, the same noise
    # Same share of the budget: one release instead of eig_iters + 1 gets a √(eig_iters + 1) smaller multiplier.
    ratio = lda_private.plan_noise(power)["m2_whitening"].multiplier / lda_private.plan_noise(dense)["m2_whitening"].multiplier
    assert ratio == pytest.approx(math.sqrt(power.eig_iters + 1))


def _mu2(plan: dict) -> dict:
    """Each stage's part of μ² (StageNoise.mu2)."""
    return {s: n.mu2 for s, n in plan.items()}


def test_split_whitening_and_move_budget_keep_the_total():
    # The dense whitening's μ² is split 0.4 / 0.6 between its two releases; an unmade top-up's part goes to
    # the passes' Q; in either branch the plan's total μ², hence the ledger's ε, is what was asked for.
    r = pf.resolve_refinement(200, 5, None, None, None, 100)
    config = pf.spectral_config(1.0, 1e-6, r)
    assert config.dense_whitening and r.unmix == pf.DEFAULT_UNMIX
    plan = pf.budget_plan(config, r)
    part = _mu2(plan)
    a = lda_private.WHITENING_FIRST_SHARE
    assert part["m2_whitening"] / (part["m2_whitening"] + part["m2_whitening_topup"]) == pytest.approx(a)
    # Together the two releases have the whitening's documented share of the spectral stages' budget.
    spectral = (1 - pf.SCAN_BUDGET) * (1 - r.refine_budget)
    assert (part["m2_whitening"] + part["m2_whitening_topup"]) / sum(part.values()) == pytest.approx(
        lda_private.DEFAULT_SHARES["m2_whitening"] * spectral)
    skipped = lda_private.move_budget(plan, "m2_whitening_topup", "unmix_sstats")
    assert "m2_whitening_topup" not in skipped
    assert skipped["unmix_sstats"].count == plan["unmix_sstats"].count
    assert skipped["unmix_sstats"].multiplier < plan["unmix_sstats"].multiplier
    assert _mu2(skipped)["unmix_sstats"] == pytest.approx(part["unmix_sstats"] + part["m2_whitening_topup"])
    for p in (plan, skipped):
        assert sum(_mu2(p).values()) == pytest.approx(sum(part.values()))
        assert mechanisms.gaussian_epsilon(math.sqrt(1 / sum(_mu2(p).values())), 1e-6) == pytest.approx(1.0, rel=1e-4)
    # No split without passes to give an unmade top-up to, nor for the power-method whitening.
    assert "m2_whitening_topup" not in pf.budget_plan(config, pf.resolve_refinement(200, 5, 2, None, None, 100))
    power = lda_private.PrivateSpectralConfig(1.0, 1e-6)
    assert "m2_whitening_topup" not in pf.budget_plan(power, r)
    with pytest.raises(ValueError, match="first_share"):
        lda_private.split_whitening(plan, 1.0)
    with pytest.raises(ValueError, match="single"):
        lda_private.split_whitening(lda_private.plan_noise(power))


def test_needs_topup_and_combine_releases():
    t = lda_private.WHITENING_TOPUP_SNR
    assert lda_private.needs_topup(t * 0.999, 1.0) and not lda_private.needs_topup(t, 1.0)
    assert lda_private.needs_topup(-1.0, 1.0) and lda_private.needs_topup(float("nan"), 1.0)
    value, sigma = lda_private.combine_releases(np.array([1.0, 2.0]), 1.0, np.array([3.0, 6.0]), 2.0)
    assert value == pytest.approx([(1 + 3 / 4) / 1.25, (2 + 6 / 4) / 1.25]) and sigma == pytest.approx(1 / math.sqrt(1.25))
    # The average of releases at σ/√a and σ/√(1−a) has the one release's σ: its draws' deviation, measured
    # on 200,000 entries (seed 3), is σ within 4 standard errors (σ/√(2n) each).
    rng = np.random.default_rng(3)
    n, s, a = 200_000, 2.0, lda_private.WHITENING_FIRST_SHARE
    first, second = rng.normal(0, s / math.sqrt(a), n), rng.normal(0, s / math.sqrt(1 - a), n)
    value, sigma = lda_private.combine_releases(first, s / math.sqrt(a), second, s / math.sqrt(1 - a))
    assert sigma == pytest.approx(s)
    assert abs(value.std() - s) <= 4 * s / math.sqrt(2 * n)


def test_probe_and_restart_plans_keep_the_total():
    # The probe splits the whitening's first release (its μ² conserved); the restart's plan re-splits the
    # whitening's whole μ² at RESTART_FIRST_SHARE and takes the discarded releases' μ² from the passes' Q, so
    # the discarded releases and the restart's plan compose to the requested ε.
    r = pf.resolve_refinement(5000, 10, working_vocab="auto")
    assert r.adaptive and r.working_vocab == 1000
    # Opt-in: the default and a given size never restart; nor "auto" where 1,000 words are the vocabulary.
    assert not pf.resolve_refinement(5000, 10).adaptive and pf.resolve_refinement(5000, 10).working_vocab == 1000
    assert not pf.resolve_refinement(5000, 10, working_vocab=1000).adaptive
    assert not pf.resolve_refinement(1000, 10, working_vocab="auto").adaptive
    with pytest.raises(ValueError, match="'auto' or an integer"):
        pf.resolve_refinement(5000, 10, working_vocab="many")
    plan = pf.budget_plan(pf.spectral_config(1.0, 1e-6, r), r)
    probed = lda_private.split_probe(plan)
    part, pp = _mu2(plan), _mu2(probed)
    assert pp["m2_whitening_probe"] == pytest.approx(lda_private.RESTART_PROBE_SHARE * part["m2_whitening"])
    assert pp["m2_whitening_probe"] + pp["m2_whitening"] == pytest.approx(part["m2_whitening"])
    assert sum(pp.values()) == pytest.approx(sum(part.values()))
    # The probe and the rest averaged by precision have the unsplit release's σ: a fit that does not restart
    # is, in distribution, the fit without a probe.
    sig = lambda s: probed[s].multiplier
    assert lda_private.precision_weights(sig("m2_whitening_probe"), sig("m2_whitening"))[2] == pytest.approx(
        plan["m2_whitening"].multiplier)
    # Threshold: the probe ratio at which the restart's first release (2× the words, 0.25 of the whitening's
    # μ² against the probe's 0.1) is expected at the top-up's threshold: 2·√(2·0.1/0.25).
    assert lda_private.restart_snr(probed) == pytest.approx(
        lda_private.WHITENING_TOPUP_SNR * math.sqrt(2 * 0.4 * lda_private.RESTART_PROBE_SHARE / 0.25))
    lost = pp["counts"] + pp["m1"] + pp["m2_whitening_probe"]
    again = lda_private.restart_plan(probed, lost)
    pa = _mu2(again)
    assert "m2_whitening_probe" not in again
    whole = part["m2_whitening"] + part["m2_whitening_topup"]
    assert pa["m2_whitening"] == pytest.approx(lda_private.RESTART_FIRST_SHARE * whole)
    assert pa["m2_whitening"] + pa["m2_whitening_topup"] == pytest.approx(whole)
    assert pa["unmix_sstats"] == pytest.approx(part["unmix_sstats"] - lost)
    assert again["unmix_sstats"].count == plan["unmix_sstats"].count
    assert sum(pa.values()) + lost == pytest.approx(sum(part.values()))
    with pytest.raises(ValueError, match="unmix_sstats"):
        lda_private.restart_plan(probed, pp["unmix_sstats"])
    # The early rung: WHITENING_EARLY_SHARE of the whole whitening's μ², split off the first release.
    early = lda_private.split_early(plan)
    pe = _mu2(early)
    whole_w = part["m2_whitening"] + part["m2_whitening_topup"]
    assert pe["m2_whitening_early"] == pytest.approx(lda_private.WHITENING_EARLY_SHARE * whole_w)
    assert pe["m2_whitening_early"] + pe["m2_whitening"] == pytest.approx(part["m2_whitening"])
    assert lda_private.whitening_mu2(early) == pytest.approx(whole_w) and sum(pe.values()) == pytest.approx(
        sum(part.values()))
    assert "m2_whitening_probe" not in early
    for bad in (0.0, lda_private.WHITENING_FIRST_SHARE):
        with pytest.raises(ValueError, match="share"):
            lda_private.split_early(plan, bad)
    with pytest.raises(ValueError, match="stage"):
        lda_private.split_probe(plan, 0.5, "m2_whitening")
    with pytest.raises(ValueError, match="share"):
        lda_private.split_probe(plan, 1.0)
    with pytest.raises(ValueError, match="probed"):
        lda_private.split_probe(lda_private.plan_noise(lda_private.PrivateSpectralConfig(1.0, 1e-6)))
    # The restart's vocabulary: twice the words, at most d and the dense whitening's cap (unless h is above it).
    assert [lda_private.restart_vocab(h, d) for h, d in ((1000, 5000), (1000, 1500), (3000, 10_000), (5000, 9000))] \
        == [2000, 1500, 4000, 5000]
    assert lda_private.should_restart(1.79, 1.79) and not lda_private.should_restart(1.78, 1.79)
    assert not lda_private.should_restart(float("nan"), 1.79)
