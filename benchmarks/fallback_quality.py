"""Fits of corpora too short for the spectral stage: every document cut to its first 2 tokens.

The spectral stage needs k + 1 documents of at least 3 tokens; on a corpus of
one- and two-word documents (queries, tags, titles cut short) a refined fit
starts from topics split from the word frequencies
(:func:`distdp.lda.pipeline.frequency_start`) and runs
:data:`distdp.lda.pipeline.FALLBACK_SWEEPS` Gibbs sweeps. This measures that
start against tomotopy (200 and 1,000 iterations, 2 threads) and
scikit-learn's batch VB (10 iterations), on the real corpora of
``topic_quality.py`` cut to 2 tokens a document, for several sweep counts::

    .venv/bin/python benchmarks/fallback_quality.py            # ≈ 10 min; results/fallback_quality.json

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


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpora", default=",".join(CORPORA))
    ap.add_argument("--k", default=",".join(map(str, KS)))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=tq.RESULTS / "fallback_quality.json")
    args = ap.parse_args(argv)
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
