"""Row-blocked shard products equal the unblocked ones; a shard's CSR is read into arrays allocated once.

The blocked and unblocked sums add the same terms in a different order, so they agree to rounding:
each entry is a sum of at most n products of magnitude ≤ max|term|, and float64 summation in any
order errs by at most ~n·ε·Σ|terms| (ε = 2.2e-16); with n = 3,000 rows the tolerance 1e-12
relative to the largest entry leaves a margin of ~100×. A shard that fits in one block takes the
unblocked path itself (bit-identical).
"""
import numpy as np
import pytest
import scipy.sparse as sp

from distdp.io import corpus as cio
from distdp.lda import moments


def counts(n=3000, d=400, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.03, random_state=seed, format="csr")
    X.data = np.ceil(rng.uniform(0, 4, X.nnz))
    return X


def close(a, b):
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * max(1.0, np.abs(b).max()))


@pytest.mark.parametrize("entries", [50, 777, 10 ** 6])
def test_row_blocks_cover_every_row_once_and_share_the_data(entries):
    X = counts()
    blocks = list(moments.row_blocks(X, 7, entries))
    assert [a for a, _, _ in blocks] == sorted({a for a, _, _ in blocks}) and blocks[0][0] == 0
    assert blocks[-1][1] == X.shape[0] and all(b0[1] == b1[0] for b0, b1 in zip(blocks, blocks[1:]))
    assert all(blk.shape[0] * 7 <= max(7, entries) for _, _, blk in blocks)
    assert (sp.vstack([blk for _, _, blk in blocks]) != X).nnz == 0
    if len(blocks) > 1:
        assert np.shares_memory(blocks[1][2].data, X.data)
    else:
        assert blocks[0][2] is X


@pytest.mark.parametrize("q_scale,scaled", [(None, False), (0.37, False), (None, True)])
def test_blocked_m2_product_equals_unblocked(monkeypatch, q_scale, scaled):
    X = counts()
    omega = np.random.default_rng(1).standard_normal((X.shape[1], 9))
    scale = np.random.default_rng(2).uniform(0.2, 1.0, X.shape[0]) if scaled else None
    whole = moments.m2_product_partial(X, omega, q_scale, scale)
    monkeypatch.setattr(moments, "PRODUCT_BLOCK_ENTRIES", 9 * 128)      # 128-row blocks: 24 of them
    blocked = moments.m2_product_partial(X, omega, q_scale, scale)
    close(blocked.e2, whole.e2)
    close(blocked.q, whole.q)


@pytest.mark.parametrize("with_cube", [True, False])
def test_blocked_tensor_partial_equals_unblocked(monkeypatch, with_cube):
    X = counts()
    W = np.random.default_rng(3).standard_normal((X.shape[1], 5)) * 0.1
    weights = moments.TensorWeights(X.shape[0], 2.0)
    whole = moments.tensor_partial(X, W, weights, with_cube=with_cube, Y=np.asarray(X @ W))
    monkeypatch.setattr(moments, "PRODUCT_BLOCK_ENTRIES", 5 * 100)
    blocked = moments.tensor_partial(X, W, weights, with_cube=with_cube)
    for name in ("z", "g", "sum_m2", "sum_m1m1") + (("cube",) if with_cube else ()):
        close(getattr(blocked, name), getattr(whole, name))
    assert blocked.cube is None if not with_cube else blocked.cube.shape == (5, 5, 5)


def test_cube_sum_block_is_bounded_by_entries(monkeypatch):
    Y = np.random.default_rng(4).standard_normal((1000, 6))
    w = np.random.default_rng(5).uniform(size=1000)
    whole = moments.weighted_cube_sum(Y, w, block=10 ** 6)
    monkeypatch.setattr(moments, "PRODUCT_BLOCK_ENTRIES", 36 * 7)   # 7 rows of k² = 36 entries
    close(moments.weighted_cube_sum(Y, w), whole)


def test_read_units_fills_preallocated_arrays_like_stacking(tmp_path):
    X = counts(2500, 300, seed=6)
    keep = np.ones(X.shape[0])
    keep[5] = 0
    X = sp.csr_matrix(sp.diags(keep) @ X)       # document 5 empty
    X.eliminate_zeros()
    cio.write_corpus(tmp_path / "c", X, n_shards=3, row_group_size=400)
    units = cio.plan_units(cio.discover(tmp_path / "c"))
    assert len(units) > 3 and all(u.nonzeros > 0 for u in units)
    got = cio.read_units(units, 300)
    assert got.indices.dtype == np.int32 and got.data.dtype == np.float64 and got.has_sorted_indices
    assert got.shape == X.shape and (got != X).nnz == 0
    np.testing.assert_array_equal(got.indptr, X.indptr)


def test_a_repeated_id_is_reported_on_its_row(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pa.table({"word_ids": pa.array([[0, 1], [2], [3, 3], [1]], type=pa.list_(pa.int32())),
                  "counts": pa.array([[1, 1], [1], [1, 2], [1]], type=pa.list_(pa.int32()))})
    pq.write_table(t, tmp_path / "dup.parquet")
    with pytest.raises(ValueError, match=r"dup.parquet: row 2: column 'word_ids': id 3 appears twice"):
        cio.read_corpus(tmp_path / "dup.parquet", 5)
    t = pa.table({"word_ids": pa.array([[0, 1], [1, 2]], type=pa.list_(pa.int32())),   # same id across rows: fine
                  "counts": pa.array([[1, 1], [1, 2]], type=pa.list_(pa.int32()))})
    pq.write_table(t, tmp_path / "ok.parquet")
    assert cio.read_corpus(tmp_path / "ok.parquet", 5).nnz == 4


def test_sym3_rows_block_is_bounded_by_entries(monkeypatch):
    rng = np.random.default_rng(7)
    A, B = rng.standard_normal((900, 6)), rng.standard_normal((900, 6))
    whole = moments.sym3_rows(A, B)
    monkeypatch.setattr(moments, "PRODUCT_BLOCK_ENTRIES", 36 * 11)  # 11 rows of k² = 36 entries
    close(moments.sym3_rows(A, B), whole)
