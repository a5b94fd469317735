"""The privacy report of a run: one type, one JSON shape, for every domain.

A :class:`PrivacyReport` says whether a guarantee is claimed and why not, for
which mechanism and :class:`~distdp.privacy.neighbours.NeighbourRelation`,
what (ε, δ) is certified against the budget requested, how it was accounted,
what it rests on, what is left out, and every release (the
:class:`~distdp.privacy.ledger.PrivacyLedger`). Each domain adds its own
fields in :attr:`PrivacyReport.details` (the tensor power method's noise
multiplier and PLD/RDP/exact ε, completion's paper claim, the LDA fit's
vocabulary entry, ...).

JSON shape (:meth:`PrivacyReport.to_dict`), the common keys first, then the
details::

    {"private": bool, "not_private_because": [str],
     "mechanism": str, "neighbour": {"name", "description", "public"},
     "epsilon": float | null, "delta": float | null,
     "requested": {"epsilon": float | null, "delta": float | null},
     "accounting": str, "assumptions": [str], "notes": [str],
     "not_released": [str], "not_covered": [str],
     "ledger": [Release.to_dict(), ...],
     ...details}
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping, Optional

from distdp.privacy.ledger import PrivacyLedger, Release
from distdp.privacy.neighbours import NeighbourRelation, relation_from_dict

__all__ = ["PrivacyReport", "COMMON_KEYS"]

#: The keys every report's :meth:`PrivacyReport.to_dict` starts with, in order.
COMMON_KEYS = ("private", "not_private_because", "mechanism", "neighbour", "epsilon", "delta", "requested",
               "accounting", "assumptions", "notes", "not_released", "not_covered", "ledger")


@dataclass(frozen=True)
class PrivacyReport:
    """What a run released, under which relation, and what it certifies.

    Attributes
    ----------
    private : bool
        True only when a differential-privacy guarantee is claimed.
    mechanism : str
        The mechanism (or configuration) that made the releases.
    neighbour : NeighbourRelation
        The relation the guarantee (and every sensitivity) refers to.
    epsilon, delta : float or None
        The (ε, δ) certified for the releases (None when nothing is certified).
    requested_epsilon, requested_delta : float or None
        The budget asked for.
    accounting : str
        How the releases were composed and counted.
    not_private_because : tuple of str
        Why no guarantee is claimed (empty when ``private``).
    assumptions : tuple of str
        What the guarantee (or the claim) rests on.
    notes : tuple of str
        Anything else a reader must know.
    not_released : tuple of str
        Quantities computed from the private data without noise that the run
        leaves out of its outputs, as ``"<path>: what"``.
    not_covered : tuple of str
        Reported quantities the guarantee does not cover, as ``"<path>: why"``.
    ledger : PrivacyLedger or None
        Every release (None when nothing was released with noise).
    details : mapping
        The domain's own fields, written after the common ones; no key may be
        one of :data:`COMMON_KEYS`.
    """

    private: bool
    mechanism: str
    neighbour: NeighbourRelation
    epsilon: Optional[float] = None
    delta: Optional[float] = None
    requested_epsilon: Optional[float] = None
    requested_delta: Optional[float] = None
    accounting: str = ""
    not_private_because: tuple = ()
    assumptions: tuple = ()
    notes: tuple = ()
    not_released: tuple = ()
    not_covered: tuple = ()
    ledger: Optional[PrivacyLedger] = field(default=None, compare=False)
    details: Mapping = field(default_factory=dict)

    def __post_init__(self):
        clash = sorted(set(self.details) & set(COMMON_KEYS))
        if clash:
            raise ValueError(f"details may not redefine the common report keys {clash}")
        if not isinstance(self.neighbour, NeighbourRelation):
            raise TypeError(f"neighbour must be a NeighbourRelation, got {type(self.neighbour).__name__}")
        for name in ("not_private_because", "assumptions", "notes", "not_released", "not_covered"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    @property
    def status(self) -> str:
        """``"private"`` or ``"not private"``."""
        return "private" if self.private else "not private"

    def to_dict(self) -> dict:
        """JSON-ready report: :data:`COMMON_KEYS` in order, then :attr:`details`."""
        out = {"private": bool(self.private), "not_private_because": list(self.not_private_because),
               "mechanism": self.mechanism, "neighbour": self.neighbour.to_dict(),
               "epsilon": _number(self.epsilon), "delta": _number(self.delta),
               "requested": {"epsilon": _number(self.requested_epsilon), "delta": _number(self.requested_delta)},
               "accounting": self.accounting, "assumptions": list(self.assumptions), "notes": list(self.notes),
               "not_released": list(self.not_released), "not_covered": list(self.not_covered),
               "ledger": [] if self.ledger is None else [r.to_dict() for r in self.ledger.releases]}
        out.update(self.details)
        return out

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: dict) -> "PrivacyReport":
        """Inverse of :meth:`to_dict` (the ledger rebuilt from its releases, for re-accounting).

        The rebuilt ledger's ``private`` flag is the report's; a δ reserved by
        a propose-test-release check is read from ``details["delta_reserved"]``
        when the domain recorded it there.
        """
        requested = d.get("requested") or {}
        details = {k: v for k, v in d.items() if k not in COMMON_KEYS}
        ledger = PrivacyLedger([Release.from_dict(r) for r in d.get("ledger", [])], bool(d["private"]),
                               float(details.get("delta_reserved", 0.0) or 0.0))
        return cls(bool(d["private"]), d["mechanism"], relation_from_dict(d["neighbour"]), d.get("epsilon"),
                   d.get("delta"), requested.get("epsilon"), requested.get("delta"), d.get("accounting", ""),
                   tuple(d.get("not_private_because", ())), tuple(d.get("assumptions", ())),
                   tuple(d.get("notes", ())), tuple(d.get("not_released", ())), tuple(d.get("not_covered", ())),
                   ledger, details)


def _number(x):
    """A float for JSON (ints and floats as given; None stays None)."""
    if x is None or isinstance(x, (int, float)):
        return x
    return float(x)
