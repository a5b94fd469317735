"""Collapsed Gibbs sampling for LDA started from spectral topics: the default refinement.

Griffiths & Steyvers (2004): with the topic-word counts ``n_wk``, topic
totals ``n_k`` and a document's topic counts ``n_dk`` (all without the token
being resampled), a token of word ``w`` in document ``d`` takes topic ``k``
with probability proportional to

    (n_dk + α_k) · (n_wk + η) / (n_k + d·η).

Distributed as approximate distributed LDA (AD-LDA, Newman, Asuncion, Smyth
& Welling 2009, §3): in each sweep every shard samples its own tokens
against the global counts of the sweep's start plus its own changes, and
the coordinator sums the shards' counts after the sweep. With one shard
this is the exact sampler.

The start is not random: every token's first topic is drawn from the
spectral topics, ``∝ (n_dk + α_k)·β̂_kw`` document by document (the
spectral fit seeds the chain, which then needs far fewer sweeps than from a
random start). α is learned by Minka's fixed point for the
Dirichlet-multinomial on the histograms of the ``n_dk`` (Wallach 2008,
§2.4; what MALLET and tomotopy do every few sweeps); η is a fixed
symmetric prior.

The per-token loop runs compiled (numba, ``nogil``): it is the sampler's
inner loop, as in every Gibbs LDA (MALLET, tomotopy), and has no
vectorised equivalent. From :data:`SPARSE_K` topics, where the words
have counts in at most :data:`SPARSE_SHARE` of the topics, a token costs
the number of topics its word has a count in rather than k (SparseLDA's
split of the conditional, Yao, Mimno & McCallum 2009). Its uniforms come
from the caller's ``numpy.random.Generator``, so a seed fixes the chain.
"""
from __future__ import annotations

import functools
import types
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

#: Tokens whose uniforms are drawn at once (8 MB of float64): the shard's uniforms never exist whole.
TOKEN_BLOCK = 1 << 20


def available() -> bool:
    """Whether the compiled sampler can run (numba is installed and imports)."""
    return kernels() is not None


def integral_counts(counts: sp.csr_matrix) -> bool:
    """Whether every count is a non-negative integer (the sampler needs whole tokens)."""
    data = counts.data
    return bool(np.all(data >= 0) and np.all(data == np.round(data)))


def token_offsets(counts: sp.csr_matrix) -> np.ndarray:
    """Offsets of each nonzero's tokens in the flat token array: ``(nnz + 1,)`` int64."""
    out = np.zeros(len(counts.data) + 1, dtype=np.int64)
    np.cumsum(counts.data.astype(np.int64), out=out[1:])
    return out


@functools.lru_cache(maxsize=None)
def kernels() -> types.ModuleType | None:
    """The compiled per-token loops (:mod:`distdp.lda.gibbs_kernels`), or None where numba cannot be imported.

    Imported on first use, not with this module: a shard that never samples, such as a Ray actor of a
    spectral fit, does not pay numba's import and cache load.
    """
    try:
        from distdp.lda import gibbs_kernels
    except ImportError:  # pragma: no cover - numba is a dependency
        return None
    return gibbs_kernels


#: Parts each shard's documents are split into for sampling (AD-LDA within the shard, one thread per part where
#: cores allow). Fixed, so that a seed gives the same chain on any machine. Newman et al. (2009) report AD-LDA's
#: test perplexity level with the exact sampler's up to hundreds of processors; 4 parts are far inside that.
PARTS = 4


def _token_blocks(offsets_of_rows: np.ndarray, a: int, b: int):
    """Row ranges of ``[a, b)`` holding about :data:`TOKEN_BLOCK` tokens each: ``[(rows, first token, tokens)]``."""
    row_tokens = offsets_of_rows
    cuts = np.searchsorted(row_tokens, np.arange(row_tokens[a] + TOKEN_BLOCK, row_tokens[b], TOKEN_BLOCK),
                           side="right") - 1
    bounds = np.unique(np.concatenate([[a], np.clip(cuts, a, b), [b]]))
    return [(np.arange(lo, hi, dtype=np.int64), int(row_tokens[lo]), int(row_tokens[hi] - row_tokens[lo]))
            for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]


def _parts(row_tokens: np.ndarray, n_parts: int) -> list[tuple[int, int]]:
    """``n_parts`` consecutive row ranges of about equal tokens (some empty for tiny shards)."""
    n = len(row_tokens) - 1
    cuts = np.searchsorted(row_tokens, row_tokens[-1] * np.arange(1, n_parts) / n_parts, side="left")
    bounds = np.concatenate([[0], np.clip(cuts, 0, n), [n]])
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))


#: Fewest topics for the sparse sweep (:func:`distdp.lda.gibbs_kernels.sweep_rows_sparse`, O(the word's topics) a
#: token) instead of the dense one (O(k)); the chains differ, the conditional does not. Measured on the default
#: fits of eight real corpora (benchmarks/results/ab_speed_sparse_sweep.json), the refinement was 0.91-1.29x
#: (median 1.06x) as fast with it at k = 50 and 1.06-1.52x (median 1.16x) at k = 100, the most on the largest
#: corpora, where a sweep's fixed costs weigh least; at k = 20 (a first run) 0.83-1.0x.
SPARSE_K = 50

#: Largest share of the k topics that a part's tokens' words have counts in (weighted by tokens) for its sweep to
#: be sparse: beyond it the lists save little and their gathers cost more than the dense sweep's reads in order.
#: Measured (one thread, the same state): at a share of 0.09 (speeches, k = 50) and 0.22 (news articles, k = 50)
#: the sparse sweep was 1.2-1.5x as fast; at 0.31 (a 40,000-document slice of a synthetic corpus, d = 20,000,
#: k = 50) 0.95x, at 0.36 (news articles, k = 20) 0.9x; on the whole synthetic corpus (200,000 documents) the
#: refinement took 1.55x the dense sweep's time.
SPARSE_SHARE = 0.25

#: Fewest token-topic products (tokens × k) per part for a shard's parts to be sampled in threads: below, handing
#: a part to a thread costs more than it saves. The chain is the same either way.
THREADED_WORK = 1 << 14


class ShardChain:
    """The Gibbs state of one shard's documents: every token's topic and the documents' topic counts.

    The documents are split into :data:`PARTS` consecutive parts; in a
    sweep each part samples against its own copy of the counts of the
    sweep's start (AD-LDA), in up to ``threads`` threads (the compiled
    sweep releases the GIL). Every part draws from its own stream, so the
    chain does not depend on the number of threads.

    Parameters
    ----------
    counts : scipy.sparse.csr_matrix (n, d)
        Whole-number word counts (:func:`integral_counts`).
    phi_wk : ndarray (d, k)
        Topics (columns) the first topics are drawn from.
    alpha : ndarray (k,)
    seed : numpy.random.SeedSequence
        Spawns one stream per part and sweep.
    threads : int
        Parts sampled at once.
    """

    def __init__(self, counts: sp.csr_matrix, phi_wk: np.ndarray, alpha: np.ndarray,
                 seed: np.random.SeedSequence, threads: int = 1):
        if not available():
            raise RuntimeError("the Gibbs refinement needs numba (pip install numba); use refiner='em'")
        self.indptr = counts.indptr.astype(np.int64)
        self.indices = counts.indices.astype(np.int64)
        self.offsets = token_offsets(counts)
        self.seed, self.threads = seed, max(1, int(threads))
        k = len(alpha)
        self.z = np.zeros(int(self.offsets[-1]), dtype=np.int16 if k < 2 ** 15 else np.int32)
        self.ndk = np.zeros((counts.shape[0], k), dtype=np.int32)
        row_tokens = self.offsets[self.indptr]
        bounds = _parts(row_tokens, PARTS)
        self.parts = [_token_blocks(row_tokens, a, b) for a, b in bounds]
        self.nwk = np.zeros((counts.shape[1], k), dtype=np.int64)
        phi = np.array(phi_wk, dtype=np.float64, order="C")         # copies: Ray hands arrays over read-only
        a = np.array(alpha, dtype=np.float64)
        rng = np.random.default_rng(self.seed.spawn(1)[0])
        seed_rows = kernels().seed_rows
        for blocks in self.parts:                          # documents are independent given β̂: one count array
            for rows, u0, n in blocks:
                seed_rows(self.indptr, self.indices, self.offsets, rows, self.z, self.ndk, self.nwk, a, phi,
                          rng.random(n), u0)
        self.sweeps = 0
        self._bounds, self._word_tokens = bounds, None
        work = int(self.offsets[-1]) * k // PARTS
        self._pool = None
        if self.threads > 1 and work >= THREADED_WORK:
            self._pool = ThreadPoolExecutor(min(self.threads, PARTS), thread_name_prefix="gibbs")
            weakref.finalize(self, self._pool.shutdown, wait=False)

    def _sparse_parts(self, nwk: np.ndarray) -> list[bool]:
        """Which parts sweep sparse against the counts ``nwk``: from :data:`SPARSE_K` topics, those whose tokens'
        words have counts in at most :data:`SPARSE_SHARE` of the topics (weighted by tokens). A function of the
        counts only, so the chain stays fixed by the seed."""
        k = nwk.shape[1]
        if k < SPARSE_K:
            return [False] * len(self.parts)
        if self._word_tokens is None:         # each part's tokens of every word (a nonzero's: its offsets' step)
            self._word_tokens = [np.bincount(self.indices[self.indptr[lo]:self.indptr[hi]],
                                             np.diff(self.offsets[self.indptr[lo]:self.indptr[hi] + 1]),
                                             nwk.shape[0]).astype(np.int64) for lo, hi in self._bounds]
        topics_of_word = np.count_nonzero(nwk, axis=1)
        return [bool(topics_of_word @ t <= SPARSE_SHARE * k * t.sum()) for t in self._word_tokens]

    def _sweep_part(self, index: int, nwk: np.ndarray, nk: np.ndarray, alpha: np.ndarray, eta: float,
                    seed: np.random.SeedSequence, sparse: bool) -> np.ndarray:
        """Sweep part ``index`` against its own copy of the counts, ``sparse`` or not (:meth:`_sparse_parts`);
        return the copy's change (``nwk``'s dtype)."""
        local = nwk.copy()
        local_nk = nk.copy()
        rng = np.random.default_rng(seed)
        lib = kernels()
        args = ()
        sweep_rows = lib.sweep_rows
        if sparse:
            topics = np.empty(local.shape, dtype=self.z.dtype)
            lengths = np.empty(local.shape[0], dtype=np.int64)
            lib.word_topics(local, topics, lengths)
            args, sweep_rows = (topics, lengths), lib.sweep_rows_sparse
        for rows, u0, n in self.parts[index]:
            sweep_rows(self.indptr, self.indices, self.offsets, rows, self.z, self.ndk, local, local_nk, alpha,
                       eta, nwk.shape[0] * eta, rng.random(n), u0, *args)
        local -= nwk
        return local

    def sweep(self, nwk: np.ndarray, alpha: np.ndarray, eta: float) -> np.ndarray:
        """One sweep against the global counts ``nwk`` (d×k, every shard's); returns this shard's new counts.

        Each part works on a copy of ``nwk`` with its own changes applied as
        it samples (AD-LDA); what is returned is this shard's part of the
        counts after the sweep, ``(d, k)`` int64. The parts' copies are int32
        wherever no count can reach 2³¹ (a topic's total, which bounds each of
        its counts, plus this shard's tokens): half the memory traffic of the
        copies, which at k = 50 cost as much as the sampling.
        """
        nk = np.asarray(nwk).sum(axis=0, dtype=np.int64)
        narrow = nk.size == 0 or int(nk.max()) + len(self.z) < 2 ** 31
        glob = np.ascontiguousarray(nwk, dtype=np.int32 if narrow else np.int64)
        a = np.array(alpha, dtype=np.float64)
        seeds = self.seed.spawn(len(self.parts))
        jobs = [(i, glob, nk, a, float(eta), s, sparse)
                for i, (s, sparse) in enumerate(zip(seeds, self._sparse_parts(glob)))]
        if self._pool is not None:
            changes = list(self._pool.map(lambda job: self._sweep_part(*job), jobs))
        else:
            changes = [self._sweep_part(*job) for job in jobs]
        for change in changes:                              # in part order: the same sum for any thread count
            self.nwk += change
        self.sweeps += 1
        return self.nwk.copy()

    def count_histograms(self) -> tuple[np.ndarray, np.ndarray]:
        """Histograms for the α update: ``(H (k, L+1): documents with n_dk = c, lengths (L+1,): with n_d = c)``."""
        lengths = self.ndk.sum(axis=1)
        size = int(lengths.max(initial=0)) + 1
        k = self.ndk.shape[1]
        flat = (np.arange(k, dtype=np.int64) * size)[None, :] + self.ndk
        H = np.bincount(flat.ravel(), minlength=k * size).reshape(k, size)
        return H, np.bincount(lengths, minlength=size)


def compact_counts(counts: np.ndarray) -> np.ndarray:
    """``counts`` as int32 where every entry fits (half the bytes on the wire), else unchanged (int64)."""
    return counts.astype(np.int32) if counts.size == 0 or counts.max() < 2 ** 31 else counts


def add_counts(parts: list) -> np.ndarray:
    """The shards' counts summed in shard order, in int64 whatever width each came in."""
    total = np.array(parts[0], dtype=np.int64)
    for part in parts[1:]:
        total += part
    return total


def sum_histograms(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Add the shards' :meth:`ShardChain.count_histograms` (padded to the longest document)."""
    size = max(p[1].shape[0] for p in parts)
    H = sum(np.pad(p[0], ((0, 0), (0, size - p[0].shape[1]))) for p in parts)
    L = sum(np.pad(p[1], (0, size - p[1].shape[0])) for p in parts)
    return H, L


def update_alpha(alpha: np.ndarray, H: np.ndarray, lengths: np.ndarray, max_iter: int = 200,
                 tol: float = 1e-6, floor: float = 1e-6) -> np.ndarray:
    """Minka's fixed point for the Dirichlet-multinomial α, from count histograms (Wallach 2008, §2.4).

    ``α_k ← α_k · Σ_c H[k,c] (ψ(c + α_k) − ψ(α_k)) / Σ_c L[c] (ψ(c + Σα) − ψ(Σα))``, which increases
    the marginal likelihood ``Π_d p(n_d· | α)`` of the documents' topic counts at each step (Minka 2000, §3).

    Parameters
    ----------
    alpha : ndarray (k,)
    H : ndarray (k, L+1)
        ``H[k, c]``: documents whose count of topic k is c.
    lengths : ndarray (L+1,)
        ``lengths[c]``: documents of c tokens.
    """
    a = np.asarray(alpha, dtype=np.float64).copy()
    if lengths[1:].sum() == 0:
        return a
    # ψ(c + a) − ψ(a) = Σ_{i<c} 1/(a + i): the sums over documents become sums over i of the documents
    # counting more than i (reverse cumulative histograms), one division per (topic, i) instead of two
    # digammas per (topic, count) — the same fixed point.
    S, D = _exceeding(H), _exceeding(np.asarray(lengths)[None, :])[0]
    i_s = np.arange(S.shape[1], dtype=np.float64)
    i_d = np.arange(len(D), dtype=np.float64)
    for _ in range(max_iter):
        num = (S / (a[:, None] + i_s[None, :])).sum(axis=1)
        den = (D / (a.sum() + i_d)).sum()
        new = np.maximum(a * num / den, floor)
        change = float(np.max(np.abs(new - a) / a))
        a = new
        if change < tol:
            break
    return a


def _exceeding(H: np.ndarray) -> np.ndarray:
    """``S[k, i]``: the documents whose count in row k exceeds i, for i below the largest count (float64)."""
    tail = np.cumsum(H[:, ::-1], axis=1)[:, ::-1][:, 1:]       # Σ_{c > i} H[k, c]
    used = np.flatnonzero(tail.any(axis=0))
    return tail[:, :used[-1] + 1].astype(np.float64) if len(used) else tail[:, :0].astype(np.float64)


def log_marginal(alpha: np.ndarray, H: np.ndarray, lengths: np.ndarray) -> float:
    """``Σ_d log p(n_d· | α)`` of the Dirichlet-multinomial, from the histograms (:func:`update_alpha`'s objective)."""
    a = np.asarray(alpha, dtype=np.float64)
    c = np.arange(H.shape[1], dtype=np.float64)
    docs = lengths.sum()
    return float(docs * gammaln(a.sum()) - (lengths * gammaln(c + a.sum())).sum()
                 + (H * (gammaln(c[None, :] + a[:, None]) - gammaln(a)[:, None])).sum())


def word_log_likelihood(nwk: np.ndarray, eta: float) -> float:
    """``log p(w | z)`` with the topics integrated out (Griffiths & Steyvers 2004, eq. 2): the chain's trace."""
    d, _ = nwk.shape
    nk = nwk.sum(axis=0)
    used = nwk[nwk > 0]                       # a zero count adds gammaln(η) − gammaln(η) = 0: most of d×k
    return float((gammaln(d * eta) - gammaln(nk + d * eta)).sum() + (gammaln(used + eta) - gammaln(eta)).sum())


def topics_from_counts(nwk: np.ndarray, eta: float) -> np.ndarray:
    """Posterior-mean topics ``(n_wk + η)/(n_k + dη)`` as (k, d) rows."""
    post = nwk.T + eta
    return post / post.sum(axis=1, keepdims=True)
