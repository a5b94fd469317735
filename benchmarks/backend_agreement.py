"""In process against Ray: how far apart the same fit's topics come out on real corpora.

    .venv/bin/python benchmarks/backend_agreement.py        # ≈ 2 min on 2 cores

For three real corpora of ``benchmarks/corpora.py`` (prepared as ``topic_quality.py`` prepares
them, 2 parquet files) and k = 10, 20: the spectral fit (``refine=0``) and the default fit (spectral
+ Gibbs sweeps), seed 0, with 2 workers in process (``ClusterOptions(backend="local")``) and on a
local Ray instance (``num_cpus=2``); recorded, the largest absolute difference of a topic-word entry
and the matched topic L1 between the two. Writes ``benchmarks/results/backend_agreement.json``
(docs/guide/fitting.md cites it).
"""
from __future__ import annotations

import json
import runpy
import tempfile
import types
from pathlib import Path

import numpy as np
import ray

from distdp.api import ClusterOptions, fit_lda
from distdp.io.corpus import write_corpus
from distdp.lda import matched_l1

HERE = Path(__file__).resolve().parent
corpora = types.SimpleNamespace(**runpy.run_path(str(HERE / "corpora.py")))


def fit(corpus_dir: Path, out: Path, k: int, backend: str, spectral: bool) -> np.ndarray:
    """Topic-word matrix of one fit (seed 0, 2 workers) on ``backend``."""
    m = fit_lda(str(corpus_dir), k, seed=0, out=str(out), coherence=False, progress=False, overwrite=True,
                cluster=ClusterOptions(backend=backend, workers=2), **({"refine": 0} if spectral else {}))
    return np.asarray(m.topic_word)


def main() -> None:
    rows = []
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        for name in ("lee", "sms", "newsarticles"):
            prep = corpora.prepare(name)
            with tempfile.TemporaryDirectory() as tmp:
                corpus_dir = write_corpus(Path(tmp) / "c", prep.counts, n_shards=2, vocab=prep.vocab, overwrite=True)
                for k in (10, 20):
                    for spectral in (True, False):
                        local, on_ray = (fit(corpus_dir, Path(tmp) / b, k, b, spectral) for b in ("local", "ray"))
                        row = {"corpus": name, "k": k, "fit": "spectral" if spectral else "default",
                               "max_abs_difference": float(np.abs(local - on_ray).max()),
                               "matched_l1": float(matched_l1(local, on_ray)[0])}
                        rows.append(row)
                        print(json.dumps(row), flush=True)
    finally:
        ray.shutdown()
    (HERE / "results" / "backend_agreement.json").write_text(json.dumps({"rows": rows}, indent=1))


if __name__ == "__main__":
    main()
