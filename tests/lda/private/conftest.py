"""Fixtures shared by the private fit's tests: the corpus most of them fit, and the pinned noise entropy."""
from __future__ import annotations

import numpy as np
import pytest

from distdp.lda.synthetic import sample_corpus
from distdp.privacy import mechanisms


@pytest.fixture(scope="session")
def corpus_p():
    """20,000 documents over 200 words, k = 5, α0 = 1 (mean length 100)."""
    return sample_corpus(20_000, 200, 5, np.random.default_rng(7), alpha0=1.0)


@pytest.fixture
def fixed_entropy(monkeypatch):
    """The private path (report "OS entropy") with its entropy pinned: at ε = 2 on ``corpus_p`` 1 of 40
    seeds drew tail-release noise that makes G indefinite (a correct "cannot be met" failure) with the
    power-method whitening, 0 of 40 with the dense one (the default here), so an unpinned run could
    fail rarely. Seed 0 fits with both."""
    monkeypatch.setattr(mechanisms, "private_generator", lambda: np.random.default_rng(0))
