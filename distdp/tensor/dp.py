"""Differentially private tensor power method (Wang & Anandkumar 2016, Algorithm 3).

Every ``T(I,u,u)`` the power iteration computes is released with Gaussian
noise ``m·Δ₁(u)·z``, and every eigenvalue ``T(u,u,u)`` with ``m·Δ₂(u)·z``,
where Δ are the sensitivities under the declared neighbour notion and ``m``
the noise multiplier (the same for every release). The best restart is the
one with the largest *noisy* eigenvalue, deflation uses the noisy ``λ̂``, and
``R`` is fixed (no data-dependent stopping). Normalisation, selection and
deflation are post-processing.

Neighbour notions (:class:`Neighbour`: a :class:`~distdp.privacy.neighbours.NeighbourRelation`
and the sensitivities under it)
--------------------------------------------------------------------------------------------------
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

from dataclasses import dataclass

import numpy as np

from distdp.privacy import accounting as acct
from distdp.privacy import mechanisms
from distdp.privacy import neighbours as relations
from distdp.privacy.ledger import PrivacyLedger
from distdp.privacy.neighbours import NeighbourRelation
from distdp.privacy.releases import PrivateReleases
from distdp.privacy.report import PrivacyReport
from distdp.tensor import power

__all__ = ["Neighbour", "SYMMETRIC_ENTRY", "IMTIAZ_SARWATE", "replace_one_point", "resolve_neighbour",
           "GaussianReleaseNoise", "PrivacyReport", "private_power_method", "n_releases",
           "noise_multiplier", "MECHANISM"]

#: The mechanism's name in privacy reports.
MECHANISM = "dp-tensor-power-method"


@dataclass(frozen=True)
class Neighbour:
    """A neighbour relation and the sensitivities of ``T(I,u,u)`` and ``T(u,u,u)`` under it.

    Attributes
    ----------
    relation : NeighbourRelation
        The relation (:mod:`distdp.privacy.neighbours`).
    apply_coef, value_coef : float
        ``kind="entry"``: ``Δ₁(u) = apply_coef·‖u‖∞²``, ``Δ₂(u) = value_coef·‖u‖∞³``.
        ``kind="data"``: ``Δ₁ = apply_coef``, ``Δ₂ = value_coef`` for unit ``u``.
    kind : {"entry", "data"}
    detail : str
        What this instance of the bound assumes (e.g. the public ``n`` and clip bound).
    variant : str
        Which bound, when a relation has several (e.g. ``"whitened STM"``).
    """

    relation: NeighbourRelation
    apply_coef: float
    value_coef: float
    kind: str
    detail: str = ""
    variant: str = ""

    @property
    def name(self) -> str:
        """The relation's name, and the variant of the bound in parentheses."""
        return self.relation.name + (f" ({self.variant})" if self.variant else "")

    @property
    def description(self) -> str:
        """The relation's description, then :attr:`detail`."""
        return self.relation.description + (f"; {self.detail}" if self.detail else "")

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


SYMMETRIC_ENTRY = Neighbour(relations.SYMMETRIC_ENTRY, 6.0, 6.0, "entry")
IMTIAZ_SARWATE = Neighbour(relations.IMTIAZ_SARWATE, 2.0, 2.0, "entry")


def replace_one_point(n: int, bound: float) -> Neighbour:
    """Replace-one neighbours of the empirical moment of ``n`` points with ``‖x‖₂ ≤ bound``.

    ``Δ₁ = Δ₂ = 2·bound³/n`` (see the module docstring); ``n`` is public.
    """
    if n < 1:
        raise ValueError(f"n must be ≥ 1, got {n}")
    bound = mechanisms.check_sensitivity(bound, "clip bound")
    s = 2.0 * bound ** 3 / n
    return Neighbour(relations.REPLACE_ONE_POINT, s, s, "data", f"n = {n} data points, each clipped to ‖x‖₂ ≤ {bound:g}")


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

    Draws through a :class:`~distdp.privacy.releases.PrivateReleases` and
    counts the releases it noises (checked against K at the end of a run);
    :meth:`record` then writes the two ledger records, one per kind.

    Parameters
    ----------
    multiplier : float
    neighbour : Neighbour
    rng : numpy.random.Generator
    releases : PrivateReleases, optional
        Where to record (default: a fresh ledger under ``neighbour.relation``).
    """

    def __init__(self, multiplier: float, neighbour: Neighbour, rng: np.random.Generator,
                 releases: PrivateReleases | None = None):
        self.multiplier = float(multiplier)
        self.neighbour = neighbour
        self.rng = rng
        self.releases = releases if releases is not None else PrivateReleases(PrivacyLedger(), rng, neighbour.relation)
        self.apply_releases = 0
        self.value_releases = 0
        self.apply_sampler = self.value_sampler = ""    # what drew the noise (mechanisms.sampler_name)

    def apply_noise(self, U: np.ndarray) -> np.ndarray:
        """``(d, L)`` noise, column ``l`` ~ ``N(0, (m·Δ₁(u_l))² I)``."""
        self.apply_releases += U.shape[1]
        self.apply_sampler = self.releases.sampler("gaussian", U.size, on_value=False)
        return self.releases.gaussian_noise("power_iteration", U.shape,
                                            self.multiplier * self.neighbour.apply_sensitivity(U),
                                            self.neighbour.formulas()[0], record=False)

    def value_noise(self, U: np.ndarray) -> np.ndarray:
        """``(L,)`` noise, entry ``l`` ~ ``N(0, (m·Δ₂(u_l))²)``."""
        self.value_releases += U.shape[1]
        self.value_sampler = self.releases.sampler("gaussian", U.shape[1], on_value=False)
        return self.releases.gaussian_noise("eigenvalue", U.shape[1],
                                            self.multiplier * self.neighbour.value_sensitivity(U),
                                            self.neighbour.formulas()[1], record=False)

    def record(self) -> None:
        """Record the ``T(I,u,u)`` and ``T(u,u,u)`` releases made so far, one ledger entry each."""
        m = self.multiplier
        d1, d2 = self.neighbour.formulas()
        self.releases.record("power_iteration", "gaussian", d1, f"{m:.6g}·({d1})", self.apply_releases,
                             acct.gaussian_event(m, self.apply_releases),
                             "T(I,u,u) released with noise for every restart and iteration", self.apply_sampler)
        self.releases.record("eigenvalue", "gaussian", d2, f"{m:.6g}·({d2})", self.value_releases,
                             acct.gaussian_event(m, self.value_releases),
                             "T(u,u,u) released with noise for every restart", self.value_sampler)


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
        With ``privacy`` = :class:`~distdp.privacy.report.PrivacyReport`, whose
        ``details`` hold ``releases`` (K), ``noise_multiplier``, ``nu``,
        ``epsilon_pld``, ``epsilon_rdp``, ``epsilon_exact``, ``paper`` (the
        recipe's ε′, δ′ and advanced composition, or None) and
        ``sensitivity`` (the bound's name, Δ₁, Δ₂ and what it assumes).

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

    ledger = PrivacyLedger(private=not reproducible)
    noise = GaussianReleaseNoise(m, nb, gen, PrivateReleases(ledger, gen, nb.relation))
    if method == "robust":
        res = power.robust_power_method(op, k, n_restarts=L, n_iters=R, rng=gen, noise=noise)
    else:
        res = power.simultaneous_power_method(op, k, n_restarts=L, n_iters=R, rng=gen, noise=noise)
    if noise.apply_releases + noise.value_releases != K:
        raise RuntimeError(f"released {noise.apply_releases + noise.value_releases} noisy values, accounted {K}")

    noise.record()
    report = _report(epsilon, delta, K, m, nb, recipe, accounting, ledger, private=not reproducible)
    return power.PowerResult(res.eigenvalues, res.eigenvectors, res.method, res.n_restarts, res.n_iters,
                             res.n_applies, res.best_restart, res.restart_values, res.timings_s, report,
                             notes=res.notes)


def _report(epsilon, delta, K, m, nb: Neighbour, recipe, mode, ledger: PrivacyLedger,
            private: bool) -> PrivacyReport:
    d1, d2 = nb.formulas()
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
    reasons = () if private else ("not private: the noise came from a user-seeded generator (reproducible mode)",)
    nu = nb.apply_coef * m if nb.kind == "entry" else None
    return PrivacyReport(
        private=private, mechanism=MECHANISM, neighbour=nb.relation, epsilon=eps_pld, delta=delta,
        requested_epsilon=epsilon, requested_delta=delta, accounting=mode, not_private_because=reasons,
        assumptions=(nb.detail,) if nb.detail else (), notes=tuple(notes), ledger=ledger,
        details={"releases": K, "noise_multiplier": m, "nu": nu, "epsilon_pld": eps_pld, "epsilon_rdp": eps_rdp,
                 "epsilon_exact": eps_exact, "paper": paper,
                 "sensitivity": {"name": nb.name, "T(I,u,u)": d1, "T(u,u,u)": d2, "detail": nb.detail}})
