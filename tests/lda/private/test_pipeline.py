"""The private coordinator (distdp.lda.private.pipeline): noise once per release, the whitening's forms and
top-up, the working vocabulary's restart, shards' results left alone, and a black-box audit."""
from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats
from scipy.linalg import subspace_angles

from distdp import api
from distdp.lda import moments, pipeline
from distdp.lda.private import fit as pf
from distdp.lda.private.pipeline import _Noise
from distdp.privacy import mechanisms
from distdp.lda.private import scalable as lda_private
from distdp.privacy.ledger import PrivacyLedger
from distdp.lda.private.shard import PrivateShard as Shard
from distdp.lda.synthetic import sample_corpus
from distdp.api import ClusterOptions, PrivacyOptions


D = 7  # vocabulary of the property tests


def csr(rows):
    """(n, D) CSR counts from a list of count vectors."""
    return sp.csr_matrix(np.asarray(rows, dtype=float).reshape(len(rows), D))


def test_whitening_noise_level_counts_the_m1_identity_shift(monkeypatch):
    # 2σ(√d + √p) + a2·v; a spectrum that is only the shift a2·v (M̂2 ≈ −a2(M̂1M̂1ᵀ − vI) with E2 ≈ 0) is below it.
    assert lda_private.whitening_noise_level(0.5, 16, 9, 0.25) == pytest.approx(2 * 0.5 * (4 + 3) + 0.25)
    # Regression: when the noisy histogram's quantile lands on a spurious bin at the grid's bottom, C2 ≈ 1e-7
    # clips every m2_n to ≈ 0 and the whitening sees only the shift (10 equal eigenvalues; a 395-document
    # corpus at ε = 2 returned topics of NPMI −0.71 from it). Forcing that C2 must give the budget error.
    from distdp.lda.private import pipeline as pp
    from distdp.lda.pipeline import LocalBackend, SpectralParams

    real = pp._release_counts

    def tiny_c2(*args):
        n_hat, tokens_hat, c1, _ = real(*args)
        return n_hat, tokens_hat, c1, 1e-7

    monkeypatch.setattr(pp, "_release_counts", tiny_c2)
    c = sample_corpus(400, 300, 5, np.random.default_rng(2), alpha0=1.0, doc_length=100)
    cfg = lda_private.PrivateSpectralConfig(2.0, 1e-6)
    with pytest.raises(ValueError, match="budget cannot be met"):
        pp.fit_spectral_private(LocalBackend([Shard(c.counts)]), 300, SpectralParams(k=5, alpha0=1.0), cfg,
                                np.random.default_rng(0), plan=lda_private.plan_noise(cfg))


@pytest.mark.parametrize("topup", [False, True])
def test_matrix_free_whitening_equals_the_dense_release(monkeypatch, topup):
    """The matrix-free whitening computes the dense form's release without forming it: with the noise matrices
    drawn from the same entropy, its eigenpairs are those of the formed matrix ``(S + N)/n̂ − a2 m1m1ᵀ + a2v``
    (S the dense clipped sum; with the top-up, N the precision average of both draws). LOBPCG stops at
    residual ≤ MATRIX_FREE_TOL × noise level per pair; the Rayleigh–Ritz pairs then obey Davis–Kahan,
    sin Θ ≤ √k·tol/(λ_k − λ_{k+1}) (gap of the formed matrix), and eigenvalues to that tol."""
    from distdp.lda import pipeline
    from distdp.lda.private import pipeline as pp

    monkeypatch.setattr(lda_private, "WHITENING_TOPUP_SNR", 1e9 if topup else 0.0)
    c = sample_corpus(3000, 150, 5, np.random.default_rng(4), alpha0=1.0, doc_length=80)
    backend = pipeline.LocalBackend([Shard(c.counts[:1500]), Shard(c.counts[1500:])])
    cfg = lda_private.PrivateSpectralConfig(8.0, 1e-6, dense_whitening=True, matrix_free=True)
    plan = lda_private.split_whitening(lda_private.plan_noise(cfg))
    coef = moments.MomentCoefficients(1.0)
    d, k, p, n_hat, c2 = 150, 5, 15, 2990.0, 0.05
    m1 = np.asarray(c.counts.sum(axis=0)).ravel() / c.counts.sum()
    m1_var, sens = 1e-9, math.sqrt(2) * c2
    ledger = PrivacyLedger()
    rel = pp._whitening_matrix_free(backend, d, k, p, coef, n_hat, m1, m1_var, c2, sens,
                                    _Noise(plan, np.random.default_rng(9), ledger), np.random.default_rng(10),
                                    pipeline.Stages(None))
    # The reference: the same two operators' matrices (each draws its entropy from the noise generator in turn).
    gen = np.random.default_rng(9)
    s1 = plan["m2_whitening"].multiplier * sens
    n1 = mechanisms.SymmetricNoiseOperator(d, s1, gen).dense()
    s2 = plan["m2_whitening_topup"].multiplier * sens
    n2 = mechanisms.SymmetricNoiseOperator(d, s2, gen).dense()
    noise = lda_private.combine_releases(n1, s1, n2, s2)[0] if topup else n1
    S = sum(sh.private_m2_dense(c2) for sh in (Shard(c.counts[:1500]), Shard(c.counts[1500:])))
    vals, vecs = np.linalg.eigh((S + noise) / n_hat - coef.a2 * np.outer(m1, m1))
    vals, vecs = vals[::-1] + coef.a2 * m1_var, vecs[:, ::-1]
    assert rel.topup["made"] == topup and [r.stage for r in ledger.releases] == (
        ["m2_whitening", "m2_whitening_topup"] if topup else ["m2_whitening"])
    assert rel.sigma == pytest.approx(lda_private.combine_releases(n1, s1, n2, s2)[1] if topup else s1)
    order = np.argsort(rel.vals)[::-1][:k]
    tol = pp.MATRIX_FREE_TOL * lda_private.whitening_noise_level(rel.sigma / n_hat, d, 0, coef.a2 * m1_var)
    assert np.max(np.abs(rel.vals[order] - vals[:k])) <= tol
    top = rel.basis @ rel.vecs[:, order]
    assert np.sin(subspace_angles(vecs[:, :k], top).max()) <= math.sqrt(k) * tol / (vals[k - 1] - vals[k])
    # E2 in the basis is the formed release's, as the whitened tensor's assembly needs.
    np.testing.assert_allclose(rel.e2, rel.basis.T @ ((S + noise) / n_hat) @ rel.basis, rtol=1e-9, atol=1e-15)
    assert rel.solver["form"] == "matrix-free" and rel.solver["converged"]


def test_matrix_free_whitening_leaves_the_shards_results_alone(corpus_p, monkeypatch):
    # One shard's result is returned as is by the reduction, and on Ray (one actor, results ≥ 100 kB) it is
    # a read-only zero-copy array: the noise must not be added in place (it was: "output array is read-only").
    real = Shard.private_m2_product

    @functools.wraps(real)      # the backends call a shard method by its name
    def read_only(self, *args):
        out = real(self, *args)
        out.flags.writeable = False
        return out

    monkeypatch.setattr(Shard, "private_m2_product", read_only)
    m = api.fit_lda(corpus_p.counts, 5, seed=0, progress=False, coherence=False, refine=0,
                    privacy=PrivacyOptions(epsilon=8.0, delta=1e-6, reproducible=True, whitening="matrix-free",
                                           unmix=0),
                    cluster=ClusterOptions(backend="local", workers=1))
    assert m.info["corpus"]["whitening"].startswith("matrix-free (LOBPCG")


def test_a_pass_releases_its_support_only(corpus_p, monkeypatch):
    # The default's second pass starts from the first one's solve, so it releases Q only where that solve is above
    # PASS_SUPPORT deviations (lda_private.pass_support): Q is exactly 0 elsewhere, no noise added there, the word
    # scales 0. The shards' results are read-only, as one Ray actor's are, so the noise must go in out of place;
    # the ledger says it.
    real_stats, real_solve, seen = Shard.unmix_statistics, lda_private.unmix_topics, []

    @functools.wraps(real_stats)
    def read_only(self, *args):
        q, g = real_stats(self, *args)
        q.flags.writeable = g.flags.writeable = False
        return q, g

    def capture(q, g, sigma, threshold, symmetric=True, scales=None, **kw):
        seen.append((np.array(q), None if scales is None else np.array(scales), sigma))
        return real_solve(q, g, sigma, threshold, symmetric, scales, **kw)

    monkeypatch.setattr(Shard, "unmix_statistics", read_only)
    monkeypatch.setattr(lda_private, "unmix_topics", capture)
    m = api.fit_lda(corpus_p.counts, 5, seed=0, progress=False, coherence=False,
                    privacy=PrivacyOptions(epsilon=8.0, delta=1e-6, reproducible=True),
                    cluster=ClusterOptions(backend="local", workers=1))
    passes = [(q, S, sigma) for q, S, sigma in seen if S is not None]       # the tail release has no scales
    assert len(passes) == 2
    q, S, sigma = passes[1]
    off = S == 0
    assert 0 < off.sum() < off.size and not q[off].any()
    assert np.all(q[~off] != 0) and sigma > 0
    note = next(r["note"] for r in m.info["privacy"]["ledger"] if r["stage"] == "unmix_sstats")
    assert "pass_support" in note and "solve_on_support" in note


def test_private_matrix_free_fit_keeps_its_seed_and_no_dense_matrix(monkeypatch):
    """A private (OS-entropy) matrix-free fit: its noise key (256 bits from os.urandom, the SHAKE-256 tiles' key)
    appears nowhere in the model's record, and no
    d×d array is allocated during the whitening (tracemalloc peak below a third of one, 128 MB at d = 4,000:
    the noise tiles are 8 MB, drawn 128 rows at a time from the keyed stream). The iteration cap, when hit, is
    said in the record."""
    import json
    import tracemalloc

    from distdp.lda.private import pipeline as pp

    seeds = []
    real_init = mechanisms.SymmetricNoiseOperator.__init__

    def spy(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        seeds.append(self._key)

    monkeypatch.setattr(mechanisms.SymmetricNoiseOperator, "__init__", spy)
    d = 4000
    c = sample_corpus(3000, d, 5, np.random.default_rng(3), alpha0=1.0, doc_length=60)
    real = pp._whitening_matrix_free
    peaks = []

    def traced(*args):
        tracemalloc.start()
        try:
            return real(*args)
        finally:
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()

    monkeypatch.setattr(pp, "_whitening_matrix_free", traced)
    monkeypatch.setattr(pp, "MATRIX_FREE_MAX_PRODUCTS", 3)
    m = api.fit_lda(c.counts, 5, progress=False, coherence=False, refine=0,
                    privacy=PrivacyOptions(epsilon=1e5, delta=1e-6, unmix=0, whitening="matrix-free"),
                    cluster=ClusterOptions(backend="local"))
    assert m.info["privacy"]["private"] and len(seeds) == 1 and len(seeds[0]) == 32 and peaks
    assert max(peaks) < 8 * d * d / 3
    record = json.dumps(m.info, default=lambda o: np.asarray(o).tolist())
    key = seeds[0]
    assert not any(form in record for form in (key.hex(), str(list(key)), str(int.from_bytes(key, "little"))))
    assert "stopped at its iteration cap" in m.info["corpus"]["whitening"]


def test_noise_is_gaussian_with_the_recorded_scale():
    plan = lda_private.plan_noise(lda_private.PrivateSpectralConfig(1.0, 1e-6))
    ledger = PrivacyLedger()
    noise = _Noise(plan, np.random.default_rng(6), ledger)
    z = noise.add("m1", np.zeros(20_000), 0.7)
    sigma = ledger.releases[0].noise_scale
    assert sigma == pytest.approx(plan["m1"].multiplier * 0.7)
    assert stats.kstest(z / sigma, "norm").pvalue > 1e-3  # fixed seed; rejects a wrong scale by 1% at this n
    M = noise.add("m2_whitening", np.zeros((300, 300)), 0.5, symmetric2=True)
    np.testing.assert_array_equal(M, M.T)
    upper = M[np.triu_indices(300)] / (plan["m2_whitening"].multiplier * 0.5)
    assert stats.kstest(upper, "norm").pvalue > 1e-3  # the unique entries (diagonal included) are N(0, σ²)
    T = noise.add("whitened_tensor", np.zeros((4, 4, 4)), 1.0, symmetric3=True)
    np.testing.assert_allclose(T, T.transpose(1, 0, 2))
    np.testing.assert_allclose(T, T.transpose(0, 2, 1))


def _audit(plan, noise_factor: float, runs: int, rng) -> float:
    """Empirical lower bound on ε of the m1 release for the worst-case neighbouring pair.

    ``runs`` noisy releases on each corpus (noise multiplied by
    ``noise_factor``); likelihood-ratio threshold tests on the projection onto
    the difference; Clopper–Pearson (99%) bounds on their error rates give
    ``ε ≥ log((TPR − δ)/FPR)`` for the best threshold.
    """
    delta = 1e-6
    a = Shard(csr([[9, 0, 0, 0, 0, 0, 0], [1, 2, 3, 0, 0, 0, 0]]))
    b = Shard(csr([[0, 9, 0, 0, 0, 0, 0], [1, 2, 3, 0, 0, 0, 0]]))
    xa, xb = a.private_m1(0.5), b.private_m1(0.5)
    sens = math.sqrt(2) * 0.5 * noise_factor
    ra = np.array([_Noise(plan, rng, PrivacyLedger()).add("m1", xa, sens) for _ in range(runs)])
    rb = np.array([_Noise(plan, rng, PrivacyLedger()).add("m1", xb, sens) for _ in range(runs)])
    u = (xa - xb) / np.linalg.norm(xa - xb)
    pa, pb = ra @ u, rb @ u
    best = 0.0
    for t in np.quantile(np.concatenate([pa, pb]), np.linspace(0.02, 0.98, 49)):
        n_b, n_a = int((pb > t).sum()), int((pa > t).sum())
        fp = stats.beta.ppf(0.995, n_b + 1, runs - n_b)        # upper bound on P_b(reject)
        tp = stats.beta.ppf(0.005, n_a, runs - n_a + 1) if n_a else 0.0  # lower bound on P_a(reject)
        if tp - delta > 0 and fp > 0:
            best = max(best, math.log((tp - delta) / fp))
    return best


def test_black_box_audit_stays_below_the_claim():
    # The audit of the real release stays below the release's ε; the same
    # audit flags a release whose noise is 4× too small (its lower bound
    # exceeds the claim), so it has the power to catch a miscalibration.
    plan = lda_private.plan_noise(lda_private.PrivateSpectralConfig(8.0, 1e-6))
    claimed = mechanisms.gaussian_epsilon(plan["m1"].multiplier, 1e-6)
    rng = np.random.default_rng(7)
    assert _audit(plan, 1.0, 5000, rng) <= claimed
    assert _audit(plan, 0.25, 5000, rng) > claimed


def _mu2(plan: dict) -> dict:
    """Each stage's part of μ² (StageNoise.mu2)."""
    return {s: n.mu2 for s, n in plan.items()}


@pytest.mark.parametrize("whitening, branch", [("dense", "early"), ("dense", "first"), ("dense", "topup"),
                                               ("matrix-free", "first"), ("matrix-free", "topup")])
def test_whitening_topup_branches(corpus_p, monkeypatch, whitening, branch):
    # Every branch of the adaptive whitening, in both forms of its release: the early rung alone (dense only),
    # the first release without the top-up, the top-up. The ledger has exactly the releases made, the unmade
    # ones' budget is in the passes' Q, and each branch spends exactly the requested ε.
    dense = whitening == "dense"
    if branch == "first" and dense:     # the early rung falls short, the first release suffices
        answers = iter([True, False])
        monkeypatch.setattr(lda_private, "needs_topup", lambda eig, level, ratio=None: next(answers))
    else:
        monkeypatch.setattr(lda_private, "WHITENING_TOPUP_SNR", 1e9 if branch == "topup" else 0.0)
    made = branch == "topup"
    seen = []
    share_of = lda_private.working_share
    monkeypatch.setattr(lda_private, "working_share", lambda f, c: seen.append((f, c)) or share_of(f, c))
    m = api.fit_lda(corpus_p.counts, 5, seed=0, progress=False, coherence=False,
                    privacy=PrivacyOptions(epsilon=4.0, delta=1e-6, reproducible=True, working_vocab=100,
                                           whitening=whitening),
                    cluster=ClusterOptions(backend="local"))
    # The working words' share of the tokens is recorded, from the scan's released frequencies over the
    # working columns chosen from them.
    (freq, cols), = seen
    np.testing.assert_array_equal(cols, lda_private.working_columns(freq, 100))
    assert m.info["corpus"]["working_vocab_token_share"] == share_of(freq, cols)
    pv = m.info["privacy"]
    assert 4.0 * (1 - 1e-6) <= pv["epsilon"] <= 4.0
    stages = [r["stage"] for r in pv["ledger"]]
    whitening_stages = [s for s in stages if s.startswith("m2_whitening")]
    assert whitening_stages == ((["m2_whitening_early"] if dense else []) + (["m2_whitening"] if branch != "early"
                                                                            else []) + (["m2_whitening_topup"] if made else []))
    record = m.info["corpus"]["whitening_topup"]
    assert record["made"] == made and record["early"] == (branch == "early")
    assert record["threshold"] == lda_private.WHITENING_TOPUP_SNR
    assert (record["first_release_ratio"] is None) if branch == "early" else record["first_release_ratio"] > 0
    assert ("early_ratio" in record) == dense and "probe_ratio" not in record
    r = pf.resolve_refinement(200, 5, None, None, None, 100)
    plan = pf.budget_plan(pf.spectral_config(4.0, 1e-6, r), r)
    expect = lda_private.split_early(plan) if dense else plan
    if branch == "early":
        expect = lda_private.move_budget(expect, "m2_whitening", "unmix_sstats")
    if not made:
        expect = lda_private.move_budget(expect, "m2_whitening_topup", "unmix_sstats")
    assert sum(_mu2(expect).values()) == pytest.approx(sum(_mu2(plan).values()))
    cap = m.info["parameters"]["norm_cap"]
    q = next(x for x in pv["ledger"] if x["stage"] == "unmix_sstats")
    assert q["noise_scale"] == pytest.approx(expect["unmix_sstats"].multiplier * lda_private.tail_sensitivities(cap)[0])
    if dense:   # the rung: 0.15 of the whitening's μ², the same statistic as the first release
        rung = next(x for x in pv["ledger"] if x["stage"] == "m2_whitening_early")
        assert rung["noise_scale"] / (rung["sensitivity"] * plan["m2_whitening"].multiplier) == pytest.approx(
            math.sqrt(lda_private.WHITENING_FIRST_SHARE / lda_private.WHITENING_EARLY_SHARE))
        assert "the early rung" in rung["note"]
    if branch == "early":
        return
    first = next(x for x in pv["ledger"] if x["stage"] == "m2_whitening")
    assert first["count"] == 1 and "the first of up to two releases" in first["note"]
    if made:    # the same statistic again: same sensitivity, the plan's two noise scales
        again = next(x for x in pv["ledger"] if x["stage"] == "m2_whitening_topup")
        assert again["count"] == 1 and again["sensitivity"] == pytest.approx(first["sensitivity"])
        assert again["noise_scale"] / first["noise_scale"] == pytest.approx(
            expect["m2_whitening_topup"].multiplier / expect["m2_whitening"].multiplier)
    rebuilt = PrivacyLedger.from_dict({"releases": pv["ledger"]})
    assert rebuilt.epsilon(1e-6) == pytest.approx(pv["epsilon"])


@pytest.fixture(scope="module")
def corpus_wide():
    # k = 5: the default working vocabulary is 500 of these 1,200 words, the restart's 1,000.
    return sample_corpus(20_000, 1200, 5, np.random.default_rng(11), alpha0=1.0)


@pytest.mark.slow
@pytest.mark.parametrize("gate, snr, made", [(0.0, 0.0, None), (1.0, 1e9, False), (1.0, 0.0, True)])
def test_working_vocab_restart_branches(corpus_wide, monkeypatch, gate, snr, made):
    # The three branches of the adaptive working vocabulary, forced through its gates: no probe (the token
    # share above the gate: the shipped releases), a probe without a restart (probe and rest, same budget),
    # a restart (the probe's releases renamed *_probe and kept in the ledger, the fit redone on 1,000 words).
    # Each spends exactly the requested ε, and the record says what happened.
    monkeypatch.setattr(lda_private, "RESTART_TOKEN_SHARE", gate)
    monkeypatch.setattr(lda_private, "restart_snr", lambda plan: snr)
    m = api.fit_lda(corpus_wide.counts, 5, seed=0, progress=False, coherence=False,
                    privacy=PrivacyOptions(epsilon=4.0, delta=1e-6, reproducible=True, working_vocab="auto"),
                    cluster=ClusterOptions(backend="local"))
    pv = m.info["privacy"]
    assert 4.0 * (1 - 1e-6) <= pv["epsilon"] <= 4.0
    assert PrivacyLedger.from_dict({"releases": pv["ledger"]}).epsilon(1e-6) == pytest.approx(pv["epsilon"])
    stages = [x["stage"] for x in pv["ledger"]]
    record = m.info["corpus"]["working_vocab_restart"]
    assert record["words"] == 500 and record["restart_words"] == 1000
    assert record["probed"] == (made is not None) and record["made"] == bool(made)
    assert m.info["parameters"]["working_vocab"] == (1000 if made else 500)
    assert ("m2_whitening_probe" in stages) == (made is not None)
    assert ("counts_probe" in stages) == ("m1_probe" in stages) == bool(made)
    assert stages.count("counts") == stages.count("m1") == 1
    # Unprobed, the fit is the default: its whitening starts with the early rung (lda_private.split_early).
    assert ("m2_whitening_early" in stages) == (made is None)
    if made is None:
        assert record["probe_ratio"] is None and "probe_ratio" not in m.info["corpus"]["whitening_topup"]
        return
    assert stages.count("m2_whitening") == 1
    assert record["probe_ratio"] > 0 and record["threshold"] == snr
    r = pf.resolve_refinement(1200, 5, working_vocab="auto")
    plan = lda_private.split_probe(pf.budget_plan(pf.spectral_config(4.0, 1e-6, r), r))
    probe = next(x for x in pv["ledger"] if x["stage"] == "m2_whitening_probe")
    first = next(x for x in pv["ledger"] if x["stage"] == "m2_whitening")
    if not made:
        # The probe, then the rest of the first release on the same 500 words: same sensitivity, the plan's
        # two noise scales; the top-up's record carries the probe's ratio.
        assert stages.index("m2_whitening_probe") + 1 == stages.index("m2_whitening")
        assert first["sensitivity"] == pytest.approx(probe["sensitivity"])
        assert first["noise_scale"] / probe["noise_scale"] == pytest.approx(
            plan["m2_whitening"].multiplier / plan["m2_whitening_probe"].multiplier)
        assert m.info["corpus"]["whitening_topup"]["probe_ratio"] == record["probe_ratio"]
        return
    # Restart: the discarded releases come first and say so; the passes' Q carries their μ².
    assert stages.index("m2_whitening_probe") < stages.index("counts")
    assert stages[:stages.index("counts")] == ["scan", "counts_probe", "m1_probe", "m2_whitening_probe"]
    for x in pv["ledger"][1:4]:
        assert "discarded" in x["note"] and "1000 words" in x["note"]
    lost = sum(plan[s].mu2 for s in ("counts", "m1", "m2_whitening_probe"))
    again = lda_private.restart_plan(plan, lost)
    if not m.info["corpus"]["whitening_topup"]["made"]:
        again = lda_private.move_budget(again, "m2_whitening_topup", "unmix_sstats")
    q = next(x for x in pv["ledger"] if x["stage"] == "unmix_sstats")
    cap = m.info["parameters"]["norm_cap"]
    assert q["noise_scale"] == pytest.approx(again["unmix_sstats"].multiplier * lda_private.tail_sensitivities(cap)[0])
    assert m.info["corpus"]["working_vocab_token_share"] > record["token_share"]
    assert "1000 most frequent words" in m.info["method"]
    assert m.topic_word.shape == (5, 1200) and (m.topic_word >= 0).all()
    np.testing.assert_allclose(m.topic_word.sum(axis=1), 1.0)


class _Handle:
    """What Ray's broadcast gives the coordinator for a large array: a reference, not the array."""

    def __init__(self, value):
        self.value = value


@pytest.mark.slow
def test_private_fit_uses_no_broadcast_value_as_an_array(corpus_wide, monkeypatch):
    # On Ray a broadcast array above 100 kB is an ObjectRef: the coordinator must keep using its own
    # array. The working vocabulary's restart (1,000 words, W above that size) once handed one to
    # np.einsum ("too many subscripts for operand 0"), after releases that counted. Here every
    # broadcast value is an opaque handle that only the shards resolve, on the restart's branch.
    monkeypatch.setattr(lda_private, "RESTART_TOKEN_SHARE", 1.0)
    monkeypatch.setattr(lda_private, "restart_snr", lambda plan: 0.0)
    monkeypatch.setattr(pipeline.LocalBackend, "broadcast", lambda self, value: _Handle(value))
    real_call = pipeline.LocalBackend.call
    monkeypatch.setattr(pipeline.LocalBackend, "call", lambda self, method, *args: real_call(
        self, method, *[a.value if isinstance(a, _Handle) else a for a in args]))
    m = api.fit_lda(corpus_wide.counts, 5, seed=0, progress=False, coherence=False,
                    privacy=PrivacyOptions(epsilon=4.0, delta=1e-6, reproducible=True, working_vocab="auto"),
                    cluster=ClusterOptions(backend="local"))
    assert m.info["corpus"]["working_vocab_restart"]["made"]
    assert m.topic_word.shape == (5, 1200) and np.isfinite(m.topic_word).all()


@pytest.mark.parametrize("form", ["dense", "matrix-free", "power"])
def test_spectral_word_scales_keep_the_moments_topics(corpus_p, form):
    # The whitening of S M2 S (S from released frequencies) has the moments' topics: scales of ones give the
    # unscaled fit bit for bit in every whitening form, and strongly unequal scales at a huge ε recover the
    # topics about as well as without (S⁻¹ maps them back; tolerance: twice the unscaled fit's L1, which is
    # sampling error at N = 20,000, and far below the 0.5 of a wrong map).
    from distdp.lda.private import pipeline as pp
    from distdp.lda.pipeline import LocalBackend, SpectralParams
    from distdp.lda import matched_l1

    cfg = lda_private.PrivateSpectralConfig(1e4, 1e-6, dense_whitening=form != "power", matrix_free=form == "matrix-free")
    be = LocalBackend([Shard(corpus_p.counts[:10_000]), Shard(corpus_p.counts[10_000:])])

    def fit(scales):
        return pp.fit_spectral_private(be, 200, SpectralParams(k=5, alpha0=1.0), cfg, np.random.default_rng(3),
                                       plan=lda_private.plan_noise(cfg), word_scales=scales).result

    plain = fit(None)
    ones = fit(np.ones(200))
    np.testing.assert_array_equal(ones.topic_word, plain.topic_word)
    np.testing.assert_array_equal(ones.alpha, plain.alpha)
    freq = np.asarray(corpus_p.counts.sum(axis=0)).ravel() / corpus_p.counts.sum()
    scaled = fit(lda_private.spectral_word_scales(freq, 0.5))
    assert scaled.stats["whitening_word_scales"] == pp.SCALES_NOTE
    base = matched_l1(plain.topic_word, corpus_p.topic_word)[0]
    assert matched_l1(scaled.topic_word, corpus_p.topic_word)[0] < max(2 * base, 0.05)


@pytest.mark.parametrize("mechanism", ["whitened", "power"])
def test_private_spectral_fit_runs_the_one_coordinator_loop(monkeypatch, mechanism):
    """The private spectral fit is :func:`pipeline.fit_spectral` with a PrivateRelease: the same loop, stages and
    timings as the non-private fit, its releases in the data flow's order (counts and m1 in the first pass, the
    second moment in the whitening, C3 and, for ``whitened``, E3 in the tensor stage, the power mechanism's
    products in the decomposition)."""
    from distdp.lda.private import pipeline as pp

    seen, progress = [], []
    real = pipeline.fit_spectral

    def spy(*args, **kw):
        seen.append(kw["releases"])
        return real(*args, **kw)

    monkeypatch.setattr(pp, "fit_spectral", spy)
    c = sample_corpus(3000, 150, 5, np.random.default_rng(4), alpha0=1.0, doc_length=80)
    backend = pipeline.LocalBackend([Shard(c.counts[:1500]), Shard(c.counts[1500:])])
    cfg = lda_private.PrivateSpectralConfig(8.0, 1e-6, mechanism=mechanism)
    ps = pp.fit_spectral_private(backend, 150, pipeline.SpectralParams(k=5, alpha0=1.0), cfg,
                                 np.random.default_rng(0), progress=lambda stage, *_: progress.append(stage))
    assert len(seen) == 1 and isinstance(seen[0], pp.PrivateRelease) and seen[0].private
    plain = pipeline.fit_spectral(backend, 150, pipeline.SpectralParams(k=5, alpha0=1.0), np.random.default_rng(0))
    assert list(ps.result.timings) == list(plain.timings)
    stage_order = list(dict.fromkeys(progress))
    assert stage_order[:2] == ["pass1_stats", "whitening"] and "whitened_tensor" in stage_order
    stages = list(dict.fromkeys(r.stage for r in ps.ledger.releases))
    tensor = ["tensor_bounds", "whitened_tensor"]
    assert stages[:2] == ["counts", "m1"] and stages[-2:] == tensor
    assert all(s.startswith("m2_whitening") for s in stages[2:-2])
    assert ps.clip == ps.result.stats["clip"] and ps.result.whitening == {}
