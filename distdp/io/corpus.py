"""Parquet corpora: discovery, validation, reading into CSR, writing.

A corpus is one parquet file or a directory of them, one row per document:
``word_ids: list<int32>`` and ``counts: list<int32>`` of equal length, ids
unique within a row, optional ``doc_id``. Reading is vectorised over whole row
groups with pyarrow (no Python loop over documents); every error names the
file, row and column.

A corpus or vocabulary given as a URI (``s3://bucket/corpus/``,
``gs://…``, ``hdfs://host:port/…``, ``file:///…``) is read through
``pyarrow.fs`` (credentials as pyarrow finds them, e.g. AWS's environment
variables or instance profile); each shard opens its own row groups, so
the URI must be readable from every node.
"""
from __future__ import annotations

import posixpath
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator, Sequence
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import scipy.sparse as sp

from distdp.io.atomic import atomic_directory

WORD_IDS, COUNTS, DOC_ID = "word_ids", "counts", "doc_id"
VOCAB_FILE = "vocab.txt"
META_VOCAB_SIZE = b"distdp.vocab_size"


@dataclass(frozen=True)
class Unit:
    """Rows of one row group of one parquet file: the unit of work assigned to shards.

    ``first_row`` is the file's row number of the unit's first row, ``offset`` its row within the row group
    (a unit is a whole row group unless :func:`partition` cut one between two shards), ``nonzeros`` the
    stored counts of the row group from the metadata (an upper bound for a cut unit).
    """

    path: str
    row_group: int
    first_row: int
    num_rows: int
    nonzeros: int = 0
    offset: int = 0


def is_uri(path: str | Path) -> bool:
    """Whether ``path`` is a URI (``scheme://…``) to be read through ``pyarrow.fs``, not a local path."""
    return isinstance(path, str) and "://" in path


def filesystem_of(uri: str) -> tuple[pafs.FileSystem, str]:
    """The ``pyarrow.fs`` file system of ``uri`` and the path inside it."""
    try:
        return pafs.FileSystem.from_uri(uri)
    except (pa.ArrowException, ValueError) as exc:
        raise ValueError(f"{uri}: not a URI pyarrow can open ({exc}); spaces and the like must be "
                         "percent-encoded (%20)") from exc
    except OSError as exc:       # e.g. an S3 bucket's region cannot be resolved (no network, no such bucket)
        raise FileNotFoundError(f"{uri}: cannot be reached ({exc})") from exc


def uri_info(uri: str) -> pafs.FileInfo:
    """What is at ``uri`` (file, directory or nothing); unreadable as FileNotFoundError naming it."""
    fs, inner = filesystem_of(uri)
    try:
        return fs.get_file_info(inner)
    except OSError as exc:
        raise FileNotFoundError(f"{uri}: cannot be read ({exc})") from exc


def child_uri(uri: str, root: str, inner: str) -> str:
    """The URI of ``inner`` (a path inside ``uri``'s file system, under its path ``root``): ``uri``
    with the relative part appended, its query (``?region=…``) kept."""
    return _sibling(uri, quote(inner[len(root.rstrip("/")):].lstrip("/"), safe="/"))


def _hidden(rel_parts: Sequence[str]) -> bool:
    return any(part.startswith(".") for part in rel_parts)


def discover(path: str | Path) -> list[Path] | list[str]:
    """Parquet files of a corpus: ``path`` itself, or the ``*.parquet`` files under it (not in hidden
    directories), sorted; URIs (:func:`is_uri`) as URIs."""
    if is_uri(path):
        return _discover_uri(path)
    p = Path(path)
    if p.is_file():
        return [p]
    if p.is_dir():
        files = sorted(f for f in p.rglob("*.parquet") if not _hidden(f.relative_to(p).parts))
        if files:
            return files
        raise FileNotFoundError(f"{p}: directory holds no .parquet files")
    raise FileNotFoundError(f"{p}: no such corpus file or directory")


def uri_files(uri: str, recursive: bool = True) -> list[str]:
    """The URIs of the files in directory ``uri`` (under it with ``recursive``), sorted, none in a hidden
    file or directory below it."""
    fs, root = filesystem_of(uri)
    found = fs.get_file_info(pafs.FileSelector(root, recursive=recursive))
    return sorted(child_uri(uri, root, f.path) for f in found if f.type == pafs.FileType.File
                  and not _hidden(f.path[len(root.rstrip("/")):].split("/")))


def _discover_uri(uri: str) -> list[str]:
    info = uri_info(uri)
    if info.type == pafs.FileType.File:
        return [uri]
    if info.type == pafs.FileType.Directory:
        files = [f for f in uri_files(uri) if f.partition("?")[0].endswith(".parquet")]
        if files:
            return files
        raise FileNotFoundError(f"{uri}: directory holds no .parquet files")
    raise FileNotFoundError(f"{uri}: no such corpus file or directory")


@contextmanager
def parquet_file(path: str | Path) -> Iterator[pq.ParquetFile]:
    """A parquet file, local or by URI, open for the ``with`` block."""
    if not is_uri(path):
        yield pq.ParquetFile(path)
        return
    fs, inner = filesystem_of(path)
    with fs.open_input_file(inner) as f:
        yield pq.ParquetFile(f)


def plan_units(files: Sequence[Path] | Sequence[str]) -> list[Unit]:
    """Every row group of every file, checking the schema of each file first."""
    units = []
    for f in files:
        try:
            with parquet_file(f) as pf:
                schema, meta = pf.schema_arrow, pf.metadata
        except Exception as exc:  # pyarrow raises several types for a non-parquet file
            raise ValueError(f"{f}: not a readable parquet file ({exc})") from exc
        check_schema(schema, f)
        first = 0
        for g in range(meta.num_row_groups):
            n = meta.row_group(g).num_rows
            if n:
                units.append(Unit(str(f), g, first, n, _leaf_values(meta.row_group(g), WORD_IDS)))
            first += n
    if not units:
        raise ValueError(f"empty corpus: {len(files)} file(s), no documents")
    return units


def _leaf_values(row_group: pq.RowGroupMetaData, column: str) -> int:
    """Values stored in a list column's row group, from the file's metadata (no data read): its nonzeros."""
    for i in range(row_group.num_columns):
        chunk = row_group.column(i)
        if chunk.path_in_schema.split(".")[0] == column:
            return int(chunk.num_values)
    return 0


def check_schema(schema: pa.Schema, where) -> None:
    """Require ``word_ids`` and ``counts`` to be list columns of integers."""
    for col in (WORD_IDS, COUNTS):
        if col not in schema.names:
            raise ValueError(f"{where}: column {col!r} is missing (columns: {schema.names}); "
                             f"a corpus needs list<int32> columns {WORD_IDS!r} and {COUNTS!r}")
        t = schema.field(col).type
        if not (pa.types.is_list(t) or pa.types.is_large_list(t)) or not pa.types.is_integer(t.value_type):
            raise ValueError(f"{where}: column {col!r} has type {t}, expected list<int32>")


#: :func:`partition` keeps row groups whole when its largest shard then holds at most this many times the
#: mean rows; else it cuts row groups so that every shard holds the same number of rows.
BALANCE = 1.05


def partition(units: Sequence[Unit], n_parts: int) -> list[list[Unit]]:
    """Split units into at most ``n_parts`` contiguous groups of about equal row counts.

    Whole row groups where that balances the groups to within :data:`BALANCE` of the mean; otherwise
    (few or uneven row groups: 24 row groups over 16 shards leave some shards twice the rows of others)
    groups of equal rows (±1), cutting a row group between two shards where a boundary falls inside it.
    Both shards then decode that row group and each converts only its own rows; a shard decodes at most
    two row groups beyond its own whole ones.
    """
    if n_parts < 1:
        raise ValueError(f"workers must be ≥ 1, got {n_parts}")
    starts = np.concatenate([[0], np.cumsum([u.num_rows for u in units])])
    total = int(starts[-1])
    whole_parts = min(n_parts, len(units))
    targets = total * np.arange(1, whole_parts) / whole_parts
    after = np.searchsorted(starts, targets)                  # the row-group boundary nearest each target
    bounds = np.where(targets - starts[after - 1] < starts[after] - targets, after - 1, after)
    groups = [[units[i] for i in g]
              for g in np.split(np.arange(len(units)), np.unique(np.clip(bounds, 1, len(units) - 1))) if len(g)]
    n_parts = min(n_parts, total)
    if max(sum(u.num_rows for u in g) for g in groups) <= BALANCE * total / n_parts:
        return groups
    return cut_parts(units, n_parts)


def cut_parts(units: Sequence[Unit], n_parts: int) -> list[list[Unit]]:
    """``n_parts`` contiguous groups of ``total // n_parts`` or one more rows, row groups cut at the boundaries."""
    starts = np.concatenate([[0], np.cumsum([u.num_rows for u in units])])
    edges = np.linspace(0, starts[-1], n_parts + 1).round().astype(np.int64)
    parts = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        part = []
        for i in range(np.searchsorted(starts, lo, side="right") - 1, len(units)):
            u, s = units[i], int(starts[i])
            if s >= hi:
                break
            a, b = max(int(lo), s), min(int(hi), s + u.num_rows)
            if b > a:
                part.append(u if (a, b) == (s, s + u.num_rows) else
                            replace(u, first_row=u.first_row + a - s, num_rows=b - a, offset=u.offset + a - s))
        parts.append(part)
    return parts


def _flat(column: pa.ChunkedArray | pa.Array):
    """(lengths, flattened values as numpy, null-list mask, null-element mask) of a list column."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    lengths = pc.list_value_length(arr).to_numpy(zero_copy_only=False)
    nulls = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    flat = pc.list_flatten(arr)
    element_nulls = np.asarray(flat.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    values = flat.to_numpy(zero_copy_only=False)
    return np.nan_to_num(lengths.astype(np.float64), nan=0).astype(np.int64), values, nulls, element_nulls


def table_to_csr(table: pa.Table, vocab_size: int, where: str = "corpus", first_row: int = 0) -> sp.csr_matrix:
    """Validate a table of documents and convert it to a CSR count matrix (float64).

    Raises
    ------
    ValueError
        Naming ``where`` (file), the row and the column of the first problem:
        null lists, length mismatch, ids out of ``[0, vocab_size)``, negative
        counts, repeated ids within a row.
    """
    check_schema(table.schema, where)
    lid, ids, nid, eid = _flat(table.column(WORD_IDS))
    lct, cts, nct, ect = _flat(table.column(COUNTS))
    n = table.num_rows

    def fail(local_row, msg):
        raise ValueError(f"{where}: row {first_row + int(local_row)}: {msg}")

    for col, nulls in ((WORD_IDS, nid), (COUNTS, nct)):
        if nulls.any():
            fail(np.flatnonzero(nulls)[0], f"column {col!r} is null")
    if (lid != lct).any():
        r = np.flatnonzero(lid != lct)[0]
        fail(r, f"{WORD_IDS!r} has {lid[r]} entries but {COUNTS!r} has {lct[r]}")
    indptr = np.concatenate([[0], np.cumsum(lid)])
    row_of = lambda pos: np.searchsorted(indptr, pos, side="right") - 1  # noqa: E731
    for col, nulls in ((WORD_IDS, eid), (COUNTS, ect)):
        if nulls.any():
            fail(row_of(np.flatnonzero(nulls)[0]), f"column {col!r} has a null entry")
    bad = np.flatnonzero((ids < 0) | (ids >= vocab_size))
    if bad.size:
        fail(row_of(bad[0]), f"column {WORD_IDS!r}: id {ids[bad[0]]} is outside the vocabulary [0, {vocab_size})")
    bad = np.flatnonzero(cts < 0)
    if bad.size:
        fail(row_of(bad[0]), f"column {COUNTS!r}: negative count {cts[bad[0]]}")
    m = sp.csr_matrix((cts.astype(np.float64), ids.astype(np.int32), indptr), shape=(n, vocab_size))
    m.has_sorted_indices = False
    m.sort_indices()
    if m.nnz:
        same_row = np.ones(m.nnz - 1, dtype=bool)          # entry j and j+1 in one row (no per-entry row array)
        same_row[m.indptr[1:-1][(m.indptr[1:-1] > 0) & (m.indptr[1:-1] < m.nnz)] - 1] = False
        dup = np.flatnonzero((np.diff(m.indices) == 0) & same_row)
        if dup.size:
            fail(row_of(dup[0]), f"column {WORD_IDS!r}: id {m.indices[dup[0]]} appears twice in the row")
    m.eliminate_zeros()
    return m


def read_units(units: Sequence[Unit], vocab_size: int) -> sp.csr_matrix:
    """Read and validate row groups into one CSR matrix (rows in unit order).

    The matrix's arrays are allocated once from the row groups' value counts
    in the parquet metadata (shrunk in place where a unit is part of a row
    group) and filled one row group at a time, so the peak is
    the matrix plus one row group's conversion, not twice the matrix (a list
    of parts and their stacked copy); Arrow's freed buffers are returned to
    the OS at the end. Values are float64, indices int32 (int64 past 2³¹
    nonzeros): 12 bytes per nonzero.
    """
    if not units:
        return sp.csr_matrix((0, vocab_size))
    total = sum(u.nonzeros for u in units)
    if len(units) == 1 or any(u.nonzeros <= 0 for u in units):
        parts = [_read_unit(u, vocab_size) for u in units]
        out = sp.vstack(parts, format="csr") if len(parts) > 1 else parts[0]
    else:
        index = np.int32 if max(total, vocab_size) < 2 ** 31 - 1 else np.int64
        data, indices = np.empty(total), np.empty(total, dtype=index)
        indptr = np.zeros(sum(u.num_rows for u in units) + 1, dtype=index)
        at = row = 0
        for u in units:
            m = _read_unit(u, vocab_size)
            if at + m.nnz > total:  # more values than the metadata said: grow (never for distdp's files)
                data, indices = np.resize(data, at + m.nnz), np.resize(indices, at + m.nnz)
            data[at:at + m.nnz], indices[at:at + m.nnz] = m.data, m.indices
            indptr[row + 1:row + 1 + m.shape[0]] = m.indptr[1:] + at
            at, row = at + m.nnz, row + m.shape[0]
        if at < len(data):      # a cut row group's metadata counted the whole group: give the rest back
            data.resize(at, refcheck=False)
            indices.resize(at, refcheck=False)
        out = sp.csr_matrix((data, indices, indptr), shape=(row, vocab_size), copy=False)
        out.has_sorted_indices = True
    pa.default_memory_pool().release_unused()
    return out


def _read_unit(u: Unit, vocab_size: int) -> sp.csr_matrix:
    """One row group as a validated CSR matrix."""
    with parquet_file(u.path) as pf:
        t = pf.read_row_group(u.row_group, columns=[WORD_IDS, COUNTS])
    if u.offset or u.num_rows < t.num_rows:
        t = t.slice(u.offset, u.num_rows)
    return table_to_csr(t, vocab_size, where=u.path, first_row=u.first_row)


def read_doc_ids(units: Sequence[Unit]) -> np.ndarray:
    """``doc_id`` of every row of the units, or ``<file>:<row>`` labels when absent."""
    out = []
    for u in units:
        with parquet_file(u.path) as pf:
            col = (pf.read_row_group(u.row_group, columns=[DOC_ID]).column(DOC_ID).slice(u.offset, u.num_rows)
                   if DOC_ID in pf.schema_arrow.names else None)
        if col is not None:
            out.append(np.asarray(col.to_pylist(), dtype=object).astype(str))
        else:
            name = posixpath.basename(u.path.partition("?")[0]) if is_uri(u.path) else Path(u.path).name
            out.append(np.char.add(f"{name}:", np.arange(u.first_row, u.first_row + u.num_rows).astype(str)))
    return np.concatenate(out) if out else np.array([], dtype=str)


class UnitBlocks:
    """The documents of ``units`` read again on every iteration, one unit (row group) at a time.

    Yields ``(CSR counts, document ids or None)`` per unit: the block source of an out-of-core shard
    (:class:`distdp.lda.streaming.StreamingShard`), which holds one row group at a time.
    """

    def __init__(self, units: Sequence[Unit], vocab_size: int, with_doc_ids: bool = False):
        self.units, self.vocab_size, self.with_doc_ids = list(units), vocab_size, with_doc_ids

    def __iter__(self):
        for u in self.units:
            yield read_units([u], self.vocab_size), read_doc_ids([u]) if self.with_doc_ids else None


def read_corpus(path: str | Path, vocab_size: int) -> sp.csr_matrix:
    """Read a whole corpus (file or directory) into one CSR matrix."""
    return read_units(plan_units(discover(path)), vocab_size)


# --------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------
def _read_bytes(path: str | Path) -> bytes:
    if not is_uri(path):
        return Path(path).read_bytes()
    fs, inner = filesystem_of(path)
    with fs.open_input_stream(inner) as f:
        return f.read()


def _sibling(uri: str, name: str, up: bool = False) -> str:
    """The URI of ``name`` inside ``uri``'s path (``up``: beside it), its query (``?region=…``) kept."""
    base, q, query = uri.partition("?")
    base = base.rstrip("/")
    return f"{base.rsplit('/', 1)[0] if up else base}/{name}{q}{query}"


def _is_file(path: str | Path) -> bool:
    if not is_uri(path):
        return Path(path).is_file()
    try:
        return uri_info(path).type == pafs.FileType.File
    except FileNotFoundError:        # e.g. a path under a file
        return False


def load_vocab(path: str | Path) -> list[str]:
    """A vocabulary file, local or by URI: one word per line, id = line number (UTF-8; a byte-order
    mark is ignored)."""
    p = path if is_uri(path) else Path(path)
    if not _is_file(p):
        raise FileNotFoundError(f"{p}: vocabulary file not found")
    data = _read_bytes(p)
    try:
        words = data.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ValueError(f"{p}: line {line}: not UTF-8 (byte {data[exc.start]:#04x}); "
                         "save the vocabulary file as UTF-8") from None
    if not words:
        raise ValueError(f"{p}: vocabulary file is empty")
    return words


def corpus_vocab(corpus: str | Path) -> tuple[int, list[str] | None, str] | None:
    """A parquet corpus's own vocabulary: (size, words or None, where it was found), or None.

    Looked for in order: ``vocab.txt`` inside or beside the corpus, the parquet
    metadata key ``distdp.vocab_size`` of its first file.
    """
    for cand in _vocab_candidates(corpus):
        if _is_file(cand):
            words = load_vocab(cand)
            return len(words), words, str(cand)
    files = discover(corpus)
    with parquet_file(files[0]) as pf:
        meta = pf.schema_arrow.metadata or {}
    if META_VOCAB_SIZE in meta:
        return int(meta[META_VOCAB_SIZE]), None, f"{files[0]} (metadata {META_VOCAB_SIZE.decode()})"
    return None


def _vocab_candidates(corpus: str | Path) -> list:
    """``vocab.txt`` inside and beside ``corpus`` (beside only where the URI has a parent path)."""
    if not is_uri(corpus):
        p = Path(corpus)
        return [p / VOCAB_FILE, p.parent / VOCAB_FILE]
    has_parent = "/" in corpus.partition("?")[0].partition("://")[2].strip("/")
    return [_sibling(corpus, VOCAB_FILE)] + ([_sibling(corpus, VOCAB_FILE, up=True)] if has_parent else [])


def corpus_sidecar(corpus: str | Path, name: str) -> str | None:
    """The text of file ``name`` in a corpus directory (or beside a corpus file), local or by URI; None
    when absent."""
    if is_uri(corpus):
        cand = _sibling(corpus, name, up=uri_info(corpus).type != pafs.FileType.Directory)
    else:
        cand = (Path(corpus) if Path(corpus).is_dir() else Path(corpus).parent) / name
    return _read_bytes(cand).decode("utf-8") if _is_file(cand) else None


def resolve_vocab(corpus: str | Path, vocab: str | Path | None = None,
                  vocab_size: int | None = None) -> tuple[int, list[str] | None]:
    """The vocabulary size (and words, when known) of a corpus.

    Order: an explicit ``vocab`` file; an explicit ``vocab_size``; the
    corpus's own vocabulary (:func:`corpus_vocab`). Never inferred from the
    largest id in the data. An explicit vocabulary whose size differs from
    the corpus's own is refused (the ids would mean other words); one of the
    same size with other words is used, with a warning.
    """
    if vocab_size is not None and (isinstance(vocab_size, bool) or int(vocab_size) != vocab_size or vocab_size < 2):
        raise ValueError(f"vocab_size must be an integer ≥ 2, got {vocab_size!r}")
    words = load_vocab(vocab) if vocab is not None else None
    if words is not None and vocab_size is not None and vocab_size != len(words):
        raise ValueError(f"vocab_size={vocab_size} disagrees with {vocab} ({len(words)} words)")
    own = corpus_vocab(corpus)
    if words is None and vocab_size is None:
        if own is None:
            raise ValueError(f"{corpus}: vocabulary size unknown; pass a vocabulary file (--vocab) or --vocab-size")
        return own[0], own[1]
    d = len(words) if words is not None else int(vocab_size)
    given = f"{vocab} ({d} words)" if words is not None else f"vocab_size={d}"
    if own is not None and own[0] != d:
        raise ValueError(f"{given} disagrees with the corpus's own vocabulary, {own[2]} ({own[0]} words): "
                         "word ids would point at other words; drop the option or fix the file")
    if words is not None and own is not None and own[1] is not None and own[1] != words:
        first = next(i for i, (a, b) in enumerate(zip(words, own[1])) if a != b)
        warnings.warn(f"{vocab}: same size as the corpus's {own[2]} but other words (first at line {first + 1}: "
                      f"{words[first]!r} vs {own[1][first]!r}); topics are labelled with {vocab}", stacklevel=2)
    return d, words


def write_corpus(out: str | Path, counts: sp.csr_matrix, n_shards: int = 1, vocab: Sequence[str] | None = None,
                 doc_ids: Sequence[str] | None = None, extra_files: dict | None = None,
                 row_group_size: int = 10_000, overwrite: bool = False) -> Path:
    """Write a CSR count matrix as a parquet corpus directory, atomically.

    Files: ``part-00000.parquet`` … (``n_shards`` of them, contiguous rows),
    ``vocab.txt`` when a vocabulary is given, and ``extra_files`` (name →
    callable writing that file given its path). More shards than documents
    give one document per shard.
    """
    if isinstance(n_shards, bool) or int(n_shards) != n_shards or n_shards < 1:
        raise ValueError(f"--shards must be an integer ≥ 1, got {n_shards!r}")
    counts = sp.csr_matrix(counts)
    counts.sort_indices()
    n, d = counts.shape
    bounds = np.linspace(0, n, min(int(n_shards), max(n, 1)) + 1).astype(int)  # no empty shard
    with atomic_directory(out, overwrite=overwrite) as tmp:
        for s in range(len(bounds) - 1):
            a, b = bounds[s], bounds[s + 1]
            block = counts[a:b]
            offsets = pa.array(block.indptr.astype(np.int32))
            ids = pa.ListArray.from_arrays(offsets, pa.array(block.indices.astype(np.int32)))
            cts = pa.ListArray.from_arrays(offsets, pa.array(np.rint(block.data).astype(np.int32)))
            cols = {WORD_IDS: ids, COUNTS: cts}
            if doc_ids is not None:
                cols = {DOC_ID: pa.array([str(x) for x in doc_ids[a:b]]), **cols}
            table = pa.table(cols).replace_schema_metadata({META_VOCAB_SIZE: str(d).encode()})
            pq.write_table(table, tmp / f"part-{s:05d}.parquet", row_group_size=row_group_size)
        if vocab is not None:
            (tmp / VOCAB_FILE).write_text("\n".join(vocab) + "\n", encoding="utf-8")
        for name, writer in (extra_files or {}).items():
            writer(tmp / name)
    return Path(out)
