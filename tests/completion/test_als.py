"""ALS for CP (eq. 6) and Tucker (eq. 7) completion: exact block solves, monotone objective, least-squares optimum."""
import json
import math
import warnings

import numpy as np
import pytest

from distdp.completion import complete, from_dense, split_holdout
from distdp.completion import als, cp, tucker
from distdp.completion.entries import Observations
from distdp.completion.sgd import full_gradient
from distdp.completion import CompletionSolver, Perturbation

MODELS = {"cp": cp, "tucker": tucker}


def low_rank(model, seed=0, shape=(20, 20, 20), rank=3, missing=0.5, sigma=0.0):
    """Exact rank-``rank`` truth, its generating parameters θ, and the observations (``missing`` share NaN)."""
    rng = np.random.default_rng(seed)
    if model == "cp":
        theta = [rng.standard_normal((n, rank)) for n in shape]
        X = np.einsum("ir,jr,kr->ijk", *theta)
    else:
        theta = [np.linalg.qr(rng.standard_normal((n, rank)))[0] for n in shape]
        theta.append(rng.standard_normal((rank,) * 3))
        X = np.einsum("pqt,ip,jq,kt->ijk", theta[3], *theta[:3])
    Y = X + sigma * rng.standard_normal(shape)
    Y.ravel()[rng.permutation(Y.size)[: int(missing * Y.size)]] = np.nan
    return X, theta, from_dense(Y)


@pytest.mark.parametrize("model", ["cp", "tucker"])
@pytest.mark.parametrize("chunk", [1, 7, 10 ** 9])
def test_normal_equations_equal_a_per_entry_sum(model, chunk):
    """Segment sums in chunks (any size, rows never split) == Σ z zᵀ and Σ x z accumulated entry by entry."""
    _, _, obs = low_rank(model, shape=(6, 5, 4), rank=2, missing=0.4)
    factors = MODELS[model].init_factors(obs.shape, 2, 1.0, np.random.default_rng(1))
    for mode in range(3):
        gram, rhs = als.normal_equations(model, factors, obs.idx, obs.values, mode, chunk=chunk)
        want_g, want_r = np.zeros_like(gram), np.zeros_like(rhs)
        for e in range(obs.n):
            one = Observations(obs.shape, obs.idx[e:e + 1], obs.values[e:e + 1])
            z = als.design(model, factors, one.idx, mode)[0]
            # z is ∂x̂/∂(row of the mode): check it against the model's own partial derivatives
            np.testing.assert_allclose(z, MODELS[model].partials(factors, *one.idx.T)[1][mode][0], atol=1e-12)
            want_g[obs.idx[e, mode]] += np.outer(z, z)
            want_r[obs.idx[e, mode]] += obs.values[e] * z
        np.testing.assert_allclose(gram, want_g, atol=1e-12)
        np.testing.assert_allclose(rhs, want_r, atol=1e-12)


@pytest.mark.parametrize("model", ["cp", "tucker"])
@pytest.mark.parametrize("rank, chunk", [(2, 3), (3, 10 ** 9)])
def test_dense_statistics_equal_the_entry_sums(model, rank, chunk):
    """DenseStats (the mask's products) gives every sum EntryStats gives (entry by entry), for blocks of any size.

    Both add the same products in another order: each sum has at most 6·5·4 = 120 terms of size ≤ 10, so the
    rounding is below 120·u·10² ≈ 3e-12 absolute; we allow 1e-11."""
    _, _, obs = low_rank(model, shape=(6, 5, 4), rank=rank, missing=0.4, sigma=0.1)
    rng = np.random.default_rng(1)
    factors = MODELS[model].init_factors(obs.shape, rank, 1.0, rng)
    entries = als.EntryStats(model, obs.idx, obs.values, chunk=7)
    dense = als.DenseStats(model, obs.idx, obs.values, obs.shape, chunk=chunk)
    for mode in range(3):
        for a, b in zip(dense.normal_equations(factors, mode), entries.normal_equations(factors, mode)):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-11)
    assert dense.data_term(factors) == pytest.approx(entries.data_term(factors), rel=1e-12)
    assert dense.sum_squares() == pytest.approx(entries.sum_squares(), rel=1e-14)
    if model == "tucker":
        V = rng.standard_normal((rank,) * 3)
        np.testing.assert_allclose(dense.core_rhs(factors), entries.core_rhs(factors), rtol=0, atol=1e-11)
        np.testing.assert_allclose(dense.core_apply(factors, V), entries.core_apply(factors, V), rtol=0, atol=1e-11)
        for a, b in zip(dense.core_normal_equations(factors), entries.core_normal_equations(factors)):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-11)


@pytest.mark.parametrize("model", ["cp", "tucker"])
def test_dense_and_entry_layouts_fit_the_same_model(model):
    """run_als with either layout makes the same sweeps: the objectives agree to rounding (1e-10 relative, as
    the sharded fit's, whose sums are likewise reordered) and so do the factors (ALS is a contraction near its
    optimum, so the rounding does not grow: 1e-8). The default picks the dense layout for this tensor
    (4,000 of 8,000 cells observed) and the entry layout for a sparse one."""
    _, _, obs = low_rank(model, sigma=0.05)
    cfg = als.ALSConfig(lam=0.05, lam_core=0.01, tol=1e-9)
    fits = {dense: als.run_als(model, obs, 3, als.ALSConfig(**{**cfg.__dict__, "dense": dense}),
                               np.random.default_rng(0)) for dense in (True, False)}
    (fd, td), (fe, te) = fits[True], fits[False]
    assert td.converged and td.epochs_run == te.epochs_run
    np.testing.assert_allclose(td.objective, te.objective, rtol=1e-10)
    for a, b in zip(fd, fe):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
    assert isinstance(als.entry_stats(model, obs, 3), als.DenseStats)
    sparse = obs.subset(np.arange(0, obs.n, 200))                     # 20 of 8,000 cells: 0.25%
    assert isinstance(als.entry_stats(model, sparse, 3), als.EntryStats)
    assert not als.dense_enough((als.DENSE_MAX_CELLS + 1, 1, 1), als.DENSE_MAX_CELLS + 1, 3, model)
    with pytest.raises(ValueError, match="dense must be"):
        als.ALSConfig(dense="yes")


@pytest.mark.parametrize("model", ["cp", "tucker"])
def test_each_block_update_is_the_exact_minimiser(model):
    """After solving a block, ∂f/∂block = 0 (eq. 6/7 gradient, computed independently by sgd.full_gradient).

    The ridge system is solved to machine precision, so the gradient is rounding-sized: we allow 1e-9 times
    the gradient's size before the update.
    """
    _, _, obs = low_rank(model, shape=(8, 7, 6), rank=2, missing=0.3, sigma=0.1)
    m = MODELS[model]
    lam, lam_core = 0.05, 0.02
    factors = list(m.init_factors(obs.shape, 2, 1.0, np.random.default_rng(2)))
    for mode in range(3):
        before = np.abs(full_gradient(m, factors, obs, lam, lam_core)[mode]).max()
        gram, rhs = als.normal_equations(model, factors, obs.idx, obs.values, mode)
        factors[mode] = als.solve_rows(gram, rhs, lam)
        after = np.abs(full_gradient(m, factors, obs, lam, lam_core)[mode]).max()
        assert after <= 1e-9 * before, (mode, before, after)
    if model == "tucker":
        gram, rhs = als.core_normal_equations(factors, obs.idx, obs.values)
        factors[3] = als.solve_core(gram, rhs, lam_core, 2)
        assert np.abs(full_gradient(m, factors, obs, lam, lam_core)[3]).max() <= 1e-9


@pytest.mark.parametrize("model", ["cp", "tucker"])
def test_rebalance_keeps_the_model_and_lowers_the_penalty(model):
    m = MODELS[model]
    factors = list(m.init_factors((5, 6, 7), 3, 1.0, np.random.default_rng(3)))
    factors[0] = factors[0] * 10.0                      # unbalanced on purpose
    lam, lam_core = 0.1, 0.01
    before_t, before_f = m.full_tensor(factors), m.objective(factors, np.zeros((0, 3), int), np.zeros(0), lam,
                                                             lam_core)
    als.rebalance(model, factors, lam, lam_core)
    np.testing.assert_allclose(m.full_tensor(factors), before_t, rtol=1e-10, atol=1e-12)
    assert m.objective(factors, np.zeros((0, 3), int), np.zeros(0), lam, lam_core) < before_f


@pytest.mark.parametrize("model", ["cp", "tucker"])
def test_objective_decreases_monotonically(model):
    """Every block update minimises f exactly over its block, and the rebalancing lowers only the penalty, so
    f(sweep t+1) ≤ f(sweep t) up to rounding. Rounding: f sums n ≈ 3200 squared residuals, relative error
    ≤ n·u ≈ 4e-13 (u = 1.1e-16), so 1e-12 relative is a bound, not a tuned margin."""
    _, _, obs = low_rank(model, sigma=0.1)
    res = complete(obs, 3, model=model, seed=0, solver=CompletionSolver(tol=0.0, epochs=60))
    f = np.array(res.trace.objective)
    assert res.config["solver"] == "als" and len(f) == 61
    assert np.all(f[1:] <= f[:-1] * (1 + 1e-12)), np.max(f[1:] / f[:-1])
    assert f[-1] < f[0]


def test_extrapolation_is_kept_only_where_it_lowers_the_objective():
    """The step X + β(X − X_prev) replaces X only if the objective falls; β grows after a kept step and
    shrinks after a refused one (here on the quadratic f(X) = ‖X − T‖²: along the line from X_prev
    through X the minimum is at T)."""
    T = np.ones((2, 2))

    def f(blocks):
        return float(np.sum((blocks[0] - T) ** 2))

    prev, cur = [np.zeros((2, 2))], [np.full((2, 2), 0.5)]           # T lies one step further on
    out, f_out, beta = als.extrapolate(cur, prev, f(cur), 0.5, f)
    assert f_out == f(out) < f(cur) and np.allclose(out[0], 0.75) and beta == 0.5 * als.STEP_GROW
    out, f_out, beta = als.extrapolate(cur, prev, f(cur), 4.0, f)   # overshoots to 2.5: refused
    assert out is cur and f_out == f(cur) and beta == 4.0 / als.STEP_SHRINK


@pytest.mark.parametrize("model", ["cp", "tucker"])
def test_reaches_the_least_squares_optimum_on_a_noiseless_low_rank_tensor(model):
    """Noiseless exact rank-3 20×20×20, 50% missing, 80/20 split, offset 0.

    Bounds (derived):
    - The truth's parameters θ* are feasible, so the optimum f_opt ≤ f(θ*) = λ‖θ*‖² (its data term is 0);
      ALS must end at or below it (a local minimum above it would fail).
    - Then the training residual² ≤ f(θ*), i.e. train RMSE ≤ √(f(θ*)/n).
    - The held-out error is the ridge bias, first order in λ (the noiseless completion is unique: 4000
      observed entries ≫ the R(n1+n2+n3) parameters): dividing λ by 10⁴ must divide it by ≈ 10⁴; we require
      100, a margin of 100 over the first-order ratio for second-order terms and the stopping tolerance.
    """
    X, theta, obs = low_rank(model)
    train, test = split_holdout(obs, 0.2, np.random.default_rng(1))      # complete()'s split with seed 1
    m = MODELS[model]
    held = []
    for lam in (1e-4, 1e-8):
        lams = dict(lam=lam, lam_core=lam) if model == "tucker" else dict(lam=lam)
        res = complete(obs, 3, model=model, offset=0.0, seed=1,
                       solver=CompletionSolver(tol=1e-12, epochs=3000, **lams))
        f_true = m.objective(theta, train.idx, train.values, lam, lams.get("lam_core", 0.0))
        assert res.trace.converged
        assert res.trace.objective[-1] <= f_true * (1 + 1e-9)
        assert res.train_rmse <= math.sqrt(f_true / train.n)
        held.append(float(np.sqrt(np.mean((res.predict(*test.idx.T) - X[tuple(test.idx.T)]) ** 2))))
    assert held[1] <= 1e-2 * held[0], held


@pytest.mark.parametrize("model", ["cp", "tucker"])
def test_default_fit_converges_to_the_noise_floor(model):
    """The issue's tensor: 30×25×20, rank 3, values scaled to [−1, 1], N(0, 0.01²) noise, 60% missing; only the
    rank is given. The fit must report converged and reach the noise floor: the held-out RMSE against the noisy
    values is √(σ² + e²) where e is the estimation error ≈ σ√(p/N) (p ≈ R(n1+n2+n3) = 225 (+27) parameters,
    N = 4800 training entries: e ≈ 0.0022–0.0023), so ≈ 0.01025; we allow 0.0115 (the RMSE of 1500 held-out
    noisy values itself fluctuates by σ/√(2·1500) ≈ 2e-4, plus the λ bias)."""
    rng = np.random.default_rng(0)
    shape = (30, 25, 20)
    X = np.einsum("ir,jr,kr->ijk", *[rng.standard_normal((n, 3)) for n in shape])
    X = X / np.abs(X).max()
    Y = X + 0.01 * rng.standard_normal(shape)
    Y[rng.random(shape) < 0.6] = np.nan
    res = complete(Y, 3, model=model, seed=0)
    assert res.config["solver"] == "als" and res.trace.converged and res.trace.epochs_run < 100
    assert res.test_rmse < 0.0115


def test_solver_choice_and_errors_name_the_setting():
    _, _, obs = low_rank("cp", shape=(6, 6, 6), missing=0.3)
    assert complete(obs, 2, seed=0).config["solver"] == "als"
    assert complete(obs, 2, seed=0, solver=CompletionSolver(lr=0.01, epochs=2)).config["solver"] == "sgd"        # an SGD setting: SGD
    assert complete(obs, 2, seed=0, solver=CompletionSolver(method="sgd", epochs=2)).config["solver"] == "sgd"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # ε = 1 on 150 entries may be worse than the baselines
        r = complete(obs, 2, bounds=(-5, 5), seed=0, perturbation=Perturbation(kind="input", epsilon=1.0))
    assert r.config["solver"] == "als" and "als" in r.timings
    with pytest.raises(ValueError, match="lr is an SGD setting"):
        complete(obs, 2, solver=CompletionSolver(method="als", lr=0.1))
    with pytest.raises(ValueError, match="solver als cannot run perturbation gradient"):
        complete(obs, 2, bounds=(-5, 5), perturbation=Perturbation(kind="gradient", epsilon=1.0),
                 solver=CompletionSolver(method="als"))
    with pytest.raises(ValueError, match="solver must be one of"):
        complete(obs, 2, solver=CompletionSolver(method="newton"))


# ----------------------------------------------------------------------------- sharded (Ray) ALS


@pytest.mark.parametrize("model", ["cp", "tucker"])
def test_sharded_fit_equals_the_in_process_fit(model, ray_session, tmp_path):
    """Entries in 3 shards (in memory) or read by the actors from a parquet directory: same init (seed), same
    updates; only the order of the partial sums differs (rounding, ≈ 1e-15 relative per sum). ALS is a
    contraction near its optimum, so those differences do not grow: factors agree to 1e-8 relative."""
    from distdp.completion.io import write_coo_parquet
    from distdp.distributed.completion import sharded_complete

    _, _, obs = low_rank(model, shape=(12, 10, 8), sigma=0.05)
    lam = CompletionSolver(lam=0.05, lam_core=0.005 if model == "tucker" else None)   # given: no λ path
    local = complete(obs, 3, model=model, holdout=0.0, seed=4, solver=lam)
    part = np.array_split(np.arange(obs.n), 3)
    d = tmp_path / "coo"
    d.mkdir()
    for n, rows in enumerate(part):
        write_coo_parquet(obs.subset(rows), d / f"part-{n}.parquet")
    for source in (obs, d):
        sharded = sharded_complete(source, 3, model=model, holdout=0.0, seed=4, n_shards=3, cpus_per_shard=0.5,
                                   start_timeout=120, lam=lam.lam, lam_core=lam.lam_core)
        assert sharded.config["n_shards"] == 3 and sharded.offset == pytest.approx(local.offset, rel=1e-12)
        assert sharded.trace.epochs_run == local.trace.epochs_run and sharded.trace.converged
        for a, b in zip(sharded.factors, local.factors):
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(sharded.trace.objective, local.trace.objective, rtol=1e-10)
        assert sharded.train_rmse == pytest.approx(local.train_rmse, rel=1e-8)
    held = sharded_complete(obs, 3, model=model, holdout=0.2, seed=4, n_shards=2, cpus_per_shard=0.5)   # per-shard hold-out
    assert held.n_test == sum(round(0.2 * len(p)) for p in np.array_split(np.arange(obs.n), 2))
    assert held.test_rmse < held.baselines["offset"]["test_rmse"]


@pytest.mark.parametrize("model", ["cp", "tucker"])
def test_default_fit_is_scale_equivariant(model):
    """Values × s → fit × s: the default λ path's start ∝ σ^(4/3) (CP) / σ^(3/2) (Tucker) scales exactly like the
    penalty at the optimal gauge (see api.ALS_LAMBDA_SCALE). The initialisation (a fixed scale) is not equivariant, so the two
    runs take different paths to the same optimum; with tol 1e-12 both end within rounding of it: we allow 1e-6
    relative on the predictions (the fits' own stopping error is far smaller, measured ≈ 1e-9)."""
    rng = np.random.default_rng(5)
    shape = (15, 12, 10)
    X = np.einsum("ir,jr,kr->ijk", *[rng.standard_normal((n, 2)) for n in shape])
    Y = X + 0.05 * rng.standard_normal(shape)
    Y[rng.random(shape) < 0.5] = np.nan
    a = complete(Y, 2, model=model, seed=0, solver=CompletionSolver(tol=1e-12, epochs=3000))
    b = complete(1000.0 * Y, 2, model=model, seed=0, solver=CompletionSolver(tol=1e-12, epochs=3000))
    # the λ path scales too: its held-out RMSEs scale by s, so the relative rule takes the same steps
    assert [s["step"] for s in b.config["lam_path"]["steps"]] == [s["step"] for s in a.config["lam_path"]["steps"]]
    assert b.config["lam"] == pytest.approx(a.config["lam"] * 1000.0 ** (4 / 3 if model == "cp" else 1.5))
    np.testing.assert_allclose(b.full_tensor(), 1000.0 * a.full_tensor(), rtol=1e-6, atol=1e-6 * 1000 * np.abs(X).max())


# ----------------------------------------------------------------------------- λ chosen by validation


def test_lambda_search_settings_are_checked():
    for bad in ({"fraction": 0.0}, {"fraction": 1.0}, {"factor": 1.0}, {"max_steps": 0}, {"min_gain": 1.0},
                {"sweeps": 0}, {"tol": -1.0}, {"min_entries": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            als.LambdaSearch(**bad)


@pytest.mark.parametrize("model", ["cp", "tucker"])
def test_lambda_path_goes_up_on_pure_noise(model):
    """Values that are iid N(0, 1) noise: every pattern a rank-3 model fits is noise, so the held-out RMSE is
    smallest for the all-zero model, which λ → ∞ approaches; a larger λ shrinks the fit towards it. The path
    must move up from its start (step > 0) and predict the held-out values no worse than the all-zero model
    up to the fluctuation of a finite hold-out (we allow 2%: the RMSE over ~450 values has relative standard
    error 1/√(2·450) ≈ 3%, and the chosen fit is near zero)."""
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((15, 12, 10))
    Y[rng.random(Y.shape) < 0.5] = np.nan
    obs = from_dense(Y)
    train, val = split_holdout(obs, 0.5, np.random.default_rng(1))
    cfg = als.ALSConfig(lam=0.5, lam_core=0.05 if model == "tucker" else 0.0, init_scale=1.0)
    path = als.choose_lambda(model, train, 3, cfg, np.random.default_rng(2))
    steps = [s["step"] for s in path.steps]
    assert steps[:3] == [0, 1, -1] and path.lam > cfg.lam
    best = min(path.steps, key=lambda s: s["validation_rmse"])                   # the first of equals
    assert path.lam == pytest.approx(cfg.lam * 4.0 ** best["step"])
    assert path.n_fit + path.n_validation == train.n and path.n_validation == round(0.1 * train.n)
    pred = MODELS[model].predict(path.start, *val.idx.T)
    assert np.sqrt(np.mean((pred - val.values) ** 2)) < 1.02 * np.sqrt(np.mean(val.values ** 2))


@pytest.mark.parametrize("model", ["cp", "tucker"])
def test_lambda_path_goes_down_on_noiseless_low_rank_data(model):
    """An exact rank-3 tensor, half observed: the ridge only biases the fit (the least-squares optimum
    interpolates the truth), so a smaller λ predicts held-out entries better and the path moves down
    (step < 0) from complete()'s default start c·σ^p."""
    from distdp.completion.api import ALS_LAMBDA_SCALE

    _, _, obs = low_rank(model, shape=(12, 10, 8))
    c, p = ALS_LAMBDA_SCALE[model]
    sigma = float(np.std(obs.values))
    cfg = als.ALSConfig(lam=c * sigma ** p, lam_core=c * sigma ** p / 10 if model == "tucker" else 0.0,
                        init_scale=sigma)
    path = als.choose_lambda(model, obs, 3, cfg, np.random.default_rng(0))
    assert path.lam < cfg.lam and path.lam_core == pytest.approx(path.lam * cfg.lam_core / cfg.lam)
    rmse = {s["step"]: s["validation_rmse"] for s in path.steps}
    assert rmse[-1] < rmse[0] < rmse[1]


@pytest.mark.parametrize("confirmed", [False, True])
def test_a_lambda_away_from_the_start_is_chosen_only_once_its_converged_fit_confirms_it(confirmed):
    """The path's fits stop early (they only rank the λ); the winner, when it is not the start, is fitted again
    with the fit's own tolerance and sweeps from its path fit and scored again, and chosen only if it still beats
    the start by ``min_gain``. The held-out RMSE is scripted (in the order the path asks for it) so that the
    step −1 wins the path; its confirmation scores 1.05 (worse than the start's 1.0: the start is kept) or 0.8
    (chosen, and the final fit starts from the confirmed fit)."""
    _, _, obs = low_rank("cp", shape=(8, 7, 6), missing=0.3)
    stats = als.entry_stats("cp", obs, 2)
    start = cp.init_factors(obs.shape, 2, 1.0, np.random.default_rng(0))
    scripted = iter([1.0, 1.2, 0.9, 0.95, 0.8 if confirmed else 1.05])
    fitted = []

    def validation_rmse(factors):
        fitted.append(factors)
        return next(scripted)

    cfg = als.ALSConfig(lam=0.1, tol=0.0, max_sweeps=7)
    search = als.LambdaSearch(sweeps=2, tol=0.0)
    lam, _, steps, factors = als.lambda_path("cp", 2, cfg, stats, validation_rmse, start, obs.shape, search)
    assert [s["step"] for s in steps] == [0, 1, -1, -2, -1]
    assert [s["sweeps"] for s in steps] == [2, 2, 2, 2, 7]                 # the confirmation runs as the final fit
    assert "confirm" not in steps[2] and steps[-1]["confirm"] is True
    assert steps[-1]["validation_rmse"] == (0.8 if confirmed else 1.05)
    assert lam == pytest.approx(0.1 / 4.0 if confirmed else 0.1)
    assert factors is (fitted[-1] if confirmed else fitted[0])


def test_too_few_entries_skip_the_search():
    _, _, obs = low_rank("cp", shape=(6, 5, 4), missing=0.5)          # 60 entries: 6 would be held out
    cfg = als.ALSConfig(lam=0.3)
    path = als.choose_lambda("cp", obs, 2, cfg, np.random.default_rng(0))
    assert path.steps == () and path.lam == 0.3 and path.start is None and path.n_validation == 0
    res = complete(obs, 2, seed=0, holdout=0.0)
    assert res.config["lam_path"] is None and not res.config["lam_source"].startswith("validated")


@pytest.mark.parametrize("model", ["cp", "tucker"])
def test_default_fit_reports_its_lambda_path_and_a_given_lambda_skips_it(model):
    _, _, obs = low_rank(model, shape=(12, 10, 8), sigma=0.1)
    res = complete(obs, 3, model=model, seed=3)
    path = res.config["lam_path"]
    assert res.config["lam_source"].startswith("validated") and res.config["lam"] == path["lam"]
    assert res.config["lam_core"] == path["lam_core"]
    assert [s["step"] for s in path["steps"]][:3] == [0, 1, -1]
    start = path["steps"][0]["lam"]
    for s in path["steps"]:
        assert s["lam"] == pytest.approx(start * 4.0 ** s["step"]) and s["sweeps"] <= 100
    assert path["n_fit"] + path["n_validation"] == res.n_train
    json.dumps(res.report())                                                     # plain JSON values
    again = complete(obs, 3, model=model, seed=3)                                # seeded: the same fit
    np.testing.assert_array_equal(again.full_tensor(), res.full_tensor())
    given = complete(obs, 3, model=model, seed=3, solver=CompletionSolver(lam=start, lam_core=path["steps"][0][
        "lam_core"] if model == "tucker" else None))
    assert given.config["lam_path"] is None and given.config["lam_source"] == "given"


@pytest.mark.parametrize("model", ["cp", "tucker"])
def test_sharded_default_fit_chooses_lambda_on_its_shards(model, ray_session):
    """The Ray path searches λ like complete(): a share of every shard's training entries held out, the same
    path rule; then the fit on every training entry from the chosen λ's path fit."""
    from distdp.distributed.completion import sharded_complete

    _, _, obs = low_rank(model, shape=(12, 10, 8), sigma=0.1)
    res = sharded_complete(obs, 3, model=model, holdout=0.2, seed=4, n_shards=2, cpus_per_shard=0.5)
    path = res.config["lam_path"]
    assert res.config["lam_source"].startswith("validated") and res.config["lam"] == path["lam"]
    assert [s["step"] for s in path["steps"]][:3] == [0, 1, -1]
    assert path["n_fit"] + path["n_validation"] == res.n_train and res.trace.converged
    assert res.test_rmse < res.baselines["offset"]["test_rmse"]
