"""Spectral LDA and the single-topic model, stage by stage (Anandkumar et al. 2012).

The stages, in the order a fit runs them:

- :mod:`~distdp.lda.shard`: one shard's documents (CSR) and its per-shard sums;
- :mod:`~distdp.lda.moments`: the unbiased moment estimators and their products;
- :mod:`~distdp.lda.whitening`: the top-k eigenpairs of M2 and the whitening matrix;
- the whitened tensor's decomposition (:mod:`distdp.tensor.power`);
- :mod:`~distdp.lda.recovery`: topics and α from the eigenpairs;
- :mod:`~distdp.lda.refine`: batch variational EM and the E-step;
- :mod:`~distdp.lda.metrics`: topic coherence and diversity;
- :mod:`~distdp.lda.model`: the fitted :class:`LDAModel`;
- :mod:`~distdp.lda.pipeline`: the coordinator that runs the stages over a backend's shards;
- :mod:`~distdp.lda.private`: the differentially private fit, a layer over these stages.
"""
from distdp.lda.model import MODELS, LDAModel, validate_fit_params
from distdp.lda.recovery import clip_normalise, fill_topics, matched_l1, recover_parameters

__all__ = ["MODELS", "LDAModel", "clip_normalise", "fill_topics", "matched_l1", "recover_parameters",
           "validate_fit_params"]
