"""``prepare``: text (parquet or CSV) to the corpus format, vectorised with pyarrow.

Tokenisation: lower-case, split on anything that is not a letter (apostrophes
kept inside words, then dropped), drop tokens shorter than ``min_length`` and
English stop words (``distdp/data/stopwords.txt``). The vocabulary is either
given (a public vocabulary file; other words are dropped) or built from the
text: the ``max_vocab`` words with the highest document frequency among those
in at least ``min_df`` documents (ties broken alphabetically).

A vocabulary built from a private corpus is itself a release of information
about that corpus: such a corpus is marked in ``prepare.json`` and any privacy
guarantee of a later fit excludes the vocabulary.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import scipy.sparse as sp

from distdp.io.corpus import load_vocab, write_corpus


def stop_words() -> list[str]:
    """The shipped English stop-word list."""
    return (Path(__file__).resolve().parent.parent / "data" / "stopwords.txt").read_text().split()


@dataclass(frozen=True)
class PreparedCorpus:
    """Counts, vocabulary and provenance of a prepared corpus."""

    counts: sp.csr_matrix
    vocab: list[str]
    doc_ids: np.ndarray
    vocab_from_data: bool


def read_text_column(path: str | Path, column: str, id_column: str | None = None) -> tuple[pa.Array, np.ndarray]:
    """The text column (and ids) of a parquet or CSV file."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: input file not found")
    if p.suffix.lower() in (".csv", ".tsv"):
        table = pcsv.read_csv(p, parse_options=pcsv.ParseOptions(delimiter="\t" if p.suffix.lower() == ".tsv" else ","))
    else:
        table = pq.read_table(p)
    for col in (column, id_column):
        if col is not None and col not in table.column_names:
            raise ValueError(f"{p}: column {col!r} not found (columns: {table.column_names})")
    text = table.column(column).combine_chunks()
    if not (pa.types.is_string(text.type) or pa.types.is_large_string(text.type)):
        raise ValueError(f"{p}: column {column!r} has type {text.type}, expected a string column")
    ids = (np.asarray(table.column(id_column).to_pylist(), dtype=object).astype(str) if id_column
           else np.arange(table.num_rows).astype(str))
    return text, ids


def tokenize(text: pa.Array, min_length: int = 3, stop: list[str] | None = None) -> tuple[np.ndarray, pa.Array]:
    """(document index of each token, tokens) after lower-casing, splitting and filtering."""
    lowered = pc.utf8_lower(pc.fill_null(text, ""))
    lists = pc.split_pattern_regex(lowered, r"[^a-z']+")
    parents = pc.list_parent_indices(lists).to_numpy()
    tokens = pc.replace_substring(pc.list_flatten(lists), "'", "")
    keep = pc.greater_equal(pc.utf8_length(tokens), min_length)
    if stop:
        keep = pc.and_(keep, pc.invert(pc.is_in(tokens, value_set=pa.array(stop))))
    keep_np = keep.to_numpy(zero_copy_only=False)
    return parents[keep_np], pc.filter(tokens, keep)


def build_vocab(doc_of: np.ndarray, tokens: pa.Array, max_vocab: int, min_df: int = 2) -> list[str]:
    """The ``max_vocab`` tokens of highest document frequency (≥ ``min_df``), ties alphabetical."""
    enc = pc.dictionary_encode(tokens).combine_chunks() if isinstance(tokens, pa.ChunkedArray) else pc.dictionary_encode(tokens)
    codes = enc.indices.to_numpy()
    words = np.asarray(enc.dictionary.to_pylist(), dtype=object)
    pairs = np.unique(doc_of.astype(np.int64) * len(words) + codes)
    df = np.bincount(pairs % len(words), minlength=len(words))
    eligible = np.flatnonzero(df >= min_df)
    order = np.lexsort((words[eligible].astype(str), -df[eligible]))
    return [str(w) for w in words[eligible][order][:max_vocab]]


def prepare_counts(text: pa.Array, doc_ids: np.ndarray, vocab: list[str] | None = None, max_vocab: int = 5000,
                   min_df: int = 2, min_length: int = 3) -> PreparedCorpus:
    """Tokenise ``text`` and count words over a given or data-built vocabulary."""
    if max_vocab < 2:
        raise ValueError(f"max_vocab must be ≥ 2, got {max_vocab}")
    doc_of, tokens = tokenize(text, min_length, stop_words())
    from_data = vocab is None
    if from_data:
        vocab = build_vocab(doc_of, tokens, max_vocab, min_df)
        if len(vocab) < 2:
            raise ValueError(f"only {len(vocab)} word(s) occur in ≥ {min_df} documents; "
                             "the text is too small to build a vocabulary")
    ids = pc.index_in(tokens, value_set=pa.array(vocab)).to_numpy(zero_copy_only=False)
    ok = ~np.isnan(ids.astype(np.float64))
    n, d = len(text), len(vocab)
    counts = sp.csr_matrix((np.ones(int(ok.sum())), (doc_of[ok], ids[ok].astype(np.int64))), shape=(n, d))
    counts.sum_duplicates()
    return PreparedCorpus(counts, list(vocab), doc_ids, from_data)


def prepare(input_path: str | Path, text_column: str, out: str | Path, vocab: str | Path | None = None,
            max_vocab: int = 5000, min_df: int = 2, id_column: str | None = None, shards: int = 1,
            overwrite: bool = False) -> PreparedCorpus:
    """Turn a text column into a parquet corpus directory ``out`` (with ``vocab.txt``, ``prepare.json``)."""
    text, ids = read_text_column(input_path, text_column, id_column)
    prepared = prepare_counts(text, ids, load_vocab(vocab) if vocab else None, max_vocab, min_df)
    meta = {"input": str(input_path), "text_column": text_column, "n_docs": int(prepared.counts.shape[0]),
            "vocab_size": len(prepared.vocab), "vocab_source": "built from this text" if prepared.vocab_from_data
            else f"given: {vocab}", "vocab_from_private_data": prepared.vocab_from_data,
            "tokenizer": "lower-case, split on non-letters, length ≥ 3, English stop words removed"}
    write_corpus(out, prepared.counts, shards, prepared.vocab, prepared.doc_ids,
                 {"prepare.json": lambda p: p.write_text(json.dumps(meta, indent=2) + "\n")}, overwrite=overwrite)
    return prepared
