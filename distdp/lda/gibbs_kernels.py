"""The compiled per-token loops of the collapsed Gibbs sampler (:mod:`distdp.lda.gibbs`), in numba.

A module of their own so that importing the sampler does not import numba: :func:`distdp.lda.gibbs.kernels`
imports this module the first time a chain samples, and a process that never samples (a Ray actor of a
spectral fit) pays neither numba's import nor the cache load (≈ 0.3 s of an actor's start).
"""
import numpy as np
from numba import njit

# Signatures given, so the code is compiled (or loaded from numba's cache) when this module is imported, not
# inside the first sweep: z holds int16 topics (k < 32,768) or int32.
SEED_SIGS = [f"void(i8[:], i8[:], i8[:], i8[:], {z}[:], i4[:, :], i8[:, :], f8[:], f8[:, :], f8[:], i8)"
             for z in ("i2", "i4")]
SWEEP_SIGS = [f"void(i8[:], i8[:], i8[:], i8[:], {z}[:], i4[:, :], {c}[:, :], i8[:], f8[:], f8, f8, f8[:], i8)"
              for z in ("i2", "i4") for c in ("i4", "i8")]


@njit(cache=True, nogil=True, inline="always")
def search(p, r):
    """The first index whose cumulative weight ``p`` reaches ``r`` (the last if none does)."""
    t = 0
    while t < p.shape[0] - 1 and p[t] < r:
        t += 1
    return t


@njit(SEED_SIGS, cache=True, nogil=True)
def seed_rows(indptr, indices, offsets, rows, z, ndk, nwk, alpha, phi_wk, u, u0):
    """Draw the first topic of every token of ``rows`` ∝ (n_dk + α_k) β̂_kw, document by document."""
    k = alpha.shape[0]
    p = np.empty(k)
    for d in rows:
        for e in range(indptr[d], indptr[d + 1]):
            w = indices[e]
            for i in range(offsets[e], offsets[e + 1]):
                s = 0.0
                for j in range(k):
                    s += (ndk[d, j] + alpha[j]) * phi_wk[w, j]
                    p[j] = s
                t = search(p, u[i - u0] * s)
                z[i] = t
                ndk[d, t] += 1
                nwk[w, t] += 1


@njit(SWEEP_SIGS, cache=True, nogil=True)
def sweep_rows(indptr, indices, offsets, rows, z, ndk, nwk, nk, alpha, eta, d_eta, u, u0):
    """One collapsed Gibbs sweep over the tokens of ``rows``, updating the counts in place."""
    k = alpha.shape[0]
    p = np.empty(k)
    inv = np.empty(k)
    for j in range(k):
        inv[j] = 1.0 / (nk[j] + d_eta)
    for d in rows:
        for e in range(indptr[d], indptr[d + 1]):
            w = indices[e]
            for i in range(offsets[e], offsets[e + 1]):
                t = z[i]
                ndk[d, t] -= 1
                nwk[w, t] -= 1
                nk[t] -= 1
                inv[t] = 1.0 / (nk[t] + d_eta)
                s = 0.0
                for j in range(k):
                    s += (ndk[d, j] + alpha[j]) * (nwk[w, j] + eta) * inv[j]
                    p[j] = s
                t = search(p, u[i - u0] * s)
                z[i] = t
                ndk[d, t] += 1
                nwk[w, t] += 1
                nk[t] += 1
                inv[t] = 1.0 / (nk[t] + d_eta)
