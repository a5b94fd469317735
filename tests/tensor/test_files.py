"""Point files (distdp.tensor.files): parquet round trip, chunked streaming, rows of the wrong length."""

import numpy as np
import pytest
import scipy.sparse as sp

from distdp.tensor.files import ParquetPointStream, read_points, write_points


@pytest.mark.parametrize("sparse", [False, True])
def test_parquet_points_round_trip_and_stream_in_chunks(tmp_path, sparse):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 6)) * (rng.random((50, 6)) < 0.4)
    data = sp.csr_matrix(X) if sparse else X
    write_points(tmp_path / "p.parquet", data, row_group_size=16)
    got = read_points(tmp_path / "p.parquet")
    np.testing.assert_array_equal(got.toarray() if sparse else got, X)
    st = ParquetPointStream(tmp_path / "p.parquet", batch_size=7)
    parts = [st.read(11) for _ in range(5)]
    back = np.vstack([p.toarray() if sparse else p for p in parts])
    np.testing.assert_array_equal(back, X)
    assert st.read(3).shape[0] == 0 and st.dim == 6 and st.num_rows == 50


def test_parquet_rows_of_the_wrong_length_are_rejected_with_file_and_row(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": [[1.0, 2.0], [1.0, 2.0], [3.0]]}), tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match=r"bad.parquet: row 2: column 'x' has 1 entries, expected 2"):
        read_points(tmp_path / "bad.parquet")
    pq.write_table(pa.table({"indices": [[0, 5]], "values": [[1.0, 1.0]]}).replace_schema_metadata(
        {b"distdp.dim": b"3"}), tmp_path / "sp.parquet")
    with pytest.raises(ValueError, match="row 0: column 'indices' has an index outside"):
        read_points(tmp_path / "sp.parquet")
