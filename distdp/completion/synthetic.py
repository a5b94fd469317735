"""Synthetic low-rank tensors of the paper's simulation study (§5.1).

- CP: Ã, B̃, C̃ with iid N(0, 1) entries, columns normalised to unit length,
  X̃ = ⟦Ã, B̃, C̃⟧.
- Tucker: factors with orthonormal columns (QR of a Gaussian matrix), core
  G̃ with iid N(0, 1) entries, X̃ = ⟦G̃; Ã, B̃, C̃⟧.
- X̃ is min-max scaled to [0, 1] (``minmax=True``, as in the paper), then
  Gaussian noise is added at a signal-to-noise ratio SNR = Var(X̃)/σ² (the
  paper does not define SNR; this is our reading: signal variance over noise
  variance, so SNR 1 means σ = std(X̃)).
- A ``missing_ratio`` share of the entries, chosen uniformly, is unobserved.

Note that min-max scaling adds a constant tensor, so the scaled X̃ has CP rank
(and multilinear rank) up to R + 1: a rank-R fit then has a small
approximation floor. ``minmax=False`` keeps X̃ exactly of rank R.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distdp.completion.entries import Observations, from_dense


@dataclass(frozen=True)
class SyntheticTensor:
    """A synthetic completion problem.

    Attributes
    ----------
    truth : ndarray (n1, n2, n3)
        Noise-free X̃ (after scaling).
    observed : Observations
        Noisy values X = X̃ + noise at the observed entries.
    noise_std : float
        σ of the additive noise.
    """

    truth: np.ndarray
    observed: Observations
    noise_std: float


def low_rank_tensor(shape, rank: int, model: str, rng: np.random.Generator) -> np.ndarray:
    """X̃ of paper §5.1 before scaling: CP with unit-norm columns, or Tucker with orthonormal columns."""
    if model == "cp":
        F = [rng.standard_normal((n, rank)) for n in shape]
        F = [f / np.linalg.norm(f, axis=0) for f in F]
        return np.einsum("ir,jr,kr->ijk", *F)
    if model == "tucker":
        F = [np.linalg.qr(rng.standard_normal((n, rank)))[0] for n in shape]
        G = rng.standard_normal((rank, rank, rank))
        return np.einsum("pqt,ip,jq,kt->ijk", G, *F, optimize=True)
    raise ValueError(f"model must be 'cp' or 'tucker', got {model!r}")


def make_problem(shape=(20, 20, 20), rank: int = 3, model: str = "cp", snr: float = 1.0, missing_ratio: float = 0.5,
                 rng: np.random.Generator | None = None, minmax: bool = True,
                 noise_std: float | None = None) -> SyntheticTensor:
    """A noisy, partially observed low-rank tensor (paper §5.1).

    Parameters
    ----------
    shape : tuple of 3 int
    rank : int
    model : {'cp', 'tucker'}
    snr : float
        Var(X̃)/σ² (ignored when ``noise_std`` is given); ``inf`` for no noise.
    missing_ratio : float in [0, 1)
    rng : numpy.random.Generator
    minmax : bool
        Scale X̃ to [0, 1] first (paper).
    noise_std : float, optional
        σ directly.
    """
    if rng is None:
        raise ValueError("make_problem needs an explicit numpy Generator")
    if not 0.0 <= missing_ratio < 1.0:
        raise ValueError(f"missing_ratio must be in [0, 1), got {missing_ratio}")
    truth = low_rank_tensor(shape, rank, model, rng)
    if minmax:
        truth = (truth - truth.min()) / (truth.max() - truth.min())
    sigma = float(noise_std) if noise_std is not None else float(truth.std() / np.sqrt(snr))
    noisy = truth + sigma * rng.standard_normal(truth.shape)
    n = truth.size
    missing = rng.permutation(n)[: int(round(missing_ratio * n))]
    noisy.ravel()[missing] = np.nan
    return SyntheticTensor(truth=truth, observed=from_dense(noisy, source="synthetic"), noise_std=sigma)
