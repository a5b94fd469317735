"""The shards' M2 products in float32 against float64: whitening time and topics, same corpus and seed.

For each corpus, the non-private spectral fit (``refine=0``: the stage the
products dominate) with ``SolverOptions(precision="float64")`` at seeds 0 and
1 and with ``precision="float32"`` at seed 0, in process (``--local``, the
shards run one after another, so the stage times are CPU times of the
products). Reported: the whitening stage's seconds and the products it made,
the float32/float64 time ratio, matched topic L1 to the truth (synthetic
corpora) and between the fits: float32 against float64 at the same seed,
and float64 seed 1 against seed 0 (the solver's own spread, from its test
block and power-method starts).

Corpora, 150 tokens per document: LDA topics with a shared Zipf-law
background of 0.3 (text-shaped, ``--background 0.3``), N = 200,000,
d = 20,000, k = 50; ``make-corpus``'s topics (no background), N = 150,000,
d = 50,000, k = 100 (with background 0.3 at this shape the float64 spectral
stage supported 2 of the 100 topics, and the fit filled the rest by EM: no
test of the products); and documents drawn
from topics fitted to Reuters (``--from-model``, d = 4,258, k = 20) at
N = 100,000.

Run: ``.venv/bin/python benchmarks/precision.py`` (≈ 10 min on 2 cores).
Writes ``benchmarks/results/precision.json``.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from lda import datasets as reuters      # the PyPI lda package's bundled Reuters sample

from distdp import api, lda
from distdp.api import ClusterOptions, SolverOptions
from distdp.lda.synthetic import sample_corpus

OUT = Path(__file__).resolve().parent / "results" / "precision.json"
#: (name, documents, vocabulary, topics, mean length, background)
CORPORA = [("bg0.3 d=20k k=50", 200_000, 20_000, 50, 150.0, 0.3),
           ("bg0 d=50k k=100", 150_000, 50_000, 100, 150.0, 0.0)]


def fit(counts, k: int, precision: str, seed: int):
    """One spectral fit in process; the model and its wall time."""
    t0 = time.perf_counter()
    m = api.fit_lda(counts, k, alpha0=1.0, refine=0, seed=seed, progress=False, coherence=False,
                    solver=SolverOptions(precision=precision), cluster=ClusterOptions(backend="local", workers=2))
    return m, time.perf_counter() - t0


def row(name: str, counts, k: int, truth) -> dict:
    """The three fits of one corpus."""
    a, ta = fit(counts, k, "float64", 0)
    b, tb = fit(counts, k, "float32", 0)
    c, _ = fit(counts, k, "float64", 1)
    out = {"corpus": name, "n_docs": counts.shape[0], "vocab_size": counts.shape[1], "k": k, "nnz": int(counts.nnz),
           "whitening_s": {"float64": a.info["timings_s"]["whitening"], "float32": b.info["timings_s"]["whitening"]},
           "m2_products": {"float64": a.info["whitening"]["m2_products"], "float32": b.info["whitening"]["m2_products"]},
           "fit_s": {"float64": ta, "float32": tb},
           "l1_float32_vs_float64": float(lda.matched_l1(b.topic_word, a.topic_word)[0]),
           "l1_seed1_vs_seed0": float(lda.matched_l1(c.topic_word, a.topic_word)[0])}
    if truth is not None:
        out["l1_truth"] = {"float64": float(lda.matched_l1(a.topic_word, truth)[0]),
                           "float32": float(lda.matched_l1(b.topic_word, truth)[0])}
    w = out["whitening_s"]
    out["whitening_ratio"] = w["float32"] / w["float64"]
    print(json.dumps(out), flush=True)
    return out


def reuters_counts(n: int, rng: np.random.Generator):
    """Documents drawn from topics fitted to Reuters (k = 20), as ``make-corpus --from-model`` does."""
    X = sp.csr_matrix(reuters.load_reuters().astype(float))
    m = api.fit_lda(X, 20, seed=0, progress=False, coherence=False, cluster=ClusterOptions(backend="local"))
    c = sample_corpus(n, m.topic_word.shape[1], 20, rng, topic_word=m.topic_word, alpha=m.alpha, doc_length=150.0)
    return c.counts, c.topic_word


def main() -> None:
    rows = []
    for name, n, d, k, length, bg in CORPORA:
        c = sample_corpus(n, d, k, np.random.default_rng(7), doc_length=length, background=bg)
        rows.append(row(name, c.counts, k, c.topic_word))
    counts, truth = reuters_counts(100_000, np.random.default_rng(8))
    rows.append(row("reuters-fitted topics d=4258 k=20", counts, 20, truth))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
