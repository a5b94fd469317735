"""Python API of DP tensor completion: :func:`complete` returns a :class:`CompletionResult`.

    >>> from distdp.completion import complete
    >>> res = complete("ratings.parquet", rank=3, model="cp", perturbation="gradient",
    ...                epsilon=1.0, delta=1e-6)                                  # doctest: +SKIP
    >>> res.test_rmse, res.privacy.epsilon                                       # doctest: +SKIP

Randomness: ``seed`` fixes the train/test split, the initialisation and the
visiting order (none of which depends on the data values). The noise of a
private fit always comes from OS entropy, unless ``reproducible=True``; then it
is derived from ``seed`` too and the privacy report says the fit is not private.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional, Union

import numpy as np

from distdp.completion import perturbation as pt
from distdp.completion.entries import Observations, split_holdout
from distdp.privacy.mechanisms import check_delta, check_epsilon, private_generator
from distdp.completion.sgd import (MODELS, ClippedGaussianRule, PaperGradientRule, PlainRule, SGDConfig, SGDTrace,
                                   default_radii, run_sgd)

DEFAULT_LAMBDA = {"cp": (0.01, 0.0), "tucker": (0.001, 0.0001)}   # paper §5.1: λ; λo, λg


class NotPrivateWarning(UserWarning):
    """A perturbation was requested but the fit carries no DP guarantee (e.g. bounds computed from the data)."""


class DivergenceWarning(UserWarning):
    """The SGD iterates blew up (objective far above the all-offset predictor's) while staying finite."""


@dataclass(frozen=True)
class CompletionResult:
    """A fitted completion model and what it cost.

    Attributes
    ----------
    model : {'cp', 'tucker'}
    rank : int
    A, B, C : ndarray
        Factor matrices (n1×R, n2×R, n3×R), as released (C noisy under output perturbation).
    G : ndarray or None
        Tucker core (R×R×R); None for CP.
    offset : float
        Public constant subtracted from the values before fitting and added back by :meth:`predict`.
    test_rmse : float or None
        RMSE on the held-out entries (None without a holdout).
    train_rmse : float
        RMSE on the training entries as given (raw values).
    n_train, n_test : int
    trace : SGDTrace
        Passes, steps, objective per pass, convergence.
    privacy : PrivacyReport
    timings : dict
        Seconds: ``perturb``, ``sgd``, ``total``.
    config : dict
        Every parameter of the fit.
    """

    model: str
    rank: int
    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    G: Optional[np.ndarray]
    offset: float
    test_rmse: Optional[float]
    train_rmse: float
    n_train: int
    n_test: int
    trace: SGDTrace
    privacy: pt.PrivacyReport
    timings: dict
    config: dict

    @property
    def factors(self) -> tuple:
        """(A, B, C) or (A, B, C, G)."""
        return (self.A, self.B, self.C) if self.G is None else (self.A, self.B, self.C, self.G)

    def predict(self, i, j, k) -> np.ndarray:
        """Completed values at entries (i, j, k)."""
        i, j, k = (np.asarray(x, dtype=np.int64) for x in (i, j, k))
        return MODELS[self.model].predict(self.factors, i, j, k) + self.offset

    def full_tensor(self) -> np.ndarray:
        """The completed dense tensor (small tensors only)."""
        return MODELS[self.model].full_tensor(self.factors) + self.offset

    def report(self) -> dict:
        """JSON-ready summary (what ``report.json`` holds)."""
        t = self.trace
        return {"model": self.model, "rank": self.rank, "shape": [self.A.shape[0], self.B.shape[0], self.C.shape[0]],
                "test_rmse": self.test_rmse, "train_rmse": self.train_rmse, "n_train": self.n_train,
                "n_test": self.n_test, "offset": self.offset,
                "convergence": {"epochs_run": t.epochs_run, "steps": t.steps, "converged": t.converged,
                                "objective": list(t.objective), "step_norm": list(t.step_norm),
                                "clipped_fraction": t.clipped_fraction, "zero_objective": t.zero_objective,
                                "diverged_pass": t.diverged_pass},
                "timings_s": self.timings, "privacy": self.privacy.to_dict(), "config": self.config}


def _rmse(pred: np.ndarray, truth: np.ndarray) -> float:
    return float(np.sqrt(np.mean((pred - truth) ** 2)))


def _load(data, shape) -> Observations:
    if isinstance(data, Observations):
        return data
    if isinstance(data, np.ndarray):
        from distdp.completion.entries import from_dense

        return from_dense(data)
    from distdp.completion.io import load_observations

    return load_observations(data, shape=shape)


def complete(data: Union[Observations, np.ndarray, str, Path], rank: int, *, model: str = "cp",
             perturbation: str = "none", epsilon: Optional[float] = None, delta: Optional[float] = None,
             holdout: float = 0.2, bounds: Optional[tuple[float, float]] = None, allow_data_bounds: bool = False,
             clamp_noisy: bool = True, clip: float = 0.1, lipschitz: float = 1.0, lr: float = 0.05,
             epochs: int = 100, batch_size: int = 64, lam: Optional[float] = None, lam_core: Optional[float] = None,
             tol: float = 0.0, init_scale: float = 0.1, offset: float = 0.0,
             max_row_norm: Optional[float] = None, max_core_norm: Optional[float] = None,
             seed: Optional[int] = None,
             reproducible: bool = False, shape: Optional[tuple[int, int, int]] = None,
             progress: Optional[Callable[[int, int, float], None]] = None,
             test: Optional[Observations] = None) -> CompletionResult:
    """Complete a partially observed 3-way tensor by CP (eq. 6) or Tucker (eq. 7) SGD, optionally with DP.

    Parameters
    ----------
    data : Observations, ndarray with NaN for missing, or path (.parquet COO / .npy)
    rank : int
        CP rank R, or the Tucker core size R×R×R.
    model : {'cp', 'tucker'}
    perturbation : {'none', 'input', 'gradient', 'gradient-paper', 'output'}
        ``input``: Alg. 1 (ε-DP with declared ``bounds``). ``gradient``: sound
        DP-SGD, (ε, δ)-DP by PLD accounting over all steps. ``gradient-paper``
        (Alg. 2) and ``output`` (Alg. 3): reproductions, no guarantee claimed.
    epsilon, delta : float
        Privacy budget (δ only for ``gradient``; default min(1e-5, 1/(10 n_train))).
    holdout : float
        Share of the observed entries held out for the test RMSE (paper: 0.2).
    bounds : (lo, hi), optional
        Declared public value range. ``input``: required unless
        ``allow_data_bounds`` (values are clamped to it). ``gradient``: used
        only to derive the default projection radii (no clamping: clipping
        bounds the sensitivity).
    allow_data_bounds : bool
        Compute the bounds from the private data instead (warns; the report says not private).
    clamp_noisy : bool
        ``input``: clamp the noisy values back into the bounds (post-processing).
    clip : float
        ``gradient``: C, the per-entry clipping norm; ``gradient-paper``: m.
    lipschitz : float
        ``output``: L in Δ = 2τLη (the paper gives none).
    lr, epochs, batch_size, tol, init_scale
        SGD settings (:class:`distdp.completion.sgd.SGDConfig`).
    lam, lam_core : float, optional
        λ (λo) and λg; default the paper's (CP 0.01; Tucker 0.001, 0.0001).
    offset : float
        Public constant subtracted from the values before fitting (e.g. the
        midpoint of the declared range); must not be computed from the data.
    max_row_norm : float, optional
        Public radius r: after every SGD step each row of A, B, C is projected
        onto the ℓ2 ball of radius r (post-processing of the released
        iterates: no privacy cost). ``gradient``: default derived from the
        declared ``bounds``, ``offset`` and ``rank`` by
        :func:`distdp.completion.sgd.default_radii` (CP r = B^(1/3), Tucker
        r = (B/R)^(1/4), B = max(hi − offset, offset − lo)); without bounds,
        no projection (warns). Other perturbations: no projection unless
        given. ``math.inf`` disables it.
    max_core_norm : float, optional
        Tucker: public radius g of the Frobenius ball for the core. Default
        (when rows are projected and bounds are declared) B / r³, so that the
        projected model's range is [−B, B] (with the default r:
        g = R^(3/4)·B^(1/4)).
    seed : int, optional
        Fixes split, initialisation and visiting order (and the noise only with ``reproducible``).
    reproducible : bool
        Seed the noise too; the fit is then reported as not private.
    shape : tuple, optional
        Tensor shape for a COO file without it in its metadata.
    progress : callable(epoch, epochs, objective), optional
    test : Observations, optional
        Explicit test entries (then ``holdout`` is not used).

    Returns
    -------
    CompletionResult

    Raises
    ------
    ValueError
        Bad input or parameters (rank ≤ 0, ε ≤ 0, missing bounds, ...).
    """
    t0 = time.perf_counter()
    if perturbation not in pt.PERTURBATIONS:
        raise ValueError(f"perturbation must be one of {pt.PERTURBATIONS}, got {perturbation!r}")
    if model not in MODELS:
        raise ValueError(f"model must be one of {sorted(MODELS)}, got {model!r}")
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank <= 0:
        raise ValueError(f"rank must be a positive integer, got {rank!r}")
    if perturbation != "none":
        check_epsilon(epsilon)
    if reproducible and seed is None:
        raise ValueError("reproducible=True needs a seed")
    if perturbation in ("gradient", "gradient-paper", "output") and tol > 0:
        raise ValueError(f"tol > 0 stops on the private objective, a data-dependent choice: not allowed with "
                         f"perturbation={perturbation!r} (use a fixed number of epochs)")
    if not math.isfinite(offset):
        raise ValueError(f"offset must be finite, got {offset}")
    dlam, dlam_core = DEFAULT_LAMBDA[model]
    radii = _projection_radii(model, int(rank), perturbation, bounds, offset, max_row_norm, max_core_norm)
    cfg = SGDConfig(lr=lr, epochs=epochs, batch_size=batch_size, lam=dlam if lam is None else lam,
                    lam_core=dlam_core if lam_core is None else lam_core, tol=tol, init_scale=init_scale,
                    max_row_norm=radii["max_row_norm"], max_core_norm=radii["max_core_norm"])
    obs = _load(data, shape)
    rng = np.random.default_rng(seed)
    if test is None:
        train, test = split_holdout(obs, holdout, rng)
    else:
        train = obs
    noise_rng = np.random.default_rng([int(seed), 0xD1F]) if reproducible else private_generator()
    x = train.values
    t_perturb = time.perf_counter()
    rule = PlainRule()
    info = {}
    if perturbation == "none":
        report = pt.none_report()
    elif perturbation == "input":
        declared = bounds is not None
        if not declared:
            if not allow_data_bounds:
                raise ValueError("input perturbation needs declared public value bounds (bounds=(lo, hi) / "
                                 "--bounds LO HI): bounds computed from the private data leak it "
                                 "(allow_data_bounds=True / --allow-data-bounds to do it anyway, not private)")
            bounds = (float(x.min()), float(x.max()))
            if bounds[0] == bounds[1]:
                bounds = (bounds[0], bounds[0] + 1.0)
            warnings.warn(f"NOT PRIVATE: input-perturbation bounds {bounds} computed from the private data; "
                          "the sensitivity and the bounds leak it. Declare public bounds for a guarantee.",
                          NotPrivateWarning, stacklevel=2)
        lo, hi = pt.check_bounds(bounds)
        x, n_clamped = pt.input_perturbation(x, (lo, hi), epsilon, noise_rng, clamp_noisy=clamp_noisy)
        report = pt.input_report(epsilon, (lo, hi), train.n, declared, clamp_noisy)
        info["n_clamped"] = n_clamped
    elif perturbation == "gradient":
        if delta is None:
            delta = min(1e-5, 1.0 / (10 * train.n))
        check_delta(delta)
        if delta >= 1.0 / train.n:
            warnings.warn(f"delta={delta} ≥ 1/n_train = {1 / train.n:.3g}: a mechanism releasing one entry at "
                          "random meets it; use δ ≪ 1/n", UserWarning, stacklevel=2)
        _check_positive("clip", clip)
        sigma = pt.dpsgd_noise_multiplier(epochs, epsilon, delta)
        if radii["warn"]:
            warnings.warn("gradient perturbation without declared bounds or max_row_norm: the iterates are not "
                          "projected and can blow up at small ε; declare public bounds (--bounds) or a radius "
                          "(--max-row-norm)", UserWarning, stacklevel=2)
        rule = ClippedGaussianRule(clip=clip, noise_multiplier=sigma)
    elif perturbation == "gradient-paper":
        _check_positive("clip", clip)
        rule = PaperGradientRule(clip=clip, epsilon=epsilon)
    elif perturbation == "output":
        _check_positive("lipschitz", lipschitz)
    t_perturb = time.perf_counter() - t_perturb

    factors, trace = run_sgd(model, train.with_values(x - offset), int(rank), cfg, rng, rule,
                             noise_rng=noise_rng, progress=progress)
    factors = list(factors)
    if perturbation == "gradient":
        report = pt.dpsgd_report(rule.noise_multiplier, clip, trace.epochs_run, trace.steps, batch_size, delta,
                                 epsilon, blocks="A, B, C" + (", G" if model == "tucker" else ""))
    elif perturbation == "gradient-paper":
        report = pt.paper_gradient_report(clip, epsilon, trace.steps, trace.epochs_run * train.n)
    elif perturbation == "output":
        t1 = time.perf_counter()
        sens = pt.output_sensitivity(trace.epochs_run, lipschitz, lr)
        factors[2] = pt.output_perturbation(factors[2], epsilon, sens, noise_rng)
        report = pt.output_report(epsilon, sens, trace.epochs_run, lipschitz, lr, factors[2].shape[0])
        t_perturb += time.perf_counter() - t1
    report = replace(report, assumptions=report.assumptions + (radii["statement"],))
    if perturbation != "none":
        report = replace(report, not_covered=report.not_covered + (
            "train_rmse: computed from the private training values without noise",
            "trace.diverged_pass: compares the private training objective, without noise, with the "
            "all-offset predictor's"))
    if trace.diverged:
        warnings.warn(f"SGD iterates blew up: the training objective exceeded {cfg.divergence_factor:g}× that of "
                      f"the all-offset predictor from pass {trace.diverged_pass} "
                      f"(objective {trace.objective[-1]:.4g} vs {trace.zero_objective:.4g}); the result is worse "
                      "than predicting the offset. Lower the learning rate, or project the iterates "
                      "(max_row_norm / --max-row-norm, or declare bounds).", DivergenceWarning, stacklevel=2)
    if reproducible and perturbation != "none":
        report = pt.mark_seeded(report, seed)
    elif seed is not None and perturbation != "none":
        report = replace(report, assumptions=report.assumptions + (
            f"seed {seed} fixed the split, initialisation and visiting order only (data-independent); the noise "
            "came from OS entropy",))

    m = MODELS[model]
    train_rmse = _rmse(m.predict(factors, *train.idx.T) + offset, train.values)
    test_rmse = None if test is None else _rmse(m.predict(factors, *test.idx.T) + offset, test.values)
    config = {"model": model, "rank": int(rank), "perturbation": perturbation, "epsilon": epsilon,
              "delta": delta if perturbation == "gradient" else None, "holdout": holdout,
              "bounds": list(bounds) if bounds is not None else None, "clamp_noisy": clamp_noisy, "clip": clip,
              "lipschitz": lipschitz, "lr": lr, "epochs": epochs, "batch_size": batch_size, "lam": cfg.lam,
              "lam_core": cfg.lam_core, "tol": tol, "init_scale": init_scale, "offset": offset,
              "max_row_norm": cfg.max_row_norm, "max_core_norm": cfg.max_core_norm,
              "projection_radii_from": radii["source"], "seed": seed,
              "reproducible": reproducible, **info}
    return CompletionResult(model=model, rank=int(rank), A=factors[0], B=factors[1], C=factors[2],
                            G=factors[3] if model == "tucker" else None, offset=float(offset), test_rmse=test_rmse,
                            train_rmse=train_rmse, n_train=train.n, n_test=0 if test is None else test.n,
                            trace=trace, privacy=report,
                            timings={"perturb": t_perturb, "sgd": trace.seconds, "total": time.perf_counter() - t0},
                            config=config)


def _projection_radii(model: str, rank: int, perturbation: str, bounds, offset: float, max_row_norm,
                      max_core_norm) -> dict:
    """The public projection radii of a fit, where they come from, and the privacy report's sentence on them."""
    for name, v in (("max_row_norm", max_row_norm), ("max_core_norm", max_core_norm)):
        if v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0):
            raise ValueError(f"{name} must be a number > 0 (math.inf: no projection), got {v!r}")
    B = None
    if bounds is not None:
        lo, hi = pt.check_bounds(bounds)
        B = max(hi - offset, offset - lo)      # > 0 since lo < hi
    source = "given"
    unprojected_gradient = max_row_norm is None and perturbation == "gradient" and B is None
    if max_row_norm is None and perturbation == "gradient":
        if B is not None:
            max_row_norm, default_core = default_radii(model, rank, B)
            if max_core_norm is None:
                max_core_norm = default_core
            source = f"derived from the declared bounds and offset: B = {B:g}, rank {rank}"
    if max_row_norm is None or not math.isfinite(max_row_norm):
        max_row_norm = None
    if model == "tucker" and max_core_norm is None and max_row_norm is not None and B is not None:
        max_core_norm = B / max_row_norm ** 3
        source += "; core radius B/r³"
    if model != "tucker" or (max_core_norm is not None and not math.isfinite(max_core_norm)):
        max_core_norm = None
    if max_row_norm is None and max_core_norm is None:
        return {"max_row_norm": None, "max_core_norm": None, "source": None, "warn": unprojected_gradient,
                "statement": "no projection of the iterates"}
    what = ", ".join(x for x in (f"every row of A, B, C onto the ℓ2 ball of radius r = {max_row_norm:.6g}"
                                 if max_row_norm is not None else "",
                                 f"the core onto the Frobenius ball of radius {max_core_norm:.6g}"
                                 if max_core_norm is not None else "") if x)
    why = {"gradient": "post-processing of the released noisy iterates with public radii: no privacy cost",
           "input": "part of the SGD on the released noisy values (post-processing): no privacy cost",
           "none": "a constraint of the (non-private) fit",
           }.get(perturbation, "a deviation from the paper's algorithm (which has no projection); it changes "
                               "nothing in the privacy analysis above")
    return {"max_row_norm": max_row_norm, "max_core_norm": max_core_norm, "source": source, "warn": False,
            "statement": f"projection after every step ({source}): {what}; {why}"}


def _check_positive(name: str, value) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
