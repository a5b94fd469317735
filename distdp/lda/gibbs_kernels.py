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
#: The sparse sweep's: the same plus the word-topic lists (``z``'s type) and their lengths.
SPARSE_SWEEP_SIGS = [f"void(i8[:], i8[:], i8[:], i8[:], {z}[:], i4[:, :], {c}[:, :], i8[:], f8[:], f8, f8, f8[:], i8, "
                     f"{z}[:, :], i8[:])" for z in ("i2", "i4") for c in ("i4", "i8")]
WORD_TOPICS_SIGS = [f"void({c}[:, :], {z}[:, :], i8[:])" for z in ("i2", "i4") for c in ("i4", "i8")]


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


@njit(WORD_TOPICS_SIGS, cache=True, nogil=True)
def word_topics(nwk, topics, lengths):
    """Each word's topics of nonzero count: ``topics[w, :lengths[w]]`` (any order), for :func:`sweep_rows_sparse`."""
    d, k = nwk.shape
    for w in range(d):
        n = 0
        for j in range(k):                  # no branch: 1.0-1.7x faster on chains' counts (k = 50-100)
            topics[w, n] = j
            n += nwk[w, j] != 0
        lengths[w] = n


@njit(SPARSE_SWEEP_SIGS, cache=True, nogil=True)
def sweep_rows_sparse(indptr, indices, offsets, rows, z, ndk, nwk, nk, alpha, eta, d_eta, u, u0, topics, lengths):
    """:func:`sweep_rows` drawing from the same conditional in time O(the word's topics) instead of O(k).

    With ``c_j = (n_dj + α_j)/(n_j + dη)`` the weight of topic j is
    ``η·c_j + c_j·n_wj``: a smoothing part over all topics, whose total
    ``η·Σ_j c_j`` is kept up to date, and a word part over the topics in
    which the word has a nonzero count (``topics[w, :lengths[w]]``, kept up
    to date as counts reach or leave zero). One uniform picks the part, then
    the topic within it; the smoothing part's O(k) walk is taken with
    probability ``η·Σc / (η·Σc + Σ_w c·n_w)``, small for η ≪ the counts
    (SparseLDA's split, Yao, Mimno & McCallum 2009, §3, with its two
    smoothing buckets in one). ``Σ_j c_j`` is ``A + Σ_{i∈d} 1/(n_{z_i} + dη)``
    with ``A = Σ_j α_j/(n_j + dη)``, so a document's start costs its tokens,
    not k.
    """
    k = alpha.shape[0]
    inv = np.empty(k)
    c = np.empty(k)
    cum = np.empty(k)
    a_sum = 0.0
    for j in range(k):
        inv[j] = 1.0 / (nk[j] + d_eta)
        c[j] = alpha[j] * inv[j]
        a_sum += c[j]
    for d in rows:
        lo, hi = offsets[indptr[d]], offsets[indptr[d + 1]]
        c_sum = a_sum
        for i in range(lo, hi):
            j = z[i]
            c_sum += inv[j]
            c[j] = (ndk[d, j] + alpha[j]) * inv[j]
        for e in range(indptr[d], indptr[d + 1]):
            w = indices[e]
            for i in range(offsets[e], offsets[e + 1]):
                t = z[i]
                c_sum -= c[t]
                a_sum -= alpha[t] * inv[t]
                ndk[d, t] -= 1
                nwk[w, t] -= 1
                nk[t] -= 1
                inv[t] = 1.0 / (nk[t] + d_eta)
                c[t] = (ndk[d, t] + alpha[t]) * inv[t]
                c_sum += c[t]
                a_sum += alpha[t] * inv[t]
                n = lengths[w]
                if nwk[w, t] == 0:                      # t leaves the word's list: swap in the last
                    for m in range(n):
                        if topics[w, m] == t:
                            topics[w, m] = topics[w, n - 1]
                            break
                    n -= 1
                    lengths[w] = n
                q = 0.0
                for m in range(n):
                    j = topics[w, m]
                    q += c[j] * nwk[w, j]
                    cum[m] = q
                r = u[i - u0] * (eta * c_sum + q)
                if r < q:
                    m = 0
                    while m < n - 1 and cum[m] < r:
                        m += 1
                    t = topics[w, m]
                else:                                   # the smoothing part: walk c until (r − q)/η
                    r = (r - q) / eta
                    s = 0.0
                    t = 0
                    while t < k - 1:
                        s += c[t]
                        if s >= r:
                            break
                        t += 1
                z[i] = t
                if nwk[w, t] == 0:
                    topics[w, n] = t
                    lengths[w] = n + 1
                c_sum -= c[t]
                a_sum -= alpha[t] * inv[t]
                ndk[d, t] += 1
                nwk[w, t] += 1
                nk[t] += 1
                inv[t] = 1.0 / (nk[t] + d_eta)
                c[t] = (ndk[d, t] + alpha[t]) * inv[t]
                c_sum += c[t]
                a_sum += alpha[t] * inv[t]
        for i in range(lo, hi):                         # back to the smoothing-only coefficients
            j = z[i]
            c[j] = alpha[j] * inv[j]
