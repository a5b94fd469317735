"""``distdp decompose``: outputs, report, atomic writes, clear errors."""
import json

import numpy as np
import pytest

from distdp.cli import main
from distdp.tensor import forms
from distdp.tensor.files import write_points
from distdp.tensor.synthetic import SkewedMixture


@pytest.fixture
def tensor_file(tmp_path):
    V = np.linalg.qr(np.random.default_rng(0).standard_normal((8, 3)))[0]
    np.save(tmp_path / "T.npy", forms.rank_one_sum([3e4, 2e4, 1e4], V))
    return tmp_path / "T.npy", V


def test_decompose_writes_eigenpairs_and_report(tmp_path, tensor_file):
    path, V = tensor_file
    out = tmp_path / "out"
    assert main(["decompose", str(path), "--k", "3", "--seed", "1", "--out", str(out)]) == 0
    lam, vec = np.load(out / "eigenvalues.npy"), np.load(out / "eigenvectors.npy")
    np.testing.assert_allclose(lam, [3e4, 2e4, 1e4], rtol=1e-9)
    assert vec.shape == (8, 3)
    rep = json.loads((out / "report.json").read_text())
    assert rep["parameters"]["k"] == 3 and rep["result"]["n_applies"] == 3 * (rep["result"]["n_iters"] + 1)
    assert "decompose_s" in rep["timings"] and rep["private"] is False


@pytest.mark.parametrize("accounting", ["tight", "paper"])
def test_private_decompose_reports_the_certified_epsilon(tmp_path, tensor_file, accounting):
    path, V = tensor_file
    out = tmp_path / accounting
    assert main(["decompose", str(path), "--k", "2", "--epsilon", "1", "--delta", "1e-6", "--restarts", "4",
                 "--iters", "5", "--accounting", accounting, "--out", str(out)]) == 0
    priv = json.loads((out / "report.json").read_text())["result"]["privacy"]
    assert priv["private"] is True and priv["releases"] == 2 * 4 * 6 and priv["neighbour"]["name"] == "symmetric-entry"
    assert priv["epsilon_pld"] <= 1.0 + 1e-9 and priv["accounting"] == accounting


def test_decompose_points_online_and_batch(tmp_path):
    rng = np.random.default_rng(0)
    V = np.linalg.qr(rng.standard_normal((6, 2)))[0]
    write_points(tmp_path / "p.parquet", SkewedMixture(V, np.array([0.6, 0.4]), 0.1).sample(20000, rng))
    for method in ("robust", "online"):
        out = tmp_path / method
        assert main(["decompose", str(tmp_path / "p.parquet"), "--k", "2", "--method", method, "--iters", "8",
                     "--seed", "0", "--out", str(out)]) == 0
        vec = np.load(out / "eigenvectors.npy")
        assert np.min(np.max(np.abs(V.T @ vec), axis=1)) > 0.95


@pytest.mark.parametrize("args,message", [
    (["--k", "9"], "--k = 9 exceeds the dimension d = 8"),
    (["--k", "2", "--epsilon", "0", "--delta", "1e-6"], "--epsilon must be finite and > 0"),
    (["--k", "2", "--epsilon", "1", "--delta", "1"], "--delta must be in (0, 1)"),
    (["--k", "2", "--epsilon", "1"], "needs both --epsilon and --delta"),
    (["--k", "2", "--epsilon", "1", "--delta", "1e-6", "--seed", "3"], "--reproducible"),
])
def test_bad_inputs_fail_with_a_message_naming_the_parameter(tmp_path, tensor_file, capsys, args, message):
    path, _ = tensor_file
    out = tmp_path / "never"
    assert main(["decompose", str(path), *args, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists() and not list(tmp_path.glob(".never*"))  # nothing partial left behind


def test_non_symmetric_tensor_is_rejected(tmp_path, capsys):
    np.save(tmp_path / "bad.npy", np.random.default_rng(0).standard_normal((4, 4, 4)))
    assert main(["decompose", str(tmp_path / "bad.npy"), "--k", "2", "--out", str(tmp_path / "o")]) == 2
    assert "not symmetric" in capsys.readouterr().err and not (tmp_path / "o").exists()
