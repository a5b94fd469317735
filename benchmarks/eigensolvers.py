"""LOBPCG against Lanczos (ARPACK) for the whitening of corpora fitted in process.

    .venv/bin/python benchmarks/eigensolvers.py            # ≈ 3 min on 2 cores
    .venv/bin/python benchmarks/eigensolvers.py --corpora sms lee --k 10

For each real corpus of ``benchmarks/corpora.py`` (prepared as
``topic_quality.py`` prepares them: 5,000-word vocabulary, 2 parquet files,
the in-process backend) and each k, the spectral fit (``refine=0``) with
``SolverOptions(eigensolver="lobpcg")`` and with ``"lanczos"``, ``--runs``
times each (alternating; the whitening's seconds as ``model.json`` reports
them, median), and once with Lanczos to ``eig_tol=1e-10`` as the reference:
each solver's topics are scored by matched L1 against that reference's (both
solvers stop at the default relative residual 10⁻³). Also recorded: the
products with M2 each made, and the corpus's product cost
(``nonzeros + LANCZOS_DOCUMENT_COST·documents``), which
``eigensolver="auto"`` compares with ``LANCZOS_MAX_PRODUCT_COST``.

Writes ``benchmarks/results/eigensolvers.json`` and prints a Markdown table
(docs/benchmarks/speed.md#lanczos-in-process).
"""
from __future__ import annotations

import argparse
import json
import runpy
import statistics
import tempfile
import types
from pathlib import Path

import numpy as np

from distdp.api import ClusterOptions, SolverOptions, fit_lda
from distdp.io.corpus import write_corpus
from distdp.lda import matched_l1, pipeline

HERE = Path(__file__).resolve().parent
corpora = types.SimpleNamespace(**runpy.run_path(str(HERE / "corpora.py")))
CORPORA = ("newsgroups", "lee", "parlspeech", "newsarticles", "headlines", "sms", "questions", "healthtweets")
SOLVERS = ("lobpcg", "lanczos")


def fit(corpus_dir: Path, out: Path, k: int, eigensolver: str, tol: float | None = None):
    """The spectral fit alone, in process, with ``eigensolver``: ``(topic_word, whitening s, products)``."""
    m = fit_lda(str(corpus_dir), k, seed=0, out=str(out), refine=0, coherence=False, progress=False, overwrite=True,
                solver=SolverOptions(eigensolver=eigensolver, eig_tol=tol), cluster=ClusterOptions(backend="local"))
    return np.asarray(m.topic_word), float(m.info["timings_s"]["whitening"]), int(m.info["whitening"]["m2_products"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpora", nargs="+", default=list(CORPORA))
    ap.add_argument("--k", nargs="+", type=int, default=[10, 20, 50])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "results" / "eigensolvers.json"))
    args = ap.parse_args()
    rows = []
    for name in args.corpora:
        prep = corpora.prepare(name)
        cost = int(prep.counts.nnz + pipeline.LANCZOS_DOCUMENT_COST * prep.counts.shape[0])
        with tempfile.TemporaryDirectory() as tmp:
            corpus_dir = write_corpus(Path(tmp) / "corpus", prep.counts, n_shards=2, vocab=prep.vocab, overwrite=True)
            fit(corpus_dir, Path(tmp) / "warm", 10, "lobpcg")                    # imports, caches
            for k in args.k:
                reference = fit(corpus_dir, Path(tmp) / "ref", k, "lanczos", 1e-10)[0]
                seconds = {s: [] for s in SOLVERS}
                result = {}
                for _ in range(args.runs):
                    for s in SOLVERS:
                        topic_word, secs, products = fit(corpus_dir, Path(tmp) / s, k, s)
                        seconds[s].append(secs)
                        result[s] = (topic_word, products)
                row = {"corpus": name, "k": k, "documents": int(prep.counts.shape[0]), "nonzeros": int(prep.counts.nnz),
                       "product_cost": cost, "auto": pipeline.auto_eigensolver(prep.counts.nnz, prep.counts.shape[0])}
                for s in SOLVERS:
                    row[s] = {"whitening_s": statistics.median(seconds[s]), "runs_s": seconds[s],
                              "products": result[s][1], "l1_to_reference": matched_l1(result[s][0], reference)[0]}
                rows.append(row)
                print(json.dumps(row), flush=True)
    Path(args.out).write_text(json.dumps({"rows": rows, "runs": args.runs}, indent=1))
    print("\n| corpus | k | product cost | LOBPCG s (products) | Lanczos s (products) | ratio | L1 to the reference, "
          "LOBPCG / Lanczos |\n|---|---|---|---|---|---|---|")
    for r in rows:
        a, b = r["lobpcg"], r["lanczos"]
        print(f"| {r['corpus']} | {r['k']} | {r['product_cost']:,} | {a['whitening_s']:.3f} ({a['products']}) | "
              f"{b['whitening_s']:.3f} ({b['products']}) | {a['whitening_s'] / b['whitening_s']:.2f}× | "
              f"{a['l1_to_reference']:.4f} / {b['l1_to_reference']:.4f} |")


if __name__ == "__main__":
    main()
