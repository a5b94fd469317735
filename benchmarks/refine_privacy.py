"""Private refinement: NPMI and topic L1 vs ε, private spectral alone vs the private refinements.

At the same total (ε, δ = 1e-6): ``spectral`` (``--refine 0``) spends it all
on the spectral releases on all words; ``default`` is the private default of
``fit-lda --epsilon``: a scan release picks the working vocabulary (the
1,000 most frequent words, noisy), the spectral releases run on it, a tail
release unmixes the other words' topics, and two unmixing passes
re-estimate every word's topics; ``tail+EM`` (``--refine 2``, the former
default) runs 2 private EM iterations in place of the unmixing passes (the
refinement's releases share ``--refine-budget``; the defaults of
:mod:`distdp.lda.private.fit`, in μ², the Gaussian budget, which composes
exactly). Every document's term is clipped to Frobenius norm ≤ C
(sensitivity √2·C, C the 0.9 quantile of ‖x_n‖₂ read off the scan's noisy
histogram).

Corpora: synthetic (N = 200,000, d = 2,000, k = 10, α0 = 1, mean length 100;
L1 to the truth and NPMI on the corpus itself) and the real ``reuters``
sample of benchmarks/refine_quality.py (395 articles, k = 10; NPMI), whose
size is far below what DP needs at these ε: its fits mostly fail with the
"budget cannot be met" error, which is the correct outcome and is recorded.
NPMI is computed on the training corpus for the benchmark only (a private
fit would not release it). Noise is seeded (reproducible, not private).

Run: ``.venv/bin/python benchmarks/refine_privacy.py``
Writes ``benchmarks/results/refine_privacy.{json,png}``.
"""
from __future__ import annotations

import json
import runpy
import time
from pathlib import Path

import numpy as np

from distdp import api, lda
from distdp.lda.synthetic import sample_corpus
from distdp.api import ClusterOptions, PrivacyOptions

HERE = Path(__file__).resolve().parent
EPS = [2.0, 4.0, 8.0, 16.0, 32.0]
DELTA = 1e-6
#: Method → (refine, unmix) arguments of fit_lda (None: the private default).
METHODS = {"spectral": (0, None), "default": (None, None), "tail+EM": (2, None)}


def corpora():
    c = sample_corpus(200_000, 2000, 10, np.random.default_rng(11), alpha0=1.0)
    yield "synthetic", c.counts, 10, c.topic_word
    X, _vocab, _truth = runpy.run_path(str(HERE / "refine_quality.py"))["load"]("reuters")[:3]
    yield "reuters", X, 10, None


def one(X, k, eps, refine, unmix, seed):
    return api.fit_lda(X, k, refine=refine, seed=seed, progress=False, coherence=False,
                       privacy=PrivacyOptions(epsilon=eps, delta=DELTA, unmix=unmix, reproducible=True),
                       cluster=ClusterOptions(backend="local"))


def main() -> None:
    rows = []
    for name, X, k, truth in corpora():
        base = api.fit_lda(X, k, seed=0, progress=False, refiner="em", cluster=ClusterOptions(backend="local"))
        rows.append({"corpus": name, "method": "non-private spectral", "epsilon": None,
                     "npmi": base.info["coherence"]["mean"],
                     "l1": None if truth is None else float(lda.matched_l1(base.topic_word, truth)[0])})
        print(rows[-1], flush=True)
        for eps in EPS:
            for method, (refine, unmix) in METHODS.items():
                t0 = time.perf_counter()
                row = {"corpus": name, "method": method, "epsilon": eps}
                try:
                    m = one(X, k, eps, refine, unmix, int(eps * 10))
                    row["npmi"] = float(api.coherence(m, X, cluster=ClusterOptions(backend="local"))["mean"])
                    row["l1"] = None if truth is None else float(lda.matched_l1(m.topic_word, truth)[0])
                    row["epsilon_certified"] = m.info["privacy"]["epsilon"]
                    row.update({p: m.info["parameters"][p] for p in ("refine", "unmix", "refine_budget")})
                except ValueError as err:
                    row["failed"] = str(err)[:160]
                row["seconds"] = time.perf_counter() - t0
                rows.append(row)
                print(row, flush=True)
    out = HERE / "results"
    (out / "refine_privacy.json").write_text(json.dumps({"delta": DELTA, "working_vocab": 1000, "rows": rows},
                                                       indent=1) + "\n")
    plot(rows, out / "refine_privacy.png")


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    panels = [("synthetic", "l1", "topic L1 (synthetic)"), ("synthetic", "npmi", "NPMI (synthetic)"),
              ("reuters", "npmi", "NPMI (reuters)")]
    for ax, (corpus, key, title) in zip(axes, panels):
        for method in METHODS:
            pts = [(r["epsilon"], r[key]) for r in rows if r["corpus"] == corpus and r["method"] == method
                   and r.get(key) is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=method)
        base = [r[key] for r in rows if r["corpus"] == corpus and r["method"] == "non-private spectral"]
        if base and base[0] is not None:
            ax.axhline(base[0], color="k", ls="--", label="non-private")
        ax.set_xscale("log")
        ax.set_xlabel("total ε (δ = 1e-6)")
        ax.set_title(title)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
