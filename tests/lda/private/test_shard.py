"""PrivateShard's clipped sums (distdp.lda.private.shard): each release's sensitivity under replacing one document
(property tests), the bounds attained, and the column view."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from distdp.privacy import mechanisms
from distdp.lda.private import scalable as lda_private
from distdp.lda.private.shard import PrivateShard as Shard
from private_neighbours import D, K, corpora, csr, neighbours, public_scales


def public_W(rng):
    """A whitening matrix with rows of very different norms (as from a released M2)."""
    return rng.standard_normal((D, K)) * rng.uniform(0.1, 5.0, size=(D, 1))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpora, st.floats(0.01, 1.0), st.floats(0.001, 1.0))
def test_first_releases_sensitivity(data, c1, c2):
    a, b, rng = neighbours(data)
    e = lda_private.log_grid(*lda_private.NORM_GRID)
    for dense in (False, True):
        diff = a.private_counts(10, e, e, dense) - b.private_counts(10, e, e, dense)
        assert np.linalg.norm(diff) <= lda_private.COUNT_SENSITIVITY + 1e-12
    assert np.linalg.norm(a.private_m1(c1) - b.private_m1(c1)) <= math.sqrt(2) * c1 * (1 + 1e-9)
    Q = np.linalg.qr(rng.standard_normal((D, 4)))[0]
    dm2 = a.private_m2_product(Q, c2) - b.private_m2_product(Q, c2)
    assert np.linalg.norm(dm2) <= math.sqrt(2) * c2 * (1 + 1e-9)
    # The dense release: noise goes on the unique entries i ≤ j, so their vector is what must move ≤ √2·C2.
    dd = a.private_m2_dense(c2) - b.private_m2_dense(c2)
    np.testing.assert_allclose(dd, dd.T, atol=1e-15)
    assert np.linalg.norm(dd[np.triu_indices(D)]) <= math.sqrt(2) * c2 * (1 + 1e-9)
    # The matrix-free form of that release multiplies the same clipped sum: its products are the dense one's.
    np.testing.assert_allclose(a.private_m2_product(Q, c2, True), a.private_m2_dense(c2) @ Q, rtol=1e-9, atol=1e-12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpora, st.floats(0.001, 1.0))
def test_scaled_whitening_releases_sensitivity(data, c2):
    # With the spectral stage's word scales (public: from released frequencies) every document is clipped in
    # the norm of S m2_n S, so each release moves by at most what its unscaled twin does: √2·C2.
    a, b, rng = neighbours(data)
    s = lda_private.spectral_word_scales(rng.dirichlet(np.full(D, 0.3)) + 1e-9, 0.5)
    e = lda_private.log_grid(*lda_private.NORM_GRID)
    for dense in (False, True):
        diff = a.private_counts(10, e, e, dense, s) - b.private_counts(10, e, e, dense, s)
        assert np.linalg.norm(diff) <= lda_private.COUNT_SENSITIVITY + 1e-12
    Q = np.linalg.qr(rng.standard_normal((D, 4)))[0]
    assert np.linalg.norm(a.private_m2_product(Q, c2, False, s) - b.private_m2_product(Q, c2, False, s)) <= \
        math.sqrt(2) * c2 * (1 + 1e-9)
    dd = a.private_m2_dense(c2, s) - b.private_m2_dense(c2, s)
    np.testing.assert_allclose(dd, dd.T, atol=1e-15)
    assert np.linalg.norm(dd[np.triu_indices(D)]) <= math.sqrt(2) * c2 * (1 + 1e-9)
    np.testing.assert_allclose(a.private_m2_product(Q, c2, True, s), a.private_m2_dense(c2, s) @ Q, rtol=1e-9,
                               atol=1e-12)
    # Without clipping (C2 above every norm) the scaled sum is S (Σ m2_n) S exactly.
    np.testing.assert_allclose(a.private_m2_dense(1e9, s), a.private_m2_dense(1e9) * np.outer(s, s), rtol=1e-12,
                               atol=1e-15)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpora, st.floats(0.01, 1.0))
def test_tensor_releases_sensitivity(data, c3_scale):
    a, b, rng = neighbours(data)
    W = public_W(rng)
    r3 = float(np.sqrt((W ** 2).sum(1)).max()) ** 3
    c3 = c3_scale * r3
    edges = lda_private.log_grid(r3 * 2.0 ** -40, 16 * r3, 176)
    assert np.linalg.norm(a.private_tensor_bounds(W, edges) - b.private_tensor_bounds(W, edges)) <= math.sqrt(2)
    dT = a.private_tensor(W, c3) - b.private_tensor(W, c3)
    assert np.linalg.norm(dT) <= 2 * c3 * (1 + 1e-9)
    assert np.linalg.norm(mechanisms.unique_entries(dT)) <= 2 * c3 * (1 + 1e-9)
    U = rng.standard_normal((K, 5))  # any block: the bound scales with ‖U‖₂²
    dTU = a.private_cube_apply(W, c3, U) - b.private_cube_apply(W, c3, U)
    assert np.linalg.norm(dTU) <= 2 * c3 * np.linalg.norm(U, 2) ** 2 * (1 + 1e-9)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpora)
def test_tensor_norm_bound_bounds_each_document(data):
    rows, _, _, seed = data
    W = public_W(np.random.default_rng(seed))
    C = csr(rows)
    B = lda_private.tensor_norm_bound(C, W)
    for n in range(C.shape[0]):
        one = Shard(C[n])
        exact = one.private_tensor(W, np.inf)  # h = 1: the document's m3_n(W,W,W)
        assert np.linalg.norm(exact) <= B[n] * (1 + 1e-9) + 1e-12


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpora, st.integers(1, 30), st.booleans())
def test_em_statistics_sensitivity(data, cap, scaled):
    # The released statistic is Ê_β ∘ sstats, times the word scales S when private EM scales words.
    a, b, rng = neighbours(data)
    beta = rng.dirichlet(np.ones(D), size=K)
    elog = np.log(beta)
    alpha = np.full(K, 0.5)
    S = lda_private.word_scales(beta, rng.dirichlet(np.ones(D))) if scaled else None
    sa, sb = (np.exp(elog) * s.e_step(np.exp(elog), elog, alpha, None, 50, 1e-6, float(cap), S)[0] * (
        1.0 if S is None else S) for s in (a, b))
    assert np.linalg.norm(sa - sb) <= lda_private.em_sensitivity(cap) * (1 + 1e-9)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpora, st.floats(0.5, 30.0), st.booleans(), st.booleans())
def test_tail_release_sensitivity(data, cap, single_topic, scaled):
    # Replay the tail release's public inputs (working columns, topics over them, α or the single-topic
    # weights, C, the word scales) on both neighbours.
    a, b, rng = neighbours(data)
    cols = np.sort(rng.choice(D, size=3, replace=False))
    tw = rng.dirichlet(np.ones(3), size=K)
    alpha = np.full(K, 0.3)
    S = public_scales(rng, scaled)
    (qa, ga), (qb, gb) = (s.tail_statistics(cols, "v", tw, alpha, cap, 50, 1e-6, single_topic, S) for s in (a, b))
    sens_q, sens_g = lda_private.tail_sensitivities(cap)
    iu = np.triu_indices(K)
    assert np.linalg.norm(qa - qb) <= sens_q * (1 + 1e-9)
    assert np.linalg.norm(ga[iu] - gb[iu]) <= sens_g * (1 + 1e-9)
    np.testing.assert_allclose(ga, ga.T)


def test_tail_bounds_are_attained():
    # With K = 1 (θ̂ = 1), each bound is reached against an empty document: a long one-word document
    # (‖x‖₂ = ‖x‖₁ = 400, clipped to ‖w x‖₂ = C) for Q, and one spreading 70 tokens over every word
    # (‖x‖₁/‖x‖₂ = √7 > C, so the length bound binds: w·l = C²) for G.
    def change(row, cap):
        a, b = Shard(csr([row])), Shard(csr([[0] * D]))
        (qa, ga), (qb, gb) = (s.tail_statistics(np.arange(D), "v", np.ones((1, D)) / D, np.ones(1), cap)
                              for s in (a, b))
        return np.linalg.norm(qa - qb), np.linalg.norm(ga - gb)

    assert change([400, 0, 0, 0, 0, 0, 0], 3.0)[0] == pytest.approx(3.0)
    assert change([10] * D, 2.0)[1] == pytest.approx(4.0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpora, st.floats(0.5, 30.0), st.booleans(), st.booleans())
# Found by hypothesis: the replaced document changed when its block's E-step stopped, and with it the other
# documents' θ̂ (by 3e-8 relative, past the attained bound); γ is now frozen at each document's own convergence.
@example(data=([[0] * 7] * 8 + [[1, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 1]], [9, 0, 0, 0, 0, 0, 0], 9, 0), cap=0.5,
         scaled=False, single_topic=False)
def test_unmix_pass_sensitivity(data, cap, scaled, single_topic):
    # Replay an unmixing pass's public inputs (topics on every word, α or the single-topic weights, C, word
    # scales) on both neighbours through the shard method the pipeline calls: θ̂ of every document comes
    # from its own words only.
    a, b, rng = neighbours(data)
    tw = rng.dirichlet(np.full(D, 0.5), size=K)
    alpha = np.full(K, 0.3)
    S = lda_private.word_scales(tw, rng.dirichlet(np.ones(D))) if scaled else None
    (qa, ga), (qb, gb) = (s.unmix_statistics(tw, alpha, cap, 50, 1e-6, S, single_topic) for s in (a, b))
    sens_q, sens_g = lda_private.tail_sensitivities(cap)
    assert np.linalg.norm(qa - qb) <= sens_q * (1 + 1e-9)
    assert np.linalg.norm(ga - gb) <= sens_g * (1 + 1e-9)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpora)
def test_scan_release_sensitivity(data):
    a, b, _ = neighbours(data)
    edges = lda_private.log_grid(*lda_private.COUNT_NORM_GRID)
    assert np.linalg.norm(a.private_scan(edges) - b.private_scan(edges)) <= lda_private.SCAN_SENSITIVITY * (1 + 1e-12)


def test_scan_bound_is_attained():
    # Two one-word documents on different words in different histogram bins: √(1² + 1² + 1² + 1²) = 2.
    a, b = Shard(csr([[9, 0, 0, 0, 0, 0, 0]])), Shard(csr([[0, 1, 0, 0, 0, 0, 0]]))
    edges = lda_private.log_grid(*lda_private.COUNT_NORM_GRID)
    assert np.linalg.norm(a.private_scan(edges) - b.private_scan(edges)) == pytest.approx(2.0)


def test_column_view_equals_the_restricted_corpus():
    rng = np.random.default_rng(3)
    C = sp.csr_matrix(rng.poisson(0.8, size=(40, D)).astype(float))
    cols = np.array([0, 2, 3, 6])
    shard, sub = Shard(C), Shard(C[:, cols])
    np.testing.assert_allclose(shard.on_columns(cols, "v", Shard.private_m1, 0.3), sub.private_m1(0.3))
    Q = np.linalg.qr(rng.standard_normal((4, 2)))[0]
    np.testing.assert_allclose(shard.on_columns(cols, "v", Shard.private_m2_product, Q, 0.2),
                               sub.private_m2_product(Q, 0.2))
    # A new key rebuilds the view (as after an actor restart or a new working vocabulary).
    np.testing.assert_allclose(shard.on_columns(cols[:2], "w", Shard.private_m1, 0.3),
                               Shard(C[:, cols[:2]]).private_m1(0.3))


def test_neighbour_reaches_the_m1_and_m2_bounds():
    # The bounds are attained (so they are not loose by construction): two
    # one-word documents on different words, both clipped to the bound.
    a, b = Shard(csr([[9, 0, 0, 0, 0, 0, 0]])), Shard(csr([[0, 9, 0, 0, 0, 0, 0]]))
    assert np.linalg.norm(a.private_m1(0.5) - b.private_m1(0.5)) == pytest.approx(math.sqrt(2) * 0.5)
    Q = np.eye(D)
    assert np.linalg.norm(a.private_m2_product(Q, 0.5) - b.private_m2_product(Q, 0.5)) == \
        pytest.approx(math.sqrt(2) * 0.5)
    dd = a.private_m2_dense(0.5) - b.private_m2_dense(0.5)
    assert np.linalg.norm(dd[np.triu_indices(D)]) == pytest.approx(math.sqrt(2) * 0.5)
