"""``distdp make-corpus`` (synthetic corpora with known truth) and ``distdp prepare`` (text → corpus)."""
from __future__ import annotations

import argparse
import json


def register(sub) -> None:
    """Add the ``make-corpus`` and ``prepare`` sub-commands."""
    fmt = argparse.ArgumentDefaultsHelpFormatter
    m = sub.add_parser("make-corpus", help="sample a synthetic corpus with its true parameters", formatter_class=fmt)
    m.add_argument("out", help="output directory (parquet shards, vocab.txt, truth/)")
    m.add_argument("--model", choices=["lda", "stm"], default="lda")
    m.add_argument("--docs", type=int, required=True, help="number of documents N")
    m.add_argument("--vocab-size", type=int, required=True, help="vocabulary size d")
    m.add_argument("--topics", type=int, required=True, help="number of topics k")
    m.add_argument("--alpha0", type=float, default=1.0, help="LDA concentration Σα")
    m.add_argument("--doc-length", type=float, default=100.0, help="mean document length (3 + Poisson)")
    m.add_argument("--topic-concentration", type=float, default=0.1, help="Dirichlet parameter of topic-word rows")
    m.add_argument("--shards", type=int, default=1, help="parquet files to split the corpus into")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--overwrite", action="store_true")
    m.set_defaults(func=run_make_corpus)

    p = sub.add_parser("prepare", help="turn a text column (parquet or CSV) into a corpus", formatter_class=fmt)
    p.add_argument("input", help="parquet, CSV or TSV file with a text column (optionally compressed), or a "
                   "directory of them; a local path or a URI (s3://, gs://, hdfs://, file://)")
    p.add_argument("--text-column", required=True)
    p.add_argument("--id-column", help="column of document ids (default: row number)")
    p.add_argument("--out", required=True, help="output corpus directory")
    v = p.add_mutually_exclusive_group()
    v.add_argument("--vocab", help="public vocabulary file (one word per line); other words are dropped")
    v.add_argument("--max-vocab", type=int, default=5000, help="build the vocabulary: top words by document frequency")
    p.add_argument("--min-df", type=int, help="minimum document frequency of a built vocabulary's words "
                   "(default 2; an error with --vocab or a DP selection, which do not use it)")
    p.add_argument("--max-df", type=float, default=1.0, help="leave out words in more than this fraction of the "
                   "documents (a fraction in (0, 1], not a count; 1 keeps all), before taking the --max-vocab "
                   "most frequent; a DP selection applies it to its noisy document frequencies (no privacy cost); "
                   "an error with --vocab unless 1")
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--overwrite", action="store_true")
    dp = p.add_argument_group(
        "DP vocabulary selection", "choose the vocabulary from the text with (epsilon, delta)-differential privacy "
        "(one document, replace-one neighbours): capped document frequencies + Gaussian noise + threshold, then "
        "the --max-vocab largest; exclusive with --vocab. A later private fit adds this release to its ledger.")
    dp.add_argument("--dp-vocab-epsilon", type=float, help="epsilon of the vocabulary selection")
    dp.add_argument("--dp-vocab-delta", type=float, help="delta of the vocabulary selection (half for the threshold, "
                    "half for the noise); required with --dp-vocab-epsilon; must be below 1/N (N documents), and "
                    "a later private fit's delta plus this half below 1/N too")
    dp.add_argument("--max-words-per-doc", type=int, help="public cap L0 on the distinct words one document "
                    "contributes (default 100)")
    dp.add_argument("--seed", type=int, help="seed the selection noise (needs --reproducible; NOT private)")
    dp.add_argument("--reproducible", action="store_true", help="accept a seeded, non-private selection")
    p.set_defaults(func=run_prepare)


def run_make_corpus(args) -> int:
    """Sample and write the corpus with ``truth/topic_word.npy``, ``truth/alpha.npy``, ``truth/theta.npy``."""
    import numpy as np

    from distdp.io.corpus import write_corpus
    from distdp.lda.synthetic import sample_corpus

    c = sample_corpus(args.docs, args.vocab_size, args.topics, np.random.default_rng(args.seed), args.model,
                      args.alpha0, args.doc_length, args.topic_concentration)
    meta = {k: getattr(args, k) for k in ("model", "docs", "vocab_size", "topics", "alpha0", "doc_length",
                                          "topic_concentration", "shards", "seed")}

    def truth(path):
        path.mkdir()
        np.save(path / "topic_word.npy", c.topic_word)
        np.save(path / "alpha.npy", c.alpha)
        np.save(path / "theta.npy", c.theta.astype(np.float32))
        (path / "params.json").write_text(json.dumps(meta, indent=2) + "\n")

    def provenance(path):   # the synthetic words w0, w1, … are fixed before any document: public
        path.write_text(json.dumps({"vocab_from_private_data": False,
                                    "vocab_source": f"make-corpus's synthetic words w0…w{args.vocab_size - 1}"},
                                   indent=2, ensure_ascii=False) + "\n")

    vocab = [f"w{i}" for i in range(args.vocab_size)]
    write_corpus(args.out, c.counts, args.shards, vocab, [f"doc{i}" for i in range(args.docs)],
                 {"truth": truth, "prepare.json": provenance}, overwrite=args.overwrite)
    print(f"wrote {args.out}: {args.docs} documents, {int(c.counts.sum())} tokens, d={args.vocab_size}, "
          f"k={args.topics}, {args.shards} shard(s)")
    return 0


def run_prepare(args) -> int:
    """Tokenise and write the corpus."""
    from distdp.io.prepare import prepare

    res = prepare(args.input, args.text_column, args.out, args.vocab, args.max_vocab, args.min_df,
                  args.id_column, args.shards, args.overwrite, dp_vocab_epsilon=args.dp_vocab_epsilon,
                  dp_vocab_delta=args.dp_vocab_delta, max_words_per_doc=args.max_words_per_doc, seed=args.seed,
                  reproducible=args.reproducible, max_df=args.max_df)
    sel = res.vocab_selection
    if sel is not None:
        note = (f" (selected with ({sel.epsilon:g}, {sel.delta:g})-DP, L0 = {sel.max_words_per_doc}"
                + ("" if args.seed is None else "; seeded noise: NOT private") + ")")
    else:
        note = " (vocabulary built from this text: not private)" if res.vocab_from_data else ""
    print(f"wrote {args.out}: {res.counts.shape[0]} documents, vocabulary {len(res.vocab)}{note}")
    return 0
