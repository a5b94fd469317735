"""The coordinator (distdp.lda.pipeline): shards' partial sums, the tensor paths, the restarts' default, release hooks
and EM's stopping rule."""

from collections import Counter

import numpy as np
import pytest

import distdp
from distdp import lda
from distdp.lda import pipeline
from distdp.lda.shard import Shard
from distdp.lda.synthetic import sample_corpus
from distdp.api import ClusterOptions, SolverOptions


@pytest.fixture(scope="module")
def corpus():
    """3,000 documents of mean length 60 over 80 words, k = 4, α0 = 1."""
    return sample_corpus(3000, 80, 4, np.random.default_rng(21), alpha0=1.0, doc_length=60)


def spectral(parts, releases=None, **params):
    """fit_spectral over a LocalBackend holding one Shard per row block, seed 0."""
    backend = pipeline.LocalBackend([Shard(p) for p in parts])
    return pipeline.fit_spectral(backend, parts[0].shape[1], pipeline.SpectralParams(4, **params),
                                 np.random.default_rng(0), releases=releases)


class Recording(pipeline.NonPrivate):
    """The identity release that records every edge it is called at."""

    def __init__(self):
        self.edges = []

    def release(self, edge, value):
        self.edges.append(edge)
        return value


def test_implicit_tensor_path_matches_explicit(corpus_a):
    """The implicit path (one T(I,u,u) pass per iteration) gives the explicit path's topics."""
    counts = corpus_a.counts[:4000]
    kw = dict(alpha0=1.0, seed=3, progress=False, refine=0, cluster=ClusterOptions(backend="local", workers=2))
    a = distdp.fit_lda(counts, 10, **kw, solver=SolverOptions(tensor="explicit"))
    b = distdp.fit_lda(counts, 10, **kw, solver=SolverOptions(tensor="implicit"))
    np.testing.assert_allclose(a.topic_word, b.topic_word, atol=1e-8)
    np.testing.assert_allclose(a.alpha, b.alpha, rtol=1e-8)


def test_lda_restarts_default_and_refusal():
    """The LDA default L (pipeline.default_lda_restarts; measurements in its docstring) and --restarts refused
    where it does nothing (the simultaneous method on the k×k×k tensor is one orthogonal iteration)."""
    from distdp.lda.pipeline import SpectralParams, default_lda_restarts

    assert [default_lda_restarts(k) for k in (2, 10, 100, 1000)] == [10, 20, 21, 30]
    assert SpectralParams(10).restarts() == 20 and SpectralParams(10, n_restarts=5).restarts() == 5
    with pytest.raises(ValueError, match="robust method only"):
        SpectralParams(10, method="simultaneous", n_restarts=5).validate(100)


@pytest.mark.parametrize("n_shards", [2, 3, 7])
def test_one_and_several_shards_give_the_same_fit(corpus, n_shards):
    # The shards' partial sums only regroup the same per-document terms, so the moments differ by floating-point
    # reassociation (~1e-16 relative); the eigensolver and the power method start from the same seed and are
    # contractive near their fixed points, so the fit moves by the same order. Measured: ≤ 1.4e-15 on the topics,
    # ≤ 7.3e-15 relative on α and M2's eigenvalues for 2, 3 and 7 shards; 1e-12 / 1e-10 leave room for BLAS
    # threading, far below any real difference (a lost or doubled document moves the topics by ~1e-4).
    one = spectral([corpus.counts])
    bounds = np.linspace(0, corpus.counts.shape[0], n_shards + 1).astype(int)
    many = spectral([corpus.counts[a:b] for a, b in zip(bounds[:-1], bounds[1:])])
    assert (one.stats["n_shards"], many.stats["n_shards"]) == (1, n_shards)
    assert {k: v for k, v in one.stats.items() if k != "n_shards"} == \
        {k: v for k, v in many.stats.items() if k != "n_shards"}
    np.testing.assert_allclose(many.topic_word, one.topic_word, rtol=0, atol=1e-12)
    np.testing.assert_allclose(many.alpha, one.alpha, rtol=1e-10)
    np.testing.assert_allclose(many.m2_eigenvalues, one.m2_eigenvalues, rtol=1e-10)


@pytest.mark.parametrize("tensor", ["explicit", "implicit"])
@pytest.mark.parametrize("eigensolver", ["dense", "lobpcg"])
def test_releases_hook_is_called_at_each_edge_the_fit_passes(corpus, tensor, eigensolver):
    # The hook sees every value that leaves the coordinator for the next stage, once per pass: M2 once per
    # product (dense: the one formed matrix), the explicit tensor once or each implicit T(I,u,u) batch, the
    # decomposition once and the output once; every edge is one of EDGES and em_sstats is EM's, not this fit's.
    rec = Recording()
    got = spectral([corpus.counts], rec, tensor=tensor, eigensolver=eigensolver)
    seen = Counter(rec.edges)
    assert set(seen) <= set(pipeline.EDGES)
    assert seen["m2_whitening"] == got.whitening["m2_products"] >= 1
    assert eigensolver != "dense" or seen["m2_whitening"] == 1
    assert seen["decomposition"] == seen["output"] == 1 and "em_sstats" not in seen
    if tensor == "explicit":
        assert seen["whitened_tensor"] == 1 and "tensor_apply" not in seen
    else:
        assert "whitened_tensor" not in seen and seen["tensor_apply"] >= 1
    # The order of the stages: whitening, then the tensor, then its decomposition, then the output.
    firsts = [rec.edges.index(e) for e in ("m2_whitening", "whitened_tensor" if tensor == "explicit"
                                           else "tensor_apply", "decomposition", "output")]
    assert firsts == sorted(firsts) and rec.edges[-1] == "output"
    # The identity hook changes nothing: the fit is the default (NonPrivate) one, bit for bit.
    plain = spectral([corpus.counts], tensor=tensor, eigensolver=eigensolver)
    np.testing.assert_array_equal(got.topic_word, plain.topic_word)
    np.testing.assert_array_equal(got.alpha, plain.alpha)


def test_refine_em_releases_its_statistics_once_per_iteration(corpus):
    start = spectral([corpus.counts])
    backend = pipeline.LocalBackend([Shard(corpus.counts)])
    rec = Recording()
    res = pipeline.refine_em(backend, start.topic_word, start.alpha, corpus.counts.sum(), 3, 0.25, releases=rec)
    assert rec.edges == ["em_sstats"] * 3 and len(res.elbo) == 3


def test_sum_partials_keeps_shard_order():
    # A left fold in the order given: list concatenation shows the order, and floating point shows it is not
    # reassociated ((1 + 1e16) − 1e16 = 0 in doubles, while 1 + (1e16 − 1e16) = 1).
    assert pipeline.sum_partials([[0], [1], [2]]) == [0, 1, 2]
    assert pipeline.sum_partials([1.0, 1e16, -1e16]) == 0.0
    assert pipeline.sum_partials([1e16, -1e16, 1.0]) == 1.0
    np.testing.assert_array_equal(pipeline.sum_partials([np.ones(2), 2 * np.ones(2)]), [3.0, 3.0])
    # LocalBackend.call returns one result per shard, in shard order.
    shards = [Shard(np.eye(3)[[i]]) for i in range(3)]     # shard i: one document on word i
    backend = pipeline.LocalBackend(shards)
    assert [int(t.argmax()) for t in backend.call(Shard.term_frequency)] == [0, 1, 2]
    # shard methods are named by reference, not by string (a typo would otherwise fail on the shards)
    with pytest.raises(AttributeError):
        backend.call("term_frequency")


def test_refine_em_stops_at_stop_tol(corpus):
    # Stops after the first iteration whose ELBO moved by ≤ stop_tol relative to the one before (never on
    # the first); without stop_tol it runs every iteration and says nothing about convergence; a tolerance
    # never met runs n_iter iterations and reports converged=False.
    start = spectral([corpus.counts])
    backend = pipeline.LocalBackend([Shard(corpus.counts)])
    n_tokens = corpus.counts.sum()
    run = lambda n_iter, stop_tol: pipeline.refine_em(backend, start.topic_word, start.alpha, n_tokens, n_iter, 0.25,
                                                      stop_tol=stop_tol)
    for stop_tol in (1e-3, 1e-4):
        res = run(60, stop_tol)
        elbo = np.array(res.elbo)
        change = np.abs(np.diff(elbo)) / np.abs(elbo[:-1])
        assert res.converged is True and 2 <= len(elbo) < 60
        assert change[-1] <= stop_tol and np.all(change[:-1] > stop_tol)
    full = run(8, None)
    assert full.converged is None and len(full.elbo) == 8
    never = run(3, 1e-300)
    assert never.converged is False and len(never.elbo) == 3


def test_float32_products_change_the_fit_less_than_the_seed_does(corpus_a):
    """precision='float32' (the shards' M2 products; float64 everywhere else): the topics move less from the
    float64 fit than a float64 fit with another seed does (another test block and power-method starts: the
    solver's own spread, set by its 1e-3 stopping tolerance, against float32's ~1e-6 relative rounding). LOBPCG,
    the solver of the corpora float32 is for (``eigensolver='auto'`` picks Lanczos only for small ones)."""
    counts = corpus_a.counts[:4000]
    kw = dict(alpha0=1.0, progress=False, refine=0, cluster=ClusterOptions(backend="local", workers=2))
    a = distdp.fit_lda(counts, 10, seed=3, solver=SolverOptions(precision="float64", eigensolver="lobpcg"), **kw)
    b = distdp.fit_lda(counts, 10, seed=3, solver=SolverOptions(precision="float32", eigensolver="lobpcg"), **kw)
    c = distdp.fit_lda(counts, 10, seed=4, solver=SolverOptions(precision="float64", eigensolver="lobpcg"), **kw)
    assert (a.info["parameters"]["precision"], b.info["parameters"]["precision"]) == ("float64", "float32")
    assert 0 < lda.matched_l1(b.topic_word, a.topic_word)[0] < lda.matched_l1(c.topic_word, a.topic_word)[0]


def test_precision_auto_is_float32_from_the_threshold_and_private_fits_refuse_it():
    opts = SolverOptions()
    assert opts.precision == "auto"
    assert opts.spectral_params(5, 1.0, "lda", pipeline.AUTO_FLOAT32_NONZEROS - 1).precision == "float64"
    assert opts.spectral_params(5, 1.0, "lda", pipeline.AUTO_FLOAT32_NONZEROS).precision == "float32"
    assert opts.spectral_params(5, 1.0, "lda", pipeline.AUTO_FLOAT32_NONZEROS).soft_locking     # the large-corpus mode
    assert not opts.spectral_params(5, 1.0, "lda", pipeline.AUTO_FLOAT32_NONZEROS - 1).soft_locking
    assert opts.spectral_params(5, 1.0, "lda").precision == "float64"          # size unknown (a private fit)
    X = sample_corpus(400, 30, 2, np.random.default_rng(0)).counts
    with pytest.raises(ValueError, match="--precision: not used by a private fit"):
        distdp.fit_lda(X, 2, progress=False, solver=SolverOptions(precision="float32"),
                       privacy=distdp.PrivacyOptions(epsilon=1.0, delta=1e-6), cluster=ClusterOptions(backend="local"))


def test_float32_first_pass_folds_its_u_statistic_term(corpus_a):
    """In float32 the first product folds q like every later one (N counted first): the assembled M2 Ω0 is the
    unfolded one's up to rounding. The two differ only in the order of float64 sums of float32 products whose
    relative rounding is ≤ γ_L ≈ L·2⁻²⁴ (L ≤ 300 tokens per document; test_moments derives the entrywise bound),
    so 1e-4 relative to the largest entry holds with room."""
    from distdp.lda import moments

    shard = Shard(corpus_a.counts[:4000])
    d = shard.vocab_size
    omega = np.random.default_rng(0).standard_normal((d, 12))
    coef = moments.MomentCoefficients(1.0)
    n = shard.used_documents()
    plain = shard.first_pass(omega, "float32")
    folded = shard.first_pass(omega, "float32", moments.q_fold_scale(n, coef))
    assert plain.n_used == folded.n_used == n and np.all(folded.m2.q == 0)
    want = moments.m2_product(plain.m2, plain.m1_sum, omega, n, coef)
    got = moments.m2_product(folded.m2, folded.m1_sum, omega, n, coef)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())
