"""Private spectral LDA: topic-recovery L1 vs ε and N, per mechanism and accounting.

Synthetic LDA corpora with known topics: d = 5,000, k = 10, α0 = 1 (α = α0 ·
Dirichlet(10·1) draw), topic-word rows Dirichlet(0.1), document length
3 + Poisson(97) (mean 100); N ∈ {10⁴, 10⁵, 10⁶}; ε ∈ {0.5, 1, 2, 4, 8};
δ = 1e-6. Error: mean L1 distance between matched topics (Hungarian).

Part ``scalable`` (d = 5,000): the mechanisms that never form a d×d or
d×d×d object, ``whitened`` and ``power`` (distdp.lda.private.pipeline) with the
power-method whitening, each with tight accounting (joint PLD calibration, the
default) and with the papers' basic composition (ε split over the releases),
and ``whitened+mf``, ``whitened`` with the matrix-free second-moment whitening
(what ``fit-lda --refine 0`` does on 5,000 words; tight accounting only),
against the non-private fit.
Part ``default`` (d = 5,000): the private default of ``fit-lda --epsilon``
(``whitened+unmix``: a scan release picks the 1,000 most frequent words, the
spectral fit runs on them, a tail release unmixes every other word's topics,
then two unmixing passes on all words (θ̂² weights, each released on its start's support,
solves aligned and averaged with the tail's); budget fractions in :func:`distdp.lda.private.fit.budget_plan`) and
the former default ``whitened+em`` (``--refine 2``: the same, with 2 private
EM iterations in place of the unmixing passes) and ``whitened+unmix+auto``
(``--working-vocab auto``: the default, restarted on 2,000 words when the
scan and a probe of the whitening show the margin), against the non-private
spectral fit + 3 EM iterations.
Part ``dense`` (d = 100, k = 5, N ∈ {10⁴, 10⁵}): the papers' configurations
1–4 and AGN/AVN (distdp.lda.private.dense), which form M3 and are refused at
d = 5,000, with the scalable ones on the same corpora; ``config2-declared`` is
configuration 2 with a guarantee, its bounds declared from the generating
model (``DeclaredBounds.from_model``, margin 2: what a user with a public model
of the corpus could declare) and checked by the private test.

Part ``text`` (issue 43): the default part's fits on corpora shaped like text: ``bg0.3`` / ``bg0.5``
(every topic 70% / 50% its own Dirichlet(0.1) draw and the rest one Zipf-law background shared by
all topics; background 0 is the default part's corpus) and ``semireal`` (documents drawn from the
topics and α fitted without privacy to ``reuters``, d = 4,258, k = 10, its mean length 213).

Each N has ``--runs`` (2) corpus draws, run r's fits with noise seeds 1000·r + 10ε, and the
rows are their medians; the scalable part has one draw at N = 10⁶ (its fits there are far from the
non-private fit's; the default part's, the target's, have both). ``--only-runs 1`` adds or
recomputes one draw's rows and keeps the others'.

The fits run in-process on two shards (:class:`distdp.lda.pipeline.LocalBackend`:
the same shard code and coordinator as Ray). Noise is seeded (reproducible
experiment: every fit reports "not private"). A fit whose noisy M2 has
σ_k ≤ 0 fails; it is scored as L1 = 2 (the maximum) and counted.

Run: ``.venv/bin/python benchmarks/lda_privacy_utility.py [--part scalable|default|dense|text|all] [--runs 2]
[--n 1000000] [--eps 2 4 8] [--only-runs 1] [--default whitened+unmix] [--scalable whitened+mf]
[--shapes bg0.3 bg0.5 semireal] [--text-fits whitened+unmix]``
(``--n``/``--eps``/``--only-runs``/``--default``/``--scalable`` recompute only those rows and keep the rest).
Writes ``benchmarks/results/lda_privacy_utility.{json,png}``.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from distdp import lda
from distdp.lda.private import fit as private_fit
from distdp.lda.pipeline import LocalBackend, SpectralParams, fit_spectral, refine_em
from distdp.lda.private.pipeline import fit_lda_private_scalable, fit_spectral_private
from distdp.privacy.ledger import PrivacyLedger
from distdp.lda.private import scalable as lda_private
from distdp.lda.private.shard import PrivateShard as Shard
from distdp.lda.synthetic import sample_corpus
from distdp.api import ClusterOptions

EPS = [0.5, 1.0, 2.0, 4.0, 8.0]
DELTA = 1e-6
OUT = Path(__file__).resolve().parent / "results"
SCALABLE = {"d": 5000, "k": 10, "N": [10_000, 100_000, 1_000_000]}
DENSE = {"d": 100, "k": 5, "N": [10_000, 100_000]}
DEFAULT_FITS = ["whitened+unmix", "whitened+em", "whitened+unmix+auto"]
#: The text part (issue 43): text-like corpora (shared Zipf-law background) and topics fitted to real text.
TEXT_SHAPES = ["bg0.3", "bg0.5", "semireal"]    # background 0: the default part's rows
TEXT_FITS = ["whitened+unmix", "whitened+em"]
SCALABLE_FITS = ["whitened", "power", "whitened+mf"]
DENSE_MECHS = ["config1", "config1-paper", "config2", "config2-declared", "config3", "config4", "agn", "avn"]
#: The generating model of each backend's corpus (config2-declared declares its bounds from it).
_TRUTH: dict = {}


def corpus(n, d, k, seed, shape="dirichlet"):
    """Draw ``seed`` of a corpus of ``n`` documents: ``dirichlet`` topics (the papers'), ``bg<w>`` (text-like:
    a share w of every topic's mass on a shared Zipf-law background), or ``semireal`` (the topics and α of
    :func:`semireal_model`)."""
    rng = np.random.default_rng([seed, n, d])
    if shape == "semireal":
        tw, alpha, length = semireal_model()
        c = sample_corpus(n, tw.shape[1], tw.shape[0], rng, doc_length=length, topic_word=tw, alpha=alpha)
    else:
        bg = 0.0 if shape == "dirichlet" else float(shape[2:])
        c = sample_corpus(n, d, k, rng, alpha0=1.0, doc_length=100.0, background=bg)
    shards = [Shard(c.counts[idx]) for idx in np.array_split(np.arange(n), 2)]
    be = LocalBackend(shards)
    _TRUTH.clear()
    _TRUTH[id(be)] = c
    return c, be


_SEMIREAL: list = []


def semireal_model():
    """``(topic_word, α, mean length)`` fitted to ``reuters`` (395 real articles, d = 4,258; k = 10) without
    privacy (spectral + 20 EM iterations, α learned): the generator of the ``semireal`` corpora."""
    if not _SEMIREAL:
        import runpy

        from distdp import api

        X, vocab, _, k = runpy.run_path(str(Path(__file__).resolve().parent / "refine_quality.py"))["load"]("reuters")
        m = api.fit_lda(X, k, seed=0, progress=False, refine=20, vocab=vocab, refiner="em", coherence=False,
                        cluster=ClusterOptions(backend="local"))
        beta = np.maximum(m.topic_word, 0.0)
        _SEMIREAL.append((beta / beta.sum(axis=1, keepdims=True), np.asarray(m.alpha),
                          float(np.asarray(X.sum(axis=1)).mean())))
    return _SEMIREAL[0]


def score(topic_word, truth):
    return float(lda.matched_l1(topic_word, truth)[0])


def scalable_fit(be, d, k, mech, eps, acc, seed):
    free = mech == "whitened+mf"
    cfg = lda_private.PrivateSpectralConfig(eps, DELTA, mechanism="whitened" if free else mech,
                                            dense_whitening=free, matrix_free=free)
    plan = lda_private.plan_noise(cfg, accounting_mode=acc)
    res = fit_spectral_private(be, d, SpectralParams(k=k, alpha0=1.0), cfg, np.random.default_rng(seed), plan=plan)
    return res.result.topic_word, res.ledger.epsilon(DELTA)


def default_fit(be, d, k, mech, eps, acc, seed):
    """``whitened+unmix``: the private default of fit-lda (:func:`distdp.lda.private.fit.resolve_refinement`);
    ``whitened+em``: the same with ``refine=2`` (tail release, then 2 private EM iterations);
    ``whitened+unmix+auto``: the default with ``working_vocab="auto"`` (``--working-vocab auto``)."""
    r = private_fit.resolve_refinement(d, k, refine=2 if mech == "whitened+em" else None,
                                       working_vocab="auto" if mech == "whitened+unmix+auto" else None)
    cfg = private_fit.spectral_config(eps, DELTA, r)
    ledger = PrivacyLedger(private=False)
    fit = fit_lda_private_scalable(be, d, SpectralParams(k=k, alpha0=1.0), cfg, np.random.default_rng(seed), ledger,
                                   private_fit.budget_plan(cfg, r), r, eta=1.0 / k)
    return fit.topic_word, ledger.epsilon(DELTA)


def nonprivate_em(be, d, k, seed):
    """The non-private spectral fit + 3 EM iterations."""
    res = fit_spectral(be, d, SpectralParams(k=k, alpha0=1.0), np.random.default_rng(seed))
    return refine_em(be, res.topic_word, res.alpha, res.stats["n_tokens"], 3, 1.0 / k).topic_word


_DENSE_CACHE: dict = {}


def dense_fit(be, d, k, mech, eps, acc, seed):
    from distdp.lda.pipeline import sum_partials
    from distdp.lda.private import dense as lda_dense

    if id(be) not in _DENSE_CACHE:  # one pass per corpus; the mechanisms differ only after it
        _DENSE_CACHE.clear()
        _DENSE_CACHE[id(be)] = sum_partials(be.call(Shard.dense_moments))
    part = _DENSE_CACHE[id(be)]
    bounds = None
    if mech == "config2-declared":
        truth = _TRUTH[id(be)]
        mech, bounds = "config2", lda_dense.DeclaredBounds.from_model(truth.topic_word, truth.alpha, margin=2.0)
    res = lda_dense.fit_dense(part, k, 1.0, mech, epsilon=eps, delta=DELTA, rng=np.random.default_rng(seed),
                              reproducible=True, accounting="tight" if acc == "tight" else "paper",
                              n_docs=sum(be.call(Shard.row_count)), declared_bounds=bounds)
    return res.topic_word, res.ledger.epsilon(DELTA)


def run_ids(n, runs, large_runs, only=None):
    """The runs (corpus draws) of corpus size ``n``: ``runs`` of them, ``large_runs`` at N ≥ 10⁶, those in ``only``."""
    return [run for run in range(runs if n < 1_000_000 else min(runs, large_runs)) if only is None or run in only]


def run_part(spec, mechs, fitters, runs, rows, accountings=("tight", "basic"), baselines=("non-private",), save=None,
             epsilons=EPS, large_runs=1, only_runs=None):
    """Run every (N, run, mechanism, accounting, ε) of ``spec``, appending to ``rows``.

    ``runs`` corpus draws per N (``large_runs`` at N = 10⁶, see :func:`run_ids`). The non-private
    baselines of an (N, run) already in ``rows`` are kept, not refitted.
    """
    d, k, shape = spec["d"], spec["k"], spec.get("shape", "dirichlet")
    for n in spec["N"]:
        for run in run_ids(n, runs, large_runs, only_runs):
            c, be = corpus(n, d, k, run, shape)
            d, k = c.topic_word.shape[1], c.topic_word.shape[0]
            for baseline in baselines:
                if any(r["d"] == d and r["N"] == n and r["run"] == run and r["mechanism"] == baseline
                       and r.get("shape", "dirichlet") == shape for r in rows):
                    continue
                t0 = time.perf_counter()
                base = (fit_spectral(be, d, SpectralParams(k=k, alpha0=1.0), np.random.default_rng(run)).topic_word
                        if baseline == "non-private" else nonprivate_em(be, d, k, run))
                rows.append({"shape": shape, "d": d, "k": k, "N": n, "run": run, "mechanism": baseline, "accounting": "-",
                             "epsilon": None, "l1": score(base, c.topic_word),
                             "seconds": time.perf_counter() - t0})
                print(rows[-1], flush=True)
            for mech in mechs:
                for acc in accountings:
                    for eps in epsilons:
                        t0 = time.perf_counter()
                        try:
                            tw, spent = fitters[mech](be, d, k, mech, eps, acc, 1000 * run + int(10 * eps))
                            l1, failed = score(tw, c.topic_word), False
                        except ValueError as err:
                            l1, spent, failed = 2.0, None, str(err)[:120]
                        rows.append({"shape": shape, "d": d, "k": k, "N": n, "run": run, "mechanism": mech,
                                     "accounting": acc,
                                     "epsilon": eps, "epsilon_certified": spent, "l1": l1, "failed": failed,
                                     "seconds": time.perf_counter() - t0})
                        print(rows[-1], flush=True)
            if save is not None:
                save(rows)


def summarise(rows):
    out = {}
    for r in rows:
        shape = r.get("shape", "dirichlet")
        key = (f"{'' if shape == 'dirichlet' else shape + ' '}d={r['d']} N={r['N']} {r['mechanism']} "
               f"{r['accounting']} eps={r['epsilon']}")
        out.setdefault(key, []).append(r["l1"])
    return {k: float(np.median(v)) for k, v in out.items()}


def plot(rows, path):
    """One panel per (d, N): median L1 per (mechanism, accounting) against ε, log-log (the N = 10⁶
    rows differ by percent, near the non-private lines); a failed fit is drawn at 2, the maximum."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(r.get("shape", "dirichlet"), r["d"], r["N"]) for r in rows})
    curves = sorted({(r["mechanism"], r["accounting"]) for r in rows if r["accounting"] != "-"})
    colours = dict(zip(sorted({m for m, _ in curves}), plt.get_cmap("tab20").colors))
    fig, axes = plt.subplots(1, len(groups), figsize=(4.2 * len(groups), 4.4), squeeze=False)
    for ax, (shape, d, n) in zip(axes[0], groups):
        sub = [r for r in rows if r["d"] == d and r["N"] == n and r.get("shape", "dirichlet") == shape]
        for name, ls in (("non-private", "--"), ("non-private+em", "-.")):
            if any(r["mechanism"] == name for r in sub):
                ax.axhline(np.median([r["l1"] for r in sub if r["mechanism"] == name]), color="k", ls=ls, label=name)
        for mech, acc in curves:
            ys = [[r["l1"] for r in sub if r["mechanism"] == mech and r["accounting"] == acc and r["epsilon"] == e]
                  for e in EPS]
            if not any(ys):
                continue
            ax.plot(EPS, [np.median(y) if y else np.nan for y in ys], marker="o", ms=3, color=colours[mech],
                    ls="-" if acc == "tight" else ":", label=f"{mech} ({acc})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(5e-3, 2.5)
        ax.set_xticks(EPS, [f"{e:g}" for e in EPS])
        ax.minorticks_off()
        ax.set_title(f"{'' if shape == 'dirichlet' else shape + ', '}d={d:,}, N={n:,}", fontsize=9)
        ax.set_xlabel("ε (δ = 1e-6)")
    axes[0][0].set_ylabel("matched topic L1 (median of runs; fail = 2)")
    handles = {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles.keys()), loc="lower center", ncol=6, fontsize=7)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["scalable", "default", "dense", "text", "all"], default="all")
    ap.add_argument("--shapes", nargs="+", default=TEXT_SHAPES, help="corpora of the text part: bg<w> (a share w "
                    "of every topic on a shared Zipf-law background) or semireal (topics fitted to reuters)")
    ap.add_argument("--text-fits", nargs="+", choices=DEFAULT_FITS, default=TEXT_FITS,
                    help="private fits of the text part")
    ap.add_argument("--replot", action="store_true", help="redraw the PNG from the saved JSON, fit nothing")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--only-runs", type=int, nargs="+", help="only these runs (corpus draws; their other "
                    "runs' rows are kept)")
    ap.add_argument("--n", type=int, nargs="+", help="only these corpus sizes of the d = 5,000 parts "
                    "(their other rows and baselines are kept)")
    ap.add_argument("--eps", type=float, nargs="+", default=EPS, help="only these ε of the d = 5,000 parts "
                    "(the other rows are kept; the baselines are refitted only on a full ε sweep)")
    ap.add_argument("--default", nargs="+", choices=DEFAULT_FITS, default=DEFAULT_FITS,
                    help="only these fits of the default part (the other rows are kept)")
    ap.add_argument("--scalable", nargs="+", choices=SCALABLE_FITS, default=SCALABLE_FITS,
                    help="only these fits of the scalable part (the other rows are kept)")
    args = ap.parse_args()
    scalable = {**SCALABLE, "N": args.n or SCALABLE["N"]}
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "lda_privacy_utility.json"
    rows = json.loads(path.read_text())["rows"] if path.exists() else []
    if args.replot:
        plot(rows, OUT / "lda_privacy_utility.png")
        return

    def save(rows):
        path.write_text(json.dumps({"delta": DELTA, "epsilons": EPS, "rows": rows, "median_l1": summarise(rows)},
                                   indent=1) + "\n")

    def rerun(r, mechs, baseline):  # a row this invocation recomputes (its baseline too on a full ε sweep)
        return r["d"] == SCALABLE["d"] and r["N"] in scalable["N"] and (args.only_runs is None
                                                                      or r["run"] in args.only_runs) and (
            (r["mechanism"] in mechs and r["epsilon"] in args.eps)
            or (r["mechanism"] == baseline and set(EPS) <= set(args.eps)))

    if args.part in ("scalable", "all"):
        rows = [r for r in rows if not rerun(r, tuple(args.scalable), "non-private")]
        power_form = [m for m in args.scalable if m != "whitened+mf"]
        if power_form:
            run_part(scalable, power_form, {m: scalable_fit for m in power_form}, args.runs, rows, epsilons=args.eps,
                     only_runs=args.only_runs)
        if "whitened+mf" in args.scalable:
            run_part(scalable, ["whitened+mf"], {"whitened+mf": scalable_fit}, args.runs, rows, ("tight",),
                     epsilons=args.eps, only_runs=args.only_runs)
    if args.part in ("default", "all"):
        rows = [r for r in rows if not rerun(r, tuple(args.default), "non-private+em")]
        # Every N with all runs: the target's row (ε = 1, N = 10⁶) is a median like the others; the
        # non-private spectral fit (the target's reference) is fitted where the scalable part has none.
        run_part(scalable, args.default, {m: default_fit for m in args.default}, args.runs, rows, ("tight",),
                 ("non-private+em", "non-private"), save, args.eps, large_runs=args.runs, only_runs=args.only_runs)
    if args.part in ("text", "all"):
        for shape in args.shapes:
            spec = {**scalable, "shape": shape}
            rows = [r for r in rows if not (r.get("shape") == shape and r["N"] in spec["N"]
                                            and (args.only_runs is None or r["run"] in args.only_runs)
                                            and r["mechanism"] in args.text_fits and r["epsilon"] in args.eps)]
            run_part(spec, args.text_fits, {m: default_fit for m in args.text_fits}, args.runs, rows, ("tight",),
                     ("non-private+em", "non-private"), save, args.eps, large_runs=args.runs,
                     only_runs=args.only_runs)
    if args.part in ("dense", "all"):
        rows = [r for r in rows if r["d"] != DENSE["d"]]
        fitters = {**{m: dense_fit for m in DENSE_MECHS}, "whitened": scalable_fit}
        run_part(DENSE, DENSE_MECHS + ["whitened"], fitters, args.runs, rows)
    save(rows)
    plot(rows, OUT / "lda_privacy_utility.png")


if __name__ == "__main__":
    main()
