"""``distdp decompose`` on bad or unusual inputs and options: clear errors naming the file, row and CLI flag;
``--out`` checked before any work; no option silently ignored."""

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from distdp.cli import main
from distdp.tensor import forms, power
from distdp.privacy import mechanisms
from distdp.decompose import delta_warning
from distdp.tensor.files import read_points, write_points


@pytest.fixture
def pts(tmp_path):
    """200 dense points in d = 6 (a mixture whose third moment has 2 components)."""
    rng = np.random.default_rng(0)
    V = np.linalg.qr(rng.standard_normal((6, 2)))[0]
    z = rng.integers(0, 2, 200)
    X = (V[:, z] * np.where(z == 0, 2.0, 1.5)).T
    write_points(tmp_path / "p.parquet", X)
    return X


@pytest.fixture
def tensor(tmp_path):
    V = np.linalg.qr(np.random.default_rng(1).standard_normal((6, 3)))[0]
    T = forms.rank_one_sum([3.0, 2.0, 1.0], V)
    np.save(tmp_path / "t.npy", T)
    return T


def run(tmp_path, capsys, *args, out="out"):
    code = main(["decompose", *[str(a) for a in args], "--out", str(tmp_path / out)])
    return code, capsys.readouterr()


def fails_with(tmp_path, capsys, needles, *args):
    code, cap = run(tmp_path, capsys, *args)
    assert code == 2, cap
    for needle in needles:
        assert needle in cap.err, (needle, cap.err)
    assert "Traceback" not in cap.err and not (tmp_path / "out").exists()
    return cap.err


def rows_table(rows, type_=None):
    return pa.table({"x": pa.array(rows, type=type_)})




@pytest.mark.parametrize("array,needles", [
    (np.eye(4), ["bad.npy", "cubic", "(4, 4)"]),
    (np.zeros((3, 3, 3, 3)), ["bad.npy", "cubic"]),
    (np.zeros((3, 3, 4)), ["bad.npy", "cubic", "(3, 3, 4)"]),
    (np.zeros((0, 0, 0)), ["bad.npy", "empty"]),
    (forms.rank_one_sum([1.0], np.eye(3)[:, :1]).astype(complex), ["bad.npy", "complex"]),
    (np.array([[["a"]]]), ["bad.npy", "numeric"]),
])
def test_malformed_tensor_files_name_the_file(tmp_path, capsys, array, needles):
    np.save(tmp_path / "bad.npy", array)
    fails_with(tmp_path, capsys, needles, tmp_path / "bad.npy", "--k", 1)


def test_corrupt_and_pickled_npy_files(tmp_path, capsys):
    (tmp_path / "c.npy").write_bytes(b"garbage")
    fails_with(tmp_path, capsys, ["c.npy", "not a .npy file"], tmp_path / "c.npy", "--k", 1)
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    fails_with(tmp_path, capsys, ["o.npy", "Python objects"], tmp_path / "o.npy", "--k", 1)


def test_float32_tensor_files_are_accepted_and_the_tolerance_is_an_option(tmp_path, capsys):
    V = np.linalg.qr(np.random.default_rng(2).standard_normal((8, 3)))[0].astype(np.float32)
    T = np.einsum("r,ir,jr,kr->ijk", np.array([3, 2, 1], np.float32), V, V, V)
    assert forms._asymmetry(T.astype(float)) > 0  # float32 rounding: refused before the fix
    np.save(tmp_path / "t32.npy", T)
    code, cap = run(tmp_path, capsys, tmp_path / "t32.npy", "--k", 2, "--seed", 0, out="ok")
    assert code == 0, cap.err
    np.testing.assert_allclose(np.load(tmp_path / "ok" / "eigenvalues.npy"), [3, 2], rtol=1e-5)
    fails_with(tmp_path, capsys, ["t32.npy", "not symmetric", "--symmetry-tol"], tmp_path / "t32.npy", "--k", 2,
               "--symmetry-tol", 0)


def test_extension_is_case_insensitive_and_other_formats_are_refused(tmp_path, capsys, tensor):
    np.save(tmp_path / "x.npy", tensor)
    (tmp_path / "x.npy").rename(tmp_path / "T.NPY")
    code, cap = run(tmp_path, capsys, tmp_path / "T.NPY", "--k", 2, "--seed", 0, out="ok")
    assert code == 0, cap.err
    np.savez(tmp_path / "t.npz", T=tensor)
    err = fails_with(tmp_path, capsys, ["t.npz", "unsupported input format '.npz'"], tmp_path / "t.npz", "--k", 2)
    assert "Parquet" not in err
    np.savetxt(tmp_path / "p.csv", np.ones((3, 2)), delimiter=",")
    fails_with(tmp_path, capsys, ["p.csv", "unsupported input format '.csv'"], tmp_path / "p.csv", "--k", 1)




def test_fixed_size_list_column_gives_the_same_result_as_a_list_column(tmp_path, capsys, pts):
    pq.write_table(pa.table({"x": pa.FixedSizeListArray.from_arrays(pa.array(pts.ravel()), 6)}),
                   tmp_path / "f.parquet")
    np.testing.assert_array_equal(read_points(tmp_path / "f.parquet"), read_points(tmp_path / "p.parquet"))
    code, cap = run(tmp_path, capsys, tmp_path / "f.parquet", "--k", 2, "--seed", 0)
    assert code == 0, cap.err


@pytest.mark.parametrize("make,args,needles", [
    (lambda X: pa.table({"vec": pa.array([list(r) for r in X]), "id": pa.array(range(len(X)))}),
     ["--column", "id"], ["b.parquet", "column 'id' has type int64", "list of numbers"]),
    (lambda X: rows_table([["a", "b"]] * 5), [], ["b.parquet", "column 'x' has type list<element: string>"]),
    (lambda X: rows_table([list(r) for r in X]), ["--column", "nope"],
     ["b.parquet", "column 'nope' (--column) does not exist", "['x']"]),
    (lambda X: rows_table([list(r) if i != 10 else None for i, r in enumerate(X)]), [],
     ["b.parquet", "row 10: column 'x' is null"]),
    (lambda X: rows_table([list(r) if i != 11 else [None] + list(r[1:]) for i, r in enumerate(X)]), [],
     ["b.parquet", "row 11: column 'x' has a null entry"]),
    (lambda X: rows_table([list(r) if i != 42 else [np.nan] + list(r[1:]) for i, r in enumerate(X)]), [],
     ["b.parquet", "row 42: column 'x' has a non-finite value (nan)"]),
    (lambda X: rows_table([list(r) if i != 57 else list(r[:-1]) for i, r in enumerate(X)]), [],
     ["b.parquet", "row 57: column 'x' has 5 entries, expected 6"]),
    (lambda X: rows_table([], pa.list_(pa.float64())), [], ["b.parquet", "no points"]),
    (lambda X: rows_table([list(r) for r in X]), ["--dim", 5], ["--dim 5 disagrees", "6 entries"]),
])
def test_bad_point_files_name_file_row_and_flag(tmp_path, capsys, pts, make, args, needles):
    pq.write_table(make(pts), tmp_path / "b.parquet")
    fails_with(tmp_path, capsys, needles, tmp_path / "b.parquet", "--k", 1, *args)


def test_a_file_that_is_not_parquet(tmp_path, capsys):
    (tmp_path / "n.parquet").write_text("not parquet")
    fails_with(tmp_path, capsys, ["n.parquet", "not a readable parquet file"], tmp_path / "n.parquet", "--k", 1)




@pytest.mark.parametrize("args,needles", [
    (["--clip", 0.5], ["--clip applies to private runs on points"]),  # was: data silently clipped
    (["--method", "online", "--n-per-iter", 0], ["--n-per-iter must be an integer ≥ 1, got 0"]),
    (["--n-per-iter", 10], ["--n-per-iter applies to --method online"]),
    (["--neighbour", "replace-one-point"], ["--neighbour applies to private runs"]),
    (["--epsilon", 1, "--delta", 1e-6, "--clip", 3, "--reproducible"], ["--reproducible needs --seed"]),
    (["--symmetry-tol", 1e-6], ["--symmetry-tol applies to a .npy tensor"]),
])
def test_options_that_do_not_apply_are_refused_on_points(tmp_path, capsys, pts, args, needles):
    fails_with(tmp_path, capsys, needles, tmp_path / "p.parquet", "--k", 2, *args)


@pytest.mark.parametrize("args", [["--clip", 0.5], ["--column", "x"], ["--dim", 6]])
def test_point_options_are_refused_on_a_tensor(tmp_path, capsys, tensor, args):
    fails_with(tmp_path, capsys, [args[0], "not to a .npy tensor", "t.npy"], tmp_path / "t.npy", "--k", 2, *args)


def test_large_delta_warns_and_is_recorded(tmp_path, capsys, pts, tensor):
    """δ ≥ 1/n (n points, or the C(d+2,3) distinct entries of a tensor) is allowed but flagged, as in complete.
    (δ = 0.006 just above 1/200: PLD calibration at large δ is slow.)"""
    code, cap = run(tmp_path, capsys, tmp_path / "p.parquet", "--k", 1, "--epsilon", 1, "--delta", 0.006,
                    "--clip", 3, "--restarts", 2, "--iters", 2)
    assert code == 0 and "warning: --delta 0.006 ≥ 1/n = 0.005 for n = 200 points" in cap.err
    assert json.loads((tmp_path / "out" / "report.json").read_text())["warnings"][0].startswith("--delta 0.006")
    assert "n = 56 distinct tensor entries" in delta_warning(0.05, mechanisms.n_unique_entries(6),
                                                             "distinct tensor entries")  # C(8, 3) = 56
    assert delta_warning(1e-6, 56, "distinct tensor entries") is None
    code, cap = run(tmp_path, capsys, tmp_path / "t.npy", "--k", 1, "--epsilon", 1, "--delta", 1e-6,
                    "--restarts", 2, "--iters", 2, out="o3")
    assert code == 0 and "warning" not in cap.err


def test_simultaneous_without_restarts_below_full_rank_warns_in_output_and_report(tmp_path, capsys, tensor):
    code, cap = run(tmp_path, capsys, tmp_path / "t.npy", "--k", 2, "--method", "simultaneous", "--restarts", 1,
                    "--seed", 0)
    assert code == 0 and "warning: simultaneous method with 1 restart and k < d" in cap.err
    rep = json.loads((tmp_path / "out" / "report.json").read_text())
    assert rep["warnings"] and rep["result"]["notes"] == rep["warnings"]




def test_existing_out_is_refused_before_any_work(tmp_path, capsys, tensor, monkeypatch):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep").write_text("mine")

    def no_work(*a, **k):
        raise AssertionError("decomposed before checking --out")

    monkeypatch.setattr(power, "robust_power_method", no_work)
    monkeypatch.setattr("distdp.tensor.files.tensor_operator", no_work)
    code, cap = run(tmp_path, capsys, tmp_path / "t.npy", "--k", 2)
    assert code == 2 and "--out" in cap.err and "already exists" in cap.err and "--overwrite" in cap.err
    assert (tmp_path / "out" / "keep").read_text() == "mine"


def test_out_that_is_a_file_is_refused_even_with_overwrite(tmp_path, capsys, tensor):
    (tmp_path / "victim.txt").write_text("precious")
    code, cap = run(tmp_path, capsys, tmp_path / "t.npy", "--k", 2, "--overwrite", out="victim.txt")
    assert code == 2 and "is not a directory" in cap.err
    assert (tmp_path / "victim.txt").read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.npy", "victim.txt"]  # no stray backup


def test_overwrite_leaves_no_backup_behind(tmp_path, capsys, tensor):
    for _ in range(2):
        code, cap = run(tmp_path, capsys, tmp_path / "t.npy", "--k", 2, "--overwrite", "--seed", 0)
        assert code == 0, cap.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "t.npy"]
