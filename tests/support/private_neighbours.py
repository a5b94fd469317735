"""Hypothesis strategies of neighbouring corpora for the private fit's sensitivity tests.

Shared by ``tests/lda/private/test_shard.py`` and ``test_scalable.py``; on the import path through
pytest's ``pythonpath`` setting (``pyproject.toml``), since the tests run with ``--import-mode=importlib``.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from hypothesis import strategies as st

from distdp.lda.private import scalable as lda_private
from distdp.lda.private.shard import PrivateShard

D = 7  # vocabulary of the property tests
K = 3


def csr(rows):
    """(n, D) CSR counts from a list of count vectors."""
    return sp.csr_matrix(np.asarray(rows, dtype=float).reshape(len(rows), D))


doc = st.lists(st.integers(0, 6), min_size=D, max_size=D)
adversarial = st.sampled_from([
    [9, 0, 0, 0, 0, 0, 0],          # every token on one word
    [3, 0, 0, 0, 0, 0, 0],          # the shortest usable document, one word
    [1, 1, 1, 0, 0, 0, 0],          # three distinct words
    [1, 1, 0, 0, 0, 0, 0],          # too short: contributes nothing
    [0, 0, 0, 0, 0, 0, 0],          # empty
    [40, 30, 0, 0, 0, 0, 0],        # long and concentrated
])
corpora = st.tuples(st.lists(doc, min_size=2, max_size=10), st.one_of(doc, adversarial),
                    st.integers(0, 9), st.integers(0, 2 ** 31 - 1))


def neighbours(data):
    """Two corpora that differ in one document (row ``i`` replaced), and a public seed."""
    rows, new, i, seed = data
    i %= len(rows)
    other = list(rows)
    other[i] = new
    return PrivateShard(csr(rows)), PrivateShard(csr(other)), np.random.default_rng(seed)


def public_scales(rng, scaled):
    """Word scales of an unmixing pass from public topics and frequencies (``None``: the unscaled pass;
    ``"support"``: 0 off a public support, as :func:`distdp.lda.private.scalable.pass_support` makes them)."""
    if not scaled:
        return None
    tw = rng.dirichlet(np.full(D, 0.3), size=K) * (rng.random((K, D)) > 0.3)   # zeros, as after thresholding
    S = lda_private.word_scales(tw, rng.normal(1.0, 1.0, D) * rng.dirichlet(np.full(D, 0.3)))
    return S * (rng.random((K, D)) > 0.5) if scaled == "support" else S
