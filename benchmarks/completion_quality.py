"""Completion quality and cost: distdp (ALS, defaults) against TensorLy's masked parafac / tucker; private ε-sweeps.

    .venv/bin/python benchmarks/completion_quality.py            # ~16 min on 2 cores
    .venv/bin/python benchmarks/completion_quality.py --quick    # smoke run (small tensors only)
    .venv/bin/python benchmarks/completion_quality.py --only-scale --ray-scale 10000000 --scale 10000000
        # 10⁷ entries: the Ray-sharded path (parquet COO read by 2 actors) and in-process, merged into the JSON
    .venv/bin/python benchmarks/completion_quality.py --only-private   # the private ε-sweep alone, merged likewise

Writes benchmarks/results/completion_quality.{json,png} and prints a Markdown
table (pasted into docs/benchmarks/completion.md).

Protocol (one run per cell, same hold-out for every method):

- Synthetic: CP rank-R truth with N(0, 1) factors, scaled by its largest
  |entry| to [−1, 1], plus N(0, 0.01²) noise (the issue's tensor and larger
  ones), ``missing`` share of entries unobserved.
- Real: every tensor ``tensorly.datasets`` ships (IL-2, COVID-19 serology,
  Indian Pines, kinetic). The 4-way ones are reshaped to 3-way by merging
  two adjacent modes (IL-2 13×4×12×8 → 52×12×8; kinetic 64×12×10×60 →
  64×120×60); 50% of the entries are made missing at random (IL-2's own
  NaNs stay missing).
- The observed entries are split 80/20 (``split_holdout``, seed 0); the
  test RMSE is on the 20% against the observed values. TensorLy gets the
  dense tensor with the training mask (``mask=``), its defaults otherwise
  (at most 100 iterations, ``tol`` 1e-8 / 1e-4), run twice: ``init='random'``
  and ``init='svd'`` (the default); distdp is judged against the init
  with the better RMSE, and that run's time (random init is faster but
  often far worse on Tucker). distdp gets the
  training entries and only ``rank`` and ``model`` (ALS, offset = training
  mean, λ chosen by validation on the training entries, tol 1e-5 on the
  objective's relative decrease); its time includes the λ search.
  Both are timed wall-clock, one run, on the same machine.
- Private ε-sweeps on the issue's tensor (30×25×20, rank 3, 60% missing,
  declared bounds [−1, 1]): input perturbation (Laplace, then ALS) and the
  sound gradient perturbation (DP-SGD, δ = 1e-5, default radii), one run
  per ε, beside the public baselines (predict the offset = mid-range 0).
- Targets (the issue): RMSE within 2% of TensorLy's (or better) at no more
  than 2× its time, on every tensor.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time
import warnings
from pathlib import Path

import numpy as np

from distdp.completion import complete, from_dense, split_holdout
from distdp.completion.entries import Observations
from distdp.completion import Perturbation

OUT = Path(__file__).resolve().parent / "results"
SYNTHETIC = [  # (shape, rank, missing)
    ((30, 25, 20), 3, 0.6), ((30, 25, 20), 3, 0.9), ((60, 50, 40), 5, 0.6), ((60, 50, 40), 5, 0.9),
    ((100, 80, 60), 8, 0.8), ((150, 120, 100), 5, 0.95)]
QUICK = [((30, 25, 20), 3, 0.6), ((60, 50, 40), 5, 0.9)]
REAL_RANK = 5
EPSILONS = [0.5, 1, 2, 4, 8, 16, 64]


def synthetic(shape, rank, missing, seed=0):
    """CP rank-``rank`` truth scaled to [−1, 1] plus N(0, 0.01²) noise; ``missing`` share NaN."""
    rng = np.random.default_rng(seed)
    X = np.einsum("ir,jr,kr->ijk", *[rng.standard_normal((n, rank)) for n in shape])
    Y = X / np.abs(X).max() + 0.01 * rng.standard_normal(shape)
    Y[rng.random(shape) < missing] = np.nan
    return Y


def real_tensors(missing=0.5, seed=0):
    """Every tensorly.datasets tensor as a 3-way array with ``missing`` share (plus its own NaNs) NaN."""
    import tensorly.datasets as tds

    rng = np.random.default_rng(seed)
    out = {}
    for name, loader, reshape in [("IL2 (52×12×8)", tds.load_IL2data, (52, 12, 8)),
                                  ("covid19-serology", tds.load_covid19_serology, None),
                                  ("indian-pines", tds.load_indian_pines, None),
                                  ("kinetic (64×120×60)", tds.load_kinetic, (64, 120, 60))]:
        T = np.asarray(loader().tensor, dtype=float)
        T = T.reshape(reshape) if reshape else T
        T = T.copy()
        T[rng.random(T.shape) < missing] = np.nan
        out[name] = T
    return out


def _rmse(pred, truth):
    return float(np.sqrt(np.mean((pred - truth) ** 2)))


def compare(name, Y, rank, tucker=True):
    """distdp ALS vs TensorLy masked parafac (and tucker) on the same 80/20 split of the observed entries."""
    import tensorly as tl
    from tensorly.decomposition import parafac
    from tensorly.decomposition import tucker as tl_tucker

    obs = from_dense(Y)
    train, test = split_holdout(obs, 0.2, np.random.default_rng(0))
    mask = np.zeros(obs.shape)
    mask[tuple(train.idx.T)] = 1.0
    dense = np.zeros(obs.shape)
    dense[tuple(train.idx.T)] = train.values
    row = {"tensor": name, "shape": list(obs.shape), "rank": rank, "n_train": train.n, "n_test": test.n,
           "missing": 1 - obs.n / np.prod(obs.shape)}
    models = ["cp", "tucker"] if tucker and rank <= min(obs.shape) else ["cp"]
    for model in models:
        t = time.perf_counter()
        res = complete(train, rank, model=model, test=test, seed=0)
        ours_t = time.perf_counter() - t
        tl_runs = {}
        for init in ("random", "svd"):
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if model == "cp":
                    pred = tl.cp_to_tensor(parafac(dense, rank, mask=mask, init=init, random_state=0))
                else:
                    pred = tl.tucker_to_tensor(tl_tucker(dense, [rank] * 3, mask=mask, init=init, random_state=0))
            tl_runs[init] = {"rmse": _rmse(pred[tuple(test.idx.T)], test.values), "s": time.perf_counter() - t}
        # judged against TensorLy's init with the better RMSE, and that run's time
        best = min(tl_runs.values(), key=lambda r: r["rmse"])
        tl_rmse, tl_t = best["rmse"], best["s"]
        row[model] = {"distdp_rmse": res.test_rmse, "distdp_s": ours_t, "distdp_sweeps": res.trace.epochs_run,
                      "distdp_converged": res.trace.converged, "tensorly": tl_runs, "tensorly_rmse": tl_rmse,
                      "tensorly_s": tl_t, "rmse_ratio": res.test_rmse / tl_rmse, "time_ratio": ours_t / tl_t,
                      "offset_baseline_rmse": res.baselines["offset"]["test_rmse"]}
        print(f"{name:22s} {model:6s} R={rank:2d}  distdp {res.test_rmse:.5g} in {ours_t:.3f}s "
              f"({res.trace.epochs_run} sweeps, converged {res.trace.converged})  TensorLy "
              + ", ".join(f"{k} {v['rmse']:.5g} in {v['s']:.3f}s" for k, v in tl_runs.items()), flush=True)
    return row


def private_sweep(epsilons):
    """ε-sweep on the issue's tensor with declared bounds [−1, 1], beside the public baselines."""
    Y = np.clip(synthetic((30, 25, 20), 3, 0.6), -1.0, 1.0)       # observed values inside the declared range
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        none = complete(Y, 3, seed=0)
        for pert, delta in [("input", None), ("gradient", 1e-5)]:
            for eps in epsilons:
                t = time.perf_counter()
                r = complete(Y, 3, bounds=(-1.0, 1.0), seed=0, perturbation=Perturbation(pert, epsilon=eps, delta=delta))
                rows.append({"perturbation": pert, "epsilon": eps, "test_rmse": r.test_rmse,
                             "solver": r.config["solver"], "seconds": time.perf_counter() - t,
                             "private": r.privacy.private,
                             "baselines": {k: v["test_rmse"] for k, v in r.baselines.items()}})
                print(f"private {pert:9s} ε={eps:<5g} RMSE {r.test_rmse:.4g}  baseline "
                      f"{min(v['test_rmse'] for v in r.baselines.values()):.4g}", flush=True)
    return {"non_private_rmse": none.test_rmse, "rows": rows}


def sparse_cp(n_entries, shape, rank, seed=0):
    """``n_entries`` distinct random entries of a CP rank-``rank`` tensor (entries of std ≈ 1) + N(0, 0.01²)."""
    rng = np.random.default_rng(seed)
    flat = np.unique(rng.integers(0, np.prod(shape), size=int(n_entries * 1.01)))[:n_entries]
    rng.shuffle(flat)
    idx = np.stack(np.unravel_index(flat, shape), axis=1).astype(np.int64)
    F = [rng.standard_normal((n, rank)) / rank ** (1 / 6) for n in shape]
    vals = np.einsum("br,br,br->b", F[0][idx[:, 0]], F[1][idx[:, 1]], F[2][idx[:, 2]])
    vals += 0.01 * rng.standard_normal(len(vals))
    return Observations(shape, idx, vals)


def scale_run(n_entries, shape=(1000, 1000, 1000), rank=5, seed=0):
    """In-process ALS on a sparse CP tensor with ``n_entries`` observed entries: time and peak memory."""
    obs = sparse_cp(n_entries, shape, rank, seed)
    t = time.perf_counter()
    res = complete(obs, rank, seed=0)
    secs = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20   # KiB → GiB (Linux)
    out = {"n_entries": n_entries, "shape": list(shape), "rank": rank, "seconds": secs, "peak_rss_gib": peak,
           "sweeps": res.trace.epochs_run, "converged": res.trace.converged, "test_rmse": res.test_rmse,
           "path": "in-process (not the Ray-sharded path)"}
    print(out, flush=True)
    return out


def ray_scale_run(n_entries, shape=(1000, 1000, 1000), rank=5, n_files=8, n_shards=2, seed=0):
    """Ray-sharded ALS on a parquet COO directory of ``n_entries`` entries: the actors read their files."""
    import tempfile

    from distdp.completion.io import write_coo_parquet
    from distdp.distributed.completion import sharded_complete

    obs = sparse_cp(n_entries, shape, rank, seed)
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        for n, rows in enumerate(np.array_split(np.arange(obs.n), n_files)):
            write_coo_parquet(obs.subset(rows), Path(d) / f"part-{n:03d}.parquet")
        write_s = time.perf_counter() - t
        del obs
        t = time.perf_counter()
        res = sharded_complete(d, rank, seed=0, n_shards=n_shards)
        secs = time.perf_counter() - t
    out = {"n_entries": n_entries, "shape": list(shape), "rank": rank, "n_files": n_files, "n_shards": n_shards,
           "write_parquet_s": write_s, "seconds": secs, "load_s": res.timings["load"],
           "lam_search_s": res.timings.get("lam_search"), "als_s": res.timings["als"],
           "lam_path": res.config["lam_path"],
           "sweeps": res.trace.epochs_run, "converged": res.trace.converged, "test_rmse": res.test_rmse,
           "offset_baseline_rmse": res.baselines["offset"]["test_rmse"],
           "actor_peak_rss_gib": [b / 2 ** 30 for b in res.config["peak_rss_bytes"]],
           "driver_peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20,
           "path": "Ray-sharded (distdp.distributed.completion.sharded_complete)"}
    print(out, flush=True)
    return out


def table(rows) -> str:
    lines = ["| tensor | shape | R | missing | model | distdp RMSE | TensorLy RMSE random / svd init | ratio | "
             "distdp s (sweeps) | TensorLy s random / svd | time ratio | targets met |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for model in ("cp", "tucker"):
            if model not in r:
                continue
            m = r[model]
            ok = m["rmse_ratio"] <= 1.02 and m["time_ratio"] <= 2.0
            lines.append(f"| {r['tensor']} | {'×'.join(map(str, r['shape']))} | {r['rank']} | {r['missing']:.0%} | "
                         f"{model} | {m['distdp_rmse']:.4g} | {m['tensorly']['random']['rmse']:.4g} / "
                         f"{m['tensorly']['svd']['rmse']:.4g} | {m['rmse_ratio']:.3f} | "
                         f"{m['distdp_s']:.3f} ({m['distdp_sweeps']}{'' if m['distdp_converged'] else ', not conv.'})"
                         f" | {m['tensorly']['random']['s']:.3f} / {m['tensorly']['svd']['s']:.3f} | "
                         f"{m['time_ratio']:.2f} | {'yes' if ok else 'no'} |")
    return "\n".join(lines)


def plot(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    labels, ours, theirs, tr = [], [], [], []
    for r in res["comparisons"]:
        for model in ("cp", "tucker"):
            if model in r:
                labels.append(f"{r['tensor'][:14]}\n{model} R{r['rank']} {r['missing']:.0%}")
                ours.append(r[model]["distdp_rmse"])
                theirs.append(r[model]["tensorly_rmse"])
                tr.append(r[model]["time_ratio"])
    x = np.arange(len(labels))
    axes[0].bar(x - 0.2, np.array(ours) / np.array(theirs), 0.4, label="RMSE ratio distdp / TensorLy")
    axes[0].bar(x + 0.2, tr, 0.4, label="time ratio distdp / TensorLy")
    axes[0].axhline(1.02, color="C0", ls=":")
    axes[0].axhline(2.0, color="C1", ls=":")
    axes[0].set_yscale("log")
    axes[0].set_xticks(x, labels, rotation=90, fontsize=6)
    axes[0].legend(fontsize=7)
    axes[0].set_title("non-private: ratios (targets dotted)")
    axes[1].scatter(theirs, ours)
    lim = [min(ours + theirs) * 0.8, max(ours + theirs) * 1.2]
    axes[1].plot(lim, lim, "k:")
    axes[1].set_xscale("log")
    axes[1].set_yscale("log")
    axes[1].set_xlabel("TensorLy test RMSE")
    axes[1].set_ylabel("distdp test RMSE")
    sw = res["private"]
    for pert in ("input", "gradient"):
        rows = [r for r in sw["rows"] if r["perturbation"] == pert]
        axes[2].plot([r["epsilon"] for r in rows], [r["test_rmse"] for r in rows], "o-", label=pert)
    base = min(sw["rows"][0]["baselines"].values())
    axes[2].axhline(base, color="k", ls="--", label="public baseline (offset = mid-range)")
    axes[2].axhline(sw["non_private_rmse"], color="g", ls=":", label="non-private")
    axes[2].set_xscale("log")
    axes[2].set_yscale("log")
    axes[2].set_xlabel("ε")
    axes[2].set_ylabel("test RMSE")
    axes[2].legend(fontsize=7)
    axes[2].set_title("private, 30×25×20 R3, bounds [−1, 1]")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def keep_scale_runs(res: dict, old: dict) -> None:
    """Carry the scale runs this run did not repeat over from the earlier results ``old`` (they take their own
    flags)."""
    kept = [key for key in ("scale", "ray_scale") if key in old and key not in res]
    for key in kept:
        res[key] = old[key]
    if kept:
        res["notes"] = [f"{key}: kept from the earlier run" for key in kept] + [
            n for n in old.get("notes", []) if n.split(":")[0] in kept]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--scale", type=int, help="also complete a sparse tensor with this many entries (in-process)")
    ap.add_argument("--ray-scale", type=int, help="also complete a parquet COO of this many entries with the Ray "
                                                  "path (2 shard actors)")
    ap.add_argument("--only-scale", action="store_true", help="run only --scale / --ray-scale (merged into the "
                                                             "saved JSON)")
    ap.add_argument("--only-private", action="store_true", help="run only the private ε-sweep (merged into the "
                                                                "saved JSON)")
    ap.add_argument("--replot", action="store_true", help="redraw the plot and table from the saved JSON")
    args = ap.parse_args(argv)
    OUT.mkdir(exist_ok=True)
    if args.replot:
        res = json.loads((OUT / "completion_quality.json").read_text())
        for r in res["comparisons"]:
            for model in ("cp", "tucker"):
                if model in r:
                    m = r[model]
                    best = min(m["tensorly"].values(), key=lambda x: x["rmse"])
                    m.update(tensorly_rmse=best["rmse"], tensorly_s=best["s"], rmse_ratio=m["distdp_rmse"] / best["rmse"],
                             time_ratio=m["distdp_s"] / best["s"])
        plot(res, OUT / "completion_quality.png")
        print(table(res["comparisons"]))
        return
    if args.only_private:
        path = OUT / "completion_quality.json"
        res = json.loads(path.read_text())
        res["private"] = private_sweep(EPSILONS)
        path.write_text(json.dumps(res, indent=1, default=float))
        plot(res, OUT / "completion_quality.png")
        return
    if args.only_scale:
        path = OUT / "completion_quality.json"
        res = json.loads(path.read_text())
        if args.scale:
            res["scale"] = scale_run(args.scale)
        if args.ray_scale:
            res["ray_scale"] = ray_scale_run(args.ray_scale)
        rerun = [key for key, flag in (("scale", args.scale), ("ray_scale", args.ray_scale)) if flag]
        res["notes"] = [n for n in res.get("notes", []) if n.split(":")[0] not in rerun]     # notes on runs replaced
        path.write_text(json.dumps(res, indent=1, default=float))
        return
    rows = []
    suffix = "_quick" if args.quick else ""
    saved = OUT / f"completion_quality{suffix}.json"
    previous = json.loads(saved.read_text()) if saved.exists() else {}
    res = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()}, "comparisons": rows}

    def save():          # after every row: a long run leaves its finished rows behind
        saved.write_text(json.dumps(res, indent=1, default=float))

    res["private"] = private_sweep(EPSILONS[:3] if args.quick else EPSILONS)
    save()
    for shape, rank, missing in (QUICK if args.quick else SYNTHETIC):
        rows.append(compare(f"synthetic {'×'.join(map(str, shape))}", synthetic(shape, rank, missing), rank))
        save()
    if not args.quick:
        for name, T in sorted(real_tensors().items(), key=lambda kv: kv[1].size):
            rows.append(compare(name, T, REAL_RANK))
            save()
    if args.scale:
        res["scale"] = scale_run(args.scale)
    if args.ray_scale:
        res["ray_scale"] = ray_scale_run(args.ray_scale)
    keep_scale_runs(res, previous)
    save()
    plot(res, OUT / f"completion_quality{suffix}.png")
    print(table(rows))


if __name__ == "__main__":
    main()
