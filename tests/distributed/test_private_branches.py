"""Every noise-dependent branch of the private LDA fit, forced, on Ray actors: the same fit as in process.

The branches are chosen in the coordinator from released values (the whitening's early rung, first
release and top-up; the working vocabulary's restart is in test_backend.py); here their gates are
forced so that each branch runs on every whitening form and tensor mechanism, and the Ray fit must
equal the in-process one (seeded noise, so both draw the same: reproducible, not private) and record
the branch it took. An error inside a private fit on Ray reads as an internal error that says whether
releases were made.
"""
import numpy as np
import pytest

import distdp
from distdp.io import corpus as cio
from distdp.lda.private import pipeline as private_pipeline
from distdp.lda.private import scalable as lda_private
from distdp.lda.synthetic import sample_corpus
from distdp.privacy.ledger import PrivateRunInternalError
from distdp.api import ClusterOptions, PrivacyOptions

K, D = 5, 300

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    # A text-like shape (30% of every topic's mass on one shared Zipf-law background, lognormal lengths).
    path = tmp_path_factory.mktemp("corpus") / "c"
    c = sample_corpus(6000, D, K, np.random.default_rng(4), alpha0=0.8, background=0.3, lengths="lognormal")
    cio.write_corpus(path, c.counts, n_shards=3, vocab=[f"w{i}" for i in range(D)], row_group_size=500)
    return path


def _force(monkeypatch, branch, rung):
    """Force the whitening's adaptive gates: ``early`` (the early rung suffices), ``first`` (the rung, where
    ``rung``, falls short and the first release suffices), ``topup`` (a second release is made); None leaves
    them alone."""
    if branch == "first" and rung:
        def needs_topup(eig, level, ratio=None, answers=iter([True, False])):
            return next(answers)
        monkeypatch.setattr(lda_private, "needs_topup", needs_topup)
    elif branch is not None:
        monkeypatch.setattr(lda_private, "WHITENING_TOPUP_SNR", 1e9 if branch == "topup" else 0.0)


def _whitening_stages(model):
    return [r["stage"] for r in model.info["privacy"]["ledger"] if r["stage"].startswith("m2_whitening")]


CASES = [  # (whitening form, tensor mechanism, model, forced branch, whitening stages in the ledger)
    ("dense", "whitened", "lda", "early", ["m2_whitening_early"]),
    ("dense", "whitened", "lda", "first", ["m2_whitening_early", "m2_whitening"]),
    ("dense", "whitened", "lda", "topup", ["m2_whitening_early", "m2_whitening", "m2_whitening_topup"]),
    ("matrix-free", "whitened", "lda", "first", ["m2_whitening"]),
    ("matrix-free", "whitened", "lda", "topup", ["m2_whitening", "m2_whitening_topup"]),
    ("power", "whitened", "lda", None, ["m2_whitening"]),
    ("dense", "power", "lda", "topup", ["m2_whitening_early", "m2_whitening", "m2_whitening_topup"]),
    ("dense", "whitened", "stm", "topup", ["m2_whitening", "m2_whitening_topup"]),
]


@pytest.mark.parametrize("whitening, mechanism, model, branch, stages", CASES)
def test_forced_branch_on_ray_equals_in_process(ray_session, corpus_dir, monkeypatch, whitening, mechanism, model,
                                                branch, stages):
    rung = stages[0] == "m2_whitening_early"
    _force(monkeypatch, branch, rung)
    # ε = 100: large enough for the power form's noisier whitening on 6,000 documents.
    kw = dict(alpha0=1.0, seed=2, progress=False, coherence=False, model=model,
              privacy=PrivacyOptions(epsilon=100.0, delta=1e-6, reproducible=True, working_vocab=150,
                                     whitening=whitening, mechanism=mechanism))
    ray_fit = distdp.fit_lda(corpus_dir, K, **kw, cluster=ClusterOptions(workers=3))
    _force(monkeypatch, branch, rung)  # a fresh iterator of answers for the second fit
    local = distdp.fit_lda(corpus_dir, K, **kw, cluster=ClusterOptions(backend="local", workers=3))
    assert _whitening_stages(ray_fit) == _whitening_stages(local) == stages
    np.testing.assert_allclose(ray_fit.topic_word, local.topic_word, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("backend", ["ray", "local"])
def test_unexpected_error_after_releases_is_internal(ray_session, corpus_dir, monkeypatch, backend):
    # A defect in a stage after the whitening (here: the tensor clip raises numpy's kind of ValueError,
    # as a wrong-shaped array once did) must not read like a message about the input, and must say that
    # the releases already made count.
    def broken(*args, **kwargs):
        raise ValueError("einstein sum subscripts string contains too many subscripts for operand 0")

    monkeypatch.setattr(private_pipeline, "_tensor_clip", broken)
    with pytest.raises(PrivateRunInternalError, match=r"internal error.*not a problem with the input.*"
                       r"einstein sum.*noisy releases of the data had been made: count this run") as err:
        distdp.fit_lda(corpus_dir, K, progress=False, coherence=False, seed=2,
                       privacy=PrivacyOptions(epsilon=100.0, delta=1e-6, vocab_public=True, reproducible=True),
                       cluster=ClusterOptions(backend=backend, workers=3))   # the whitening passes
    assert err.value.releases >= 4 and isinstance(err.value.__cause__, ValueError)
