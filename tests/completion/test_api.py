"""``distdp.completion.complete``: recovery near the noise floor, stopping, determinism, the default offset,
rank checks, prediction."""

import math

import numpy as np
import pytest

from distdp.completion import DivergenceWarning, complete, from_dense, split_holdout
from distdp.completion.synthetic import make_problem
from distdp.completion import CompletionSolver, Perturbation


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
    res = complete(obs, 3, model=model, seed=1, offset=0.0,
                   solver=CompletionSolver(lr=0.005, epochs=100, batch_size=64))
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
    res = complete(obs, 3, seed=0, solver=CompletionSolver(lr=0.005, epochs=100, tol=1e-3))
    assert res.trace.converged and res.trace.epochs_run < 100
    assert len(res.trace.objective) == res.trace.epochs_run + 1


def test_fixed_seed_is_deterministic_without_noise():
    obs = small_obs()
    a = complete(obs, 2, model="tucker", seed=7, solver=CompletionSolver(epochs=3))
    b = complete(obs, 2, model="tucker", seed=7, solver=CompletionSolver(epochs=3))
    for x, y in zip(a.factors, b.factors):
        np.testing.assert_array_equal(x, y)


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
    kw = dict(model=model, perturbation=Perturbation("gradient", epsilon=0.1, delta=1e-5, clip=0.05, reproducible=True),
              solver=CompletionSolver(lr=0.05, epochs=20, batch_size=10 ** 9,
                                      **({"lam": 0.01} if model == "cp" else {"lam": 0.001, "lam_core": 0.0001})),
              offset=0.5, seed=seed)

    def rmse(res):
        return float(np.sqrt(np.mean((res.predict(*test.idx.T) - truth) ** 2)))

    rmse_offset = float(np.sqrt(np.mean((0.5 - truth) ** 2)))
    B = 0.5
    res = complete(prob.observed, 3, bounds=(0.0, 1.0), **kw)
    assert rmse(res) <= rmse_offset + B
    assert not res.trace.diverged and res.report()["convergence"]["diverged_pass"] is None
    with pytest.warns(DivergenceWarning, match="blew up"):
        raw = complete(prob.observed, 3, bounds=(0.0, 1.0), max_row_norm=math.inf, **kw)
    # without projection the model blows up; its predictions are clamped to the declared range (post-processing)
    assert raw.trace.diverged and rmse(raw) <= 1.0
    zero_objective = float(np.sum((train.values - 0.5) ** 2))      # withheld from a gradient fit's result
    assert raw.trace.zero_objective is None and "zero_objective" not in raw.report()["convergence"]
    assert raw.trace.objective[raw.trace.diverged_pass] > 100 * zero_objective
    assert any(c.startswith("convergence.diverged_pass:") for c in raw.privacy.not_covered)


def test_default_offset_is_public_and_fits_ratings(ratings):
    obs = ratings
    res = complete(obs, 3, seed=0)                                        # defaults: non-private, no bounds
    train, _ = split_holdout(obs, 0.2, np.random.default_rng(0))
    assert res.offset == pytest.approx(train.values.mean()) and "mean" in res.config["offset_source"]
    assert res.test_rmse < 0.1 and not res.trace.diverged                # values span 1–5
    assert complete(obs, 3, seed=0, bounds=(1, 5), solver=CompletionSolver(epochs=1)).offset == 3.0
    assert complete(obs, 3, seed=0, offset=2.5, bounds=(1, 5), solver=CompletionSolver(epochs=1)).offset == 2.5
    for pert in (Perturbation("gradient", epsilon=1.0, delta=1e-6), Perturbation("output", epsilon=1.0)):
        with pytest.raises(ValueError, match="needs a public range"):     # private modes never look at the data:
            complete(obs, 3, seed=0, perturbation=pert, solver=CompletionSolver(epochs=1))   # no range: refused
    r = complete(obs, 3, bounds=(1, 5), seed=0, perturbation=Perturbation(kind="gradient", epsilon=1.0, delta=1e-6),
                 solver=CompletionSolver(epochs=1))
    assert r.offset == 3.0 and r.privacy.private


def test_nonfinite_sgd_is_a_value_error_with_advice(ratings):
    obs = ratings
    with pytest.raises(ValueError, match=r"SGD diverged: .*non-finite in pass \d+ .*Lower lr \(e\.g\. 0\.05\)"
                                         r".*offset") as err:
        complete(obs, 3, seed=0, offset=0.0, solver=CompletionSolver(lr=0.5))
    assert isinstance(err.value, FloatingPointError)      # still what callers catching FloatingPointError see


def test_tucker_rank_above_a_dimension_is_refused_and_cp_warns():
    obs = small_obs(shape=(5, 6, 7))
    with pytest.raises(ValueError, match=r"rank 6 exceeds the tensor's size 5 in mode 1 .* rank ≤ 5"):
        complete(obs, 6, model="tucker")
    complete(obs, 5, model="tucker", solver=CompletionSolver(epochs=1))
    with pytest.warns(UserWarning, match=r"rank 31 exceeds the largest CP rank .* = 30"):
        complete(obs, 31, solver=CompletionSolver(epochs=1))


@pytest.mark.parametrize("model", ["cp", "tucker"])
def test_predict_accepts_scalars_and_rejects_bad_indices(model):
    obs = small_obs(shape=(5, 6, 7))
    res = complete(obs, 2, model=model, seed=0, solver=CompletionSolver(epochs=2))
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
