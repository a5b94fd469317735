"""The (DP-)SGD of completion (distdp.completion.sgd): gradients, clipping, per-step noise, projection onto the balls."""

import math

import numpy as np
import pytest
from scipy import stats

from distdp.completion import Observations, complete, from_dense
from distdp.completion import sgd
from distdp.completion import CompletionSolver, Perturbation


def small_obs(seed=0, shape=(5, 6, 7), frac=0.6):
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal(shape)
    Y[rng.random(shape) > frac] = np.nan
    return from_dense(Y)





@pytest.mark.parametrize("model", ["cp", "tucker"])
def test_full_gradient_matches_finite_differences(model):
    obs = small_obs()
    m = sgd.MODELS[model]
    factors = list(m.init_factors(obs.shape, 2, 1.0, np.random.default_rng(1)))
    lam, lam_core = 0.3, 0.2
    grad = sgd.full_gradient(m, factors, obs, lam, lam_core)
    h = 1e-6
    for F, g in zip(factors, grad):
        num = np.zeros_like(F)
        for ix in np.ndindex(F.shape):
            old = F[ix]
            F[ix] = old + h
            fp = m.objective(factors, obs.idx, obs.values, lam, lam_core)
            F[ix] = old - h
            fm = m.objective(factors, obs.idx, obs.values, lam, lam_core)
            F[ix] = old
            num[ix] = (fp - fm) / (2 * h)
        np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-6 * np.abs(num).max())


@pytest.mark.parametrize("model", ["cp", "tucker"])
def test_dpsgd_step_clips_each_entry_jointly(model):
    """Vectorised clipped batch sum == a per-entry loop over explicitly clipped gradients (noise off)."""
    obs = small_obs(seed=3)
    m = sgd.MODELS[model]
    factors = m.init_factors(obs.shape, 2, 1.0, np.random.default_rng(2))
    prob = sgd._Problem(m, obs)
    cfg = sgd.SGDConfig(lam=0.1, lam_core=0.05)
    clip = 0.3
    i, j, k = obs.idx.T
    got, n_clipped = sgd._step_dpsgd(m, factors, i, j, k, obs.values, prob, cfg,
                                     sgd.ClippedGaussianRule(clip=clip, noise_multiplier=0.0), np.random.default_rng(0))
    want = [np.zeros_like(F) for F in factors]
    count = 0
    for e in range(obs.n):
        one = Observations(obs.shape, obs.idx[e:e + 1], obs.values[e:e + 1])
        g, _, _ = sgd.data_gradient(m, factors, *one.idx.T, one.values)
        norm = math.sqrt(sum(np.sum(x * x) for x in g))
        count += norm > clip
        for w, x in zip(want, g):
            w += x / max(1.0, norm / clip)
    reg = sgd.regulariser_gradient(factors, i, j, k, prob.inv_counts, obs.n, cfg.lam, cfg.lam_core)
    for g, w, r in zip(got, want, reg):
        np.testing.assert_allclose(g, w + r, atol=1e-12)
    assert n_clipped == count > 0


def test_paper_gradient_noise_is_l2_mechanism_with_delta_2m():
    """Alg. 2: per entry, noise on ∇c_k of density ∝ exp(−ε‖n‖/2m): ‖n‖ ~ Gamma(R, 2m/ε), uniform direction."""
    K, R, m, eps = 3000, 3, 0.05, 2.0
    idx = np.stack([np.zeros(K, int), np.zeros(K, int), np.arange(K)], axis=1)
    obs = Observations((1, 1, K), idx, np.random.default_rng(0).standard_normal(K))
    model = sgd.MODELS["cp"]
    factors = model.init_factors(obs.shape, R, 1.0, np.random.default_rng(1))
    prob, cfg = sgd._Problem(model, obs), sgd.SGDConfig(lam=0.01)
    i, j, k = idx.T
    noisy, _ = sgd._step_paper(model, factors, i, j, k, obs.values, prob, cfg,
                               sgd.PaperGradientRule(clip=m, epsilon=eps), np.random.default_rng(2))
    clean, _ = sgd._step_paper(model, factors, i, j, k, obs.values, prob, cfg,
                               sgd.PaperGradientRule(clip=m, epsilon=1e18), np.random.default_rng(2))
    for a, b in zip(noisy[:2], clean[:2]):           # A and B get no noise
        np.testing.assert_array_equal(a, b)
    noise = noisy[2] - clean[2]                        # one row of C per entry here
    norms = np.linalg.norm(noise, axis=1)
    assert stats.kstest(norms, stats.gamma(R, scale=2 * m / eps).cdf).pvalue > 1e-3
    # a uniform direction on S²: each coordinate is Uniform[−1, 1] (Archimedes)
    assert stats.kstest(noise[:, 0] / norms, stats.uniform(-1, 2).cdf).pvalue > 1e-3
    assert np.all(np.linalg.norm(clean[2], axis=1) <= m + 1e-12)


@pytest.mark.parametrize("model", ["cp", "tucker"])
def test_dpsgd_noise_is_gaussian_std_sigma_2c_on_touched_rows_only(model):
    """N(0, (σ·2c)²) on every coordinate of the rows the batch touches and of G; untouched rows get exactly 0."""
    obs = small_obs(seed=5, shape=(30, 30, 30), frac=0.2)
    m = sgd.MODELS[model]
    factors = m.init_factors(obs.shape, 3, 1.0, np.random.default_rng(1))
    prob, cfg = sgd._Problem(m, obs), sgd.SGDConfig()
    i, j, k = obs.idx[:50].T
    x = obs.values[:50]
    rule = sgd.ClippedGaussianRule(clip=0.2, noise_multiplier=3.0)
    noisy, _ = sgd._step_dpsgd(m, factors, i, j, k, x, prob, cfg, rule, np.random.default_rng(2))
    clean, _ = sgd._step_dpsgd(m, factors, i, j, k, x, prob, cfg, sgd.ClippedGaussianRule(0.2, 0.0),
                               np.random.default_rng(2))
    touched, untouched = [], []
    for a, b, index in zip(noisy[:3], clean[:3], (i, j, k)):
        mask = np.zeros(a.shape[0], bool)
        mask[index] = True
        assert 0 < mask.sum() < a.shape[0]               # both kinds of rows occur
        touched.append((a - b)[mask].ravel())
        untouched.append(a[~mask].ravel())
        np.testing.assert_array_equal(b[~mask], 0.0)      # no data or regulariser gradient on untouched rows
    if model == "tucker":
        touched.append((noisy[3] - clean[3]).ravel())
    noise = np.concatenate(touched)
    np.testing.assert_array_equal(np.concatenate(untouched), 0.0)
    assert stats.kstest(noise, stats.norm(scale=rule.noise_std).cdf).pvalue > 1e-3
    assert rule.noise_std == pytest.approx(3.0 * 2 * 0.2)


def test_project_is_the_euclidean_projection_onto_the_balls():
    rng = np.random.default_rng(0)
    A, B, C = (rng.standard_normal((40, 3)) for _ in range(3))
    G = rng.standard_normal((3, 3, 3))
    before = [F.copy() for F in (A, B, C, G)]
    factors = [A, B, C, G]
    sgd.project(factors, 1.2, 2.0)
    for F, F0 in zip(factors[:3], before[:3]):
        n0 = np.linalg.norm(F0, axis=1)
        np.testing.assert_allclose(np.linalg.norm(F, axis=1), np.minimum(n0, 1.2), rtol=1e-12)
        np.testing.assert_array_equal(F[n0 <= 1.2], F0[n0 <= 1.2])          # inside: unchanged
        np.testing.assert_allclose(F, F0 * (np.minimum(n0, 1.2) / n0)[:, None], rtol=1e-12)  # same direction
        assert (n0 > 1.2).any() and (n0 <= 1.2).any()
    assert np.linalg.norm(G) == pytest.approx(2.0) and np.linalg.norm(before[3]) > 2.0
    sgd.project(factors, math.inf, None)                                      # no-op
    assert np.linalg.norm(G) == pytest.approx(2.0)


@pytest.mark.parametrize("model", ["cp", "tucker"])
def test_default_radii_make_the_model_range_exactly_the_declared_range(model):
    """CP: max |x̂| = r³ (one aligned component); Tucker: max |x̂| = g r³ (rank-one core along a⊗b⊗c); both = B."""
    B, R = 0.7, 3
    r, g = sgd.default_radii(model, R, B)
    u = np.zeros((1, R))
    u[0, 0] = r
    factors = (u, u, u) if model == "cp" else (u, u, u, np.pad(np.full((1, 1, 1), g), ((0, R - 1),) * 3))
    zero = np.zeros(1, int)
    assert sgd.MODELS[model].predict(factors, zero, zero, zero)[0] == pytest.approx(B)
    if model == "tucker":
        assert g / r == pytest.approx(R)               # the init's balance: every parameter of one magnitude


@pytest.mark.parametrize("model", ["cp", "tucker"])
def test_gradient_fit_projects_every_row_and_reports_it_as_post_processing(model):
    obs = small_obs(seed=2, shape=(10, 10, 10), frac=0.7)
    res = complete(obs, 3, model=model, bounds=(-2.0, 2.0),
                   perturbation=Perturbation(kind="gradient", epsilon=0.2, delta=1e-6),
                   solver=CompletionSolver(epochs=4, batch_size=50, lr=0.5))
    r, g = sgd.default_radii(model, 3, 2.0)
    assert res.config["max_row_norm"] == pytest.approx(r) and res.config["max_core_norm"] == (
        None if model == "cp" else pytest.approx(g))
    for F in (res.A, res.B, res.C):
        assert np.linalg.norm(F, axis=1).max() <= r * (1 + 1e-12)
    assert np.isclose(np.linalg.norm(F, axis=1).max(), r)            # the noise pushes rows to the boundary
    if model == "tucker":
        assert np.linalg.norm(res.G) <= g * (1 + 1e-12)
    stated = [a for a in res.privacy.assumptions if a.startswith("projection")]
    assert len(stated) == 1 and "post-processing" in stated[0] and "no privacy cost" in stated[0]
    assert res.privacy.private and res.privacy.epsilon == pytest.approx(0.2, rel=1e-3)
    # an explicit radius, on a non-gradient variant, is honoured too; input: post-processing of noisy values
    inp = complete(obs, 3, model=model, bounds=(-3.0, 3.0), max_row_norm=0.3,
                   perturbation=Perturbation(kind="input", epsilon=1.0), solver=CompletionSolver(epochs=2))
    assert max(np.linalg.norm(F, axis=1).max() for F in (inp.A, inp.B, inp.C)) <= 0.3 * (1 + 1e-12)
    assert any(a.startswith("projection") and "post-processing" in a for a in inp.privacy.assumptions)
    with pytest.raises(ValueError, match="needs a public range"):   # no bounds, no radius: refused, not unprojected
        complete(obs, 3, model=model, perturbation=Perturbation(kind="gradient", epsilon=1.0, delta=1e-6),
                 solver=CompletionSolver(epochs=1))
