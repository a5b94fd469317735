"""The private whitening's three forms on a vocabulary above the dense limit: dense, matrix-free, power.

The dense and matrix-free forms make the same release (one noisy ``Σ g_n m2_n``,
Analyze Gauss): the first forms the d×d matrix (8·d² bytes per shard, a d×d
``eigh``), the second only multiplies it, regenerating its noise from a secret
seed for each product and finding the eigenpairs by LOBPCG. The power form
releases ``eig_iters + 1`` noisy products instead. On one synthetic corpus
(``sample_corpus(N, d, k, rng(5), alpha0 = 1, doc_length = 150)``: N = 2·10⁵,
d = 10⁴, k = 10), the private spectral fit on every word (``refine = 0,
unmix = 0``: the whitening's form is what differs) at ε = 2 / 4 / 8 (δ = 1e-6,
reproducible noise seed 0, one draw each), against the non-private spectral
fit. Per fit: matched topic L1 (or the check that stopped it), wall time, the
whitening's description (products made) and the peak of memory allocated
during the fit (``tracemalloc``: numpy's arrays included, the corpus not).

Run: ``.venv/bin/python benchmarks/private_whitening_forms.py`` (≈ 12 min).
Writes ``benchmarks/results/private_whitening_forms.json``.
"""
from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path

import numpy as np

from distdp import api, lda
from distdp.lda.synthetic import sample_corpus
from distdp.api import ClusterOptions, PrivacyOptions

OUT = Path(__file__).resolve().parent / "results" / "private_whitening_forms.json"
N, D, K, ALPHA0, LENGTH = 200_000, 10_000, 10, 1.0, 150.0
EPS = (2.0, 4.0, 8.0)
DELTA = 1e-6
FORMS = ("dense", "matrix-free", "power")


def fit_row(counts, truth: np.ndarray, **kwargs) -> dict:
    """One fit: L1 (or the failure), seconds, peak MiB allocated, the whitening's description."""
    tracemalloc.start()
    t0 = time.time()
    row: dict = {}
    try:
        m = api.fit_lda(counts, K, alpha0=ALPHA0, progress=False, coherence=False, seed=0, **kwargs,
                        cluster=ClusterOptions(backend="local"))
        row.update(l1=float(lda.matched_l1(m.topic_word, truth)[0]), whitening=m.info["corpus"].get("whitening"))
    except ValueError as err:
        row.update(l1=None, failed=str(err).split(". ")[0])
    row["seconds"] = time.time() - t0
    row["peak_mib"] = tracemalloc.get_traced_memory()[1] / 2 ** 20
    tracemalloc.stop()
    return row


def main() -> None:
    c = sample_corpus(N, D, K, np.random.default_rng(5), alpha0=ALPHA0, doc_length=LENGTH)
    rows = [{"fit": "non-private spectral", "epsilon": None, **fit_row(c.counts, c.topic_word, refiner="em")}]
    print(f"non-private: L1 {rows[0]['l1']:.4f}, {rows[0]['seconds']:.0f} s, {rows[0]['peak_mib']:.0f} MiB", flush=True)
    for eps in EPS:
        for form in FORMS:
            r = fit_row(c.counts, c.topic_word, refine=0,
                        privacy=PrivacyOptions(epsilon=eps, delta=DELTA, reproducible=True, unmix=0, whitening=form))
            rows.append({"fit": form, "epsilon": eps, **r})
            res = f"L1 {r['l1']:.4f} ({r['whitening']})" if r["l1"] is not None else f"failed: {r['failed']}"
            print(f"ε = {eps:g}, {form}: {res}, {r['seconds']:.0f} s, {r['peak_mib']:.0f} MiB", flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"N": N, "d": D, "k": K, "alpha0": ALPHA0, "doc_length": LENGTH, "delta": DELTA,
                               "rows": rows}, indent=1))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
