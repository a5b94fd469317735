"""Differentially private tensor completion, CP and Tucker (paper: dp-tensor-completion-cp-tucker).

- :func:`complete`: fit a CP (eq. 6) or Tucker (eq. 7) completion by mini-batch
  SGD, with no perturbation, input perturbation (Alg. 1), the sound gradient
  perturbation (DP-SGD, tight accounting), or the paper's gradient (Alg. 2)
  and output (Alg. 3) perturbations as labelled reproductions.
- :class:`Perturbation` and :class:`CompletionSolver`: its option groups.
- :class:`CompletionResult`, :class:`PrivacyReport`, :class:`Observations`.
- :mod:`distdp.distributed.completion`: repeated runs and ε sweeps as Ray tasks.

Module layout: ``cp.py`` / ``tucker.py`` (model math), ``sgd.py`` (the SGD and
gradient rules), ``perturbation.py`` (mechanisms and privacy reports),
``entries.py`` (observations), ``synthetic.py`` (paper §5.1 data) — none
imports Ray or does IO; ``io.py`` reads/writes files; ``api.py`` is the
entry point. Nothing here imports Ray: the Ray tasks are in
:mod:`distdp.distributed.completion`.
"""
from distdp.completion.api import (CompletionResult, CompletionSolver, DivergenceWarning, NotPrivateWarning,
                                   Perturbation, complete, parameter_names)
from distdp.completion.entries import Observations, from_dense, split_holdout
from distdp.completion.perturbation import PERTURBATIONS, PrivacyReport
from distdp.completion.sgd import SGDConfig, SGDDivergedError, SGDTrace

__all__ = ["complete", "Perturbation", "CompletionSolver", "CompletionResult", "DivergenceWarning", "NotPrivateWarning", "Observations", "from_dense",
           "split_holdout", "parameter_names", "PrivacyReport", "PERTURBATIONS", "SGDConfig", "SGDDivergedError",
           "SGDTrace"]
