"""ALS's λ: the validated default against the scale rule it starts from, on several draws of each tensor.

    .venv/bin/python benchmarks/completion_lambda.py      # ~4 min on 2 cores
    .venv/bin/python benchmarks/completion_lambda.py --noisy-search
        # input perturbation: its search (NOISY_SEARCH) against the non-private one, 4 noise draws (~3 min)

Writes benchmarks/results/completion_lambda.json and prints a Markdown table
(pasted into docs/benchmarks/completion.md).

Protocol: the tensors of ``completion_quality.py`` (synthetic CP rank R in
[−1, 1] plus N(0, 0.01²) noise, 4 draws of each small one; TensorLy's real
tensors with 50% of the entries missing, Indian Pines left out for time), the
same 80/20 hold-out (seed 0). Each tensor is completed twice with the same
seed: ``rule`` passes λ = c·σ^p (and λg = λ/10) explicitly, the start of the
validated path and distdp's default before the search; ``validated`` is
``complete``'s default. Input perturbation (Laplace, then ALS) on the issue's
30×25×20 tensor, bounds [−1, 1], with ``reproducible=True`` so that both
arms fit the same noisy values (a seeded benchmark, not a private release).
Test RMSE against the held-out values; wall-clock seconds of ``complete``.
"""
from __future__ import annotations

import json
import math
import runpy
import sys
import time
import types
import warnings
from pathlib import Path

import numpy as np

from distdp.completion import CompletionSolver, Perturbation, complete, from_dense, split_holdout
from distdp.completion.api import ALS_LAMBDA_SCALE

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "completion_lambda.json"
# the tensors of completion_quality.py, loaded by path like the other benchmarks' shared modules
quality = types.SimpleNamespace(**runpy.run_path(str(HERE / "completion_quality.py")))
DRAWS = 4                 # draws of each synthetic tensor of at most 60×50×40
EPSILONS = [1, 4, 16, 64]


def rule_solver(model: str, train) -> CompletionSolver:
    """The scale rule λ = c·σ^p (λg = λ/10), σ of the training values: the validated path's start."""
    c, p = ALS_LAMBDA_SCALE[model]
    lam = c * math.sqrt(float(np.var(train.values))) ** p
    return CompletionSolver(lam=lam, lam_core=lam / 10.0 if model == "tucker" else None)


def run(name: str, Y: np.ndarray, rank: int, perturbation=None, bounds=None) -> list:
    obs = from_dense(Y)
    train, test = split_holdout(obs, 0.2, np.random.default_rng(0))
    rows = []
    for model in ("cp", "tucker"):
        row = {"tensor": name, "model": model, "rank": rank}
        for arm, solver in (("rule", rule_solver(model, train)), ("validated", None)):
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = complete(train, rank, model=model, test=test, seed=0, solver=solver,
                               perturbation=perturbation, bounds=bounds)
            path = res.config["lam_path"]
            row[arm] = {"rmse": res.test_rmse, "s": time.perf_counter() - t, "sweeps": res.trace.epochs_run,
                        "lam": res.config["lam"],
                        "step": None if path is None else round(math.log(path["lam"] / path["steps"][0]["lam"], 4)),
                        "path": None if path is None else path["steps"]}
        row["ratio"] = row["validated"]["rmse"] / row["rule"]["rmse"]
        print(f"{name:28s} {model:6s} rule {row['rule']['rmse']:.4g} ({row['rule']['s']:.2f}s)  validated "
              f"{row['validated']['rmse']:.4g} ({row['validated']['s']:.2f}s, step {row['validated']['step']})",
              flush=True)
        rows.append(row)
    return rows


def noisy_search(seeds: int = 4) -> None:
    """The search under input perturbation: ``NOISY_SEARCH`` with the 10⁻⁷ stop (the default there) against the
    non-private defaults (early-stopped path, 10⁻⁵ stop), mean test RMSE over ``seeds`` reproducible noise draws of
    the private sweep's tensor (``completion_quality.private_sweep``: clipped to the bounds [−1, 1])."""
    import distdp.completion.api as api
    from distdp.completion.als import NOISY_SEARCH, LambdaSearch

    Y = np.clip(quality.synthetic((30, 25, 20), 3, 0.6), -1.0, 1.0)
    out = {}
    for arm, search, tol in (("noisy_search", NOISY_SEARCH, None), ("default_search", LambdaSearch(), 1e-5)):
        api.NOISY_SEARCH = search            # the search complete() uses under input perturbation
        for eps in [1, 2, 4, 8, 16, 64]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rmse = [complete(Y, 3, bounds=(-1.0, 1.0), seed=s, solver=CompletionSolver(tol=tol),
                                 perturbation=Perturbation("input", epsilon=eps, reproducible=True)).test_rmse
                        for s in range(seeds)]
            out.setdefault(arm, {})[eps] = rmse
            print(f"{arm:15s} ε={eps:<3g} mean {np.mean(rmse):.4f}  draws {np.round(rmse, 4).tolist()}", flush=True)
    api.NOISY_SEARCH = NOISY_SEARCH
    (HERE / "results" / "completion_noisy_search.json").write_text(json.dumps(out, indent=1))


def main() -> None:
    if "--noisy-search" in sys.argv[1:]:
        noisy_search()
        return
    rows = []
    for shape, rank, missing in quality.SYNTHETIC:
        draws = DRAWS if math.prod(shape) <= 60 * 50 * 40 else 1
        for seed in range(draws):
            name = f"synthetic {'×'.join(map(str, shape))} {missing:.0%} #{seed}"
            rows += run(name, quality.synthetic(shape, rank, missing, seed=seed), rank)
    for name, T in quality.real_tensors().items():
        if name != "indian-pines":
            rows += run(name, T, 5)
    Y = quality.synthetic((30, 25, 20), 3, 0.6)
    for eps in EPSILONS:
        pert = Perturbation("input", epsilon=eps, reproducible=True)
        rows += run(f"input ε={eps} (30×25×20 60%)", Y, 3, perturbation=pert, bounds=(-1.0, 1.0))
    OUT.write_text(json.dumps({"rows": rows, "date": time.strftime("%Y-%m-%d")}, indent=1))
    print("\n| tensor | model | rule RMSE (s) | validated RMSE (s) | step | validated / rule |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        a, b = r["rule"], r["validated"]
        print(f"| {r['tensor']} | {r['model']} | {a['rmse']:.4g} ({a['s']:.2f}) | {b['rmse']:.4g} ({b['s']:.2f}) | "
              f"{b['step']} | {r['ratio']:.3f} |")


if __name__ == "__main__":
    main()
