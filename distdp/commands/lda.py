"""``distdp fit-lda``: spectral LDA / single-topic model on a parquet corpus."""
from __future__ import annotations

import argparse


def register(sub) -> None:
    """Add the ``fit-lda`` sub-command."""
    p = sub.add_parser("fit-lda", help="fit a spectral LDA (or single-topic) model to a parquet corpus",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("corpus", help="parquet file or directory of parquet shards")
    p.add_argument("--k", type=int, required=True, help="number of topics")
    p.add_argument("--alpha0", type=float, default=1.0, help="Dirichlet concentration Σα (LDA)")
    p.add_argument("--model", choices=["lda", "stm"], default="lda", help="stm: single-topic model")
    v = p.add_mutually_exclusive_group()
    v.add_argument("--vocab", help="vocabulary file, one word per line (default: vocab.txt beside the corpus)")
    v.add_argument("--vocab-size", type=int, help="vocabulary size when there is no vocabulary file")
    p.add_argument("--out", required=True, help="output directory (written atomically)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
    p.add_argument("--address", help="Ray cluster address (default: local Ray instance)")
    p.add_argument("--workers", type=int, help="shard actors (default: one per CPU)")
    p.add_argument("--local", action="store_true", help="run in this process without Ray")
    p.add_argument("--seed", type=int, help="seed of the eigensolver and power method")
    p.add_argument("--tensor", choices=["auto", "explicit", "implicit"], default="auto",
                   help="form the k×k×k whitened tensor, or apply it implicitly per iteration")
    p.add_argument("--method", choices=["robust", "simultaneous"], default="robust",
                   help="tensor power method")
    p.add_argument("--eigensolver", choices=["randomized", "dense"], default="randomized",
                   help="dense forms the d×d M2 (small vocabularies only)")
    p.add_argument("--restarts", type=int, help="power-method restarts L")
    p.add_argument("--iters", type=int, help="power-method iterations R")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    """Fit, save and print the top words."""
    from distdp.api import fit_lda

    model = fit_lda(args.corpus, args.k, alpha0=args.alpha0, model=args.model, vocab=args.vocab,
                    vocab_size=args.vocab_size, workers=args.workers, address=args.address,
                    backend="local" if args.local else "ray", seed=args.seed, out=args.out,
                    overwrite=args.overwrite, progress=not args.no_progress, tensor=args.tensor,
                    method=args.method, eigensolver=args.eigensolver, n_restarts=args.restarts,
                    n_iters=args.iters)
    print(model.format_top_words(), end="")
    t = model.info["timings_s"]
    print(f"wrote {args.out}  ({model.info['corpus']['n_docs_used']} documents, "
          f"fit {t['total'] - t['read']:.2f}s after {t['read']:.2f}s reading)")
    return 0
