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
its per-entry cost extrapolated (``"extrapolated": true``). Writes
``benchmarks/results/noise_samplers.json``::

    python benchmarks/noise_samplers.py [--out PATH] [--opendp-max 100000]
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


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "noise_samplers.json"))
    ap.add_argument("--opendp-max", type=int, default=10 ** 5,
                    help="largest release timed with OpenDP; larger ones are extrapolated per entry")
    a = ap.parse_args(argv)
    res = run(a.opendp_max)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print("wrote", a.out)


if __name__ == "__main__":
    main()
