"""The privacy ledger: every release of a fit, re-accountable and serialisable.

A :class:`Release` is a frozen record of one stage's noisy releases
(mechanism, sensitivity, noise scale, count, and the ``dp_accounting``
event). A :class:`PrivacyLedger` keeps them in order and answers the total
(ε, δ) with any accountant, so a saved ledger can be re-counted later with a
better accountant (``PrivacyLedger.from_dict(d).epsilon(δ, "rdp")``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Union

from dp_accounting import dp_event as dpe

from distdp.privacy import accounting, mechanisms

__all__ = ["Release", "PrivacyLedger", "BudgetExceededError", "BudgetNotMetError", "PrivateRunInternalError",
           "event_to_dict", "event_from_dict"]

Number = Union[float, int]


class BudgetExceededError(ValueError):
    """The releases cost more than the requested (ε, δ)."""


class BudgetNotMetError(ValueError):
    """The noisy releases of a private run cannot support a result (the noise swamps the signal).

    The failure is itself a function of releases already made, so it is a
    private output of them, and it costs what a successful run costs: the
    message says so, so that nobody reruns on the same data believing the
    failed run spent nothing (runs on the same data compose).
    """

    SPENT = (" This failed run already made noisy releases of the data: count it against the privacy budget as a "
             "completed run at the same epsilon and delta (another run on the same data composes with it).")

    def __init__(self, message: str):
        message = message.rstrip()
        super().__init__(message + ("" if message.endswith(".") else ".") + self.SPENT)


class PrivateRunInternalError(RuntimeError):
    """An unexpected error inside a private run: a defect of distdp or a failure of the cluster, not a
    problem with the input.

    The message names the error and says whether noisy releases of the data had
    been made before it; the original exception is the ``__cause__``.

    Parameters
    ----------
    cause : Exception
    releases : int or None
        Releases the run had made (``None``: not known, e.g. inside one dense-mechanism call).
    """

    def __init__(self, cause: BaseException, releases: int | None):
        self.releases = releases
        if releases == 0:
            spent = "No noisy release of the data had been made: nothing was spent."
        else:
            made = "Noisy releases of the data may have been made" if releases is None else \
                f"{releases} noisy release{'s' if releases > 1 else ''} of the data had been made"
            spent = (f"{made}: count this run against the privacy budget as a completed run at the requested "
                     "epsilon and delta.")
        super().__init__(f"internal error in the private fit (a defect of distdp or a failure of the cluster, not a problem "
                         f"with the input): "
                         f"{type(cause).__name__}: {cause}. {spent} Please report it with the traceback.")


_EVENTS = {cls.__name__: cls for cls in (dpe.NoOpDpEvent, dpe.NonPrivateDpEvent, dpe.GaussianDpEvent,
                                         dpe.LaplaceDpEvent, dpe.RandomizedResponseDpEvent, dpe.ZCDpEvent,
                                         dpe.SelfComposedDpEvent, dpe.ComposedDpEvent)}


def event_to_dict(event: dpe.DpEvent) -> dict:
    """A JSON-ready dict of a (nested) dp-accounting event: ``{"type": ..., fields...}``."""
    name = type(event).__name__
    if name not in _EVENTS:
        raise accounting.UnsupportedEventError(f"cannot serialise {event!r}")
    if isinstance(event, dpe.SelfComposedDpEvent):
        return {"type": name, "event": event_to_dict(event.event), "count": int(event.count)}
    if isinstance(event, dpe.ComposedDpEvent):
        return {"type": name, "events": [event_to_dict(e) for e in event.events]}
    out = {"type": name}
    for f in getattr(type(event), "__attrs_attrs__", ()):
        out[f.name] = getattr(event, f.name)
    return out


def event_from_dict(d: dict) -> dpe.DpEvent:
    """Inverse of :func:`event_to_dict`."""
    name = d.get("type")
    if name not in _EVENTS:
        raise accounting.UnsupportedEventError(f"unknown privacy event type {name!r}")
    if name == "SelfComposedDpEvent":
        return dpe.SelfComposedDpEvent(event_from_dict(d["event"]), int(d["count"]))
    if name == "ComposedDpEvent":
        return dpe.ComposedDpEvent([event_from_dict(e) for e in d["events"]])
    return _EVENTS[name](**{k: v for k, v in d.items() if k != "type"})


@dataclass(frozen=True)
class Release:
    """One stage's noisy releases.

    Attributes
    ----------
    stage : str
        What was released (``"power_iteration"``, ``"eigenvalue"``, ``"M2"``...).
    mechanism : str
        ``"gaussian"``, ``"laplace"``, ``"l2-vector"``, ...
    sensitivity : float or str
        The sensitivity, or its formula when it varies per release
        (``"6‖u‖∞²"``), under ``neighbour``.
    noise_scale : float or str
        σ (Gaussian), b (Laplace), 1/β (ℓ2 vector), or its formula.
    count : int
        Number of releases of this kind.
    dp_event : dp_accounting.DpEvent
        The event that accounts for all ``count`` releases.
    neighbour : str
        Neighbour notion the sensitivity refers to.
    note : str
        Anything a reader of the privacy report must know.
    sampler : str
        What drew the noise (:func:`distdp.privacy.mechanisms.sampler_name`):
        ``"opendp-gaussian"``, ``"opendp-laplace"``, ``"csprng-lattice-…"``
        (with its guarantee), ``"numpy-pcg64 (seeded: reproducible, not
        private)"``, ...; empty in records written before it existed.
    """

    stage: str
    mechanism: str
    sensitivity: Union[Number, str]
    noise_scale: Union[Number, str]
    count: int
    dp_event: dpe.DpEvent
    neighbour: str = ""
    note: str = ""
    sampler: str = ""

    def to_dict(self) -> dict:
        """JSON-ready dict (the event nested as :func:`event_to_dict`)."""
        return {"stage": self.stage, "mechanism": self.mechanism, "sensitivity": self.sensitivity,
                "noise_scale": self.noise_scale, "count": self.count, "neighbour": self.neighbour,
                "note": self.note, "sampler": self.sampler, "dp_event": event_to_dict(self.dp_event)}

    @classmethod
    def from_dict(cls, d: dict) -> "Release":
        """Inverse of :meth:`to_dict`."""
        return cls(d["stage"], d["mechanism"], d["sensitivity"], d["noise_scale"], int(d["count"]),
                   event_from_dict(d["dp_event"]), d.get("neighbour", ""), d.get("note", ""), d.get("sampler", ""))


@dataclass
class PrivacyLedger:
    """Ordered record of every release of one fit.

    Parameters
    ----------
    releases : list of Release
    private : bool
        False when the noise came from a user-seeded generator (reproducible
        experiments): the arithmetic is reported but no guarantee is claimed.
    delta_reserved : float
        δ spent outside the events, added to their total: the failure
        probability of a propose-test-release check (a release made although
        the data did not meet the tested condition). The events are accounted
        at ``δ − delta_reserved``.
    """

    releases: list = field(default_factory=list)
    private: bool = True
    delta_reserved: float = 0.0

    def record(self, release: Release) -> Release:
        """Append ``release`` (its event is checked to be accountable now, not at the end)."""
        accounting.flatten_event(release.dp_event, 1, [])
        self.releases.append(release)
        return release

    def event(self) -> dpe.DpEvent:
        """The adaptive composition of every recorded release."""
        return accounting.compose(*(r.dp_event for r in self.releases))

    def reserve_delta(self, delta: float) -> None:
        """Add ``delta`` to :attr:`delta_reserved` (a propose-test-release check's failure probability)."""
        self.delta_reserved += mechanisms.check_delta(delta)

    def epsilon(self, delta: float, accountant: str = "pld") -> float:
        """Total ε at ``delta`` (``accountant`` = ``"pld"`` or ``"rdp"``): the events' ε at ``δ − delta_reserved``.

        ``inf`` when ``delta`` does not exceed :attr:`delta_reserved`.
        """
        rest = mechanisms.check_delta(delta) - self.delta_reserved
        return accounting.epsilon(self.event(), rest, accountant) if rest > 0 else float("inf")

    def total(self, delta: float, accountant: str = "pld") -> tuple[float, float]:
        """The (ε, δ) this ledger certifies at ``delta``."""
        return self.epsilon(delta, accountant), mechanisms.check_delta(delta)

    def check_budget(self, epsilon: float, delta: float, accountant: str = "pld") -> float:
        """Return the total ε at ``delta``; raise :class:`BudgetExceededError` if it exceeds ``epsilon``."""
        spent = self.epsilon(delta, accountant)
        if spent > epsilon * (1 + 1e-9):
            raise BudgetExceededError(f"the releases cost epsilon = {spent:.4g} at delta = {delta:g}, "
                                      f"more than the budget epsilon = {epsilon:g}")
        return spent

    def to_dict(self, delta: float | None = None) -> dict:
        """JSON-ready dict; with ``delta``, also the PLD and RDP totals at it."""
        out = {"private": self.private, "releases": [r.to_dict() for r in self.releases]}
        if self.delta_reserved:
            out["delta_reserved"] = self.delta_reserved
        if delta is not None and self.releases:
            out["delta"] = delta
            out["epsilon_pld"] = self.epsilon(delta, "pld")
            out["epsilon_rdp"] = self.epsilon(delta, "rdp")
        return out

    def to_json(self, delta: float | None = None) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(delta), indent=2, ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: dict) -> "PrivacyLedger":
        """Rebuild a ledger from :meth:`to_dict` output (for re-accounting)."""
        return cls([Release.from_dict(r) for r in d["releases"]], bool(d.get("private", True)),
                   float(d.get("delta_reserved", 0.0)))
