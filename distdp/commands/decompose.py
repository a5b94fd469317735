"""``distdp decompose``: tensor power methods on a ``.npy`` tensor or a parquet point file."""
from __future__ import annotations

import argparse


def register(sub) -> None:
    """Add the ``decompose`` sub-command."""
    p = sub.add_parser("decompose", help="orthogonal tensor decomposition (robust / simultaneous / online / DP)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       description="Decompose a symmetric tensor (.npy) or the raw third moment of parquet "
                                   "points with the tensor power methods of Wang & Anandkumar (2016).")
    p.add_argument("input", help=".npy symmetric d×d×d tensor, or parquet file/directory of points "
                                 "(dense list<float> column 'x', or sparse 'indices'/'values'); "
                                 "the extension decides (case-insensitive)")
    p.add_argument("--k", type=int, required=True, help="number of components")
    p.add_argument("--restarts", type=int,
                   help="restarts L (default max(10, ⌈k ln 10k⌉); simultaneous: 1 when k = d)")
    p.add_argument("--iters", type=int, help="iterations R (default ⌈ln(d·10⁶)⌉; twice that for simultaneous "
                                             "with L = 1)")
    p.add_argument("--method", choices=["robust", "simultaneous", "online"], default="robust")
    p.add_argument("--epsilon", type=float, help="privacy ε (with --delta: DP power method, Algorithm 3)")
    p.add_argument("--delta", type=float, help="privacy δ in (0, 1)")
    p.add_argument("--accounting", choices=["paper", "tight"], default="tight",
                   help="noise from the paper's recipe (reproduction) or from tight PLD accounting")
    p.add_argument("--neighbour", choices=["symmetric-entry", "imtiaz-sarwate", "replace-one-point"],
                   help="neighbour notion (default: symmetric-entry for a tensor, replace-one-point for points)")
    p.add_argument("--clip", type=float, help="public norm bound of each point (private runs on points only)")
    p.add_argument("--n-per-iter", type=int, help="online: points read per iteration")
    p.add_argument("--eigenvalue", choices=["final", "paper"], default="final",
                   help="online: eigenvalue at u_R (final) or, as printed, at u_(R-1) (paper)")
    p.add_argument("--seed", type=int, help="seed (private runs only with --reproducible)")
    p.add_argument("--reproducible", action="store_true",
                   help="accept a seeded, reproducible run; with --epsilon the report says 'not private'")
    p.add_argument("--column", help="dense vector column of the parquet points (default 'x')")
    p.add_argument("--dim", type=int, help="dimension of sparse points without distdp.dim metadata")
    p.add_argument("--symmetry-tol", type=float,
                   help="tensor: allowed max|T−Tᵀ| relative to max|T| (default by dtype: 1e-8 for float64, "
                        "64·eps ≈ 7.6e-6 for float32)")
    p.add_argument("--backend", choices=["local", "ray"], default="local",
                   help="points only: hold the shards in Ray actors")
    p.add_argument("--workers", type=int, default=2, help="shards of the points")
    p.add_argument("--out", required=True, help="output directory (written atomically; checked before any work)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing output directory (never an existing file)")
    p.set_defaults(func=run)


def run(args) -> int:
    """Decompose, write ``--out``, print the eigenvalues and the privacy summary (warnings: :func:`distdp.cli.main`)."""
    from distdp.decompose import decompose

    res = decompose(args.input, args.k, args.out, n_restarts=args.restarts, n_iters=args.iters,
                    method=args.method, epsilon=args.epsilon, delta=args.delta, accounting=args.accounting,
                    neighbour=args.neighbour, clip=args.clip, n_per_iter=args.n_per_iter,
                    eigenvalue=args.eigenvalue, seed=args.seed, reproducible=args.reproducible,
                    overwrite=args.overwrite, column=args.column, dim=args.dim, backend=args.backend,
                    workers=args.workers, symmetry_tol=args.symmetry_tol)
    print("eigenvalues:", " ".join(f"{x:.6g}" for x in res.eigenvalues))
    if res.privacy is not None:
        r = res.privacy
        status = "private" if r.private else "NOT PRIVATE (seeded)"
        print(f"{status}: {r.accounting} accounting, {r.details['releases']} releases, noise multiplier "
              f"{r.details['noise_multiplier']:.4g}; PLD certifies ε = {r.epsilon:.4g} at δ = {r.delta:g}")
    print(f"wrote {args.out}")
    return 0
