"""Option groups of a fit, as frozen dataclasses, and the checks that name a wrong parameter.

:class:`SolverOptions` groups the spectral solver's settings
(:class:`distdp.lda.pipeline.SpectralParams` less the model's own ``k``,
``alpha0`` and ``model``). The privacy options live with the private fit
(:class:`distdp.lda.private.options.PrivacyOptions`) and the cluster options
with the API (:class:`distdp.api.ClusterOptions`); all three are taken by
:func:`distdp.api.fit_lda` and :class:`distdp.SpectralLDA`. Change one field
of a frozen instance with ``dataclasses.replace(options, method="simultaneous")``.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from distdp.lda.pipeline import (AUTO_FLOAT32_NONZEROS, EIG_MAX_ITERS, EIG_TOL, PRECISIONS, SpectralParams,
                                 auto_eigensolver)

__all__ = ["InvalidParameterError", "SolverOptions", "check_bool", "check_int", "check_option", "check_real",
           "is_int"]


class InvalidParameterError(ValueError, TypeError):
    """A parameter of :class:`distdp.SpectralLDA` or of an option group has a wrong type or value.

    Both a ``ValueError`` and a ``TypeError``, as scikit-learn's own
    ``InvalidParameterError`` is; the message names the parameter.
    """


def is_int(value) -> bool:
    """Whether ``value`` is an integer (a ``bool`` is not)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int(name: str, value, low: int, optional: bool = True) -> None:
    """Raise :class:`InvalidParameterError` naming ``name`` unless ``value`` is an integer ≥ ``low`` (or None)."""
    if value is None and optional:
        return
    if not is_int(value) or value < low:
        raise InvalidParameterError(f"{name} must be an integer ≥ {low}{' or None' if optional else ''}, "
                                    f"got {value!r}")


def check_real(name: str, value, *, below_one: bool = False, optional: bool = True) -> None:
    """Raise :class:`InvalidParameterError` naming ``name`` unless ``value`` is a finite number > 0
    (and < 1 with ``below_one``), or None when ``optional``."""
    if value is None and optional:
        return
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if ok and below_one:
        ok = value < 1
    if not ok:
        span = "in (0, 1)" if below_one else "a finite number > 0"
        raise InvalidParameterError(f"{name} must be {span}{' or None' if optional else ''}, got {value!r}")


def check_bool(name: str, value) -> None:
    """Raise :class:`InvalidParameterError` naming ``name`` unless ``value`` is True or False."""
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidParameterError(f"{name} must be True or False, got {value!r}")


def check_option(name: str, value, cls: type):
    """``value`` if it is a ``cls`` (an option group) or None; else :class:`InvalidParameterError` naming ``name``."""
    if value is None or isinstance(value, cls):
        return value
    raise InvalidParameterError(f"{name} must be a {cls.__name__} or None, got {type(value).__name__}")


@dataclass(frozen=True)
class SolverOptions:
    """Options of the spectral solver (:class:`distdp.lda.pipeline.SpectralParams`).

    A field left at None takes the solver's default.

    Parameters
    ----------
    tensor : {'auto', 'explicit', 'implicit'}, default='auto'
        Form the k×k×k whitened tensor once (``explicit``), or apply it
        implicitly in each power iteration; ``auto``: explicit for k ≤ 100.
    method : {'robust', 'simultaneous'}, default='robust'
        Tensor power method: restarts and deflation, or orthogonalised
        simultaneous iteration.
    eigensolver : {'auto', 'lobpcg', 'lanczos', 'randomized', 'dense'}, default='auto'
        Eigensolver of the second moment M2: ``lobpcg`` (block products, few
        passes) and ``lanczos`` (one-column products, little work between
        them) find its algebraically largest eigenpairs; ``randomized`` its
        largest in magnitude; ``dense`` forms the d×d M2 (small vocabularies
        only). ``auto``: ``lanczos`` for a small corpus, ``lobpcg`` otherwise
        (:func:`distdp.lda.pipeline.auto_eigensolver`).
    restarts : int, optional
        Restarts L of the robust power method (default
        :func:`distdp.lda.pipeline.default_lda_restarts`).
    iters : int, optional
        Power-method iterations R.
    eig_iters : int, optional
        Most products with M2 after the first (each one pass over the corpus;
        default :data:`distdp.lda.pipeline.EIG_MAX_ITERS`).
    eig_tol : float, optional
        Relative residual at which the eigensolver stops (None: the solver's
        default tolerance :data:`distdp.lda.pipeline.EIG_TOL`).
    oversample : int, optional
        Extra columns of the eigensolver's test block (solver default 10).
    precision : {'auto', 'float64', 'float32'}, default='auto'
        Precision of the shards' sparse products with M2's test blocks (the
        whitening's cost) and of their row-block products for the explicit
        whitened tensor; each block's result is added in float64; float32 also
        soft-locks the eigensolver's converged pairs (narrower products:
        :func:`distdp.lda.whitening.lobpcg_top_eigh`). ``auto``: float32 for
        a corpus of at least
        :data:`distdp.lda.pipeline.AUTO_FLOAT32_NONZEROS` stored counts
        (whitening 1.4–1.7× faster measured there, the topics moving less
        than a change of seed moves them: benchmarks/precision.py), else
        float64. Non-private fits only.

    Raises
    ------
    InvalidParameterError
        A field of the wrong type or out of range, naming the field.
    """

    tensor: str = "auto"
    method: str = "robust"
    eigensolver: str = "auto"
    restarts: int | None = None
    iters: int | None = None
    eig_iters: int | None = None
    eig_tol: float | None = None
    oversample: int | None = None
    precision: str = "auto"

    def __post_init__(self):
        for name in ("tensor", "method", "eigensolver"):
            if not isinstance(getattr(self, name), str):
                raise InvalidParameterError(f"SolverOptions.{name} must be a string, got {getattr(self, name)!r}")
        check_int("SolverOptions.restarts", self.restarts, 1)
        check_int("SolverOptions.iters", self.iters, 1)
        check_int("SolverOptions.eig_iters", self.eig_iters, 1)
        check_real("SolverOptions.eig_tol", self.eig_tol)
        check_int("SolverOptions.oversample", self.oversample, 0)
        if self.precision not in ("auto", *PRECISIONS):
            raise InvalidParameterError(f"SolverOptions.precision must be one of {('auto', *PRECISIONS)}, got "
                                        f"{self.precision!r}")

    def spectral_params(self, k: int, alpha0: float, model: str, nonzeros: int | None = None,
                        documents: int | None = None) -> SpectralParams:
        """The :class:`~distdp.lda.pipeline.SpectralParams` of a fit of ``k`` topics with these options.

        ``nonzeros``: the corpus's stored counts, which settle ``precision='auto'`` (float64 when not given);
        with ``documents`` they settle ``eigensolver='auto'`` (:func:`~distdp.lda.pipeline.auto_eigensolver`;
        ``lobpcg`` when not given).
        """
        precision = self.precision
        if precision == "auto":
            precision = "float32" if nonzeros is not None and nonzeros >= AUTO_FLOAT32_NONZEROS else "float64"
        eigensolver = self.eigensolver
        if eigensolver == "auto":
            eigensolver = auto_eigensolver(nonzeros, documents)
        return SpectralParams(k=k, alpha0=alpha0, model=model, eigensolver=eigensolver, precision=precision,
                              soft_locking=precision == "float32",
                              eig_iters=EIG_MAX_ITERS if self.eig_iters is None else self.eig_iters,
                              eig_tol=EIG_TOL if self.eig_tol is None else self.eig_tol,
                              oversample=self.oversample, tensor=self.tensor, method=self.method,
                              n_restarts=self.restarts, n_iters=self.iters)
