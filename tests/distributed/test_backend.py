"""Spectral LDA on Ray: same numbers as in-process, and surviving a killed actor or a lost node."""
import numpy as np
import pytest

import distdp
from distdp.lda import pipeline
from distdp.io import corpus as cio
from distdp.lda.shard import Shard
from distdp.lda.synthetic import sample_corpus
from distdp.api import ClusterOptions, PrivacyOptions, SolverOptions

K, D = 5, 300


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "c"
    c = sample_corpus(6000, D, K, np.random.default_rng(4), alpha0=0.8)
    cio.write_corpus(path, c.counts, n_shards=3, vocab=[f"w{i}" for i in range(D)], row_group_size=500)
    return path


def reference(corpus_dir, workers, **kw):
    """The in-process fit with the same shard split (the spectral fit alone unless ``refine`` is given)."""
    return distdp.fit_lda(corpus_dir, K, alpha0=0.8, seed=5, progress=False, **{"refine": 0, **kw},
                          cluster=ClusterOptions(backend="local", workers=workers))


@pytest.mark.parametrize("tensor", ["explicit", "implicit"])
def test_ray_equals_in_process(ray_session, corpus_dir, tensor):
    """Same shards, same seed, same reduction order: the same numbers.

    Actors run BLAS single-threaded and the driver may not, so products can
    round differently in the last bit; 1e-10 relative is far below any
    statistical difference and far above rounding (≈1e-16 per operation).
    """
    ray_fit = distdp.fit_lda(corpus_dir, K, alpha0=0.8, seed=5, progress=False, solver=SolverOptions(tensor=tensor),
                             cluster=ClusterOptions(workers=3))
    local = reference(corpus_dir, 3, solver=SolverOptions(tensor=tensor), refine=None)  # both: the default refinement
    assert ray_fit.info["parameters"]["workers"] == 3
    np.testing.assert_allclose(ray_fit.topic_word, local.topic_word, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(ray_fit.alpha, local.alpha, rtol=1e-10)
    traffic = ray_fit.info["resources"]["result_bytes_per_round"]
    # per-round traffic is O(d·p) or O(k³): independent of the 6,000 documents; one d×p array per shard
    # (the U-statistic's q term is folded into e2 on the shard, and q returned as a scalar 0); the widest block is
    # LOBPCG's k + 10 columns, or Lanczos's check of its k vectors (its own products have one column)
    widest = {"lobpcg": K + 10, "lanczos": K}[ray_fit.info["whitening"]["eigensolver"]]
    assert traffic["m2_product"] == 3 * D * widest * 8
    # every round's time is recorded, and a round lasts at least as long as its slowest shard's work
    rounds = ray_fit.info["resources"]["round_s"]
    assert rounds["first_pass"]["rounds"] + rounds["m2_product"]["rounds"] == ray_fit.info["whitening"]["m2_products"]
    assert all(0 < r["slowest_shard_s"] <= r["wall_s"] for r in rounds.values())


def test_corpus_by_uri_on_ray(ray_session, corpus_dir):
    """Each actor opens its row groups by URI (pyarrow.fs; ``file://`` here, ``s3://`` on a cluster):
    the same fit as from the local path."""
    ray_fit = distdp.fit_lda(corpus_dir.as_uri(), K, alpha0=0.8, seed=5, progress=False,
                             cluster=ClusterOptions(workers=3))
    np.testing.assert_allclose(ray_fit.topic_word, reference(corpus_dir, 3, refine=None).topic_word, rtol=1e-10, atol=1e-14)
    assert ray_fit.vocab == [f"w{i}" for i in range(D)]


def test_out_of_core_on_ray(ray_session, corpus_dir):
    """Actors that keep no documents but re-read their row groups every pass: the in-memory fit's numbers
    (rounding apart, as above), and each pass's rounds recorded as for in-memory shards."""
    ray_fit = distdp.fit_lda(corpus_dir, K, alpha0=0.8, seed=5, progress=False, refine=0,
                             cluster=ClusterOptions(workers=3, out_of_core=True))
    assert ray_fit.info["parameters"]["out_of_core"] is True
    np.testing.assert_allclose(ray_fit.topic_word, reference(corpus_dir, 3).topic_word, rtol=1e-10, atol=1e-14)
    assert ray_fit.info["resources"]["round_s"]["m2_product"]["rounds"] >= 1


def test_cluster_without_cpus_needs_workers(ray_session, corpus_dir, monkeypatch):
    """A cluster whose only node is a CPU-0 head (cluster.yaml) before its workers join: the default
    shard count would be read off zero CPUs, so the fit stops and says what to do."""
    import ray

    monkeypatch.setattr(ray, "cluster_resources", lambda: {"memory": 1e9})
    with pytest.raises(ValueError, match="no CPUs yet.*--workers N"):
        distdp.fit_lda(corpus_dir, K, progress=False)


@pytest.mark.slow
@pytest.mark.parametrize("whitening", ["auto", "matrix-free"])
def test_private_fit_with_tail_release_on_ray_equals_in_process(ray_session, corpus_dir, whitening):
    """The scalable private fit with every release (scan, spectral, tail, unmixing pass, EM) on Ray actors,
    the whitening's second moment formed (auto on 150 words) or matrix-free (its products from the actors).

    Seeded noise (reproducible, not private) so both draw the same noise; tolerance as above.
    """
    kw = dict(alpha0=1.0, seed=2, progress=False, coherence=False, refine=1,
              privacy=PrivacyOptions(epsilon=30.0, delta=1e-6, reproducible=True, working_vocab=150, unmix=1,
                                     whitening=whitening))
    ray_fit = distdp.fit_lda(corpus_dir, K, **kw, cluster=ClusterOptions(workers=3))
    local = distdp.fit_lda(corpus_dir, K, **kw, cluster=ClusterOptions(backend="local", workers=3))
    stages = [r["stage"] for r in ray_fit.info["privacy"]["ledger"]]
    assert stages[0] == "scan" and stages[-5:] == ["tail_gram", "tail_sstats", "unmix_gram", "unmix_sstats",
                                                   "em_sstats"]
    np.testing.assert_allclose(ray_fit.topic_word, local.topic_word, rtol=1e-10, atol=1e-14)


@pytest.mark.slow
def test_working_vocab_restart_on_ray_equals_in_process(ray_session, corpus_dir, monkeypatch):
    """``--working-vocab auto`` forced to restart (20 words per topic: 100 → 200 of the 300 words; every
    token share and probe ratio passing): the actors' restricted views switch to the larger vocabulary, and
    the fit equals the in-process one (seeded noise; tolerance as above)."""
    from distdp.lda.private import pipeline as private_pipeline
    from distdp.lda.private import scalable as lda_private

    monkeypatch.setattr(private_pipeline, "WORKING_VOCAB_PER_TOPIC", 20)
    monkeypatch.setattr(lda_private, "RESTART_TOKEN_SHARE", 1.0)
    monkeypatch.setattr(lda_private, "restart_snr", lambda plan: 0.0)
    kw = dict(alpha0=1.0, seed=2, progress=False, coherence=False,
              privacy=PrivacyOptions(epsilon=30.0, delta=1e-6, reproducible=True, working_vocab="auto"))
    ray_fit = distdp.fit_lda(corpus_dir, K, **kw, cluster=ClusterOptions(workers=3))
    local = distdp.fit_lda(corpus_dir, K, **kw, cluster=ClusterOptions(backend="local", workers=3))
    assert ray_fit.info["corpus"]["working_vocab_restart"]["made"]
    assert ray_fit.info["parameters"]["working_vocab"] == 200
    stages = [r["stage"] for r in ray_fit.info["privacy"]["ledger"]]
    assert stages[:5] == ["scan", "counts_probe", "m1_probe", "m2_whitening_probe", "counts"]
    np.testing.assert_allclose(ray_fit.topic_word, local.topic_word, rtol=1e-10, atol=1e-14)


def test_bad_shard_reports_file_and_row(ray_session, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"word_ids": pa.array([[0, 1, 2], [1, 2, 500]], type=pa.list_(pa.int32())),
                             "counts": pa.array([[1, 1, 1], [2, 1, 1]], type=pa.list_(pa.int32()))}),
                   tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match=r"bad.parquet: row 1: column 'word_ids': id 500 is outside"):
        distdp.fit_lda(tmp_path / "bad.parquet", 2, vocab_size=10, progress=False, cluster=ClusterOptions(workers=1))


def fit_with_fault(corpus_dir, workers, fault, stage="whitening", **backend_kw):
    """Run the coordinator on Ray and call ``fault(backend)`` once, at ``stage``."""
    from distdp.distributed import RayBackend

    units = cio.plan_units(cio.discover(corpus_dir))
    be = RayBackend(cio.partition(units, workers), D, Shard, **backend_kw)
    fired = []

    def progress(name, done, total):
        if name == stage and not fired:
            fired.append(be.info)
            fault(be)

    try:
        res = pipeline.fit_spectral(be, D, pipeline.SpectralParams(k=K, alpha0=0.8), np.random.default_rng(5),
                                    progress=progress)
        pids = [i["pid"] for i in be._get([a.ready.remote() for a in be.actors])]
    finally:
        be.shutdown()
    assert fired, "the fault was never injected"
    return res, [i["pid"] for i in fired[0]], pids


@pytest.mark.slow
def test_killed_actor_is_restarted_and_fit_unchanged(ray_session, corpus_dir):
    """Killing a shard actor between passes: Ray restarts it, it re-reads its rows, same result."""
    import ray

    res, before, after = fit_with_fault(corpus_dir, 3, lambda be: ray.kill(be.actors[1], no_restart=False),
                                        cpus_per_worker=0.5)
    assert before[1] != after[1] and before[0] == after[0]  # actor 1 is a new process
    local = reference(corpus_dir, 3, solver=SolverOptions(eigensolver="lobpcg"))   # SpectralParams' default
    np.testing.assert_allclose(res.topic_word, local.topic_word, rtol=1e-10, atol=1e-14)


@pytest.mark.slow
def test_lost_worker_node_fit_unchanged(ray_cluster, corpus_dir):
    """Removing a worker node mid-fit: its actors restart on the surviving nodes; same result."""
    nodes = list(ray_cluster.worker_nodes)

    def lose_node(be):
        ray_cluster.remove_node(nodes[0])

    res, before, after = fit_with_fault(corpus_dir, 3, lose_node, stage="whitening", cpus_per_worker=0.5)
    local = reference(corpus_dir, 3, solver=SolverOptions(eigensolver="lobpcg"))   # SpectralParams' default
    np.testing.assert_allclose(res.topic_word, local.topic_word, rtol=1e-10, atol=1e-14)
    assert res.stats["n_docs"] == 6000


@pytest.mark.slow
def test_sharded_em_on_two_nodes_equals_in_process(ray_cluster, corpus_dir):
    """Spectral start + 3 EM iterations on 3 actors over a multi-node cluster = the in-process fit."""
    import ray

    assert len([n for n in ray.nodes() if n["Alive"]]) >= 2
    kw = dict(alpha0=0.8, seed=5, progress=False, refine=3, refiner="em")
    on_ray = distdp.fit_lda(corpus_dir, K, **kw, cluster=ClusterOptions(workers=3, cpus_per_worker=0.5))
    local = distdp.fit_lda(corpus_dir, K, **kw, cluster=ClusterOptions(backend="local", workers=3))
    assert on_ray.info["resources"]["nodes"] >= 2
    np.testing.assert_allclose(on_ray.topic_word, local.topic_word, rtol=1e-9, atol=1e-13)
    np.testing.assert_allclose(on_ray.info["refine"]["elbo"], local.info["refine"]["elbo"], rtol=1e-12)
    # per-iteration traffic is k×d statistics (and α's k-vector) per shard, independent of the documents
    assert on_ray.info["resources"]["result_bytes_per_round"]["e_step"] == 3 * (K * D + K) * 8


@pytest.mark.slow
def test_sharded_gibbs_on_two_nodes_equals_in_process(ray_cluster, corpus_dir):
    """Spectral start + 12 Gibbs sweeps (AD-LDA over 3 actors, one α update) on a multi-node cluster give the
    in-process fit's counts exactly: every shard's stream is seeded from the fit's seed and its index, and the
    counts are summed in shard order."""
    kw = dict(alpha0=0.8, seed=5, progress=False, refine=12, refiner="gibbs")
    on_ray = distdp.fit_lda(corpus_dir, K, **kw, cluster=ClusterOptions(workers=3, cpus_per_worker=0.5))
    local = distdp.fit_lda(corpus_dir, K, **kw, cluster=ClusterOptions(backend="local", workers=3))
    np.testing.assert_array_equal(on_ray.topic_word, local.topic_word)
    np.testing.assert_array_equal(on_ray.alpha, local.alpha)
    assert on_ray.info["refine"]["sweeps"] == 12 and on_ray.info["refine"]["restarted_shards"] == 0
    # per sweep each shard returns its d×k counts as int32, and on α sweeps its histograms: (k + 1) × (longest
    # document + 1) int64; the documents are 3 + Poisson(97) tokens, so none reaches 200 (P < 1e-15 each)
    sent = on_ray.info["resources"]["result_bytes_per_round"]["gibbs_sweep"]
    assert 3 * D * K * 4 <= sent <= 3 * (D * K * 4 + (K + 1) * 201 * 8)
