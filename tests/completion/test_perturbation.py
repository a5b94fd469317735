"""DP tensor completion (distdp.completion): gradients, recovery, noise scales, accounting, IO, CLI, Ray."""
import json
import math
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats

from distdp.cli import main
from distdp.completion import DivergenceWarning, NotPrivateWarning, Observations, complete, from_dense, split_holdout
from distdp.completion import perturbation as pt
from distdp.completion import sgd
from distdp.completion.io import load_observations, write_coo_parquet
from distdp.completion.synthetic import make_problem
from distdp.privacy import accounting

# ----------------------------------------------------------------------------- helpers


def low_rank_problem(model, seed=0, sigma=0.1, shape=(20, 20, 20), rank=3, missing=0.5):
    """Exact rank-3 truth with entries of std ≈ √3, Gaussian noise σ, ``missing`` share unobserved."""
    rng = np.random.default_rng(seed)
    if model == "cp":
        X = np.einsum("ir,jr,kr->ijk", *[rng.standard_normal((n, rank)) for n in shape])
    else:
        F = [np.linalg.qr(rng.standard_normal((n, rank)))[0] for n in shape]
        X = np.einsum("pqt,ip,jq,kt->ijk", rng.standard_normal((rank,) * 3), *F)
        X *= math.sqrt(rank) / X.std()
    Y = X + sigma * rng.standard_normal(shape)
    Y.ravel()[rng.permutation(Y.size)[: int(missing * Y.size)]] = np.nan
    return X, from_dense(Y)


def small_obs(seed=0, shape=(5, 6, 7), frac=0.6):
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal(shape)
    Y[rng.random(shape) > frac] = np.nan
    return from_dense(Y)


# ----------------------------------------------------------------------------- gradients (finite differences)


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


# ----------------------------------------------------------------------------- recovery without noise


@pytest.mark.parametrize("model,p", [("cp", 3 * (60 - 2)), ("tucker", 3 * 60 + 27 - 27)])
def test_recovers_low_rank_tensor_near_noise_floor(model, p):
    """20×20×20, rank 3, 50% missing, 80/20 split, noise σ = 0.1, no DP.

    Tolerance: the least-squares estimator of a model with p free parameters
    from N noisy entries has RMSE ≈ σ√(p/N) against the truth (p = R(n1+n2+n3)
    minus the scaling gauge 2R for CP; plus R³ core minus the GL(R)³ gauge 3R²
    for Tucker; N = 3200 training entries: ≈ 0.023). Constant-step SGD adds a
    stationary fluctuation ∝ η, and λ a small bias: we allow twice the floor.
    The entries have std ≈ 1.7, so predicting the mean would give RMSE ≈ 1.7.
    offset=0: the truth is exactly rank 3, and a rank-3 model plus the default
    non-private offset (the training mean) cannot represent it exactly.
    """
    sigma = 0.1
    X, obs = low_rank_problem(model, seed=0, sigma=sigma)
    res = complete(obs, 3, model=model, lr=0.005, epochs=100, batch_size=64, seed=1, offset=0.0)
    _, test = split_holdout(obs, 0.2, np.random.default_rng(1))  # the split complete() made with seed 1
    assert res.n_train == 3200 and res.n_test == 800
    rmse_truth = np.sqrt(np.mean((res.predict(*test.idx.T) - X[tuple(test.idx.T)]) ** 2))
    floor = sigma * math.sqrt(p / res.n_train)
    assert rmse_truth < 2 * floor, (rmse_truth, floor)
    # the test RMSE against the noisy held-out values is then ≈ √(σ² + rmse_truth²)
    assert abs(res.test_rmse - math.hypot(sigma, rmse_truth)) < 0.015
    assert res.trace.objective[-1] < 0.01 * res.trace.objective[0]
    assert res.privacy.private is False and res.trace.epochs_run == 100


def test_tol_stops_early_and_reports_convergence():
    _, obs = low_rank_problem("cp", seed=4)
    res = complete(obs, 3, lr=0.005, epochs=100, tol=1e-3, seed=0)
    assert res.trace.converged and res.trace.epochs_run < 100
    assert len(res.trace.objective) == res.trace.epochs_run + 1


def test_fixed_seed_is_deterministic_without_noise():
    obs = small_obs()
    a = complete(obs, 2, model="tucker", epochs=3, seed=7)
    b = complete(obs, 2, model="tucker", epochs=3, seed=7)
    for x, y in zip(a.factors, b.factors):
        np.testing.assert_array_equal(x, y)


# ----------------------------------------------------------------------------- noise of the stated scale


def test_input_perturbation_is_laplace_of_stated_scale_after_clamping():
    rng = np.random.default_rng(0)
    values = rng.uniform(-0.5, 1.5, 20000)                  # some outside the declared [0, 1]
    eps, lo, hi = 0.7, 0.0, 1.0
    noisy, n_clamped = pt.input_perturbation(values, (lo, hi), eps, np.random.default_rng(1))
    clamped = np.clip(values, lo, hi)
    assert n_clamped == np.sum((values < lo) | (values > hi))
    noise = noisy - clamped
    assert stats.kstest(noise, stats.laplace(scale=(hi - lo) / eps).cdf).pvalue > 1e-3
    clamped_noisy, _ = pt.input_perturbation(values, (lo, hi), eps, np.random.default_rng(1), clamp_noisy=True)
    np.testing.assert_array_equal(clamped_noisy, np.clip(noisy, lo, hi))


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


def test_output_perturbation_adds_l2_noise_to_C_only():
    """Same seed and reproducible noise: the output fit is the non-private fit plus C-row noise of scale 2τLη/ε."""
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((3, 3, 800))
    obs = from_dense(Y)
    kw = dict(epochs=2, lr=0.01, holdout=0.0, seed=3, offset=0.0)   # same offset for both fits
    base = complete(obs, 3, **kw)
    eps, L = 0.5, 2.0
    out = complete(obs, 3, perturbation="output", epsilon=eps, lipschitz=L, reproducible=True, **kw)
    np.testing.assert_array_equal(out.A, base.A)
    np.testing.assert_array_equal(out.B, base.B)
    noise = out.C - base.C
    scale = 2 * 2 * L * 0.01 / eps                        # Δ/ε with Δ = 2τLη, τ = 2 passes
    assert stats.kstest(np.linalg.norm(noise, axis=1), stats.gamma(3, scale=scale).cdf).pvalue > 1e-3
    assert out.privacy.private is False and "non-convex" in " ".join(out.privacy.not_private_because)


# ----------------------------------------------------------------------------- accounting


@pytest.mark.parametrize("epochs,eps,delta", [(1, 1.0, 1e-5), (20, 1.0, 1e-6), (100, 4.0, 1e-5)])
def test_dpsgd_calibration_matches_gaussian_closed_form(epochs, eps, delta):
    """E passes = E composed Gaussian mechanisms = one Gaussian with μ = √E/σ (μ-GDP, Dong–Roth–Su):
    δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) must equal the target δ at the calibrated σ."""
    sigma = pt.dpsgd_noise_multiplier(epochs, eps, delta)
    mu = math.sqrt(epochs) / sigma
    delta_exact = stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
    assert delta_exact == pytest.approx(delta, rel=2e-3)
    rep = pt.dpsgd_report(sigma, clip=0.1, epochs=epochs, steps=epochs * 7, batch_size=64, delta=delta,
                          target_epsilon=eps, blocks="A, B, C")
    assert rep.private and rep.epsilon <= eps * (1 + 1e-6)
    assert rep.noise["epsilon_exact"] == pytest.approx(eps, rel=1e-3)
    assert rep.noise["epsilon_rdp"] > rep.epsilon          # RDP is looser than PLD for Gaussians
    ev = rep.ledger[0]["dp_event"]
    assert ev.get("count", 1) == epochs and ev.get("event", ev)["noise_multiplier"] == sigma


def test_gradient_fit_reports_guarantee_and_paper_variants_do_not():
    obs = small_obs(shape=(8, 8, 8), frac=0.8)
    g = complete(obs, 2, perturbation="gradient", epsilon=2.0, delta=1e-6, epochs=5, batch_size=100,
                 bounds=(-3.0, 3.0))
    assert g.privacy.private and g.privacy.epsilon == pytest.approx(2.0, rel=1e-3) and g.privacy.delta == 1e-6
    assert accounting.epsilon(accounting.gaussian_event(g.privacy.noise["noise_multiplier"], 5), 1e-6) <= 2.0 + 1e-6
    p = complete(obs, 2, perturbation="gradient-paper", epsilon=2.0, epochs=2)
    assert not p.privacy.private and p.privacy.epsilon is None
    assert any("A, B and G" in r for r in p.privacy.not_private_because)
    assert any("composition" in r for r in p.privacy.not_private_because)


def test_private_noise_ignores_seed_unless_reproducible():
    obs = small_obs()
    kw = dict(perturbation="input", epsilon=1.0, bounds=(-3.0, 3.0), epochs=2, seed=1)
    a, b = complete(obs, 2, **kw), complete(obs, 2, **kw)
    assert not np.array_equal(a.A, b.A) and a.privacy.private
    c, d = complete(obs, 2, reproducible=True, **kw), complete(obs, 2, reproducible=True, **kw)
    np.testing.assert_array_equal(c.A, d.A)
    assert not c.privacy.private and c.privacy.epsilon is None
    assert any("seeded" in r for r in c.privacy.not_private_because)


def test_input_bounds_from_data_warn_and_are_not_private():
    obs = small_obs()
    with pytest.raises(ValueError, match="declared public value bounds"):
        complete(obs, 2, perturbation="input", epsilon=1.0)
    with pytest.warns(NotPrivateWarning, match="NOT PRIVATE"):
        res = complete(obs, 2, perturbation="input", epsilon=1.0, allow_data_bounds=True, epochs=1)
    assert not res.privacy.private and "computed from the private data" in res.privacy.not_private_because[0]


# ----------------------------------------------------------------------------- projection and divergence


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
    res = complete(obs, 3, model=model, perturbation="gradient", epsilon=0.2, delta=1e-6, epochs=4,
                   batch_size=50, lr=0.5, bounds=(-2.0, 2.0))
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
    inp = complete(obs, 3, model=model, perturbation="input", epsilon=1.0, bounds=(-3.0, 3.0), epochs=2,
                   max_row_norm=0.3)
    assert max(np.linalg.norm(F, axis=1).max() for F in (inp.A, inp.B, inp.C)) <= 0.3 * (1 + 1e-12)
    assert any(a.startswith("projection") and "post-processing" in a for a in inp.privacy.assumptions)
    with pytest.warns(UserWarning, match="not projected"):
        bare = complete(obs, 3, model=model, perturbation="gradient", epsilon=1.0, delta=1e-6, epochs=1)
    assert "no projection of the iterates" in bare.privacy.assumptions


@pytest.mark.parametrize("model,seed", [("cp", 11), ("tucker", 12)])
def test_sound_gradient_at_small_epsilon_stays_bounded_and_blowup_is_reported(model, seed):
    """Paper setting (20×20×20, rank 3, SNR 1, 50% missing; Fig. 2's sound-GP settings), ε = 0.1.

    Derived bound: with the default radii, every prediction satisfies
    |x̂ − offset| ≤ B (CP r³ = B, Tucker g r³ = B; see ``sgd.default_radii``),
    so by the triangle inequality on the test entries
    RMSE(x̂ + offset, X̃) ≤ RMSE(offset, X̃) + B, whatever the noise. Here the
    declared bounds are [0, 1] (X̃ is min-max scaled: public) and offset 0.5,
    so B = 0.5. Without projection the same run blows up (RMSE ≫ 1) and is
    reported as diverged.
    """
    prob = make_problem(model=model, snr=1.0, missing_ratio=0.5, rng=np.random.default_rng(seed))
    train, test = split_holdout(prob.observed, 0.2, np.random.default_rng(seed))   # complete()'s split
    truth = prob.truth[tuple(test.idx.T)]
    kw = dict(model=model, perturbation="gradient", epsilon=0.1, delta=1e-5, clip=0.05, lr=0.05, epochs=20,
              batch_size=10 ** 9, offset=0.5, seed=seed, reproducible=True,
              **({"lam": 0.01} if model == "cp" else {"lam": 0.001, "lam_core": 0.0001}))

    def rmse(res):
        return float(np.sqrt(np.mean((res.predict(*test.idx.T) - truth) ** 2)))

    rmse_offset = float(np.sqrt(np.mean((0.5 - truth) ** 2)))
    B = 0.5
    res = complete(prob.observed, 3, bounds=(0.0, 1.0), **kw)
    assert rmse(res) <= rmse_offset + B
    assert not res.trace.diverged and res.report()["convergence"]["diverged_pass"] is None
    with pytest.warns(DivergenceWarning, match="blew up"):
        raw = complete(prob.observed, 3, max_row_norm=math.inf, **kw)
    assert raw.trace.diverged and rmse(raw) > 10 * (rmse_offset + B)
    zero_objective = float(np.sum((train.values - 0.5) ** 2))      # withheld from a gradient fit's result
    assert raw.trace.zero_objective is None and "zero_objective" not in raw.report()["convergence"]
    assert raw.trace.objective[raw.trace.diverged_pass] > 100 * zero_objective
    assert any(c.startswith("convergence.diverged_pass:") for c in raw.privacy.not_covered)


# ----------------------------------------------------------------------------- bad input


def write_coo(path, i, j, k, v, shape=None):
    t = pa.table({"i": pa.array(i, pa.int64()), "j": pa.array(j, pa.int64()), "k": pa.array(k, pa.int64()),
                  "value": pa.array(v, pa.float64())})
    if shape:
        t = t.replace_schema_metadata({b"distdp.shape": ",".join(map(str, shape)).encode()})
    pq.write_table(t, path)
    return path


@pytest.mark.parametrize("rows,shape,needle", [
    (([0, 1], [0, 5], [0, 0], [1.0, 2.0]), (2, 3, 1), "row 1: column 'j': index 5 is outside [0, 3)"),
    (([0, 1], [0, 0], [0, 0], [1.0, float("nan")]), None, "row 1: column 'value' is NaN"),
    (([0, 0], [0, 0], [0, 0], [1.0, 2.0]), None, "row 1: entry (0, 0, 0) is observed twice"),
    (([0, -1], [0, 0], [0, 0], [1.0, 2.0]), None, "row 1: column 'i': index -1"),
    (([], [], [], []), None, "observation set is empty"),
])
def test_bad_coo_files_name_file_row_and_column(tmp_path, rows, shape, needle):
    path = write_coo(tmp_path / "x.parquet", *rows, shape=shape)
    with pytest.raises(ValueError) as err:
        load_observations(path)
    assert needle in str(err.value) and "x.parquet" in str(err.value)


def test_bad_npy_and_parameters(tmp_path):
    np.save(tmp_path / "empty.npy", np.full((2, 2, 2), np.nan))
    with pytest.raises(ValueError, match="empty.npy: the observation set is empty"):
        load_observations(tmp_path / "empty.npy")
    np.save(tmp_path / "flat.npy", np.ones((2, 2)))
    with pytest.raises(ValueError, match="flat.npy: expected a 3-way tensor"):
        load_observations(tmp_path / "flat.npy")
    pq.write_table(pa.table({"i": [0], "j": [0], "value": [1.0]}), tmp_path / "cols.parquet")
    with pytest.raises(ValueError, match=r"missing column\(s\) \['k'\]"):
        load_observations(tmp_path / "cols.parquet")
    obs = small_obs()
    for kw, needle in [(dict(rank=0), "rank must be a positive integer, got 0"),
                       (dict(rank=-2), "rank must be a positive integer"),
                       (dict(rank=2, perturbation="gradient", epsilon=0.0), "epsilon must be finite and > 0"),
                       (dict(rank=2, perturbation="output", epsilon=-1.0), "epsilon must be finite and > 0"),
                       (dict(rank=2, perturbation="gradient"), "perturbation gradient needs epsilon"),
                       (dict(rank=2, epsilon=1.0), "epsilon 1.0 given without a perturbation"),
                       (dict(rank=2, perturbation="input", epsilon=1.0, bounds=(0, 1), delta=1e-6),
                        "delta applies only to perturbation gradient"),
                       (dict(rank=2, seed=-1), "seed must be a non-negative integer, got -1"),
                       (dict(rank=2, batch_size=0), "batch_size must be an integer ≥ 1, got 0"),
                       (dict(rank=2, offset=math.nan), "offset must be a finite number"),
                       (dict(rank=2, bounds=(1.0, 0.0)), "bounds must be finite with lo < hi"),
                       (dict(rank=2, perturbation="gradient", epsilon=1.0, delta=2.0), "delta must be in"),
                       (dict(rank=2, perturbation="gradient", epsilon=1.0, tol=1e-3), "tol > 0"),
                       (dict(rank=2, perturbation="magic", epsilon=1.0), "perturbation must be one of"),
                       (dict(rank=2, model="parafac"), "model must be one of"),
                       (dict(rank=2, holdout=1.0), "holdout must be in"),
                       (dict(rank=2, lr=0.0), "lr must be a finite number > 0"),
                       (dict(rank=2, reproducible=True), "reproducible=True needs seed"),
                       (dict(rank=2, max_row_norm=0.0), "max_row_norm must be a number > 0"),
                       (dict(rank=2, model="tucker", max_core_norm=-1.0), "max_core_norm must be a number > 0")]:
        rank = kw.pop("rank")
        with pytest.raises(ValueError, match=needle):
            complete(obs, rank, **kw)


# ----------------------------------------------------------------------------- CLI and output directory


def test_cli_writes_factors_and_report(tmp_path, capsys):
    obs = small_obs(shape=(6, 7, 8), frac=0.7)
    src = write_coo_parquet(obs, tmp_path / "obs.parquet")
    assert load_observations(src).shape == (6, 7, 8)
    out = tmp_path / "fit"
    rc = main(["complete", str(src), "--rank", "2", "--model", "tucker", "--perturbation", "gradient",
               "--epsilon", "1", "--delta", "1e-6", "--epochs", "3", "--max-row-norm", "0.9", "--max-core-norm",
               "1.5", "--out", str(out), "--no-progress"])
    assert rc == 0 and "(1, 1e-06)-DP" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["A.npy", "B.npy", "C.npy", "G.npy", "report.json"]
    rep = json.loads((out / "report.json").read_text())
    assert rep["privacy"]["private"] and rep["test_rmse"] > 0 and rep["n_test"] == round(0.2 * obs.n)
    assert set(rep["timings_s"]) == {"perturb", "sgd", "total"} and rep["convergence"]["epochs_run"] == 3
    assert np.load(out / "G.npy").shape == (2, 2, 2) and np.linalg.norm(np.load(out / "G.npy")) <= 1.5 + 1e-12
    assert rep["config"]["max_row_norm"] == 0.9 and rep["config"]["max_core_norm"] == 1.5
    assert all(np.linalg.norm(np.load(out / f"{n}.npy"), axis=1).max() <= 0.9 + 1e-12 for n in "ABC")
    assert any(a.startswith("projection") for a in rep["privacy"]["assumptions"])


def test_cli_failure_leaves_no_output_dir(tmp_path, capsys):
    np.save(tmp_path / "t.npy", np.full((2, 2, 2), np.nan))
    out = tmp_path / "fit"
    assert main(["complete", str(tmp_path / "t.npy"), "--rank", "2", "--out", str(out), "--no-progress"]) == 2
    assert "observation set is empty" in capsys.readouterr().err
    assert not out.exists() and not any(p.name.startswith(".fit") for p in tmp_path.iterdir())
    obs = small_obs()
    np.save(tmp_path / "ok.npy", obs.dense())
    assert main(["complete", str(tmp_path / "ok.npy"), "--rank", "0", "--out", str(out), "--no-progress"]) == 2
    assert not out.exists()


# ----------------------------------------------------------------------------- Ray tasks


def test_epsilon_sweep_runs_as_ray_tasks(ray_session):
    from distdp.distributed.completion import epsilon_sweep

    obs = small_obs(shape=(6, 6, 6), frac=0.8)
    rows = epsilon_sweep(obs, epsilons=[0.5, 4.0], perturbations=["none", "input", "gradient"], n_runs=2, seed=10,
                         rank=2, bounds=(-3.0, 3.0), epochs=3,
                         score=lambda r: (r.test_rmse, r.privacy.private, r.privacy.epsilon, float(r.A.sum())))
    assert len(rows) == 2 + 2 * 2 * 2
    none = [r for r in rows if r["perturbation"] == "none"]
    local = complete(obs, 2, epochs=3, seed=10, bounds=(-3.0, 3.0))   # the sweep's kwargs
    assert none[0]["result"][0] == pytest.approx(local.test_rmse)   # same seed, same numbers as in-process
    grad = [r["result"] for r in rows if r["perturbation"] == "gradient"]
    assert all(p and e == pytest.approx(eps, rel=1e-3)
               for (_, p, e, _), eps in zip(grad, [0.5, 0.5, 4.0, 4.0]))
    inputs = [r["result"][3] for r in rows if r["perturbation"] == "input" and r["run"] == 0]
    assert inputs[0] != inputs[1]                                     # independent OS-entropy noise per task


# ----------------------------------------------------------------------------- nothing unnoised in a private report


def _neighbours(v_a, v_b, seed=0, shape=(6, 7, 8)):
    """Two tensors with values in [0, 1] that differ in the value of one observed entry only."""
    rng = np.random.default_rng(seed)
    Y = rng.uniform(0.0, 1.0, shape)
    Y[rng.random(shape) > 0.7] = np.nan
    Y[0, 0, 0] = v_a
    Z = Y.copy()
    Z[0, 0, 0] = v_b
    return from_dense(Y), from_dense(Z)


def _numeric(v):
    return (isinstance(v, float) or (isinstance(v, list) and len(v) > 0
                                     and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)))


def _assert_same(a, b, rtol=0.0):
    assert a.keys() == b.keys()
    for p in a:
        if rtol and _numeric(a[p]):
            np.testing.assert_allclose(a[p], b[p], rtol=rtol, err_msg=p)
        else:
            assert a[p] == b[p], p


def test_input_report_has_nothing_from_raw_values_outside_not_covered():
    """Neighbours 1.0 and 3.0 with declared bounds [0, 1]: both clamp to 1.0, so with the same noise (reproducible)
    the released noisy values are identical, and so must be every report field not listed under not_covered.
    The clamp count (config.n_clamped, 0 vs 1 here) used to differ: it is no longer reported."""
    a, b = _neighbours(1.0, 3.0)
    kw = dict(perturbation="input", epsilon=1.0, bounds=(0.0, 1.0), holdout=0.0, epochs=3, seed=5, reproducible=True)
    ra, rb = complete(a, 2, **kw).report(), complete(b, 2, **kw).report()
    assert ra["train_rmse"] != rb["train_rmse"]                    # the replay does see raw-value fields...
    _assert_same(pt.covered_fields(ra), pt.covered_fields(rb))          # ...and every one of them is listed
    assert "n_clamped" not in ra["config"] and any(s.startswith("config.n_clamped") for s in
                                                   ra["privacy"]["not_released"])


def test_gradient_report_has_nothing_from_raw_values_outside_not_covered():
    """Sound gradient perturbation, same noise (reproducible), two checks.

    1. Neighbours 100 and 1000 with bounds [0, 1] (offset 0.5): the default projection keeps |x̂ − 0.5| ≤ 0.5,
       so the changed entry's residual is ≤ −198 and its gradient is clipped to the same vector C·g/‖g‖ for
       both at every step; the runs differ only by the rounding of the clipping factor (a few ulp per step, 48
       steps: ≪ 1e-9 relative), so every field not under not_covered must agree to rtol 1e-9.
       zero_objective (≈ 10⁴ vs 10⁶) used to be reported.
    2. Neighbours 0.2 and 0.9: the iterates differ, so only their post-processing (convergence.step_norm, the
       released iterates' movement) may differ; everything else must be identical. clipped_fraction used to differ.
    """
    kw = dict(perturbation="gradient", epsilon=1.0, delta=1e-6, bounds=(0.0, 1.0), holdout=0.0, epochs=3,
              batch_size=16, clip=0.1, seed=5, reproducible=True)
    a, b = _neighbours(100.0, 1000.0)
    ra, rb = complete(a, 2, **kw), complete(b, 2, **kw)
    assert ra.trace.zero_objective is None and ra.trace.clipped_fraction is None
    ra, rb = ra.report(), rb.report()
    assert ra["train_rmse"] != rb["train_rmse"] and ra["convergence"]["objective"] != rb["convergence"]["objective"]
    _assert_same(pt.covered_fields(ra), pt.covered_fields(rb), rtol=1e-9)
    for key in ("zero_objective", "clipped_fraction"):
        assert key not in ra["convergence"] and any(s.startswith(f"convergence.{key}:")
                                                    for s in ra["privacy"]["not_released"])
    a, b = _neighbours(0.2, 0.9)
    ca, cb = (pt.covered_fields(complete(d, 2, **kw).report()) for d in (a, b))
    assert ca.pop("convergence.step_norm") != cb.pop("convergence.step_norm")
    _assert_same(ca, cb)


def test_divergence_warning_of_a_gradient_fit_prints_no_raw_statistic():
    a, _ = _neighbours(50.0, 50.0)
    with pytest.warns(DivergenceWarning) as rec:
        res = complete(a, 2, perturbation="gradient", epsilon=0.5, delta=1e-6, holdout=0.0, epochs=3, lr=0.5,
                       batch_size=500, clip=1.0, max_row_norm=math.inf, seed=0, reproducible=True)
    assert res.trace.diverged
    msg = str(next(w.message for w in rec if issubclass(w.category, DivergenceWarning)))
    assert "not covered by the guarantee" in msg and "(objective" not in msg and " vs " not in msg


# ----------------------------------------------------------------------------- offset, divergence, ranks, predict


def test_default_offset_is_public_and_fits_ratings(ratings):
    obs = ratings
    res = complete(obs, 3, seed=0)                                        # defaults: non-private, no bounds
    train, _ = split_holdout(obs, 0.2, np.random.default_rng(0))
    assert res.offset == pytest.approx(train.values.mean()) and "mean" in res.config["offset_source"]
    assert res.test_rmse < 0.1 and not res.trace.diverged                # values span 1–5
    assert complete(obs, 3, seed=0, bounds=(1, 5), epochs=1).offset == 3.0
    assert complete(obs, 3, seed=0, offset=2.5, bounds=(1, 5), epochs=1).offset == 2.5
    for pert, extra in [("gradient", dict(delta=1e-6)), ("output", {})]:   # private modes never look at the data
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = complete(obs, 3, perturbation=pert, epsilon=1.0, seed=0, epochs=1, **extra)
        assert r.offset == 0.0 and r.config["offset_source"].startswith("default 0")
        assert any(a.startswith("offset 0: default 0") for a in r.privacy.assumptions)
    r = complete(obs, 3, perturbation="gradient", epsilon=1.0, delta=1e-6, bounds=(1, 5), seed=0, epochs=1)
    assert r.offset == 3.0 and r.privacy.private


def test_nonfinite_sgd_is_a_value_error_with_advice(ratings):
    obs = ratings
    with pytest.raises(ValueError, match=r"SGD diverged: .*non-finite in pass \d+ .*Lower lr \(e\.g\. 0\.05\)"
                                         r".*offset") as err:
        complete(obs, 3, seed=0, offset=0.0, lr=0.5)
    assert isinstance(err.value, FloatingPointError)      # still what callers catching FloatingPointError see


def test_tucker_rank_above_a_dimension_is_refused_and_cp_warns():
    obs = small_obs(shape=(5, 6, 7))
    with pytest.raises(ValueError, match=r"rank 6 exceeds the tensor's size 5 in mode 1 .* rank ≤ 5"):
        complete(obs, 6, model="tucker")
    complete(obs, 5, model="tucker", epochs=1)
    with pytest.warns(UserWarning, match=r"rank 31 exceeds the largest CP rank .* = 30"):
        complete(obs, 31, epochs=1)


@pytest.mark.parametrize("model", ["cp", "tucker"])
def test_predict_accepts_scalars_and_rejects_bad_indices(model):
    obs = small_obs(shape=(5, 6, 7))
    res = complete(obs, 2, model=model, epochs=2, seed=0)
    full = res.full_tensor()
    got = res.predict(4, 5, 6)
    assert isinstance(got, float) and got == pytest.approx(full[4, 5, 6])
    np.testing.assert_allclose(res.predict([0, 4], 1, np.int32(2)), full[[0, 4], 1, 2])     # broadcasts
    np.testing.assert_allclose(res.predict(*obs.idx.T), full[tuple(obs.idx.T)])
    assert res.predict(np.array([[1, 2]]), 0, 0).shape == (1, 2)
    with pytest.raises(IndexError, match=r"i index -1 is outside \[0, 5\)"):
        res.predict(-1, 0, 0)
    with pytest.raises(IndexError, match=r"k index 7 is outside \[0, 7\)"):
        res.predict([0], [0], [7])
    with pytest.raises(TypeError, match="j must be integer indices"):
        res.predict(0, 1.0, 0)
    with pytest.raises(ValueError, match="broadcastable"):
        res.predict([0, 1], [0, 1, 2], 0)


# ----------------------------------------------------------------------------- input files


def test_complex_input_is_refused_naming_the_file(tmp_path):
    Y = small_obs().dense().astype(complex)
    Y[0, 0, 0] = 1 + 2j
    np.save(tmp_path / "z.npy", Y)
    with pytest.raises(ValueError, match=r"z\.npy: complex values \(dtype complex128\) are not supported"):
        load_observations(tmp_path / "z.npy")
    with pytest.raises(ValueError, match="complex values"):
        complete(Y, 2)


def test_directory_of_coo_files(tmp_path):
    obs = small_obs(shape=(5, 6, 7))
    half = obs.n // 2
    d = tmp_path / "coo"
    (d / "sub").mkdir(parents=True)
    write_coo_parquet(obs.subset(np.arange(half)), d / "part-0.parquet")
    write_coo_parquet(obs.subset(np.arange(half, obs.n)), d / "sub" / "part-1.parquet")
    write_coo(d / ".hidden.parquet", [9], [9], [9], [1.0])                     # hidden: skipped
    got = load_observations(d)
    assert got.shape == obs.shape
    np.testing.assert_array_equal(got.idx, obs.idx)
    np.testing.assert_array_equal(got.values, obs.values)
    write_coo(d / "part-2.parquet", [int(obs.idx[0, 0])], [int(obs.idx[0, 1])], [int(obs.idx[0, 2])], [0.5],
              shape=obs.shape)
    with pytest.raises(ValueError, match=r"part-2\.parquet: row 0: entry .* is also observed in .*part-0\.parquet, "
                                         r"row 0"):
        load_observations(d)
    write_coo(d / "part-2.parquet", [0], [0], [0], [0.5], shape=(9, 9, 9))
    with pytest.raises(ValueError, match=r"part-2\.parquet: metadata key 'distdp.shape' says \(9, 9, 9\)"):
        load_observations(d)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="empty: directory holds no .parquet files"):
        load_observations(tmp_path / "empty")


@pytest.mark.parametrize("meta", [b"a,b,c", b"15,12", b"15,12,10,2", b"3,0,2"])
def test_malformed_shape_metadata_names_file_and_key(tmp_path, meta):
    path = tmp_path / "m.parquet"
    pq.write_table(pa.table({"i": [0], "j": [0], "k": [0], "value": [1.0]}).replace_schema_metadata(
        {b"distdp.shape": meta}), path)
    with pytest.raises(ValueError, match=r"m\.parquet: metadata key 'distdp.shape' is .*expected three positive "
                                         r"integers"):
        load_observations(path)
    assert load_observations(path, shape=(2, 2, 2)).shape == (2, 2, 2)     # a given shape needs no metadata
