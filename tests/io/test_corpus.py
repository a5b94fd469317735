"""Parquet corpus IO: round trip, partitioning, validation errors naming file/row/column, prepare, atomicity."""
import os
import signal
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from distdp.io import corpus as cio
from distdp.io.atomic import atomic_directory, recover_stale
from distdp.io.prepare import prepare, prepare_counts


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
    groups = cio.partition(units, 4)
    assert len(groups) == 4 and [u for g in groups for u in g] == units
    sizes = [sum(u.num_rows for u in g) for g in groups]
    assert max(sizes) - min(sizes) <= 25  # balanced to one row group


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
        fit = distdp.fit_lda(uri, 3, backend="local", workers=2, seed=1, progress=False)
        local = distdp.fit_lda(tmp_path / "c", 3, backend="local", workers=2, seed=1, progress=False)
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


def test_atomic_directory_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out"
    with pytest.raises(RuntimeError):
        with atomic_directory(target) as tmp:
            (tmp / "half.npy").write_text("x")
            raise RuntimeError("interrupted")
    assert not target.exists() and list(tmp_path.iterdir()) == []
    with atomic_directory(target) as tmp:
        (tmp / "a").write_text("1")
    with pytest.raises(FileExistsError):
        with atomic_directory(target):
            pass
    with pytest.raises(RuntimeError):  # a failed overwrite keeps the old output
        with atomic_directory(target, overwrite=True) as tmp:
            raise RuntimeError
    assert (target / "a").read_text() == "1"


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_siblings_of_killed_writers_are_cleaned_up(tmp_path):
    host, dead, live = socket.gethostname(), _dead_pid(), os.getpid()
    target = tmp_path / "out"
    names = {"stale_tmp": f".out.tmp-{host}-{dead}-0123abcd", "live_tmp": f".out.tmp-{host}-{live}-0123abcd",
             "other_host": f".out.tmp-elsewhere-{dead}-0123abcd", "unowned": ".out.tmp-0123abcd",
             "other_name": f".output.tmp-{host}-{dead}-0123abcd", "stale_old": f".out.old-{host}-{dead}-4567cdef"}
    for name in names.values():
        (tmp_path / name).mkdir()
    (tmp_path / names["stale_old"] / "model.json").write_text("previous")
    # out is missing: the previous output moved aside by a killed overwrite is put back, the half-written
    # temporary deleted; what belongs to a live process, another host, or no known owner stays.
    done = recover_stale(target)
    assert sorted(p.name for p in done) == sorted([names["stale_old"], names["stale_tmp"]])
    assert (target / "model.json").read_text() == "previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["out"] + [names[k] for k in ("live_tmp", "other_host", "unowned", "other_name")])
    # With out in place, a stale .old is an output already replaced: deleted.
    (tmp_path / names["stale_old"]).mkdir()
    assert recover_stale(target) == [tmp_path / names["stale_old"]] and (target / "model.json").exists()


def test_sigkilled_writer_leaves_nothing_behind_the_next_run(tmp_path):
    # A writer killed with SIGKILL (no cleanup runs) inside the atomic block: the next run on the same
    # path removes its temporary directory before writing.
    script = textwrap.dedent(f"""
        import sys, time
        from distdp.io.atomic import atomic_directory
        with atomic_directory({str(tmp_path / "out")!r}) as tmp:
            (tmp / "half.npy").write_text("x")
            print("ready", flush=True)
            time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    (left,) = [p.name for p in tmp_path.iterdir()]
    assert left.startswith(".out.tmp-") and not (tmp_path / "out").exists()
    with atomic_directory(tmp_path / "out") as tmp:
        (tmp / "a").write_text("1")
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_prepare_text_to_corpus(tmp_path):
    texts = ["The cat sat on the mat with another cat", "Dogs and cats are pets; the dog barked",
             "Stock markets fell as investors sold stocks", None, "Markets rallied; investors bought stock"]
    pq.write_table(pa.table({"body": texts, "id": ["a", "b", "c", "d", "e"]}), tmp_path / "t.parquet")
    res = prepare(tmp_path / "t.parquet", "body", tmp_path / "corpus", max_vocab=50, min_df=1, id_column="id")
    assert "the" not in res.vocab and "cat" in res.vocab and res.vocab_from_data
    X = cio.read_corpus(tmp_path / "corpus", len(res.vocab))
    assert X.shape == (5, len(res.vocab))
    assert X[0, res.vocab.index("cat")] == 2 and X[3].nnz == 0
    fixed = prepare_counts(pa.array(texts), np.arange(5).astype(str), vocab=["stock", "markets", "zebra"])
    assert fixed.counts.toarray()[:, :2].tolist() == [[0, 0], [0, 0], [1, 1], [0, 0], [1, 1]]
    with pytest.raises(ValueError, match="column 'text' not found"):
        prepare(tmp_path / "t.parquet", "text", tmp_path / "c2")
