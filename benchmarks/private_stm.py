"""The private single-topic fit with and without its unmixing passes, on synthetic single-topic corpora.

For each corpus (``sample_corpus(..., model="stm")``) the non-private
spectral fit, then the private default of ``fit-lda --model stm`` (scan,
spectral stage, tail release when the working vocabulary is smaller than the
vocabulary, two unmixing passes with one-hot posterior modes:
:func:`distdp.lda.private.scalable.single_topic_posterior`) and the same with
``unmix=0`` (the spectral stage alone, the private single-topic fit before
the passes), at ε = 1 / 4 / 16, δ = 1e-6, with reproducible noise seeds;
scored by matched topic L1. A failed fit (the budget cannot be met) is
recorded as such.

Run: ``.venv/bin/python benchmarks/private_stm.py`` (≈ 3 min).
Writes ``benchmarks/results/private_stm.json``.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from distdp import api, lda
from distdp.lda.synthetic import sample_corpus
from distdp.api import ClusterOptions, PrivacyOptions

OUT = Path(__file__).resolve().parent / "results" / "private_stm.json"
#: (documents, vocabulary, topics, mean length, topic concentration, noise seeds)
CORPORA = [(100_000, 2000, 10, 100.0, 0.1, 1), (20_000, 1000, 5, 50.0, 0.1, 1), (10_000, 500, 5, 100.0, 0.1, 10),
           (100_000, 2000, 10, 30.0, 0.5, 1)]
EPS = (1.0, 4.0, 16.0)
DELTA = 1e-6


def l1_or_failure(counts, k, truth, **kwargs):
    """Matched L1 of a fit, or the name of the error of one that cannot be met."""
    try:
        return lda.matched_l1(api.fit_lda(counts, k, model="stm", progress=False, coherence=False, **kwargs,
                                          cluster=ClusterOptions(backend="local")).topic_word, truth)[0]
    except ValueError as err:
        return type(err).__name__


def main() -> None:
    rows = []
    for n, d, k, length, conc, seeds in CORPORA:
        c = sample_corpus(n, d, k, np.random.default_rng(7), model="stm", doc_length=length, topic_concentration=conc)
        spec = {"N": n, "d": d, "k": k, "doc_length": length, "topic_concentration": conc}
        rows.append({**spec, "fit": "non-private", "l1": l1_or_failure(c.counts, k, c.topic_word, seed=0)})
        print(rows[-1], flush=True)
        for eps in EPS:
            for unmix in (0, None):     # None: the default's passes (private_fit.DEFAULT_UNMIX)
                l1 = [l1_or_failure(c.counts, k, c.topic_word, seed=s,
                                    privacy=PrivacyOptions(epsilon=eps, delta=DELTA, reproducible=True, unmix=unmix))
                      for s in range(seeds)]
                rows.append({**spec, "fit": "private, spectral alone" if unmix == 0 else "private default",
                             "epsilon": eps, "delta": DELTA, "noise_seeds": seeds, "l1": l1})
                print(rows[-1], flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
