"""Topic quality and time: spectral, spectral + EM refinement, scikit-learn and gensim.

    .venv/bin/python benchmarks/refine_quality.py                  # all corpora (≈ 20 min on 2 cores)
    .venv/bin/python benchmarks/refine_quality.py --corpora reuters,lee

Real corpora (all shipped by registry packages, no download):
  reuters     395 news articles, 4,258-word vocabulary (the `lda` package's sample, pre-tokenised)
  lee         300 news articles (gensim's lee_background.cor), prepared with `distdp prepare` rules
  newsgroups  200 posts from alt.atheism and sci.space (gensim's mini_newsgroup), headers stripped
  movies      200 one-sentence movie reviews (gensim's pang_lee_polarity.cor): short texts
Synthetic: A (N=20k, d=2k, k=10) and, distdp only, B (N=200k, d=10k, k=20) of benchmarks/lda_speed.py.

k = 10 on every real corpus (5 on the 200 short reviews). NPMI: mean over
topics of the mean NPMI of the top-10-word pairs, document co-occurrence on
the corpus itself (Lau et al. 2014). L1: Hungarian-matched mean topic L1 to
the truth (synthetic). Every method runs in this one process on one core
(distdp backend="local"; scikit-learn n_jobs=None; gensim LdaMulticore with
its default workers = cores − 1), defaults otherwise: scikit-learn
LatentDirichletAllocation online and batch (max_iter=10), gensim
LdaMulticore with passes=1 and passes=10.

Writes benchmarks/results/refine_quality.json and refine_quality.png.
"""
from __future__ import annotations

import argparse
import json
import runpy
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from distdp.api import ClusterOptions

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
REFINE_STEPS = (0, 1, 2, 3, 5, 10)


# ------------------------------------------------------------------ corpora
def _gensim_data(name: str) -> str:
    from gensim.test.utils import datapath

    return datapath(name)


def _prepare(texts: list[str], max_vocab: int):
    import pyarrow as pa

    from distdp.io.prepare import prepare_counts

    p = prepare_counts(pa.array(texts), np.arange(len(texts)).astype(str), max_vocab=max_vocab, min_df=2)
    return p.counts, p.vocab


def _mini_newsgroup() -> list[str]:
    """gensim's mini_newsgroup posts, headers stripped (``benchmarks/corpora.py``, run by file path)."""
    return runpy.run_path(str(HERE / "corpora.py"))["load_texts"]("newsgroups")


def load(name: str):
    """(counts, vocab or None, truth topic_word or None, k)."""
    if name == "reuters":
        import lda.datasets

        return sp.csr_matrix(lda.datasets.load_reuters().astype(float)), list(lda.datasets.load_reuters_vocab()), None, 10
    if name == "lee":
        X, v = _prepare(Path(_gensim_data("lee_background.cor")).read_text(encoding="latin1").splitlines(), 3000)
        return X, v, None, 10
    if name == "newsgroups":
        X, v = _prepare(_mini_newsgroup(), 3000)
        return X, v, None, 10
    if name == "movies":
        lines = Path(_gensim_data("pang_lee_polarity.cor")).read_text(encoding="latin1").splitlines()
        X, v = _prepare([ln.split(" ", 1)[1] for ln in lines], 1000)
        return X, v, None, 5
    if name in ("A", "B"):
        from distdp.io.corpus import read_corpus

        path = HERE / "out" / name
        if not path.is_dir():
            raise SystemExit(f"{path} missing: run benchmarks/lda_speed.py --corpora {name} first")
        tw = np.load(path / "truth" / "topic_word.npy")
        return read_corpus(path, tw.shape[1]), None, tw, tw.shape[0]
    raise ValueError(name)


# ------------------------------------------------------------------ methods
def run_distdp(X, k, refine):
    import distdp

    t = time.perf_counter()
    m = distdp.fit_lda(X, k, seed=0, progress=False, refine=refine, coherence=False, refiner="em",
                       cluster=ClusterOptions(backend="local"))
    return m.topic_word, time.perf_counter() - t


def run_sklearn(X, k, method):
    from sklearn.decomposition import LatentDirichletAllocation

    t = time.perf_counter()
    est = LatentDirichletAllocation(n_components=k, learning_method=method, random_state=0).fit(X)
    return est.components_ / est.components_.sum(1, keepdims=True), time.perf_counter() - t


def run_gensim(X, k, passes):
    from gensim.matutils import Sparse2Corpus
    from gensim.models import LdaMulticore

    bow = list(Sparse2Corpus(sp.csr_matrix(X).astype(np.int64), documents_columns=False))
    t = time.perf_counter()
    est = LdaMulticore(bow, num_topics=k, id2word={i: str(i) for i in range(X.shape[1])}, passes=passes,
                       random_state=0)
    return est.get_topics(), time.perf_counter() - t


def score(topic_word, X, truth):
    from distdp.lda import refine
    from distdp.lda import matched_l1

    top = np.argsort(-topic_word, axis=1, kind="stable")[:, :10]
    words = np.unique(top)
    out = {"npmi": float(refine.npmi(top, refine.cooccurrence(X, words), words).mean())}
    if truth is not None:
        out["l1"] = matched_l1(topic_word, truth)[0]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default="reuters,lee,newsgroups,movies,A,B")
    ap.add_argument("--tools", default="sklearn,gensim")
    args = ap.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    out_json = RESULTS / "refine_quality.json"
    results = json.loads(out_json.read_text()) if out_json.is_file() else {}
    for name in args.corpora.split(","):
        X, vocab, truth, k = load(name)
        runs = {}
        methods = [(f"distdp+{r}EM" if r else "distdp spectral", run_distdp, r) for r in REFINE_STEPS]
        if name != "B":
            if "sklearn" in args.tools:
                methods += [("sklearn online", run_sklearn, "online"), ("sklearn batch", run_sklearn, "batch")]
            if "gensim" in args.tools:
                methods += [("gensim 1 pass", run_gensim, 1), ("gensim 10 passes", run_gensim, 10)]
        for label, fn, arg in methods:
            tw, sec = fn(X, k, arg)
            runs[label] = {"seconds": sec, **score(tw, X, truth)}
            if vocab is not None and label in ("distdp spectral", "distdp+3EM", "sklearn online"):
                runs[label]["top_words"] = [[vocab[j] for j in row] for row in np.argsort(-tw, 1)[:, :8]]
            print(f"{name:10s} {label:18s} " + " ".join(f"{kk}={v:.4f}" for kk, v in runs[label].items()
                                                         if isinstance(v, float)), flush=True)
        results[name] = {"n_docs": int(X.shape[0]), "vocab_size": int(X.shape[1]), "k": k, "runs": runs}
        out_json.write_text(json.dumps(results, indent=2) + "\n")
    plot(results, RESULTS / "refine_quality.png")


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    names = list(results)
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names):
        for label, r in results[name]["runs"].items():
            color = "tab:blue" if label.startswith("distdp") else "tab:orange" if "sklearn" in label else "tab:green"
            ax.scatter(r["seconds"], r["npmi"], color=color)
            ax.annotate(label.replace("distdp", "d"), (r["seconds"], r["npmi"]), fontsize=7)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("wall time (s)")
        ax.set_ylabel("mean NPMI (top 10)")
        ax.set_title(f"{name} (N={results[name]['n_docs']}, k={results[name]['k']})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
