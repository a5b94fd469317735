"""Tests of :class:`distdp.SpectralLDA`, the scikit-learn estimator, its option groups and the lazy package face.

The synthetic corpora are drawn here with NumPy (or written by the ``make-corpus`` command), not through
``distdp``'s internal modules, so the tests do not depend on where those live.
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

import distdp
from distdp import ClusterOptions, PrivacyOptions, SolverOptions, SpectralLDA
from distdp import cli
from distdp.estimator import InvalidParameterError
from distdp.lda.pipeline import EIG_MAX_ITERS, EIG_TOL

LOCAL = ClusterOptions(backend="local")

#: Tolerances of the recovery tests. On corpora drawn by :func:`sample` (2000 documents of 3 + Poisson(50) tokens,
#: d = 40, k = 3, α0 = 1, topic rows ~ Dirichlet(0.1)) with corpus seeds and random_state 0–19, the refined fit's
#: mean matched L1 distance to the true topics was 0.011–0.027 and the mean L1 distance of θ to the true mixtures
#: 0.10–0.14 (a uniform guess is ~1.5 and ~0.6 away). The bounds are about twice the worst of those 20 runs, and far
#: below a wrong answer.
TOPIC_L1_TOL = 0.06
THETA_L1_TOL = 0.25


def sample(n_docs=2000, d=40, k=3, alpha0=1.0, length=50, seed=0):
    """LDA corpus drawn with NumPy: (counts CSR n×d, topic_word k×d, theta n×k)."""
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(d, 0.1), k)
    theta = rng.dirichlet(np.full(k, alpha0 / k), n_docs)
    counts = rng.multinomial(3 + rng.poisson(length, n_docs), theta @ topics)
    return sp.csr_matrix(counts), topics, theta


@pytest.fixture(scope="module")
def corpus():
    return sample()


# ------------------------------------------------------------------ scikit-learn's checks
#: Why a check of scikit-learn's suite cannot apply to spectral LDA (also listed in SpectralLDA's docstring).
# These checks fit data of 2 columns (words), and spectral LDA needs n_components < n_features: fit raises a
# ValueError naming n_components. They pass on the n_components=1 instance.
TWO_WORDS = "the check's data has 2 words, not more than n_components=2: fit refuses it"


def expected_failed_checks(estimator) -> dict:
    if estimator.n_components < 2:
        return {}
    return {name: TWO_WORDS for name in ("check_estimators_overwrite_params", "check_estimators_fit_returns_self",
                                         "check_readonly_memmap_input", "check_fit_idempotent",
                                         "check_fit_check_is_fitted", "check_n_features_in")}


# Strict where the installed scikit-learn can say so (1.8+): a listed check that starts passing fails the test,
# so the list cannot go stale.
_STRICT = {"xfail_strict": True} if "xfail_strict" in inspect.signature(parametrize_with_checks).parameters else {}


# n_components=1 runs the checks whose data has 2 columns; n_components=2 gives non-trivial mixtures to the
# transform checks (subset and sample-order invariance, dtype, pickling …).
@parametrize_with_checks([SpectralLDA(n_components=1, cluster=LOCAL), SpectralLDA(n_components=2, cluster=LOCAL)],
                         expected_failed_checks=expected_failed_checks, **_STRICT)
@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")
def test_sklearn_compatible(estimator, check):
    check(estimator)


# ------------------------------------------------------------------ fitting
def test_fit_transform_recovers_topics(corpus):
    X, topics, theta = corpus
    est = SpectralLDA(n_components=3, random_state=0, cluster=LOCAL)
    assert est.fit(X) is est
    assert est.components_.shape == (3, 40) and est.n_features_in_ == 40
    np.testing.assert_allclose(est.components_.sum(axis=1), 1.0)
    err, perm = distdp.matched_l1(est.components_, topics)
    assert err < TOPIC_L1_TOL
    mix = est.transform(X)
    assert mix.shape == (X.shape[0], 3) and mix.dtype == np.float64
    np.testing.assert_allclose(mix.sum(axis=1), 1.0)
    assert np.abs(mix[:, perm] - theta).sum(axis=1).mean() < THETA_L1_TOL
    # fitted attributes as in scikit-learn's LatentDirichletAllocation
    assert est.exp_dirichlet_component_.shape == (3, 40) and np.all(est.exp_dirichlet_component_ > 0)
    assert est.alpha_.shape == (3,) and np.all(est.alpha_ > 0)
    assert est.model_.variational is not None  # refined by EM (the default): λ is kept on the model
    assert est.privacy_report_["private"] is False
    assert list(est.get_feature_names_out()) == ["spectrallda0", "spectrallda1", "spectrallda2"]
    # fit_transform is fit then transform, with the same seed the same numbers
    np.testing.assert_allclose(SpectralLDA(n_components=3, random_state=0, cluster=LOCAL).fit_transform(X), mix)


def test_spectral_only_and_single_topic(corpus):
    X, topics, _ = corpus
    est = SpectralLDA(n_components=3, refine=0, random_state=0, cluster=LOCAL).fit(X)
    assert est.model_.variational is None and "refine" not in est.model_.info
    assert distdp.matched_l1(est.components_, topics)[0] < TOPIC_L1_TOL
    stm = SpectralLDA(n_components=3, model="stm", random_state=0, cluster=LOCAL).fit(X)
    assert stm.components_.shape == (3, 40) and stm.model_.model == "stm"


def test_sparse_formats_and_dense_agree(corpus):
    X = corpus[0][:600]
    ref = SpectralLDA(n_components=3, refine=2, random_state=1, cluster=LOCAL).fit(X)
    for other in (X.tocsc(), X.tocoo(), sp.csr_array(X), X.toarray(), X.toarray().astype(np.int32)):
        est = SpectralLDA(n_components=3, refine=2, random_state=1, cluster=LOCAL).fit(other)
        np.testing.assert_allclose(est.components_, ref.components_, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(est.transform(other), ref.transform(X), rtol=1e-10, atol=1e-12)


def test_invalid_input(corpus):
    X = corpus[0][:100].toarray().astype(float)
    est = SpectralLDA(n_components=3, cluster=LOCAL)
    with pytest.raises(ValueError, match="Negative values"):
        est.fit(X - 1)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.fit(bad)
    with pytest.raises(ValueError, match="too few documents"):
        SpectralLDA(n_components=3, refine=0, cluster=LOCAL).fit(np.eye(10, 5) * 2)   # every document: 2 tokens
    with pytest.raises(ValueError, match="n_samples=2"):
        SpectralLDA(n_components=3, refine=0, cluster=LOCAL).fit(X[:2])
    with pytest.warns(UserWarning, match="spectral stage did not run"):    # refined: from the word frequencies
        assert SpectralLDA(n_components=3, cluster=LOCAL, random_state=0).fit(X[:2]).components_.shape == (3, 40)
    with pytest.raises(ValueError, match="n_components=3"):
        est.fit(X[:, :3])
    with pytest.raises(ValueError, match="CountVectorizer"):
        est.fit(["a list of", "raw documents"])
    est.fit(X)
    with pytest.raises(ValueError, match="40 features"):
        est.transform(X[:, :30])


# ------------------------------------------------------------------ parameters
def test_params_round_trip():
    privacy = PrivacyOptions(epsilon=2.0, delta=1e-6, mechanism="power")
    est = SpectralLDA(n_components=4, alpha0=0.5, privacy=privacy, solver=SolverOptions(tensor="implicit"),
                      cluster=LOCAL, vocabulary=["a", "b"])
    params = est.get_params()
    assert params["privacy"] is privacy and params["n_components"] == 4 and params["random_state"] is None
    assert set(params) == set(inspect.signature(SpectralLDA).parameters)
    twin = clone(est)
    assert twin is not est and twin.get_params() == params and not hasattr(twin, "model_")
    assert est.set_params(n_components=6, solver=SolverOptions(method="simultaneous")) is est
    assert est.n_components == 6 and est.solver.method == "simultaneous" and est.privacy is privacy
    with pytest.raises(ValueError, match="Invalid parameter 'k'"):
        est.set_params(k=3)
    # the option groups are frozen: change a field with dataclasses.replace
    with pytest.raises(dataclasses.FrozenInstanceError):
        privacy.epsilon = 3.0
    assert dataclasses.replace(privacy, epsilon=3.0).epsilon == 3.0
    sp = SolverOptions(restarts=5, iters=7).spectral_params(4, 1.0, "lda")
    assert (sp.n_restarts, sp.n_iters, sp.eig_iters, sp.eig_tol) == (5, 7, EIG_MAX_ITERS, EIG_TOL)
    # the constructor stores what it is given and checks nothing (scikit-learn's rule); fit checks
    odd = SpectralLDA(n_components=-1)
    assert odd.get_params()["n_components"] == -1


@pytest.mark.parametrize("params, match", [
    ({"n_components": 0}, "n_components"),
    ({"n_components": 2.5}, "n_components"),
    ({"n_components": True}, "n_components"),
    ({"alpha0": -1.0}, "alpha0"),
    ({"model": "hdp"}, "model"),
    ({"refine": -1}, "refine"),
    ({"refine": 5, "model": "stm"}, "refine"),
    ({"eta": 0.0}, "eta"),
    ({"privacy": {"epsilon": 1.0, "delta": 1e-6}}, "privacy"),
    ({"solver": "fast"}, "solver"),
    ({"cluster": "local"}, "cluster"),
    ({"random_state": "seed"}, "random_state"),
    ({"random_state": -3}, "random_state"),
    ({"coherence": "yes"}, "coherence"),
    ({"vocabulary": {"a": 0}}, "vocabulary"),
    # a seed in a private fit only with reproducible=True (it would make the noise reproducible)
    ({"privacy": PrivacyOptions(epsilon=1.0, delta=1e-6), "random_state": 0}, "random_state"),
    # checked by fit_lda underneath, naming the option
    ({"solver": SolverOptions(tensor="sparse")}, "tensor"),
    ({"privacy": PrivacyOptions(epsilon=1.0, delta=1e-6, mechanism="laplace")}, "mechanism"),
])
def test_bad_parameters_name_themselves(corpus, params, match):
    est = SpectralLDA(**{"n_components": 3, "cluster": LOCAL, **params})
    with pytest.raises(ValueError, match=match):
        est.fit(corpus[0][:300])


@pytest.mark.parametrize("make, match", [
    (lambda: PrivacyOptions(epsilon=0.0, delta=1e-6), "epsilon"),
    (lambda: PrivacyOptions(epsilon=1.0, delta=1.5), "delta"),
    (lambda: PrivacyOptions(epsilon=1.0, delta=1e-6, length_cap=0), "length_cap"),
    (lambda: PrivacyOptions(epsilon=1.0, delta=1e-6, refine_budget=1.0), "refine_budget"),
    (lambda: PrivacyOptions(epsilon=1.0, delta=1e-6, working_vocab="most"), "working_vocab"),
    (lambda: SolverOptions(restarts=0), "restarts"),
    (lambda: SolverOptions(eig_tol=-1.0), "eig_tol"),
    (lambda: ClusterOptions(backend="spark"), "backend"),
    (lambda: ClusterOptions(workers=0), "workers"),
])
def test_bad_options_name_their_field(make, match):
    with pytest.raises(InvalidParameterError, match=match):
        make()


def test_random_state_generators(corpus):
    """An int seeds fit_lda; a RandomState or Generator given by the caller draws the seed (never NumPy's global)."""
    X = corpus[0][:500]
    a = SpectralLDA(n_components=3, refine=0, random_state=np.random.RandomState(7), cluster=LOCAL).fit(X)
    b = SpectralLDA(n_components=3, refine=0, random_state=np.random.RandomState(7), cluster=LOCAL).fit(X)
    np.testing.assert_array_equal(a.components_, b.components_)
    c = SpectralLDA(n_components=3, refine=0, random_state=np.random.default_rng(7), cluster=LOCAL).fit(X)
    assert isinstance(c.model_.info["parameters"]["seed"], int)


# ------------------------------------------------------------------ pipeline, corpus paths, privacy
def test_pipeline_after_count_vectorizer(corpus):
    X, topics, _ = corpus
    X = X[:1500]
    words = np.array([f"w{j}" for j in range(X.shape[1])])
    docs = [" ".join(np.repeat(words, row.toarray().ravel())) for row in X]
    pipe = make_pipeline(CountVectorizer(), SpectralLDA(n_components=3, random_state=0))
    theta = pipe.fit_transform(docs)
    assert theta.shape == (1500, 3)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    assert list(pipe.get_feature_names_out()) == ["spectrallda0", "spectrallda1", "spectrallda2"]
    vectorizer, lda = pipe.steps[0][1], pipe.steps[1][1]
    # CountVectorizer sorts its words (w0, w1, w10, …) and knows only those in the documents: put the topics back
    # in the corpus's word order, 0 for a word no document has (its true probability is tiny)
    in_corpus = [j for j, w in enumerate(words) if w in vectorizer.vocabulary_]
    assert len(in_corpus) >= 35 and lda.n_features_in_ == len(in_corpus)
    estimated = np.zeros_like(topics)
    estimated[:, in_corpus] = lda.components_[:, [vectorizer.vocabulary_[words[j]] for j in in_corpus]]
    assert distdp.matched_l1(estimated, topics)[0] < TOPIC_L1_TOL
    np.testing.assert_allclose(pipe.transform(docs[:10]), theta[:10])


def test_fit_corpus_path(tmp_path):
    path = tmp_path / "corpus"
    assert cli.main(["make-corpus", str(path), "--docs", "1500", "--vocab-size", "30", "--topics", "3",
                            "--shards", "2", "--seed", "3"]) == 0
    truth = np.load(path / "truth" / "topic_word.npy")
    est = SpectralLDA(n_components=3, random_state=0, cluster=ClusterOptions(backend="local", workers=2))
    est.fit(str(path))
    assert est.model_.info["parameters"]["backend"] == "local" and est.model_.info["parameters"]["workers"] == 2
    assert est.model_.vocab[:2] == ["w0", "w1"] and est.n_features_in_ == 30
    assert not hasattr(est, "feature_names_in_")
    assert distdp.matched_l1(est.components_, truth)[0] < TOPIC_L1_TOL
    theta = est.transform(path)                  # a Path works as a str does
    assert theta.shape == (1500, 3) and theta.dtype == np.float64
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-5)
    true_theta = np.load(path / "truth" / "theta.npy")
    perm = distdp.matched_l1(est.components_, truth)[1]
    assert np.abs(theta[:, perm] - true_theta).sum(axis=1).mean() < THETA_L1_TOL


def test_private_fit_records_report(corpus):
    X = corpus[0]
    # ε = 8 on 2000 documents: the seeded fit meets its budget (at ε = 4 some seeds' noisy unmixing Gram matrix is
    # not positive definite, a BudgetNotMetError); this test is about the report, not the utility
    privacy = PrivacyOptions(epsilon=8.0, delta=1e-5, reproducible=True, vocab_public=True)
    est = SpectralLDA(n_components=3, privacy=privacy, random_state=0, cluster=LOCAL).fit(X)
    report = est.privacy_report_
    assert report is est.model_.info["privacy"]
    assert report["requested"] == {"epsilon": 8.0, "delta": 1e-5} and report["epsilon"] <= 8.0 + 1e-9
    assert report["mechanism"] == "whitened" and len(report["ledger"]) > 0
    assert report["vocabulary"]["provenance"] == "declared_public"
    assert report["private"] is False                         # reproducible: seeded noise, reported as NOT private
    assert "seeded" in report["noise_source"]
    json.dumps(report)                                        # plain data, as model.json stores it
    np.testing.assert_allclose(est.components_.sum(axis=1), 1.0)
    assert est.transform(X[:5]).shape == (5, 3)
    again = SpectralLDA(n_components=3, privacy=privacy, random_state=0, cluster=LOCAL).fit(X)
    np.testing.assert_array_equal(again.components_, est.components_)
    assert est.__sklearn_tags__().non_deterministic is False
    assert SpectralLDA(privacy=PrivacyOptions(epsilon=1.0, delta=1e-6)).__sklearn_tags__().non_deterministic


# ------------------------------------------------------------------ the package face
def test_import_distdp_is_light():
    code = ("import sys, distdp; heavy = [m for m in ('ray', 'scipy', 'sklearn', 'numpy', 'pyarrow', 'distdp.api') "
            "if m in sys.modules]; assert not heavy, heavy; "
            "from distdp import SpectralLDA, PrivacyOptions, SolverOptions, ClusterOptions, fit_lda, transform, "
            "coherence, export, LDAModel, matched_l1, sample_corpus; assert 'ray' not in sys.modules; "
            "assert set(distdp.__all__) <= set(dir(distdp))")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert distdp.SpectralLDA is SpectralLDA and distdp.fit_lda is distdp.api.fit_lda
    with pytest.raises(AttributeError, match="no_such_name"):
        distdp.no_such_name
