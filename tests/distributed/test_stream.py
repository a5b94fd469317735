"""Ray shard actors: distributed and in-process power methods give the same results (to rounding) for one seed."""
import numpy as np
import pytest

from distdp.tensor.dp import private_power_method
from distdp.tensor.online import ShardedStream, online_power_method
from distdp.tensor.power import EmpiricalMoment, robust_power_method
from distdp.tensor.synthetic import SkewedMixture


# Ray workers run BLAS single-threaded (Ray sets OMP_NUM_THREADS=1) while the driver may use several
# threads, which split each shard's partial sum differently: the two agree to rounding (~1e-16 relative
# per apply), not bitwise. The iteration is contractive around the converged eigenvectors, so the results
# agree to well below 1e-12 relative; the restart chosen and the release count are the same.
CLOSE = dict(rtol=1e-12, atol=1e-12)


@pytest.fixture(scope="module")
def shards():
    rng = np.random.default_rng(0)
    V = np.linalg.qr(rng.standard_normal((12, 3)))[0]
    X = SkewedMixture(V, np.array([0.5, 0.3, 0.2]), 0.2).sample(3000, rng)
    return [X[:1000], X[1000:2100], X[2100:]]


@pytest.mark.slow
def test_distributed_robust_and_private_methods_equal_in_process(ray_session, shards):
    from distdp.distributed.stream import RayEmpiricalMoment

    op = RayEmpiricalMoment(shards, clip_bound=3.0)
    try:
        kw = dict(n_restarts=6, n_iters=4)
        a = robust_power_method(EmpiricalMoment(shards, clip_bound=3.0), 2, rng=np.random.default_rng(5), **kw)
        b = robust_power_method(op, 2, rng=np.random.default_rng(5), **kw)
        np.testing.assert_allclose(a.eigenvalues, b.eigenvalues, **CLOSE)
        np.testing.assert_allclose(a.eigenvectors, b.eigenvectors, **CLOSE)
        np.testing.assert_array_equal(a.best_restart, b.best_restart)
        assert op.rounds == 2 * 5  # one round per iteration (+1 per eigenvalue), all restarts at once
        pkw = dict(epsilon=5.0, delta=1e-6, neighbour="replace-one-point", reproducible=True, **kw)
        a = private_power_method(EmpiricalMoment(shards, clip_bound=3.0), 2, rng=np.random.default_rng(6), **pkw)
        b = private_power_method(op, 2, rng=np.random.default_rng(6), **pkw)
        np.testing.assert_allclose(a.eigenvectors, b.eigenvectors, **CLOSE)
        np.testing.assert_allclose(a.restart_values, b.restart_values, **CLOSE)
    finally:
        op.shutdown()


@pytest.mark.slow
def test_distributed_online_stream_equals_in_process(ray_session, shards):
    from distdp.distributed.stream import RayShardedStream

    st = RayShardedStream(shards, chunk_size=50)
    try:
        kw = dict(n_per_iter=90, n_restarts=5, n_iters=3)
        a = online_power_method(ShardedStream(shards, chunk_size=50), 2, rng=np.random.default_rng(1), **kw)
        b = online_power_method(st, 2, rng=np.random.default_rng(1), **kw)
        np.testing.assert_allclose(a.eigenvectors, b.eigenvectors, **CLOSE)
        np.testing.assert_allclose(a.eigenvalues, b.eigenvalues, **CLOSE)
        assert st.rounds == 2 * 4 and b.n_points == 90 * 2 * 4
    finally:
        st.shutdown()
