"""Multilinear forms against brute-force einsum references (distdp.tensor.forms)."""
import numpy as np
import pytest
import scipy.sparse as sp

from distdp.tensor import forms


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def test_tensor_apply_and_value_match_brute_force(rng):
    d, L = 7, 5
    T = forms.symmetrize(rng.standard_normal((d, d, d)))
    U = rng.standard_normal((d, L))
    np.testing.assert_allclose(forms.tensor_apply(T, U), np.einsum("ijk,jl,kl->il", T, U, U), atol=1e-12)
    np.testing.assert_allclose(forms.tensor_value(T, U), np.einsum("ijk,il,jl,kl->l", T, U, U, U), atol=1e-12)
    # a single vector is one column
    np.testing.assert_allclose(forms.tensor_apply(T, U[:, 0])[:, 0], forms.tensor_apply(T, U)[:, 0])


@pytest.mark.parametrize("d", [1, 7, 33])
def test_packed_apply_is_the_unpacked_sum(rng, d):
    """Folding modes 2 and 3 onto their pairs j ≤ l gives Σ_jl T_ijl u_j u_l, also for a tensor not symmetric
    in those modes (both entries of a pair are kept). Each output is a sum of about d² products of entries of
    magnitude ≤ ~4 (standard normal draws): float64 rounding is far below 1e-11 of it."""
    T = rng.standard_normal((d, d, d))
    U = rng.standard_normal((d, 5))
    P = forms.pack_pairs(T)
    assert P.matrix.shape == (d, d * (d + 1) // 2)
    np.testing.assert_allclose(forms.packed_apply(P, U), np.einsum("ijk,jl,kl->il", T, U, U), rtol=0, atol=1e-11)
    # a vector is one column (BLAS's matrix-vector and matrix-matrix kernels add in different orders)
    np.testing.assert_allclose(forms.packed_apply(P, U[:, 0]), forms.packed_apply(P, U)[:, :1], rtol=0, atol=1e-11)
    with pytest.raises(ValueError, match="rows"):
        forms.packed_apply(P, np.ones((d + 1, 2)))


def test_explicit_tensor_applies_packed_from_its_threshold(rng, monkeypatch):
    """ExplicitTensor.apply gives the same columns packed (from PACKED_APPLY_DIM) as unpacked, to rounding."""
    from distdp.tensor import power

    d = 9
    T = forms.symmetrize(rng.standard_normal((d, d, d)))
    U = rng.standard_normal((d, 4))
    unpacked = power.ExplicitTensor(T).apply(U)
    packs = []
    monkeypatch.setattr(power, "PACKED_APPLY_DIM", d)
    monkeypatch.setattr(forms, "pack_pairs", lambda T, pack=forms.pack_pairs: packs.append(1) or pack(T))
    op = power.ExplicitTensor(T)
    for _ in range(2):
        np.testing.assert_allclose(op.apply(U), unpacked, rtol=0, atol=1e-12)
    assert packs == [1] and op.calls == 2                   # packed once, on the first apply


@pytest.mark.parametrize("sparse", [False, True])
def test_moment_forms_never_forming_the_tensor_match_the_explicit_moment(rng, sparse):
    n, d, L = 40, 6, 4
    X = rng.standard_normal((n, d)) * (rng.random((n, d)) < 0.5)
    M = np.einsum("ni,nj,nk->ijk", X, X, X) / n
    U = rng.standard_normal((d, L))
    data = sp.csr_matrix(X) if sparse else X
    np.testing.assert_allclose(forms.moment_apply(data, U), forms.tensor_apply(M, U), atol=1e-12)
    np.testing.assert_allclose(forms.moment_value(data, U), forms.tensor_value(M, U), atol=1e-12)
    np.testing.assert_allclose(forms.empirical_moment(data), M, atol=1e-12)


def test_implicit_deflation_equals_subtracting_the_rank_one_terms(rng):
    d, k, L = 8, 3, 6
    V = np.linalg.qr(rng.standard_normal((d, k)))[0]
    lam = np.array([2.0, -0.5, 1.25])
    U = rng.standard_normal((d, L))
    D = forms.rank_one_sum(lam, V)
    np.testing.assert_allclose(D, np.einsum("r,ir,jr,kr->ijk", lam, V, V, V))
    np.testing.assert_allclose(forms.deflation_apply(lam, V, U), forms.tensor_apply(D, U), atol=1e-12)
    np.testing.assert_allclose(forms.deflation_value(lam, V, U), forms.tensor_value(D, U), atol=1e-12)
    assert forms.deflation_apply(lam[:0], V[:, :0], U).shape == U.shape


def test_symmetry_checks(rng):
    T = rng.standard_normal((4, 4, 4))
    S = forms.symmetrize(T)
    assert forms.is_symmetric(S) and not forms.is_symmetric(T)
    with pytest.raises(ValueError, match="not symmetric"):
        forms.check_symmetric(T)
    with pytest.raises(ValueError, match="cubic"):
        forms.check_symmetric(np.zeros((3, 3, 4)))
    S[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        forms.check_symmetric(S)


@pytest.mark.parametrize("sparse", [False, True])
def test_clip_rows_bounds_every_norm_and_keeps_short_rows(rng, sparse):
    X = rng.standard_normal((30, 5)) * rng.uniform(0.1, 3, size=(30, 1))
    C = forms.clip_rows(sp.csr_matrix(X) if sparse else X, 1.5)
    C = C.toarray() if sparse else C
    norms = np.linalg.norm(X, axis=1)
    np.testing.assert_allclose(np.linalg.norm(C, axis=1), np.minimum(norms, 1.5))
    np.testing.assert_allclose(C[norms <= 1.5], X[norms <= 1.5])


def test_symmetry_tolerance_follows_the_dtype():
    assert forms.symmetry_tolerance(np.float64) == 1e-8  # the previous default (≫ 64 eps64)
    assert forms.symmetry_tolerance(np.int64) == 1e-8
    assert forms.symmetry_tolerance(np.float32) == pytest.approx(64 * 2.0 ** -23)


def test_a_tensor_symmetrised_in_float32_is_symmetric_at_float32_precision():
    """Audit case: symmetrize() in float32 leaves ~1 ulp of asymmetry, which the float64 tolerance refused."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1000, 12)).astype(np.float32)
    M = np.einsum("ni,nj,nk->ijk", X, X, X) / np.float32(1000)  # a float32 moment, summed in float32
    S = forms.symmetrize(rng.standard_normal((6, 6, 6)).astype(np.float32)).astype(np.float32)
    for T in (M, S):
        assert forms.is_symmetric(T)
        assert forms.check_symmetric(T).dtype == np.float64
    bad = S.copy()
    bad[0, 1, 2] += np.float32(1e-3) * np.abs(S).max()  # an asymmetry far above float32 rounding
    with pytest.raises(ValueError, match=r"s\.npy is not symmetric.*dtype float32"):
        forms.check_symmetric(bad, name="s.npy")
