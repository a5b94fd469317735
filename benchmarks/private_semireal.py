"""Private LDA on real topic structure at DP scale: the default (unmixing passes) vs ``--refine 2``.

The real corpora shipped with the registry packages are far too small for DP
(``reuters``: 395 articles; every private fit correctly fails). Here their
structure is kept and only the size changed: 20 variational EM iterations on
``reuters`` (k = 10, d = 4,258, mean length 213) give topics; N = 200,000
documents are drawn from them (LDA, α0 = 1, mean length 213). Each private fit
(seeded noise: reproducible, not private) is scored by L1 to the generating
topics and by NPMI of its top words on the real ``reuters`` articles.

Run: ``.venv/bin/python benchmarks/private_semireal.py [--eps 2 8]`` (≈ 10 min).
Writes ``benchmarks/results/private_semireal.json``.
"""
from __future__ import annotations

import argparse
import json
import runpy
import time
from pathlib import Path

import numpy as np

from distdp import api, lda
from distdp.lda.synthetic import sample_corpus
from distdp.api import ClusterOptions, PrivacyOptions

HERE = Path(__file__).resolve().parent
DELTA, N = 1e-6, 200_000
METHODS = {"default (tail + unmixing passes)": None, "tail + 2 EM (--refine 2)": 2}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eps", type=float, nargs="+", default=[2.0, 8.0])
    args = ap.parse_args()
    X, vocab, _, k = runpy.run_path(str(HERE / "refine_quality.py"))["load"]("reuters")
    real = api.fit_lda(X, k, seed=0, progress=False, refine=20, vocab=vocab, refiner="em",
                       cluster=ClusterOptions(backend="local"))
    beta = np.maximum(real.topic_word, 0)
    beta /= beta.sum(axis=1, keepdims=True)
    length = float(np.asarray(X.sum(axis=1)).mean())
    c = sample_corpus(N, X.shape[1], k, np.random.default_rng(3), alpha0=1.0, doc_length=length, topic_word=beta)
    rows = [{"method": "generating topics", "npmi_reuters": real.info["coherence"]["mean"]}]
    print(rows[-1], flush=True)
    for eps in args.eps:
        for method, refine in METHODS.items():
            t0 = time.perf_counter()
            row = {"method": method, "epsilon": eps}
            try:
                m = api.fit_lda(c.counts, k, seed=int(eps), progress=False, refine=refine, coherence=False,
                                privacy=PrivacyOptions(epsilon=eps, delta=DELTA, reproducible=True),
                                cluster=ClusterOptions(backend="local"))
                row["l1"] = float(lda.matched_l1(m.topic_word, c.topic_word)[0])
                named = lda.LDAModel(m.topic_word, m.alpha, 0.0, "lda", vocab, {})
                row["npmi_reuters"] = float(api.coherence(named, X, cluster=ClusterOptions(backend="local"))["mean"])
            except ValueError as err:  # "the privacy budget cannot be met"
                row["failed"] = str(err)[:160]
            rows.append({**row, "seconds": time.perf_counter() - t0})
            print(rows[-1], flush=True)
    (HERE / "results" / "private_semireal.json").write_text(
        json.dumps({"N": N, "k": k, "delta": DELTA, "doc_length": length, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
