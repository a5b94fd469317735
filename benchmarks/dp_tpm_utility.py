"""DP tensor power method (Wang & Anandkumar 2016, Alg. 3): utility vs ε, paper vs tight accounting.

Tensors: T = s·(v1⊗3 + 0.75·v2⊗3 + 0.5·v3⊗3), d = 25, s = 500, v_i random
orthonormal (incoherent: ‖v_i‖∞² ≈ 2 ln d / d), one tensor per trial, the same
tensors, starting vectors and standard-normal draws for both accountings (the
runs are paired; only the noise multiplier differs). Neighbours: one symmetrised
entry (Def. 4.2, Δ = 6‖u‖∞²). k = 3, L = 10, R = 15, so K = kL(R+1) = 480
releases; δ = 1e-6; ε ∈ {0.5 … 90}. The paper's recipe is undefined (ε′ ≥ 1)
above ε ≈ 94 at this K. Metric: |⟨v̂_1, v_1⟩| of the first component returned
(Thm 4.2 is about the top eigenpair). 10 trials per ε.

The runs use a seeded generator (``reproducible=True``): they are experiments,
reported "not private" by the library; the noise scale is that of a private run.

    .venv/bin/python benchmarks/dp_tpm_utility.py

writes benchmarks/results/dp_tpm_utility.{json,png}.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from distdp.privacy import accounting
from distdp.tensor import forms
from distdp.tensor.dp import private_power_method

RESULTS = Path(__file__).resolve().parent / "results"
D, K_COMP, SCALE = 25, 3, 500.0
LAMBDAS = SCALE * np.array([1.0, 0.75, 0.5])
L_RESTARTS, R_ITERS, DELTA = 10, 15, 1e-6
EPSILONS = (0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 50.0, 90.0)
TRIALS = 10


def main() -> None:
    t_start = time.perf_counter()
    rng = np.random.default_rng(0)
    tensors = []
    for _ in range(TRIALS):
        V = np.linalg.qr(rng.standard_normal((D, K_COMP)))[0]
        tensors.append((forms.rank_one_sum(LAMBDAS, V), V))
    K = K_COMP * L_RESTARTS * (R_ITERS + 1)
    rows = []
    for eps in EPSILONS:
        row = {"epsilon": eps}
        for mode in ("tight", "paper"):
            cos, report = [], None
            for t, (T, V) in enumerate(tensors):
                res = private_power_method(T, K_COMP, epsilon=eps, delta=DELTA, n_restarts=L_RESTARTS,
                                           n_iters=R_ITERS, accounting=mode, rng=np.random.default_rng(1000 + t),
                                           reproducible=True)
                cos.append(float(abs(V[:, 0] @ res.eigenvectors[:, 0])))
                report = res.privacy.details
            row[mode] = {"cosine": cos, "median_cosine": float(np.median(cos)),
                         "noise_multiplier": report["noise_multiplier"], "epsilon_pld": report["epsilon_pld"],
                         "epsilon_rdp": report["epsilon_rdp"]}
            if mode == "paper":
                row[mode]["advanced_composition_epsilon"] = report["paper"]["advanced_composition_epsilon"]
        rows.append(row)
        t, p = row["tight"], row["paper"]
        print(f"ε = {eps:5.1f}: tight m = {t['noise_multiplier']:8.2f} |cos| median {t['median_cosine']:.3f}   "
              f"paper m = {p['noise_multiplier']:8.2f} ({p['noise_multiplier'] / t['noise_multiplier']:.2f}×) "
              f"|cos| median {p['median_cosine']:.3f}, PLD-certified ε {p['epsilon_pld']:.3f}")
    ratio = [r["paper"]["noise_multiplier"] / r["tight"]["noise_multiplier"] for r in rows]
    out = {"setup": {"d": D, "k": K_COMP, "lambdas": LAMBDAS.tolist(), "L": L_RESTARTS, "R": R_ITERS,
                     "releases": K, "delta": DELTA, "trials": TRIALS, "neighbour": "symmetric-entry",
                     "metric": "|<v̂_1, v_1>|", "paper_recipe_max_epsilon": float(
                         np.sqrt(K * (4 + np.log(2 / DELTA))))},
           "rows": rows, "noise_ratio_paper_over_tight": {"min": min(ratio), "median": float(np.median(ratio)),
                                                           "max": max(ratio)},
           "runtime_s": time.perf_counter() - t_start}
    assert accounting.paper_dp_tpm_recipe(EPSILONS[-1], DELTA, K).epsilon_prime < 1
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "dp_tpm_utility.json").write_text(json.dumps(out, indent=2, ensure_ascii=False))
    plot(out)
    print(f"paper/tight noise multiplier: median {np.median(ratio):.2f} (range {min(ratio):.2f}–{max(ratio):.2f})")
    print(f"runtime {out['runtime_s']:.0f}s; wrote {RESULTS / 'dp_tpm_utility.json'} and .png")


def plot(out: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = out["rows"]
    eps = np.array([r["epsilon"] for r in rows])
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    for mode, color in (("tight", "C0"), ("paper", "C3")):
        c = np.array([r[mode]["cosine"] for r in rows])
        a.plot(eps, np.median(c, axis=1), "o-", color=color, label=f"{mode} accounting (median)")
        a.fill_between(eps, np.percentile(c, 25, axis=1), np.percentile(c, 75, axis=1), color=color, alpha=0.2)
        b.loglog(eps, [r[mode]["noise_multiplier"] for r in rows], "o-", color=color,
                 label=f"{mode}: noise multiplier σ/Δ")
    b.loglog(eps, [r["paper"]["epsilon_pld"] for r in rows], "s--", color="C2",
             label="ε certified by PLD for the paper's noise")
    b.loglog(eps, eps, ":", color="gray", label="target ε")
    a.set_xscale("log")
    a.set_xlabel("target ε (δ = 1e-6)")
    a.set_ylabel("|⟨v̂₁, v₁⟩|")
    s = out["setup"]
    a.set_title(f"top eigenvector, d={s['d']}, λ={s['lambdas']}, K={s['releases']} releases")
    a.legend()
    b.set_xlabel("target ε")
    b.set_title("noise added and privacy actually certified")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "dp_tpm_utility.png", dpi=90)


if __name__ == "__main__":
    main()
