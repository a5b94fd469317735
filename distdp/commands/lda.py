"""``distdp fit-lda``: spectral LDA / single-topic model on a parquet corpus."""
from __future__ import annotations

import argparse

from distdp.lda.pipeline import AUTO_FLOAT32_NONZEROS, DEFAULT_REFINE, DEFAULT_SWEEPS, EM_STOP_TOL, GIBBS_ETA
from distdp.lda.private.scalable import DENSE_WHITENING_MAX_WORDS, WHITENING_FORMS


def add_where(p: argparse.ArgumentParser) -> None:
    """``--address``, ``--workers`` and where to run (``--local`` / ``--ray``; default: settled by the corpus size)."""
    p.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS, else a local Ray instance)")
    p.add_argument("--workers", type=int, help="shards (default: one per CPU on Ray, one in this process)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--local", action="store_true", help="run in this process without Ray")
    where.add_argument("--ray", action="store_true",
                       help="run on Ray even for a small corpus (default: in this process for at most 5M nonzero "
                            "counts when no --address is given, else on Ray)")
    memory = p.add_mutually_exclusive_group()
    memory.add_argument("--out-of-core", dest="out_of_core", action="store_const", const=True,
                        help="read the corpus's row groups again for every pass instead of holding them (a "
                             "corpus larger than memory; refines by EM). Default: when the counts would take "
                             "more than 40%% of the memory")
    memory.add_argument("--in-memory", dest="out_of_core", action="store_const", const=False,
                        help="hold the counts in memory whatever their size")


def _working_vocab(text: str):
    """``--working-vocab``: ``auto`` or a positive integer (checked against k and d by the fit)."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'auto' or an integer, got {text!r}") from None


def register(sub) -> None:
    """Add the ``fit-lda`` sub-command."""
    p = sub.add_parser("fit-lda", help="fit a spectral LDA (or single-topic) model to a parquet corpus",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("corpus", help="parquet file or directory of parquet shards; a local path or a URI "
                   "(s3://, gs://, hdfs://, file://) every worker can read")
    p.add_argument("--k", type=int, required=True, help="number of topics")
    p.add_argument("--alpha0", type=float,
                   help="Dirichlet concentration Σα (LDA). Default: 1 for the spectral stage, then α learned by the "
                        "refinement; given, the refinement keeps α fixed at alpha0/k")
    p.add_argument("--model", choices=["lda", "stm"], default="lda", help="stm: single-topic model")
    v = p.add_mutually_exclusive_group()
    v.add_argument("--vocab", help="vocabulary file, one word per line (default: vocab.txt beside the corpus)")
    v.add_argument("--vocab-size", type=int, help="vocabulary size when there is no vocabulary file")
    p.add_argument("--out", required=True, help="output directory (written atomically)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
    add_where(p)
    p.add_argument("--seed", type=int, help="seed of the eigensolver and power method")
    p.add_argument("--tensor", choices=["auto", "explicit", "implicit"], default="auto",
                   help="form the k×k×k whitened tensor, or apply it implicitly per iteration")
    p.add_argument("--method", choices=["robust", "simultaneous"], default="robust",
                   help="tensor power method")
    p.add_argument("--eigensolver", choices=["auto", "lobpcg", "lanczos", "randomized", "dense"], default="auto",
                   help="lobpcg (block products) and lanczos (one-column products): the algebraically largest "
                        "eigenpairs of M2 (short documents make it indefinite); randomized: subspace iteration "
                        "(largest magnitude); dense forms the d×d M2 (small vocabularies only); auto: lanczos for "
                        "a small corpus, else lobpcg")
    p.add_argument("--restarts", type=int, help="restarts L of the robust power method (default: "
                                                "min(max(10, ⌈k ln 10k⌉), max(20, 3⌈ln 10k⌉)), 20 at k = 10 and 21 "
                                                "at k = 100; private fits, on a noisy tensor: max(10, ⌈k ln 10k⌉))")
    p.add_argument("--iters", type=int, help="power-method iterations R")
    p.add_argument("--precision", choices=["auto", "float64", "float32"], default="auto",
                   help="precision of the shards' products with M2's test blocks (the whitening's cost) and of "
                        "the whitened tensor's pass (float32 also soft-locks the eigensolver's converged pairs); "
                        f"auto: float32 from {AUTO_FLOAT32_NONZEROS:,} stored counts, else float64 (speed: "
                        "docs/benchmarks/speed.md); non-private fits only")
    p.add_argument("--refine", type=int,
                   help="iterations of the refinement after the spectral fit (LDA only; 0: the pure spectral fit): "
                        f"collapsed Gibbs sweeps (default {DEFAULT_SWEEPS}) or, with --refiner em, most variational "
                        f"EM iterations (default {DEFAULT_REFINE}, stopped when the bound's relative change is below "
                        f"{EM_STOP_TOL:g}); α is learned. In a private fit: private EM iterations after the unmixing "
                        "passes, α fixed, and giving --refine turns the default unmixing pass off")
    p.add_argument("--refiner", choices=("gibbs", "em"),
                   help="non-private fits: collapsed Gibbs sampling from the spectral topics (default; whole-number "
                        "counts) or batch variational EM")
    p.add_argument("--eta", type=float, help=f"topic-word Dirichlet prior of the refinement (default {GIBBS_ETA:g} "
                                             "for Gibbs sampling, 1/k for EM)")
    p.add_argument("--no-coherence", action="store_true", help="skip the NPMI coherence pass")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    d = p.add_argument_group("differential privacy (one document, replace-one neighbours)")
    d.add_argument("--epsilon", type=float, help="make the fit (epsilon, delta)-DP")
    d.add_argument("--delta", type=float,
                   help="δ of the guarantee (required with --epsilon; below 1/N, N the number of documents)")
    d.add_argument("--mechanism", default="auto",
                   choices=["auto", "whitened", "power", "config1", "config1-paper", "config2", "config3",
                            "config4", "agn", "avn"],
                   help="auto: whitened (k ≤ 100) or power; config*/agn/avn: small vocabularies (papers)")
    d.add_argument("--declared-bounds", metavar="sigma_k=…,gap=…,sigma_1=…,m3_norm=…",
                   help="config2 only: public bounds on M2's top eigenvalues (k-th ≥ sigma_k, consecutive gaps "
                        "≥ gap, largest ≤ sigma_1) and ‖M3‖_F ≤ m3_norm; a private test checks them and the fit "
                        "is then proven private (else config2 is the paper's unchecked claim)")
    d.add_argument("--unmix", type=int,
                   help="unmixing passes on every word after the private spectral stage, LDA or "
                        "--model stm (default 2 unless --refine is given, else 0)")
    d.add_argument("--refine-budget", type=float,
                   help="fraction of the budget for the refinement: the tail release (with a working "
                        "vocabulary smaller than the vocabulary), the unmixing passes and EM "
                        "(default 0.75 with a tail release, else 0.5)")
    d.add_argument("--length-cap", type=int, default=100,
                   help="public cap on tokens per document in the private token count")
    d.add_argument("--working-vocab", type=_working_vocab,
                   help="run the private spectral stage on this many most frequent words (noisy); the "
                        "refinement covers every word (default min(d, 100k, 4000) with a refinement, else d). "
                        "'auto': the default's size, restarted on twice the words when the noisy frequencies and a "
                        "first release show the margin (gained on synthetic corpora, lost on topics fitted from real "
                        "text: docs/design/private-fit.md, The working vocabulary's size)")
    d.add_argument("--whitening", choices=WHITENING_FORMS,
                   help="private whitening: one noisy second moment of the working vocabulary, formed as a "
                        "d×d matrix (dense) or only multiplied, its noise regenerated per product (matrix-free: "
                        "the same release, O(d·k) memory), or the noisy power method (power: a release per "
                        f"product, weaker); default auto: dense up to {DENSE_WHITENING_MAX_WORDS} words, "
                        "matrix-free above")
    d.add_argument("--reproducible", action="store_true",
                   help="allow --seed in private mode: the result is then reported as NOT private")
    d.add_argument("--public-corpus", help="corpus declared public on which a private fit's coherence is measured")
    d.add_argument("--vocab-public", action="store_true",
                   help="declare that the corpus's vocabulary was not chosen from its documents: needed for a "
                        "private fit of a corpus without prepare.json (written by another tool), whose "
                        "vocabulary's provenance is otherwise unknown; recorded in model.json. An error where "
                        "prepare.json says the words came from the text")
    p.set_defaults(func=run)

    def model_command(name, help_text, func):
        q = sub.add_parser(name, help=help_text, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        q.add_argument("model_dir", help="a model directory written by fit-lda")
        q.add_argument("corpus", help="parquet corpus with the model's vocabulary (local path or URI)")
        add_where(q)
        q.set_defaults(func=func)
        return q

    t = model_command("transform", "topic mixtures θ of every document of a corpus", run_transform)
    t.add_argument("--out", required=True, help="output .parquet file: doc_id, theta, n_tokens, status")
    t.add_argument("--overwrite", action="store_true")
    c = model_command("coherence", "NPMI and C_V coherence and topic diversity of a model's topics on a corpus",
                      run_coherence)
    c.add_argument("--top-n", type=int, default=10, help="top words per topic")
    e = model_command("export", "pyLDAvis arrays and top words of a model on a corpus", run_export)
    e.add_argument("--out", required=True, help="output directory")
    e.add_argument("--overwrite", action="store_true")


def run(args) -> int:
    """Fit, save and print the top words."""
    import time

    from distdp.api import SolverOptions, fit_lda

    t0 = time.perf_counter()
    solver = SolverOptions(tensor=args.tensor, method=args.method, eigensolver=args.eigensolver,
                           restarts=args.restarts, iters=args.iters, precision=args.precision)
    model = fit_lda(args.corpus, args.k, alpha0=args.alpha0, model=args.model, refine=args.refine,
                    refiner=args.refiner, eta=args.eta, vocab=args.vocab, vocab_size=args.vocab_size, seed=args.seed,
                    coherence=not args.no_coherence, out=args.out, overwrite=args.overwrite,
                    progress=not args.no_progress, privacy=privacy_of(args), solver=solver, cluster=cluster_of(args))
    elapsed = time.perf_counter() - t0
    print(model.format_top_words(), end="")
    t = model.info.get("timings_s")
    corpus = model.info["corpus"]       # documents the spectral stage used; all, where only the refinement ran
    used = corpus["n_docs"] if "spectral_skipped" in corpus else corpus.get("n_docs_used", corpus.get("n_docs"))
    if t is not None:
        took = f"fit {t['total'] - t['read']:.2f}s after {t['read']:.2f}s starting workers and reading"
    else:   # a private fit: wall times depend on the data, so model.json leaves them out (privacy.not_released)
        took = f"{elapsed:.2f}s in all; wall times are not saved in a private model.json"
    print(f"wrote {args.out}  ({used} documents; {where_it_ran(model.info['parameters'])}; {took})")
    pv = model.info["privacy"]
    if pv.get("epsilon") is not None:
        status = ("private" if pv["private"]
                  else f"NOT private ({'; '.join(pv.get('not_private_because') or [pv['guarantee']])})")
        print(f"privacy: {status}; epsilon = {pv['epsilon']:.4g} at delta = {pv['delta']:.3g} "
              f"({pv['mechanism']}, {len(pv['ledger'])} ledger entries in model.json)")
    return 0


def where_it_ran(parameters: dict) -> str:
    """``in this process, N shards`` or ``on Ray, N shards``, and ``out of core`` where the shards re-read their
    row groups every pass (from model.json's parameters)."""
    workers = parameters.get("workers")
    where = ("on Ray, " if parameters.get("backend") == "ray" else "in this process, ") + \
        (f"{workers} shard{'s' if workers != 1 else ''}" if workers is not None else "")
    return where.rstrip(", ") + (", out of core" if parameters.get("out_of_core") else "")


#: fit-lda's private flags (argparse dest: flag, default), refused without --epsilon.
PRIVATE_FLAGS = {"delta": ("--delta", None), "mechanism": ("--mechanism", "auto"),
                 "declared_bounds": ("--declared-bounds", None), "unmix": ("--unmix", None),
                 "refine_budget": ("--refine-budget", None), "length_cap": ("--length-cap", 100),
                 "working_vocab": ("--working-vocab", None), "whitening": ("--whitening", None),
                 "reproducible": ("--reproducible", False), "public_corpus": ("--public-corpus", None),
                 "vocab_public": ("--vocab-public", False)}


def privacy_of(args):
    """The :class:`~distdp.lda.private.options.PrivacyOptions` of ``fit-lda``'s flags; None without ``--epsilon``.

    Raises
    ------
    ValueError
        ``--epsilon`` without ``--delta``, or a private flag without ``--epsilon``, naming the flags.
    """
    from distdp.api import PrivacyOptions

    if args.epsilon is None:
        given = [flag for dest, (flag, default) in PRIVATE_FLAGS.items() if getattr(args, dest) != default]
        if given:
            raise ValueError(f"{', '.join(given)}: private fits only (give --epsilon and --delta)")
        return None
    if args.delta is None:
        raise ValueError("--delta is required with --epsilon (the δ of the (ε, δ) guarantee, below 1/N)")
    return PrivacyOptions(epsilon=args.epsilon, **{dest: getattr(args, dest) for dest in PRIVATE_FLAGS})


def cluster_of(args):
    """``--workers``, ``--address``, ``--local`` / ``--ray`` (neither: ``auto``, :func:`distdp.api.auto_backend`) and
    ``--out-of-core`` / ``--in-memory`` (neither: :func:`distdp.api.auto_out_of_core`) as
    :class:`~distdp.api.ClusterOptions`."""
    from distdp.api import ClusterOptions

    return ClusterOptions(backend="local" if args.local else ("ray" if args.ray else "auto"), address=args.address,
                          workers=args.workers, out_of_core=getattr(args, "out_of_core", None))


def _load(args):
    from distdp.lda import LDAModel

    return LDAModel.load(args.model_dir)


def run_transform(args) -> int:
    """Write θ for every document."""
    from distdp.api import transform

    mix = transform(_load(args), args.corpus, out=args.out, overwrite=args.overwrite, cluster=cluster_of(args))
    empty = int((mix.status == "empty").sum())
    print(f"wrote {args.out}: {len(mix.theta)} documents ({empty} with no in-vocabulary word: θ = prior mean)")
    return 0


def run_coherence(args) -> int:
    """Print NPMI and C_V per topic, their means, and topic diversity."""
    from distdp.api import coherence

    model = _load(args)
    res = coherence(model, args.corpus, top_n=args.top_n, cluster=cluster_of(args))
    cv = res["c_v"]
    for i, (v, c, words) in enumerate(zip(res["per_topic"], cv["per_topic"], model.top_words(args.top_n))):
        print(f"topic {i:3d}  NPMI={v:+.4f}  C_V={c:.4f}  " + " ".join(words))
    print(f"mean NPMI (top {args.top_n} words): {res['mean']:+.4f}")
    print(f"mean C_V (top {args.top_n} words, each document one window): {cv['mean']:.4f}")
    print(f"topic diversity (top {res['diversity_top_n']} words): {res['diversity']:.4f}")
    return 0


def run_export(args) -> int:
    """Write the pyLDAvis arrays."""
    from distdp.api import export

    export(_load(args), args.corpus, args.out, overwrite=args.overwrite, cluster=cluster_of(args))
    print(f"wrote {args.out} (open with pyLDAvis.prepare; see distdp.api.export)")
    return 0
