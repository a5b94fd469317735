"""Shared privacy core (pure math: no Ray, no IO).

- :mod:`~distdp.privacy.mechanisms`: Gaussian (analytic calibration), Laplace,
  ℓ2 vector mechanism, symmetric matrix/tensor noise, the private generator.
- :mod:`~distdp.privacy.accounting`: dp-accounting events, PLD/RDP accounting,
  basic/advanced composition, Gaussian multiplier calibration, the
  Wang–Anandkumar recipe.
- :mod:`~distdp.privacy.ledger`: :class:`Release` records and the
  :class:`PrivacyLedger` of a fit (re-accountable, JSON).
- :mod:`~distdp.privacy.neighbours`: :class:`NeighbourRelation` and one
  constant per relation the package uses (:data:`REPLACE_ONE_DOCUMENT`,
  :data:`CHANGE_ONE_ENTRY`, the tensor notions).
- :mod:`~distdp.privacy.releases`: :class:`PrivateReleases`, which adds
  Gaussian, Laplace and ℓ2-vector noise and records each release in the
  ledger in one place.
- :mod:`~distdp.privacy.report`: :class:`PrivacyReport`, the one report
  type (and JSON shape) of every private run.
- :mod:`~distdp.privacy.vocabulary`: the DP vocabulary selection.
"""
from distdp.privacy.accounting import (PaperRecipe, UnsupportedEventError, advanced_composition,
                                       basic_composition, calibrate_gaussian_multiplier, compose, delta_pld,
                                       epsilon, epsilon_pld, epsilon_rdp, gaussian_composition_epsilon,
                                       gaussian_event, laplace_event, paper_dp_tpm_recipe, pure_dp_event)
from distdp.privacy.ledger import (BudgetExceededError, BudgetNotMetError, PrivacyLedger, PrivateRunInternalError,
                                  Release)
from distdp.privacy.neighbours import (CHANGE_ONE_ENTRY, IMTIAZ_SARWATE, REPLACE_ONE_DOCUMENT, REPLACE_ONE_POINT,
                                      SYMMETRIC_ENTRY, NeighbourRelation)
from distdp.privacy.releases import PrivateReleases
from distdp.privacy.report import PrivacyReport
from distdp.privacy.mechanisms import (analytic_gaussian_sigma, classical_gaussian_sigma, gaussian_delta,
                                       gaussian_epsilon, gaussian_noise, l2_vector_beta, l2_vector_noise,
                                       laplace_noise, laplace_scale, private_generator, symmetric_matrix_noise,
                                       symmetric_tensor_noise)

__all__ = [
    "analytic_gaussian_sigma", "classical_gaussian_sigma", "gaussian_delta", "gaussian_epsilon",
    "gaussian_noise", "laplace_scale", "laplace_noise", "l2_vector_beta", "l2_vector_noise",
    "symmetric_matrix_noise", "symmetric_tensor_noise", "private_generator",
    "gaussian_event", "laplace_event", "pure_dp_event", "compose", "epsilon", "epsilon_pld", "epsilon_rdp",
    "delta_pld", "gaussian_composition_epsilon", "basic_composition", "advanced_composition",
    "calibrate_gaussian_multiplier", "PaperRecipe", "paper_dp_tpm_recipe", "UnsupportedEventError",
    "Release", "PrivacyLedger", "BudgetExceededError", "BudgetNotMetError", "PrivateRunInternalError",
    "NeighbourRelation", "REPLACE_ONE_DOCUMENT", "CHANGE_ONE_ENTRY", "SYMMETRIC_ENTRY", "IMTIAZ_SARWATE",
    "REPLACE_ONE_POINT", "PrivateReleases", "PrivacyReport",
]
