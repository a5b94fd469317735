"""Files for tensor decomposition: parquet point streams, ``.npy`` tensors, and the
``decompose`` entry point behind ``distdp decompose`` and ``jobs/decompose.py``.

This is the IO layer over the pure math of :mod:`distdp.tensor.power`,
:mod:`~distdp.tensor.online` and :mod:`~distdp.tensor.dp`.

Point files (one parquet file or a directory of ``*.parquet``, read in
sorted order, one row per point):

- dense rows: a ``list<float>`` column (``x`` by default; any single list
  column is taken if there is no ``x``), every row of the same length d;
- sparse rows: ``indices: list<int>`` and ``values: list<float>`` of equal
  lengths; d from the file metadata key ``distdp.dim`` or the ``dim``
  argument.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from distdp.io.atomic import atomic_directory
from distdp.privacy import mechanisms
from distdp.tensor import dp, forms, online, power

__all__ = ["ParquetPointStream", "read_points", "load_tensor", "decompose", "write_points", "META_DIM"]

META_DIM = b"distdp.dim"
DENSE_COLUMN, INDICES, VALUES = "x", "indices", "values"


def _files(path) -> list[Path]:
    p = Path(path)
    if p.is_file():
        return [p]
    if p.is_dir():
        files = sorted(f for f in p.glob("*.parquet") if not f.name.startswith("."))
        if files:
            return files
        raise FileNotFoundError(f"{p}: directory holds no .parquet files")
    raise FileNotFoundError(f"{p}: no such file or directory")


class ParquetPointStream:
    """Points from parquet files, read batch by batch (never the whole file in memory).

    Parameters
    ----------
    path : str or Path
        A parquet file or a directory of them.
    column : str, optional
        Dense list column (default ``"x"``, or the only list column).
    dim : int, optional
        Dimension of sparse rows when the files carry no ``distdp.dim`` metadata.
    batch_size : int
        Rows per parquet read.
    """

    def __init__(self, path, column: str | None = None, dim: int | None = None, batch_size: int = 4096):
        self.files = _files(path)
        schema = pq.read_schema(self.files[0])
        names = schema.names
        self.sparse = INDICES in names and VALUES in names
        if self.sparse:
            meta = schema.metadata or {}
            d = dim if dim is not None else (int(meta[META_DIM]) if META_DIM in meta else None)
            if d is None:
                raise ValueError(f"{self.files[0]}: sparse rows need the dimension (metadata "
                                 f"'{META_DIM.decode()}' or dim=)")
            self.dim = int(d)
            self.column = None
        else:
            lists = [f.name for f in schema if pa.types.is_list(f.type) or pa.types.is_large_list(f.type)]
            self.column = column or (DENSE_COLUMN if DENSE_COLUMN in names else (lists[0] if len(lists) == 1
                                                                                 else None))
            if self.column is None or self.column not in names:
                raise ValueError(f"{self.files[0]}: no dense vector column (list<float> '{DENSE_COLUMN}') and no "
                                 f"sparse '{INDICES}'/'{VALUES}' columns; columns are {names}")
            first = pq.ParquetFile(self.files[0]).read_row_group(0, columns=[self.column]).column(0)
            if len(first) == 0:
                raise ValueError(f"{self.files[0]}: empty")
            self.dim = len(first[0])
        self.num_rows = sum(pq.ParquetFile(f).metadata.num_rows for f in self.files)
        self.batch_size = int(batch_size)
        self._batches = self._iter_batches()
        self._pending = None
        self._row = 0

    def _iter_batches(self):
        for f in self.files:
            pf = pq.ParquetFile(f)
            cols = [INDICES, VALUES] if self.sparse else [self.column]
            first = 0
            for b in pf.iter_batches(batch_size=self.batch_size, columns=cols):
                yield self._convert(b, f, first)
                first += b.num_rows

    def _convert(self, batch: pa.RecordBatch, f: Path, first: int):
        if self.sparse:
            idx, val = batch.column(0), batch.column(1)
            li, lv = np.diff(np.asarray(idx.offsets)), np.diff(np.asarray(val.offsets))
            bad = np.flatnonzero(li != lv)
            if bad.size:
                raise ValueError(f"{f}: row {first + bad[0]}: '{INDICES}' and '{VALUES}' differ in length")
            cols = np.asarray(idx.flatten(), dtype=np.int64)
            vals = np.asarray(val.flatten(), dtype=float)
            out_of_range = np.flatnonzero((cols < 0) | (cols >= self.dim))
            if out_of_range.size:
                row = int(np.repeat(np.arange(batch.num_rows), li)[out_of_range[0]])
                raise ValueError(f"{f}: row {first + row}: column '{INDICES}' has an index outside [0, {self.dim})")
            X = sp.csr_matrix((vals, cols, np.asarray(idx.offsets) - idx.offsets[0].as_py()),
                              shape=(batch.num_rows, self.dim))
        else:
            col = batch.column(0)
            lengths = np.diff(np.asarray(col.offsets))
            bad = np.flatnonzero(lengths != self.dim)
            if bad.size:
                raise ValueError(f"{f}: row {first + bad[0]}: column '{self.column}' has {lengths[bad[0]]} "
                                 f"entries, expected {self.dim}")
            X = np.asarray(col.flatten(), dtype=float).reshape(batch.num_rows, self.dim)
            vals = X
        if not np.all(np.isfinite(vals.data if sp.issparse(vals) else vals)):
            raise ValueError(f"{f}: rows {first}..{first + batch.num_rows - 1}: non-finite values")
        return X

    def read(self, m: int):
        """The next ≤ m points (dense array or CSR; empty when the files are exhausted)."""
        parts, got = [], 0
        while got < m:
            if self._pending is None:
                self._pending = next(self._batches, None)
                if self._pending is None:
                    break
            take = self._pending[:m - got]
            rest = self._pending[m - got:]
            self._pending = rest if rest.shape[0] else None
            parts.append(take)
            got += take.shape[0]
        self._row += got
        if not parts:
            return sp.csr_matrix((0, self.dim)) if self.sparse else np.zeros((0, self.dim))
        return sp.vstack(parts, format="csr") if self.sparse else np.vstack(parts)


def read_points(path, column: str | None = None, dim: int | None = None):
    """All points of parquet ``path`` as one (n, d) array or CSR matrix."""
    s = ParquetPointStream(path, column, dim)
    X = s.read(s.num_rows)
    if X.shape[0] == 0:
        raise ValueError(f"{path}: no points")
    return X


def write_points(path, X, row_group_size: int = 65536) -> None:
    """Write points to one parquet file: dense ``x: list<float64>`` or sparse ``indices``/``values``."""
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        offsets = pa.array(X.indptr.astype(np.int32))
        table = pa.table({INDICES: pa.ListArray.from_arrays(offsets, pa.array(X.indices.astype(np.int32))),
                          VALUES: pa.ListArray.from_arrays(offsets, pa.array(X.data.astype(float)))})
        table = table.replace_schema_metadata({META_DIM: str(X.shape[1]).encode()})
    else:
        X = np.asarray(X, dtype=float)
        offsets = pa.array(np.arange(0, X.size + 1, X.shape[1], dtype=np.int32))
        table = pa.table({DENSE_COLUMN: pa.ListArray.from_arrays(offsets, pa.array(X.ravel()))})
    pq.write_table(table, path, row_group_size=row_group_size)


def load_tensor(path) -> np.ndarray:
    """A symmetric d×d×d tensor from ``.npy`` (checked: cubic, finite, symmetric)."""
    T = np.load(path, allow_pickle=False)
    return forms.check_symmetric(T, name=f"input tensor {path}")


def _validate(k, epsilon, delta, n_restarts, n_iters, method, accounting) -> None:
    """Messages name the CLI option, since the CLI prints them as they are."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"--k must be a positive integer, got {k!r}")
    for name, v in (("--restarts", n_restarts), ("--iters", n_iters)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1):
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if method not in ("robust", "simultaneous", "online"):
        raise ValueError(f"--method must be robust, simultaneous or online, got {method!r}")
    if accounting not in ("paper", "tight"):
        raise ValueError(f"--accounting must be paper or tight, got {accounting!r}")
    if epsilon is not None or delta is not None:
        if epsilon is None or delta is None:
            raise ValueError("a private run needs both --epsilon and --delta")
        mechanisms.check_epsilon(epsilon, "--epsilon")
        mechanisms.check_delta(delta, "--delta")


def decompose(input_path, k: int, out, *, n_restarts: int | None = None, n_iters: int | None = None,
              method: str = "robust", epsilon: float | None = None, delta: float | None = None,
              accounting: str = "tight", neighbour: str | None = None, clip: float | None = None,
              n_per_iter: int | None = None, eigenvalue: str = "final", seed: int | None = None,
              reproducible: bool = False, overwrite: bool = False, column: str | None = None,
              dim: int | None = None, backend: str = "local", workers: int = 2) -> power.PowerResult:
    """Decompose a ``.npy`` symmetric tensor or a parquet point file and write ``out`` atomically.

    ``out`` receives ``eigenvalues.npy`` (k,), ``eigenvectors.npy`` (d, k)
    and ``report.json`` (parameters, timings, diagnostics and, for private
    runs, the privacy report with the PLD-certified ε). On any error nothing
    is left at ``out``.

    Parameters
    ----------
    input_path : path
        ``*.npy`` tensor, or parquet points (decomposed: their raw third
        moment ``(1/n) Σ x⊗x⊗x``, never formed).
    k : int
    out : path
    n_restarts, n_iters : int, optional
        ``L``, ``R`` (paper defaults otherwise).
    method : {"robust", "simultaneous", "online"}
        ``online`` needs parquet points and is not private.
    epsilon, delta : float, optional
        Both given: the private power method (Algorithm 3).
    accounting : {"tight", "paper"}
    neighbour : str, optional
        Default ``"symmetric-entry"`` for a tensor, ``"replace-one-point"``
        for points (which then need ``clip``).
    clip : float, optional
        Row norm bound for points (public).
    n_per_iter : int, optional
        Online: points per iteration (default: all rows / (k(R+1))).
    eigenvalue : {"final", "paper"}
        Online eigenvalue mode.
    seed : int, optional
        Non-private runs: seed of the starting vectors. Private runs: only
        with ``reproducible=True`` (the report then says "not private").
    backend : {"local", "ray"}
        Points only: shard actors on Ray (``workers`` shards).
    """
    t_start = time.perf_counter()
    _validate(k, epsilon, delta, n_restarts, n_iters, method, accounting)
    private = epsilon is not None
    if private and seed is not None and not reproducible:
        raise ValueError("--seed in a private run makes the noise reproducible: add --reproducible to accept "
                         "that the result is then not private")
    if private and method == "online":
        raise ValueError("--method online is not private; use robust or simultaneous with --epsilon")
    if backend not in ("local", "ray"):
        raise ValueError(f"--backend must be local or ray, got {backend!r}")
    path = Path(input_path)
    params = {"input": str(path), "k": k, "method": method, "n_restarts": n_restarts, "n_iters": n_iters,
              "epsilon": epsilon, "delta": delta, "accounting": accounting if private else None,
              "neighbour": neighbour, "clip": clip, "seed": seed, "backend": backend}
    timings = {}
    t0 = time.perf_counter()
    op = None
    cleanup = None
    if path.suffix == ".npy":
        if method == "online":
            raise ValueError("--method online reads points (parquet), not a .npy tensor")
        if backend != "local":
            raise ValueError("--backend ray applies to parquet points, not to a .npy tensor")
        op = power.ExplicitTensor(load_tensor(path))
        params["input_kind"] = "tensor"
        nb_default = "symmetric-entry"
    else:
        params["input_kind"] = "points"
        nb_default = "replace-one-point"
        if method == "online":
            stream = ParquetPointStream(path, column, dim)
        else:
            X = read_points(path, column, dim)
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
    timings["read_s"] = time.perf_counter() - t0
    d = int(op.dim if op is not None else stream.dim)
    if k > d:
        raise ValueError(f"--k = {k} exceeds the dimension d = {d}")

    rng = np.random.default_rng(seed) if (seed is not None) else None
    t0 = time.perf_counter()
    try:
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
                                 f"reads fresh points every iteration)")
            params["n_per_iter"], params["eigenvalue"] = n, eigenvalue
            res = online.online_power_method(stream, k, n_per_iter=n, n_restarts=n_restarts, n_iters=R,
                                             rng=rng or np.random.default_rng(), eigenvalue=eigenvalue)
        elif method == "simultaneous":
            res = power.simultaneous_power_method(op, k, n_iters=n_iters, rng=rng or np.random.default_rng())
        else:
            res = power.robust_power_method(op, k, n_restarts=n_restarts, n_iters=n_iters,
                                            rng=rng or np.random.default_rng())
    finally:
        if cleanup is not None:
            cleanup()
    timings["decompose_s"] = time.perf_counter() - t0

    with atomic_directory(out, overwrite=overwrite) as tmp:
        np.save(tmp / "eigenvalues.npy", res.eigenvalues)
        np.save(tmp / "eigenvectors.npy", res.eigenvectors)
        timings["total_s"] = time.perf_counter() - t_start
        report = {"parameters": params, "dim": d, "result": res.to_dict(), "timings": timings,
                  "private": bool(private and res.privacy.private)}
        (tmp / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False))
    return res
