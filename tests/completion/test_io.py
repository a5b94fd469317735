"""Observation files (distdp.completion.io): COO parquet and .npy inputs, errors naming file, row and column."""

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from distdp.completion import complete, from_dense
from distdp.completion.api import grouped
from distdp.completion.io import load_observations, write_coo_parquet


def small_obs(seed=0, shape=(5, 6, 7), frac=0.6):
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal(shape)
    Y[rng.random(shape) > frac] = np.nan
    return from_dense(Y)


def write_coo(path, i, j, k, v, shape=None):
    t = pa.table({"i": pa.array(i, pa.int64()), "j": pa.array(j, pa.int64()), "k": pa.array(k, pa.int64()),
                  "value": pa.array(v, pa.float64())})
    if shape:
        t = t.replace_schema_metadata({b"distdp.shape": ",".join(map(str, shape)).encode()})
    pq.write_table(t, path)
    return path


@pytest.mark.parametrize("rows,shape,needle", [
    (([0, 1], [0, 5], [0, 0], [1.0, 2.0]), (2, 3, 1), "row 1: column 'j': index 5 is outside [0, 3)"),
    (([0, 1], [0, 0], [0, 0], [1.0, float("nan")]), None, "row 1: column 'value' is NaN"),
    (([0, 0], [0, 0], [0, 0], [1.0, 2.0]), None, "row 1: entry (0, 0, 0) is observed twice"),
    (([0, -1], [0, 0], [0, 0], [1.0, 2.0]), None, "row 1: column 'i': index -1"),
    (([], [], [], []), None, "observation set is empty"),
])
def test_bad_coo_files_name_file_row_and_column(tmp_path, rows, shape, needle):
    path = write_coo(tmp_path / "x.parquet", *rows, shape=shape)
    with pytest.raises(ValueError) as err:
        load_observations(path)
    assert needle in str(err.value) and "x.parquet" in str(err.value)


def test_bad_npy_and_parameters(tmp_path):
    np.save(tmp_path / "empty.npy", np.full((2, 2, 2), np.nan))
    with pytest.raises(ValueError, match="empty.npy: the observation set is empty"):
        load_observations(tmp_path / "empty.npy")
    np.save(tmp_path / "flat.npy", np.ones((2, 2)))
    with pytest.raises(ValueError, match="flat.npy: expected a 3-way tensor"):
        load_observations(tmp_path / "flat.npy")
    pq.write_table(pa.table({"i": [0], "j": [0], "value": [1.0]}), tmp_path / "cols.parquet")
    with pytest.raises(ValueError, match=r"missing column\(s\) \['k'\]"):
        load_observations(tmp_path / "cols.parquet")
    obs = small_obs()
    for kw, needle in [(dict(rank=0), "rank must be a positive integer, got 0"),
                       (dict(rank=-2), "rank must be a positive integer"),
                       (dict(rank=2, perturbation="gradient", epsilon=0.0), "epsilon must be finite and > 0"),
                       (dict(rank=2, perturbation="output", epsilon=-1.0), "epsilon must be finite and > 0"),
                       (dict(rank=2, perturbation="gradient"), "perturbation gradient needs epsilon"),
                       (dict(rank=2, epsilon=1.0), "epsilon 1.0 given without a perturbation"),
                       (dict(rank=2, perturbation="input", epsilon=1.0, bounds=(0, 1), delta=1e-6),
                        "delta applies only to perturbation gradient"),
                       (dict(rank=2, seed=-1), "seed must be a non-negative integer, got -1"),
                       (dict(rank=2, batch_size=0), "batch_size must be an integer ≥ 1, got 0"),
                       (dict(rank=2, offset=math.nan), "offset must be a finite number"),
                       (dict(rank=2, bounds=(1.0, 0.0)), "bounds must be finite with lo < hi"),
                       (dict(rank=2, perturbation="gradient", epsilon=1.0, delta=2.0), "delta must be in"),
                       (dict(rank=2, perturbation="gradient", epsilon=1.0, tol=1e-3), "tol > 0"),
                       (dict(rank=2, perturbation="magic", epsilon=1.0), "perturbation must be one of"),
                       (dict(rank=2, model="parafac"), "model must be one of"),
                       (dict(rank=2, holdout=1.0), "holdout must be in"),
                       (dict(rank=2, lr=0.0), "lr must be a finite number > 0"),
                       (dict(rank=2, reproducible=True), "reproducible=True needs seed"),
                       (dict(rank=2, max_row_norm=0.0), "max_row_norm must be a number > 0"),
                       (dict(rank=2, model="tucker", max_core_norm=-1.0), "max_core_norm must be a number > 0")]:
        rank = kw.pop("rank")
        with pytest.raises(ValueError, match=needle):
            complete(obs, rank, **grouped(kw))


def test_complex_input_is_refused_naming_the_file(tmp_path):
    Y = small_obs().dense().astype(complex)
    Y[0, 0, 0] = 1 + 2j
    np.save(tmp_path / "z.npy", Y)
    with pytest.raises(ValueError, match=r"z\.npy: complex values \(dtype complex128\) are not supported"):
        load_observations(tmp_path / "z.npy")
    with pytest.raises(ValueError, match="complex values"):
        complete(Y, 2)


def test_directory_of_coo_files(tmp_path):
    obs = small_obs(shape=(5, 6, 7))
    half = obs.n // 2
    d = tmp_path / "coo"
    (d / "sub").mkdir(parents=True)
    write_coo_parquet(obs.subset(np.arange(half)), d / "part-0.parquet")
    write_coo_parquet(obs.subset(np.arange(half, obs.n)), d / "sub" / "part-1.parquet")
    write_coo(d / ".hidden.parquet", [9], [9], [9], [1.0])                     # hidden: skipped
    got = load_observations(d)
    assert got.shape == obs.shape
    np.testing.assert_array_equal(got.idx, obs.idx)
    np.testing.assert_array_equal(got.values, obs.values)
    write_coo(d / "part-2.parquet", [int(obs.idx[0, 0])], [int(obs.idx[0, 1])], [int(obs.idx[0, 2])], [0.5],
              shape=obs.shape)
    with pytest.raises(ValueError, match=r"part-2\.parquet: row 0: entry .* is also observed in .*part-0\.parquet, "
                                         r"row 0"):
        load_observations(d)
    write_coo(d / "part-2.parquet", [0], [0], [0], [0.5], shape=(9, 9, 9))
    with pytest.raises(ValueError, match=r"part-2\.parquet: metadata key 'distdp.shape' says \(9, 9, 9\)"):
        load_observations(d)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="empty: directory holds no .parquet files"):
        load_observations(tmp_path / "empty")


@pytest.mark.parametrize("meta", [b"a,b,c", b"15,12", b"15,12,10,2", b"3,0,2"])
def test_malformed_shape_metadata_names_file_and_key(tmp_path, meta):
    path = tmp_path / "m.parquet"
    pq.write_table(pa.table({"i": [0], "j": [0], "k": [0], "value": [1.0]}).replace_schema_metadata(
        {b"distdp.shape": meta}), path)
    with pytest.raises(ValueError, match=r"m\.parquet: metadata key 'distdp.shape' is .*expected three positive "
                                         r"integers"):
        load_observations(path)
    assert load_observations(path, shape=(2, 2, 2)).shape == (2, 2, 2)     # a given shape needs no metadata
