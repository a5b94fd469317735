"""``distdp decompose``: decompose a ``.npy`` symmetric tensor or a parquet point file, and write the result.

The entry point behind ``distdp decompose`` and ``jobs/decompose.py``, over
the readers of :mod:`distdp.tensor.files` and the power methods of
:mod:`distdp.tensor.power`, :mod:`~distdp.tensor.online` and
:mod:`~distdp.tensor.dp`; points may be sharded over Ray actors
(:mod:`distdp.distributed.stream`). Messages of :func:`decompose` name the
CLI option (``--k``, ``--column``...), since the CLI prints them as they are.
"""
from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import numpy as np

from distdp.io.atomic import atomic_directory, check_output_dir
from distdp.privacy import mechanisms
from distdp.tensor import dp, files, online, power
from distdp.tensor.files import ParquetPointStream, input_kind, read_points

__all__ = ["decompose", "check_output_path", "delta_warning"]


def _check_int(name: str, v, minimum: int = 1, what: str | None = None) -> None:
    """Refuse an optional option ``name`` that is not an integer ≥ ``minimum`` (None passes)."""
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum):
        raise ValueError(f"{name} must be {what or f'an integer ≥ {minimum}'}, got {v!r}")


def _validate(k, epsilon, delta, n_restarts, n_iters, method, accounting, n_per_iter=None, clip=None,
              symmetry_tol=None, dim=None, workers=2, eigenvalue="final") -> None:
    """Messages name the CLI option, since the CLI prints them as they are."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"--k must be a positive integer, got {k!r}")
    for name, v in (("--restarts", n_restarts), ("--iters", n_iters)):
        _check_int(name, v, what="a positive integer")
    _check_int("--n-per-iter", n_per_iter)
    _check_int("--dim", dim)
    _check_int("--workers", workers)
    if method not in ("robust", "simultaneous", "online"):
        raise ValueError(f"--method must be robust, simultaneous or online, got {method!r}")
    if accounting not in ("paper", "tight"):
        raise ValueError(f"--accounting must be paper or tight, got {accounting!r}")
    if eigenvalue not in ("final", "paper"):
        raise ValueError(f"--eigenvalue must be final or paper, got {eigenvalue!r}")
    if n_per_iter is not None and method != "online":
        raise ValueError("--n-per-iter applies to --method online only")
    if clip is not None and not (np.isfinite(clip) and clip > 0):
        raise ValueError(f"--clip must be finite and > 0, got {clip!r}")
    if symmetry_tol is not None and not (np.isfinite(symmetry_tol) and symmetry_tol >= 0):
        raise ValueError(f"--symmetry-tol must be finite and ≥ 0, got {symmetry_tol!r}")
    if epsilon is not None or delta is not None:
        if epsilon is None or delta is None:
            raise ValueError("a private run needs both --epsilon and --delta")
        mechanisms.check_epsilon(epsilon, "--epsilon")
        mechanisms.check_delta(delta, "--delta")


def check_output_path(out, overwrite: bool = False) -> Path:
    """:func:`distdp.io.atomic.check_output_dir` with the error naming ``--out``."""
    try:
        return check_output_dir(out, overwrite)
    except FileExistsError as exc:
        raise FileExistsError(f"--out {exc}") from None


def delta_warning(delta: float, n: int, unit: str) -> str | None:
    """The warning for ``δ ≥ 1/n`` (a mechanism publishing one of the ``n`` units at random meets it)."""
    if delta >= 1.0 / n:
        return (f"--delta {delta:g} ≥ 1/n = {1.0 / n:.3g} for n = {n} {unit}: a mechanism that publishes one of "
                "them at random satisfies it; use δ ≪ 1/n")
    return None


def decompose(input_path, k: int, out, *, n_restarts: int | None = None, n_iters: int | None = None,
              method: str = "robust", epsilon: float | None = None, delta: float | None = None,
              accounting: str = "tight", neighbour: str | None = None, clip: float | None = None,
              n_per_iter: int | None = None, eigenvalue: str = "final", seed: int | None = None,
              reproducible: bool = False, overwrite: bool = False, column: str | None = None,
              dim: int | None = None, backend: str = "local", workers: int = 2,
              symmetry_tol: float | None = None) -> power.PowerResult:
    """Decompose a ``.npy`` symmetric tensor or a parquet point file and write ``out`` atomically.

    ``out`` receives ``eigenvalues.npy`` (k,), ``eigenvectors.npy`` (d, k)
    and ``report.json`` (parameters, timings, diagnostics, warnings and, for
    private runs, the privacy report with the PLD-certified ε). ``out`` is
    checked before any work; on any error nothing is left at ``out``.

    Parameters
    ----------
    input_path : path
        ``*.npy`` tensor, or parquet points (decomposed: their raw third
        moment ``(1/n) Σ x⊗x⊗x``, never formed). The extension decides,
        case-insensitively; other formats are refused.
    k : int
    out : path
        A directory (created); an existing file is refused.
    n_restarts, n_iters : int, optional
        ``L``, ``R`` (paper defaults otherwise).
    method : {"robust", "simultaneous", "online"}
        ``online`` needs parquet points and is not private.
    epsilon, delta : float, optional
        Both given: the private power method (Algorithm 3). A warning is
        issued when ``δ ≥ 1/n`` (``n`` points, or the ``C(d+2,3)`` distinct
        entries a tensor neighbour changes).
    accounting : {"tight", "paper"}
    neighbour : str, optional
        Private runs only. Default ``"symmetric-entry"`` for a tensor,
        ``"replace-one-point"`` for points (which then need ``clip``).
    clip : float, optional
        Public row-norm bound of the points; private runs on points only (a
        non-private run would silently change the data, so it is refused).
    n_per_iter : int, optional
        Online: points per iteration (default: all rows / (k(R+1))).
    eigenvalue : {"final", "paper"}
        Online eigenvalue mode.
    seed : int, optional
        Non-private runs: seed of the starting vectors. Private runs: only
        with ``reproducible=True`` (the report then says "not private").
    column, dim : optional
        Points only: dense vector column; dimension of sparse rows.
    backend : {"local", "ray"}
        Points only: shard actors on Ray (``workers`` shards).
    symmetry_tol : float, optional
        Tensor only: symmetry tolerance relative to ``max |T|`` (default by
        the stored dtype, :func:`distdp.tensor.forms.symmetry_tolerance`).

    Warns
    -----
    UserWarning
        Large δ; the simultaneous method without restarts on ``k < d``.
        Warnings are also listed in ``report.json`` under ``"warnings"``.
    """
    t_start = time.perf_counter()
    _validate(k, epsilon, delta, n_restarts, n_iters, method, accounting, n_per_iter, clip, symmetry_tol, dim,
              workers, eigenvalue)
    private = epsilon is not None
    if private and seed is not None and not reproducible:
        raise ValueError("--seed in a private run makes the noise reproducible: add --reproducible to accept "
                         "that the result is then not private")
    if private and reproducible and seed is None:
        raise ValueError("--reproducible needs --seed (the seed of the reproducible, not private, noise)")
    if private and method == "online":
        raise ValueError("--method online is not private; use robust or simultaneous with --epsilon")
    if not private and neighbour is not None:
        raise ValueError("--neighbour applies to private runs (with --epsilon and --delta)")
    if backend not in ("local", "ray"):
        raise ValueError(f"--backend must be local or ray, got {backend!r}")
    check_output_path(out, overwrite)
    path = Path(input_path)
    kind = input_kind(path)
    if kind == "tensor":
        for flag, v in (("--clip", clip), ("--column", column), ("--dim", dim)):
            if v is not None:
                raise ValueError(f"{flag} applies to parquet points, not to a .npy tensor ({path})")
        if method == "online":
            raise ValueError("--method online reads points (parquet), not a .npy tensor")
        if backend != "local":
            raise ValueError("--backend ray applies to parquet points, not to a .npy tensor")
    else:
        if symmetry_tol is not None:
            raise ValueError(f"--symmetry-tol applies to a .npy tensor, not to parquet points ({path})")
        if clip is not None and not private:
            raise ValueError("--clip applies to private runs on points (it bounds each point's norm for the "
                             "replace-one-point neighbour); without --epsilon it would silently rescale the data "
                             "and change the moment being decomposed — clip the points yourself if that is meant")
    params = {"input": str(path), "k": k, "method": method, "n_restarts": n_restarts, "n_iters": n_iters,
              "epsilon": epsilon, "delta": delta, "accounting": accounting if private else None,
              "neighbour": neighbour, "clip": clip, "seed": seed, "backend": backend}
    timings = {}
    notes: list[str] = []
    t0 = time.perf_counter()
    op = None
    cleanup = None
    if kind == "tensor":
        op = files.tensor_operator(path, symmetry_tol)
        params["input_kind"] = "tensor"
        params["symmetry_tol"] = symmetry_tol
        nb_default = "symmetric-entry"
        n_units, unit = mechanisms.n_unique_entries(op.dim), "distinct tensor entries (the unit a neighbour changes)"
    else:
        params["input_kind"] = "points"
        nb_default = "replace-one-point"
        if method == "online":
            stream = ParquetPointStream(path, column, dim)
            n_units = stream.num_rows
        else:
            X = read_points(path, column, dim)
            n_units = X.shape[0]
            if private and (neighbour or nb_default) == "replace-one-point" and clip is None:
                raise ValueError("--clip is required for private decomposition of points (neighbours replace "
                                 "one point; its norm bound must be public)")
            shards = np.array_split(np.arange(X.shape[0]), max(1, workers))
            parts = [X[idx[0]:idx[-1] + 1] for idx in shards if idx.size]
            if backend == "ray":
                from distdp.distributed.backend import ensure_ray
                from distdp.distributed.stream import RayEmpiricalMoment

                ensure_ray()
                op = RayEmpiricalMoment(parts, clip_bound=clip)
                cleanup = op.shutdown
            else:
                op = power.EmpiricalMoment(parts, clip_bound=clip)
        unit = "points"
    timings["read_s"] = time.perf_counter() - t0
    try:
        d = int(op.dim if op is not None else stream.dim)
        if k > d:
            raise ValueError(f"--k = {k} exceeds the dimension d = {d}")
        if private:
            msg = delta_warning(delta, n_units, unit)
            if msg is not None:
                notes.append(msg)
                warnings.warn(msg, UserWarning, stacklevel=2)

        rng = np.random.default_rng(seed) if (seed is not None) else None
        t0 = time.perf_counter()
        if private:
            res = dp.private_power_method(op, k, epsilon=epsilon, delta=delta, n_restarts=n_restarts,
                                          n_iters=n_iters, accounting=accounting,
                                          neighbour=neighbour or nb_default, method=method,
                                          rng=rng, reproducible=reproducible)
        elif method == "online":
            R = power.resolve_iters(n_iters, d)
            passes = k * (R + (eigenvalue == "final"))
            n = n_per_iter if n_per_iter is not None else stream.num_rows // passes
            if n < 1:
                raise ValueError(f"{stream.num_rows} points are too few for k = {k}, R = {R} (Algorithm 2 "
                                 f"reads fresh points every iteration: at least {passes} are needed)")
            params["n_per_iter"], params["eigenvalue"] = n, eigenvalue
            try:
                res = online.online_power_method(stream, k, n_per_iter=n, n_restarts=n_restarts, n_iters=R,
                                                 rng=rng or np.random.default_rng(), eigenvalue=eigenvalue)
            except ValueError as exc:
                if "ran out" in str(exc) and n_per_iter is not None:
                    raise ValueError(f"--n-per-iter {n_per_iter}: {exc}") from None
                raise
        elif method == "simultaneous":
            res = power.simultaneous_power_method(op, k, n_restarts=n_restarts, n_iters=n_iters,
                                                  rng=rng or np.random.default_rng())
        else:
            res = power.robust_power_method(op, k, n_restarts=n_restarts, n_iters=n_iters,
                                            rng=rng or np.random.default_rng())
    finally:
        if cleanup is not None:
            cleanup()
    timings["decompose_s"] = time.perf_counter() - t0
    notes.extend(res.notes)

    with atomic_directory(out, overwrite=overwrite) as tmp:
        np.save(tmp / "eigenvalues.npy", res.eigenvalues)
        np.save(tmp / "eigenvectors.npy", res.eigenvectors)
        timings["total_s"] = time.perf_counter() - t_start
        report = {"parameters": params, "dim": d, "result": res.to_dict(), "timings": timings,
                  "private": bool(private and res.privacy.private), "warnings": notes}
        (tmp / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False))
    return res
