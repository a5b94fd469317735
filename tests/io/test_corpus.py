"""Parquet corpus IO (distdp.io.corpus): round trip, partitioning, URIs and S3, validation errors naming file/row/column."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from distdp.io import corpus as cio
from distdp.api import ClusterOptions


def write_rows(path, ids, counts, **extra):
    cols = {"word_ids": pa.array(ids, type=pa.list_(pa.int32())), "counts": pa.array(counts, type=pa.list_(pa.int32()))}
    cols.update(extra)
    pq.write_table(pa.table(cols), path)
    return path


def test_round_trip_and_row_groups(tmp_path):
    rng = np.random.default_rng(0)
    X = sp.random(230, 40, density=0.2, random_state=1, format="csr")
    X.data = rng.integers(1, 5, X.nnz).astype(float)
    cio.write_corpus(tmp_path / "c", X, n_shards=3, vocab=[f"w{i}" for i in range(40)], row_group_size=25)
    units = cio.plan_units(cio.discover(tmp_path / "c"))
    assert sum(u.num_rows for u in units) == 230 and len(units) > 3
    back = cio.read_units(units, 40)
    assert (back != X).nnz == 0
    d, words = cio.resolve_vocab(tmp_path / "c")
    assert d == 40 and words[3] == "w3"
    assert [u for g in cio.partition(units, 3) for u in g] == units   # one file each: whole row groups
    for n in (3, 4, 7):
        parts = cio.partition(units, n)
        sizes = [sum(u.num_rows for u in g) for g in parts]
        assert len(parts) == n and (max(sizes) - min(sizes) <= 1 or max(sizes) <= cio.BALANCE * 230 / n)
        back = sp.vstack([cio.read_units(g, 40) for g in parts], format="csr")
        assert (back != X).nnz == 0            # every row once, in order, also from cut row groups
        labels = np.concatenate([cio.read_doc_ids(g) for g in parts])
        assert list(labels) == list(cio.read_doc_ids(units))
    assert any(u.num_rows < 25 and u.offset for g in cio.partition(units, 7) for u in g)  # 7 parts cut groups


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(1, 60), min_size=1, max_size=12), n_parts=st.integers(1, 20))
def test_partition_covers_every_row_once_and_balances(sizes, n_parts):
    """Any row groups over any number of shards: the shards hold every row once, in order, and either
    whole row groups within BALANCE of the mean rows or equal rows (±1) with cut row groups."""
    units, first = [], 0
    for g, n in enumerate(sizes):
        units.append(cio.Unit("f.parquet", g, first, n, nonzeros=10 * n))
        first += n
    parts = cio.partition(units, n_parts)
    rows = [(u.row_group, u.offset + i) for g in parts for u in g for i in range(u.num_rows)]
    assert rows == [(g, i) for g, n in enumerate(sizes) for i in range(n)]
    assert all(u.first_row == units[u.row_group].first_row + u.offset for g in parts for u in g)
    counts = [sum(u.num_rows for u in g) for g in parts]
    total, n = sum(sizes), min(n_parts, sum(sizes))
    assert len(parts) <= n and min(counts) > 0
    if any(u.num_rows < units[u.row_group].num_rows for g in parts for u in g):
        assert len(parts) == n and max(counts) - min(counts) <= 1
    else:
        assert max(counts) <= cio.BALANCE * total / n


def test_corpus_by_uri_reads_as_the_local_path(tmp_path):
    """A corpus, its vocabulary and its prepare.json given as URIs (pyarrow.fs; ``file://`` here, as
    ``s3://`` on a cluster) read exactly as the same files by local path; hidden directories are
    skipped relative to the corpus, not along the whole path."""
    from distdp.lda.private.fit import vocabulary_entry

    root = tmp_path / ".hidden parent" / "c"          # a hidden directory above the corpus is fine
    rng = np.random.default_rng(0)
    X = sp.random(120, 30, density=0.2, random_state=2, format="csr")
    X.data = rng.integers(1, 5, X.nnz).astype(float)
    cio.write_corpus(root, X, n_shards=2, vocab=[f"w{i}" for i in range(30)], row_group_size=25)
    (root / ".trash").mkdir()
    write_rows(root / ".trash" / "old.parquet", [[0]], [[1]])   # inside the corpus: skipped
    (root / "prepare.json").write_text('{"vocab_from_private_data": true}')
    uri = root.as_uri() + "/"                          # percent-encodes the space
    local_files = cio.discover(root)
    files = cio.discover(uri)
    assert len(files) == len(local_files) == 2 and all(f.startswith("file:///") for f in files)
    assert [cio.discover(f)[0] for f in files] == files          # a file URI is its own corpus
    units = cio.plan_units(files)
    assert [(u.row_group, u.num_rows) for u in units] == [(u.row_group, u.num_rows)
                                                         for u in cio.plan_units(local_files)]
    assert (cio.read_units(units, 30) != X).nnz == 0
    assert list(cio.read_doc_ids(units[:1])) == [f"part-00000.parquet:{i}" for i in range(25)]
    assert cio.resolve_vocab(uri) == cio.resolve_vocab(root) == (30, [f"w{i}" for i in range(30)])
    assert cio.load_vocab(uri + "vocab.txt")[3] == "w3"
    assert vocabulary_entry(uri) == vocabulary_entry(root) and vocabulary_entry(uri)[0]["vocab_from_private_data"]
    assert vocabulary_entry(files[0]) == vocabulary_entry(uri)     # prepare.json beside a file
    with pytest.raises(FileNotFoundError, match="no such corpus"):
        cio.discover(uri + "missing")
    with pytest.raises(FileNotFoundError, match="vocabulary file not found"):
        cio.load_vocab(uri + "missing.txt")
    with pytest.raises(ValueError, match="not a URI pyarrow can open.*percent-encoded"):
        cio.discover("file:///a b/c")


def test_corpus_on_s3_fits_as_the_local_path(tmp_path, monkeypatch):
    """An s3:// corpus on a local S3 server (moto): discovered, its vocabulary found, read and fitted
    exactly as the same files by local path. The endpoint goes in the URI's query, which every file's
    URI keeps; credentials come from the environment, as on a cluster."""
    import pyarrow.fs as pafs
    from moto.server import ThreadedMotoServer

    import distdp

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        s3 = pafs.S3FileSystem(endpoint_override=f"{host}:{port}", scheme="http", region="us-east-1",
                               allow_bucket_creation=True)
        s3.create_dir("bucket")
        rng = np.random.default_rng(0)
        X = sp.random(300, 40, density=0.2, random_state=3, format="csr")
        X.data = rng.integers(1, 5, X.nnz).astype(float)
        cio.write_corpus(tmp_path / "c", X, n_shards=2, vocab=[f"w{i}" for i in range(40)], row_group_size=50)
        pafs.copy_files(str(tmp_path / "c"), "bucket/corpus", source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=s3)
        uri = f"s3://bucket/corpus/?endpoint_override={host}:{port}&scheme=http&region=us-east-1"
        files = cio.discover(uri)
        assert [f.split("?")[0] for f in files] == ["s3://bucket/corpus/part-00000.parquet",
                                                    "s3://bucket/corpus/part-00001.parquet"]
        assert cio.resolve_vocab(uri) == (40, [f"w{i}" for i in range(40)])
        assert (cio.read_units(cio.plan_units(files), 40) != X).nnz == 0
        fit = distdp.fit_lda(uri, 3, seed=1, progress=False, cluster=ClusterOptions(backend="local", workers=2))
        local = distdp.fit_lda(tmp_path / "c", 3, seed=1, progress=False,
                               cluster=ClusterOptions(backend="local", workers=2))
        np.testing.assert_array_equal(fit.topic_word, local.topic_word)
        with pytest.raises(FileNotFoundError, match="no such corpus"):
            cio.discover(uri.replace("/corpus/", "/nothing/"))
    finally:
        server.stop()


def test_unreachable_uri_is_named(monkeypatch):
    """An object store that cannot be reached (here simulated: pyarrow raises OSError while resolving
    the bucket, as it does without network) fails with the URI in the message."""
    from types import SimpleNamespace

    def unreachable(uri):
        raise OSError("AWS Error NETWORK_CONNECTION during HeadBucket operation")

    monkeypatch.setattr(cio, "pafs", SimpleNamespace(FileSystem=SimpleNamespace(from_uri=unreachable)))
    with pytest.raises(FileNotFoundError, match="s3://bucket/corpus: cannot be reached .*NETWORK_CONNECTION"):
        cio.discover("s3://bucket/corpus")


@pytest.mark.parametrize("ids,counts,needle", [
    ([[0, 1], [2, 99]], [[1, 1], [1, 1]], "row 1: column 'word_ids': id 99 is outside the vocabulary [0, 10)"),
    ([[0, 1], [2, 3]], [[1, 1], [1, -2]], "row 1: column 'counts': negative count -2"),
    ([[0, 1], [2, 3]], [[1, 1], [1]], "row 1: 'word_ids' has 2 entries but 'counts' has 1"),
    ([[0, 1], [4, 4]], [[1, 1], [1, 2]], "row 1: column 'word_ids': id 4 appears twice in the row"),
    ([[0, 1], None], [[1, 1], [1]], "row 1: column 'word_ids' is null"),
    ([[0, 1], [2, None, 3]], [[1, 1], [1, 1, 1]], "row 1: column 'word_ids' has a null entry"),  # segfaulted
    ([[0, 1], [2, 3]], [[1, 1], [None, 1]], "row 1: column 'counts' has a null entry"),
])
def test_bad_rows_are_named(tmp_path, ids, counts, needle):
    f = write_rows(tmp_path / "bad.parquet", ids, counts)
    with pytest.raises(ValueError) as err:
        cio.read_corpus(f, 10)
    assert needle in str(err.value) and "bad.parquet" in str(err.value)


def test_wrong_schema_and_empty(tmp_path):
    pq.write_table(pa.table({"word_ids": pa.array([[1]], type=pa.list_(pa.int32())), "n": [1]}), tmp_path / "a.parquet")
    with pytest.raises(ValueError, match="column 'counts' is missing"):
        cio.plan_units(cio.discover(tmp_path / "a.parquet"))
    pq.write_table(pa.table({"word_ids": pa.array([[1]], type=pa.list_(pa.int32())),
                             "counts": pa.array([[1.5]], type=pa.list_(pa.float64()))}), tmp_path / "b.parquet")
    with pytest.raises(ValueError, match="column .counts. has type list.*expected list<int32>"):
        cio.plan_units(cio.discover(tmp_path / "b.parquet"))
    write_rows(tmp_path / "e.parquet", [], [])
    with pytest.raises(ValueError, match="empty corpus"):
        cio.plan_units(cio.discover(tmp_path / "e.parquet"))
    with pytest.raises(FileNotFoundError, match="no such corpus"):
        cio.discover(tmp_path / "missing")
    (tmp_path / "text.parquet").write_text("not parquet")
    with pytest.raises(ValueError, match="not a readable parquet file"):
        cio.plan_units([tmp_path / "text.parquet"])


def test_vocab_size_required(tmp_path):
    f = write_rows(tmp_path / "x.parquet", [[0, 1, 2]], [[1, 1, 1]])
    with pytest.raises(ValueError, match="vocabulary size unknown"):
        cio.resolve_vocab(f)
    assert cio.resolve_vocab(f, vocab_size=5) == (5, None)
