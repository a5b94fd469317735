"""How many Gibbs sweeps the default's quality needs on the real corpora: NPMI after fewer sweeps than 150.

    .venv/bin/python benchmarks/refine_sweeps.py                 # k = 20, 50 and 150 sweeps (≈ 4 min)
    .venv/bin/python benchmarks/refine_sweeps.py --sweeps 30,50,100,150 --k 10,20

The default fit (``fit_lda`` with no tuning argument but ``refine``) on every corpus of
``benchmarks/corpora.py`` (as ``topic_quality.py`` prepares them), seeds 0, 1, 2; NPMI of the top
10 words by document co-occurrence (:func:`distdp.coherence`), medians. The counterpart at scale,
topic L1 against the truth every 10 sweeps, is ``scale.py --refine-trace``.
Writes ``benchmarks/results/refine_sweeps.json``.
"""
from __future__ import annotations

import argparse
import json
import runpy
import types
from pathlib import Path

import numpy as np

import distdp

HERE = Path(__file__).resolve().parent
# The sibling script (not a package), run by file path as the other benchmarks load theirs.
corpora = types.SimpleNamespace(**runpy.run_path(str(HERE / "corpora.py")))
RESULTS = HERE / "results" / "refine_sweeps.json"
SEEDS = (0, 1, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sweeps", default="50,150", help="comma-separated sweep counts")
    ap.add_argument("--k", default="20", help="comma-separated topic counts")
    ap.add_argument("--corpora", default=",".join(corpora.DEFAULT))
    a = ap.parse_args()
    sweeps, ks = [int(s) for s in a.sweeps.split(",")], [int(k) for k in a.k.split(",")]
    rows = []
    for name in a.corpora.split(","):
        prepared = corpora.prepare(name)
        for k in ks:
            row = {"corpus": name, "k": k, "tokens": int(prepared.counts.sum()), "npmi": {}}
            for n in sweeps:
                vals = [float(distdp.coherence(distdp.fit_lda(prepared.counts, k, seed=s, refine=n, progress=False,
                                                               coherence=False), prepared.counts)["mean"])
                        for s in SEEDS]
                row["npmi"][n] = {"seeds": vals, "median": float(np.median(vals))}
            rows.append(row)
            print(f"{name:13s} k={k:3d} " + "  ".join(f"{n} sweeps {row['npmi'][n]['median']:+.3f}" for n in sweeps),
                  flush=True)
    RESULTS.write_text(json.dumps({"what": "median NPMI over seeds 0-2 of the default fit after each number of "
                                           "Gibbs sweeps", "rows": rows}, indent=1))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
