"""Fits of corpora too short for the spectral stage: every document cut to its first 2 tokens.

The spectral stage needs k + 1 documents of at least 3 tokens; on a corpus of
one- and two-word documents (queries, tags, titles cut short) a refined fit
starts from topics split from the word frequencies
(:func:`distdp.lda.pipeline.frequency_start`) and runs
:data:`distdp.lda.pipeline.FALLBACK_SWEEPS` Gibbs sweeps. This measures that
start against tomotopy (200 and 1,000 iterations, 2 threads) and
scikit-learn's batch VB (10 iterations), on the real corpora of
``topic_quality.py`` cut to 2 tokens a document, for several sweep counts::

    .venv/bin/python benchmarks/fallback_quality.py            # ≈ 8 min; results/fallback_quality.json
    .venv/bin/python benchmarks/fallback_quality.py --starts   # ≈ 2 min; results/fallback_starts.json

``--starts`` checks the rule that the fallback runs only where the spectral
stage cannot: on corpora cut to 3 and 4 tokens a document (where it can), the
default fit against the same fit forced to start from the word frequencies.

NPMI (top 10 words, document co-occurrence) is on the cut corpus, what a user
has; diversity is the distinct share of the top 25 words; seconds as in
``topic_quality.py``. Medians over seeds 0, 1, 2.
"""
from __future__ import annotations

import argparse
import json
import runpy
import tempfile
import types
from pathlib import Path

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
tq = types.SimpleNamespace(**runpy.run_path(str(HERE / "topic_quality.py"), run_name="topic_quality"))
CORPORA = ("sms", "headlines", "questions", "healthtweets", "newsarticles")
KS = (10, 20)
SWEEPS = (150, 300, 500, 1000)


def cut(prep, n_tokens: int = 2):
    """``prep`` with every document cut to its first ``n_tokens`` tokens (a Prepared of the same vocabulary)."""
    index = {w: j for j, w in enumerate(prep.vocab)}
    docs = [doc[:n_tokens] for doc in prep.docs]
    rows = np.repeat(np.arange(len(docs)), [len(d) for d in docs])
    cols = np.array([index[w] for d in docs for w in d], dtype=np.int64)
    counts = sp.csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(len(docs), len(prep.vocab)))
    counts.sum_duplicates()
    return tq.corpora.Prepared(f"{prep.name}-cut{n_tokens}", counts, prep.vocab, docs, prep.n_raw)


def compare_starts(corpora=("sms", "headlines"), lengths=(3, 4), ks=KS, n_runs: int = 3) -> list[dict]:
    """NPMI of the default fit (spectral start, its sweeps) and of the same fit forced to start from the word
    frequencies (``FALLBACK_SWEEPS``), on ``corpora`` cut to each of ``lengths`` tokens a document."""
    from distdp.api import ClusterOptions, fit_lda
    from distdp.lda import pipeline

    spectral = pipeline.fit_spectral

    def no_spectral(backend, vocab_size, params, rng, releases=None, progress=None):
        raise pipeline.TooFewDocuments(0, 0, params.k)

    rows = []
    for name in corpora:
        for n_tokens in lengths:
            prep = cut(tq.corpora.prepare(name), n_tokens)
            for k in ks:
                row = {"corpus": prep.name, "k": k}
                for start, fit in (("spectral", spectral), ("frequencies", no_spectral)):
                    pipeline.fit_spectral = fit
                    try:
                        row[start] = [tq.npmi(fit_lda(prep.counts, k, seed=seed, progress=False, coherence=False,
                                                      cluster=ClusterOptions(backend="local")).topic_word,
                                              prep.counts) for seed in range(n_runs)]
                    finally:
                        pipeline.fit_spectral = spectral
                rows.append(row)
                print(f"  {prep.name:16s} k={k:3d}  NPMI median: spectral start {np.median(row['spectral']):7.3f}  "
                      f"word frequencies {np.median(row['frequencies']):7.3f}", flush=True)
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpora", default=",".join(CORPORA))
    ap.add_argument("--k", default=",".join(map(str, KS)))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--starts", action="store_true", help="the spectral start against the fallback's, where both run")
    args = ap.parse_args(argv)
    if args.starts:
        rows = compare_starts(n_runs=args.runs)
        (args.out or tq.RESULTS / "fallback_starts.json").write_text(json.dumps(rows, indent=1))
        return
    args.out = args.out or tq.RESULTS / "fallback_quality.json"
    rows = []
    for name in args.corpora.split(","):
        prep = cut(tq.corpora.prepare(name))
        print(f"# {prep.name}: {prep.counts.shape[0]} documents, {prep.mean_tokens:.2f} tokens each", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            ctx = tq.Context(prep, Path(tmp))
            for k in map(int, args.k.split(",")):
                methods = {f"distdp-{s}": (tq.run_distdp, {"refine": s}) for s in SWEEPS}
                methods.update({m: tq.RUNNERS[m] for m in ("sklearn-batch", "tomotopy-200", "tomotopy-1000")})
                for method, (fn, arg) in methods.items():
                    runs = []
                    for seed in range(args.runs):
                        tw, sec = fn(ctx, k, seed, arg)
                        runs.append({"seed": seed, "npmi": tq.npmi(tw, prep.counts), "diversity": tq.diversity(tw),
                                     "seconds": sec})
                    ctx.tomotopy.clear() if method == "tomotopy-1000" else None
                    med = {key: float(np.median([r[key] for r in runs])) for key in ("npmi", "diversity", "seconds")}
                    rows.append({"corpus": prep.name, "docs": prep.counts.shape[0], "k": k, "method": method, **med,
                                 "runs": runs})
                    print(f"  k={k:3d} {method:14s} NPMI {med['npmi']:7.3f}  div {med['diversity']:.2f}  "
                          f"{med['seconds']:6.2f} s", flush=True)
                args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
