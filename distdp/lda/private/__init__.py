"""The differentially private spectral LDA fit: a layer over the stages of :mod:`distdp.lda`.

- :mod:`~distdp.lda.private.scalable`: clipping, sensitivities and release plan
  of the scalable mechanisms (private whitening, noisy whitened tensor or power
  iterations, private EM);
- :mod:`~distdp.lda.private.dense`: the papers' small-vocabulary mechanisms on
  dense moments (configurations 1–4, AGN, AVN);
- :mod:`~distdp.lda.private.single_topic`: AGN, AVN and DP-TPM on the
  single-topic model (Imtiaz & Sarwate 2018);
- :mod:`~distdp.lda.private.shard`: the per-shard clipped sums;
- :mod:`~distdp.lda.private.pipeline`: the coordinator (noise once per release);
- :mod:`~distdp.lda.private.fit`: budget, mechanism choice, ledger and report.

The generic privacy core (mechanisms, accounting, ledger) is :mod:`distdp.privacy`.
"""
