"""Python API of DP tensor completion: :func:`complete` returns a :class:`CompletionResult`.

    >>> from distdp.completion import Perturbation, complete
    >>> res = complete("ratings.parquet", rank=3, model="cp", bounds=(1, 5),
    ...                perturbation=Perturbation("gradient", epsilon=1.0, delta=1e-6))  # doctest: +SKIP
    >>> res.test_rmse, res.privacy.epsilon                                       # doctest: +SKIP

Randomness: ``seed`` fixes the train/test split, the initialisation and the
visiting order (none of which depends on the data values). The noise of a
private fit always comes from OS entropy, unless ``Perturbation(reproducible=True)``; then it
is derived from ``seed`` too and the privacy report says the fit is not private.

Error messages name the parameters as the caller knows them: the Python
names by default, the command-line flags inside :func:`parameter_names` (the
CLI passes ``{"lr": "--lr", ...}``).
"""
from __future__ import annotations

import contextlib
import contextvars
import math
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator, Mapping, Optional, Union

import numpy as np

from distdp.completion import perturbation as pt
from distdp.completion.als import NOISY_SEARCH, ALSConfig, LambdaSearch, choose_lambda, dense_enough, run_als
from distdp.completion.entries import Observations, split_holdout
from distdp.privacy.mechanisms import (OPENDP_MAX_ENTRIES, check_delta, check_epsilon, private_generator,
                                      sampler_name)
from distdp.completion.sgd import (MODELS, ClippedGaussianRule, PaperGradientRule, PlainRule, SGDConfig,
                                   SGDDivergedError, SGDTrace, default_radii, run_sgd)

DEFAULT_LAMBDA = {"cp": (0.01, 0.0), "tucker": (0.001, 0.0001)}   # paper §5.1: λ; λo, λg
DEFAULT_CLIP, DEFAULT_LIPSCHITZ = 0.1, 1.0   # clip: gradient's C / gradient-paper's m; output's L
SOLVERS = ("auto", "als", "sgd")
SGD_DEFAULTS = {"lr": 0.05, "batch_size": 64, "epochs": 100, "tol": 0.0}
ALS_DEFAULTS = {"epochs": 500, "tol": 1e-5}   # at most 500 sweeps; stop at a relative decrease < 1e-5
# Under input perturbation the values are noisy: a tighter stop and a tighter λ path (als.NOISY_SEARCH) predict
# better there (benchmarks/completion_lambda.py --noisy-search), and time is not what such a fit is judged by.
ALS_NOISY_TOL = 1e-7
# ALS default λ (λo) = c·σ^p, σ the standard deviation of the values it fits (Tucker λg = λo / 10, the paper's
# ratio). p makes the fit scale-equivariant: multiplying the values by s multiplies eq. (6)'s data term by s²
# and, at the penalty-optimal gauge, the CP penalty by λ s^(2/3) (three blocks of norm² ∝ s^(2/3)) and the
# Tucker penalty by λ s^(1/2) (four blocks), so λ ∝ s^(4/3) (CP), s^(3/2) (Tucker) gives the same fit, scaled.
# c was chosen on the benchmark tensors (benchmarks/completion_quality.py): the paper's fixed λ (made for
# values in [0, 1]) let rank-5 fits of real tensors overfit (COVID-19 serology: test RMSE 2.8 CP, 21 Tucker),
# and λ ∝ σ² collapsed fits of large-valued tensors (Indian Pines, kinetic) to the mean.
ALS_LAMBDA_SCALE = {"cp": (0.5, 4.0 / 3.0), "tucker": (2.0, 1.5)}   # (c, p)
SGD_ONLY = ("lr", "batch_size", "max_row_norm", "max_core_norm")   # settings that mean SGD (projection: per step)


def als_lambda(model: str, var: float, lam: Optional[float], lam_core: Optional[float], noisy: bool = False) -> tuple:
    """ALS's λ and λg before any search: the values given, or the scale rule c·σ^p (λg = λ/10) from ``var``.

    Parameters
    ----------
    model : {'cp', 'tucker'}
    var : float
        Variance σ² of the values the fit sees.
    lam, lam_core : float or None
        The caller's λ (λo) and λg.
    noisy : bool
        The values are the noisy released ones (input perturbation): said in the source.

    Returns
    -------
    lam, lam_core : float or None
        None where neither a value nor the rule applies (σ = 0: the paper's defaults).
    source : str
        How λ was set (``config['lam_source']``).
    search : bool
        Whether λ is to be chosen by :func:`distdp.completion.als.choose_lambda` from this start:
        the rule set λ and no λg was given (CP has none).
    """
    if lam is not None or var <= 0:
        return lam, lam_core, "given" if lam is not None else "paper default", False
    c, power = ALS_LAMBDA_SCALE[model]
    lam = c * math.sqrt(var) ** power
    source = (f"{c:g}·σ^{power:.4g}, σ the standard deviation of the values fitted"
              + (" (the noisy released values)" if noisy else ""))
    search = lam_core is None or model == "cp"
    if lam_core is None and model == "tucker":
        lam_core = lam / 10.0
    return lam, lam_core, source, search


@dataclass(frozen=True)
class Perturbation:
    """How a completion fit is made private (paper §4.2–4.4), given as ``complete(..., perturbation=...)``.

    The values are checked by :func:`complete`, whose messages name them as
    the caller knows them (:func:`parameter_names`).

    Parameters
    ----------
    kind : {'none', 'input', 'gradient', 'gradient-paper', 'output'}
        ``input``: Alg. 1 (ε-DP with declared ``bounds``). ``gradient``: sound
        DP-SGD, (ε, δ)-DP by PLD accounting over all steps. ``gradient-paper``
        (Alg. 2) and ``output`` (Alg. 3): reproductions, no guarantee claimed.
        ``none`` is the same as no perturbation.
    epsilon, delta : float, optional
        Privacy budget: ``epsilon`` is required by every perturbation and
        refused without one; ``delta`` only for ``gradient`` (default
        min(1e-5, 1/(10 n_train))) and refused by the others.
    clip : float, optional
        ``gradient``: C, the per-entry clipping norm; ``gradient-paper``: m
        (default 0.1; refused by the other perturbations).
    lipschitz : float, optional
        ``output``: L in Δ = 2τLη, the paper gives none (default 1; refused by
        the other perturbations).
    allow_data_bounds : bool, default=False
        ``input``: compute the bounds from the private data instead (warns;
        the report says not private).
    clamp_noisy : bool, default=True
        ``input``: clamp the noisy values back into the bounds (post-processing).
    reproducible : bool, default=False
        Seed the noise from ``complete``'s ``seed`` too; the fit is then
        reported as not private.
    """

    kind: str
    epsilon: Optional[float] = None
    delta: Optional[float] = None
    clip: Optional[float] = None
    lipschitz: Optional[float] = None
    allow_data_bounds: bool = False
    clamp_noisy: bool = True
    reproducible: bool = False


@dataclass(frozen=True)
class CompletionSolver:
    """The optimiser of a completion fit, given as ``complete(..., solver=...)``; None fields take the defaults.

    Parameters
    ----------
    method : {'auto', 'als', 'sgd'}, default='auto'
        ``auto``: ALS for no perturbation and ``input`` unless an SGD-only
        setting (``lr``, ``batch_size``, or ``complete``'s ``max_row_norm``,
        ``max_core_norm``) is given; SGD for the other perturbations (``als``
        is refused there). ``config['solver']`` says which ran.
    lr, batch_size : optional
        SGD only: learning rate η (default 0.05) and entries per step (64).
    epochs : int, optional
        SGD: passes (default 100). ALS: the most sweeps (default 500).
    tol : float, optional
        Stop when the objective's relative decrease over a pass/sweep falls
        below ``tol`` (``trace.converged``). Default: ALS 1e-5 (1e-7 under ``input``), SGD 0 (all
        passes). Refused (> 0) by ``gradient``, ``gradient-paper``, ``output``.
    init_scale : float, optional
        Standard deviation of the random initial model entries. Default: SGD
        0.1; ALS the standard deviation σ of the values fitted (so that the
        fit is scale-equivariant, and a large-valued tensor does not start
        next to the all-zero stationary point).
    lam, lam_core : float, optional
        λ (λo) and λg. SGD default: the paper's (CP 0.01; Tucker 0.001,
        0.0001). ALS default: chosen by validation
        (:func:`distdp.completion.als.choose_lambda`): 10% of the training
        entries are held out and the λ with the smallest RMSE on them is
        taken from the path λ₀·4^j, |j| ≤ 4, around λ₀ = 0.5·σ^(4/3) (CP) or
        λo = 2·σ^(3/2), λg = λo/10 (Tucker), σ the standard deviation of the
        values fitted (scale-equivariant: values × s give the fit × s); the
        fit on every training entry then starts from that λ's path fit. The
        best λ differs between tensors by orders of magnitude, and the
        paper's fixed λ, made for values in [0, 1], lets fits of real tensors
        overfit. Under ``input`` only the noisy released values are used
        (post-processing). ``config['lam_source']`` says which;
        ``config['lam_path']`` lists the path (λ, held-out RMSE, sweeps).
    """

    method: str = "auto"
    lr: Optional[float] = None
    epochs: Optional[int] = None
    batch_size: Optional[int] = None
    lam: Optional[float] = None
    lam_core: Optional[float] = None
    tol: Optional[float] = None
    init_scale: Optional[float] = None

# how messages name a parameter when no caller mapping is active (flags are spelled as a Python call)
_API_FORMS = {"reproducible": "reproducible=True", "allow_data_bounds": "allow_data_bounds=True",
              "clamp_noisy": "clamp_noisy"}
_NAMES: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar("distdp_completion_names", default={})


def step_sampler(noise_rng) -> str:
    """What draws DP-SGD's noise: each block's rows of a step are one release, so the sampler depends on its size."""
    small = sampler_name(noise_rng, "gaussian", 1)
    large = sampler_name(noise_rng, "gaussian", OPENDP_MAX_ENTRIES + 1)
    return small if small == large else (f"{small} for a block's noise of at most {OPENDP_MAX_ENTRIES} entries "
                                         f"in a step, else {large}")


@contextlib.contextmanager
def parameter_names(names: Mapping[str, str]) -> Iterator[None]:
    """Within the block, error messages and warnings of :func:`complete` call parameter ``p`` ``names[p]``.

    Parameters
    ----------
    names : mapping
        API parameter name → how the caller spells it (the CLI: ``{"lr": "--lr",
        "batch_size": "--batch-size", ...}``). Parameters not in it keep their
        Python names.
    """
    token = _NAMES.set(dict(names))
    try:
        yield
    finally:
        _NAMES.reset(token)


def _n(param: str) -> str:
    """How the current caller names the parameter ``param``."""
    return _NAMES.get().get(param, _API_FORMS.get(param, param))


class NotPrivateWarning(UserWarning):
    """A perturbation was requested but the fit carries no DP guarantee (e.g. bounds computed from the data)."""


class DivergenceWarning(UserWarning):
    """The SGD iterates blew up while staying finite (objective far above the all-offset and initial models')."""


class WorseThanBaselineWarning(UserWarning):
    """A private fit's hold-out RMSE is above that of a trivial predictor computable from public information."""


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
        Constant subtracted from the values before fitting and added back by
        :meth:`predict` (public in a private fit; ``config['offset_source']``
        says where it came from).
    test_rmse : float or None
        RMSE on the held-out entries (None without a holdout).
    train_rmse : float
        RMSE on the training entries as given (raw values).
    n_train, n_test : int
    trace : SGDTrace
        Passes, steps, objective per pass, convergence.
    privacy : PrivacyReport
    timings : dict
        Seconds: ``perturb``, ``lam_search`` (ALS's λ path, where it ran), ``sgd``
        or ``als`` (the solver's, the final fit), ``total``.
    config : dict
        Every parameter of the fit (``config['solver']``: ``'als'`` or ``'sgd'``).
    value_range : (lo, hi) or None
        The public range the predictions are clamped to (post-processing):
        the declared ``bounds``, or for a private fit without bounds the range
        offset ± (bound of the projected model). None: no clamping.
    baselines : dict or None
        Hold-out RMSE of the trivial predictors computable from public
        information: ``{"offset": {"value", "test_rmse"}, "midrange": {...}}``
        (midrange only with a value range); None without a hold-out.
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
    value_range: Optional[tuple] = None
    baselines: Optional[dict] = None

    @property
    def factors(self) -> tuple:
        """(A, B, C) or (A, B, C, G)."""
        return (self.A, self.B, self.C) if self.G is None else (self.A, self.B, self.C, self.G)

    @property
    def shape(self) -> tuple[int, int, int]:
        """The tensor's shape (n1, n2, n3)."""
        return (self.A.shape[0], self.B.shape[0], self.C.shape[0])

    def predict(self, i, j, k):
        """Completed values at entries (i, j, k).

        Parameters
        ----------
        i, j, k : int or array_like of int
            Entry indices, broadcast against each other; each in
            [0, n) for its mode (negative indices are rejected, not wrapped).

        Returns
        -------
        float or ndarray
            A float when all three are scalars, else an array of the broadcast shape.

        Raises
        ------
        TypeError
            Non-integer indices.
        IndexError
            An index outside [0, n) for its mode.
        ValueError
            Shapes that do not broadcast.
        """
        arrays = []
        for name, x, n in zip("ijk", (i, j, k), self.shape):
            a = np.asarray(x)
            if a.size == 0:
                a = a.astype(np.int64)    # an empty list has dtype float
            if a.dtype == bool or a.dtype.kind not in "iu":
                raise TypeError(f"predict: {name} must be integer indices, got dtype {a.dtype}")
            bad = (a < 0) | (a >= n)
            if bad.any():
                raise IndexError(f"predict: {name} index {int(a[bad].flat[0])} is outside [0, {n}) "
                                 f"(the tensor's shape is {self.shape}; negative indices are not accepted)")
            arrays.append(a.astype(np.int64))
        try:
            arrays = np.broadcast_arrays(*arrays)
        except ValueError:
            raise ValueError(f"predict: i, j, k must have broadcastable shapes, got "
                             f"{[np.shape(x) for x in (i, j, k)]}") from None
        out_shape = arrays[0].shape
        flat = [a.ravel() for a in arrays]
        values = self._clamp(MODELS[self.model].predict(self.factors, *flat) + self.offset)
        return float(values[0]) if out_shape == () else values.reshape(out_shape)

    def _clamp(self, values: np.ndarray) -> np.ndarray:
        """Clamp to ``value_range`` (post-processing with public constants), when there is one."""
        return values if self.value_range is None else np.clip(values, *self.value_range)

    def full_tensor(self) -> np.ndarray:
        """The completed dense tensor (small tensors only), clamped to ``value_range``."""
        return self._clamp(MODELS[self.model].full_tensor(self.factors) + self.offset)

    def report(self) -> dict:
        """JSON-ready summary (what ``report.json`` holds).

        Diagnostics withheld from a private fit (``trace.clipped_fraction`` and
        ``trace.zero_objective`` set to None, see ``privacy.not_released``) are
        left out of ``convergence``.
        """
        t = self.trace
        convergence = {"epochs_run": t.epochs_run, "steps": t.steps, "converged": t.converged,
                       "objective": list(t.objective), "step_norm": list(t.step_norm),
                       "clipped_fraction": t.clipped_fraction, "zero_objective": t.zero_objective,
                       "diverged_pass": t.diverged_pass}
        for key in ("clipped_fraction", "zero_objective"):
            if convergence[key] is None:
                del convergence[key]
        return {"model": self.model, "rank": self.rank, "shape": list(self.shape),
                "test_rmse": self.test_rmse, "train_rmse": self.train_rmse, "n_train": self.n_train,
                "n_test": self.n_test, "offset": self.offset,
                "value_range": None if self.value_range is None else list(self.value_range),
                "baselines": self.baselines, "convergence": convergence,
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
             perturbation: Optional[Perturbation] = None, solver: Optional[CompletionSolver] = None,
             holdout: float = 0.2, bounds: Optional[tuple[float, float]] = None, offset: Optional[float] = None,
             max_row_norm: Optional[float] = None, max_core_norm: Optional[float] = None,
             seed: Optional[int] = None, shape: Optional[tuple[int, int, int]] = None,
             progress: Optional[Callable[[int, int, float], None]] = None,
             test: Optional[Observations] = None) -> CompletionResult:
    """Complete a partially observed 3-way tensor by CP (eq. 6) or Tucker (eq. 7), optionally with DP.

    Solvers of the same objective (eq. 6/7): alternating least squares
    (:mod:`distdp.completion.als`, exact ridge solves per factor row; the
    default wherever the noise does not live in the optimiser: ``none`` and
    ``input``, whose noisy values make any solver post-processing), and
    mini-batch SGD (:mod:`distdp.completion.sgd`; required by ``gradient``,
    ``gradient-paper`` and ``output``, whose noise or sensitivity is defined
    on SGD steps).

    A private fit (any ``perturbation`` other than ``'none'``) needs a public
    range for the values: ``bounds``, or (``gradient``, ``gradient-paper``,
    ``output``) an explicit ``offset`` with finite projection radii
    (``max_row_norm``, and ``max_core_norm`` for Tucker), which bound every
    prediction to offset ± r³ (CP) or offset ± g·r³ (Tucker). Without one it
    is refused: nothing would keep the noisy model near the data (a fit
    without bounds was seen to return test RMSE 2·10⁴ on values in [−1, 1]).
    Predictions are clamped to that range (post-processing), and the hold-out
    RMSE of the trivial public predictors (the offset, the mid-range) is
    reported beside the fit (``baselines``), with a warning when the private
    fit does worse.

    Parameters
    ----------
    data : Observations, ndarray with NaN for missing, or path
        A ``.npy`` tensor, a ``.parquet`` COO file, or a directory of them
        (:func:`distdp.completion.io.load_observations`).
    rank : int
        CP rank R, or the Tucker core size R×R×R (Tucker: at most the
        smallest dimension of the tensor).
    model : {'cp', 'tucker'}
    perturbation : Perturbation, optional
        Make the fit private (:class:`Perturbation`: the mechanism, ε, δ and
        the mechanism's settings). None: a non-private fit.
    solver : CompletionSolver, optional
        The optimiser and its settings (:class:`CompletionSolver`; default
        ALS where the perturbation allows it, SGD otherwise).
    holdout : float
        Share of the observed entries held out for the test RMSE (paper: 0.2).
    bounds : (lo, hi), optional
        Declared public value range. Its midpoint is the default ``offset``;
        predictions are clamped to it (post-processing), for every fit.
        Required by every perturbation (see above). ``input``: values are
        clamped to it before the noise (unless ``allow_data_bounds``).
        ``gradient``: derives the default projection radii (clipping, not
        the bounds, gives the sensitivity).
    offset : float, optional
        Constant subtracted from the values before fitting and added back by
        :meth:`CompletionResult.predict`. Default: the midpoint of declared
        ``bounds``; without bounds, the mean of the training values when
        ``perturbation='none'`` (a non-private fit may look at the data), and
        0 otherwise (a private fit's offset must be public: it is never
        computed from the data). ``config['offset_source']`` says which.
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
        Non-negative; fixes split, initialisation and visiting order (and the
        noise only with ``reproducible``).
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
        Bad input or parameters (rank ≤ 0 or, for Tucker, above a dimension;
        ε ≤ 0 or ε without a perturbation; a private fit without a public
        value range; SGD settings with ``solver='als'``, ...), or SGD whose
        iterates became non-finite (:class:`distdp.completion.sgd.SGDDivergedError`).
        Messages name parameters as :func:`parameter_names` says.

    Warns
    -----
    NotPrivateWarning
        ``input`` with bounds computed from the data.
    DivergenceWarning
        The iterates blew up while staying finite.
    WorseThanBaselineWarning
        A private fit whose hold-out RMSE exceeds a public baseline's.
    UserWarning
        CP rank above the largest possible rank of the tensor's shape;
        ``gradient`` without projection; δ ≥ 1/n_train.
    """
    t0 = time.perf_counter()
    p = _option("perturbation", perturbation, Perturbation) or Perturbation("none")
    opt = _option("solver", solver, CompletionSolver) or CompletionSolver()
    perturbation, epsilon, delta, clip, lipschitz = p.kind, p.epsilon, p.delta, p.clip, p.lipschitz
    allow_data_bounds, clamp_noisy, reproducible = p.allow_data_bounds, p.clamp_noisy, p.reproducible
    solver, lr, epochs, batch_size, lam, lam_core, tol, init_scale = (opt.method, opt.lr, opt.epochs, opt.batch_size,
                                                                      opt.lam, opt.lam_core, opt.tol, opt.init_scale)
    _check_settings(rank=rank, model=model, perturbation=perturbation, epsilon=epsilon, delta=delta,
                    holdout=holdout, bounds=bounds, clip=clip, lipschitz=lipschitz, lr=lr, epochs=epochs,
                    batch_size=batch_size, lam=lam, lam_core=lam_core, tol=tol, init_scale=init_scale, offset=offset,
                    max_row_norm=max_row_norm, max_core_norm=max_core_norm, seed=seed, reproducible=reproducible,
                    shape=shape)
    solver = _resolve_solver(solver, perturbation, lr=lr, batch_size=batch_size, max_row_norm=max_row_norm,
                             max_core_norm=max_core_norm)
    defaults = ALS_DEFAULTS if solver == "als" else SGD_DEFAULTS
    epochs = defaults["epochs"] if epochs is None else epochs
    tol = (ALS_NOISY_TOL if solver == "als" and perturbation == "input" else defaults["tol"]) if tol is None else tol
    lr = SGD_DEFAULTS["lr"] if lr is None else lr
    batch_size = SGD_DEFAULTS["batch_size"] if batch_size is None else batch_size
    _check_public_range(model, perturbation, bounds, offset, max_row_norm, max_core_norm, allow_data_bounds)
    clip = DEFAULT_CLIP if clip is None else clip
    lipschitz = DEFAULT_LIPSCHITZ if lipschitz is None else lipschitz
    if bounds is not None:
        bounds = pt.check_bounds(bounds, _n("bounds"))
    obs = _load(data, shape)
    _check_rank_for_shape(model, int(rank), obs.shape)
    rng = np.random.default_rng(seed)
    if test is None:
        if holdout > 0 and int(round(holdout * obs.n)) >= obs.n:
            raise ValueError(f"{_n('holdout')} {holdout} of {obs.n} observed entries leaves no training entry")
        train, test = split_holdout(obs, holdout, rng)
    else:
        train = obs
    offset, offset_source = _resolve_offset(offset, bounds, perturbation, train)
    dlam, dlam_core = DEFAULT_LAMBDA[model]
    radii = _projection_radii(model, int(rank), perturbation, bounds, offset, max_row_norm, max_core_norm)
    cfg = SGDConfig(lr=lr, epochs=epochs, batch_size=batch_size, lam=dlam if lam is None else lam,
                    lam_core=dlam_core if lam_core is None else lam_core, tol=tol,
                    init_scale=0.1 if init_scale is None else init_scale,
                    max_row_norm=radii["max_row_norm"], max_core_norm=radii["max_core_norm"])
    noise_rng = np.random.default_rng([int(seed), 0xD1F]) if reproducible else private_generator()
    x = train.values
    t_perturb = time.perf_counter()
    rule = PlainRule()
    if perturbation == "none":
        report = pt.none_report()
    elif perturbation == "input":
        declared = bounds is not None
        if not declared:
            if not allow_data_bounds:
                raise ValueError(f"{_n('perturbation')} input needs declared public value bounds ({_n('bounds')}): "
                                 "bounds computed from the private data leak it "
                                 f"({_n('allow_data_bounds')} to do it anyway, not private)")
            bounds = (float(x.min()), float(x.max()))
            if bounds[0] == bounds[1]:
                bounds = (bounds[0], bounds[0] + 1.0)
            warnings.warn(f"NOT PRIVATE: input-perturbation bounds {bounds} computed from the private data; "
                          "the sensitivity and the bounds leak it. Declare public bounds for a guarantee.",
                          NotPrivateWarning, stacklevel=2)
        lo, hi = pt.check_bounds(bounds)
        # the number of clamped values counts raw private values: not released (privacy.not_released)
        x, _ = pt.input_perturbation(x, (lo, hi), epsilon, noise_rng, clamp_noisy=clamp_noisy)
        report = pt.input_report(epsilon, (lo, hi), train.n, declared, clamp_noisy,
                                 sampler_name(noise_rng, "laplace", train.n))
    elif perturbation == "gradient":
        if delta is None:
            delta = min(1e-5, 1.0 / (10 * train.n))
        if delta >= 1.0 / train.n:
            warnings.warn(f"{_n('delta')} {delta} ≥ 1/n_train = {1 / train.n:.3g}: a mechanism releasing one entry "
                          "at random meets it; use δ ≪ 1/n", UserWarning, stacklevel=2)
        sigma = pt.dpsgd_noise_multiplier(epochs, epsilon, delta)
        if radii["warn"]:
            warnings.warn(f"gradient perturbation without declared bounds or {_n('max_row_norm')}: the iterates are "
                          "not projected and can blow up at small ε; declare public bounds "
                          f"({_n('bounds')}) or a radius ({_n('max_row_norm')})", UserWarning, stacklevel=2)
        rule = ClippedGaussianRule(clip=clip, noise_multiplier=sigma)
    elif perturbation == "gradient-paper":
        rule = PaperGradientRule(clip=clip, epsilon=epsilon)
    t_perturb = time.perf_counter() - t_perturb

    lam_source = "given" if lam is not None else "paper default"
    validate = False      # choose λ by held-out RMSE (ALS, neither λ nor λg given)
    if solver == "als":
        # x: the values the fit sees (the noisy released values under input perturbation: post-processing)
        var = float(np.var(x))
        lam, lam_core, lam_source, validate = als_lambda(model, var, lam, lam_core, noisy=perturbation == "input")
        if init_scale is None and var > 0:
            init_scale = math.sqrt(var)
    init_scale = 0.1 if init_scale is None else init_scale
    if solver == "als":
        cfg = replace(cfg, lam=cfg.lam if lam is None else lam, lam_core=cfg.lam_core if lam_core is None
                      else lam_core)
    # where ALS forms its sums: the dense mask's products or the entries' segment sums (public: Ω only)
    layout = None
    if solver == "als":
        layout = "dense" if dense_enough(train.shape, train.n, int(rank), model) else "entries"
    lam_path, timings = None, {}
    try:
        if solver == "als":
            als_cfg = ALSConfig(max_sweeps=int(epochs), tol=float(tol), lam=cfg.lam, lam_core=cfg.lam_core,
                                init_scale=init_scale, dense=layout == "dense")
            start = None
            if validate:
                # λ by held-out RMSE along a path around c·σ^p (values as fitted: post-processing)
                t_search = time.perf_counter()
                path = choose_lambda(model, train.with_values(x - offset), int(rank),
                                     replace(als_cfg, dense=None), rng,
                                     NOISY_SEARCH if perturbation == "input" else LambdaSearch())
                if path.steps:
                    als_cfg = replace(als_cfg, lam=path.lam, lam_core=path.lam_core)
                    cfg = replace(cfg, lam=path.lam, lam_core=path.lam_core)
                    lam_path, start = path.report(), path.start       # the fit on every entry starts there
                    timings["lam_search"] = time.perf_counter() - t_search
                    lam_source = path.source(lam_source)
            factors, trace = run_als(model, train.with_values(x - offset), int(rank), als_cfg, rng,
                                     progress=progress, init=start)
        else:
            factors, trace = run_sgd(model, train.with_values(x - offset), int(rank), cfg, rng, rule,
                                     noise_rng=noise_rng, progress=progress)
    except SGDDivergedError as exc:
        if solver == "als":
            raise SGDDivergedError(f"{exc} ({_n('offset')} {offset:g}: {offset_source}); subtract a typical value "
                                   f"with {_n('offset')} or rescale the values", exc.epoch) from None
        what = "training objective" if isinstance(rule, PlainRule) else "iterates"
        raise SGDDivergedError(
            f"SGD diverged: the {what} became non-finite in pass {exc.epoch} ({_n('lr')} {lr:g}, "
            f"{_n('batch_size')} {batch_size}, {_n('offset')} {offset:g}: {offset_source}). Lower {_n('lr')} "
            f"(e.g. {lr / 10:g}), subtract a typical value with {_n('offset')} (or declare {_n('bounds')}: their "
            f"midpoint becomes the default offset), or project the iterates ({_n('max_row_norm')})",
            exc.epoch) from None
    factors = list(factors)
    if perturbation == "gradient":
        report = pt.dpsgd_report(rule.noise_multiplier, clip, trace.epochs_run, trace.steps, batch_size, delta,
                                 epsilon, blocks="A, B, C" + (", G" if model == "tucker" else ""),
                                 sampler=step_sampler(noise_rng))
    elif perturbation == "gradient-paper":
        report = pt.paper_gradient_report(clip, epsilon, trace.steps, trace.epochs_run * train.n,
                                          sampler_name(noise_rng, "l2-vector", rank))
    elif perturbation == "output":
        t1 = time.perf_counter()
        sens = pt.output_sensitivity(trace.epochs_run, lipschitz, lr)
        factors[2] = pt.output_perturbation(factors[2], epsilon, sens, noise_rng)
        report = pt.output_report(epsilon, sens, trace.epochs_run, lipschitz, lr, factors[2].shape[0],
                                  sampler_name(noise_rng, "l2-vector", rank))
        t_perturb += time.perf_counter() - t1
    report = replace(report, assumptions=report.assumptions + (radii["statement"],))
    # SGD's objective (and the divergence flag) sees raw private values unless the values were perturbed first
    raw_objective = perturbation in ("gradient", "gradient-paper", "output")
    if perturbation != "none":
        report = replace(report, not_covered=report.not_covered + (
            "train_rmse: computed from the private training values without noise",
            "timings_s: wall-clock times, a side channel") + ((
                "convergence.diverged_pass: compares the private training objective, without noise, with the "
                "all-offset predictor's and the initial model's",) if raw_objective else ()))
    if perturbation == "gradient":
        # both count raw private values without noise: withheld, not reported
        trace = replace(trace, clipped_fraction=None, zero_objective=None)
        report = replace(report, not_released=report.not_released + (
            "convergence.zero_objective: Σ(x − offset)² over the raw training values",
            "convergence.clipped_fraction: share of the raw per-entry gradients that clipping shortened"))
    elif perturbation == "input":
        report = replace(report, not_released=report.not_released + (
            "config.n_clamped: number of training values outside the declared bounds",))
    if trace.diverged:
        numbers = ("" if trace.zero_objective is None else
                   f" (objective {trace.objective[-1]:.4g} vs {max(trace.zero_objective, trace.objective[0]):.4g})")
        caveat = ("; the flag (convergence.diverged_pass) is computed from the private values without noise and "
                  "is not covered by the guarantee" if perturbation == "gradient" else "")
        warnings.warn(f"SGD iterates blew up: the training objective exceeded {cfg.divergence_factor:g}× that of "
                      f"the all-offset predictor and of the initial model from pass {trace.diverged_pass}{numbers}"
                      f"{caveat}; the result is worse than predicting the offset. Lower the learning rate "
                      f"({_n('lr')}), or project the iterates ({_n('max_row_norm')}, or declare {_n('bounds')}).",
                      DivergenceWarning, stacklevel=2)
    if reproducible and perturbation != "none":
        report = pt.mark_seeded(report, seed)
    elif seed is not None and perturbation != "none":
        report = replace(report, assumptions=report.assumptions + (
            f"seed {seed} fixed the split, initialisation and visiting order only (data-independent); the noise "
            "came from OS entropy",))
    if perturbation != "none":
        report = replace(report, assumptions=report.assumptions + (f"offset {offset:g}: {offset_source}",))

    value_range = _value_range(model, bounds, offset, cfg.max_row_norm, cfg.max_core_norm)
    if value_range is not None and perturbation != "none":
        report = replace(report, assumptions=report.assumptions + (
            f"predictions clamped to the public range [{value_range[0]:g}, {value_range[1]:g}] "
            f"({value_range[2]}): post-processing with public constants, no privacy cost",))
    value_range = None if value_range is None else (float(value_range[0]), float(value_range[1]))

    def clamp(v):
        return v if value_range is None else np.clip(v, *value_range)

    m = MODELS[model]
    train_rmse = _rmse(clamp(m.predict(factors, *train.idx.T) + offset), train.values)
    test_rmse = None if test is None else _rmse(clamp(m.predict(factors, *test.idx.T) + offset), test.values)
    baselines = None
    if test is not None:
        baselines = {"offset": {"value": float(offset), "test_rmse": _rmse(clamp(np.full(test.n, offset)),
                                                                           test.values)}}
        if value_range is not None:
            mid = (value_range[0] + value_range[1]) / 2.0
            baselines["midrange"] = {"value": mid, "test_rmse": _rmse(np.full(test.n, mid), test.values)}
        if perturbation != "none":
            report = replace(report, not_covered=report.not_covered + (
                "baselines: hold-out RMSE of the public predictors, computed from the held-out private values "
                "without noise",))
            best = min(b["test_rmse"] for b in baselines.values())
            if test_rmse > best:
                # no numbers in the message: like test_rmse, the comparison is not covered by the guarantee
                warnings.warn(f"the private fit ({_n('perturbation')} {perturbation}, {_n('epsilon')} {epsilon:g}) "
                              "predicts the held-out entries worse than a trivial public predictor (the offset or "
                              "the mid-range of the value range; see 'baselines' in the report): the noise "
                              f"dominates. Raise {_n('epsilon')}, lower {_n('rank')}, or use the baseline",
                              WorseThanBaselineWarning, stacklevel=2)
    config = {"model": model, "rank": int(rank), "perturbation": perturbation, "epsilon": epsilon,
              "delta": delta if perturbation == "gradient" else None, "holdout": holdout,
              "bounds": list(bounds) if bounds is not None else None, "clamp_noisy": clamp_noisy, "clip": clip,
              "lipschitz": lipschitz, "lr": lr, "epochs": epochs, "batch_size": batch_size, "lam": cfg.lam,
              "lam_core": cfg.lam_core, "tol": tol, "init_scale": init_scale, "offset": offset,
              "offset_source": offset_source, "max_row_norm": cfg.max_row_norm, "max_core_norm": cfg.max_core_norm,
              "projection_radii_from": radii["source"], "seed": seed, "reproducible": reproducible,
              "solver": solver, "als_layout": layout, "lam_source": lam_source, "lam_path": lam_path}
    return CompletionResult(model=model, rank=int(rank), A=factors[0], B=factors[1], C=factors[2],
                            G=factors[3] if model == "tucker" else None, offset=float(offset), test_rmse=test_rmse,
                            train_rmse=train_rmse, n_train=train.n, n_test=0 if test is None else test.n,
                            trace=trace, privacy=report,
                            timings={"perturb": t_perturb, **timings, solver: trace.seconds,
                                     "total": time.perf_counter() - t0},
                            config=config, value_range=value_range, baselines=baselines)


#: The fields of :func:`complete`'s option groups under their flat names (the CLI's flags, a sweep's settings).
PERTURBATION_FIELDS = {"perturbation": "kind", "epsilon": "epsilon", "delta": "delta", "clip": "clip",
                       "lipschitz": "lipschitz", "allow_data_bounds": "allow_data_bounds",
                       "clamp_noisy": "clamp_noisy", "reproducible": "reproducible"}
SOLVER_FIELDS = {"solver": "method", "lr": "lr", "epochs": "epochs", "batch_size": "batch_size", "lam": "lam",
                 "lam_core": "lam_core", "tol": "tol", "init_scale": "init_scale"}


def grouped(settings: Mapping) -> dict:
    """:func:`complete`'s keyword arguments from one flat mapping of settings (a sweep's job, the CLI's flags).

    The keys of :data:`PERTURBATION_FIELDS` become one :class:`Perturbation`
    (``perturbation`` its ``kind``, default ``'none'``), those of
    :data:`SOLVER_FIELDS` one :class:`CompletionSolver` (``solver`` its
    ``method``); every other key is passed on as it is.
    """
    out = {k: v for k, v in settings.items() if k not in PERTURBATION_FIELDS and k not in SOLVER_FIELDS}
    pert = {PERTURBATION_FIELDS[k]: v for k, v in settings.items() if k in PERTURBATION_FIELDS}
    solver = {SOLVER_FIELDS[k]: v for k, v in settings.items() if k in SOLVER_FIELDS}
    if pert:
        out["perturbation"] = Perturbation(**{"kind": "none", **pert})
    if solver:
        out["solver"] = CompletionSolver(**solver)
    return out


def _option(name: str, value, cls: type):
    """``value`` if it is a ``cls`` or None; else an error naming the parameter."""
    if value is None or isinstance(value, cls):
        return value
    raise TypeError(f"{name} must be a {cls.__name__} or None, got {type(value).__name__}")


def _check_settings(*, rank, model, perturbation, epsilon, delta, holdout, bounds, clip, lipschitz, lr, epochs,
                    batch_size, lam, lam_core, tol, init_scale, offset, max_row_norm, max_core_norm, seed,
                    reproducible, shape) -> None:
    """Reject bad parameters before any work, naming them as the caller knows them (:func:`parameter_names`)."""
    if perturbation not in pt.PERTURBATIONS:
        raise ValueError(f"{_n('perturbation')} must be one of {pt.PERTURBATIONS}, got {perturbation!r}")
    if model not in MODELS:
        raise ValueError(f"{_n('model')} must be one of {sorted(MODELS)}, got {model!r}")
    _check_int("rank", rank, 1, "a positive integer")
    if perturbation == "none":
        if epsilon is not None:
            raise ValueError(f"{_n('epsilon')} {epsilon} given without a perturbation: the fit would not be private. "
                             f"Choose {_n('perturbation')} input or gradient (or drop {_n('epsilon')})")
    else:
        if epsilon is None:
            raise ValueError(f"{_n('perturbation')} {perturbation} needs {_n('epsilon')} (the privacy budget ε > 0)")
        check_epsilon(epsilon, _n("epsilon"))
    if delta is not None:
        if perturbation != "gradient":
            raise ValueError(f"{_n('delta')} applies only to {_n('perturbation')} gradient (got {perturbation}): "
                             f"drop {_n('delta')}")
        check_delta(delta, _n("delta"))
    if reproducible and seed is None:
        raise ValueError(f"{_n('reproducible')} needs {_n('seed')}")
    if seed is not None:
        _check_int("seed", seed, 0, "a non-negative integer")
    if isinstance(holdout, bool) or not isinstance(holdout, (int, float, np.integer, np.floating)) \
            or not 0.0 <= holdout < 1.0:
        raise ValueError(f"{_n('holdout')} must be in [0, 1), got {holdout!r}")
    for name, v in (("lr", lr), ("init_scale", init_scale)):
        if v is not None:
            _check_real(name, v, strict=True)
    for name, v, users in (("clip", clip, ("gradient", "gradient-paper")), ("lipschitz", lipschitz, ("output",))):
        if v is not None:
            if perturbation not in users:
                raise ValueError(f"{_n(name)} applies only to {_n('perturbation')} {' or '.join(users)} (got "
                                 f"{perturbation}): drop {_n(name)}")
            _check_real(name, v, strict=True)
    for name, v in (("lam", lam), ("lam_core", lam_core), ("tol", tol)):
        if v is not None:
            _check_real(name, v, strict=False)
    for name, v in (("epochs", epochs), ("batch_size", batch_size)):
        if v is not None:
            _check_int(name, v, 1, "an integer ≥ 1")
    if perturbation in ("gradient", "gradient-paper", "output") and tol is not None and tol > 0:
        raise ValueError(f"{_n('tol')} > 0 stops on the private objective, a data-dependent choice: not allowed "
                         f"with {_n('perturbation')} {perturbation} (use a fixed number of {_n('epochs')})")
    if offset is not None and (isinstance(offset, bool) or not isinstance(offset, (int, float, np.integer,
                                                                                   np.floating))
                               or not math.isfinite(offset)):
        raise ValueError(f"{_n('offset')} must be a finite number, got {offset!r}")
    for name, v in (("max_row_norm", max_row_norm), ("max_core_norm", max_core_norm)):
        if v is not None and not (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
                                  and v > 0):
            raise ValueError(f"{_n(name)} must be a number > 0 (inf: no projection), got {v!r}")
    if bounds is not None:
        pt.check_bounds(bounds, _n("bounds"))
    if shape is not None:
        try:
            ok = len(shape) == 3 and all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n > 0
                                         for n in shape)
        except TypeError:
            ok = False
        if not ok:
            raise ValueError(f"{_n('shape')} must be three positive integers, got {shape!r}")


def _check_int(name: str, value, minimum: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{_n(name)} must be {what}, got {value!r}")


def _check_real(name: str, value, strict: bool) -> None:
    ok = (not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
          and math.isfinite(value) and (value > 0 if strict else value >= 0))
    if not ok:
        raise ValueError(f"{_n(name)} must be a finite number {'> 0' if strict else '≥ 0'}, got {value!r}")


def _check_rank_for_shape(model: str, rank: int, shape: tuple) -> None:
    """Tucker: refuse a core larger than a dimension. CP: warn above the largest rank a tensor of this shape has."""
    if model == "tucker" and rank > min(shape):
        mode = int(np.argmin(shape))
        raise ValueError(f"{_n('rank')} {rank} exceeds the tensor's size {shape[mode]} in mode {mode + 1} (shape "
                         f"{tuple(shape)}): a Tucker core larger than the tensor is over-parameterised; use "
                         f"{_n('rank')} ≤ {min(shape)}")
    n1, n2, n3 = shape
    max_rank = min(n1 * n2, n1 * n3, n2 * n3)   # every n1×n2×n3 tensor is a sum of that many rank-one terms
    if model == "cp" and rank > max_rank:
        warnings.warn(f"{_n('rank')} {rank} exceeds the largest CP rank of any {n1}×{n2}×{n3} tensor "
                      f"(≤ min(n1·n2, n1·n3, n2·n3) = {max_rank}): the extra components are redundant",
                      UserWarning, stacklevel=3)


def _resolve_offset(offset, bounds, perturbation: str, train: Observations) -> tuple[float, str]:
    """The offset of a fit and where it comes from (a private fit's offset is always public)."""
    if offset is not None:
        return float(offset), "given"
    if bounds is not None:
        return (bounds[0] + bounds[1]) / 2.0, "midpoint of the declared bounds"
    if perturbation == "none":
        return float(np.mean(train.values)), "mean of the training values (non-private fit)"
    return 0.0, ("default 0: neither an offset nor bounds were declared, and a private fit does not compute one "
                 "from the data")


def _projection_radii(model: str, rank: int, perturbation: str, bounds, offset: float, max_row_norm,
                      max_core_norm) -> dict:
    """The public projection radii of a fit, where they come from, and the privacy report's sentence on them."""
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



def _resolve_solver(solver: str, perturbation: str, **given) -> str:
    """``'als'`` or ``'sgd'``: the solver a fit uses (see :func:`complete`, ``solver``)."""
    if solver not in SOLVERS:
        raise ValueError(f"{_n('solver')} must be one of {SOLVERS}, got {solver!r}")
    needs_sgd = perturbation in ("gradient", "gradient-paper", "output")
    if needs_sgd:
        if solver == "als":
            raise ValueError(f"{_n('solver')} als cannot run {_n('perturbation')} {perturbation}: its noise (or its "
                             f"sensitivity) is defined on SGD steps; use {_n('solver')} sgd or auto")
        return "sgd"
    sgd_settings = [name for name in SGD_ONLY if given.get(name) is not None]
    if solver == "als" and sgd_settings:
        raise ValueError(f"{_n(sgd_settings[0])} is an SGD setting (ALS solves each block exactly and projects "
                         f"nothing): drop it, or use {_n('solver')} sgd")
    if solver == "auto":
        return "sgd" if sgd_settings else "als"
    return solver


def _model_bound(model: str, max_row_norm, max_core_norm) -> Optional[float]:
    """The largest |x̂ − offset| a model projected onto the public radii can produce (CP r³, Tucker g·r³)."""
    finite = lambda v: v is not None and math.isfinite(v)   # noqa: E731
    if not finite(max_row_norm):
        return None
    if model == "cp":
        return float(max_row_norm) ** 3
    return float(max_core_norm) * float(max_row_norm) ** 3 if finite(max_core_norm) else None


def _check_public_range(model, perturbation, bounds, offset, max_row_norm, max_core_norm,
                        allow_data_bounds) -> None:
    """Refuse a private fit without a public value range (declared bounds, or an offset with finite radii)."""
    if perturbation == "none" or bounds is not None:
        return
    if perturbation == "input":
        return    # refused in complete()'s input branch unless allow_data_bounds (then warned, not private)
    if perturbation != "input" and offset is not None and _model_bound(model, max_row_norm, max_core_norm):
        return
    alt = ("" if perturbation == "input" else
           f" (or an explicit {_n('offset')} with finite {_n('max_row_norm')}"
           + (f" and {_n('max_core_norm')}" if model == "tucker" else "")
           + ", which bound every prediction to offset ± the projected model's range)")
    raise ValueError(f"{_n('perturbation')} {perturbation} needs a public range for the values: declare "
                     f"{_n('bounds')} LO HI{alt}. Without one nothing keeps the noisy model near the data (a fit "
                     "without bounds returned test RMSE 2·10⁴ on values in [−1, 1]), its predictions cannot be "
                     "clamped, and no public baseline exists to judge it by; the range must be known without "
                     "looking at the private values")


def _value_range(model, bounds, offset: float, max_row_norm, max_core_norm):
    """(lo, hi, source) the predictions are clamped to, or None: the declared bounds, else offset ± model bound."""
    if bounds is not None:
        return float(bounds[0]), float(bounds[1]), "declared bounds"
    b = _model_bound(model, max_row_norm, max_core_norm)
    if b is None:
        return None
    return offset - b, offset + b, "offset ± the largest value of the model projected onto the public radii"
