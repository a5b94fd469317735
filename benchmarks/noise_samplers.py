"""Cost of the noise samplers of private runs (issue B4): numpy vs OpenDP vs the CSPRNG lattice sampler.

Times adding Gaussian and Laplace noise to a release of 10³, 10⁵ and 10⁷
(= k×d = 100 × 100,000) entries, median of 3 runs, with:

* ``numpy``: ``value + rng.standard_normal(n)·σ`` / ``rng.laplace`` on PCG64 (the old
  source, and today's seeded reproducible runs);
* ``opendp``: OpenDP's ``make_gaussian`` / ``make_laplace`` on the value (exact
  samplers; used for releases ≤ ``mechanisms.OPENDP_MAX_ENTRIES`` entries);
* ``lattice``: :class:`distdp.privacy.mechanisms.SecureNoise`'s CSPRNG lattice sampler
  (larger releases).

OpenDP at 10⁷ entries would take tens of minutes: it is timed on 10⁵ entries and
its per-entry cost extrapolated (``"extrapolated": true``).

The two mechanisms without a vetted sampler (``csprng_rows``): the ℓ2-vector
mechanism (vectors of dimension 100, 10³–10⁵ of them) and one product of the
matrix-free whitening operator (d = 1,000 and 4,000, 30 columns), with numpy's
PCG64 (seeded runs) and with the private run's cryptographic bits
(``os.urandom`` inverse CDFs; SHAKE-256 keyed tiles). Writes
``benchmarks/results/noise_samplers.json``::

    python benchmarks/noise_samplers.py [--out PATH] [--opendp-max 100000]
    python benchmarks/noise_samplers.py --csprng-only      # only csprng_rows, merged into the JSON
"""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from distdp.privacy import mechanisms as M

SIZES = (10 ** 3, 10 ** 5, 10 ** 7)


def _median_time(f, repeats: int = 3) -> float:
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def run(opendp_max: int) -> dict:
    secure = M.private_generator()
    np_rng = np.random.default_rng()
    rows = []
    for n in SIZES:
        x = np.zeros(n)
        for kind in ("gaussian", "laplace"):
            numpy_f = ((lambda: x + np_rng.standard_normal(n) * 1.0) if kind == "gaussian"
                       else (lambda: x + np_rng.laplace(0.0, 1.0, size=n)))
            t_np = _median_time(numpy_f)
            t_lat = _median_time(lambda: secure.add(x, 1.0, kind, method="lattice"))
            m = min(n, opendp_max)
            xm = np.zeros(m)
            t_odp = _median_time(lambda: secure.add(xm, 1.0, kind, method="opendp"), 1 if m > 10 ** 4 else 3)
            t_odp *= n / m
            rows.append({"entries": n, "mechanism": kind, "numpy_s": t_np, "opendp_s": t_odp,
                         "opendp_extrapolated": m < n, "lattice_s": t_lat,
                         "opendp_over_numpy": t_odp / t_np, "lattice_over_numpy": t_lat / t_np,
                         "used_in_private_runs": "opendp" if n <= M.OPENDP_MAX_ENTRIES else "lattice"})
            print(f"{n:>10} {kind:9} numpy {t_np:9.4f}s  opendp {t_odp:10.3f}s{'*' if m < n else ' '}  "
                  f"lattice {t_lat:8.4f}s", flush=True)
    return {"sizes": list(SIZES), "repeats": 3, "opendp_max_entries": M.OPENDP_MAX_ENTRIES,
            "opendp_timed_up_to": opendp_max, "rows": rows,
            "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                        "python": platform.python_version(), "numpy": np.__version__,
                        "opendp": importlib.metadata.version("opendp")}}


def run_csprng() -> list[dict]:
    """Seconds of the ℓ2-vector mechanism and of one operator product, numpy's PCG64 against cryptographic bits."""
    secure, np_rng = M.private_generator(), np.random.default_rng()
    rows = []
    for n_vec in (10 ** 3, 10 ** 5):
        t_np = _median_time(lambda: M.l2_vector_noise(100, 1.0, np_rng, size=n_vec))
        t_cs = _median_time(lambda: M.l2_vector_noise(100, 1.0, secure, size=n_vec))
        rows.append({"mechanism": "l2-vector", "size": f"{n_vec} vectors of dimension 100", "numpy_s": t_np,
                     "csprng_s": t_cs, "csprng_over_numpy": t_cs / t_np})
        print(f"l2-vector {n_vec:>7} x 100  numpy {t_np:8.4f}s  csprng {t_cs:8.4f}s", flush=True)
    for d in (1000, 4000):
        X = np.random.default_rng(0).standard_normal((d, 30))
        t_np = _median_time(lambda: M.SymmetricNoiseOperator(d, 1.0, np_rng).matmat(X))
        t_cs = _median_time(lambda: M.SymmetricNoiseOperator(d, 1.0, secure).matmat(X))
        rows.append({"mechanism": "operator", "size": f"one product, d = {d}, 30 columns", "numpy_s": t_np,
                     "csprng_s": t_cs, "csprng_over_numpy": t_cs / t_np})
        print(f"operator d={d:>5} x 30  numpy {t_np:8.4f}s  shake256 {t_cs:8.4f}s", flush=True)
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "noise_samplers.json"))
    ap.add_argument("--opendp-max", type=int, default=10 ** 5,
                    help="largest release timed with OpenDP; larger ones are extrapolated per entry")
    ap.add_argument("--csprng-only", action="store_true", help="only the csprng rows, merged into --out")
    a = ap.parse_args(argv)
    if a.csprng_only and Path(a.out).exists():
        res = json.loads(Path(a.out).read_text())
    else:
        res = run(a.opendp_max)
    res["csprng_rows"] = run_csprng()
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print("wrote", a.out)


if __name__ == "__main__":
    main()
