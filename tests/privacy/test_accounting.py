"""Accounting against closed forms, and the numbers that the noise recipe of Wang & Anandkumar 2016
(Algorithm 3, line 2; composition in the proof of Thm 4.1) gives."""
import math

import pytest
from dp_accounting import dp_event as dpe

from distdp.privacy import accounting as A
from distdp.privacy import mechanisms as M


def test_paper_recipe_at_k_1000_gives_sigma_895_and_pld_needs_133_6():
    """K = 1000, ε = 1, δ = 1e-6: σ = 895 per unit sensitivity, PLD ε ≈ 0.13; PLD needs σ = 133.6."""
    r = A.paper_dp_tpm_recipe(1.0, 1e-6, 1000)
    assert r.delta_prime == pytest.approx(1e-6 / 2000)
    assert r.epsilon_prime == pytest.approx(1 / math.sqrt(1000 * (4 + math.log(2e6))))
    assert r.noise_multiplier == pytest.approx(895.0, abs=0.5)
    assert A.epsilon_pld(A.gaussian_event(r.noise_multiplier, 1000), 1e-6) == pytest.approx(0.13, abs=0.005)
    assert A.calibrate_gaussian_multiplier(1.0, 1e-6, 1000) == pytest.approx(133.6, abs=0.05)


@pytest.mark.parametrize("K", [100, 1000, 10_000])
def test_paper_composition_step_gives_about_1_31_not_1(K):
    assert A.paper_dp_tpm_recipe(1.0, 1e-6, K).advanced_composition_epsilon == pytest.approx(1.31, abs=0.01)


def test_advanced_and_basic_composition_closed_forms():
    eps, delta = A.advanced_composition(0.01, 1e-9, 500, 1e-6)
    assert eps == pytest.approx(math.sqrt(2 * 500 * math.log(1e6)) * 0.01 + 500 * 0.01 * math.expm1(0.01))
    assert delta == pytest.approx(500 * 1e-9 + 1e-6)
    assert A.basic_composition(0.2, 1e-7, 10) == pytest.approx((2.0, 1e-6))


@pytest.mark.parametrize("m,K,delta", [(5.0, 1, 1e-5), (40.0, 100, 1e-6), (300.0, 5000, 1e-8)])
def test_pld_of_composed_gaussians_matches_the_exact_gaussian_closed_form(m, K, delta):
    """K Gaussians with multiplier m = one Gaussian with m/√K (Balle–Wang ε(δ)); PLD is an upper bound."""
    exact = A.gaussian_composition_epsilon(m, K, delta)
    pld = A.epsilon_pld(A.gaussian_event(m, K), delta)
    assert exact <= pld + 1e-9 and pld == pytest.approx(exact, rel=1e-3)
    assert A.epsilon_rdp(A.gaussian_event(m, K), delta) >= exact
    assert M.gaussian_epsilon(m / math.sqrt(K), delta) == pytest.approx(exact)


def test_pure_dp_events_compose_at_most_basically_and_single_events_are_exact():
    assert A.epsilon_pld(A.pure_dp_event(0.7), 1e-12) == pytest.approx(0.7, abs=1e-3)
    assert A.epsilon_pld(A.laplace_event(2.0), 1e-12) == pytest.approx(0.5, abs=1e-3)  # ε = 1/m
    # never looser than basic composition (up to the 1e-4·ε grid of the pessimistic PLD) ...
    assert A.epsilon_pld(A.pure_dp_event(0.3, count=10), 1e-6) <= 3.0 * (1 + 1e-3)
    # ... and, over many releases, tighter than advanced composition (which is tighter than basic)
    hundred = A.epsilon_pld(A.pure_dp_event(0.3, count=100), 1e-6)
    adv, _ = A.advanced_composition(0.3, 1e-300, 100, 1e-6)
    assert hundred < adv < 30.0


def test_calibration_meets_the_target_in_every_accountant():
    for acc in ("pld", "rdp"):
        m = A.calibrate_gaussian_multiplier(2.0, 1e-6, 50, acc)
        assert A.epsilon(A.gaussian_event(m, 50), 1e-6, acc) <= 2.0 + 1e-9
        assert A.epsilon(A.gaussian_event(m * 0.99, 50), 1e-6, acc) > 2.0
    assert A.calibrate_gaussian_multiplier(2.0, 1e-6, 50, "analytic") == pytest.approx(
        math.sqrt(50) * M.analytic_gaussian_sigma(2.0, 1e-6))


def test_unsupported_and_bad_requests_raise():
    ev = dpe.PoissonSampledDpEvent(0.1, dpe.GaussianDpEvent(1.0))
    with pytest.raises(A.UnsupportedEventError):
        A.epsilon_pld(ev, 1e-6)
    with pytest.raises(A.UnsupportedEventError):
        A.epsilon_rdp(ev, 1e-6)
    with pytest.raises(ValueError, match="accountant"):
        A.epsilon(A.gaussian_event(1.0), 1e-6, "moments")
    with pytest.raises(ValueError, match="count"):
        A.calibrate_gaussian_multiplier(1.0, 1e-6, 0)
    with pytest.raises(ValueError, match="epsilon' .* ≥ 1"):
        A.paper_dp_tpm_recipe(1000.0, 1e-6, 1)
    with pytest.raises(ValueError, match="noise_multiplier"):
        A.gaussian_event(0.0)


@pytest.mark.parametrize("eps", [1e3, 1e5])
def test_huge_epsilon_is_accounted_exactly_or_on_a_grid_scaled_to_it(eps):
    """A user trying ε = 10⁵ ("almost no noise") once hung in PLD calibration (a fixed 0.01 grid needs ~ε/0.01
    points). Gaussian-only: the closed form, so calibration returns the analytic multiplier. With a
    Laplace release too the PLD grid scales with ε: its pessimistic ε stays within 1e-3 relative of the
    composition's exact ε (grid 1e-4·ε, a few grid steps of rounding), and never below it."""
    m = A.calibrate_gaussian_multiplier(eps, 1e-6, 3)
    # two root finders (σ for ε, ε for σ) meet to the calibration's step, 1e-7 relative
    assert m == pytest.approx(A.calibrate_gaussian_multiplier(eps, 1e-6, 3, accountant="analytic"), rel=2e-7)
    assert A.epsilon_pld(A.gaussian_event(m, 3), 1e-6) == pytest.approx(eps, rel=1e-6)
    mixed = A.epsilon_pld(A.compose(A.gaussian_event(m, 3), A.laplace_event(1e6)), 1e-6)
    assert eps <= mixed <= eps * (1 + 1e-3)
    with pytest.raises(ValueError, match="--epsilon 1e\\+07 is above 1e\\+06"):
        M.check_epsilon(1e7, "--epsilon")
