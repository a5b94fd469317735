"""Files for tensor decomposition: parquet point streams and ``.npy`` tensors.

This is the IO layer over the pure math of :mod:`distdp.tensor.power`,
:mod:`~distdp.tensor.online` and :mod:`~distdp.tensor.dp`; the
``decompose`` entry point behind ``distdp decompose`` is
:func:`distdp.decompose.decompose`.

Point files (one parquet file or a directory of ``*.parquet``, read in
sorted order, one row per point):

- dense rows: a ``list<float>`` column (``x`` by default; any single list
  column is taken if there is no ``x``), every row of the same length d;
- sparse rows: ``indices: list<int>`` and ``values: list<float>`` of equal
  lengths; d from the file metadata key ``distdp.dim`` or the ``dim``
  argument.

Errors name the file and, for bad rows, the row.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from distdp.tensor import forms, power

__all__ = ["ParquetPointStream", "read_points", "load_tensor", "tensor_operator", "write_points", "META_DIM",
           "input_kind"]

META_DIM = b"distdp.dim"
DENSE_COLUMN, INDICES, VALUES = "x", "indices", "values"
NPY_MAGIC, PARQUET_MAGIC = b"\x93NUMPY", b"PAR1"


def _files(path) -> list[Path]:
    p = Path(path)
    if p.is_file():
        return [p]
    if p.is_dir():
        files = sorted(f for f in p.iterdir()
                       if f.is_file() and f.suffix.lower() == ".parquet" and not f.name.startswith("."))
        if files:
            return files
        raise FileNotFoundError(f"{p}: directory holds no .parquet files")
    raise FileNotFoundError(f"{p}: no such file or directory")


def input_kind(path) -> str:
    """``"tensor"`` (.npy) or ``"points"`` (parquet file or directory) for ``path``.

    Dispatch is on the extension, case-insensitively (``.npy``, ``.parquet``);
    a file with another extension is recognised by its magic bytes.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        Any other format (``.npz``, ``.csv``, ...), naming the file.
    """
    p = Path(path)
    if p.is_dir():
        return "points"
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or directory")
    ext = p.suffix.lower()
    if ext == ".npy":
        return "tensor"
    if ext == ".parquet":
        return "points"
    with open(p, "rb") as fh:
        head = fh.read(6)
    if head.startswith(NPY_MAGIC):
        return "tensor"
    if head.startswith(PARQUET_MAGIC):
        return "points"
    raise ValueError(f"{p}: unsupported input format {p.suffix or '(no extension)'!r}: expected a .npy symmetric "
                     "tensor (numpy.save; not .npz) or parquet points (.parquet file or directory; convert a "
                     "CSV with distdp.tensor.files.write_points)")


def _list_value_type(t: pa.DataType):
    """Value type of a list / large list / fixed-size list type, else None."""
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return t.value_type
    return None


def _is_number(t: pa.DataType) -> bool:
    return pa.types.is_floating(t) or pa.types.is_integer(t)


def _read_schema(f: Path) -> pa.Schema:
    try:
        return pq.read_schema(f)
    except (pa.ArrowException, OSError) as exc:
        raise ValueError(f"{f}: not a readable parquet file ({exc})") from None


def _first_null(arr) -> int:
    return int(np.flatnonzero(np.asarray(arr.is_null()))[0])


class ParquetPointStream:
    """Points from parquet files, read batch by batch (never the whole file in memory).

    Parameters
    ----------
    path : str or Path
        A parquet file or a directory of them.
    column : str, optional
        Dense vector column (``list``, ``large_list`` or ``fixed_size_list`` of
        numbers). Default ``"x"``, or the only list column; sparse
        ``indices``/``values`` columns are used when there is neither and no
        ``column`` is given.
    dim : int, optional
        Dimension of sparse rows when the files carry no ``distdp.dim``
        metadata; for dense rows (or with metadata) it must agree with the data.
    batch_size : int
        Rows per parquet read.

    Raises
    ------
    ValueError
        A missing column, a column of the wrong type, a ``dim`` that
        disagrees; while reading, a null, ragged or non-finite row (naming the
        file and row).
    """

    def __init__(self, path, column: str | None = None, dim: int | None = None, batch_size: int = 4096):
        self.files = _files(path)
        f0 = self.files[0]
        schema = _read_schema(f0)
        names = schema.names
        if column is not None and column not in names:
            raise ValueError(f"{f0}: column {column!r} (--column) does not exist; the columns are {names}")
        self.sparse = column is None and INDICES in names and VALUES in names
        if self.sparse:
            self._check_sparse_schema(f0, schema)
            meta = schema.metadata or {}
            meta_dim = int(meta[META_DIM]) if META_DIM in meta else None
            if dim is not None and meta_dim is not None and int(dim) != meta_dim:
                raise ValueError(f"{f0}: --dim {dim} disagrees with the file's '{META_DIM.decode()}' = {meta_dim}")
            d = dim if dim is not None else meta_dim
            if d is None:
                raise ValueError(f"{f0}: sparse rows need the dimension (metadata '{META_DIM.decode()}' or --dim)")
            self.dim = int(d)
            self.column = None
        else:
            lists = [fl.name for fl in schema if _list_value_type(fl.type) is not None]
            if column is None:
                column = DENSE_COLUMN if DENSE_COLUMN in names else (lists[0] if len(lists) == 1 else None)
            if column is None:
                several = f"several list columns {lists}: choose one with --column; " if lists else ""
                raise ValueError(f"{f0}: no dense vector column (list<double> '{DENSE_COLUMN}') and no sparse "
                                 f"'{INDICES}'/'{VALUES}' columns; {several}the columns are {names}")
            self.column = column
            self._check_dense_schema(f0, schema)
            self.dim = self._dense_dim(f0)
            if dim is not None and int(dim) != self.dim:
                raise ValueError(f"{f0}: --dim {dim} disagrees with the data: column '{column}' has {self.dim} "
                                 "entries per row (--dim is for sparse rows without metadata)")
        if self.dim < 1:
            raise ValueError(f"{f0}: the points have dimension {self.dim}; need at least 1")
        self.num_rows = sum(pq.ParquetFile(f).metadata.num_rows for f in self.files)
        self.batch_size = int(batch_size)
        self._batches = self._iter_batches()
        self._pending = None
        self._row = 0

    def _check_dense_schema(self, f: Path, schema: pa.Schema) -> None:
        if self.column not in schema.names:
            raise ValueError(f"{f}: column '{self.column}' is missing (the first file has it); the columns are "
                             f"{schema.names}")
        t = schema.field(self.column).type
        vt = _list_value_type(t)
        if vt is None or not _is_number(vt):
            raise ValueError(f"{f}: column '{self.column}' has type {t}, expected a list of numbers "
                             "(list<double>, one point per row)")

    def _check_sparse_schema(self, f: Path, schema: pa.Schema) -> None:
        for name, ok, want in ((INDICES, pa.types.is_integer, "list<int>"), (VALUES, _is_number, "list<double>")):
            if name not in schema.names:
                raise ValueError(f"{f}: column '{name}' is missing (the first file has sparse rows)")
            t = schema.field(name).type
            vt = _list_value_type(t)
            if vt is None or not ok(vt):
                raise ValueError(f"{f}: column '{name}' has type {t}, expected {want}")

    def _dense_dim(self, f: Path) -> int:
        """Entries per row: the list size, or the length of the first non-null row."""
        t = _read_schema(f).field(self.column).type
        if pa.types.is_fixed_size_list(t):
            return int(t.list_size)
        pf = pq.ParquetFile(f)
        for g in range(pf.num_row_groups):
            col = pf.read_row_group(g, columns=[self.column]).column(0)
            for chunk in col.chunks:
                valid = np.flatnonzero(~np.asarray(chunk.is_null()))
                if valid.size:
                    return len(chunk[int(valid[0])])
        raise ValueError(f"{f}: has no points (no non-null rows in column '{self.column}')")

    def _iter_batches(self):
        for f in self.files:
            if f != self.files[0]:
                schema = _read_schema(f)
                (self._check_sparse_schema if self.sparse else self._check_dense_schema)(f, schema)
            pf = pq.ParquetFile(f)
            cols = [INDICES, VALUES] if self.sparse else [self.column]
            first = 0
            for b in pf.iter_batches(batch_size=self.batch_size, columns=cols):
                yield self._convert(b, f, first)
                first += b.num_rows

    def _convert(self, batch: pa.RecordBatch, f: Path, first: int):
        if self.sparse:
            idx, val = batch.column(0), batch.column(1)
            for name, arr in ((INDICES, idx), (VALUES, val)):
                if arr.null_count:
                    raise ValueError(f"{f}: row {first + _first_null(arr)}: column '{name}' is null")
            li, lv = np.diff(np.asarray(idx.offsets)), np.diff(np.asarray(val.offsets))
            bad = np.flatnonzero(li != lv)
            if bad.size:
                raise ValueError(f"{f}: row {first + bad[0]}: '{INDICES}' and '{VALUES}' differ in length")
            flat_i, flat_v = idx.flatten(), val.flatten()
            row_of = np.repeat(np.arange(batch.num_rows), li)
            for name, arr in ((INDICES, flat_i), (VALUES, flat_v)):
                if arr.null_count:
                    raise ValueError(f"{f}: row {first + row_of[_first_null(arr)]}: column '{name}' has a null entry")
            cols = np.asarray(flat_i, dtype=np.int64)
            vals = np.asarray(flat_v, dtype=float)
            out_of_range = np.flatnonzero((cols < 0) | (cols >= self.dim))
            if out_of_range.size:
                row = int(row_of[out_of_range[0]])
                raise ValueError(f"{f}: row {first + row}: column '{INDICES}' has an index outside [0, {self.dim})")
            nonfinite = np.flatnonzero(~np.isfinite(vals))
            if nonfinite.size:
                raise ValueError(f"{f}: row {first + row_of[nonfinite[0]]}: column '{VALUES}' has a non-finite "
                                 f"value ({vals[nonfinite[0]]})")
            X = sp.csr_matrix((vals, cols, np.asarray(idx.offsets) - idx.offsets[0].as_py()),
                              shape=(batch.num_rows, self.dim))
        else:
            col = batch.column(0)
            if col.null_count:
                raise ValueError(f"{f}: row {first + _first_null(col)}: column '{self.column}' is null")
            if pa.types.is_fixed_size_list(col.type):
                lengths = np.full(len(col), col.type.list_size)
            else:
                lengths = np.diff(np.asarray(col.offsets))
            bad = np.flatnonzero(lengths != self.dim)
            if bad.size:
                raise ValueError(f"{f}: row {first + bad[0]}: column '{self.column}' has {lengths[bad[0]]} "
                                 f"entries, expected {self.dim}")
            flat = col.flatten()
            if flat.null_count:
                raise ValueError(f"{f}: row {first + _first_null(flat) // self.dim}: column '{self.column}' has a "
                                 "null entry")
            X = np.asarray(flat, dtype=float).reshape(batch.num_rows, self.dim)
            nonfinite = np.flatnonzero(~np.all(np.isfinite(X), axis=1))
            if nonfinite.size:
                r = int(nonfinite[0])
                raise ValueError(f"{f}: row {first + r}: column '{self.column}' has a non-finite value "
                                 f"({X[r][~np.isfinite(X[r])][0]})")
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


def _read_npy(p: Path) -> np.ndarray:
    """The array stored in ``.npy`` file ``p``, with errors naming the file."""
    with open(p, "rb") as fh:
        head = fh.read(6)
    if not head.startswith(NPY_MAGIC):
        raise ValueError(f"{p}: not a .npy file (no NumPy header); save the tensor with numpy.save")
    try:
        T = np.load(p, allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc):
            raise ValueError(f"{p}: holds Python objects (dtype object), not a numeric array; refused (loading "
                             "it would unpickle)") from None
        raise ValueError(f"{p}: corrupt .npy file ({exc})") from None
    except (OSError, EOFError) as exc:
        raise ValueError(f"{p}: corrupt .npy file ({exc})") from None
    if not isinstance(T, np.ndarray):
        raise ValueError(f"{p}: not a single .npy array")
    return T


def tensor_operator(path: Path, rtol: float | None) -> power.ExplicitTensor:
    """:class:`~distdp.tensor.power.ExplicitTensor` of a ``.npy`` file, judged at its stored dtype."""
    try:
        return power.ExplicitTensor(_read_npy(path), rtol, name=f"input tensor {path}")
    except ValueError as exc:
        if "not symmetric" in str(exc):
            raise ValueError(f"{exc} (--symmetry-tol)") from None
        raise


def load_tensor(path, rtol: float | None = None) -> np.ndarray:
    """A symmetric d×d×d tensor from ``.npy`` (checked: real, cubic, finite, symmetric), as float64.

    Parameters
    ----------
    path : path
        A ``numpy.save`` file (any extension case; not ``.npz``).
    rtol : float, optional
        Symmetry tolerance relative to ``max |T|``; default by the stored dtype
        (:func:`distdp.tensor.forms.symmetry_tolerance`: 1e-8 for float64,
        ≈ 7.6e-6 for float32).

    Raises
    ------
    ValueError
        Not a ``.npy`` file, a corrupt one, an object / complex / non-numeric
        array, not d×d×d, empty, non-finite, or not symmetric; the message
        names the file.
    """
    p = Path(path)
    return forms.check_symmetric(_read_npy(p), rtol, name=f"input tensor {p}")
