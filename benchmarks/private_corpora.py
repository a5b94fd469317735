"""The private LDA default on eight synthetic corpora, with the whitening's top-up as shipped or always made.

Each corpus is ``sample_corpus(N, d, k, rng(3), alpha0, doc_length, topic_concentration)``
with N = 10⁵, d = 2,000, k = 10, α0 = 1, 100 tokens per document and
Dirichlet(0.1) topic rows, except for one change per corpus (``CORPORA``):
the corpora on which every private default since the unmixing passes was
checked (docs/benchmarks/private-lda.md). For each, the private default of ``fit-lda``
at ε = 1 / 2 / 4 / 8 (δ = 1e-6, reproducible noise seed 0) and, with
``--always-topup``, the same with the whitening's second release always made
(``lda_private.WHITENING_TOPUP_SNR`` = ∞), which is the previous default in
distribution (one release at the whole share). Scored by matched topic L1,
with the first whitening release's eigenvalue-to-noise ratio and whether the
top-up was made (``model.json``'s ``corpus.whitening_topup``); a fit whose
budget cannot be met is recorded as such.

Run: ``.venv/bin/python benchmarks/private_corpora.py [--always-topup]``
(≈ 20 min each). Writes ``benchmarks/results/private_corpora.json`` (the
rows of both runs are kept, keyed by ``topup``).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from distdp import api, lda
from distdp.lda.private import scalable as lda_private
from distdp.lda.synthetic import sample_corpus
from distdp.api import ClusterOptions, PrivacyOptions

OUT = Path(__file__).resolve().parent / "results" / "private_corpora.json"
BASE = {"N": 100_000, "d": 2000, "k": 10, "alpha0": 1.0, "doc_length": 100.0, "topic_concentration": 0.1}
#: Name → the one setting that differs from BASE.
CORPORA = {"base": {}, "alpha0=3": {"alpha0": 3.0}, "30 tokens": {"doc_length": 30.0},
           "Dirichlet(0.5) rows": {"topic_concentration": 0.5}, "d=10^4": {"d": 10_000}, "k=5": {"k": 5},
           "alpha0=0.3": {"alpha0": 0.3}, "k=20": {"k": 20}}
EPS = (1.0, 2.0, 4.0, 8.0)
DELTA = 1e-6


def fit_row(counts, spec: dict, truth: np.ndarray, eps: float) -> dict:
    """One private default fit: its L1 (or the error's name) and the whitening's top-up record."""
    try:
        m = api.fit_lda(counts, spec["k"], alpha0=spec["alpha0"], progress=False, coherence=False, seed=0,
                        privacy=PrivacyOptions(epsilon=eps, delta=DELTA, reproducible=True),
                        cluster=ClusterOptions(backend="local"))
    except ValueError as err:
        return {"l1": type(err).__name__}
    return {"l1": float(lda.matched_l1(m.topic_word, truth)[0]), "whitening_topup": m.info["corpus"].get("whitening_topup")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--always-topup", action="store_true", help="always make the whitening's second release")
    args = ap.parse_args()
    if args.always_topup:
        lda_private.WHITENING_TOPUP_SNR = float("inf")
    mode = "always" if args.always_topup else "adaptive"
    rows = []
    for name, change in CORPORA.items():
        spec = {**BASE, **change}
        c = sample_corpus(spec["N"], spec["d"], spec["k"], np.random.default_rng(3), alpha0=spec["alpha0"],
                          doc_length=spec["doc_length"], topic_concentration=spec["topic_concentration"])
        for eps in EPS:
            rows.append({"corpus": name, **spec, "epsilon": eps, "delta": DELTA, "topup": mode,
                         **fit_row(c.counts, spec, c.topic_word, eps)})
            print(rows[-1], flush=True)
    old = json.loads(OUT.read_text())["rows"] if OUT.is_file() else []
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"rows": [r for r in old if r["topup"] != mode] + rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
