"""Reading observed entries (parquet COO or .npy with NaN) and writing a fit's output directory.

A COO parquet file has one row per observed entry and columns ``i``, ``j``,
``k`` (integers) and ``value`` (numbers); other columns are ignored. A
directory of such files (every ``*.parquet`` under it, hidden ones skipped,
in sorted order) is read as one set of entries. The tensor shape comes from
the ``shape`` argument, else from the files' metadata key ``distdp.shape``
("n1,n2,n3"; files that carry it must agree), else from the largest index + 1
in each mode. Every error names the file, and the row and column (or the
metadata key) where there is one.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np

from distdp.completion.entries import Observations, first_repeat, from_dense, validate_entries
from distdp.io.atomic import atomic_directory, local_output

COLUMNS = ("i", "j", "k", "value")
META_SHAPE = b"distdp.shape"


def load_observations(path, shape: Optional[tuple[int, int, int]] = None) -> Observations:
    """Observed entries from a ``.parquet`` COO file, a directory of them, or a ``.npy`` tensor with NaN for missing.

    Parameters
    ----------
    path : str or Path
        A ``.npy`` file, a parquet COO file, or a directory of parquet COO files.
    shape : tuple of 3 int, optional
        Tensor shape (COO input); overrides the ``distdp.shape`` metadata.

    Raises
    ------
    FileNotFoundError
        No such file or directory, or a directory without ``.parquet`` files.
    ValueError
        Unreadable file, complex or non-numeric values, missing columns, wrong
        types, nulls or NaN values, a malformed ``distdp.shape`` metadata
        value, indices out of range or repeated, empty observation set.
    """
    path = Path(path)
    if path.is_dir():
        return _load_parquet(parquet_files(path), shape, where=path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file or directory")
    if path.suffix == ".npy":
        try:
            arr = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise ValueError(f"{path}: not a readable .npy array ({exc})") from exc
        if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
            raise ValueError(f"{path}: expected a numeric array, got dtype {arr.dtype}")
        obs = from_dense(arr, source=str(path))   # rejects complex values, naming the file
        if shape is not None and tuple(shape) != obs.shape:
            raise ValueError(f"{path}: shape {obs.shape} differs from the given shape {tuple(shape)}")
        return obs
    return _load_parquet([path], shape, where=path)


def parquet_files(directory: Path) -> list[Path]:
    """The ``*.parquet`` files under ``directory`` (recursively, sorted), skipping hidden files and folders."""
    files = sorted(f for f in directory.rglob("*.parquet")
                   if f.is_file() and not any(part.startswith(".") for part in f.relative_to(directory).parts))
    if not files:
        raise FileNotFoundError(f"{directory}: directory holds no .parquet files (expected COO files with columns "
                                f"{list(COLUMNS)})")
    return files


def parse_shape_metadata(raw: bytes, source) -> tuple[int, int, int]:
    """The tensor shape stored under the metadata key ``distdp.shape`` ("n1,n2,n3").

    Raises
    ------
    ValueError
        Not three positive integers separated by commas (the message names
        ``source`` and the key).
    """
    try:
        parts = raw.decode().split(",")
        shape = tuple(int(p.strip()) for p in parts)
    except (UnicodeDecodeError, ValueError):
        shape = ()
    if len(shape) != 3 or min(shape) <= 0:
        raise ValueError(f"{source}: metadata key '{META_SHAPE.decode()}' is {raw.decode(errors='replace')!r}; "
                         "expected three positive integers 'n1,n2,n3' (fix or drop the key, or give the shape: "
                         "shape= / --shape)")
    return shape


def _read_coo(path: Path):
    """Indices, values and raw ``distdp.shape`` metadata (or None) of one COO parquet file, its columns checked."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a non-parquet file
        raise ValueError(f"{path}: not a readable parquet file ({exc})") from exc
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; a COO file needs columns {list(COLUMNS)}")
    cols = {}
    for c in COLUMNS:
        col = table.column(c)
        typ = col.type
        ok = pa.types.is_integer(typ) if c != "value" else (pa.types.is_integer(typ) or pa.types.is_floating(typ))
        if not ok:
            raise ValueError(f"{path}: column '{c}' has type {typ}; expected "
                             f"{'integers' if c != 'value' else 'numbers'}")
        if col.null_count:
            row = int(np.flatnonzero(np.asarray(col.is_null()))[0])
            raise ValueError(f"{path}: row {row}: column '{c}' is null ({col.null_count} null rows)")
        cols[c] = col.to_numpy()
    idx = np.stack([cols["i"], cols["j"], cols["k"]], axis=1).astype(np.int64).reshape(-1, 3)
    values = cols["value"].astype(float)
    nan = np.flatnonzero(np.isnan(values))
    if nan.size:
        raise ValueError(f"{path}: row {int(nan[0])}: column 'value' is NaN ({nan.size} NaN rows); a COO file "
                         "lists observed entries only: drop the missing ones")
    return idx, values, (table.schema.metadata or {}).get(META_SHAPE)


def _load_parquet(files: list[Path], shape, where: Path) -> Observations:
    parts = [(f, *_read_coo(f)) for f in files]
    if sum(len(v) for _, _, v, _ in parts) == 0:
        raise ValueError(f"{where}: the observation set is empty (no rows)")
    if shape is None:
        declared = [(f, parse_shape_metadata(raw, f)) for f, _, _, raw in parts if raw is not None]
        if declared:
            shape = declared[0][1]
            for f, s in declared[1:]:
                if s != shape:
                    raise ValueError(f"{f}: metadata key '{META_SHAPE.decode()}' says {s}, but {declared[0][0]} "
                                     f"says {shape}: the files of one tensor must agree")
        else:  # largest index + 1 (negative indices are then reported by validate_entries)
            idx_all = np.concatenate([idx for _, idx, _, _ in parts])
            shape = tuple(int(n) for n in np.maximum(idx_all.max(axis=0), 0) + 1)
    shape = tuple(int(n) for n in shape)
    for f, idx, values, _ in parts:
        if len(values):   # ranges, finiteness and duplicates within the file, with its row numbers
            validate_entries(shape, idx, values, source=str(f))
    if len(parts) == 1:
        _, idx, values, _ = parts[0]
        return Observations(shape, idx, values)
    idx = np.concatenate([p[1] for p in parts])
    values = np.concatenate([p[2] for p in parts])
    file_of = np.concatenate([np.full(len(p[2]), n) for n, p in enumerate(parts)])
    row_of = np.concatenate([np.arange(len(p[2])) for p in parts])
    repeat = first_repeat(idx, shape)
    if repeat is not None:   # across files (repeats within a file were reported above)
        a, b = repeat
        raise ValueError(f"{parts[file_of[b]][0]}: row {row_of[b]}: entry {tuple(int(x) for x in idx[b])} is also "
                         f"observed in {parts[file_of[a]][0]}, row {row_of[a]}")
    return Observations(shape, idx, values)


def write_coo_parquet(obs: Observations, path) -> Path:
    """Write observations as a COO parquet file (shape in the metadata)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"i": pa.array(obs.idx[:, 0], pa.int32()), "j": pa.array(obs.idx[:, 1], pa.int32()),
                      "k": pa.array(obs.idx[:, 2], pa.int32()), "value": pa.array(obs.values, pa.float64())})
    table = table.replace_schema_metadata({META_SHAPE: ",".join(str(n) for n in obs.shape).encode()})
    pq.write_table(table, path)
    return Path(path)


def write_result(result, out, overwrite: bool = False, extra: Optional[dict] = None) -> Path:
    """Write ``A.npy``, ``B.npy``, ``C.npy`` (and ``G.npy``) and ``report.json`` into ``out`` atomically.

    The files go to a temporary sibling directory renamed into place at the
    end: a failure leaves no partial ``out``.
    """
    out = local_output(out)
    with atomic_directory(out, overwrite=overwrite) as tmp:
        for name, arr in zip("ABCG", result.factors):
            np.save(tmp / f"{name}.npy", arr)
        report = result.report()
        if extra:
            report.update(extra)
        (tmp / "report.json").write_text(json.dumps(report, indent=2, default=_json_default))
    return out


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
