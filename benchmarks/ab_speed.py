"""Stage times of the default fit on two checkouts, run alternately on the same corpora: a speed change's ratio.

A change meant to be faster (not bit-identical: :mod:`identity` checks
those) is measured here against the commit before it, in one run on one
machine, so that the machine's drift hits both sides alike::

    git worktree add /tmp/base <old commit>
    .venv/bin/python benchmarks/ab_speed.py --base /tmp/base --out benchmarks/results/ab_speed.json

For every corpus and k, each side fits ``--runs`` times in its own fresh
process (``PYTHONPATH`` set to the side's checkout, this virtual
environment), the sides alternating run by run; each process fits once
first to load the compiled sampler, then times ``fit_lda`` with the
library's defaults (seed 0; in process, as ``topic_quality.py`` runs it).
Reported per row: the base's commit, the median of each stage of
``model.json``'s ``timings_s`` per side, the ratio base/new of the totals,
and the matched topic L1 between the two sides' topics (the same seed: 0
where the change keeps the arithmetic, else how far it moved the topics).

Corpora: the real ones of :mod:`corpora` (``--corpora``), and two
synthetic LDA corpora of 150 tokens per document, spectral fit only (the
whitening's scale cases, as in ``precision.py``): ``bg0.3``, 200,000
documents, d = 20,000, k = 50, with a shared Zipf background of 0.3; and
``d50k`` (not run by default), 150,000 documents, d = 50,000, k = 100.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "results" / "ab_speed.json"

#: One side's fit, run in a fresh process: prints the timings and writes the topics.
CHILD = r"""
import json, sys
import numpy as np
sys.path.insert(0, {bench!r})
from distdp.api import fit_lda
name, k, topics_out, synthetic = {name!r}, {k}, {topics!r}, {synthetic!r}
if synthetic:                                                    # a corpus of SYNTHETIC: the spectral fit alone
    import scipy.sparse as sp
    counts, options = sp.load_npz(synthetic), dict(refine=0)
else:
    import corpora
    counts, options = corpora.prepare(name).counts, {{}}
fit_lda(counts[:200], min(k, 5), seed=1, progress=False, coherence=False)       # loads the compiled code
m = fit_lda(counts, k, seed=0, progress=False, coherence=False, **options)
np.save(topics_out, m.topic_word)
print("RESULT " + json.dumps({{s: float(v) for s, v in m.info["timings_s"].items() if isinstance(v, (int, float))}}))
"""


#: The synthetic corpora: name → (documents, vocabulary, topics, background).
SYNTHETIC = {"bg0.3": (200_000, 20_000, 50, 0.3), "d50k": (150_000, 50_000, 100, 0.0)}


def synthetic(name: str, work: Path) -> Path:
    """A corpus of :data:`SYNTHETIC`, written once (seed 0)."""
    path = work / f"{name}.npz"
    if not path.exists():
        import scipy.sparse as sp

        from distdp.lda.synthetic import sample_corpus

        n, d, k, background = SYNTHETIC[name]
        syn = sample_corpus(n, d, k, np.random.default_rng(0), alpha0=1.0, doc_length=150, background=background)
        sp.save_npz(path, sp.csr_matrix(syn.counts))
    return path


def run_side(checkout: Path, name: str, k: int, topics: Path, synthetic_path: Path | None) -> dict:
    """One fit on one side in a fresh process (``synthetic_path``: the corpus of a :data:`SYNTHETIC` name); its
    ``timings_s``."""
    code = CHILD.format(bench=str(HERE), name=name, k=k, topics=str(topics),
                        synthetic="" if synthetic_path is None else str(synthetic_path))
    env = dict(os.environ, PYTHONPATH=str(checkout))
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=tempfile.gettempdir(), capture_output=True,
                          text=True, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{checkout} on {name} k={k} failed:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def commit_of(checkout: Path) -> str:
    """The commit a checkout is at (its path where git cannot say)."""
    out = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or str(checkout)


def compare(base: Path, new: Path, name: str, k: int, runs: int, work: Path, synthetic_path: Path | None) -> dict:
    """Both sides on one corpus and k, alternating, ``runs`` times each."""
    from distdp import matched_l1

    times = {"base": [], "new": []}
    for r in range(runs):
        for side, checkout in (("base", base), ("new", new)) if r % 2 == 0 else (("new", new), ("base", base)):
            times[side].append(run_side(checkout, name, k, work / f"{side}.npy", synthetic_path))
    med = {side: {s: float(np.median([t[s] for t in ts])) for s in ts[0]} for side, ts in times.items()}
    l1 = float(matched_l1(np.load(work / "base.npy"), np.load(work / "new.npy"))[0])
    return {"corpus": name, "k": k, "base": commit_of(base), "runs": runs, "median_s": med, "ratio": med["base"]["total"] / med["new"]["total"],
            "topic_l1_between": l1, "all_s": times}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, type=Path, help="the old checkout (a git worktree)")
    ap.add_argument("--new", type=Path, default=ROOT, help="the new checkout (default: this one)")
    ap.add_argument("--corpora", default="newsgroups,lee,parlspeech,newsarticles,headlines,sms,questions,"
                    "healthtweets,bg0.3")
    ap.add_argument("--k", default="10,20,50")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=OUT, help="its rows replace the file's rows of the same corpus and k")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp())
    rows = []
    for name in args.corpora.split(","):
        path = synthetic(name, work) if name in SYNTHETIC else None
        for k in ([SYNTHETIC[name][2]] if name in SYNTHETIC else [int(x) for x in args.k.split(",")]):
            row = compare(args.base.resolve(), args.new.resolve(), name, k, args.runs, work, path)
            rows.append(row)
            b, n = row["median_s"]["base"], row["median_s"]["new"]
            print(f"{name:>13} k={k:<3} total {b['total']:7.2f} → {n['total']:7.2f} s ({row['ratio']:.2f}×)  "
                  f"whitening {b['whitening']:6.2f} → {n['whitening']:6.2f}  "
                  f"refine {b.get('refine', 0):6.2f} → {n.get('refine', 0):6.2f}  L1 {row['topic_l1_between']:.3f}",
                  flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = {(r["corpus"], r["k"]) for r in rows}
    kept = [r for r in json.loads(args.out.read_text())["rows"] if (r["corpus"], r["k"]) not in done] \
        if args.out.exists() else []
    args.out.write_text(json.dumps({"rows": kept + rows}, indent=1))


if __name__ == "__main__":
    main()
