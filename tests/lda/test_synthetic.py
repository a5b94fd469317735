"""Synthetic corpora: text-like topics (a shared Zipf-law background), document-length modes, semi-real
corpora drawn from a fitted model, and the ``make-corpus`` options that write them."""
import json

import numpy as np
import pytest

from distdp.cli import main
from distdp.io.corpus import read_corpus
from distdp.lda import LDAModel
from distdp.lda.synthetic import LOGNORMAL_SIGMA, sample_corpus, sample_lengths, sample_topics, zipf_background


def test_background_is_shared_by_every_topic_and_zero_keeps_the_old_draws():
    k, d, b = 6, 400, 0.3
    topics = sample_topics(k, d, np.random.default_rng(1), background=b)
    np.testing.assert_allclose(topics.sum(axis=1), 1.0)
    # The same generator state: the Dirichlet rows first, then the background's permutation.
    rng = np.random.default_rng(1)
    own = rng.dirichlet(np.full(d, 0.1), size=k)
    z = zipf_background(d, rng)
    np.testing.assert_allclose(topics, (1 - b) * own + b * z)
    # Zipf: the word of rank r carries 1/r of the top word's mass.
    ranked = np.sort(z)[::-1]
    np.testing.assert_allclose(ranked[:5] / ranked[0], 1 / np.arange(1, 6))
    # background = 0 draws exactly what the function drew before the option existed.
    np.testing.assert_array_equal(sample_topics(k, d, np.random.default_rng(1)),
                                  np.random.default_rng(1).dirichlet(np.full(d, 0.1), size=k))
    with pytest.raises(ValueError, match="background must be in"):
        sample_topics(k, d, np.random.default_rng(1), background=1.0)


def test_lognormal_lengths_have_the_requested_mean_and_spread():
    n, mean = 200_000, 60.0
    x = sample_lengths(n, mean, np.random.default_rng(2), "lognormal")
    assert x.min() >= 3
    # Mean of a lognormal with E = 60, σ = 1: the floor at 3 and rounding move it by < 0.1; the sample mean's
    # standard error is 60·√(e^σ² − 1)/√n ≈ 0.17, so 5 standard errors ≈ 0.9.
    assert abs(x.mean() - mean) < 0.9 + 0.1
    # σ of log length (the floor and rounding bias it slightly down at this mean)
    assert abs(np.log(x).std() - LOGNORMAL_SIGMA) < 0.05
    with pytest.raises(ValueError, match="lengths must be one of"):
        sample_lengths(3, 10.0, np.random.default_rng(0), "uniform")


def test_semi_real_parameters_are_checked():
    with pytest.raises(ValueError, match="rows summing to 1"):
        sample_corpus(10, 5, 2, np.random.default_rng(0), topic_word=np.ones((2, 5)))


def test_make_corpus_text_shape_and_from_model(tmp_path, capsys):
    c = tmp_path / "c"
    assert main(["make-corpus", str(c), "--docs", "2000", "--vocab-size", "200", "--topics", "4",
                 "--background", "0.3", "--lengths", "lognormal", "--doc-length", "40"]) == 0
    params = json.loads((c / "truth" / "params.json").read_text())
    assert params["background"] == 0.3 and params["lengths"] == "lognormal" and params["topics"] == 4
    tw = np.load(c / "truth" / "topic_word.npy")
    # Every topic holds at least 30% of the background's mass on every word.
    assert (tw.min(axis=0) > 0).all()
    # A model's topics and α generate a semi-real corpus named by its vocabulary.
    beta = np.random.default_rng(3).dirichlet(np.full(50, 0.2), size=3)
    beta[0, 0] = -1e-4                                    # a spectral fit's small negative entry is clipped
    model = LDAModel(beta, np.array([0.2, 0.3, 0.5]), 1.0, "lda", [f"word{i}" for i in range(50)], {})
    model.save(tmp_path / "m")
    s = tmp_path / "s"
    assert main(["make-corpus", str(s), "--docs", "500", "--from-model", str(tmp_path / "m"), "--alpha0", "2"]) == 0
    truth = np.load(s / "truth" / "topic_word.npy")
    assert truth[0, 0] == 0 and np.allclose(truth.sum(axis=1), 1)
    np.testing.assert_allclose(np.load(s / "truth" / "alpha.npy"), [0.4, 0.6, 1.0])
    assert read_corpus(s, 50).shape == (500, 50)
    assert (s / "vocab.txt").read_text().split()[:2] == ["word0", "word1"]
    assert "the vocabulary of the model" in json.loads((s / "prepare.json").read_text())["vocab_source"]
    capsys.readouterr()
    assert main(["make-corpus", str(tmp_path / "x"), "--docs", "5", "--from-model", str(tmp_path / "m"),
                 "--topics", "3"]) == 2
    assert "--topics cannot be given with it" in capsys.readouterr().err
    assert main(["make-corpus", str(tmp_path / "y"), "--docs", "5"]) == 2
    assert "needs --vocab-size and --topics" in capsys.readouterr().err
