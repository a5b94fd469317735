"""``distdp complete``: CP / Tucker tensor completion with optional differential privacy (paper: dp-tensor-completion-cp-tucker)."""
from __future__ import annotations

import argparse


def register(sub) -> None:
    """Add the ``complete`` sub-command."""
    p = sub.add_parser("complete", help="complete a partially observed 3-way tensor (CP or Tucker), optionally DP",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("input", help="parquet COO file (columns i, j, k, value), a directory of them, or .npy tensor "
                                 "with NaN for missing")
    p.add_argument("--rank", type=int, required=True,
                   help="CP rank R, or Tucker core size R×R×R (Tucker: at most the smallest dimension)")
    p.add_argument("--model", choices=["cp", "tucker"], default="cp")
    p.add_argument("--perturbation", choices=["none", "input", "gradient", "gradient-paper", "output"],
                   default="none", help="gradient: sound DP-SGD with a guarantee; gradient-paper and output: "
                                        "the paper's mechanisms, reproductions without a guarantee")
    p.add_argument("--epsilon", type=float, help="privacy budget ε (required with a perturbation, refused without)")
    p.add_argument("--delta", type=float, help="δ of the gradient perturbation (default min(1e-5, 1/(10 n)); "
                                               "refused by the others)")
    p.add_argument("--holdout", type=float, default=0.2, help="share of observed entries held out for test RMSE")
    p.add_argument("--bounds", type=float, nargs=2, metavar=("LO", "HI"),
                   help="declared public value range, required by every perturbation (its midpoint is the default "
                        "--offset; predictions are clamped to it; input: values clamped to it; gradient: sets the "
                        "default projection radius)")
    p.add_argument("--allow-data-bounds", action="store_true",
                   help="input perturbation without --bounds: take them from the data (NOT private)")
    p.add_argument("--no-clamp-noisy", action="store_true", help="input: keep noisy values outside the bounds")
    p.add_argument("--clip", type=float, help="gradient: clipping norm C; gradient-paper: m (default 0.1; refused "
                                               "by the other perturbations)")
    p.add_argument("--lipschitz", type=float, help="output: L in Δ = 2τLη, paper gives none (default 1; refused by "
                                                   "the other perturbations)")
    p.add_argument("--solver", choices=["auto", "als", "sgd"], default="auto",
                   help="auto: alternating least squares for --perturbation none/input (unless --lr, --batch-size "
                        "or a projection radius is given), SGD for gradient, gradient-paper and output")
    p.add_argument("--lr", type=float, help="SGD learning rate η (default 0.05)")
    p.add_argument("--epochs", type=int, help="SGD: passes over the training entries (default 100); ALS: the most "
                                              "sweeps (default 500)")
    p.add_argument("--batch-size", type=int, help="entries per SGD step (default 64)")
    p.add_argument("--lam", type=float, help="λ (CP) or λo (Tucker). Default: ALS chooses it by the RMSE on 10%% of "
                                             "the training entries held out (a path around c·σ^p); SGD the paper's")
    p.add_argument("--lam-core", type=float, help="λg (Tucker). Default: ALS λo/10; SGD the paper's")
    p.add_argument("--tol", type=float, help="stop when the objective's relative decrease falls below this "
                                             "(none/input; default ALS 1e-5, under input 1e-7; SGD 0: all passes)")
    p.add_argument("--offset", type=float,
                   help="constant subtracted before fitting (public in a private fit). Default: the midpoint of "
                        "--bounds; without --bounds the training mean with --perturbation none, else 0")
    p.add_argument("--max-row-norm", type=float,
                   help="public radius: project every factor row onto this ℓ2 ball after each step (no privacy "
                        "cost). Default for gradient: from --bounds, --offset and --rank (CP (B)^(1/3), Tucker "
                        "(B/R)^(1/4), B = max(HI − offset, offset − LO)); 'inf' disables")
    p.add_argument("--max-core-norm", type=float,
                   help="Tucker: public Frobenius radius of the core (default B / r³ when --bounds is given)")
    p.add_argument("--shards", type=int,
                   help="hold the observed entries in this many Ray actors, each reading its part of the parquet "
                        "COO (large sparse tensors; non-private ALS only; the hold-out is drawn per shard)")
    p.add_argument("--address", help="with --shards: an existing Ray cluster (default: a local instance)")
    p.add_argument("--shape", type=int, nargs=3, metavar=("N1", "N2", "N3"), help="tensor shape of a COO file")
    p.add_argument("--seed", type=int, help="fixes split, initialisation and visiting order (≥ 0)")
    p.add_argument("--reproducible", action="store_true", help="seed the noise too (the fit is then NOT private)")
    p.add_argument("--out", required=True, help="output directory (written atomically)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=run)


# how error messages of distdp.completion.complete name its parameters here: the flags of this command
FLAGS = {name: "--" + name.replace("_", "-") for name in (
    "rank", "model", "perturbation", "epsilon", "delta", "holdout", "bounds", "allow_data_bounds", "clip",
    "lipschitz", "lr", "epochs", "batch_size", "lam", "lam_core", "tol", "offset", "max_row_norm", "max_core_norm",
    "shape", "seed", "reproducible", "solver")}
FLAGS["clamp_noisy"] = "--no-clamp-noisy"


def run(args) -> int:
    """Fit, write the factors and report.json, print a summary."""
    from tqdm.auto import tqdm

    from distdp.completion import complete, parameter_names
    from distdp.completion.api import PERTURBATION_FIELDS, SOLVER_FIELDS, grouped
    from distdp.completion.io import write_result
    from distdp.io.atomic import check_output_dir

    check_output_dir(args.out, args.overwrite)   # refuse an existing --out before any work
    bar = None if args.no_progress else tqdm(total=args.epochs, desc="complete", unit="pass", leave=False)

    def progress(epoch, total, objective):
        if bar.total != total:
            bar.total = total
        bar.update(1)
        bar.set_postfix(objective=f"{objective:.4g}")

    try:
        with parameter_names(FLAGS):
            if args.shards is not None:
                res = _sharded(args)
            else:
                flags = {name: getattr(args, name) for name in (*PERTURBATION_FIELDS, *SOLVER_FIELDS)
                         if name not in ("clamp_noisy", "init_scale")}          # the CLI has no --init-scale
                res = complete(args.input, args.rank, model=args.model, holdout=args.holdout,
                               bounds=tuple(args.bounds) if args.bounds else None, offset=args.offset,
                               max_row_norm=args.max_row_norm, max_core_norm=args.max_core_norm, seed=args.seed,
                               shape=tuple(args.shape) if args.shape else None,
                               progress=None if bar is None else progress,
                               **grouped({**flags, "clamp_noisy": not args.no_clamp_noisy}))
    finally:
        if bar is not None:
            bar.close()
    write_result(res, args.out, overwrite=args.overwrite, extra={"input": str(args.input)})
    pr = res.privacy
    guarantee = (f"({pr.epsilon:.4g}, {pr.delta:.3g})-DP" if pr.private else
                 "NOT PRIVATE: " + "; ".join(pr.not_private_because[:1]))
    rmse = "n/a" if res.test_rmse is None else f"{res.test_rmse:.5g}"
    diverged = f"  DIVERGED from pass {res.trace.diverged_pass}" if res.trace.diverged else ""
    unit = "sweeps" if res.config["solver"] == "als" else "passes"
    status = "converged" if res.trace.converged else "not converged"
    base = ""
    if res.baselines:
        base = "  baselines: " + ", ".join(f"{k} {v['test_rmse']:.5g}" for k, v in res.baselines.items())
    lam = ""
    if res.config["solver"] == "als":
        path = res.config.get("lam_path")
        lam = f", λ {res.config['lam']:.4g} " + (f"chosen from {len(path['steps'])} on a path" if path else
                                                  "given" if res.config["lam_source"] == "given" else "by rule")
    print(f"wrote {args.out}  test RMSE {rmse}{base}  ({res.config['solver'].upper()}, {res.trace.epochs_run} "
          f"{unit}, {status}{lam}, {res.timings['total']:.2f}s)  privacy: {guarantee}{diverged}")
    return 0


def _sharded(args):
    """``--shards N``: the Ray-sharded non-private ALS (:func:`distdp.distributed.completion.sharded_complete`)."""
    if args.shards < 1:
        raise ValueError(f"--shards must be an integer ≥ 1, got {args.shards}")
    refused = [flag for flag, on in (("--perturbation", args.perturbation != "none"), ("--solver sgd",
                                     args.solver == "sgd"), ("--lr", args.lr is not None),
                                    ("--batch-size", args.batch_size is not None),
                                    ("--max-row-norm", args.max_row_norm is not None),
                                    ("--max-core-norm", args.max_core_norm is not None)) if on]
    if refused:
        raise ValueError(f"--shards runs the non-private ALS only: drop {refused[0]} (private and SGD fits run "
                         "in one process)")
    from distdp.distributed.completion import sharded_complete

    return sharded_complete(args.input, args.rank, model=args.model, n_shards=args.shards, holdout=args.holdout,
                            seed=args.seed, lam=args.lam, lam_core=args.lam_core, tol=args.tol, epochs=args.epochs,
                            offset=args.offset, bounds=tuple(args.bounds) if args.bounds else None,
                            shape=tuple(args.shape) if args.shape else None, address=args.address)
