"""The ``distdp`` command line for topic models: make-corpus, fit-lda, transform, coherence, export."""

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from distdp import lda
from distdp.cli import main
from distdp.io.corpus import write_corpus


def test_cli_make_corpus_and_fit_local(tmp_path, capsys):
    assert main(["make-corpus", str(tmp_path / "c"), "--docs", "3000", "--vocab-size", "300", "--topics", "4",
                 "--shards", "2", "--seed", "1"]) == 0
    assert main(["fit-lda", str(tmp_path / "c"), "--k", "4", "--out", str(tmp_path / "m"), "--local",
                 "--workers", "2", "--seed", "0", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "topic   0" in out and "wrote" in out and "in this process, 2 shards;" in out   # says where it ran
    truth = np.load(tmp_path / "c" / "truth" / "topic_word.npy")
    assert lda.matched_l1(np.load(tmp_path / "m" / "topic_word.npy"), truth)[0] < 0.3
    # --out-of-core: the shards re-read their row groups every pass, and the line says so
    assert main(["fit-lda", str(tmp_path / "c"), "--k", "4", "--out", str(tmp_path / "o"), "--local", "--refine", "0",
                 "--out-of-core", "--seed", "0", "--no-progress"]) == 0
    assert "in this process, 1 shard, out of core;" in capsys.readouterr().out
    assert json.loads((tmp_path / "o" / "model.json").read_text())["parameters"]["out_of_core"] is True
    # a second fit into the same directory is refused, and the first output is intact
    assert main(["fit-lda", str(tmp_path / "c"), "--k", "4", "--out", str(tmp_path / "m"), "--local"]) == 2
    assert "already exists" in capsys.readouterr().err
    # a failing fit (k too large) leaves no output directory behind
    assert main(["fit-lda", str(tmp_path / "c"), "--k", "400", "--out", str(tmp_path / "m2"), "--local"]) == 2
    assert not (tmp_path / "m2").exists()
    assert main(["fit-lda", str(tmp_path / "c"), "--k", "4", "--vocab-size", "100", "--out", str(tmp_path / "m3"),
                 "--local"]) == 2
    assert "vocab_size=100 disagrees with the corpus's own vocabulary" in capsys.readouterr().err
    # an output URI is refused before any work (Path would make it a local "s3:/…" directory)
    assert main(["fit-lda", str(tmp_path / "c"), "--k", "4", "--out", "s3://bucket/model", "--local"]) == 2
    assert "not a URI" in capsys.readouterr().err and not Path("s3:").exists()


def test_cli_private_flags_need_epsilon_and_delta(tmp_path, capsys):
    """A private flag without --epsilon, or --epsilon without --delta, is refused before any work, naming them."""
    assert main(["make-corpus", str(tmp_path / "c"), "--docs", "300", "--vocab-size", "50", "--topics", "2",
                 "--seed", "1"]) == 0
    fit = ["fit-lda", str(tmp_path / "c"), "--k", "2", "--local", "--no-progress"]
    assert main([*fit, "--out", str(tmp_path / "m1"), "--unmix", "1", "--reproducible"]) == 2
    assert "--unmix, --reproducible: private fits only (give --epsilon and --delta)" in capsys.readouterr().err
    assert main([*fit, "--out", str(tmp_path / "m2"), "--epsilon", "1"]) == 2
    assert "--delta is required with --epsilon" in capsys.readouterr().err
    assert not (tmp_path / "m1").exists() and not (tmp_path / "m2").exists()


def test_cli_transform_coherence_export(tmp_path, small, capsys):
    write_corpus(tmp_path / "c", small.counts, 2, [f"w{i}" for i in range(60)], [f"d{i}" for i in range(400)])
    assert main(["fit-lda", str(tmp_path / "c"), "--k", "4", "--refine", "2", "--refiner", "em", "--out",
                 str(tmp_path / "m"), "--local", "--seed", "0", "--no-progress"]) == 0
    meta = json.loads((tmp_path / "m" / "model.json").read_text())
    assert len(meta["refine"]["elbo"]) == 2 and (tmp_path / "m" / "variational.npy").is_file()
    assert main(["transform", str(tmp_path / "m"), str(tmp_path / "c"), "--out", str(tmp_path / "t.parquet"),
                 "--local"]) == 0
    t = pq.read_table(tmp_path / "t.parquet")
    assert t.column_names == ["doc_id", "theta", "n_tokens", "status"] and t.num_rows == 400
    assert t.column("doc_id")[5].as_py() == "d5" and len(t.column("theta")[0].as_py()) == 4
    assert main(["coherence", str(tmp_path / "m"), str(tmp_path / "c"), "--local"]) == 0
    assert "mean NPMI" in capsys.readouterr().out
    assert main(["export", str(tmp_path / "m"), str(tmp_path / "c"), "--out", str(tmp_path / "vis"), "--local"]) == 0
    assert np.load(tmp_path / "vis" / "doc_topic_dists.npy").shape == (400, 4)
    assert len(json.loads((tmp_path / "vis" / "vocab.json").read_text())) == 60
    # bad input: unknown model directory; corpus with another vocabulary size
    assert main(["transform", str(tmp_path / "nope"), str(tmp_path / "c"), "--out", str(tmp_path / "x.parquet"),
                 "--local"]) == 2
    assert "not a distdp model directory" in capsys.readouterr().err
    write_corpus(tmp_path / "c2", small.counts[:, :50], 1, [f"w{i}" for i in range(50)])
    assert main(["coherence", str(tmp_path / "m"), str(tmp_path / "c2"), "--local"]) == 2
    assert "the corpus has vocabulary size 50 but the model has 60" in capsys.readouterr().err
