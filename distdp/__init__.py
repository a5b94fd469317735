"""distdp: differentially private spectral topic models and tensor decompositions on Ray.

The spectral LDA entry point is :func:`fit_lda`; the fitted :class:`LDAModel`
saves to and loads from a directory.
"""
from distdp.api import fit_lda
from distdp.lda import LDAModel, matched_l1
from distdp.synthetic import SyntheticCorpus, sample_corpus

__all__ = ["fit_lda", "LDAModel", "matched_l1", "sample_corpus", "SyntheticCorpus"]
__version__ = "0.1.0"
