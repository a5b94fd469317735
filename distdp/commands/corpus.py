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
    m.add_argument("--vocab-size", type=int, help="vocabulary size d (required unless --from-model)")
    m.add_argument("--topics", type=int, help="number of topics k (required unless --from-model)")
    m.add_argument("--alpha0", type=float, help="LDA concentration Σα (default 1; with --from-model, the model's "
                   "α rescaled to this sum)")
    m.add_argument("--doc-length", type=float, default=100.0, help="mean document length (8 for short posts, "
                   "1000 for long articles)")
    m.add_argument("--lengths", choices=["poisson", "lognormal"], default="poisson",
                   help="document-length distribution: 3 + Poisson, or lognormal (σ = 1 in log length: short and "
                   "long documents side by side, as in real collections)")
    m.add_argument("--topic-concentration", type=float, default=0.1, help="Dirichlet parameter of topic-word rows")
    m.add_argument("--background", type=float, default=0.0, help="text-like topics: this share of every topic's "
                   "mass is one shared Zipf-law word distribution (the frequent words all topics use; 0.3 is "
                   "typical of text), the rest its own Dirichlet draw")
    m.add_argument("--zipf-exponent", type=float, default=1.0, help="exponent s of the background's 1/rank^s")
    m.add_argument("--from-model", metavar="DIR", help="semi-real corpus: draw the documents from a fitted "
                   "model's topics and α (a fit-lda --out directory, e.g. of a real corpus); its vocabulary "
                   "names the words")
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

    topic_word, alpha, vocab, source = _generator(args)
    k, d = (args.topics, args.vocab_size) if topic_word is None else topic_word.shape
    c = sample_corpus(args.docs, d, k, np.random.default_rng(args.seed), args.model,
                      1.0 if args.alpha0 is None else args.alpha0, args.doc_length, args.topic_concentration,
                      topic_word=topic_word, alpha=alpha, background=args.background,
                      zipf_exponent=args.zipf_exponent, lengths=args.lengths)
    meta = {key: getattr(args, key) for key in ("model", "docs", "alpha0", "doc_length", "lengths",
                                                "topic_concentration", "background", "zipf_exponent",
                                                "from_model", "shards", "seed")}
    meta.update(vocab_size=d, topics=k)

    def truth(path):
        path.mkdir()
        np.save(path / "topic_word.npy", c.topic_word)
        np.save(path / "alpha.npy", c.alpha)
        np.save(path / "theta.npy", c.theta.astype(np.float32))
        (path / "params.json").write_text(json.dumps(meta, indent=2) + "\n")

    def provenance(path):   # the synthetic words w0, w1, … are fixed before any document: public
        path.write_text(json.dumps({"vocab_from_private_data": False, "vocab_source": source},
                                   indent=2, ensure_ascii=False) + "\n")

    write_corpus(args.out, c.counts, args.shards, vocab, [f"doc{i}" for i in range(args.docs)],
                 {"truth": truth, "prepare.json": provenance}, overwrite=args.overwrite)
    print(f"wrote {args.out}: {args.docs} documents, {int(c.counts.sum())} tokens, d={d}, k={k}, "
          f"{args.shards} shard(s)")
    return 0


def _generator(args):
    """``(topic_word, alpha, vocabulary, vocabulary source)``: a fitted model's (``--from-model``) or none.

    Without ``--from-model`` the topics are sampled and the words are ``w0 … w{d-1}``. A model's topics
    are clipped at 0 and renormalised (a spectral fit's may have small negative entries); its α is kept,
    or rescaled to ``--alpha0``. Its words are fixed before any document is drawn, so they are public for
    this corpus.
    """
    import numpy as np

    if args.from_model is None:
        if args.vocab_size is None or args.topics is None:
            raise ValueError("make-corpus needs --vocab-size and --topics (or --from-model DIR)")
        return None, None, [f"w{i}" for i in range(args.vocab_size)], \
            f"make-corpus's synthetic words w0…w{args.vocab_size - 1}"
    from distdp.lda.model import LDAModel

    given = [f"--{n.replace('_', '-')}" for n in ("vocab_size", "topics") if getattr(args, n) is not None]
    if args.background:
        given.append("--background")
    if given:
        raise ValueError(f"--from-model takes the topics from the model; {', '.join(given)} cannot be given with it")
    model = LDAModel.load(args.from_model)
    beta = np.maximum(np.asarray(model.topic_word, dtype=np.float64), 0.0)
    if (beta.sum(axis=1) <= 0).any():
        raise ValueError(f"{args.from_model}: a topic of the model has no positive weight")
    beta /= beta.sum(axis=1, keepdims=True)
    alpha = np.asarray(model.alpha, dtype=np.float64)
    if args.model == "lda":
        if (alpha <= 0).any():
            raise ValueError(f"{args.from_model}: the model's α must be positive to draw LDA documents")
        if args.alpha0 is not None:
            alpha = alpha * (args.alpha0 / alpha.sum())
    else:
        alpha = np.maximum(alpha, 0.0) / np.maximum(alpha, 0.0).sum()
    d = beta.shape[1]
    vocab = list(model.vocab) if model.vocab is not None else [f"w{i}" for i in range(d)]
    return beta, alpha, vocab, f"the vocabulary of the model {args.from_model}"


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
