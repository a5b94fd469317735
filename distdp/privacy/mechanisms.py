"""Noise mechanisms and their calibration (pure numpy/scipy; no Ray, no IO).

Conventions
-----------
*Sensitivity* is always the largest distance between the outputs of the
query on two neighbouring inputs, under the neighbour notion the caller
declares (replace-one document, one symmetrised tensor entry, …): ℓ2 for the
Gaussian and ℓ2-vector mechanisms, ℓ1 for Laplace. A *noise multiplier* is
noise scale / sensitivity; it is what :mod:`distdp.privacy.accounting`
composes.

Randomness comes from an explicit ``numpy.random.Generator``. Private code
obtains it from :func:`private_generator` (OS entropy, never a user seed).
"""
from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import optimize, special

__all__ = [
    "private_generator", "noise_generator", "check_epsilon", "check_delta", "check_sensitivity",
    "gaussian_delta", "gaussian_epsilon", "analytic_gaussian_sigma", "classical_gaussian_sigma",
    "gaussian_noise", "laplace_scale", "laplace_noise", "l2_vector_beta", "l2_vector_noise",
    "symmetric_matrix_noise", "SymmetricNoiseOperator", "symmetric_tensor_noise", "n_unique_entries", "unique_entries",
    "from_unique_entries", "MAX_DENSE_NOISE_ENTRIES",
]

#: Largest number of unique tensor entries :func:`symmetric_tensor_noise` will fill (0.8 GB dense).
MAX_DENSE_NOISE_ENTRIES = 10 ** 8


def private_generator() -> np.random.Generator:
    """A generator seeded from OS entropy (``SeedSequence()`` with no argument).

    Private mechanisms must draw from this: a noise sequence that the user
    (or an adversary who knows the seed) can reproduce protects nothing.
    """
    return np.random.default_rng(np.random.SeedSequence())


def noise_generator(rng, reproducible: bool) -> np.random.Generator:
    """The noise generator of a private run: OS entropy, or ``rng`` only when ``reproducible``.

    Raises
    ------
    ValueError
        ``rng`` given without ``reproducible`` (a seeded run is not private), or
        ``reproducible`` without ``rng``.
    TypeError
        ``rng`` is not a ``numpy.random.Generator``.
    """
    if rng is not None and not reproducible:
        raise ValueError("a user-supplied rng makes the noise reproducible, so the result is not private: pass "
                         "reproducible=True to accept that (the report then says 'not private'), or rng=None")
    if reproducible and rng is None:
        raise ValueError("reproducible=True needs an explicit rng (a seeded numpy.random.Generator)")
    if rng is None:
        return private_generator()
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


#: Largest ε accepted: beyond it a guarantee means nothing and the noise is below rounding of the data.
MAX_EPSILON = 1e6


def check_epsilon(epsilon, name: str = "epsilon") -> float:
    """Require a finite ``0 < epsilon ≤ MAX_EPSILON``."""
    try:
        e = float(epsilon)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number > 0, got {epsilon!r}") from None
    if not (e > 0 and math.isfinite(e)):
        raise ValueError(f"{name} must be finite and > 0, got {epsilon!r}")
    if e > MAX_EPSILON:
        raise ValueError(f"{name} {e:g} is above {MAX_EPSILON:g}: such a guarantee means nothing; for a fit "
                         "without noise, leave the privacy options out")
    return e


def check_delta(delta, name: str = "delta") -> float:
    """Require ``0 < delta < 1``."""
    try:
        d = float(delta)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1), got {delta!r}") from None
    if not 0 < d < 1:
        raise ValueError(f"{name} must be in (0, 1), got {delta!r}")
    return d


def check_sensitivity(sensitivity, name: str = "sensitivity") -> float:
    """Require a finite ``sensitivity > 0``."""
    s = float(sensitivity)
    if not (s > 0 and math.isfinite(s)):
        raise ValueError(f"{name} must be finite and > 0, got {sensitivity!r}")
    return s


# --------------------------------------------------------------------------- Gaussian

def gaussian_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """Exact δ(ε) of the Gaussian mechanism (Balle & Wang 2018, Thm 8).

    ``δ = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ)``: the mechanism
    ``f + N(0, σ²I)`` with ℓ2 sensitivity Δ is (ε, δ)-DP iff its δ is at least this.
    """
    if sigma <= 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    return float(special.ndtr(a - b) - math.exp(epsilon + special.log_ndtr(-a - b)))


def gaussian_epsilon(sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest ε with the Gaussian mechanism (σ, Δ) (ε, δ)-DP (inverse of :func:`gaussian_delta`)."""
    delta = check_delta(delta)
    if gaussian_delta(sigma, 0.0, sensitivity) <= delta:
        return 0.0
    hi = 1.0
    while gaussian_delta(sigma, hi, sensitivity) > delta:
        hi *= 2.0
        if hi > 2 * MAX_EPSILON:
            raise ValueError(f"epsilon above {MAX_EPSILON:g}: the noise is negligible")
    return float(optimize.brentq(lambda e: gaussian_delta(sigma, e, sensitivity) - delta, 0.0, hi,
                                 xtol=1e-12, rtol=1e-12))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest σ making ``f + N(0, σ²I)`` (ε, δ)-DP: the analytic Gaussian mechanism.

    Balle & Wang (2018), Algorithm 1, solved by root finding on the exact
    condition :func:`gaussian_delta` (valid for every ε > 0, unlike the
    classical ``√(2 ln(1.25/δ))Δ/ε`` which needs ε < 1).

    Parameters
    ----------
    epsilon : float, > 0
    delta : float, in (0, 1)
    sensitivity : float, > 0
        ℓ2 sensitivity Δ.

    Returns
    -------
    float
        σ (absolute, not a multiplier).
    """
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    sensitivity = check_sensitivity(sensitivity)
    # δ(σ) decreases in σ; bracket in units of Δ.
    lo, hi = 1e-3, 1.0
    while gaussian_delta(hi * sensitivity, epsilon, sensitivity) > delta:
        lo, hi = hi, hi * 2.0
    while gaussian_delta(lo * sensitivity, epsilon, sensitivity) <= delta:
        hi, lo = lo, lo / 2.0
    m = optimize.brentq(lambda s: gaussian_delta(s * sensitivity, epsilon, sensitivity) - delta, lo, hi,
                        xtol=1e-14, rtol=1e-12)
    return float(m * sensitivity)


def classical_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """``σ = √(2 ln(1.25/δ)) Δ/ε`` (Dwork & Roth 2014, Thm A.1), valid only for ε < 1.

    Used only to reproduce papers that use it; raises for ε ≥ 1, where the
    theorem does not apply (use :func:`analytic_gaussian_sigma`).
    """
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    sensitivity = check_sensitivity(sensitivity)
    if epsilon >= 1:
        raise ValueError(f"the classical Gaussian mechanism needs epsilon < 1, got {epsilon:g}: "
                         "use the analytic Gaussian mechanism")
    return math.sqrt(2.0 * math.log(1.25 / delta)) * sensitivity / epsilon


def gaussian_noise(shape, sigma, rng: np.random.Generator) -> np.ndarray:
    """``N(0, σ²)`` noise of ``shape``; ``sigma`` may broadcast against ``shape`` (per-column scales)."""
    return rng.standard_normal(shape) * np.asarray(sigma, dtype=float)


# --------------------------------------------------------------------------- Laplace

def laplace_scale(epsilon: float, sensitivity: float) -> float:
    """``b = Δ₁/ε``: Laplace(b) noise on a query of ℓ1 sensitivity Δ₁ is ε-DP (Dwork & Roth Thm 3.6)."""
    return check_sensitivity(sensitivity) / check_epsilon(epsilon)


def laplace_noise(shape, scale: float, rng: np.random.Generator) -> np.ndarray:
    """Laplace noise with density ``exp(−|x|/b)/(2b)``, ``b = scale``."""
    return rng.laplace(0.0, scale, size=shape)


# --------------------------------------------------------------------------- ℓ2 vector mechanism

def l2_vector_beta(epsilon: float, sensitivity: float) -> float:
    """``β = ε/Δ₂`` of the ℓ2 vector mechanism (density ∝ exp(−β‖b‖₂)), which is ε-DP.

    For neighbours with ``‖f(D) − f(D′)‖₂ ≤ Δ₂`` the density ratio is
    ``exp(β(‖b − f(D′)‖ − ‖b − f(D)‖)) ≤ exp(βΔ₂)`` (triangle inequality).
    """
    return check_epsilon(epsilon) / check_sensitivity(sensitivity)


def l2_vector_noise(dim: int, beta: float, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
    """Sample ``b ∈ R^dim`` with density ∝ ``exp(−β‖b‖₂)`` (Imtiaz & Sarwate, AVN; Chaudhuri et al. 2011).

    In polar coordinates the density of ``r = ‖b‖`` is ∝ ``r^(dim−1) e^(−βr)``:
    ``r ~ Gamma(shape=dim, scale=1/β)``, times a direction uniform on the sphere.

    Returns
    -------
    ndarray, shape (dim,) or (size, dim)
    """
    if dim < 1:
        raise ValueError(f"dim must be ≥ 1, got {dim}")
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    n = 1 if size is None else int(size)
    direction = rng.standard_normal((n, dim))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    radius = rng.gamma(shape=dim, scale=1.0 / beta, size=n)
    out = direction * radius[:, None]
    return out[0] if size is None else out


# --------------------------------------------------------------------------- symmetric noise

def symmetric_matrix_noise(d: int, scale: float, rng: np.random.Generator, kind: str = "gaussian") -> np.ndarray:
    """Symmetric d×d noise: iid on the entries ``j ≤ i``, mirrored (Analyze Gauss, Dwork et al. 2014).

    ``kind`` is ``"gaussian"`` (``N(0, scale²)``) or ``"laplace"`` (Laplace(scale)).
    Privacy needs the noise on the symmetric (unique-entry) parametrisation of
    a symmetric query, with the sensitivity of that parametrisation.
    """
    iu = np.triu_indices(d)
    if kind == "gaussian":
        vals = gaussian_noise(iu[0].shape, scale, rng)
    elif kind == "laplace":
        vals = laplace_noise(iu[0].shape, scale, rng)
    else:
        raise ValueError(f"kind must be 'gaussian' or 'laplace', got {kind!r}")
    E = np.zeros((d, d))
    E[iu] = vals
    return E + np.triu(E, 1).T


class SymmetricNoiseOperator:
    """Products with one symmetric Gaussian noise matrix that is never stored (matrix-free Analyze Gauss).

    The matrix is :func:`symmetric_matrix_noise`'s distribution, iid
    ``N(0, scale²)`` on the unique entries ``i ≤ j`` and mirrored, but it is
    drawn block by block from counter-based streams keyed by the block's
    position (``SeedSequence(entropy, spawn_key=(I, J))``), so every product
    regenerates the same matrix: ``N X`` costs d²/2 draws and O(d²p) flops,
    and the memory is one ``block × block`` tile. The entropy is drawn once
    from ``rng`` and kept only in this object: a release ``S + N`` made
    through products with this operator is one Gaussian release of ``S``,
    whatever is computed from it (post-processing).

    Parameters
    ----------
    d : int
        Dimension.
    scale : float
        Standard deviation of each unique entry.
    rng : numpy.random.Generator
        Source of the entropy (the private run's noise generator).
    block : int
        Tile size; the distribution does not depend on it.
    """

    def __init__(self, d: int, scale: float, rng: np.random.Generator, block: int = 1024):
        if int(d) != d or d < 1:
            raise ValueError(f"d must be an integer ≥ 1, got {d!r}")
        if int(block) != block or block < 1:
            raise ValueError(f"block must be an integer ≥ 1, got {block!r}")
        self.d, self.scale, self.block = int(d), float(scale), int(block)
        self._entropy = [int(x) for x in rng.integers(0, 2 ** 63, size=4)]
        self.products = 0

    def _tile(self, i: int, j: int) -> np.ndarray:
        """Rows of block ``i``, columns of block ``j`` (``i ≤ j``); a diagonal tile is symmetric."""
        b = self.block
        rows, cols = min(b, self.d - i * b), min(b, self.d - j * b)
        gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence(self._entropy, spawn_key=(i, j))))
        t = gen.standard_normal((rows, cols))
        if i == j:
            t = np.triu(t)
            t += np.triu(t, 1).T
        t *= self.scale
        return t

    def matmat(self, X: np.ndarray) -> np.ndarray:
        """``N X`` for a d×p (or length-d) ``X``."""
        X = np.asarray(X, dtype=float)
        vec = X.ndim == 1
        X = X[:, None] if vec else X
        if X.shape[0] != self.d:
            raise ValueError(f"expected {self.d} rows, got shape {X.shape}")
        Y = np.zeros_like(X)
        b, nb = self.block, -(-self.d // self.block)
        for i in range(nb):
            ri = slice(i * b, (i + 1) * b)
            for j in range(i, nb):
                rj = slice(j * b, (j + 1) * b)
                t = self._tile(i, j)
                Y[ri] += t @ X[rj]
                if i != j:
                    Y[rj] += t.T @ X[ri]
        self.products += 1
        return Y[:, 0] if vec else Y

    def dense(self) -> np.ndarray:
        """The whole matrix (tests and small d only)."""
        return self.matmat(np.eye(self.d))


def n_unique_entries(d: int) -> int:
    """``C(d+2, 3)``: unique entries ``i ≤ j ≤ k`` of a symmetric d×d×d tensor."""
    return (d + 2) * (d + 1) * d // 6


def _unique_index_arrays(d: int) -> np.ndarray:
    return np.array(list(itertools.combinations_with_replacement(range(d), 3)), dtype=np.intp).reshape(-1, 3)


def unique_entries(T: np.ndarray) -> np.ndarray:
    """The ``C(d+2,3)`` entries ``T_ijk``, ``i ≤ j ≤ k``, in lexicographic order."""
    idx = _unique_index_arrays(T.shape[0])
    return T[idx[:, 0], idx[:, 1], idx[:, 2]]


def from_unique_entries(values: np.ndarray, d: int) -> np.ndarray:
    """The symmetric d×d×d tensor whose unique entries (``i ≤ j ≤ k``) are ``values``."""
    values = np.asarray(values, dtype=float)
    if values.shape != (n_unique_entries(d),):
        raise ValueError(f"expected {n_unique_entries(d)} unique entries for d = {d}, got shape {values.shape}")
    idx = _unique_index_arrays(d)
    T = np.zeros((d, d, d))
    for p in set(itertools.permutations(range(3))):
        T[idx[:, p[0]], idx[:, p[1]], idx[:, p[2]]] = values
    return T


def symmetric_tensor_noise(d: int, scale: float, rng: np.random.Generator, kind: str = "gaussian",
                           max_entries: int = MAX_DENSE_NOISE_ENTRIES) -> np.ndarray:
    """Symmetric d×d×d noise on the ``C(d+2,3)`` unique entries, mirrored (AGN/AVN, Imtiaz & Sarwate 2018, Alg. 1).

    Parameters
    ----------
    d : int
    scale : float
        ``kind="gaussian"``: standard deviation of each unique entry (AGN).
        ``kind="l2"``: β of the ℓ2 vector mechanism on the unique-entry vector
        (AVN; :func:`l2_vector_noise`).
    rng : numpy.random.Generator
    kind : {"gaussian", "l2"}
    max_entries : int
        Refuse larger tensors (their noise alone would not fit in memory).

    Raises
    ------
    ValueError
        ``d³`` above ``max_entries``: use a mechanism that never forms the
        tensor (the DP tensor power method, noise per ``T(I,u,u)`` release).
    """
    if d ** 3 > max_entries:
        raise ValueError(f"symmetric noise on a {d}×{d}×{d} tensor ({d ** 3:.3g} entries) exceeds "
                         f"max_entries = {max_entries:.3g}: use the DP tensor power method "
                         "(distdp.tensor.dp.private_power_method), which adds noise per T(I,u,u) release")
    D = n_unique_entries(d)
    if kind == "gaussian":
        vals = gaussian_noise(D, scale, rng)
    elif kind == "l2":
        vals = l2_vector_noise(D, scale, rng)
    else:
        raise ValueError(f"kind must be 'gaussian' or 'l2', got {kind!r}")
    return from_unique_entries(vals, d)
