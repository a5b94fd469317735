"""Out-of-core shards: every pass reads the shard's documents again, one block at a time.

The spectral fit needs a few passes over the documents (the first pass, the
eigensolver's M2 products, the whitened tensor), each a sum over documents,
and variational EM's E-steps are sums over documents too. A
:class:`StreamingShard` holds no documents between passes: for each pass it
reads its blocks again (for a parquet corpus: its row groups) and adds the
partial sums of :class:`~distdp.lda.shard.Shard` block by block, so its
memory is one block plus the pass's O(d·k) working arrays, however large the
shard. The sums are those of the in-memory shard, grouped by block: equal up
to rounding.

What needs every document's state between passes does not stream: the
collapsed Gibbs chain (a topic per token, more than the counts themselves)
and the warm start of EM's E-steps (each E-step starts from the prior);
private fits hold their shards in memory.
"""
from __future__ import annotations

from typing import Iterable, Protocol

import numpy as np
import scipy.sparse as sp

from distdp.lda import moments
from distdp.lda.moments import sum_partials
from distdp.lda.shard import Shard


class BlockSource(Protocol):
    """Documents read in blocks, again on every iteration: ``(CSR counts, document ids or None)`` pairs."""

    def __iter__(self) -> Iterable[tuple[sp.csr_matrix, np.ndarray | None]]: ...


class MatrixBlocks:
    """A :class:`BlockSource` over CSR matrices in memory (tests, and the reference for parquet sources)."""

    def __init__(self, blocks: list[sp.csr_matrix], doc_ids: list | None = None):
        self.blocks = [sp.csr_matrix(b, dtype=np.float64) for b in blocks]
        self.ids = doc_ids

    def __iter__(self):
        for i, b in enumerate(self.blocks):
            yield b, None if self.ids is None else self.ids[i]


class StreamingShard:
    """A shard whose documents are read again, block by block, for every pass.

    Parameters
    ----------
    source : BlockSource
        Re-iterable blocks of the shard's documents (rows in order). It is
        read once here, which validates every row (a bad value is an error
        now, naming the file and row, not in the middle of the fit) and counts
        the rows and stored counts exactly.
    doc_ids : ignored
        The ids come with the blocks (the constructor takes the in-memory
        :class:`~distdp.lda.shard.Shard`'s arguments).
    """

    def __init__(self, source: BlockSource, doc_ids=None):
        self.source = source
        rows = nnz = used = 0
        d = None
        for block, _ in source:
            rows, nnz, d = rows + block.shape[0], nnz + block.nnz, block.shape[1]
            used += moments.used_documents(block)
        if d is None:
            raise ValueError("an out-of-core shard needs at least one block of documents")
        self.n_total, self.nnz, self._d, self._used = rows, nnz, d, used

    @property
    def vocab_size(self) -> int:
        """Number of columns ``d``."""
        return self._d

    def _shards(self):
        """An in-memory :class:`Shard` per block, read now."""
        for block, ids in self.source:
            yield Shard(block, ids)

    def row_count(self) -> int:
        """Documents in this shard."""
        return self.n_total

    def used_documents(self) -> int:
        """:meth:`Shard.used_documents`, counted when the shard was read first."""
        return self._used

    def first_pass(self, omega: np.ndarray, precision: str = "float64", q_scale: float | None = None):
        """:meth:`Shard.first_pass`, summed over the blocks."""
        return sum_partials(s.first_pass(omega, precision, q_scale) for s in self._shards())

    def m2_product(self, omega: np.ndarray, q_scale: float | None = None, precision: str = "float64"):
        """:meth:`Shard.m2_product`, summed over the blocks."""
        return sum_partials(s.m2_product(omega, q_scale, precision) for s in self._shards())

    def m2_dense(self):
        """:meth:`Shard.m2_dense`, summed over the blocks."""
        return sum_partials(s.m2_dense() for s in self._shards())

    def tensor_partial(self, W: np.ndarray, weights, with_cube: bool = True, key=None, precision: str = "float64"):
        """:meth:`Shard.tensor_partial`, summed over the blocks (``Y = C W`` is not kept between passes)."""
        return sum_partials(s.tensor_partial(W, weights, with_cube, None, precision) for s in self._shards())

    def cube_apply(self, W: np.ndarray, weights, U: np.ndarray, key=None) -> np.ndarray:
        """:meth:`Shard.cube_apply`, summed over the blocks (``Y`` recomputed block by block)."""
        return sum_partials(s.cube_apply(W, weights, U) for s in self._shards())

    def e_step(self, exp_elog_beta: np.ndarray, elog_beta: np.ndarray, alpha: np.ndarray, key=None,
               max_iter: int = 100, tol: float = 1e-3, norm_cap: float | None = None,
               scales: np.ndarray | None = None, relative_tol: bool = False) -> tuple:
        """:meth:`Shard.e_step` block by block, each document started from the prior (no warm start):
        ``(sstats, doc_bound, n_docs, largest inner iterations, Σ_n E[log θ_n])``."""
        parts = [s.e_step(exp_elog_beta, elog_beta, alpha, None, max_iter, tol, norm_cap, scales, relative_tol)
                 for s in self._shards()]
        sstats, bound, n, iters, elog = zip(*parts)
        return (sum_partials(sstats), sum_partials(bound), sum_partials(n), max(iters),
                None if any(e is None for e in elog) else sum_partials(elog))

    def transform(self, exp_elog_beta: np.ndarray, alpha: np.ndarray, max_iter: int = 100,
                  tol: float = 1e-3) -> tuple:
        """:meth:`Shard.transform`, the blocks' rows concatenated in order."""
        theta, lengths, ids = zip(*(s.transform(exp_elog_beta, alpha, max_iter, tol) for s in self._shards()))
        return (np.concatenate(theta), np.concatenate(lengths),
                None if any(i is None for i in ids) else np.concatenate(ids))

    def integral_counts(self) -> bool:
        """Whether every count is a whole number."""
        return all(s.integral_counts() for s in self._shards())

    def cooccurrence(self, words: np.ndarray):
        """:meth:`Shard.cooccurrence`, summed over the blocks."""
        return sum_partials(s.cooccurrence(words) for s in self._shards())

    def term_frequency(self) -> np.ndarray:
        """Total count of every word (d,)."""
        return sum_partials(s.term_frequency() for s in self._shards())

    def gibbs_start(self, *args, **kwargs):
        """Refused: the chain keeps a topic for every token, more memory than the counts it streams."""
        raise ValueError("collapsed Gibbs sampling keeps every token's topic in memory, which an out-of-core "
                         "fit does not: refine by EM (refiner='em')")

    gibbs_sweep = gibbs_start
