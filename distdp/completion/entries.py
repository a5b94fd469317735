"""Observed entries of a partially observed 3-way tensor (COO), their validation and train/test split.

The observation set Ω (which entries are observed, and which of them are held
out) is treated as public throughout distdp.completion; the private data are
the observed values (the privacy unit is the value of one observed entry).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Observations:
    """Observed entries Ω of an n1×n2×n3 tensor in coordinate form.

    Attributes
    ----------
    shape : tuple of 3 int
    idx : ndarray of int64, shape (n, 3)
        (i, j, k) of each observed entry, all distinct.
    values : ndarray of float64, shape (n,)
        x_ijk, finite.
    """

    shape: tuple[int, int, int]
    idx: np.ndarray
    values: np.ndarray

    def __post_init__(self):
        validate_entries(self.shape, self.idx, self.values, source="observations")

    @property
    def n(self) -> int:
        """Number of observed entries |Ω|."""
        return len(self.values)

    def subset(self, rows: np.ndarray) -> "Observations":
        """The observations at positions ``rows``."""
        return Observations(self.shape, self.idx[rows], self.values[rows])

    def with_values(self, values: np.ndarray) -> "Observations":
        """The same Ω with other values (e.g. perturbed ones)."""
        return Observations(self.shape, self.idx, np.asarray(values, dtype=float))

    def dense(self) -> np.ndarray:
        """A dense tensor with NaN at the unobserved entries."""
        out = np.full(self.shape, np.nan)
        out[tuple(self.idx.T)] = self.values
        return out


def validate_entries(shape, idx: np.ndarray, values: np.ndarray, source: str = "input") -> None:
    """Reject malformed COO entries with a message naming the source and the first bad row.

    Raises
    ------
    ValueError
        Wrong shapes or types, indices out of range or duplicated, non-finite
        values, or no entry at all.
    """
    if len(shape) != 3 or any(int(n) <= 0 for n in shape):
        raise ValueError(f"{source}: tensor shape must be three positive sizes, got {tuple(shape)}")
    if idx.ndim != 2 or idx.shape[1] != 3 or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"{source}: indices must be an integer array of shape (n, 3), got {idx.dtype} {idx.shape}")
    if values.shape != (len(idx),):
        raise ValueError(f"{source}: {len(idx)} index rows but values of shape {values.shape}")
    if len(values) == 0:
        raise ValueError(f"{source}: the observation set is empty (no observed entry)")
    for mode, (name, n) in enumerate(zip("ijk", shape)):
        bad = np.flatnonzero((idx[:, mode] < 0) | (idx[:, mode] >= n))
        if bad.size:
            r = int(bad[0])
            raise ValueError(f"{source}: row {r}: column '{name}': index {int(idx[r, mode])} is outside [0, {n})"
                             f" ({bad.size} such rows)")
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        r = int(bad[0])
        raise ValueError(f"{source}: row {r}: column 'value': {values[r]} is not a finite number"
                         f" ({bad.size} such rows)")
    repeat = first_repeat(idx, shape)
    if repeat is not None:
        r = repeat[1]
        raise ValueError(f"{source}: row {r}: entry {tuple(int(x) for x in idx[r])} is observed twice")


def first_repeat(idx: np.ndarray, shape) -> tuple[int, int] | None:
    """Rows ``(a, b)``, ``a < b``, of the first entry listed twice (in sorted entry order), or None.

    ``idx`` (n×3) must lie inside ``shape``.
    """
    flat = np.ravel_multi_index(tuple(idx.T), tuple(int(n) for n in shape))
    order = np.argsort(flat, kind="stable")
    dup = np.flatnonzero(np.diff(flat[order]) == 0)
    return (int(order[dup[0]]), int(order[dup[0] + 1])) if dup.size else None


def from_dense(tensor: np.ndarray, source: str = "tensor") -> Observations:
    """Observations from a dense 3-way array with NaN at the missing entries.

    Raises
    ------
    ValueError
        Complex or non-numeric values, not 3-way, infinite entries, no observed entry.
    """
    tensor = np.asarray(tensor)
    if np.iscomplexobj(tensor):
        raise ValueError(f"{source}: complex values (dtype {tensor.dtype}) are not supported: completion fits real "
                         "tensors; pass the real part (np.real) or the magnitude explicitly if that is what you mean")
    if tensor.dtype == bool or not (np.issubdtype(tensor.dtype, np.number)):
        raise ValueError(f"{source}: expected a numeric array, got dtype {tensor.dtype}")
    tensor = tensor.astype(float)
    if tensor.ndim != 3:
        raise ValueError(f"{source}: expected a 3-way tensor, got {tensor.ndim} dimensions {tensor.shape}")
    if np.isinf(tensor).any():
        where = tuple(int(x) for x in np.argwhere(np.isinf(tensor))[0])
        raise ValueError(f"{source}: entry {where} is infinite (use NaN for missing entries)")
    idx = np.argwhere(~np.isnan(tensor)).astype(np.int64)
    if len(idx) == 0:
        raise ValueError(f"{source}: the observation set is empty (every entry is NaN)")
    return Observations(tuple(int(n) for n in tensor.shape), idx, tensor[tuple(idx.T)])


def split_holdout(obs: Observations, fraction: float, rng: np.random.Generator):
    """Random train/test split of the observed entries (paper §5: 80/20).

    Parameters
    ----------
    obs : Observations
    fraction : float in [0, 1)
        Share of the observed entries held out for testing.
    rng : numpy.random.Generator
        The split uses no data values, only the count |Ω|.

    Returns
    -------
    train, test : Observations, Observations or None
        ``test`` is None when ``fraction`` is 0.
    """
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"holdout must be in [0, 1), got {fraction}")
    n_test = int(round(fraction * obs.n))
    if n_test == 0:
        return obs, None
    if n_test >= obs.n:
        raise ValueError(f"holdout {fraction} of {obs.n} observed entries leaves no training entry")
    perm = rng.permutation(obs.n)
    return obs.subset(np.sort(perm[n_test:])), obs.subset(np.sort(perm[:n_test]))


def slice_counts(obs: Observations) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Observed entries per slice of each mode: n^(1)_i, n^(2)_j, n^(3)_k (public: they depend on Ω only)."""
    return tuple(np.bincount(obs.idx[:, m], minlength=obs.shape[m]) for m in range(3))
