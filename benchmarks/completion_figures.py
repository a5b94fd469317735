"""DP tensor completion figures (paper dp-tensor-completion-cp-tucker, Figs. 2–3) and a real tensor.

    .venv/bin/python benchmarks/completion_figures.py            # ~15 min on 2 cores
    .venv/bin/python benchmarks/completion_figures.py --quick    # smoke run (~2 min)
    .venv/bin/python benchmarks/completion_figures.py --only fig2 --methods gradient   # re-run one method,
                                                                  # merged into the saved JSON

Writes benchmarks/results/completion_{fig2,fig3,real}.{json,png}. Every fit is
a Ray task (distdp.distributed.completion.run_many).

Settings (paper §5.1 where it gives them):
- data: 20×20×20, rank 3; CP factors N(0,1) with unit-norm columns; Tucker
  factors with orthonormal columns and an N(0,1) 3×3×3 core; min-max scaled
  to [0, 1]; Gaussian noise at SNR = Var(X̃)/σ² = 1 (our reading of the
  paper's undefined "SNR"); 50% missing; observed entries split 80/20;
  RMSE on the test entries against the noise-free X̃. A new tensor, mask,
  split and noise for every realisation.
- SGD: λ = 0.01 (CP), λo = 0.001, λg = 0.0001 (Tucker), 100 passes, batches of
  64. Deviation: η = 0.05, not the paper's 0.005 — with our per-entry
  gradients (factor 2 included, sum over the batch) η = 0.005 does not move
  the fit past the mean in 100 passes (its RMSE is reported as
  ``none-lr0.005``). We subtract the public offset 0.5 (midpoint of the
  known [0, 1] range) before fitting.
- Not given by the paper, chosen here: ε grid {0.1, 0.5, 1, 2, 5, 10} (and
  1e-3…10 for the paper's GP alone); m = 0.05 (GP clip); L = 0.05 for OP
  (Δ = 2τLη = 0.5); declared input bounds [−0.5, 1.5] (X̃ ∈ [0, 1] plus
  noise of std ≈ 0.07–0.09: a public range that noise practically never
  leaves); ε = 1 in Fig. 3; sound GP: c = 0.05, 20 passes, full-batch
  steps (noise does not depend on the batch size, signal does), δ = 1e-5,
  and the IP's declared bounds [−0.5, 1.5], which with the offset 0.5 give
  B = 1 and the default projection radii (``sgd.default_radii``): every
  factor row in the unit ℓ2 ball (CP), or rows in radius 3^(−1/4) ≈ 0.76
  and the core in Frobenius radius 3^(3/4) ≈ 2.28 (Tucker), so |x̂ − 0.5| ≤ 1.
  Without it (before the projection existed) the ε = 0.1 iterates blew up
  (RMSE 27 CP, 231 Tucker). Larger learning rates (0.2, 0.5) or 50 passes,
  tried on other seeds, did not help consistently across ε; η stays 0.05.
- Realisations: 8 per point in Fig. 2 (paper: 50) and 5 in Fig. 3 (paper: 10),
  to run in minutes on 2 cores.
- Real tensor: TensorLy's bundled COVID-19 systems-serology tensor
  (438 samples × 6 antigens × 11 receptors, fully observed); 20% of the
  entries, chosen at random, are held out as missing and used only for the
  test RMSE. Compared with TensorLy's masked ``parafac`` / ``tucker`` (ALS /
  HOOI with the same mask, random init, 200 iterations) on RMSE and time.
  Our SGD there: rank 3, η = 0.005, 30 passes, batches of 64 (values are not
  in [0, 1], so the synthetic η = 0.05 diverges). IP: declared bounds
  [−5, 5] (a round range for these standardised assay values; we chose it
  after seeing the data's range [−4.5, 3.6], which a real deployment must
  not do). Sound GP: c = 0.5, 10 passes, batches of 4096, η = 0.005,
  δ = 1e-6, no projection (as run before the projection existed; not re-run).
  3 runs per ε (1 for the deterministic non-private fit).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

import numpy as np

from distdp.completion import Observations, from_dense
from distdp.completion.api import grouped
from distdp.distributed.completion import run_many
from distdp.completion.synthetic import make_problem

OUT = Path(__file__).resolve().parent / "results"
EPS = [0.1, 0.5, 1.0, 2.0, 5.0, 10.0]
EPS_GP_PAPER = [1e-3, 1e-2, 0.1, 1.0, 10.0]
LAM = {"cp": dict(lam=0.01), "tucker": dict(lam=0.001, lam_core=0.0001)}
COMMON = dict(rank=3, lr=0.05, epochs=100, batch_size=64, offset=0.5, holdout=0.2)
METHODS = {
    "none": dict(),
    "input": dict(bounds=(-0.5, 1.5)),
    "gradient-paper": dict(clip=0.05),
    "output": dict(lipschitz=0.05),
    "gradient": dict(clip=0.05, epochs=20, batch_size=10 ** 9, delta=1e-5, bounds=(-0.5, 1.5)),
}
LABEL = {"none": "non-private", "input": "IP (Alg. 1, ε-DP)", "gradient-paper": "GP paper (Alg. 2, no guarantee)",
         "output": "OP paper (Alg. 3, no guarantee)", "gradient": "GP sound (DP-SGD, (ε,δ)-DP)",
         "none-lr0.005": "non-private, paper η=0.005"}
COLOR = {"none": "k", "input": "tab:blue", "gradient-paper": "tab:green", "output": "tab:red",
         "gradient": "tab:purple", "none-lr0.005": "0.6"}


def truth_rmse_job(truth: np.ndarray, obs: Observations, seed: int, holdout: float):
    """The test entries complete() will hold out with this seed, and their noise-free values."""
    from distdp.completion import split_holdout

    _, test = split_holdout(obs, holdout, np.random.default_rng(seed))
    return test.idx, truth[tuple(test.idx.T)]


class Scorer:
    """Inside the task: RMSE of the result on the given entries against given (noise-free) values."""

    def __init__(self, idx: np.ndarray, truth_values: np.ndarray):
        self.idx, self.truth_values = idx, truth_values

    def __call__(self, res):
        pred = res.predict(*self.idx.T)
        return {"rmse_truth": float(np.sqrt(np.mean((pred - self.truth_values) ** 2))), "test_rmse": res.test_rmse,
                "rmse_offset": float(np.sqrt(np.mean((res.offset - self.truth_values) ** 2))),
                "private": res.privacy.private, "epsilon_guaranteed": res.privacy.epsilon,
                "seconds": res.timings["total"], "epochs_run": res.trace.epochs_run,
                "diverged_pass": res.trace.diverged_pass, "max_row_norm": res.config["max_row_norm"],
                "max_core_norm": res.config["max_core_norm"]}


def synthetic_jobs(models, eps_grid, methods, runs, missing_ratios):
    """(data, kwargs, meta) for every fit of a synthetic sweep."""
    datas, jobs, metas = [], [], []
    for model in models:
        for mr in missing_ratios:
            for r in range(runs):
                seed = 1000 * r + int(mr * 100) + (0 if model == "cp" else 500_000)
                prob = make_problem(model=model, snr=1.0, missing_ratio=mr, rng=np.random.default_rng(seed))
                idx, tv = truth_rmse_job(prob.truth, prob.observed, seed, COMMON["holdout"])
                for method in methods:
                    grid = [None] if method.startswith("none") else (
                        EPS_GP_PAPER if method == "gradient-paper" and eps_grid is EPS else eps_grid)
                    for eps in grid:
                        pert = "none" if method.startswith("none") else method
                        kw = dict(COMMON, **LAM[model], **METHODS.get(method, {}), model=model, perturbation=pert,
                                  epsilon=eps, seed=seed)
                        if method == "none-lr0.005":
                            kw["lr"] = 0.005
                        datas.append(prob.observed)
                        jobs.append(grouped(kw))
                        metas.append(dict(model=model, method=method, epsilon=eps, missing_ratio=mr, run=r,
                                          scorer=Scorer(idx, tv)))
    return datas, jobs, metas


def run_scored(datas, jobs, metas):
    """Run every job as a Ray task (run_many), each scored inside its task by its own Scorer."""
    out = run_many(datas, jobs, score=[m["scorer"] for m in metas], errors="return")
    rows = []
    for m, res in zip(metas, out):
        row = {k: v for k, v in m.items() if k != "scorer"}
        row.update(res)
        rows.append(row)
    return rows


def summarise(rows, keys):
    """Median, mean, std of rmse_truth per group of ``keys``."""
    groups = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    out = []
    for key, rs in sorted(groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        vals = np.array([r["rmse_truth"] for r in rs if "rmse_truth" in r])
        out.append(dict(zip(keys, key), n=len(rs), n_failed=len(rs) - len(vals),
                        n_diverged=sum(r.get("diverged_pass") is not None for r in rs),
                        median=float(np.median(vals)) if len(vals) else None,
                        mean=float(vals.mean()) if len(vals) else None,
                        std=float(vals.std()) if len(vals) else None,
                        seconds_median=float(np.median([r["seconds"] for r in rs if "seconds" in r]))
                        if len(vals) else None))
    return out


def fig2(runs, quick, methods=None):
    methods = methods or list(METHODS) + ["none-lr0.005"]
    datas, jobs, metas = synthetic_jobs(["cp", "tucker"], EPS, methods, runs, [0.5])
    t = time.time()
    rows = run_scored(datas, jobs, metas)
    summary = summarise(rows, ["model", "method", "epsilon"])
    return {"rows": rows, "summary": summary, "seconds": time.time() - t, "runs": runs}


def fig3(runs, quick, methods=None):
    mrs = [0.1, 0.3, 0.5, 0.7, 0.9]
    datas, jobs, metas = synthetic_jobs(["cp", "tucker"], [1.0], methods or list(METHODS), runs, mrs)
    t = time.time()
    rows = run_scored(datas, jobs, metas)
    summary = summarise(rows, ["model", "method", "missing_ratio"])
    return {"rows": rows, "summary": summary, "seconds": time.time() - t, "runs": runs, "epsilon": 1.0}


def real(runs, quick, methods=None):
    """TensorLy's COVID-19 serology tensor: our fits (Ray tasks) vs TensorLy's masked CP/Tucker."""
    import tensorly as tl
    from tensorly.datasets import load_covid19_serology
    from tensorly.decomposition import parafac, tucker

    X = np.asarray(load_covid19_serology().tensor, dtype=float)
    rng = np.random.default_rng(2024)
    test_mask = rng.random(X.shape) < 0.2
    train = from_dense(np.where(test_mask, np.nan, X), source="covid19_serology")
    test = from_dense(np.where(test_mask, X, np.nan), source="covid19_serology (test)")
    scorer = Scorer(test.idx, test.values)
    base = dict(rank=3, lr=0.005, epochs=30, batch_size=64, holdout=0.0, test=test)
    eps_grid = [0.5, 2.0, 10.0] if quick else [0.5, 1.0, 2.0, 5.0, 10.0]
    methods = {"none": {}, "input": dict(bounds=(-5.0, 5.0)),
               "gradient": dict(clip=0.5, epochs=10, batch_size=4096, lr=0.005, delta=1e-6,
                                max_row_norm=math.inf)}
    datas, jobs, metas = [], [], []
    for model in ("cp", "tucker"):
        for method, extra in methods.items():
            for eps in ([None] if method == "none" else eps_grid):
                for r in range(1 if method == "none" else runs):
                    kw = dict(base, **LAM[model], **extra, model=model, perturbation=method, epsilon=eps, seed=r)
                    datas.append(train)
                    jobs.append(grouped(kw))
                    metas.append(dict(model=model, method=method, epsilon=eps, run=r, scorer=scorer))
    t = time.time()
    rows = run_scored(datas, jobs, metas)
    ours_s = time.time() - t
    tly = {}
    mask = tl.tensor((~test_mask).astype(float))
    Xz = tl.tensor(np.where(test_mask, 0.0, X))
    for model in ("cp", "tucker"):
        rm, secs = [], []
        for r in range(3):
            t0 = time.perf_counter()
            if model == "cp":
                rec = tl.cp_to_tensor(parafac(Xz, 3, mask=mask, n_iter_max=200, init="random", random_state=r))
            else:
                rec = tl.tucker_to_tensor(tucker(Xz, rank=[3, 3, 3], mask=mask, n_iter_max=200, init="random",
                                                 random_state=r))
            secs.append(time.perf_counter() - t0)
            rm.append(float(np.sqrt(np.mean((np.asarray(rec)[test_mask] - X[test_mask]) ** 2))))
        tly[model] = {"rmse_median": float(np.median(rm)), "seconds_median": float(np.median(secs)), "rmse": rm}
    summary = summarise(rows, ["model", "method", "epsilon"])
    return {"dataset": "tensorly.datasets.load_covid19_serology", "shape": list(X.shape), "test_fraction": 0.2,
            "n_train": train.n, "n_test": test.n, "test_std": float(X[test_mask].std()),
            "declared_bounds_input": [-5.0, 5.0], "rows": rows, "summary": summary, "tensorly": tly,
            "seconds_ours_all_tasks": ours_s, "runs": runs}


def merge_methods(old, new, methods, keys):
    """The saved result ``old`` with the rows of ``methods`` replaced by those of ``new``; summary recomputed."""
    if old.get("runs") != new["runs"]:
        raise SystemExit(f"saved result has {old.get('runs')} runs per point, this run {new['runs']}: "
                         "re-run everything (or match --quick)")
    rows = [r for r in old["rows"] if r["method"] not in methods] + new["rows"]
    rerun = dict(old.get("rerun", {}))
    for m in methods:
        rerun[m] = {"seconds": new["seconds"], "date": time.strftime("%Y-%m-%d")}
    return dict(old, rows=rows, summary=summarise(rows, keys), rerun=rerun)


def _series(summary, model, method, key):
    pts = [s for s in summary if s["model"] == model and s["method"] == method and s["median"] is not None]
    pts.sort(key=lambda s: s[key])
    return (np.array([s[key] for s in pts], float), np.array([s["mean"] for s in pts]),
            np.array([s["std"] for s in pts]))


def plot_fig2(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    for col, model in enumerate(("cp", "tucker")):
        ax = axes[0, col]
        for method in ("input", "gradient-paper", "output", "gradient"):
            x, m, s = _series(res["summary"], model, method, "epsilon")
            keep = x >= min(EPS)
            ax.plot(x[keep], m[keep], "o-", color=COLOR[method], label=LABEL[method])
            ax.fill_between(x[keep], m[keep] - s[keep], m[keep] + s[keep], color=COLOR[method], alpha=0.15)
        for method, ls in (("none", "--"), ("none-lr0.005", ":")):
            base = [r for r in res["summary"] if r["model"] == model and r["method"] == method][0]
            ax.axhline(base["mean"], color=COLOR[method], ls=ls, label=f"{LABEL[method]} ({base['mean']:.3f})")
        off = [r["rmse_offset"] for r in res["rows"] if r["model"] == model and "rmse_offset" in r
               and r["method"] == "gradient" and r["epsilon"] == EPS[0]]
        if off:
            ax.axhline(np.mean(off), color="tab:brown", ls="-.", lw=0.8,
                       label=f"all-offset predictor x̂ = 0.5 ({np.mean(off):.3f})")
        for r in res["summary"]:
            if r["model"] == model and r["method"] in METHODS and r.get("n_diverged") and r["mean"] is not None:
                ax.annotate(f"{r['n_diverged']}/{r['n']} blew up", (r["epsilon"], r["mean"]), fontsize=7,
                            color=COLOR[r["method"]], textcoords="offset points", xytext=(4, 4))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ε")
        ax.set_ylabel("test RMSE vs noise-free X̃ (mean ± std)")
        ax.set_title(f"Fig. 2 ({'a' if col == 0 else 'b'}): {model.upper()}, {res['runs']} realisations")
        ax.legend(fontsize=7)
        ax = axes[1, col]
        x, m, s = _series(res["summary"], model, "gradient-paper", "epsilon")
        ax.plot(x, m, "o-", color=COLOR["gradient-paper"], label=LABEL["gradient-paper"])
        ax.fill_between(x, m - s, m + s, color=COLOR["gradient-paper"], alpha=0.15)
        base = [r for r in res["summary"] if r["model"] == model and r["method"] == "none"][0]
        ax.axhline(base["mean"], color="k", ls="--", label=LABEL["none"])
        fails = [r for r in res["summary"] if r["model"] == model and r["method"] == "gradient-paper"
                 and r["n_failed"]]
        for r in fails:
            y = r["mean"] if r["mean"] is not None else ax.get_ylim()[1]
            ax.plot([r["epsilon"]], [y], "x", color="tab:red", ms=10)
            ax.annotate(f"{r['n_failed']}/{r['n']} diverged", (r["epsilon"], y), fontsize=8, color="tab:red",
                        textcoords="offset points", xytext=(4, -12))
        ax.set_xscale("log")
        ax.set_xlabel("ε (log scale)")
        ax.set_ylabel("test RMSE vs noise-free X̃")
        ax.set_title(f"Fig. 2 ({'c' if col == 0 else 'd'}): {model.upper()}, paper's GP alone")
        ax.legend(fontsize=7)
    fig.suptitle("RMSE vs ε, 20×20×20 rank 3, SNR 1, 50% missing (paper §5.1); only IP and sound GP are DP")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_fig3(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(METHODS)
    fig, axes = plt.subplots(2, len(methods), figsize=(3.2 * len(methods), 6.5), sharey="row")
    for row, model in enumerate(("cp", "tucker")):
        for col, method in enumerate(methods):
            ax = axes[row, col]
            x, m, s = _series(res["summary"], model, method, "missing_ratio")
            ax.bar(x, m, width=0.12, yerr=s, color=COLOR[method], alpha=0.8)
            ax.set_title(f"{model.upper()}: {LABEL[method]}", fontsize=8)
            ax.set_xlabel("missing ratio")
            if col == 0:
                ax.set_ylabel("test RMSE vs X̃")
    fig.suptitle(f"Fig. 3: RMSE vs missing ratio (ε = {res['epsilon']} for the perturbations; "
                 f"{res['runs']} runs, mean ± std)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_real(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, model in zip(axes, ("cp", "tucker")):
        for method in ("input", "gradient"):
            x, m, s = _series(res["summary"], model, method, "epsilon")
            ax.plot(x, m, "o-", color=COLOR[method], label=LABEL[method])
            ax.fill_between(x, m - s, m + s, color=COLOR[method], alpha=0.15)
        base = [r for r in res["summary"] if r["model"] == model and r["method"] == "none"][0]
        ax.axhline(base["mean"], color="k", ls="--", label=f"distdp non-private SGD ({base['mean']:.3f}, "
                                                              f"{base['seconds_median']:.1f}s)")
        tl_ = res["tensorly"][model]
        ax.axhline(tl_["rmse_median"], color="tab:orange", ls="-.",
                   label=f"TensorLy masked {'parafac' if model == 'cp' else 'tucker'} ({tl_['rmse_median']:.3f}, "
                         f"{tl_['seconds_median']:.2f}s)")
        ax.axhline(res["test_std"], color="0.5", ls=":", label=f"std of test values ({res['test_std']:.3f})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ε")
        ax.set_ylabel("RMSE on held-out entries")
        ax.set_title(f"COVID-19 serology {tuple(res['shape'])}, rank 3, {model.upper()}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 runs per point (smoke test)")
    ap.add_argument("--only", choices=["fig2", "fig3", "real"], action="append")
    ap.add_argument("--replot", action="store_true", help="redraw the PNGs from the saved JSON")
    ap.add_argument("--methods", nargs="+", choices=list(METHODS) + ["none-lr0.005"],
                    help="fig2/fig3: re-run only these methods and replace their rows in the saved JSON")
    args = ap.parse_args(argv)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    OUT.mkdir(parents=True, exist_ok=True)
    parts = args.only or ["fig2", "fig3", "real"]
    runs = {"fig2": 2 if args.quick else 8, "fig3": 2 if args.quick else 5, "real": 2 if args.quick else 3}
    plots = {"fig2": plot_fig2, "fig3": plot_fig3, "real": plot_real}
    if args.replot:
        for part in parts:
            plots[part](json.loads((OUT / f"completion_{part}.json").read_text()), OUT / f"completion_{part}.png")
        return
    if args.methods and "real" in parts:
        ap.error("--methods applies to fig2 and fig3 only")
    for part in parts:
        t = time.time()
        res = {"fig2": fig2, "fig3": fig3, "real": real}[part](runs[part], args.quick, args.methods)
        if args.methods:
            res = merge_methods(json.loads((OUT / f"completion_{part}.json").read_text()), res, args.methods,
                                ["model", "method", "epsilon" if part == "fig2" else "missing_ratio"])
        res["settings"] = {"common": {k: v for k, v in COMMON.items()}, "methods": METHODS, "lambda": LAM,
                           "eps_grid": EPS, "eps_grid_gp_paper": EPS_GP_PAPER, "snr": "Var(signal)/Var(noise) = 1",
                           "quick": args.quick}
        (OUT / f"completion_{part}.json").write_text(json.dumps(res, indent=1, default=float))
        plots[part](res, OUT / f"completion_{part}.png")
        print(f"{part}: {time.time() - t:.0f}s")
        for s in res["summary"]:
            if s["median"] is not None:
                print("  ", {k: (round(v, 4) if isinstance(v, float) else v) for k, v in s.items()})


if __name__ == "__main__":
    main()
