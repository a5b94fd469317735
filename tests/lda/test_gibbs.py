"""Collapsed Gibbs refinement (distdp.lda.gibbs, pipeline.refine_gibbs): counts, determinism, α, recovery."""

import numpy as np
import pytest
import scipy.sparse as sp

from distdp import matched_l1
from distdp.api import fit_lda
from distdp.lda import gibbs, pipeline
from distdp.lda.shard import Shard
from distdp.lda.synthetic import sample_corpus
from distdp.api import ClusterOptions, PrivacyOptions

pytestmark = pytest.mark.skipif(not gibbs.available(), reason="numba not installed")


def chain_counts_agree(chain: gibbs.ShardChain, counts: sp.csr_matrix) -> None:
    """The chain's n_dk and n_wk are exactly the counts of its tokens' topics."""
    C = sp.csr_matrix(counts)
    words = np.repeat(C.indices, C.data.astype(np.int64))
    docs = np.repeat(np.repeat(np.arange(C.shape[0]), np.diff(C.indptr)), C.data.astype(np.int64))
    k = chain.ndk.shape[1]
    nwk = np.zeros((C.shape[1], k), np.int64)
    np.add.at(nwk, (words, chain.z.astype(np.int64)), 1)
    ndk = np.zeros((C.shape[0], k), np.int64)
    np.add.at(ndk, (docs, chain.z.astype(np.int64)), 1)
    np.testing.assert_array_equal(chain.nwk, nwk)
    np.testing.assert_array_equal(chain.ndk, ndk)


def force_sweep(monkeypatch, sparse: bool) -> None:
    """Make every part's sweep sparse (at any k and share of topics) or dense."""
    monkeypatch.setattr(gibbs, "SPARSE_K", 1 if sparse else 10 ** 9)
    monkeypatch.setattr(gibbs, "SPARSE_SHARE", 1.0)


def chain_after(small, sweeps: int = 3) -> np.ndarray:
    """Every token's topic after ``sweeps`` sweeps of a fixed seed."""
    k = small.topic_word.shape[0]
    chain = gibbs.ShardChain(small.counts, small.topic_word.T, np.full(k, 0.1), np.random.SeedSequence(4))
    nwk = chain.nwk.copy()
    for _ in range(sweeps):
        nwk = chain.sweep(nwk, np.full(k, 0.1), 0.01)
    return chain.z.copy()


def test_sweep_is_sparse_only_below_its_share_of_topics(small, monkeypatch):
    """From SPARSE_K topics a part sweeps sparse only where its tokens' words have counts in at most SPARSE_SHARE
    of the topics: with the share at 0 every part sweeps dense, the dense chain to the bit; at 1 the sparse one."""
    chains = {}
    for name, share in (("dense", None), ("share 0", 0.0), ("sparse", 1.0)):
        force_sweep(monkeypatch, share is not None)
        if share is not None:
            monkeypatch.setattr(gibbs, "SPARSE_SHARE", share)
        chains[name] = chain_after(small)
    np.testing.assert_array_equal(chains["share 0"], chains["dense"])
    assert not np.array_equal(chains["sparse"], chains["dense"])    # 16,000 tokens drawn by other maps of u


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_chain_keeps_exact_counts(small, monkeypatch, sparse):
    """After the start and after sweeps, n_dk and n_wk are the tallies of the tokens' topics, every word's
    tokens all assigned (the bookkeeping of each compiled sweep, including the parts' merge)."""
    force_sweep(monkeypatch, sparse)
    k = small.topic_word.shape[0]
    chain = gibbs.ShardChain(small.counts, small.topic_word.T, np.full(k, 0.1), np.random.SeedSequence(1), threads=2)
    chain_counts_agree(chain, small.counts)
    nwk = chain.nwk.copy()
    for _ in range(3):
        nwk = chain.sweep(nwk, np.full(k, 0.1), 0.01)
        chain_counts_agree(chain, small.counts)
    np.testing.assert_array_equal(nwk.sum(axis=1), np.asarray(small.counts.sum(axis=0)).ravel())


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_chain_does_not_depend_on_threads(small, monkeypatch, sparse):
    """Each part draws from its own stream and the parts' changes are added in order: 1 and 3 threads give
    the same chain, bit for bit."""
    force_sweep(monkeypatch, sparse)
    monkeypatch.setattr(gibbs, "THREADED_WORK", 0)          # this corpus is below the threads' threshold
    k = small.topic_word.shape[0]
    out = []
    for threads in (1, 3):
        chain = gibbs.ShardChain(small.counts, small.topic_word.T, np.full(k, 0.1), np.random.SeedSequence(7),
                                 threads=threads)
        nwk = chain.nwk.copy()
        for _ in range(4):
            nwk = chain.sweep(nwk, np.full(k, 0.1), 0.01)
        out.append((nwk, chain.z.copy()))
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])


def collapsed_conditional(z, words, doc_tokens, i, k, d, alpha, eta):
    """Griffiths & Steyvers' conditional of token ``i`` given every other token's topic (from scratch)."""
    others = np.ones(len(z), bool)
    others[i] = False
    n_k = np.bincount(z[others], minlength=k)
    n_wk = np.bincount(z[others & (words == words[i])], minlength=k)
    in_doc = np.zeros(len(z), bool)
    in_doc[doc_tokens] = True
    n_dk = np.bincount(z[others & in_doc], minlength=k)
    p = (n_dk + alpha) * (n_wk + eta) / (n_k + d * eta)
    return p / p.sum()


@pytest.mark.parametrize("eta", [0.01, 0.5])
def test_sparse_sweep_draws_from_the_collapsed_conditional(eta):
    """The sparse sweep's draw of each token of a document, swept over a grid of M uniforms with the earlier
    tokens' uniforms fixed, lands on topic j for a share of the grid equal to the conditional p_j. Exact, not
    statistical: the uniforms mapping to j form at most two intervals (one in the word part, one in the
    smoothing part), each holding its length·M grid points ± 1, so |share − p_j| ≤ 2/M. Random topics over
    12 words and 23 topics leave most word-topic counts at 0 or 1, so words' topic lists shrink and grow
    (η = 0.5 puts a third of the mass in the smoothing part, η = 0.01 almost none)."""
    rng = np.random.default_rng(5)
    k, d, M = 23, 12, 4000
    counts = sp.csr_matrix(rng.poisson(0.6, (8, d)) + np.eye(8, d, dtype=np.int64) * 2)
    indptr, indices = counts.indptr.astype(np.int64), counts.indices.astype(np.int64)
    offsets = gibbs.token_offsets(counts)
    words = np.repeat(indices, np.diff(offsets))
    z0 = rng.integers(0, k, offsets[-1]).astype(np.int16)
    alpha = rng.uniform(0.05, 0.5, k)
    lo, hi = offsets[indptr[3]], offsets[indptr[4]]
    doc_tokens = np.arange(lo, hi)
    lib = gibbs.kernels()

    def sweep_doc(u):
        z = z0.copy()
        docs = np.repeat(np.arange(counts.shape[0]), np.diff(offsets[indptr]))
        ndk = np.zeros((counts.shape[0], k), np.int32)
        np.add.at(ndk, (docs, z), 1)
        nwk = np.zeros((d, k), np.int32)
        np.add.at(nwk, (words, z), 1)
        topics, lengths = np.empty((d, k), np.int16), np.empty(d, np.int64)
        lib.word_topics(nwk, topics, lengths)
        lib.sweep_rows_sparse(indptr, indices, offsets, np.array([3]), z, ndk, nwk, nwk.sum(0).astype(np.int64),
                              alpha, eta, d * eta, u, lo, topics, lengths)
        return z

    assert hi - lo >= 4
    for pos in range(hi - lo):
        u = rng.random(hi - lo)
        shares = np.zeros(k)
        for m in range(M):
            u[pos] = (m + 0.5) / M
            z = sweep_doc(u)
            shares[z[lo + pos]] += 1.0 / M
        before = z0.copy()
        before[lo:lo + pos] = z[lo:lo + pos]            # the earlier tokens' draws: the same for every grid point
        p = collapsed_conditional(before, words, doc_tokens, lo + pos, k, d, alpha, eta)
        assert np.abs(shares - p).max() <= 2.0 / M + 1e-12


def test_token_blocks_cover_every_token_once(monkeypatch, small):
    """With blocks far smaller than a shard, the blocks of the parts still cover each row once, in order."""
    monkeypatch.setattr(gibbs, "TOKEN_BLOCK", 37)
    k = small.topic_word.shape[0]
    chain = gibbs.ShardChain(small.counts, small.topic_word.T, np.full(k, 0.1), np.random.SeedSequence(2))
    rows = np.concatenate([r for blocks in chain.parts for r, _, _ in blocks])
    np.testing.assert_array_equal(rows, np.arange(small.counts.shape[0]))
    chain_counts_agree(chain, small.counts)


def dirichlet_multinomial_histograms(alpha, n_docs, length, rng):
    theta = rng.dirichlet(alpha, size=n_docs)
    n = rng.multinomial(length, theta)
    size = length + 1
    H = np.stack([np.bincount(n[:, j], minlength=size) for j in range(len(alpha))])
    return H, np.bincount(n.sum(axis=1), minlength=size)


def test_alpha_update_recovers_asymmetric_alpha():
    """Minka's fixed point on the count histograms recovers a known asymmetric α.

    Tolerance: over 30 seeds of this design (5,000 documents of 20 tokens) the relative error's standard
    deviation was 0.047, 0.023, 0.019, 0.021 for the four components (the smallest α is the hardest); the
    test allows 5 of them.
    """
    a_true = np.array([0.05, 0.2, 0.5, 1.0])
    H, L = dirichlet_multinomial_histograms(a_true, 5000, 20, np.random.default_rng(0))
    a = gibbs.update_alpha(np.full(4, 0.5), H, L, max_iter=1000, tol=1e-10)
    assert np.all(np.abs(a / a_true - 1) < 5 * np.array([0.047, 0.023, 0.019, 0.021]))


def test_alpha_update_is_minkas_digamma_step():
    """One step equals Minka's update written with digammas (the code sums 1/(α+i) over the reverse cumulative
    histograms instead; ψ(c+a) − ψ(a) = Σ_{i<c} 1/(a+i) exactly, so only rounding differs)."""
    from scipy.special import digamma

    H, L = dirichlet_multinomial_histograms(np.array([0.1, 0.4, 1.5]), 500, 30, np.random.default_rng(5))
    a = np.array([0.3, 0.2, 0.9])
    c = np.arange(H.shape[1])
    num = (H * (digamma(c[None, :] + a[:, None]) - digamma(a)[:, None])).sum(axis=1)
    den = (L * (digamma(c + a.sum()) - digamma(a.sum()))).sum()
    np.testing.assert_allclose(gibbs.update_alpha(a, H, L, max_iter=1), a * num / den, rtol=1e-12)


def test_alpha_update_never_lowers_the_marginal_likelihood():
    """Each fixed-point step increases Σ_d log p(n_d | α) (Minka 2000, §3), from any start."""
    H, L = dirichlet_multinomial_histograms(np.array([0.1, 0.3, 2.0]), 2000, 12, np.random.default_rng(3))
    for start in (np.full(3, 0.01), np.full(3, 5.0), np.array([3.0, 0.02, 0.5])):
        a, f = start, gibbs.log_marginal(start, H, L)
        for _ in range(30):
            a = gibbs.update_alpha(a, H, L, max_iter=1)
            f_new = gibbs.log_marginal(a, H, L)
            assert f_new >= f - 1e-9 * abs(f)
            f = f_new


def test_refine_gibbs_raises_likelihood_and_improves_on_the_spectral_start():
    """refine_gibbs on a synthetic corpus: the chain's log p(w|z) rises from its first record, the learned α
    stays positive, and the topics move closer to the truth than the spectral start."""
    rng = np.random.default_rng(0)
    syn = sample_corpus(3000, 300, 5, rng, alpha0=1.0, doc_length=60)
    spectral = fit_lda(syn.counts, 5, seed=0, refine=0, progress=False, coherence=False)
    backend = pipeline.LocalBackend([Shard(syn.counts[:1500]), Shard(syn.counts[1500:])])
    res = pipeline.refine_gibbs(backend, spectral.topic_word, np.full(5, 0.2), 60, 0.01, np.random.default_rng(1))
    assert res.log_likelihood[-1][1] > res.log_likelihood[0][1]
    assert np.all(res.alpha > 0) and res.restarts == 0
    assert matched_l1(res.topic_word, syn.topic_word)[0] < matched_l1(spectral.topic_word, syn.topic_word)[0]


def test_shard_restart_seeds_again_and_stays_consistent(small):
    """A shard that lost its chain (actor restart) is seeded again from the current topics and says so."""
    k = small.topic_word.shape[0]
    shard = Shard(small.counts)
    nwk = shard.gibbs_start(1, small.topic_word.T, np.full(k, 0.1), np.random.SeedSequence(0))
    shard._chain = None                                  # what an actor restart leaves
    counts, hist, restarted = shard.gibbs_sweep(1, nwk, np.full(k, 0.1), 0.01, np.random.SeedSequence(1), 1, True)
    assert restarted and hist is not None
    np.testing.assert_array_equal(counts.sum(axis=1), np.asarray(small.counts.sum(axis=0)).ravel())


def test_short_documents_fit_at_k_and_recover_topics():
    """Short texts (mean 8 tokens, d = 5,000, k = 20): the default fit returns 20 topics, refined by Gibbs
    sampling, and recovers them.

    Tolerance from N and the length: were every token's topic known, topic k's estimate from its n_k ≈ N·L·α_k/α0
    tokens would have expected L1 error Σ_w √(2 p_kw (1 − p_kw) / (π n_k)) (the normal approximation of a
    multinomial count's mean absolute deviation); its mean over topics is 0.09 here. Over corpus seeds 0–4 the
    default fit's matched L1 was 1.31–1.39 times that (0.119–0.124; the spectral start alone 0.305–0.317,
    variational EM 0.139–0.147); the test allows 2 times.
    """
    rng = np.random.default_rng(0)
    syn = sample_corpus(60_000, 5000, 20, rng, alpha0=1.0, doc_length=8, topic_concentration=0.02)
    model = fit_lda(syn.counts, 20, seed=0, progress=False, coherence=False, cluster=ClusterOptions(backend="local"))
    n_k = syn.counts.sum() * syn.alpha / syn.alpha.sum()
    P = syn.topic_word
    oracle = np.sqrt(2 * P * (1 - P) / (np.pi * n_k[:, None])).sum(axis=1).mean()
    assert model.topic_word.shape == (20, 5000)
    assert "Gibbs" in model.info["method"]
    assert matched_l1(model.topic_word, syn.topic_word)[0] < 2 * oracle


def test_refiner_choice_and_errors(small):
    """Non-integral counts: the default falls back to EM, an explicit 'gibbs' is an error naming why;
    a private fit refuses 'gibbs'; an unknown refiner is rejected."""
    frac = small.counts * 0.5
    m = fit_lda(frac, 3, seed=0, progress=False, coherence=False, refine=3)
    assert m.info["parameters"]["refiner"] == "em"
    with pytest.raises(ValueError, match="not whole numbers"):
        fit_lda(frac, 3, seed=0, progress=False, coherence=False, refiner="gibbs")
    with pytest.raises(ValueError, match="not private"):
        fit_lda(small.counts, 3, refiner="gibbs", progress=False, privacy=PrivacyOptions(epsilon=1.0, delta=1e-6))
    with pytest.raises(ValueError, match="refiner must be"):
        fit_lda(small.counts, 3, refiner="vb", progress=False)


def test_counts_travel_as_int32_and_add_in_int64():
    """Shards send int32 counts where they fit; the coordinator's sum is int64, so two shards near 2³¹ do not wrap."""
    near = np.full((2, 3), 2 ** 31 - 1, dtype=np.int64)
    assert gibbs.compact_counts(near).dtype == np.int32
    assert gibbs.compact_counts(near + 1).dtype == np.int64
    total = gibbs.add_counts([gibbs.compact_counts(near), gibbs.compact_counts(near)])
    assert total.dtype == np.int64 and np.all(total == 2 * (2 ** 31 - 1))


def test_without_numba_the_default_refines_by_em(monkeypatch, small):
    """Where numba is missing the default refinement is EM (said in model.json), and asking for Gibbs sampling
    is an error naming why."""
    monkeypatch.setattr(gibbs, "available", lambda: False)
    m = fit_lda(small.counts, 3, seed=0, progress=False, coherence=False, cluster=ClusterOptions(backend="local"))
    assert m.info["parameters"]["refiner"] == "em" and "variational EM" in m.info["method"]
    with pytest.raises(ValueError, match="numba is not installed"):
        fit_lda(small.counts, 3, seed=0, progress=False, coherence=False, refiner="gibbs",
                cluster=ClusterOptions(backend="local"))


def test_given_alpha0_is_kept_and_otherwise_alpha_is_learned(small):
    """A given alpha0 fixes α at alpha0/k in the refinement; without it α is learned and Σα recorded."""
    fixed = fit_lda(small.counts, 4, alpha0=2.0, seed=0, progress=False, coherence=False,
                    cluster=ClusterOptions(backend="local"))
    np.testing.assert_array_equal(fixed.alpha, np.full(4, 0.5))
    assert fixed.info["parameters"]["alpha0_given"] and fixed.info["refine"]["learned_alpha0"] is None
    learned = fit_lda(small.counts, 4, seed=0, progress=False, coherence=False,
                      cluster=ClusterOptions(backend="local"))
    assert not learned.info["parameters"]["alpha0_given"]
    assert learned.info["refine"]["learned_alpha0"] == pytest.approx(learned.alpha.sum())
    assert np.all(np.diff(learned.alpha) <= 0)                        # topics sorted by decreasing α


def test_word_log_likelihood_skips_only_zero_terms():
    """log p(w | z) (Griffiths & Steyvers 2004, eq. 2) summed over the nonzero counts equals the sum over every
    (word, topic): a zero count's term is gammaln(η) − gammaln(η) = 0. Only the summation order differs."""
    from scipy.special import gammaln

    rng = np.random.default_rng(2)
    nwk = rng.poisson(0.3, size=(200, 7)).astype(np.int64)
    eta, d = 0.01, nwk.shape[0]
    dense = ((gammaln(d * eta) - gammaln(nwk.sum(axis=0) + d * eta)).sum()
             + (gammaln(nwk + eta) - gammaln(eta)).sum())
    assert gibbs.word_log_likelihood(nwk, eta) == pytest.approx(dense, rel=1e-12)


def test_a_shard_imports_no_numba_until_it_samples():
    """A spectral fit's shard (a Ray actor's whole import) leaves numba out; the first sampling loads it."""
    import subprocess
    import sys

    code = ("import sys; import distdp.lda.shard; assert 'numba' not in sys.modules; "
            "from distdp.lda import gibbs; gibbs.kernels(); assert 'numba' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
