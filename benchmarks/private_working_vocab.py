"""``--working-vocab auto`` against the default on topics fitted from real text, documents of a chosen length.

The restart on twice the words (docs/design/private-fit.md, *The working vocabulary's size*)
gains on the synthetic corpora (Dirichlet(0.1) topic rows) and lost on
``private_semireal.py``'s corpus, whose documents are twice as long. This
separates the two candidate causes: topics fitted on a real corpus
(20 variational EM iterations, as ``private_semireal.py``), N documents of
mean length ``--length`` drawn from them (LDA, α0 = 1), each private fit
(seeded noise: reproducible, not private) made with and without
``working_vocab="auto"`` at the same noise seed, scored by L1 to the
generating topics. The restart's record (probe ratio, whether it was made)
and the whitening's first-release ratio are kept with each row.

Run: ``.venv/bin/python benchmarks/private_working_vocab.py`` (≈ 2 h on 2 cores
for the default grid: two corpora of N = 10⁶, ε = 1 / 2 / 4 with noise seed 1,
and noise seed 2 where the change was largest; ≈ 5 min per fit). ``--source``,
``--length``, ``--n``, ``--eps`` and ``--seeds`` narrow it.
Writes ``benchmarks/results/private_working_vocab.json`` (rows of earlier
runs with other keys are kept).
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
OUT = HERE / "results" / "private_working_vocab.json"
DELTA = 1e-6
GRID = [("reuters", 1.0, 1), ("reuters", 2.0, 1), ("reuters", 4.0, 1), ("reuters", 4.0, 2),
        ("newsgroups", 1.0, 1), ("newsgroups", 1.0, 2), ("newsgroups", 2.0, 1), ("newsgroups", 4.0, 1)]


def real_topics(source: str):
    """(topics fitted on ``source`` by 20 variational EM iterations, k)."""
    X, vocab, _, k = runpy.run_path(str(HERE / "refine_quality.py"))["load"](source)
    real = api.fit_lda(X, k, seed=0, progress=False, refine=20, vocab=vocab, refiner="em",
                       cluster=ClusterOptions(backend="local"))
    beta = np.maximum(real.topic_word, 0)
    return beta / beta.sum(axis=1, keepdims=True), k


def fit_row(counts, truth, k: int, eps: float, seed: int, auto: bool) -> dict:
    """One reproducible private fit, default or ``working_vocab="auto"``: L1, the restart's record and the
    whitening's ratios (``first_release_ratio`` is None where the early rung was the whole whitening)."""
    t0 = time.perf_counter()
    m = api.fit_lda(counts, k, seed=seed, progress=False, coherence=False,
                    privacy=PrivacyOptions(epsilon=eps, delta=DELTA, reproducible=True,
                                           working_vocab="auto" if auto else None),
                    cluster=ClusterOptions(backend="local"))
    restart = m.info["corpus"].get("working_vocab_restart") or {}
    return {"l1": float(lda.matched_l1(m.topic_word, truth)[0]), "probe_ratio": restart.get("probe_ratio"),
            "restarted": restart.get("made"),
            "first_release_ratio": m.info["corpus"]["whitening_topup"]["first_release_ratio"],
            "early_ratio": m.info["corpus"]["whitening_topup"].get("early_ratio"),
            "seconds": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", nargs="+", default=["reuters", "newsgroups"])
    ap.add_argument("--length", type=float, default=100.0, help="mean document length")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--eps", type=float, nargs="+", help="default: the grid's")
    ap.add_argument("--seeds", type=int, nargs="+", help="noise seeds (default: the grid's)")
    args = ap.parse_args()
    old = json.loads(OUT.read_text())["rows"] if OUT.exists() else []
    rows = []
    for source in args.source:
        grid = [(e, s) for src, e, s in GRID if src == source]
        if args.eps or args.seeds:
            grid = [(e, s) for e in (args.eps or sorted({e for e, _ in grid}))
                    for s in (args.seeds or [1])]
        beta, k = real_topics(source)
        c = sample_corpus(args.n, beta.shape[1], k, np.random.default_rng(3), alpha0=1.0,
                          doc_length=args.length, topic_word=beta)
        for eps, seed in grid:
            key = {"source": source, "N": args.n, "doc_length": args.length, "epsilon": eps, "seed": seed}
            row = {**key, "default": fit_row(c.counts, c.topic_word, k, eps, seed, False),
                   "auto": fit_row(c.counts, c.topic_word, k, eps, seed, True)}
            row["change"] = row["auto"]["l1"] / row["default"]["l1"] - 1.0
            rows.append(row)
            print(json.dumps(row), flush=True)
    key_of = lambda r: (r["source"], r["N"], r["doc_length"], r["epsilon"], r["seed"])  # noqa: E731
    keys = {key_of(r) for r in rows}
    merged = sorted([r for r in old if key_of(r) not in keys] + rows, key=key_of)
    OUT.write_text(json.dumps({"delta": DELTA, "rows": merged}, indent=1) + "\n")


if __name__ == "__main__":
    main()
