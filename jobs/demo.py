"""`make demo`: fit spectral LDA on a small real corpus on a local Ray instance.

The corpus is the Reuters sample (395 news articles, 4,258-word vocabulary)
shipped by the `lda` package. It is written as a parquet corpus under
``out/demo/reuters``, fitted with 2 shard actors, and the top words per
topic are printed.
"""
import os
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from distdp.cli import main
from distdp.io.corpus import write_corpus

OUT = Path(os.environ.get("DISTDP_DEMO_DIR", "out/demo"))


def reuters_corpus(path: Path) -> Path:
    """Write the Reuters sample as a 2-shard parquet corpus (once)."""
    if not (path / "vocab.txt").is_file():
        import lda.datasets

        X = sp.csr_matrix(lda.datasets.load_reuters().astype(np.float64))
        vocab = list(lda.datasets.load_reuters_vocab())
        titles = [t.split(" ", 1)[1] for t in lda.datasets.load_reuters_titles()]
        write_corpus(path, X, n_shards=2, vocab=vocab, doc_ids=titles, row_group_size=100, overwrite=True)
    return path


if __name__ == "__main__":
    corpus = reuters_corpus(OUT / "reuters")
    sys.exit(main(["fit-lda", str(corpus), "--k", "10", "--workers", "2", "--ray", "--seed", "0",
                   "--out", str(OUT / "model"), "--overwrite", *sys.argv[1:]]))
