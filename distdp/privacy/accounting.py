"""Privacy accounting: dp-accounting events, tight (PLD/RDP) and closed-form composition.

A release is described by a ``dp_accounting`` event (what happened); the
functions here count it (how much it costs). Every noise multiplier is
relative to the sensitivity under the declared neighbour notion (the largest
ℓ2 or ℓ1 distance between outputs on neighbouring inputs), so a Gaussian
release is the pair ``N(0, m²)`` vs ``N(1, m²)`` whatever the notion.

- Tight accounting (the default): privacy loss distributions (PLD, Koskela
  et al. 2020; Doroshenko et al. 2022) built with ``dp_accounting.pld``, or
  Rényi DP (Mironov 2017) with ``dp_accounting.rdp``.
- Closed forms, to reproduce papers: basic composition, advanced composition
  (Dwork, Rothblum & Vadhan 2010; Dwork & Roth 2014 Thm 3.20), the analytic
  Gaussian mechanism, and the recipe of Wang & Anandkumar (2016) Alg. 3.

Supported events: Gaussian, Laplace, randomized response (the worst case of
a pure ε-DP mechanism: :func:`pure_dp_event`), zCDP (RDP only), and their
Self-/Composed combinations. Anything else raises ``UnsupportedEventError``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import dp_accounting
from dp_accounting import dp_event as dpe
from dp_accounting.pld import privacy_loss_distribution as pldlib
from dp_accounting.rdp import rdp_privacy_accountant as rdplib
from scipy import optimize

from distdp.privacy import mechanisms

__all__ = [
    "UnsupportedEventError", "gaussian_event", "laplace_event", "pure_dp_event", "compose",
    "epsilon_pld", "delta_pld", "epsilon_rdp", "epsilon", "gaussian_composition_epsilon",
    "basic_composition", "advanced_composition", "calibrate_gaussian_multiplier",
    "PaperRecipe", "paper_dp_tpm_recipe", "PLD_DISCRETIZATION",
]

UnsupportedEventError = dp_accounting.UnsupportedEventError

#: Discretisation of the privacy-loss values in PLD accounting (pessimistic rounding).
PLD_DISCRETIZATION = 1e-4
_MAX_GRID = 100.0  # coarsest PLD grid used (dp-accounting computes expm1(grid))


# --------------------------------------------------------------------------- events

def gaussian_event(noise_multiplier: float, count: int = 1) -> dpe.DpEvent:
    """``count`` adaptive Gaussian releases, each with noise σ = ``noise_multiplier`` × ℓ2 sensitivity."""
    if not noise_multiplier > 0:
        raise ValueError(f"noise_multiplier must be > 0, got {noise_multiplier}")
    ev = dpe.GaussianDpEvent(float(noise_multiplier))
    return ev if count == 1 else dpe.SelfComposedDpEvent(ev, int(count))


def laplace_event(noise_multiplier: float, count: int = 1) -> dpe.DpEvent:
    """``count`` Laplace releases, each with scale b = ``noise_multiplier`` × ℓ1 sensitivity (ε = 1/m)."""
    if not noise_multiplier > 0:
        raise ValueError(f"noise_multiplier must be > 0, got {noise_multiplier}")
    ev = dpe.LaplaceDpEvent(float(noise_multiplier))
    return ev if count == 1 else dpe.SelfComposedDpEvent(ev, int(count))


def pure_dp_event(epsilon: float, count: int = 1) -> dpe.DpEvent:
    """A generic ε-DP release (e.g. the ℓ2 vector mechanism) as binary randomized response.

    Any ε-DP mechanism is post-processing of binary randomized response with
    ``P(truth) = e^ε/(1+e^ε)`` (Kairouz, Oh & Viswanath 2015, Thm 2.1), so
    counting it as that event is sound for every accountant and tight in
    general. In dp-accounting's parametrisation ``noise_parameter = 2/(1+e^ε)``.
    """
    epsilon = mechanisms.check_epsilon(epsilon)
    ev = dpe.RandomizedResponseDpEvent(noise_parameter=2.0 / (1.0 + math.exp(epsilon)), num_buckets=2)
    return ev if count == 1 else dpe.SelfComposedDpEvent(ev, int(count))


def compose(*events: dpe.DpEvent) -> dpe.DpEvent:
    """Adaptive composition of events (``ComposedDpEvent``)."""
    return dpe.ComposedDpEvent(list(events))


# --------------------------------------------------------------------------- tight accounting

def flatten_event(event: dpe.DpEvent, count: int, out: list) -> None:
    """Append ``(leaf_event, count)`` pairs; raise on unsupported events."""
    if isinstance(event, dpe.NoOpDpEvent):
        return
    if isinstance(event, dpe.SelfComposedDpEvent):
        flatten_event(event.event, count * event.count, out)
    elif isinstance(event, dpe.ComposedDpEvent):
        for e in event.events:
            flatten_event(e, count, out)
    elif isinstance(event, (dpe.GaussianDpEvent, dpe.LaplaceDpEvent, dpe.RandomizedResponseDpEvent,
                            dpe.ZCDpEvent, dpe.NonPrivateDpEvent)):
        out.append((event, count))
    else:
        raise UnsupportedEventError(f"unsupported privacy event {event!r}")


def _split(event: dpe.DpEvent) -> tuple[float, list]:
    """(``Σ count/m_i²`` over ``event``'s Gaussian releases, its other ``(event, count)`` leaves).

    Gaussian releases compose exactly to one Gaussian with ``1/m² = Σ 1/m_i²``
    (the Gaussian mechanism's privacy profile depends only on sensitivity/σ).
    """
    leaves: list = []
    flatten_event(event, 1, leaves)
    gaussian = [(ev, count) for ev, count in leaves if isinstance(ev, dpe.GaussianDpEvent)]
    others = [(ev, count) for ev, count in leaves if not isinstance(ev, dpe.GaussianDpEvent)]
    return sum(count / ev.noise_multiplier ** 2 for ev, count in gaussian), others


def _pld(event: dpe.DpEvent, discretization: float):
    """The PLD of ``event``, its Gaussian releases merged first (:func:`_split`); ``None`` if it is a no-op."""
    inv_m2, others = _split(event)
    pld = None
    for ev, count in others:
        if isinstance(ev, dpe.NonPrivateDpEvent):
            raise ValueError("a non-private release voids the guarantee")
        if isinstance(ev, dpe.LaplaceDpEvent):
            part = pldlib.from_laplace_mechanism(ev.noise_multiplier, value_discretization_interval=discretization)
        elif isinstance(ev, dpe.RandomizedResponseDpEvent):
            part = pldlib.from_randomized_response(ev.noise_parameter, ev.num_buckets,
                                                   value_discretization_interval=discretization)
        else:
            raise UnsupportedEventError(f"PLD accounting does not support {ev!r} (use RDP)")
        part = part.self_compose(count) if count > 1 else part
        pld = part if pld is None else pld.compose(part)
    if inv_m2 > 0:
        g = pldlib.from_gaussian_mechanism(standard_deviation=1.0 / math.sqrt(inv_m2),
                                           value_discretization_interval=discretization)
        pld = g if pld is None else pld.compose(g)
    return pld


def epsilon_pld(event: dpe.DpEvent, delta: float, discretization: float | None = None) -> float:
    """ε at ``delta`` of ``event`` by PLD accounting (pessimistic discretisation: an upper bound).

    Releases that are all Gaussian compose to one Gaussian (:func:`_split`),
    whose ε(δ) is exact in closed form: with ``discretization=None`` that is
    returned (the PLD's limit as the grid shrinks; never above a PLD bound).

    Otherwise ``discretization=None`` picks the grid of privacy-loss values adaptively:
    coarse passes (grid 1, then 0.001·max(1, ε₁)) find the scale ε₀, then the
    grid is ``PLD_DISCRETIZATION · max(1, ε₀)`` (relative accuracy ~1e-4; every
    grid capped at 100, beyond which dp-accounting's ``expm1(grid)`` overflows).
    The grid's size is then about the same for any ε: a fixed grid would need
    ~ε/grid points, and ε = 10⁴ or 10⁵ (a user testing "almost no noise")
    would run for minutes. Pessimistic rounding keeps every grid an upper bound.
    """
    delta = mechanisms.check_delta(delta)
    inv_m2, others = _split(event)
    if discretization is None and inv_m2 > 0 and not others:
        return mechanisms.gaussian_epsilon(1.0 / math.sqrt(inv_m2), delta, 1.0)
    if discretization is None:
        scale = 1.0
        for relative in (1.0, 1e-3):
            coarse = _pld(event, min(_MAX_GRID, relative * scale))
            if coarse is None:
                return 0.0
            scale = max(1.0, float(coarse.get_epsilon_for_delta(delta)))
        discretization = min(_MAX_GRID, PLD_DISCRETIZATION * scale)
    pld = _pld(event, discretization)
    return 0.0 if pld is None else float(pld.get_epsilon_for_delta(delta))


def delta_pld(event: dpe.DpEvent, epsilon: float, discretization: float = PLD_DISCRETIZATION) -> float:
    """δ at ``epsilon`` of ``event`` by PLD accounting."""
    pld = _pld(event, discretization)
    return 0.0 if pld is None else float(pld.get_delta_for_epsilon(float(epsilon)))


def epsilon_rdp(event: dpe.DpEvent, delta: float) -> float:
    """ε at ``delta`` of ``event`` by Rényi-DP accounting (dp-accounting's ``RdpAccountant``)."""
    delta = mechanisms.check_delta(delta)
    leaves: list = []
    flatten_event(event, 1, leaves)  # raises on unsupported events with our message
    acc = rdplib.RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    acc.compose(event)
    return float(acc.get_epsilon(delta))


def epsilon(event: dpe.DpEvent, delta: float, accountant: str = "pld") -> float:
    """ε at ``delta`` with ``accountant`` = ``"pld"`` or ``"rdp"``."""
    if accountant == "pld":
        return epsilon_pld(event, delta)
    if accountant == "rdp":
        return epsilon_rdp(event, delta)
    raise ValueError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")


def gaussian_composition_epsilon(noise_multiplier: float, count: int, delta: float) -> float:
    """Exact ε of ``count`` adaptive Gaussian releases (closed form, no discretisation).

    The composition is exactly one Gaussian mechanism with multiplier
    ``m/√count`` (μ-GDP with μ = √count/m; Dong, Roth & Su 2019), whose ε(δ) is
    :func:`distdp.privacy.mechanisms.gaussian_epsilon`.
    """
    return mechanisms.gaussian_epsilon(noise_multiplier / math.sqrt(count), delta, 1.0)


# --------------------------------------------------------------------------- closed forms

def basic_composition(epsilon: float, delta: float, count: int) -> tuple[float, float]:
    """``count`` (ε, δ)-DP releases are ``(count·ε, count·δ)``-DP (Dwork & Roth Thm 3.16)."""
    return count * epsilon, count * delta


def advanced_composition(epsilon: float, delta: float, count: int, delta_slack: float) -> tuple[float, float]:
    """Advanced composition (Dwork, Rothblum & Vadhan 2010; Dwork & Roth 2014 Thm 3.20).

    ``count`` adaptive (ε, δ)-DP releases are ``(ε_tot, count·δ + δ′)``-DP with
    ``ε_tot = √(2·count·ln(1/δ′))·ε + count·ε·(e^ε − 1)``.
    """
    delta_slack = mechanisms.check_delta(delta_slack, "delta_slack")
    eps = math.sqrt(2 * count * math.log(1 / delta_slack)) * epsilon + count * epsilon * math.expm1(epsilon)
    return eps, count * delta + delta_slack


# --------------------------------------------------------------------------- calibration

def calibrate_gaussian_multiplier(epsilon: float, delta: float, count: int = 1, accountant: str = "pld") -> float:
    """Smallest noise multiplier m making ``count`` Gaussian releases (ε, δ)-DP.

    Parameters
    ----------
    epsilon : float, > 0
    delta : float, in (0, 1)
    count : int
        Number of adaptive releases, each with noise σ = m × its sensitivity.
    accountant : {"pld", "analytic", "rdp"}
        ``"analytic"``: ``m = √count · σ_analytic(ε, δ)`` — exact, since the
        composition is a single Gaussian with multiplier ``m/√count``.
        ``"pld"``: the smallest m whose PLD ε is ≤ ``epsilon`` (what the
        ledger certifies; within the discretisation of ``"analytic"``).
        ``"rdp"``: the same with RDP (looser).
    """
    epsilon, delta = mechanisms.check_epsilon(epsilon), mechanisms.check_delta(delta)
    if isinstance(count, bool) or int(count) != count or count < 1:
        raise ValueError(f"count must be a positive integer, got {count!r}")
    exact = math.sqrt(count) * mechanisms.analytic_gaussian_sigma(epsilon, delta, 1.0)
    if accountant == "analytic":
        return exact
    if accountant not in ("pld", "rdp"):
        raise ValueError(f"accountant must be 'pld', 'analytic' or 'rdp', got {accountant!r}")

    account = epsilon_pld if accountant == "pld" else epsilon_rdp

    def gap(m: float) -> float:
        return account(gaussian_event(m, count), delta) - epsilon

    # The accountant is an upper bound on the exact ε, so its m is ≥ the exact one.
    if gap(exact) <= 0:
        return exact
    lo, hi = exact, exact * 1.001
    while gap(hi) > 0:
        lo, hi = hi, hi * 1.5
    m = float(optimize.brentq(gap, lo, hi, xtol=exact * 1e-7))
    while gap(m) > 0:  # brentq stops within xtol of the root, possibly on the wrong side
        m *= 1 + 1e-7
    return m


@dataclass(frozen=True)
class PaperRecipe:
    """The noise recipe of Wang & Anandkumar (2016), Algorithm 3 line 2, as printed.

    Attributes
    ----------
    releases : int
        ``K = k·L·(R+1)``.
    epsilon_prime, delta_prime : float
        Per-release budget ``ε′ = ε/√(K(4 + ln(2/δ)))``, ``δ′ = δ/(2K)``.
    noise_multiplier : float
        ``√(2 ln(1.25/δ′))/ε′``, the classical Gaussian mechanism at (ε′, δ′)
        (= ν/6 for the symmetric-entry neighbour).
    advanced_composition_epsilon, advanced_composition_delta : float
        What advanced composition actually gives for K releases at (ε′, δ′)
        with slack ``δ/2``: ε ≈ 1.31 for a target ε = 1 — the paper's
        composition step (proof of Thm 4.1) does not reach its claimed ε.
    """

    epsilon: float
    delta: float
    releases: int
    epsilon_prime: float
    delta_prime: float
    noise_multiplier: float
    advanced_composition_epsilon: float
    advanced_composition_delta: float


def paper_dp_tpm_recipe(epsilon: float, delta: float, releases: int) -> PaperRecipe:
    """The paper's per-release noise for a target (ε, δ) over K releases (Alg. 3, line 2).

    Raises
    ------
    ValueError
        If ε′ ≥ 1, where the classical Gaussian mechanism the recipe uses is
        invalid (the recipe then cannot meet the budget; use tight accounting).
    """
    epsilon, delta = mechanisms.check_epsilon(epsilon), mechanisms.check_delta(delta)
    K = int(releases)
    if K < 1:
        raise ValueError(f"releases must be ≥ 1, got {releases}")
    eps_p = epsilon / math.sqrt(K * (4 + math.log(2 / delta)))
    delta_p = delta / (2 * K)
    if eps_p >= 1:
        raise ValueError(f"paper accounting: per-release epsilon' = {eps_p:.3g} ≥ 1, where the classical "
                         "Gaussian mechanism of the recipe is invalid; use --accounting tight")
    m = mechanisms.classical_gaussian_sigma(eps_p, delta_p, 1.0)
    adv_eps, adv_delta = advanced_composition(eps_p, delta_p, K, delta / 2)
    return PaperRecipe(epsilon, delta, K, eps_p, delta_p, m, adv_eps, adv_delta)
