"""Neighbour relations: which pairs of datasets a guarantee protects from being told apart.

A differential-privacy guarantee is a statement about neighbouring datasets,
so every release (:class:`distdp.privacy.ledger.Release`) and every privacy
report (:class:`distdp.privacy.report.PrivacyReport`) names its relation.
One :class:`NeighbourRelation` per notion the package uses, as module
constants. What a particular *mechanism* further assumes of the data (every
document of length ≥ 3, rows clipped to a bound, ...) is not part of the
relation: it belongs in that mechanism's assumptions or notes.

- :data:`REPLACE_ONE_DOCUMENT`: spectral LDA (scalable, dense, single-topic)
  and the DP vocabulary selection.
- :data:`CHANGE_ONE_ENTRY`: tensor completion (the DP tensor-completion
  paper, proof of Thm. 2: tensors "differing at only element x_pqr").
- :data:`SYMMETRIC_ENTRY`, :data:`IMTIAZ_SARWATE`, :data:`REPLACE_ONE_POINT`:
  the private tensor power method (Wang & Anandkumar 2016, Def. 4.2;
  Imtiaz & Sarwate 2018, §4; the empirical third moment of clipped points).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NeighbourRelation", "REPLACE_ONE_DOCUMENT", "CHANGE_ONE_ENTRY", "SYMMETRIC_ENTRY", "IMTIAZ_SARWATE",
           "REPLACE_ONE_POINT", "RELATIONS", "relation_from_dict"]


@dataclass(frozen=True)
class NeighbourRelation:
    """A neighbour relation between datasets.

    Attributes
    ----------
    name : str
        Short identifier, e.g. ``"replace-one-document"``.
    description : str
        How two neighbouring datasets differ.
    public : tuple of str
        What is public under the relation (the same in both neighbours), e.g.
        the number of documents.
    """

    name: str
    description: str
    public: tuple = ()

    def to_dict(self) -> dict:
        """JSON-ready ``{"name", "description", "public"}``."""
        return {"name": self.name, "description": self.description, "public": list(self.public)}

    def __str__(self) -> str:
        """The one-line text recorded in each :class:`~distdp.privacy.ledger.Release` (``neighbour``)."""
        public = f" (public: {', '.join(self.public)})" if self.public else ""
        return f"{self.name}: {self.description}{public}"


#: Spectral LDA (every mechanism) and the DP vocabulary selection.
REPLACE_ONE_DOCUMENT = NeighbourRelation(
    "replace-one-document", "two corpora differ in one document, replaced by any other document",
    ("the number of documents N",))
#: Tensor completion.
CHANGE_ONE_ENTRY = NeighbourRelation(
    "change-one-entry", "two tensors differ in the value of one observed entry (the DP tensor-completion paper, proof of "
                        "Thm. 2)",
    ("the observation set Ω", "the train/test split", "the tensor shape"))
#: The private tensor power method on an explicit tensor, as in the paper.
SYMMETRIC_ENTRY = NeighbourRelation(
    "symmetric-entry", "T′ − T = ±symmetrize(e_i⊗e_j⊗e_k), all six permutations summed "
                       "(Wang & Anandkumar 2016, Def. 4.2)", ("the dimension d",))
#: The private tensor power method under Imtiaz & Sarwate's notion.
IMTIAZ_SARWATE = NeighbourRelation(
    "imtiaz-sarwate", "the neighbour notion of Imtiaz & Sarwate (2018, §4), under which Δ(T(I,u,u)) ≤ 2‖u‖∞² "
                      "and Δ(T(u,u,u)) ≤ 2‖u‖∞³", ("the dimension d",))
#: The private tensor power method on the empirical third moment of clipped points.
REPLACE_ONE_POINT = NeighbourRelation(
    "replace-one-point", "two data sets differ in one data point, replaced by any other point within the clip "
                         "bound", ("the number of points n", "the clip bound B"))

#: Every relation above, by name.
RELATIONS = {r.name: r for r in (REPLACE_ONE_DOCUMENT, CHANGE_ONE_ENTRY, SYMMETRIC_ENTRY, IMTIAZ_SARWATE,
                                 REPLACE_ONE_POINT)}


def relation_from_dict(d: dict) -> NeighbourRelation:
    """Inverse of :meth:`NeighbourRelation.to_dict`."""
    return NeighbourRelation(str(d["name"]), str(d["description"]), tuple(d.get("public", ())))
