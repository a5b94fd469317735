"""Imtiaz & Sarwate (2018) Fig. 1: e_comp vs ε and vs N for AGN, AVN, DP-TPM, non-private, random.

Single-topic model, (D=10, K=5) and (D=50, K=10). The paper does not give
δ, the grids, w, the a_k or the document length; this script's choices:

- a_k ~ Dirichlet(0.1·1_D), w ~ Dirichlet(10·1_K), drawn once per (D, K) from
  seed 2018 and fixed ("predetermined"); each run draws a fresh corpus;
- document length 3 + Poisson(7) (mean 10; every document has ≥ 3 words);
- δ = 1e-5; ε ∈ {0.1, 0.3, 1, 3, 10} at N = 10⁵; N ∈ {10³, …, 3·10⁵} at ε = 1;
- the robust power method with its defaults (L = max(10, ⌈K ln 10K⌉), R = ⌈ln(K/10⁻⁶)⌉);
- DP-TPM: M2 noised as AGN at (ε/2, δ/2), then Wang–Anandkumar Alg. 3 on the
  whitened exact M3 at (ε/2, δ/2) with the sound replace-one-document
  sensitivity 2r³/N (r = max row norm of W), tight (PLD) calibration; and, as
  a labelled reproduction, the paper's ν with Δ = 2‖u‖∞²/N and the printed
  recipe (classical Gaussian + advanced composition), which is not a
  guarantee for the whitened tensor;
- a fit whose noisy M2 has σ_K ≤ 0 fails (no output): it is scored as the
  random-vector baseline of that run and counted in ``failures``.

Noise is seeded (reproducible experiment: every fit reports "not private").

Run: ``.venv/bin/python benchmarks/stm_agn_avn.py [--runs 10]``
Writes ``benchmarks/results/stm_agn_avn.{json,png}``.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from distdp.lda.private import single_topic as md
from distdp.lda.synthetic import sample_corpus

CONFIGS = [(10, 5), (50, 10)]
DELTA = 1e-5
EPS_GRID = [0.1, 0.3, 1.0, 3.0, 10.0]
N_AT_EPS = 100_000
N_GRID = [1_000, 3_000, 10_000, 30_000, 100_000, 300_000]
EPS_AT_N = 1.0
DOC_LENGTH = 10.0
TOPIC_CONCENTRATION = 0.1
METHODS = ["non-private", "agn", "avn", "dp-tpm", "dp-tpm-paper", "random"]
OUT = Path(__file__).resolve().parent / "results"


def truth(d: int, k: int):
    """The fixed (a_k, w) of a configuration."""
    rng = np.random.default_rng(2018 + d)
    return rng.dirichlet(np.full(d, TOPIC_CONCENTRATION), size=k), rng.dirichlet(np.full(k, 10.0))


def one_point(d, k, n_docs, epsilons, run, topics, weights):
    """e_comp of every method at every ε in ``epsilons`` for one corpus; dict method → list over ε."""
    rng = np.random.default_rng([d, n_docs, run])
    corpus = sample_corpus(n_docs, d, k, rng, model="stm", doc_length=DOC_LENGTH, topic_word=topics,
                           alpha=weights)
    mom = md.stm_moments(corpus.counts)
    rand = md.e_comp(md.random_vectors(k, d, rng), topics)
    out = {m: [] for m in METHODS}
    fails = {m: [] for m in METHODS}
    try:
        base = md.e_comp(md.non_private(mom, k, rng=rng).topic_word, topics)
    except ValueError:
        base = None
    for eps in epsilons:
        out["random"].append(rand)
        fails["random"].append(0)
        out["non-private"].append(rand if base is None else base)
        fails["non-private"].append(int(base is None))
        for m in ("agn", "avn", "dp-tpm", "dp-tpm-paper"):
            kw = {}
            name = m
            if m == "dp-tpm-paper":
                name, kw = "dp-tpm", {"sensitivity": "paper", "accounting": "paper"}
            try:
                res = md.fit_stm(mom, k, name, epsilon=eps, delta=DELTA, rng=rng, reproducible=True, **kw)
                out[m].append(md.e_comp(res.topic_word, topics))
                fails[m].append(0)
            except ValueError as err:
                if "cannot whiten" not in str(err):
                    raise
                out[m].append(rand)
                fails[m].append(1)
    return out, fails


def sweep(d, k, runs, grid_kind):
    topics, weights = truth(d, k)
    if grid_kind == "epsilon":
        xs, points = EPS_GRID, [(N_AT_EPS, EPS_GRID)]
    else:
        xs, points = N_GRID, [(n, [EPS_AT_N]) for n in N_GRID]
    vals = {m: np.zeros((runs, len(xs))) for m in METHODS}
    nfail = {m: np.zeros(len(xs), dtype=int) for m in METHODS}
    for j, (n_docs, epsilons) in enumerate(points):
        for r in range(runs):
            out, fails = one_point(d, k, n_docs, epsilons, r, topics, weights)
            for m in METHODS:
                if grid_kind == "epsilon":
                    vals[m][r, :] = out[m]
                    nfail[m] += np.array(fails[m])
                else:
                    vals[m][r, j] = out[m][0]
                    nfail[m][j] += fails[m][0]
    return {"x": xs, "x_name": "epsilon" if grid_kind == "epsilon" else "N",
            "fixed": {"N": N_AT_EPS} if grid_kind == "epsilon" else {"epsilon": EPS_AT_N},
            "mean": {m: vals[m].mean(axis=0).tolist() for m in METHODS},
            "std": {m: vals[m].std(axis=0).tolist() for m in METHODS},
            "failures": {m: nfail[m].tolist() for m in METHODS}}


STYLE = {"non-private": ("k", "-", "o"), "agn": ("tab:blue", "-", "s"), "avn": ("tab:orange", "-", "^"),
         "dp-tpm": ("tab:red", "-", "v"), "dp-tpm-paper": ("tab:red", ":", "x"), "random": ("0.5", "--", "")}
LABEL = {"non-private": "non-private", "agn": "AGN", "avn": "AVN", "dp-tpm": "DP-TPM (sound Δ=2r³/N)",
         "dp-tpm-paper": "DP-TPM (paper Δ, not a guarantee)", "random": "random vectors"}


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(CONFIGS), figsize=(5.2 * len(CONFIGS), 8), squeeze=False)
    for col, (d, k) in enumerate(CONFIGS):
        for row, kind in enumerate(("epsilon", "N")):
            ax = axes[row, col]
            res = results[f"D{d}_K{k}"][kind]
            for m in METHODS:
                c, ls, mk = STYLE[m]
                ax.errorbar(res["x"], res["mean"][m], yerr=res["std"][m], color=c, ls=ls, marker=mk, ms=4,
                            capsize=2, lw=1.3, label=LABEL[m])
            ax.set_xscale("log")
            ax.set_xlabel("ε" if kind == "epsilon" else "N")
            ax.set_ylabel("e_comp")
            fixed = f"N = {N_AT_EPS:,}" if kind == "epsilon" else f"ε = {EPS_AT_N:g}"
            ax.set_title(f"D = {d}, K = {k}, {fixed}, δ = {DELTA:g}")
            ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    fig.suptitle("Imtiaz & Sarwate Fig. 1 on the single-topic model (mean ± std over runs)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    t0 = time.perf_counter()
    results = {}
    for d, k in CONFIGS:
        results[f"D{d}_K{k}"] = {kind: sweep(d, k, args.runs, kind) for kind in ("epsilon", "N")}
        print(f"D={d} K={k} done at {time.perf_counter() - t0:.0f}s", flush=True)
    meta = {"paper": "Imtiaz & Sarwate 2018, Fig. 1", "runs": args.runs, "delta": DELTA, "eps_grid": EPS_GRID,
            "N_at_eps": N_AT_EPS, "N_grid": N_GRID, "eps_at_N": EPS_AT_N, "doc_length": "3 + Poisson(7)",
            "topics": f"a_k ~ Dirichlet({TOPIC_CONCENTRATION}), w ~ Dirichlet(10), seed 2018 + D",
            "split": "AGN (ε/2, δ/2)+(ε/2, δ/2); AVN (ε/2, δ)+(ε/2, 0); DP-TPM (ε/2, δ/2) M2 + (ε/2, δ/2) iterations",
            "failure_rule": "σ_K(noisy M2) ≤ 0: scored as the run's random-vector error",
            "private": False, "note": "seeded noise (reproducible experiment): not private",
            "seconds": time.perf_counter() - t0}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "stm_agn_avn.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    plot(results, OUT / "stm_agn_avn.png")
    print(json.dumps(meta, ensure_ascii=False))


if __name__ == "__main__":
    main()
