"""Input, gradient and output perturbation for tensor completion (paper §4.2–4.4), and their privacy reports.

Neighbouring datasets, for every mechanism here:
:data:`~distdp.privacy.neighbours.CHANGE_ONE_ENTRY`, two tensors that differ in
the value of one observed entry (paper Thm. 2 proof: "differing at only
element x_pqr"). The observation set Ω, the train/test split and the tensor
shape are public. Each mechanism returns what it released and a
:class:`~distdp.privacy.report.PrivacyReport` that says what is guaranteed,
under which assumptions, and what is a reproduction of the paper only; its
``details`` hold ``paper_claim`` (what the paper claims for a reproduced
mechanism, not endorsed, or None) and ``noise`` (the mechanism's parameters).

The optional projection of the SGD iterates onto public balls
(:func:`distdp.completion.sgd.project`) is post-processing of the released
noisy iterates (or, for ``input``, of the released noisy values): it costs no
privacy, and :func:`distdp.completion.complete` lists it among a report's
assumptions.

| mechanism        | paper      | noise                                    | guarantee claimed      |
|------------------|------------|------------------------------------------|------------------------|
| input            | Alg. 1     | Laplace(Δ/ε), Δ = hi − lo, per entry     | ε-DP (declared bounds) |
| gradient         | (sound)    | N(0, (σ·2C)²) per step, touched rows + G | (ε, δ)-DP, PLD         |
| gradient-paper   | Alg. 2     | ∝ exp(−ε‖n‖/2m) per entry on c_k         | none (reproduction)    |
| output           | Alg. 3     | ∝ exp(−ε‖n‖/Δ) per row of C, Δ = 2τLη    | none (reproduction)    |
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from dp_accounting import dp_event as dpe

from distdp.privacy import accounting
from distdp.privacy.ledger import PrivacyLedger
from distdp.privacy.mechanisms import add_laplace, check_delta, check_epsilon, l2_vector_noise
from distdp.privacy.neighbours import CHANGE_ONE_ENTRY
from distdp.privacy.releases import PrivateReleases
from distdp.privacy.report import PrivacyReport

__all__ = ["PERTURBATIONS", "PrivacyReport", "covered_fields", "input_perturbation", "input_report",
           "dpsgd_noise_multiplier", "dpsgd_report", "paper_gradient_report", "output_sensitivity",
           "output_perturbation", "output_report", "mark_seeded", "none_report", "check_bounds"]

PERTURBATIONS = ("none", "input", "gradient", "gradient-paper", "output")

#: ``accounting`` of the paper's reproduced mechanisms.
NO_ACCOUNTING = "none: a reproduction of the paper's mechanism, recorded as NonPrivateDpEvent"


def _ledger(private: bool, stage: str, mechanism: str, sensitivity, noise_scale, count: int, event, note: str,
            sampler: str) -> PrivacyLedger:
    """A ledger holding the one release of a completion mechanism (its noise drawn by the fit)."""
    ledger = PrivacyLedger(private=private)
    PrivateReleases(ledger, None, CHANGE_ONE_ENTRY).record(stage, mechanism, sensitivity, noise_scale, count, event,
                                                          note, sampler)
    return ledger


def covered_fields(report: dict) -> dict:
    """The fields of a ``report.json`` (:meth:`~distdp.completion.CompletionResult.report`) that its guarantee covers.

    Parameters
    ----------
    report : dict
        A completion report; ``report["privacy"]["not_covered"]`` lists
        ``"<path>: why"`` entries (:class:`~distdp.privacy.report.PrivacyReport`).

    Returns
    -------
    dict
        ``{"a.b.c": value}`` for every leaf of the nested report (a list is
        one leaf) whose path is neither listed nor below a listed path.
    """
    def leaves(d, prefix=""):
        out = {}
        for key, v in d.items():
            path = f"{prefix}{key}"
            out.update(leaves(v, path + ".") if isinstance(v, dict) else {path: v})
        return out

    skip = [c.split(":", 1)[0] for c in report["privacy"]["not_covered"]]
    return {p: v for p, v in leaves(report).items() if not any(p == s or p.startswith(s + ".") for s in skip)}


# ----------------------------------------------------------------------------- input perturbation (Alg. 1)

def input_perturbation(values: np.ndarray, bounds: tuple[float, float], epsilon: float, rng: np.random.Generator,
                       clamp_noisy: bool = False):
    """Paper Alg. 1: clamp each observed value to the declared bounds, add Laplace((hi − lo)/ε).

    Replacing one value moves one coordinate of the clamped vector by at most
    Δ₁ = hi − lo, so the Laplace mechanism (paper Lemma 1) makes the released
    noisy values ε-DP; SGD on them is post-processing.

    Parameters
    ----------
    values : ndarray (n,)
        Private observed (training) values.
    bounds : (lo, hi)
        Public, declared value range (not computed from the data).
    epsilon : float
    rng : numpy.random.Generator
        Noise source.
    clamp_noisy : bool
        Clamp the noisy values back to the bounds (post-processing; the
        paper's optional step).

    Returns
    -------
    noisy : ndarray (n,)
    n_clamped : int
        Values that were outside the bounds before the noise.
    """
    lo, hi = check_bounds(bounds)
    check_epsilon(epsilon)
    clamped = np.clip(values, lo, hi)
    noisy = add_laplace(clamped, (hi - lo) / epsilon, rng)   # noise added to the value by the vetted sampler
    if clamp_noisy:
        noisy = np.clip(noisy, lo, hi)
    return noisy, int(np.sum(clamped != values))


def input_report(epsilon: float, bounds, n_train: int, bounds_declared: bool, clamp_noisy: bool,
                 sampler: str = "") -> PrivacyReport:
    """Privacy report of :func:`input_perturbation` (pure ε-DP when the bounds were declared).

    ``sampler``: what drew the noise (:func:`distdp.privacy.mechanisms.sampler_name`), recorded in the release.
    """
    lo, hi = bounds
    reasons = () if bounds_declared else (
        "the value bounds were computed from the private data (min/max): the sensitivity, and the bounds "
        "themselves, leak information; declare public bounds to get a guarantee",)
    return PrivacyReport(
        private=bounds_declared, mechanism="input", neighbour=CHANGE_ONE_ENTRY,
        epsilon=float(epsilon) if bounds_declared else None, delta=0.0 if bounds_declared else None,
        requested_epsilon=float(epsilon),
        accounting="pure ε-DP: the Laplace mechanism (paper Lemma 1), one release per entry, parallel composition",
        assumptions=(f"declared public value bounds [{lo}, {hi}]; values are clamped to them before the noise",
                     "each training value gets its own Laplace noise; one value changes one coordinate by "
                     f"≤ Δ₁ = {hi - lo} (parallel composition over entries)",
                     "the fit (ALS or SGD) on the noisy values is post-processing"),
        not_private_because=reasons,
        not_covered=("test_rmse: computed from the held-out private values without noise",),
        ledger=_ledger(bounds_declared, "input_values", "laplace", hi - lo, (hi - lo) / epsilon, n_train,
                       accounting.laplace_event(1.0 / epsilon),
                       "one Laplace release per training entry; a neighbour changes one of them, so the "
                       "releases compose in parallel: one event", sampler),
        details={"paper_claim": "Theorem 1: ε-DP",
                 "noise": {"mechanism": "laplace", "sensitivity_l1": hi - lo, "scale": (hi - lo) / epsilon,
                           "clamp_noisy": clamp_noisy, "sampler": sampler}})


# ----------------------------------------------------------------------------- sound gradient perturbation (DP-SGD)

def dpsgd_noise_multiplier(epochs: int, epsilon: float, delta: float) -> float:
    """σ (noise std per unit sensitivity) so that ``epochs`` composed Gaussian releases are (ε, δ)-DP (PLD).

    With disjoint batches in each pass, a given entry's value enters exactly one
    step per pass, and every other step's output distribution does not depend on
    it given the past: over the whole run the entry is seen by ``epochs``
    Gaussian mechanisms with noise std σ·Δ, Δ = 2C (adaptive composition).
    """
    check_epsilon(epsilon)
    check_delta(delta)
    return accounting.calibrate_gaussian_multiplier(epsilon, delta, count=int(epochs), accountant="pld")


def dpsgd_report(noise_multiplier: float, clip: float, epochs: int, steps: int, batch_size: int, delta: float,
                 target_epsilon: float, blocks: str, sampler: str = "") -> PrivacyReport:
    """Privacy report of the sound gradient perturbation: ε at δ by PLD, with RDP and the closed form beside it.

    ``sampler``: what drew the noise, recorded in the release (as in :func:`input_report`).
    """
    event = accounting.gaussian_event(noise_multiplier, int(epochs))
    eps_pld = accounting.epsilon(event, delta, "pld")
    eps_rdp = accounting.epsilon(event, delta, "rdp")
    eps_exact = accounting.gaussian_composition_epsilon(noise_multiplier, int(epochs), delta)
    return PrivacyReport(
        private=True, mechanism="gradient", neighbour=CHANGE_ONE_ENTRY, epsilon=eps_pld, delta=float(delta),
        requested_epsilon=target_epsilon, requested_delta=float(delta),
        accounting="tight: privacy loss distributions (dp-accounting) of the composed Gaussian mechanisms",
        assumptions=(
            f"per-entry gradients of the data term (all blocks {blocks} jointly) clipped to "
            f"ℓ2 norm c = {clip}; replacing one value moves a clipped batch sum by ≤ Δ₂ = 2c",
            f"Gaussian noise of std σ·2c = {noise_multiplier * 2 * clip:.6g} at each of the {steps} steps "
            f"(σ = {noise_multiplier:.6g}) on every coordinate of every factor row the batch touches"
            + (" and of the core G" if "G" in blocks else "") + "; the rows a batch touches are fixed by the "
            "public Ω and a visiting order drawn without the values, and an untouched row's released gradient "
            "is 0 for every neighbour, so it needs no noise",
            f"each pass splits the training entries into disjoint batches of {batch_size}: an entry enters one step "
            f"per pass, so the run composes {epochs} Gaussian mechanisms (no amplification by sampling or "
            "shuffling is claimed; the visiting order may be public)",
            "the regulariser gradient depends only on the current (already private) iterate and the public Ω",
            "a fixed number of passes (no data-dependent early stopping)",
            f"tight accounting: PLD (dp-accounting) ε = {eps_pld:.6g}; RDP gives ε = {eps_rdp:.6g}"),
        not_private_because=(),
        not_covered=("test_rmse: computed from the held-out private values without noise",
                     "convergence.objective: computed from the private training values without noise"),
        ledger=_ledger(True, "sgd_steps", "gaussian", 2 * clip, noise_multiplier * 2 * clip, steps, event,
                       f"{steps} noisy steps; an entry enters one step per pass, so the event is {epochs} "
                       "composed Gaussian mechanisms", sampler),
        details={"paper_claim": None,
                 "noise": {"mechanism": "gaussian", "clip": clip, "sensitivity_l2": 2 * clip,
                           "noise_multiplier": noise_multiplier, "noise_std": noise_multiplier * 2 * clip,
                           "target_epsilon": target_epsilon, "epsilon_pld": eps_pld, "epsilon_rdp": eps_rdp,
                           "epsilon_exact": eps_exact}})


# ----------------------------------------------------------------------------- paper gradient perturbation (Alg. 2)

def paper_gradient_report(clip: float, epsilon: float, steps: int, n_entries_seen: int,
                          sampler: str = "") -> PrivacyReport:
    """Report of the paper's Alg. 2: a reproduction, no guarantee claimed (``sampler`` as in :func:`input_report`)."""
    return PrivacyReport(
        private=False, mechanism="gradient-paper", neighbour=CHANGE_ONE_ENTRY, requested_epsilon=epsilon,
        accounting=NO_ACCOUNTING,
        assumptions=(f"paper Alg. 2 as printed: ∇_c_k f clipped to m = {clip}, a fresh noise vector of density "
                     f"∝ exp(−ε‖n‖/Δ), Δ = 2m, added for every entry visit ({n_entries_seen} draws)",),
        not_private_because=(
            "A, B and G are updated without noise and released: they alone can reveal the data",
            "the proof fixes one noise draw per row of C at a stationary point, while the algorithm draws fresh "
            "noise at every step",
            "no composition over the steps and passes: each entry's value is used once per pass, every use "
            "releases information, and the budget does not grow with the number of iterations in the proof",
            "the theory's Δ = 2L needs an L-Lipschitz objective in C, which (7) is not (squared loss)"),
        not_covered=("everything: this is a reproduction of the paper's mechanism",),
        ledger=_ledger(False, "sgd_steps_C", "l2-vector", 2 * clip, 2 * clip / epsilon, n_entries_seen,
                       dpe.NonPrivateDpEvent(),
                       f"paper Alg. 2; the paper claims ε = {epsilon} for the whole run; A, B, G are released "
                       "without noise, hence NonPrivateDpEvent", sampler),
        details={"paper_claim": f"Theorem 2: ε-DP with ε = {epsilon}, Δ = 2m = {2 * clip} (not endorsed)",
                 "noise": {"mechanism": "l2-vector", "clip": clip, "sensitivity_l2": 2 * clip,
                           "epsilon_per_draw": epsilon, "scale": 2 * clip / epsilon}})


# ----------------------------------------------------------------------------- output perturbation (Alg. 3)

def output_sensitivity(passes: int, lipschitz: float, lr: float) -> float:
    """Δ = 2τLη (paper §4.4 via Lemma 3), τ taken as the number of passes."""
    return 2.0 * passes * lipschitz * lr


def output_perturbation(C: np.ndarray, epsilon: float, sensitivity: float, rng: np.random.Generator) -> np.ndarray:
    """Paper Alg. 3: add to every row of C a vector of density ∝ exp(−ε‖n‖/Δ)."""
    check_epsilon(epsilon)
    return C + l2_vector_noise(C.shape[1], epsilon / sensitivity, rng, size=C.shape[0])


def output_report(epsilon: float, sensitivity: float, passes: int, lipschitz: float, lr: float,
                  n_rows: int, sampler: str = "") -> PrivacyReport:
    """Report of the paper's Alg. 3: a reproduction, no guarantee claimed (``sampler`` as in :func:`input_report`)."""
    return PrivacyReport(
        private=False, mechanism="output", neighbour=CHANGE_ONE_ENTRY, requested_epsilon=epsilon,
        accounting=NO_ACCOUNTING,
        assumptions=(f"τ = {passes} passes, L = {lipschitz} (user-chosen: the paper never gives L), η = {lr}",
                     f"one noise vector per row of C ({n_rows} rows), density ∝ exp(−ε‖n‖/Δ)"),
        not_private_because=(
            "Lemma 3 (Wu et al.) needs a convex, L-Lipschitz, β-smooth loss with η ≤ 2/β; objective (7) is "
            "non-convex and its squared loss is unbounded, so neither Δ = 2τLη nor any L holds",
            "the paper never gives L; the value used here is an arbitrary choice",
            "A, B and G are released without noise",
            "the noise is added to all rows with one ε each and the rows are not composed"),
        not_covered=("everything: this is a reproduction of the paper's mechanism",),
        ledger=_ledger(False, "output_C", "l2-vector", sensitivity, sensitivity / epsilon, n_rows,
                       dpe.NonPrivateDpEvent(), f"paper Alg. 3; the paper claims ε = {epsilon}; the premises of its "
                       "Lemma 3 fail and A, B, G are released without noise, hence NonPrivateDpEvent", sampler),
        details={"paper_claim": f"Theorem 3: ε-DP with ε = {epsilon}, Δ = 2τLη = {sensitivity:.6g} (not endorsed)",
                 "noise": {"mechanism": "l2-vector", "sensitivity_l2": sensitivity, "scale": sensitivity / epsilon,
                           "lipschitz": lipschitz}})


def mark_seeded(report: PrivacyReport, seed) -> PrivacyReport:
    """The report of a fit whose noise came from a user seed: not private, whatever the mechanism."""
    return replace(report, private=False, epsilon=None, delta=None,
                   not_private_because=report.not_private_because + (
                       f"reproducible mode: the noise generator was seeded by the user (seed {seed}), so the "
                       "noise is known to whoever knows the seed",))


def none_report() -> PrivacyReport:
    """Report of a non-private fit."""
    return PrivacyReport(private=False, mechanism="none", neighbour=CHANGE_ONE_ENTRY,
                         not_private_because=("no perturbation: the factors are fitted to the raw values",),
                         not_covered=("everything",), details={"paper_claim": None, "noise": {}})


def check_bounds(bounds, name: str = "bounds") -> tuple[float, float]:
    """Require declared bounds ``(lo, hi)``, finite with lo < hi (errors call them ``name``)."""
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair of numbers (lo, hi), got {bounds!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"{name} must be finite with lo < hi, got ({lo}, {hi})")
    return lo, hi
