"""Add noise and record the release: one place for both.

A :class:`PrivateReleases` is bound to a :class:`~distdp.privacy.ledger.PrivacyLedger`,
the run's noise generator and its :class:`~distdp.privacy.neighbours.NeighbourRelation`.
Each noise method draws through :mod:`distdp.privacy.mechanisms` (the same
generator calls, in the same order, as calling the mechanism directly) and
records one :class:`~distdp.privacy.ledger.Release` with its mechanism,
sensitivity, noise scale, count, ``dp_accounting`` event, neighbour relation,
note and sampler (:func:`~distdp.privacy.mechanisms.sampler_name`). The
record is written before the noise is drawn, so that a draw that fails is
still counted. :meth:`PrivateReleases.record` records a release whose noise
is drawn elsewhere (e.g. the steps of DP-SGD).

Releases that share one record (a stage noised several times, accounted once
with its total ``count``) pass ``record=False`` to every call but the one
that records.
"""
from __future__ import annotations

from typing import Optional, Union

import numpy as np
from dp_accounting import dp_event as dpe

from distdp.privacy import accounting, mechanisms
from distdp.privacy.ledger import PrivacyLedger, Release
from distdp.privacy.neighbours import NeighbourRelation

__all__ = ["PrivateReleases"]

Number = Union[float, int]


class PrivateReleases:
    """Noisy releases of one run, each recorded in ``ledger`` under ``neighbour``.

    Parameters
    ----------
    ledger : PrivacyLedger
        Where every release is recorded.
    rng : numpy.random.Generator or None
        The noise generator (a :class:`~distdp.privacy.mechanisms.SecureNoise`
        in a private run). ``None`` for an object that only :meth:`record`\\ s.
    neighbour : NeighbourRelation
        The relation every sensitivity refers to.
    """

    def __init__(self, ledger: PrivacyLedger, rng: Optional[np.random.Generator], neighbour: NeighbourRelation):
        self.ledger, self.rng, self.neighbour = ledger, rng, neighbour

    # ------------------------------------------------------------------ records

    def sampler(self, mechanism: str, n_entries: int, on_value: bool = True, method: str | None = None) -> str:
        """What draws this object's noise (:func:`~distdp.privacy.mechanisms.sampler_name`); ``""`` without a generator."""
        if self.rng is None:
            return ""
        return mechanisms.sampler_name(self.rng, mechanism, int(n_entries), on_value=on_value, method=method)

    def record(self, stage: str, mechanism: str, sensitivity: Union[Number, str], noise_scale: Union[Number, str],
               count: int, dp_event: dpe.DpEvent, note: str = "", sampler: str = "") -> Release:
        """Record one :class:`Release` (noise drawn elsewhere) under this object's neighbour relation.

        Returns
        -------
        Release
            The record, as appended to the ledger.
        """
        return self.ledger.record(Release(stage, mechanism, sensitivity, noise_scale, int(count), dp_event,
                                          str(self.neighbour), note, sampler))

    def _gaussian_record(self, stage, sigma, sensitivity, multiplier, count, event, note, sampler, mechanism,
                         noise_scale, record: bool) -> None:
        if not record:
            return
        if event is None:
            event = accounting.gaussian_event(multiplier if multiplier is not None else sigma / sensitivity, count)
        self.record(stage, mechanism, sensitivity, sigma if noise_scale is None else noise_scale, count, event,
                    note, sampler)

    # ------------------------------------------------------------------ Gaussian

    def gaussian(self, stage: str, value, sigma, sensitivity: Union[Number, str], *, multiplier: float | None = None,
                 count: int = 1, event: dpe.DpEvent | None = None, note: str = "", n: int | None = None,
                 method: str | None = None, mechanism: str = "gaussian", noise_scale=None,
                 record: bool = True) -> np.ndarray:
        """``value`` + ``N(0, σ²)`` (:func:`~distdp.privacy.mechanisms.add_gaussian`), recorded.

        Parameters
        ----------
        stage : str
            The release's name in the ledger.
        value : array_like
        sigma : float or array_like
            Noise standard deviation (may broadcast: per-column scales).
        sensitivity : float or str
            ℓ2 sensitivity under :attr:`neighbour` (recorded; a formula string
            when it varies per release, with ``multiplier`` or ``event`` given).
        multiplier : float, optional
            σ/Δ of the event (default ``sigma / sensitivity``).
        count : int
            Releases the record accounts for.
        event : DpEvent, optional
            The event, in place of ``gaussian_event(multiplier, count)``.
        note : str
        n, method
            As in :func:`~distdp.privacy.mechanisms.add_gaussian` (``n`` also
            sizes the sampler's name; default ``value``'s size).
        mechanism : str
            The mechanism's name in the ledger.
        noise_scale : float or str, optional
            Recorded in place of ``sigma`` (a formula).
        record : bool
            False: add the noise only (a release another call records).
        """
        size = int(np.size(value)) if n is None else n
        self._gaussian_record(stage, sigma, sensitivity, multiplier, count, event, note,
                              self.sampler("gaussian", size, method=method), mechanism, noise_scale, record)
        return mechanisms.add_gaussian(value, sigma, self.rng, n, method)

    def gaussian_noise(self, stage: str, shape, sigma, sensitivity: Union[Number, str], *,
                       multiplier: float | None = None, count: int = 1, event: dpe.DpEvent | None = None,
                       note: str = "", noise_scale=None, record: bool = True) -> np.ndarray:
        """``N(0, σ²)`` noise of ``shape`` drawn alone (:func:`~distdp.privacy.mechanisms.gaussian_noise`), recorded.

        For a caller that adds the noise itself (in float64); the other
        parameters are those of :meth:`gaussian`.
        """
        self._gaussian_record(stage, sigma, sensitivity, multiplier, count, event, note,
                              self.sampler("gaussian", int(np.prod(shape)), on_value=False), "gaussian",
                              noise_scale, record)
        return mechanisms.gaussian_noise(shape, sigma, self.rng)

    def symmetric_matrix(self, stage: str, M: np.ndarray, sigma: float, sensitivity: Union[Number, str], *,
                         multiplier: float | None = None, count: int = 1, event: dpe.DpEvent | None = None,
                         note: str = "", noise_scale=None, record: bool = True) -> np.ndarray:
        """``M`` + symmetric Gaussian noise on its ``d(d+1)/2`` unique entries (Analyze Gauss,
        :func:`~distdp.privacy.mechanisms.add_symmetric_matrix_noise`), recorded as :meth:`gaussian`."""
        d = np.shape(M)[0]
        self._gaussian_record(stage, sigma, sensitivity, multiplier, count, event, note,
                              self.sampler("gaussian", d * (d + 1) // 2), "gaussian", noise_scale, record)
        return mechanisms.add_symmetric_matrix_noise(M, sigma, self.rng)

    def symmetric_tensor(self, stage: str, T: np.ndarray, sigma: float, sensitivity: Union[Number, str], *,
                         multiplier: float | None = None, count: int = 1, event: dpe.DpEvent | None = None,
                         note: str = "", noise_scale=None, record: bool = True) -> np.ndarray:
        """``T`` + symmetric Gaussian noise on its ``C(d+2,3)`` unique entries
        (:func:`~distdp.privacy.mechanisms.add_symmetric_tensor_noise`), recorded as :meth:`gaussian`."""
        d = np.shape(T)[0]
        self._gaussian_record(stage, sigma, sensitivity, multiplier, count, event, note,
                              self.sampler("gaussian", mechanisms.n_unique_entries(d)), "gaussian", noise_scale,
                              record)
        return mechanisms.add_symmetric_tensor_noise(T, sigma, self.rng, "gaussian")

    def operator(self, stage: str, d: int, sigma: float, sensitivity: Union[Number, str], *,
                 multiplier: float | None = None, count: int = 1, event: dpe.DpEvent | None = None,
                 note: str = "", noise_scale=None, record: bool = True) -> mechanisms.SymmetricNoiseOperator:
        """One symmetric d×d Gaussian noise matrix, never formed
        (:class:`~distdp.privacy.mechanisms.SymmetricNoiseOperator`), recorded as :meth:`gaussian`."""
        self._gaussian_record(stage, sigma, sensitivity, multiplier, count, event, note,
                              self.sampler("operator", d * d), "gaussian", noise_scale, record)
        return mechanisms.SymmetricNoiseOperator(d, sigma, self.rng)

    # ------------------------------------------------------------------ pure ε

    def laplace(self, stage: str, value, scale: float, sensitivity: Number, *, count: int = 1,
                event: dpe.DpEvent | None = None, note: str = "", n: int | None = None,
                method: str | None = None) -> np.ndarray:
        """``value`` + Laplace(``scale``) (:func:`~distdp.privacy.mechanisms.add_laplace`), recorded.

        ``sensitivity`` is the ℓ1 sensitivity; the event defaults to
        ``laplace_event(scale / sensitivity, count)`` (pass ``event`` when the
        ε is known exactly). Other parameters as in :meth:`gaussian`.
        """
        size = int(np.size(value)) if n is None else n
        if event is None:
            event = accounting.laplace_event(scale / sensitivity, count)
        self.record(stage, "laplace", sensitivity, scale, count, event, note,
                    self.sampler("laplace", size, method=method))
        return mechanisms.add_laplace(value, scale, self.rng, n, method)

    def symmetric_tensor_l2(self, stage: str, T: np.ndarray, beta: float, sensitivity: Number, epsilon: float, *,
                            count: int = 1, event: dpe.DpEvent | None = None, note: str = "") -> np.ndarray:
        """``T`` + ℓ2 vector noise, density ∝ ``exp(−β‖b‖₂)``, on its ``C(d+2,3)`` unique entries, mirrored
        (AVN, Imtiaz & Sarwate 2018, Alg. 1; :func:`~distdp.privacy.mechanisms.add_symmetric_tensor_noise`),
        recorded with noise scale ``1/β`` and, by default, the generic pure ``epsilon`` event
        (:func:`~distdp.privacy.accounting.pure_dp_event`)."""
        d = np.shape(T)[0]
        self._pure_record(stage, beta, sensitivity, epsilon, count, event, note, mechanisms.n_unique_entries(d))
        return mechanisms.add_symmetric_tensor_noise(T, beta, self.rng, "l2")

    def _pure_record(self, stage, beta, sensitivity, epsilon, count, event, note, n_entries) -> None:
        if event is None:
            event = accounting.pure_dp_event(epsilon, count)
        self.record(stage, "l2-vector", sensitivity, 1.0 / beta, count, event, note,
                    self.sampler("l2-vector", n_entries))
