"""The private LDA default at k = 50: the working vocabulary's cap keeps the whitening dense.

The default working vocabulary was ``min(d, 100·k)`` words, so from k = 41 on it
passed ``lda_private.DENSE_WHITENING_MAX_WORDS`` (4,000) and the whitening fell
to the power form (7 noisy products with M2 instead of one noisy M2). It is now
``min(d, 100·k, 4000)``. On one synthetic corpus (``sample_corpus(N, d, k,
rng(5), alpha0 = 1, doc_length = 150)``: N = 2·10⁵, d = 10⁴, k = 50), the
private default of ``fit-lda`` at ε = 4 / 8 / 16 (δ = 1e-6, reproducible noise
seed 0), as shipped and with the previous default's working vocabulary
(``working_vocab = 5000`` with the power form, which ``auto`` then chose), against the non-private spectral
fit. Scored by matched topic L1; a fit whose budget cannot be met is recorded
with the check that stopped it.

Run: ``.venv/bin/python benchmarks/private_large_k.py`` (≈ 30 min).
Writes ``benchmarks/results/private_large_k.json``.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from distdp import api, lda
from distdp.lda.synthetic import sample_corpus
from distdp.api import ClusterOptions, PrivacyOptions

OUT = Path(__file__).resolve().parent / "results" / "private_large_k.json"
N, D, K, ALPHA0, LENGTH = 200_000, 10_000, 50, 1.0, 150.0
EPS = (4.0, 8.0, 16.0)
DELTA = 1e-6
#: Fit name → the private arguments that differ from the default.
FITS = {"default (dense whitening on 4,000 words)": {},
        "previous default (power whitening on 100·k = 5,000 words)": {"working_vocab": 5000, "whitening": "power"}}


def fit_row(counts, truth: np.ndarray, eps: float, extra: dict) -> dict:
    """One private fit: its L1, working vocabulary and whitening form, or the check that stopped it."""
    t0 = time.time()
    try:
        m = api.fit_lda(counts, K, alpha0=ALPHA0, progress=False, coherence=False, seed=0,
                        privacy=PrivacyOptions(epsilon=eps, delta=DELTA, reproducible=True, **extra),
                        cluster=ClusterOptions(backend="local"))
    except ValueError as err:
        return {"l1": None, "failed": str(err).split(". Use")[0], "seconds": time.time() - t0}
    return {"l1": float(lda.matched_l1(m.topic_word, truth)[0]), "working_vocab": m.info["parameters"]["working_vocab"],
            "seconds": time.time() - t0}


def main() -> None:
    c = sample_corpus(N, D, K, np.random.default_rng(5), alpha0=ALPHA0, doc_length=LENGTH)
    t0 = time.time()
    base = api.fit_lda(c.counts, K, alpha0=ALPHA0, progress=False, coherence=False, seed=0, refiner="em",
                       cluster=ClusterOptions(backend="local"))
    rows = [{"fit": "non-private spectral", "epsilon": None,
             "l1": float(lda.matched_l1(base.topic_word, c.topic_word)[0]), "seconds": time.time() - t0}]
    print(f"non-private spectral: L1 {rows[0]['l1']:.4f}", flush=True)
    for name, extra in FITS.items():
        for eps in EPS:
            rows.append({"fit": name, "epsilon": eps, **fit_row(c.counts, c.topic_word, eps, extra)})
            r = rows[-1]
            print(f"{name}, ε = {eps:g}: " + (f"L1 {r['l1']:.4f}" if r["l1"] is not None else f"failed: {r['failed']}"),
                  flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"N": N, "d": D, "k": K, "alpha0": ALPHA0, "doc_length": LENGTH, "delta": DELTA,
                               "rows": rows}, indent=1))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
