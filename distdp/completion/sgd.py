"""Mini-batch SGD on the completion objectives (paper eqs. 6–7), plain or with gradient perturbation.

Choices the paper leaves open (it gives no per-entry gradients, initialisation,
visiting order or per-entry scaling of the regulariser), made here:

- **Per-entry objective.** f = Σ_{e∈Ω} f_e with
  f_e = (x_e − x̂_e)² + λ(‖a_i‖²/n¹_i + ‖b_j‖²/n²_j + ‖c_k‖²/n³_k) + λg‖G‖²/|Ω|,
  n¹_i the number of training entries in slice i of mode 1 (likewise n², n³).
  The per-entry terms sum exactly to eq. (6)/(7), so one pass of per-entry
  steps is one step along the full objective (λg = 0 for CP). The counts
  depend on Ω only, which is public (the values are the private data).
- **Per-entry gradients.** With r_e = 2(x̂_e − x_e):
  ∇_{a_i} f_e = r_e ∂x̂_e/∂a_i + 2λ a_i/n¹_i, likewise b_j, c_k;
  ∇_G f_e = r_e a_i⊗b_j⊗c_k + 2λg G/|Ω| (Tucker).
- **Mini-batches.** Each pass visits the training entries in a fresh random
  order, split into consecutive batches of ``batch_size``; a step subtracts
  η × (sum over the batch of the per-entry gradients), all evaluated at the
  current iterate (the paper's per-entry loop is the case ``batch_size=1``;
  summing rather than averaging keeps η's meaning per entry). Rows are
  scattered with ``np.bincount``.
- **Initialisation.** iid Gaussian with a data-independent scale (see
  ``init_factors`` in :mod:`cp` / :mod:`tucker`).
- **Stopping.** ``epochs`` passes (paper: at most 100); with ``tol > 0``, stop
  early when the objective changes by less than ``tol`` relatively (allowed
  only where the objective is a post-processing of released data, see
  :mod:`distdp.completion.api`).
- **Projection** (optional, ``max_row_norm`` / ``max_core_norm``). The
  initial point and every iterate after a step are projected: each row of A,
  B and C onto the ℓ2 ball of radius r, the Tucker core onto the Frobenius
  ball of radius g (:func:`project`). The radii must be public (declared, or
  derived from declared bounds by :func:`default_radii`), never computed from
  the values. In a private run the projection is post-processing: the
  projected iterate is a function of the released noisy steps and of public
  constants, so it costs no privacy, and the next step's mechanism takes it as
  a public input (adaptive composition). It bounds every prediction:
  |x̂_e| ≤ ‖a_i‖‖b_j‖‖c_k‖ ≤ r³ (CP, Cauchy–Schwarz on Σ_r a_r b_r c_r) and
  |x̂_e| = |G ×1 a_i ×2 b_j ×3 c_k| ≤ ‖G‖_F ‖a_i‖‖b_j‖‖c_k‖ ≤ g r³ (Tucker).
- **Divergence.** Non-finite iterates raise :class:`SGDDivergedError` (a
  ``ValueError``). With the noisy rules the test looks at the iterates only
  (a post-processing of the released noisy steps); with :class:`PlainRule` a
  non-finite objective raises too. A finite blow-up is recorded, not acted
  on: ``SGDTrace.diverged_pass`` is the first pass whose objective exceeds
  ``divergence_factor`` times the larger of the objective of the all-zero
  model (the all-offset predictor once the offset is subtracted,
  f₀ = Σ x_e²) and that of the initial model (so that data the offset fits
  exactly, f₀ ≈ 0, do not flag every run).
  The run still takes its fixed number of passes (stopping on the private
  objective would be a data-dependent choice); the flag is computed from the
  values SGD was given without further noise (raw private values under the
  gradient rules: not covered by their guarantee).

Gradient rules:

- :class:`PlainRule`: the non-private SGD.
- :class:`PaperGradientRule`: paper Alg. 2 as printed — the per-entry gradient
  w.r.t. c_k (including its regulariser term) is clipped to norm m, a fresh
  noise vector of density ∝ exp(−ε‖n‖/Δ), Δ = 2m, is added per entry, A, B,
  G get plain gradients. A reproduction: it carries no valid guarantee.
- :class:`ClippedGaussianRule`: the sound variant (DP-SGD). The per-entry
  gradient of the data term over *all* blocks (a_i, b_j, c_k, G jointly) is
  clipped to norm C; the clipped batch sum gets N(0, (σ·2C)²) noise on every
  coordinate of every row the batch touches and on every coordinate of G;
  the regulariser gradient (a function of the current iterate and of the
  public Ω) is added without clipping.

  Why untouched rows need no noise. Neighbours differ in the value of one
  observed entry; Ω is public and the batches are cut from a permutation
  drawn by a generator that never sees the values, so the set T of rows a
  batch touches (the i, j, k of its entries) is the same for both neighbours
  and is itself public. A row outside T receives no data gradient from the
  batch (no entry of the batch lies in it) and no regulariser gradient (its
  batch count is 0): its released coordinates are exactly 0 for every
  dataset, and releasing a constant reveals nothing. On the coordinates in T
  the clipped sum moves by at most 2C in ℓ2 when one value is replaced (the
  changed entry's rows are in T if it is in the batch; otherwise the sum does
  not move), so the Gaussian mechanism with std σ·2C on those coordinates has
  exactly the guarantee it would have with noise everywhere. The argument
  rests on Ω being public (the neighbour relation above): under a relation
  where observing an entry is private, T would leak it and this would not
  hold (nor would the public slice counts of the regulariser).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import Callable, Optional, Union

import numpy as np

from distdp.completion import cp, tucker
from distdp.completion.entries import Observations, slice_counts
from distdp.privacy.mechanisms import add_gaussian, l2_vector_noise

MODELS: dict[str, ModuleType] = {"cp": cp, "tucker": tucker}


class SGDDivergedError(ValueError, FloatingPointError):
    """The SGD iterates (or, without noise, the objective) became non-finite.

    A ``ValueError`` (bad settings for the data: learning rate too large for
    the scale of the values, no offset) and, for backward compatibility, a
    ``FloatingPointError``.

    Attributes
    ----------
    epoch : int
        The pass in which it happened (1-based).
    """

    def __init__(self, message: str, epoch: int):
        super().__init__(message)
        self.epoch = epoch


@dataclass(frozen=True)
class SGDConfig:
    """Hyper-parameters of the SGD (paper §5.1 defaults for CP).

    Attributes
    ----------
    lr : float
        Learning rate η (paper: 0.005).
    epochs : int
        Passes over the training entries (paper: at most 100).
    batch_size : int
        Entries per step (the paper's loop is 1).
    lam : float
        λ of eq. (6), or λo of eq. (7).
    lam_core : float
        λg of eq. (7) (Tucker only).
    tol : float
        Stop when |Δf|/f < tol between passes; 0 runs all ``epochs``.
    init_scale : float
        Standard deviation of the initial model entries.
    max_row_norm : float or None
        Public radius r: after every step each row of A, B, C is projected
        onto the ℓ2 ball of radius r. None (or inf): no projection.
    max_core_norm : float or None
        Public radius g of the Frobenius ball the Tucker core is projected
        onto. None (or inf): no core projection. Ignored for CP.
    divergence_factor : float
        A pass whose objective exceeds this factor times the larger of the
        all-zero model's and the initial model's objective is recorded as
        diverged (``SGDTrace.diverged_pass``).
    """

    lr: float = 0.005
    epochs: int = 100
    batch_size: int = 64
    lam: float = 0.01
    lam_core: float = 0.0
    tol: float = 0.0
    init_scale: float = 0.1
    max_row_norm: Optional[float] = None
    max_core_norm: Optional[float] = None
    divergence_factor: float = 100.0

    def __post_init__(self):
        for name in ("lr", "init_scale"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("max_row_norm", "max_core_norm"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float, np.floating, np.integer)) and v > 0):
                raise ValueError(f"{name} must be > 0 (or None / inf for no projection), got {v!r}")
        if not self.divergence_factor > 1:
            raise ValueError(f"divergence_factor must be > 1, got {self.divergence_factor}")
        for name in ("epochs", "batch_size"):
            v = getattr(self, name)
            if not (isinstance(v, (int, np.integer)) and v >= 1):
                raise ValueError(f"{name} must be an integer ≥ 1, got {v!r}")
        for name in ("lam", "lam_core", "tol"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be ≥ 0, got {getattr(self, name)}")


@dataclass(frozen=True)
class PlainRule:
    """Non-private SGD."""


@dataclass(frozen=True)
class PaperGradientRule:
    """Paper Alg. 2: clip ∇_{c_k} f_e to ``clip`` (m), add ℓ2-mechanism noise of scale Δ/ε, Δ = 2m."""

    clip: float
    epsilon: float

    @property
    def noise_scale(self) -> float:
        """Δ/ε = 2m/ε: the noise density is ∝ exp(−‖n‖/(Δ/ε))."""
        return 2.0 * self.clip / self.epsilon


@dataclass(frozen=True)
class ClippedGaussianRule:
    """Sound DP-SGD: joint per-entry clipping to ``clip`` (C), Gaussian noise std σ·2C on every batch sum."""

    clip: float
    noise_multiplier: float

    @property
    def noise_std(self) -> float:
        """σ·Δ with Δ = 2C, the ℓ2 sensitivity of a clipped batch sum when one value is replaced."""
        return self.noise_multiplier * 2.0 * self.clip


Rule = Union[PlainRule, PaperGradientRule, ClippedGaussianRule]


@dataclass(frozen=True)
class SGDTrace:
    """What happened during the SGD.

    Attributes
    ----------
    epochs_run : int
    steps : int
        Mini-batch steps taken.
    objective : tuple of float
        Objective (6)/(7) on the training values SGD was given, before the
        first pass and after each pass.
    step_norm : tuple of float
        ‖θ_after − θ_before‖ over each pass (all blocks).
    converged : bool
        Stopped by ``tol`` before ``epochs``.
    seconds : float
    clipped_fraction : float or None
        Share of per-entry gradients that clipping shortened (0 for PlainRule).
        None when withheld (:func:`distdp.completion.complete` withholds it
        under the sound gradient perturbation: it counts raw private values).
    zero_objective : float or None
        Objective of the all-zero model (the all-offset predictor), Σ x_e²
        over the values SGD was given. None when withheld (as above).
    diverged_pass : int or None
        First pass whose objective exceeded ``divergence_factor`` × max(``zero_objective``, ``objective[0]``).
    """

    epochs_run: int
    steps: int
    objective: tuple
    step_norm: tuple
    converged: bool
    seconds: float
    clipped_fraction: Optional[float] = 0.0
    zero_objective: Optional[float] = float("nan")
    diverged_pass: Optional[int] = None

    @property
    def diverged(self) -> bool:
        """The iterates blew up (finite objective far above the all-offset predictor's) in some pass."""
        return self.diverged_pass is not None


def project(factors: list, max_row_norm: Optional[float], max_core_norm: Optional[float] = None) -> None:
    """Project in place: rows of A, B, C onto the ℓ2 ball of radius ``max_row_norm``, G onto the Frobenius ball.

    Euclidean projection onto a ball: a row u with ‖u‖ > r becomes r·u/‖u‖,
    others are unchanged. None or inf skips a projection. A function of the
    iterate and the public radii only (post-processing in a private run).
    """
    if max_row_norm is not None and math.isfinite(max_row_norm):
        for F in factors[:3]:
            norms = np.sqrt(np.einsum("nr,nr->n", F, F))
            F *= (max_row_norm / np.maximum(norms, max_row_norm))[:, None]
    if len(factors) == 4 and max_core_norm is not None and math.isfinite(max_core_norm):
        norm = float(np.sqrt(np.sum(factors[3] ** 2)))
        if norm > max_core_norm:
            factors[3] *= max_core_norm / norm


def default_radii(model_name: str, rank: int, value_bound: float) -> tuple[float, Optional[float]]:
    """Public projection radii (r, g) from a public bound B on |value − offset| and the rank.

    The radii are chosen so that the projected model's range is exactly
    [−B, B], i.e. the smallest balls whose model can still produce every
    value the declared bounds allow:

    - CP: max |x̂| over rows of norm ≤ r is r³ (attained by one aligned
      component), so r = B^(1/3).
    - Tucker: max |x̂| over rows of norm ≤ r and ‖G‖_F ≤ g is g·r³. The split
      between rows and core follows the balance of :func:`tucker.init_factors`
      (all R(n1+n2+n3) + R³ parameters of one magnitude u): r = √R·u,
      g = R^(3/2)·u, and g r³ = R³u⁴ = B gives r = (B/R)^(1/4),
      g = R^(3/4)·B^(1/4).

    No rank-R tensor with entries in [−B, B] is excluded on the grounds of its
    entries alone, but one whose factors cancel (large rows, small entries)
    can need more than r: pass a larger public radius for such models.
    Computed from B and R only; B must come from declared bounds and a
    declared offset, never from the data.

    Parameters
    ----------
    model_name : {'cp', 'tucker'}
    rank : int
    value_bound : float
        B = max(hi − offset, offset − lo) for declared bounds [lo, hi].

    Returns
    -------
    max_row_norm : float
    max_core_norm : float or None
        None for CP.
    """
    if not (math.isfinite(value_bound) and value_bound > 0):
        raise ValueError(f"value_bound must be finite and > 0, got {value_bound}")
    if model_name == "cp":
        return value_bound ** (1.0 / 3.0), None
    if model_name == "tucker":
        return (value_bound / rank) ** 0.25, rank ** 0.75 * value_bound ** 0.25
    raise ValueError(f"model must be one of {sorted(MODELS)}, got {model_name!r}")


def _scatter_rows(index: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    """Σ of ``rows`` (b, R) into an (n, R) matrix at ``index`` (bincount on flattened positions)."""
    R = rows.shape[1]
    flat = (index[:, None] * R + np.arange(R)).ravel()
    return np.bincount(flat, weights=rows.ravel(), minlength=n * R).reshape(n, R)


@dataclass
class _Problem:
    """Fixed quantities of one SGD run (training entries, public counts, model)."""

    model: ModuleType
    obs: Observations
    inv_counts: tuple = field(default=())

    def __post_init__(self):
        self.inv_counts = tuple(1.0 / np.maximum(c, 1) for c in slice_counts(self.obs))


def regulariser_gradient(factors, i, j, k, inv_counts, n_total: int, lam: float, lam_core: float):
    """Σ over a batch of the regulariser part of ∇f_e, as full-size blocks.

    For A: 2λ A ⊙ (number of batch entries in row i)/n¹_i; likewise B, C; for
    G: 2λg G · b/|Ω|.
    """
    out = []
    for F, index, inv in zip(factors[:3], (i, j, k), inv_counts):
        w = np.bincount(index, minlength=F.shape[0]) * inv
        out.append(2.0 * lam * F * w[:, None])
    if len(factors) == 4:
        out.append(2.0 * lam_core * factors[3] * (len(i) / n_total))
    return out


def data_gradient(model, factors, i, j, k, x, weights: Optional[np.ndarray] = None):
    """Σ_e w_e ∇(x_e − x̂_e)² over a batch, as full-size blocks; also the per-entry pieces.

    Returns
    -------
    grads : list of ndarray
        Blocks shaped like ``factors``.
    resid : ndarray (b,)
        r_e = 2(x̂_e − x_e).
    rows : tuple of 3 ndarray (b, R)
        ∂x̂_e/∂a_i, ∂x̂_e/∂b_j, ∂x̂_e/∂c_k.
    """
    pred, rows = model.partials(factors, i, j, k)
    resid = 2.0 * (pred - x)
    coef = resid if weights is None else resid * weights
    grads = [_scatter_rows(index, coef[:, None] * d, F.shape[0]) for F, index, d in zip(factors[:3], (i, j, k), rows)]
    if len(factors) == 4:
        grads.append(model.core_partials_sum(factors, i, j, k, coef))
    return grads, resid, rows


def full_gradient(model, factors, obs: Observations, lam: float, lam_core: float = 0.0):
    """∇f of eq. (6)/(7) over all of ``obs`` (the sum of every per-entry gradient)."""
    i, j, k = obs.idx.T
    inv = tuple(1.0 / np.maximum(c, 1) for c in slice_counts(obs))
    g, _, _ = data_gradient(model, factors, i, j, k, obs.values)
    r = regulariser_gradient(factors, i, j, k, inv, obs.n, lam, lam_core)
    return [a + b for a, b in zip(g, r)]


def _step_plain(model, factors, i, j, k, x, prob, cfg, rule, noise_rng):
    g, _, _ = data_gradient(model, factors, i, j, k, x)
    r = regulariser_gradient(factors, i, j, k, prob.inv_counts, prob.obs.n, cfg.lam, cfg.lam_core)
    return [a + b for a, b in zip(g, r)], 0


def _step_paper(model, factors, i, j, k, x, prob, cfg, rule: PaperGradientRule, noise_rng):
    """Paper Alg. 2, lines 4–9, for a batch: plain a, b, G; clipped + noised per-entry c_k gradients."""
    pred, rows = model.partials(factors, i, j, k)
    resid = 2.0 * (pred - x)
    C = factors[2]
    gc = resid[:, None] * rows[2] + 2.0 * cfg.lam * C[k] * prob.inv_counts[2][k][:, None]
    norms = np.linalg.norm(gc, axis=1)
    scale = 1.0 / np.maximum(1.0, norms / rule.clip)
    gc = gc * scale[:, None] + l2_vector_noise(C.shape[1], 1.0 / rule.noise_scale, noise_rng, size=len(k))
    grads = [_scatter_rows(i, resid[:, None] * rows[0], factors[0].shape[0]),
             _scatter_rows(j, resid[:, None] * rows[1], factors[1].shape[0]),
             _scatter_rows(k, gc, C.shape[0])]
    if len(factors) == 4:
        grads.append(model.core_partials_sum(factors, i, j, k, resid))
    reg = regulariser_gradient(factors, i, j, k, prob.inv_counts, prob.obs.n, cfg.lam, cfg.lam_core)
    reg[2] = 0.0  # C's regulariser is inside the clipped gradient
    return [a + b for a, b in zip(grads, reg)], int(np.sum(scale < 1.0))


def _step_dpsgd(model, factors, i, j, k, x, prob, cfg, rule: ClippedGaussianRule, noise_rng):
    """Joint per-entry clipping of the data gradient over all blocks, Gaussian noise on every coordinate."""
    pred, rows = model.partials(factors, i, j, k)
    resid = 2.0 * (pred - x)
    sq = sum(np.einsum("br,br->b", d, d) for d in rows) + model.core_partial_sqnorm(factors, i, j, k)
    norms = np.abs(resid) * np.sqrt(sq)
    scale = 1.0 / np.maximum(1.0, norms / rule.clip)
    g, _, _ = data_gradient(model, factors, i, j, k, x, weights=scale)
    std = rule.noise_std
    for block, index in zip(g[:3], (i, j, k)):        # noise on the rows the batch touches (public set)
        rows = np.unique(index)
        block[rows] = add_gaussian(block[rows], std, noise_rng)
    if len(g) == 4:                                    # every entry touches the core
        g[3] = add_gaussian(g[3], std, noise_rng)
    r = regulariser_gradient(factors, i, j, k, prob.inv_counts, prob.obs.n, cfg.lam, cfg.lam_core)
    return [a + b for a, b in zip(g, r)], int(np.sum(scale < 1.0))


_STEPS = {PlainRule: _step_plain, PaperGradientRule: _step_paper, ClippedGaussianRule: _step_dpsgd}


def run_sgd(model_name: str, train: Observations, rank: int, cfg: SGDConfig, rng: np.random.Generator,
            rule: Rule = PlainRule(), noise_rng: Optional[np.random.Generator] = None,
            progress: Optional[Callable[[int, int, float], None]] = None):
    """Fit CP (eq. 6) or Tucker (eq. 7) factors to the training entries by mini-batch SGD.

    Parameters
    ----------
    model_name : {'cp', 'tucker'}
    train : Observations
        Training entries (values as SGD should see them, e.g. already perturbed).
    rank : int
        R (CP rank; Tucker core R×R×R).
    cfg : SGDConfig
    rng : numpy.random.Generator
        Initialisation and visiting order (data-independent).
    rule : PlainRule, PaperGradientRule or ClippedGaussianRule
    noise_rng : numpy.random.Generator, optional
        Gradient noise; required by the noisy rules.
    progress : callable(epoch, epochs, objective), optional
        Called after each pass.

    Returns
    -------
    factors : tuple of ndarray
        (A, B, C) or (A, B, C, G).
    trace : SGDTrace

    Raises
    ------
    SGDDivergedError
        The iterates became non-finite, or (PlainRule) the objective did
        (learning rate too large for the data scale). A ``ValueError`` and a
        ``FloatingPointError``. A finite blow-up does not raise: see
        ``SGDTrace.diverged_pass``.
    """
    if model_name not in MODELS:
        raise ValueError(f"model must be one of {sorted(MODELS)}, got {model_name!r}")
    if not isinstance(rank, (int, np.integer)) or rank <= 0:
        raise ValueError(f"rank must be a positive integer, got {rank!r}")
    if not isinstance(rule, PlainRule) and noise_rng is None:
        raise ValueError(f"{type(rule).__name__} needs a noise generator")
    model = MODELS[model_name]
    t0 = time.perf_counter()
    prob = _Problem(model, train)
    factors = list(model.init_factors(train.shape, int(rank), cfg.init_scale, rng))
    project(factors, cfg.max_row_norm, cfg.max_core_norm)
    step = _STEPS[type(rule)]
    idx, x = train.idx, train.values
    zero_objective = float(x @ x)
    f = model.objective(factors, idx, x, cfg.lam, cfg.lam_core)
    with np.errstate(over="ignore", invalid="ignore"):   # a blow-up is detected in _passes and raised with advice
        factors, objective, step_norm, steps, clipped, converged, diverged_pass = _passes(
            model, factors, prob, cfg, rule, rng, noise_rng, progress, step, f, zero_objective)
    trace = SGDTrace(epochs_run=len(step_norm), steps=steps, objective=tuple(objective), step_norm=tuple(step_norm),
                     converged=converged, seconds=time.perf_counter() - t0,
                     clipped_fraction=clipped / max(1, len(step_norm) * train.n), zero_objective=zero_objective,
                     diverged_pass=diverged_pass)
    return tuple(factors), trace


def _passes(model, factors, prob, cfg, rule, rng, noise_rng, progress, step, f, zero_objective):
    """The passes of :func:`run_sgd`; returns the final factors and the trace's raw lists and counts."""
    train = prob.obs
    idx, x = train.idx, train.values
    objective, step_norm, steps, clipped, converged, diverged_pass = [f], [], 0, 0, False, None
    blowup = cfg.divergence_factor * max(zero_objective, f)
    for epoch in range(1, cfg.epochs + 1):
        before = [F.copy() for F in factors]
        perm = rng.permutation(train.n)
        for start in range(0, train.n, cfg.batch_size):
            b = perm[start:start + cfg.batch_size]
            grads, n_clip = step(model, factors, idx[b, 0], idx[b, 1], idx[b, 2], x[b], prob, cfg, rule, noise_rng)
            for F, g in zip(factors, grads):
                F -= cfg.lr * g
            project(factors, cfg.max_row_norm, cfg.max_core_norm)
            steps += 1
            clipped += n_clip
        f_new = model.objective(factors, idx, x, cfg.lam, cfg.lam_core)
        # noisy rules: test the iterates (released, noisy) only, never the raw-value objective
        blown = (not all(np.isfinite(F).all() for F in factors)) or (isinstance(rule, PlainRule)
                                                                    and not np.isfinite(f_new))
        if blown:
            raise SGDDivergedError(f"SGD diverged in pass {epoch} (lr={cfg.lr}, batch_size={cfg.batch_size}): "
                                   "lower the learning rate or the batch size, or rescale the values", epoch)
        if diverged_pass is None and f_new > blowup:
            diverged_pass = epoch
        step_norm.append(float(np.sqrt(sum(np.sum((F - G) ** 2) for F, G in zip(factors, before)))))
        objective.append(f_new)
        if progress is not None:
            progress(epoch, cfg.epochs, f_new)
        if cfg.tol > 0 and abs(f - f_new) <= cfg.tol * max(abs(f), 1e-300):
            converged = True
            break
        f = f_new
    return factors, objective, step_norm, steps, clipped, converged, diverged_pass
