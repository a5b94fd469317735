"""Completion's privacy (distdp.completion.perturbation): input/output perturbation, DP-SGD calibration and accounting,
and reports that carry nothing from raw values outside their not-covered fields."""

import math

import numpy as np
import pytest
from scipy import stats

from distdp.completion import DivergenceWarning, NotPrivateWarning, complete, from_dense
from distdp.completion import perturbation as pt
from distdp.privacy import accounting
from distdp.privacy.neighbours import CHANGE_ONE_ENTRY
from distdp.completion import CompletionSolver, Perturbation


def small_obs(seed=0, shape=(5, 6, 7), frac=0.6):
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal(shape)
    Y[rng.random(shape) > frac] = np.nan
    return from_dense(Y)


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


def test_output_perturbation_adds_l2_noise_to_C_only():
    """Same seed and reproducible noise: the output fit is the non-private fit plus C-row noise of scale 2τLη/ε."""
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((3, 3, 800))
    obs = from_dense(Y)
    kw = dict(solver=CompletionSolver(epochs=2, lr=0.01), holdout=0.0, seed=3, offset=0.0,
              bounds=(-6.0, 6.0))                                                         # same offset and range
    base = complete(obs, 3, **kw)
    eps, L = 0.5, 2.0
    out = complete(obs, 3, **kw,
                   perturbation=Perturbation(kind="output", epsilon=eps, lipschitz=L, reproducible=True))
    np.testing.assert_array_equal(out.A, base.A)
    np.testing.assert_array_equal(out.B, base.B)
    noise = out.C - base.C
    scale = 2 * 2 * L * 0.01 / eps                        # Δ/ε with Δ = 2τLη, τ = 2 passes
    assert stats.kstest(np.linalg.norm(noise, axis=1), stats.gamma(3, scale=scale).cdf).pvalue > 1e-3
    assert out.privacy.private is False and "non-convex" in " ".join(out.privacy.not_private_because)





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
    assert rep.details["noise"]["epsilon_exact"] == pytest.approx(eps, rel=1e-3)
    assert rep.details["noise"]["epsilon_rdp"] > rep.epsilon          # RDP is looser than PLD for Gaussians
    ev = rep.to_dict()["ledger"][0]["dp_event"]
    assert rep.ledger.releases[0].neighbour == str(CHANGE_ONE_ENTRY) and rep.neighbour is CHANGE_ONE_ENTRY
    assert ev.get("count", 1) == epochs and ev.get("event", ev)["noise_multiplier"] == sigma


def test_gradient_fit_reports_guarantee_and_paper_variants_do_not():
    obs = small_obs(shape=(8, 8, 8), frac=0.8)
    g = complete(obs, 2, bounds=(-3.0, 3.0), perturbation=Perturbation(kind="gradient", epsilon=2.0, delta=1e-6),
                 solver=CompletionSolver(epochs=5, batch_size=100))
    assert g.privacy.private and g.privacy.epsilon == pytest.approx(2.0, rel=1e-3) and g.privacy.delta == 1e-6
    assert accounting.epsilon(accounting.gaussian_event(g.privacy.details["noise"]["noise_multiplier"], 5), 1e-6) <= 2.0 + 1e-6
    p = complete(obs, 2, bounds=(-3.0, 3.0), perturbation=Perturbation(kind="gradient-paper", epsilon=2.0),
                 solver=CompletionSolver(epochs=2))
    assert not p.privacy.private and p.privacy.epsilon is None
    assert any("A, B and G" in r for r in p.privacy.not_private_because)
    assert any("composition" in r for r in p.privacy.not_private_because)


def test_private_noise_ignores_seed_unless_reproducible():
    obs = small_obs()
    kw = dict(bounds=(-3.0, 3.0), solver=CompletionSolver(epochs=2), seed=1)
    fresh, seeded = Perturbation("input", epsilon=1.0), Perturbation("input", epsilon=1.0, reproducible=True)
    a, b = complete(obs, 2, perturbation=fresh, **kw), complete(obs, 2, perturbation=fresh, **kw)
    assert not np.array_equal(a.A, b.A) and a.privacy.private
    c, d = complete(obs, 2, perturbation=seeded, **kw), complete(obs, 2, perturbation=seeded, **kw)
    np.testing.assert_array_equal(c.A, d.A)
    assert not c.privacy.private and c.privacy.epsilon is None
    assert any("seeded" in r for r in c.privacy.not_private_because)


def test_input_bounds_from_data_warn_and_are_not_private():
    obs = small_obs()
    with pytest.raises(ValueError, match="declared public value bounds"):
        complete(obs, 2, perturbation=Perturbation(kind="input", epsilon=1.0))
    with pytest.warns(NotPrivateWarning, match="NOT PRIVATE"):
        res = complete(obs, 2, perturbation=Perturbation(kind="input", epsilon=1.0, allow_data_bounds=True),
                       solver=CompletionSolver(epochs=1))
    assert not res.privacy.private and "computed from the private data" in res.privacy.not_private_because[0]


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
    kw = dict(perturbation=Perturbation("input", epsilon=1.0, reproducible=True), bounds=(0.0, 1.0), holdout=0.0,
              solver=CompletionSolver(epochs=3), seed=5)
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
    kw = dict(perturbation=Perturbation("gradient", epsilon=1.0, delta=1e-6, clip=0.1, reproducible=True),
              bounds=(0.0, 1.0), holdout=0.0, solver=CompletionSolver(epochs=3, batch_size=16), seed=5)
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
        res = complete(a, 2, holdout=0.0, max_row_norm=math.inf, bounds=(-100.0, 100.0), seed=0,
                       perturbation=Perturbation(kind="gradient", epsilon=0.5, delta=1e-6, clip=1.0, reproducible=True),
                       solver=CompletionSolver(epochs=3, lr=0.5, batch_size=500))
    assert res.trace.diverged
    msg = str(next(w.message for w in rec if issubclass(w.category, DivergenceWarning)))
    assert "not covered by the guarantee" in msg and "(objective" not in msg and " vs " not in msg
