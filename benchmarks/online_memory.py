"""Algorithm 2 (online tensor power method): peak memory vs d, and recovery error vs n.

Part 1 — memory. k = 10, L = 20 restarts, R = 2 iterations, n = 200 points per
iteration, points drawn on the fly from the skewed mixture of
``distdp.tensor.synthetic`` (orthonormal components, noise σ = 0.1) and read in
chunks of k + L rows (the default). Peak memory of the run is measured with
``tracemalloc`` (numpy reports its buffers to it) for d = 1,000 … 100,000,
after the model (d×k components) is built. Expected: O(d(k + L)) — linear in
d; the explicit tensor would need 8·d³ bytes (8 PB at d = 10⁵).

Part 2 — recovery. d = 100, k = 5, weights ∝ (5,4,3,2,1), σ = 0.2, L = 20,
R = 10; n = 100 … 30,000 points per iteration (nk(R+1) points in all, eigenvalue
mode "final"); 3 runs per n; error = max over components of ‖v̂ − v‖ after
matching. Expected ~ 1/√n.

    .venv/bin/python benchmarks/online_memory.py

writes benchmarks/results/online_memory.{json,png}.
"""
from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path

import numpy as np

from distdp.tensor.online import GeneratorStream, online_power_method
from distdp.tensor.synthetic import SkewedMixture

RESULTS = Path(__file__).resolve().parent / "results"
MEM_DIMS = (1_000, 3_000, 10_000, 30_000, 100_000)
MEM_K, MEM_L, MEM_R, MEM_N = 10, 20, 2, 200
REC_D, REC_K, REC_L, REC_R = 100, 5, 20, 10
REC_NS = (100, 300, 1_000, 3_000, 10_000, 30_000)
REC_RUNS = 3


def orthonormal(d: int, k: int, rng: np.random.Generator) -> np.ndarray:
    return np.linalg.qr(rng.standard_normal((d, k)))[0]


def peak_memory(d: int, rng: np.random.Generator) -> dict:
    model = SkewedMixture(orthonormal(d, MEM_K, rng), np.full(MEM_K, 1.0 / MEM_K), noise_std=0.1)
    stream = GeneratorStream(d, model.sample, rng)
    tracemalloc.start()
    tracemalloc.reset_peak()
    t0 = time.perf_counter()
    res = online_power_method(stream, MEM_K, n_per_iter=MEM_N, n_restarts=MEM_L, n_iters=MEM_R, rng=rng)
    seconds = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    state = 8 * d * (MEM_K + MEM_L)
    return {"d": d, "peak_bytes": peak, "state_bytes_d_k_plus_L": state, "peak_over_state": peak / state,
            "seconds": seconds, "points": res.n_points, "explicit_tensor_bytes": 8 * d ** 3}


def recovery(n: int, rng: np.random.Generator) -> list[float]:
    errs = []
    w = np.arange(REC_K, 0, -1, dtype=float)
    for _ in range(REC_RUNS):
        V = orthonormal(REC_D, REC_K, rng)
        model = SkewedMixture(V, w / w.sum(), noise_std=0.2)
        res = online_power_method(GeneratorStream(REC_D, model.sample, rng), REC_K, n_per_iter=n,
                                  n_restarts=REC_L, n_iters=REC_R, rng=rng, chunk_size=4096)
        perm = np.argmax(np.abs(V.T @ res.eigenvectors), axis=1)
        signs = np.sign(np.sum(V * res.eigenvectors[:, perm], axis=0))
        errs.append(float(np.max(np.linalg.norm(res.eigenvectors[:, perm] * signs - V, axis=0))))
    return errs


def main() -> None:
    rng = np.random.default_rng(0)
    t_start = time.perf_counter()
    mem = []
    for d in MEM_DIMS:
        mem.append(peak_memory(d, rng))
        m = mem[-1]
        print(f"d = {d:>7,}: peak {m['peak_bytes'] / 2 ** 20:8.1f} MiB = {m['peak_over_state']:.2f} × 8d(k+L)"
              f"   ({m['seconds']:.1f}s, {m['points']} points; explicit tensor: {m['explicit_tensor_bytes']:.2e} B)")
    ds = np.array([m["d"] for m in mem], dtype=float)
    peaks = np.array([m["peak_bytes"] for m in mem], dtype=float)
    slope, intercept = np.polyfit(ds, peaks, 1)
    loglog = float(np.polyfit(np.log(ds), np.log(peaks), 1)[0])
    print(f"linear fit: {slope:.0f} bytes per dimension (8(k+L) = {8 * (MEM_K + MEM_L)}), log-log slope {loglog:.3f}")
    rec = {}
    for n in REC_NS:
        rec[n] = recovery(n, rng)
        print(f"n = {n:>6}: max component error, median of {REC_RUNS} runs = {np.median(rec[n]):.4f}")
    ns = np.array(REC_NS, dtype=float)
    med = np.array([np.median(rec[n]) for n in REC_NS])
    rate = float(np.polyfit(np.log(ns[-4:]), np.log(med[-4:]), 1)[0])
    print(f"error ~ n^{rate:.2f} over the last four n")
    out = {"memory": {"setup": {"k": MEM_K, "L": MEM_L, "R": MEM_R, "n_per_iter": MEM_N, "chunk_rows": MEM_K + MEM_L,
                                "measure": "tracemalloc peak during online_power_method"},
                      "runs": mem, "bytes_per_dim_fit": slope, "loglog_slope": loglog},
           "recovery": {"setup": {"d": REC_D, "k": REC_K, "L": REC_L, "R": REC_R, "runs": REC_RUNS, "noise_std": 0.2,
                                  "weights": "∝ (5,4,3,2,1)", "error": "max_i ‖v̂_i − v_i‖ after matching"},
                        "errors": {str(n): v for n, v in rec.items()}, "loglog_rate_last4": rate},
           "runtime_s": time.perf_counter() - t_start}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "online_memory.json").write_text(json.dumps(out, indent=2, ensure_ascii=False))
    plot(out)
    print(f"runtime {out['runtime_s']:.0f}s; wrote {RESULTS / 'online_memory.json'} and .png")


def plot(out: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    runs = out["memory"]["runs"]
    d = np.array([r["d"] for r in runs])
    a.loglog(d, [r["peak_bytes"] / 2 ** 20 for r in runs], "o-", label="Alg. 2 peak (tracemalloc)")
    a.loglog(d, [r["state_bytes_d_k_plus_L"] / 2 ** 20 for r in runs], "--", label="8·d·(k+L) bytes")
    a.loglog(d, [r["explicit_tensor_bytes"] / 2 ** 20 for r in runs], ":", label="explicit d³ tensor")
    a.set_xlabel("d")
    a.set_ylabel("MiB")
    a.set_title(f"peak memory, k={out['memory']['setup']['k']}, L={out['memory']['setup']['L']} "
                f"(log-log slope {out['memory']['loglog_slope']:.2f})")
    a.legend()
    errs = out["recovery"]["errors"]
    ns = np.array([int(n) for n in errs])
    med = np.array([np.median(v) for v in errs.values()])
    b.loglog(ns, med, "o-", label="median max ‖v̂_i − v_i‖")
    for n, v in errs.items():
        b.scatter([int(n)] * len(v), v, s=8, color="gray")
    b.loglog(ns, med[-1] * np.sqrt(ns[-1] / ns), "--", label="∝ 1/√n")
    b.set_xlabel("points per iteration n")
    b.set_ylabel("error")
    s = out["recovery"]["setup"]
    b.set_title(f"recovery, d={s['d']}, k={s['k']}, R={s['R']}, L={s['L']}")
    b.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "online_memory.png", dpi=90)


if __name__ == "__main__":
    main()
