"""Synthetic data whose third moment is an orthogonal low-rank tensor (for tests and benchmarks).

Points ``x = s·v_h + σ·z`` with ``h ~ Categorical(w)``, ``z ~ N(0, I_d)`` and
a skewed scalar ``s`` with ``P(s = −1) = 2/3``, ``P(s = 2) = 1/3``, so
``E[s] = 0``, ``E[s²] = 2``, ``E[s³] = 2``. Every cross term of
``E[x⊗x⊗x]`` has a factor ``E[s]``, ``E[z]`` or ``E[z⊗z⊗z]``, all zero, so

    E[x⊗x⊗x] = Σ_h 2·w_h · v_h⊗v_h⊗v_h,

an orthogonal decomposition with ``λ_h = 2 w_h`` when the ``v_h`` are
orthonormal (checked numerically in the tests).
"""
from __future__ import annotations

import numpy as np

__all__ = ["SkewedMixture"]


class SkewedMixture:
    """The model above; :meth:`sample` draws points, :attr:`eigenvalues` is ``2w``.

    Parameters
    ----------
    components : ndarray, shape (d, k)
        Orthonormal ``v_h`` as columns.
    weights : ndarray, shape (k,)
        Mixture weights ``w`` (sum to 1).
    noise_std : float
        σ of the isotropic Gaussian noise.
    """

    S_VALUES = np.array([-1.0, 2.0])
    S_PROBS = np.array([2.0 / 3.0, 1.0 / 3.0])
    S_THIRD_MOMENT = 2.0

    def __init__(self, components: np.ndarray, weights: np.ndarray, noise_std: float = 0.0):
        self.components = np.asarray(components, dtype=float)
        self.weights = np.asarray(weights, dtype=float)
        if self.components.ndim != 2 or self.components.shape[1] != self.weights.shape[0]:
            raise ValueError("components must be (d, k) with k = len(weights)")
        if not np.isclose(self.weights.sum(), 1.0) or np.any(self.weights < 0):
            raise ValueError("weights must be a probability vector")
        self.noise_std = float(noise_std)
        self.dim = self.components.shape[0]

    @property
    def eigenvalues(self) -> np.ndarray:
        """``λ_h = E[s³]·w_h``."""
        return self.S_THIRD_MOMENT * self.weights

    def sample(self, m: int, rng: np.random.Generator) -> np.ndarray:
        """``m`` points as rows, shape (m, d)."""
        h = rng.choice(self.weights.shape[0], size=m, p=self.weights)
        s = rng.choice(self.S_VALUES, size=m, p=self.S_PROBS)
        X = self.components[:, h].T * s[:, None]
        if self.noise_std > 0:
            X += self.noise_std * rng.standard_normal((m, self.dim))
        return X
