"""Differentially private tensor power method (Wang & Anandkumar 2016, Algorithm 3).

Every ``T(I,u,u)`` the power iteration computes is released with Gaussian
noise ``m·Δ₁(u)·z``, and every eigenvalue ``T(u,u,u)`` with ``m·Δ₂(u)·z``,
where Δ are the sensitivities under the declared neighbour notion and ``m``
the noise multiplier (the same for every release). The best restart is the
one with the largest *noisy* eigenvalue, deflation uses the noisy ``λ̂``, and
``R`` is fixed (no data-dependent stopping). Normalisation, selection and
deflation are post-processing.

Neighbour notions (:class:`Neighbour`)
--------------------------------------
- ``"symmetric-entry"`` (paper Def. 4.2): ``T′ − T = ±symmetrize(e_i⊗e_j⊗e_k)``
  (the six permutations summed). ``Δ₁ = 6‖u‖∞²``, ``Δ₂ = 6‖u‖∞³``; both are
  exact (attained for ``i = j = k = argmax|u_i|``). Paper: ``ν = 6m``.
- ``"imtiaz-sarwate"``: the notion of Imtiaz & Sarwate (their §4), with
  ``Δ₁ = 2‖u‖∞²``, ``Δ₂ = 2‖u‖∞³`` (``ν = 2m``).
- ``"replace-one-point"`` for the empirical moment ``(1/n) Σ x⊗x⊗x`` of ``n``
  (public) points clipped to ``‖x‖₂ ≤ B``: replacing one point changes
  ``T(I,u,u)`` by ``((xᵀu)²x − (x′ᵀu)²x′)/n``, of norm ≤ ``2B³/n`` (attained
  by ``x = Bu``, ``x′ = −Bu``), and ``T(u,u,u)`` by at most ``2B³/n``.

Accounting
----------
``K`` Gaussian releases with multiplier ``m``: ``K = k·L·(R+1)`` for the
robust method (L restarts, R iterations and one eigenvalue each), and for
the simultaneous variant with ``L > 1`` restarts (the same candidates and
iterations, pipelined). A round of the simultaneous variant releases
several columns at once, each column ``j`` with its own noise
``m·Δ₁(u_j)``; the pair of output distributions is then a Gaussian with
``μ² ≤ Σ_j (Δ₁(u_j)/(mΔ₁(u_j)))²`` = (number of columns)/m² — exactly that
many composed releases. With ``L = 1`` (orthogonal iteration) ``K = k·(R+1)``.
Which columns a round releases is fixed in advance (not data-dependent); the
choice of the best candidates and the restarts are post-processing.

- ``accounting="paper"``: ``m`` from the printed recipe of Alg. 3 line 2
  (:func:`distdp.privacy.accounting.paper_dp_tpm_recipe`), a reproduction;
  its composition claim (proof of Thm 4.1) does not hold as printed: its
  ε′, δ′ put into the advanced composition theorem give a total ε ≈ 1.31
  for a target ε = 1, though the noise is far larger than needed.
- ``accounting="tight"``: the smallest ``m`` for which PLD accounting of the
  K releases certifies (ε, δ).

Either way the report gives the ε that PLD accounting certifies for the
noise actually added (and RDP and the exact Gaussian-composition value).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from distdp.privacy import accounting as acct
from distdp.privacy import mechanisms
from distdp.privacy.ledger import PrivacyLedger, Release
from distdp.tensor import power

__all__ = ["Neighbour", "SYMMETRIC_ENTRY", "IMTIAZ_SARWATE", "replace_one_point", "resolve_neighbour",
           "GaussianReleaseNoise", "PrivacyReport", "private_power_method", "n_releases",
           "noise_multiplier"]


@dataclass(frozen=True)
class Neighbour:
    """A neighbour notion and the sensitivities of ``T(I,u,u)`` and ``T(u,u,u)`` under it.

    Attributes
    ----------
    name : str
    apply_coef, value_coef : float
        ``kind="entry"``: ``Δ₁(u) = apply_coef·‖u‖∞²``, ``Δ₂(u) = value_coef·‖u‖∞³``.
        ``kind="data"``: ``Δ₁ = apply_coef``, ``Δ₂ = value_coef`` for unit ``u``.
    kind : {"entry", "data"}
    description : str
    """

    name: str
    apply_coef: float
    value_coef: float
    kind: str
    description: str

    def apply_sensitivity(self, U: np.ndarray) -> np.ndarray:
        """ℓ2 sensitivity of ``T(I,u,u)`` for every column of ``U``; shape (L,)."""
        if self.kind == "entry":
            return self.apply_coef * np.max(np.abs(U), axis=0) ** 2
        return np.full(U.shape[1], self.apply_coef)

    def value_sensitivity(self, U: np.ndarray) -> np.ndarray:
        """Sensitivity of ``T(u,u,u)`` for every column of ``U``; shape (L,)."""
        if self.kind == "entry":
            return self.value_coef * np.max(np.abs(U), axis=0) ** 3
        return np.full(U.shape[1], self.value_coef)

    def formulas(self) -> tuple[str, str]:
        """Human-readable ``(Δ₁, Δ₂)``."""
        if self.kind == "entry":
            return f"{self.apply_coef:g}·‖u‖∞²", f"{self.value_coef:g}·‖u‖∞³"
        return f"{self.apply_coef:.6g}", f"{self.value_coef:.6g}"


SYMMETRIC_ENTRY = Neighbour("symmetric-entry", 6.0, 6.0, "entry",
                            "T′ − T = ±symmetrize(e_i⊗e_j⊗e_k), all six permutations summed "
                            "(Wang & Anandkumar 2016, Def. 4.2)")
IMTIAZ_SARWATE = Neighbour("imtiaz-sarwate", 2.0, 2.0, "entry",
                           "the neighbour notion of Imtiaz & Sarwate (2018), under which "
                           "Δ(T(I,u,u)) ≤ 2‖u‖∞² and Δ(T(u,u,u)) ≤ 2‖u‖∞³")


def replace_one_point(n: int, bound: float) -> Neighbour:
    """Replace-one neighbours of the empirical moment of ``n`` points with ``‖x‖₂ ≤ bound``.

    ``Δ₁ = Δ₂ = 2·bound³/n`` (see the module docstring); ``n`` is public.
    """
    if n < 1:
        raise ValueError(f"n must be ≥ 1, got {n}")
    bound = mechanisms.check_sensitivity(bound, "clip bound")
    s = 2.0 * bound ** 3 / n
    return Neighbour("replace-one-point", s, s, "data",
                     f"replace one of n = {n} data points, each clipped to ‖x‖₂ ≤ {bound:g}")


def resolve_neighbour(neighbour, op) -> Neighbour:
    """A :class:`Neighbour` from a name or instance; the data notion reads ``n`` and the clip bound of ``op``."""
    if isinstance(neighbour, Neighbour):
        return neighbour
    if neighbour == "symmetric-entry":
        return SYMMETRIC_ENTRY
    if neighbour == "imtiaz-sarwate":
        return IMTIAZ_SARWATE
    if neighbour == "replace-one-point":
        n, bound = getattr(op, "n", None), getattr(op, "clip_bound", None)
        if n is None or bound is None:
            raise ValueError("neighbour 'replace-one-point' needs a data operator with rows clipped to a "
                             "public bound (EmpiricalMoment(..., clip_bound=B))")
        return replace_one_point(int(n), float(bound))
    raise ValueError(f"neighbour must be 'symmetric-entry', 'imtiaz-sarwate', 'replace-one-point' or a "
                     f"Neighbour, got {neighbour!r}")


def n_releases(method: str, k: int, n_restarts: int, n_iters: int) -> int:
    """``K = k·L·(R+1)`` (robust, Alg. 3, and simultaneous; ``k·(R+1)`` for simultaneous with ``L = 1``)."""
    if method in ("robust", "simultaneous"):
        return k * n_restarts * (n_iters + 1)
    raise ValueError(f"method must be 'robust' or 'simultaneous', got {method!r}")


def noise_multiplier(epsilon: float, delta: float, releases: int, accounting: str = "tight"):
    """Noise multiplier ``m`` for ``releases`` Gaussian releases at (ε, δ); also the paper recipe or None."""
    if accounting == "paper":
        recipe = acct.paper_dp_tpm_recipe(epsilon, delta, releases)
        return recipe.noise_multiplier, recipe
    if accounting == "tight":
        return acct.calibrate_gaussian_multiplier(epsilon, delta, releases, "pld"), None
    raise ValueError(f"accounting must be 'paper' or 'tight', got {accounting!r}")


class GaussianReleaseNoise:
    """Noise of Algorithm 3: ``m·Δ₁(u)·z`` per ``T(I,u,u)`` and ``m·Δ₂(u)·z`` per ``T(u,u,u)``.

    Counts the releases it noises (checked against K at the end of a run).
    """

    def __init__(self, multiplier: float, neighbour: Neighbour, rng: np.random.Generator):
        self.multiplier = float(multiplier)
        self.neighbour = neighbour
        self.rng = rng
        self.apply_releases = 0
        self.value_releases = 0
        self.apply_sampler = self.value_sampler = ""    # what drew the noise (mechanisms.sampler_name)

    def apply_noise(self, U: np.ndarray) -> np.ndarray:
        """``(d, L)`` noise, column ``l`` ~ ``N(0, (m·Δ₁(u_l))² I)``."""
        self.apply_releases += U.shape[1]
        self.apply_sampler = mechanisms.sampler_name(self.rng, "gaussian", U.size, on_value=False)
        return mechanisms.gaussian_noise(U.shape, self.multiplier * self.neighbour.apply_sensitivity(U), self.rng)

    def value_noise(self, U: np.ndarray) -> np.ndarray:
        """``(L,)`` noise, entry ``l`` ~ ``N(0, (m·Δ₂(u_l))²)``."""
        self.value_releases += U.shape[1]
        self.value_sampler = mechanisms.sampler_name(self.rng, "gaussian", U.shape[1], on_value=False)
        return mechanisms.gaussian_noise(U.shape[1], self.multiplier * self.neighbour.value_sensitivity(U), self.rng)


@dataclass(frozen=True)
class PrivacyReport:
    """What a private power method released and what it certifies.

    Attributes
    ----------
    private : bool
        False if the noise came from a user-seeded generator ("not private").
    accounting : {"paper", "tight"}
        How the noise multiplier was chosen.
    target_epsilon, delta : float
        The requested budget.
    releases : int
        ``K``, Gaussian releases with multiplier ``noise_multiplier``.
    noise_multiplier : float
        σ/Δ of every release (``ν = Δ-coefficient × m``).
    nu : float or None
        The paper's ν for entry neighbour notions (noise std ``ν‖u‖∞²``).
    neighbour, neighbour_description : str
    epsilon_pld : float
        ε at ``delta`` that PLD accounting certifies for the noise added.
    epsilon_rdp : float
        The same by RDP accounting.
    epsilon_exact : float
        Exact ε of the K-fold Gaussian composition (closed form).
    paper : dict or None
        For ``accounting="paper"``: ε′, δ′ and what advanced composition gives.
    ledger : PrivacyLedger
    notes : tuple of str
    """

    private: bool
    accounting: str
    target_epsilon: float
    delta: float
    releases: int
    noise_multiplier: float
    nu: Optional[float]
    neighbour: str
    neighbour_description: str
    epsilon_pld: float
    epsilon_rdp: float
    epsilon_exact: float
    paper: Optional[dict]
    ledger: PrivacyLedger = field(compare=False)
    notes: tuple = ()

    def to_dict(self) -> dict:
        """JSON-ready report (the ledger included)."""
        return {"private": self.private, "status": "private" if self.private else "not private",
                "accounting": self.accounting, "target_epsilon": self.target_epsilon, "delta": self.delta,
                "releases": self.releases, "noise_multiplier": self.noise_multiplier, "nu": self.nu,
                "neighbour": self.neighbour, "neighbour_description": self.neighbour_description,
                "epsilon_pld": self.epsilon_pld, "epsilon_rdp": self.epsilon_rdp,
                "epsilon_exact": self.epsilon_exact, "paper": self.paper, "notes": list(self.notes),
                "ledger": self.ledger.to_dict()}


def private_power_method(T_or_op, k: int, *, epsilon: float, delta: float, n_restarts: int | None = None,
                         n_iters: int | None = None, accounting: str = "tight",
                         neighbour="symmetric-entry", method: str = "robust",
                         rng: np.random.Generator | None = None, reproducible: bool = False,
                         rtol: float | None = None) -> power.PowerResult:
    """Differentially private tensor power method (paper Algorithm 3).

    Parameters
    ----------
    T_or_op : ndarray (d, d, d) or TensorOperator
        Symmetric tensor or operator (``EmpiricalMoment`` for data; with
        ``neighbour="replace-one-point"`` it must clip rows to a bound).
    k : int
        Components, ``1 ≤ k ≤ d``.
    epsilon : float, > 0
    delta : float, in (0, 1)
    n_restarts, n_iters : int, optional
        ``L`` and ``R`` (defaults of :func:`distdp.tensor.power.robust_power_method`
        or :func:`~distdp.tensor.power.simultaneous_power_method`); both are
        public and fixed before the run.
    accounting : {"tight", "paper"}
        Noise from PLD calibration, or from the paper's recipe (reproduction).
    neighbour : str or Neighbour
        ``"symmetric-entry"`` (Δ = 6‖u‖∞², paper Def. 4.2), ``"imtiaz-sarwate"``
        (Δ = 2‖u‖∞²), ``"replace-one-point"`` (data; Δ = 2B³/n), or a Neighbour.
    method : {"robust", "simultaneous"}
    rng : numpy.random.Generator, optional
        Leave ``None`` for a private run (noise from OS entropy). A generator
        is accepted only with ``reproducible=True``, and the report then says
        "not private".
    reproducible : bool
        Allow a user-supplied (seeded) generator; no guarantee is claimed.
    rtol : float, optional
        Symmetry tolerance of an explicit tensor (default by its dtype).

    Returns
    -------
    PowerResult
        With ``privacy`` = :class:`PrivacyReport`.

    Raises
    ------
    ValueError
        Bad ε, δ, k, L, R, neighbour; a seeded ``rng`` without ``reproducible``;
        a paper recipe that cannot meet the budget (ε′ ≥ 1).
    """
    epsilon = mechanisms.check_epsilon(epsilon)
    delta = mechanisms.check_delta(delta)
    gen = mechanisms.noise_generator(rng, reproducible)
    op = power.as_operator(T_or_op, rtol)
    d = int(op.dim)
    k = power.check_rank(k, d)
    nb = resolve_neighbour(neighbour, op)
    if method == "robust":
        L = power.resolve_restarts(n_restarts, k)
        R = power.resolve_iters(n_iters, d)
    elif method == "simultaneous":
        L, R = power.resolve_simultaneous(n_restarts, n_iters, k, d)
    else:
        raise ValueError(f"method must be 'robust' or 'simultaneous', got {method!r}")
    K = n_releases(method, k, L, R)
    m, recipe = noise_multiplier(epsilon, delta, K, accounting)

    noise = GaussianReleaseNoise(m, nb, gen)
    if method == "robust":
        res = power.robust_power_method(op, k, n_restarts=L, n_iters=R, rng=gen, noise=noise)
    else:
        res = power.simultaneous_power_method(op, k, n_restarts=L, n_iters=R, rng=gen, noise=noise)
    if noise.apply_releases + noise.value_releases != K:
        raise RuntimeError(f"released {noise.apply_releases + noise.value_releases} noisy values, accounted {K}")

    report = _report(epsilon, delta, K, m, nb, recipe, accounting, noise, private=not reproducible)
    return power.PowerResult(res.eigenvalues, res.eigenvectors, res.method, res.n_restarts, res.n_iters,
                             res.n_applies, res.best_restart, res.restart_values, res.timings_s, report,
                             notes=res.notes)


def _report(epsilon, delta, K, m, nb: Neighbour, recipe, mode, noise: GaussianReleaseNoise,
            private: bool) -> PrivacyReport:
    ledger = PrivacyLedger(private=private)
    d1, d2 = nb.formulas()
    ledger.record(Release("power_iteration", "gaussian", d1, f"{m:.6g}·({d1})", noise.apply_releases,
                          acct.gaussian_event(m, noise.apply_releases), nb.name,
                          "T(I,u,u) released with noise for every restart and iteration", noise.apply_sampler))
    ledger.record(Release("eigenvalue", "gaussian", d2, f"{m:.6g}·({d2})", noise.value_releases,
                          acct.gaussian_event(m, noise.value_releases), nb.name,
                          "T(u,u,u) released with noise for every restart", noise.value_sampler))
    eps_pld = ledger.epsilon(delta, "pld")
    eps_rdp = ledger.epsilon(delta, "rdp")
    eps_exact = acct.gaussian_composition_epsilon(m, K, delta)
    notes = []
    paper = None
    if recipe is not None:
        paper = {"epsilon_prime": recipe.epsilon_prime, "delta_prime": recipe.delta_prime,
                 "advanced_composition_epsilon": recipe.advanced_composition_epsilon,
                 "advanced_composition_delta": recipe.advanced_composition_delta}
        notes.append("paper accounting (Alg. 3 line 2) is a reproduction: advanced composition of its "
                     f"(ε′, δ′) gives ε = {recipe.advanced_composition_epsilon:.3f}, not the target "
                     f"{epsilon:g}; the guarantee rests on the PLD ε = {eps_pld:.4g} of the noise added")
    if eps_pld > epsilon * (1 + 1e-9):
        notes.append(f"PLD accounting certifies only ε = {eps_pld:.4g} > target {epsilon:g}")
    if not private:
        notes.append("not private: the noise came from a user-seeded generator (reproducible mode)")
    nu = nb.apply_coef * m if nb.kind == "entry" else None
    return PrivacyReport(private, mode, epsilon, delta, K, m, nu, nb.name, nb.description, eps_pld, eps_rdp,
                         eps_exact, paper, ledger, tuple(notes))
