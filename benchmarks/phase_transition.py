"""Wang & Anandkumar (2016), Appendix A / Fig. 1: phase transitions of the robust tensor power method.

T = v1⊗3 + 0.75·v2⊗3 + 0.5·v3⊗3 with v_i = e_i, plus noise E scaled to ‖E‖op = σ:

- gaussian: E_ijk iid N(0,1), symmetrised; ‖E‖op estimated per d as the mean over
  ``OPNORM_DRAWS`` draws of max_u |E(u,u,u)| found by a symmetric power method
  with ``OPNORM_RESTARTS`` restarts × ``OPNORM_ITERS`` iterations (a lower bound,
  as the paper's eig_sshopm), then every trial's fresh E is divided by it;
- adversarial: E = Σ_i v2⊗e_i⊗e_i + e_i⊗v2⊗e_i + e_i⊗e_i⊗v2 (‖E‖op = 3), applied
  implicitly: E(I,u,u) = v2‖u‖² + 2(v2ᵀu)u;
- weak: E = Σ_{i≥4} b_i⊗3 over a random orthonormal basis b_4..b_d of the
  complement of v1..v3 (‖E‖op = 1), applied implicitly: B(Bᵀu)².

A trial succeeds when v̂_iᵀv_i ≥ 1/4 for i = 1, 2, 3 (matched by index, no
absolute value). The paper gives neither L, R, the σ grid nor the exact d: we use
L = 30 restarts, R = 30 iterations, d ∈ {25, 50, 100, 200}, per-model log grids of
σ (below), 20 trials per point (the paper's number) for the adversarial and weak
models; the dense Gaussian model (d³ entries, O(d³L) per iteration) gets 10 trials
per point for d ≤ 100 and 6 at d = 200, for time.

    .venv/bin/python benchmarks/phase_transition.py [--quick]

writes benchmarks/results/phase_transition.{json,png}.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from distdp.tensor import forms
from distdp.tensor.power import robust_power_method

RESULTS = Path(__file__).resolve().parent / "results"
LAMBDAS = np.array([1.0, 0.75, 0.5])
L_RESTARTS, R_ITERS = 30, 30
DIMS = (25, 50, 100, 200)
OPNORM_DRAWS, OPNORM_RESTARTS, OPNORM_ITERS = 2, 64, 40
GRIDS = {  # σ grids, log-spaced around the expected transitions
    "gaussian": np.geomspace(0.05, 1.5, 10),
    "adversarial": np.geomspace(0.01, 0.6, 10),
    "weak": np.geomspace(0.1, 1.0, 10),
}


class Operator:
    """Signal Σ λ_i e_i⊗3 plus σ·(noise operator), applied without forming d³ when possible."""

    def __init__(self, d: int, sigma: float, noise_apply):
        self.dim, self.sigma, self.noise_apply = d, sigma, noise_apply

    def apply(self, U: np.ndarray) -> np.ndarray:
        out = self.sigma * self.noise_apply(U)
        out[:3] += LAMBDAS[:, None] * U[:3] ** 2
        return out


def gaussian_tensor(d: int, rng: np.random.Generator) -> np.ndarray:
    return forms.symmetrize(rng.standard_normal((d, d, d)))


def opnorm_lower_bound(E: np.ndarray, rng: np.random.Generator) -> float:
    """max |E(u,u,u)| over the iterates of a symmetric power method (both signs of u)."""
    U = rng.standard_normal((E.shape[0], OPNORM_RESTARTS))
    U /= np.linalg.norm(U, axis=0)
    best = 0.0
    for _ in range(OPNORM_ITERS):
        W = forms.tensor_apply(E, U)
        best = max(best, float(np.max(np.abs(np.einsum("il,il->l", U, W)))))
        U = W / np.linalg.norm(W, axis=0)
    return max(best, float(np.max(np.abs(forms.tensor_value(E, U)))))


def noise_operator(model: str, d: int, rng: np.random.Generator, gauss_scale: float):
    """The noise's E(I,U,U) with ‖E‖op = 1."""
    if model == "gaussian":
        E = gaussian_tensor(d, rng) / gauss_scale
        return lambda U: forms.tensor_apply(E, U)
    if model == "adversarial":
        def apply(U):  # (Σ_i v2⊗e_i⊗e_i + e_i⊗v2⊗e_i + e_i⊗e_i⊗v2)(I,u,u) / 3
            out = 2.0 * U[1][None, :] * U
            out[1] += np.einsum("il,il->l", U, U)
            return out / 3.0
        return apply
    if model == "weak":
        Q, _ = np.linalg.qr(rng.standard_normal((d - 3, d - 3)))
        B = np.zeros((d, d - 3))
        B[3:] = Q  # orthonormal basis of span(e_4..e_d) = complement of v1..v3
        return lambda U: B @ (B.T @ U) ** 2
    raise ValueError(model)


def trial(model: str, d: int, sigma: float, rng: np.random.Generator, gauss_scale: float) -> bool:
    op = Operator(d, sigma, noise_operator(model, d, rng, gauss_scale))
    res = robust_power_method(op, 3, n_restarts=L_RESTARTS, n_iters=R_ITERS, rng=rng)
    return bool(np.all(np.diag(res.eigenvectors[:3, :3]) >= 0.25))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5 trials per point (smoke run)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot-only", action="store_true", help="redraw the PNG from the saved JSON")
    args = ap.parse_args()
    if args.plot_only:
        plot(json.loads((RESULTS / "phase_transition.json").read_text()))
        return
    rng = np.random.default_rng(args.seed)
    t_start = time.perf_counter()
    gauss_scale = {}
    for d in DIMS:
        gauss_scale[d] = float(np.mean([opnorm_lower_bound(gaussian_tensor(d, rng), rng)
                                        for _ in range(OPNORM_DRAWS)]))
        print(f"d = {d}: ‖symmetrised Gaussian E‖op ≈ {gauss_scale[d]:.3f} (≈ {gauss_scale[d] / math.sqrt(d):.3f}·√d)")
    results = {"setup": {"lambdas": LAMBDAS.tolist(), "L": L_RESTARTS, "R": R_ITERS, "dims": list(DIMS),
                         "grids": {m: g.tolist() for m, g in GRIDS.items()}, "success": "v̂_iᵀv_i ≥ 1/4, i=1..3",
                         "gaussian_opnorm": gauss_scale, "seed": args.seed}, "curves": {}}
    for model, grid in GRIDS.items():
        for d in DIMS:
            trials = 5 if args.quick else (20 if model != "gaussian" else (10 if d <= 100 else 6))
            t0 = time.perf_counter()
            fail = [1.0 - np.mean([trial(model, d, s, rng, gauss_scale[d]) for _ in range(trials)]) for s in grid]
            results["curves"][f"{model}/{d}"] = {"sigma": grid.tolist(), "failure": fail, "trials": trials,
                                                  "seconds": time.perf_counter() - t0}
            print(f"{model:11s} d={d:3d} trials={trials:2d}  failure: " + " ".join(f"{f:.2f}" for f in fail)
                  + f"   ({time.perf_counter() - t0:.1f}s)")
    # transition point: smallest σ with failure ≥ 0.5, scaled as the paper predicts
    summary = {}
    for model, scale in (("gaussian", "sqrt"), ("adversarial", "lin"), ("weak", "log")):
        pts = {}
        for d in DIMS:
            c = results["curves"][f"{model}/{d}"]
            idx = next((i for i, f in enumerate(c["failure"]) if f >= 0.5), None)
            pts[d] = None if idx is None else c["sigma"][idx]
        summary[model] = {"sigma_at_50pct_failure": pts,
                          "scaled": {d: (None if s is None else s * {"sqrt": math.sqrt(d), "lin": d,
                                                                       "log": math.log(d)}[scale])
                                     for d, s in pts.items()}}
    results["summary"] = summary
    results["runtime_s"] = time.perf_counter() - t_start
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "phase_transition.json").write_text(json.dumps(results, indent=2, ensure_ascii=False))
    plot(results)
    print(json.dumps(summary, indent=1))
    print(f"runtime {results['runtime_s']:.0f}s; wrote {RESULTS / 'phase_transition.json'} and .png")


def plot(results: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    scalings = [("σ", lambda s, d: s), ("σ√d", lambda s, d: s * math.sqrt(d)), ("σd", lambda s, d: s * d),
                ("σ ln d", lambda s, d: s * math.log(d))]
    models = list(GRIDS)
    fig, axes = plt.subplots(len(models), 4, figsize=(16, 10), sharey=True)
    for r, model in enumerate(models):
        for c, (label, f) in enumerate(scalings):
            ax = axes[r, c]
            for d in DIMS:
                cur = results["curves"][f"{model}/{d}"]
                x = [f(s, d) for s in cur["sigma"]]
                ax.plot(x, cur["failure"], marker="o", ms=3, label=f"d={d}")
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel(label)
            if c == 0:
                ax.set_ylabel(f"{model}\nfailure probability")
            if r == 0 and c == 0:
                ax.legend(fontsize=8)
    fig.suptitle(f"Robust TPM failure vs scaled ‖E‖op (L={L_RESTARTS}, R={R_ITERS}); rows: Gaussian, "
                 "adversarial, weakly correlated; curves should align at σ√d, σd, σ ln d respectively")
    fig.tight_layout()
    fig.savefig(RESULTS / "phase_transition.png", dpi=90)


if __name__ == "__main__":
    main()
