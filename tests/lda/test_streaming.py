"""Out-of-core shards (distdp.lda.streaming): every pass re-reads its blocks; the sums equal the in-memory shard's.

The blocks' partial sums are added in another grouping than the in-memory shard's row blocks, so results agree
to rounding: 1e-12 relative is far above the ≈1e-16 per operation of sums over a few hundred documents, and far
below any statistical difference.
"""
import numpy as np
import pytest

from distdp.lda import moments
from distdp.lda.shard import Shard
from distdp.lda.streaming import MatrixBlocks, StreamingShard

RTOL = 1e-12


class CountingBlocks(MatrixBlocks):
    """MatrixBlocks that count how often they were read through."""

    reads = 0

    def __iter__(self):
        self.reads += 1
        yield from super().__iter__()


@pytest.fixture
def pair(small):
    X = small.counts.tocsr()
    cuts = [0, 37, 150, 151, 400]                      # uneven blocks, one of a single document
    blocks = CountingBlocks([X[a:b] for a, b in zip(cuts[:-1], cuts[1:])],
                            [np.array([f"d{i}" for i in range(a, b)]) for a, b in zip(cuts[:-1], cuts[1:])])
    return Shard(X, np.array([f"d{i}" for i in range(400)])), StreamingShard(blocks)


def close(a, b):
    if isinstance(a, (tuple, list)):
        for x, y in zip(a, b, strict=True):
            close(x, y)
    elif hasattr(a, "__dict__"):
        close(list(vars(a).values()), list(vars(b).values()))
    elif a is None:
        assert b is None
    elif isinstance(a, (str, np.str_)) or (isinstance(a, np.ndarray) and a.dtype.kind in "US"):
        assert np.array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-12 * max(1.0, float(np.max(np.abs(a)))))


def test_a_pass_reads_every_block_once_and_the_sums_agree(pair):
    mem, stream = pair
    rng = np.random.default_rng(0)
    d, k = mem.vocab_size, 4
    assert (stream.n_total, stream.nnz, stream.vocab_size) == (400, mem.nnz, d)
    reads = stream.source.reads                          # the constructor's validating read
    omega = rng.standard_normal((d, k + 2))
    close(mem.first_pass(omega), stream.first_pass(omega))
    close(mem.first_pass(omega, "float64", 0.3), stream.first_pass(omega, "float64", 0.3))
    close(mem.m2_product(omega, 0.3), stream.m2_product(omega, 0.3))
    close(mem.m2_dense(), stream.m2_dense())
    assert stream.source.reads == reads + 4              # one read per pass: nothing held between passes
    assert stream.used_documents() == mem.used_documents() == mem.first_pass(omega).n_used   # counted when built
    assert stream.source.reads == reads + 4
    W = rng.standard_normal((d, k))
    weights = moments.TensorWeights(400, 1.0)
    close(mem.tensor_partial(W, weights), stream.tensor_partial(W, weights))             # explicit: with the cube
    close(mem.tensor_partial(W, weights, False, "k"), stream.tensor_partial(W, weights, False, "k"))  # implicit
    U = rng.standard_normal((k, 3))
    close(mem.cube_apply(W, weights, U, "k"), stream.cube_apply(W, weights, U, "k"))
    words = np.arange(10)
    close(mem.cooccurrence(words), stream.cooccurrence(words))
    close(mem.term_frequency(), stream.term_frequency())
    assert stream.integral_counts() and stream.row_count() == 400


def test_em_and_transform_agree(pair, small):
    mem, stream = pair
    beta = small.topic_word + 1e-3
    beta /= beta.sum(1, keepdims=True)
    alpha = np.full(4, 0.25)
    elog = np.log(beta)
    a = mem.e_step(np.exp(elog), elog, alpha)             # no key: both start every document from the prior
    b = stream.e_step(np.exp(elog), elog, alpha, key="ignored")
    close(a[:3], b[:3])
    close(a[4], b[4])
    assert a[3] == b[3]                                   # the largest inner iterations: the same documents
    close(mem.transform(beta, alpha), stream.transform(beta, alpha))


def test_gibbs_is_refused(pair):
    with pytest.raises(ValueError, match="out-of-core fit does not: refine by EM"):
        pair[1].gibbs_start(None, None, None, None)


def test_an_empty_source_is_an_error():
    with pytest.raises(ValueError, match="at least one block"):
        StreamingShard(MatrixBlocks([]))
