"""Reading observed entries (parquet COO or .npy with NaN) and writing a fit's output directory.

A COO parquet file has one row per observed entry and columns ``i``, ``j``,
``k`` (integers) and ``value`` (numbers). The tensor shape comes from the
``shape`` argument, else from the file's metadata key ``distdp.shape``
("n1,n2,n3"), else from the largest index + 1 in each mode. Every error names
the file, and the row and column where there is one.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np

from distdp.completion.entries import Observations, from_dense, validate_entries
from distdp.io.atomic import atomic_directory

COLUMNS = ("i", "j", "k", "value")
META_SHAPE = b"distdp.shape"


def load_observations(path, shape: Optional[tuple[int, int, int]] = None) -> Observations:
    """Observed entries from a ``.parquet`` COO file or a ``.npy`` tensor with NaN for missing entries.

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Unreadable file, missing columns, wrong types, nulls or NaN values,
        indices out of range or repeated, empty observation set.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if path.suffix == ".npy":
        try:
            arr = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise ValueError(f"{path}: not a readable .npy array ({exc})") from exc
        if not np.issubdtype(arr.dtype, np.number):
            raise ValueError(f"{path}: expected a numeric array, got dtype {arr.dtype}")
        obs = from_dense(arr, source=str(path))
        if shape is not None and tuple(shape) != obs.shape:
            raise ValueError(f"{path}: shape {obs.shape} differs from the given shape {tuple(shape)}")
        return obs
    return _load_parquet(path, shape)


def _load_parquet(path: Path, shape) -> Observations:
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
    idx = np.stack([cols["i"], cols["j"], cols["k"]], axis=1).astype(np.int64)
    values = cols["value"].astype(float)
    nan = np.flatnonzero(np.isnan(values))
    if nan.size:
        raise ValueError(f"{path}: row {int(nan[0])}: column 'value' is NaN ({nan.size} NaN rows); a COO file "
                         "lists observed entries only: drop the missing ones")
    if len(values) == 0:
        raise ValueError(f"{path}: the observation set is empty (no rows)")
    if shape is None:
        meta = table.schema.metadata or {}
        if META_SHAPE in meta:
            shape = tuple(int(s) for s in meta[META_SHAPE].decode().split(","))
        else:  # largest index + 1 (negative indices are then reported by validate_entries)
            shape = tuple(int(n) for n in np.maximum(idx.max(axis=0), 0) + 1)
    shape = tuple(int(n) for n in shape)
    validate_entries(shape, idx, values, source=str(path))
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
    out = Path(out)
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
