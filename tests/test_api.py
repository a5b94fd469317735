"""The Python API (distdp.api): ``open_corpus`` and the backend rule, ``fit_lda`` on matrices and parquet paths,
parameter checks, short documents, and transform/coherence/export on a small corpus."""

import json
import sys
import types

import numpy as np
import pytest
import scipy.sparse as sp

import distdp
from distdp import api, lda
from distdp.io.corpus import write_corpus
from distdp.lda import pipeline
from distdp.lda.synthetic import sample_corpus
from distdp.api import ClusterOptions, SolverOptions


@pytest.fixture
def no_ray(monkeypatch):
    """No cluster named or joined: no RAY_ADDRESS, and Ray not imported (the test session's may be running)."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delitem(sys.modules, "ray", raising=False)


@pytest.fixture
def small_dir(tmp_path, small):
    """``small`` as a parquet corpus of 2 files, with its vocabulary (w0…w59) and document ids (d0…d399)."""
    write_corpus(tmp_path / "c", small.counts, 2, [f"w{i}" for i in range(60)], [f"d{i}" for i in range(400)])
    return tmp_path / "c"


@pytest.mark.slow
def test_simultaneous_method_recovers(corpus_a):
    fitted = distdp.fit_lda(corpus_a.counts, 10, alpha0=1.0, seed=0, progress=False,
                            solver=SolverOptions(method="simultaneous"), cluster=ClusterOptions(backend="local"))
    assert lda.matched_l1(fitted.topic_word, corpus_a.topic_word)[0] <= 0.10


def test_short_documents_are_set_aside():
    rng = np.random.default_rng(0)
    c = sample_corpus(600, 30, 2, rng, alpha0=0.5, doc_length=20, topic_concentration=0.5)
    first = np.arange(40) % 29
    short = sp.csr_matrix((np.ones(80), (np.repeat(np.arange(40), 2), np.stack([first, first + 1], 1).ravel())),
                          shape=(40, 30))  # 40 two-token documents
    fitted = distdp.fit_lda(sp.vstack([c.counts, short]), 2, alpha0=0.5, progress=False, seed=0,
                            cluster=ClusterOptions(backend="local"))
    assert fitted.info["corpus"]["n_docs"] == 640 and fitted.info["corpus"]["n_docs_short"] == 40


@pytest.mark.parametrize("kwargs,needle", [
    (dict(k=30), "k=30 must be smaller than the vocabulary size d=30"),
    (dict(k=0), "k must be a positive integer"),
    (dict(k=2, alpha0=0.0), "alpha0 must be > 0 for LDA"),
    (dict(k=2, alpha0=-1.0), "alpha0 must be > 0 for LDA"),
    (dict(k=2, model="xyz"), "model must be one of"),
    (dict(k=2, solver=SolverOptions(tensor="both")), "tensor must be one of"),
    (dict(k=2, solver=SolverOptions(method="als")), "method must be one of"),
    (dict(k=2, solver={"method": "robust"}), "solver must be a SolverOptions or None, got dict"),
])
def test_bad_parameters(kwargs, needle):
    X = sample_corpus(100, 30, 2, np.random.default_rng(0)).counts
    args = dict(alpha0=1.0, cluster=ClusterOptions(backend="local"), progress=False) | kwargs
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")):
        distdp.fit_lda(X, **args)


def test_k_larger_than_data_supports_still_gives_k_topics():
    """Documents that use only 3 words give an M2 of rank ≤ 3: a fit asked for k = 5 returns 5 topics and says so.

    The spectral stage finds the supported ones, the rest are split and
    separated by the refinement; stderr (a warning) and ``model.json`` report how many
    came from the spectral stage. The single-topic model, which has no refinement,
    fails naming the k that works.
    """
    rng = np.random.default_rng(0)
    X = sp.csr_matrix(np.hstack([rng.integers(1, 5, size=(200, 3)), np.zeros((200, 17))]))
    with pytest.warns(UserWarning, match=r"the data support \d of the k=5 topics"):
        model = distdp.fit_lda(X, 5, progress=False, seed=0, cluster=ClusterOptions(backend="local"))
    m = model.info["corpus"]["n_topics_spectral"]
    assert 1 <= m <= 3
    assert model.topic_word.shape == (5, 20) and model.alpha.shape == (5,)
    np.testing.assert_allclose(model.topic_word.sum(axis=1), 1.0)
    assert model.info["refine"]["sweeps"] >= 1
    with pytest.raises(ValueError, match=rf"k=5 is larger than the data supports.*Use k ≤ {m}"):
        distdp.fit_lda(X, 5, progress=False, seed=0, model="stm", cluster=ClusterOptions(backend="local"))


def test_too_few_documents_for_the_spectral_stage_still_give_k_topics():
    """Fewer than k + 1 documents of ≥ 3 tokens: the refined default starts from the word frequencies, says so on
    stderr and in model.json, and returns k topics; the pure spectral fit (refine=0) is refused, naming why."""
    X = sp.csr_matrix(np.array([[3, 1, 0, 0], [0, 2, 2, 0], [1, 1, 0, 0]]))
    local = ClusterOptions(backend="local")
    with pytest.raises(ValueError, match=r"too few documents: 2 of 3 have ≥ 3 tokens.*\(refine=0\) cannot"):
        distdp.fit_lda(X, 2, refine=0, progress=False, cluster=local)
    with pytest.warns(UserWarning, match="the spectral stage did not run"):
        model = distdp.fit_lda(X, 2, progress=False, seed=0, cluster=local)
    assert model.topic_word.shape == (2, 4) and model.info["corpus"]["n_topics_spectral"] == 0
    assert "too few documents" in model.info["corpus"]["spectral_skipped"]
    assert model.info["refine"]["sweeps"] == pipeline.FALLBACK_SWEEPS
    assert model.info["method"].startswith("word frequencies + ")


@pytest.mark.slow
def test_two_token_documents_recover_their_topics():
    """A corpus of 2-token documents (queries, tags) has no document the spectral stage can use; the fit from the
    word frequencies recovers the topics to the accuracy the tokens allow.

    3 topics on disjoint 20-word supports, 3,000 documents of 2 tokens from one topic each. Even knowing every
    token's topic, the empirical rows err by E‖p̂ − p‖₁ = Σ_w E|p̂_w − p_w| ≈ Σ_w √(2 p_w (1 − p_w) / (π n_t)) (the
    normal approximation to the binomial, n_t the topic's tokens); the fit must come within twice that floor.
    Measured on 5 corpus draws: 0.068–0.075 against a floor of ≈ 0.07, from a start at L1 1.22–1.28.
    """
    rng = np.random.default_rng(0)
    k, d, n = 3, 60, 3000
    beta = np.zeros((k, d))
    for t in range(k):
        beta[t, 20 * t:20 * (t + 1)] = rng.dirichlet(np.ones(20))
    z = rng.integers(k, size=n)
    words = np.stack([rng.choice(d, size=2, p=beta[t]) for t in z])
    X = sp.csr_matrix((np.ones(2 * n), (np.repeat(np.arange(n), 2), words.ravel())), shape=(n, d))
    with pytest.warns(UserWarning, match="the spectral stage did not run"):
        model = distdp.fit_lda(X, k, progress=False, coherence=False, seed=0, cluster=ClusterOptions(backend="local"))
    n_t = 2 * np.bincount(z, minlength=k)[:, None]
    floor = float(np.mean(np.sum(np.sqrt(2 * beta * (1 - beta) / (np.pi * n_t)), axis=1)))
    assert lda.matched_l1(model.topic_word, beta)[0] <= 2 * floor


def test_auto_backend_rule(monkeypatch, no_ray):
    # "ray" where a cluster is named (address or RAY_ADDRESS) or already joined; else by the corpus's size.
    limit = api.AUTO_LOCAL_MAX_NONZEROS
    assert api.auto_backend(None, 0) == api.auto_backend(None, limit) == "local"
    assert api.auto_backend(None, limit + 1) == "ray"
    assert api.auto_backend("ray://head:10001", 0) == "ray"
    monkeypatch.setenv("RAY_ADDRESS", "auto")
    assert api.auto_backend(None, 0) == "ray"
    monkeypatch.delenv("RAY_ADDRESS")
    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(is_initialized=lambda: True))
    assert api.auto_backend(None, 0) == "ray"
    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(is_initialized=lambda: False))
    assert api.auto_backend(None, 0) == "local"


def test_out_of_core_fit_equals_the_in_memory_fit(small_dir, no_ray):
    """Shards that re-read their row groups every pass give the in-memory spectral fit for the same seed (the
    same sums grouped by row group: 1e-10 relative is far above rounding, far below any statistical change)."""
    kw = dict(alpha0=1.0, seed=3, progress=False, refine=0, coherence=False)
    mem = distdp.fit_lda(small_dir, 4, **kw, cluster=ClusterOptions(backend="local", workers=2, out_of_core=False))
    ooc = distdp.fit_lda(small_dir, 4, **kw, cluster=ClusterOptions(backend="local", workers=2, out_of_core=True))
    assert (mem.info["parameters"]["out_of_core"], ooc.info["parameters"]["out_of_core"]) == (False, True)
    np.testing.assert_allclose(ooc.topic_word, mem.topic_word, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(ooc.alpha, mem.alpha, rtol=1e-10)
    assert ooc.info["whitening"]["m2_products"] == mem.info["whitening"]["m2_products"]
    theta = distdp.transform(ooc, small_dir, cluster=ClusterOptions(backend="local", workers=2, out_of_core=True))
    ref = distdp.transform(ooc, small_dir, cluster=ClusterOptions(backend="local", workers=2))
    assert list(theta.doc_ids) == list(ref.doc_ids)
    np.testing.assert_allclose(theta.theta, ref.theta, rtol=1e-6)      # float32 mixtures


def test_out_of_core_refines_by_em_and_refuses_what_needs_memory(small, small_dir, no_ray, monkeypatch):
    # The default refinement of an out-of-core fit is EM (the Gibbs chain keeps a topic per token); asking
    # for Gibbs, streaming a matrix, or streaming a private fit are errors naming why.
    ooc = ClusterOptions(backend="local", out_of_core=True)
    fitted = distdp.fit_lda(small_dir, 4, alpha0=1.0, seed=3, progress=False, coherence=False, cluster=ooc)
    assert fitted.info["parameters"]["refiner"] == "em" and fitted.info["refine"]["iterations"] >= 1
    with pytest.raises(ValueError, match="out of core"):
        distdp.fit_lda(small_dir, 4, progress=False, refiner="gibbs", refine=3, cluster=ooc)
    with pytest.raises(ValueError, match="a matrix in memory"):
        distdp.fit_lda(small.counts, 4, progress=False, cluster=ooc)
    with pytest.raises(ValueError, match="a private fit holds its shards in memory"):
        distdp.fit_lda(small_dir, 4, progress=False, cluster=ooc,
                       privacy=api.PrivacyOptions(epsilon=1.0, delta=1e-6, vocab_public=True))
    # By default the counts stream when they would take more than OUT_OF_CORE_SHARE of the memory.
    nnz = small.counts.nnz
    assert api.auto_out_of_core(nnz, int(12 * nnz / api.OUT_OF_CORE_SHARE) - 1)
    assert not api.auto_out_of_core(nnz, int(12 * nnz / api.OUT_OF_CORE_SHARE) + 1)
    assert not api.auto_out_of_core(nnz, None)
    monkeypatch.setattr(api, "available_memory", lambda backend: 1000)
    auto = distdp.fit_lda(small_dir, 4, alpha0=1.0, seed=3, progress=False, refine=0, coherence=False,
                          cluster=ClusterOptions(backend="local"))
    assert auto.info["parameters"]["out_of_core"] is True


def test_open_corpus_local_and_auto(small, small_dir, no_ray):
    # In memory, "local" splits the rows into `workers` shards in order; "auto" on a small corpus with no
    # cluster is "local" too. A parquet path is partitioned by its files and carries its vocabulary.
    with api.open_corpus(small.counts, cluster=ClusterOptions(backend="local", workers=3)) as oc:
        assert oc.kind == "local" and oc.ray_backend is None and oc.resources() == {}
        assert isinstance(oc.backend, pipeline.LocalBackend) and oc.backend.n_shards == 3
        assert (oc.vocab_size, oc.vocab, oc.source) == (60, None, "in-memory matrix")
        assert (sp.vstack([s.counts for s in oc.backend.shards]) != small.counts).nnz == 0
    with api.open_corpus(small.counts, cluster=ClusterOptions(backend="auto")) as oc:
        assert oc.kind == "local" and oc.backend.n_shards == 1
    for backend in ("local", "auto"):
        with api.open_corpus(small_dir, with_doc_ids=True, cluster=ClusterOptions(backend=backend, workers=2)) as oc:
            assert oc.kind == "local" and oc.backend.n_shards == 2 and oc.source == str(small_dir)
            assert oc.vocab_size == 60 and oc.vocab[:2] == ["w0", "w1"]
            assert [s.counts.shape[0] for s in oc.backend.shards] == [200, 200]
    with pytest.raises(ValueError, match=r"ClusterOptions.backend must be one of .*, got 'dask'"):
        with api.open_corpus(small.counts, cluster=ClusterOptions(backend="dask")):
            pass
    with pytest.raises(ValueError, match="vocabulary has 3 words but the matrix has 60 columns"):
        with api.open_corpus(small.counts, vocab=["a", "b", "c"], cluster=ClusterOptions(backend="local")):
            pass


def test_open_corpus_kind_names_where_the_shards_live():
    # kind is read from ray_backend alone: no Ray is started here.
    local = api.OpenCorpus(pipeline.LocalBackend([]), None, 5, None, "x", 0.0)
    ray = api.OpenCorpus(pipeline.LocalBackend([]), object(), 5, None, "x", 0.0)
    assert (local.kind, ray.kind) == ("local", "ray")


@pytest.mark.parametrize("workers", [1, 2])
def test_fit_lda_on_a_matrix_and_on_its_parquet_files_is_the_same_model(small, small_dir, workers):
    # Two files of 200 rows each, read in order, are the same shards as the matrix split in two (or whole): the
    # same sums in the same order, so the same model bit for bit (measured: identical for 1 and 2 workers).
    kw = dict(cluster=ClusterOptions(backend="local", workers=workers), seed=0, progress=False)
    a = api.fit_lda(small.counts, 4, **kw)
    b = api.fit_lda(small_dir, 4, **kw)
    np.testing.assert_array_equal(a.topic_word, b.topic_word)
    np.testing.assert_array_equal(a.alpha, b.alpha)
    assert a.info["parameters"]["backend"] == b.info["parameters"]["backend"] == "local"
    assert b.vocab[:2] == ["w0", "w1"] and a.vocab is None


def test_transform_coherence_and_export_on_a_small_corpus(tmp_path, small, small_dir):
    model = api.fit_lda(small.counts, 4, seed=0, progress=False, cluster=ClusterOptions(backend="local"))
    # transform: the model's own E-step per document, stored as float32 (rounding ≤ 2⁻²⁴ ≈ 6e-8 on values ≤ 1,
    # so 1e-7), rows summing to 1 at that precision; ids from the parquet files, row numbers for a matrix.
    mix = api.transform(model, small.counts, cluster=ClusterOptions(backend="local"))
    assert mix.theta.shape == (400, 4) and mix.theta.dtype == np.float32
    np.testing.assert_allclose(mix.theta, model.transform(small.counts), rtol=0, atol=1e-7)
    np.testing.assert_allclose(mix.theta.sum(axis=1), 1.0, atol=1e-6)
    assert list(mix.doc_ids[:2]) == ["0", "1"] and set(mix.status) == {"ok"}
    assert (mix.n_tokens == np.asarray(small.counts.sum(axis=1)).ravel()).all()
    on_files = api.transform(model, small_dir, cluster=ClusterOptions(backend="local", workers=2))
    assert list(on_files.doc_ids[:2]) == ["d0", "d1"]
    np.testing.assert_array_equal(on_files.theta, mix.theta)
    # coherence on the training corpus is what the fit recorded (same pass, same sums).
    coh = api.coherence(model, small.counts, cluster=ClusterOptions(backend="local"))
    np.testing.assert_array_equal(coh["per_topic"], model.info["coherence"]["per_topic"])
    assert coh["mean"] == model.info["coherence"]["mean"]
    # export: pyLDAvis's arrays, exactly the model's topics, transform's mixtures and the corpus's counts.
    out = api.export(model, small.counts, tmp_path / "vis", cluster=ClusterOptions(backend="local"))
    assert sorted(p.name for p in out.iterdir()) == ["doc_lengths.npy", "doc_topic_dists.npy", "term_frequency.npy",
                                                     "top_words.txt", "topic_term_dists.npy", "vocab.json"]
    np.testing.assert_array_equal(np.load(out / "topic_term_dists.npy"), model.topic_word)
    np.testing.assert_array_equal(np.load(out / "doc_topic_dists.npy"), mix.theta.astype(np.float64))
    np.testing.assert_array_equal(np.load(out / "doc_lengths.npy"), np.asarray(small.counts.sum(axis=1)).ravel())
    np.testing.assert_array_equal(np.load(out / "term_frequency.npy"), np.asarray(small.counts.sum(axis=0)).ravel())
    assert json.loads((out / "vocab.json").read_text()) == [str(i) for i in range(60)]
    with pytest.raises(FileExistsError):
        api.export(model, small.counts, tmp_path / "vis", cluster=ClusterOptions(backend="local"))
    # a corpus whose vocabulary is not the model's is refused before any pass
    write_corpus(tmp_path / "c50", small.counts[:, :50], 1, [f"w{i}" for i in range(50)])
    with pytest.raises(ValueError, match="the corpus has vocabulary size 50 but the model has 60"):
        api.transform(model, tmp_path / "c50", cluster=ClusterOptions(backend="local"))
