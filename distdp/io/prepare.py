"""``prepare``: text (parquet or CSV) to the corpus format, vectorised with pyarrow.

Tokenisation (:func:`tokenize`): Unicode NFKC (compatibility forms folded:
full-width Latin ``ＧＰＵ`` → ``gpu``, half-width katakana ``ｺｰﾋｰ`` → ``コーヒー``,
ligatures ``ﬁ`` → ``fi``), lower-case, typographic
apostrophes (’ ‘ ʼ) read as ``'``; split on anything that is not a letter of
any script (or a combining mark) or an apostrophe; English stop words
(``distdp/data/stopwords.txt``) dropped while their apostrophes are still there
(``don't``) and in their apostrophe-less forms (``dont``, ``thats``, but not
real words such as ``well``, ``cant``); a possessive ``'s`` dropped, other
apostrophes removed (``students'`` → ``students``); tokens shorter than
``min_length`` characters dropped.

Chinese and Japanese, written without spaces, are split as Lucene's CJK
analyzer does: a run of Han, Hiragana and Katakana characters (with ``ー``,
``〆``, ``〱``–``〵``, the half-width ``ｰ ﾞ ﾟ``, and the combining marks after
them, which are then dropped) is cut out of the text around it (``GPU加速`` →
``gpu``, ``加速``); a run of n ≥ 2 characters gives its n − 1 overlapping
bigrams (``東京都庁`` → ``東京``, ``京都``, ``都庁``), a run of one character
that character. ``min_length`` and the stop words do not apply to these
tokens. Hangul is written with spaces and is tokenised as other letters.
Thai, Lao, Khmer and Myanmar cannot be cut into words without a dictionary:
they are tokenised as other letters (one token per space-separated phrase),
and :func:`tokenize` warns once, naming the script, when that script's tokens
longer than 20 characters are at least 1% of all tokens (counted before the
length and stop-word filters): such text should be segmented into
space-separated words first.

The vocabulary is either given (a public vocabulary file, its words
normalised the same way by :func:`normalise_vocab`, Chinese and Japanese
words kept when one or two characters long; other words are dropped)
or built from the text: the ``max_vocab`` words with the highest document frequency among those
in at least ``min_df`` documents and in at most ``max_df × N`` of the N documents
(ties broken alphabetically). ``max_df``, a fraction in (0, 1] (default 1: no
upper limit; not a count of documents), drops the words too common to tell
documents apart that the stop list misses ("said" in news; for Chinese and
Japanese, the most frequent bigrams) before the ``max_vocab`` cut, as
scikit-learn's ``CountVectorizer(max_df=...)`` does (:func:`distdp.privacy.vocabulary.max_df_limit`).
Neither applies to a given vocabulary: ``min_df`` given with a vocabulary
file is an error, as is ``max_df < 1``.

A vocabulary built from a private corpus is itself a release of information
about that corpus: such a corpus is marked in ``prepare.json`` and any privacy
guarantee of a later fit excludes the vocabulary. The third way is a
vocabulary *selected with differential privacy* (``dp_vocab_epsilon``,
:func:`distdp.privacy.vocabulary.dp_select_vocabulary`: capped document
frequencies, Gaussian noise, a threshold, then the ``max_vocab`` largest;
``min_df`` does not apply, the threshold replaces it, and giving it is an error). ``max_df`` applies to
the noisy document frequencies the selection releases (a released word whose
noisy frequency exceeds ``max_df × N`` is dropped before the ``max_vocab``
cut): post-processing, as N is public, so it costs no privacy. ``prepare.json`` then
records the release under ``vocabulary_privacy`` and a later fit composes it
(:func:`vocabulary_privacy`). The selection's δ must be below 1/N
(:func:`check_delta_for_n_docs`); its messages give no exact token count, and
a text without words is not refused before the selection (which then releases
too few words and fails as any such selection does).

Only ``prepare.json`` tells where a corpus's vocabulary came from
(:func:`vocabulary_provenance`): a corpus without it (written by another tool,
or copied without it) has a vocabulary of unknown provenance, which a private
fit refuses unless the caller declares it public
(:func:`distdp.lda.private.fit.vocabulary_entry`).

``prepare.json`` keys about the vocabulary:

- ``vocab_from_private_data``: true when the words were chosen from this text
  (built, or DP-selected); false for a public vocabulary file.
- ``vocab_dp``: true only for a DP selection.
- ``min_df``, ``max_df``: the document-frequency limits the vocabulary was
  chosen with; ``min_df`` null for a DP selection, both null for a public
  vocabulary (they do not apply there).
- ``vocabulary_privacy`` (DP selection only): ``mechanism``, ``epsilon``,
  ``delta`` (total), ``delta_gaussian``, ``delta_threshold``,
  ``max_words_per_doc``, ``max_vocab``, ``threshold``, ``noise_sigma``,
  ``sensitivity``, ``n_candidates_released`` (passed the threshold), ``max_df``,
  ``n_above_max_df`` (released, then dropped by ``max_df``), ``vocab_size``, ``neighbour``,
  ``private`` (false with a seed), ``noise_source``, and ``release``
  (:meth:`distdp.privacy.ledger.Release.to_dict`).
"""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.fs as pafs
import scipy.sparse as sp

from distdp.io import corpus as cio
from distdp.io.corpus import load_vocab, write_corpus
from distdp.privacy import mechanisms
from distdp.privacy.ledger import BudgetNotMetError
from distdp.privacy.vocabulary import (DEFAULT_MAX_WORDS_PER_DOC, VocabularySelection, check_max_df,
                                       dp_select_vocabulary, max_df_limit)

#: Name of the metadata file ``prepare`` writes into the corpus directory.
PREPARE_JSON = "prepare.json"


def stop_words() -> list[str]:
    """The shipped English stop-word list (contractions with an ASCII apostrophe)."""
    return (Path(__file__).resolve().parent.parent / "data" / "stopwords.txt").read_text(encoding="utf-8").split()


#: Apostrophe-less contractions that are English words, so not stop words ("we'll" → "well").
_CONTRACTIONS_THAT_ARE_WORDS = frozenset({"cant", "wont", "hell", "shed", "shell", "well", "wed", "ill", "id",
                                          "lets", "were", "its"})
#: Typographic apostrophes read as "'".
_APOSTROPHES = "[\u2019\u2018\u02bc]"
#: What separates tokens: anything but a letter (any script), a combining mark or an apostrophe.
_SEPARATOR = r"[^\p{L}\p{M}']+"
#: Characters of scripts written without spaces that are cut into bigrams (RE2 class body): Han, Hiragana,
#: Katakana, and the letters of the Common script used within Japanese words (ー, half-width ｰ ﾞ ﾟ, 〆, 〱–〵).
_CJK = r"\p{Han}\p{Hiragana}\p{Katakana}\x{30FC}\x{FF70}\x{FF9E}\x{FF9F}\x{3006}\x{3031}-\x{3035}"
#: A CJK run: such characters, each with the combining marks after it (variation selectors, uncomposed ゙ ゚).
_CJK_RUN = rf"(?:[{_CJK}]\p{{M}}*)+"
#: What ``tokenize`` splits on once CJK runs are cut out: ``_SEPARATOR`` less the CJK characters, some of
#: which are not letters (〇, the radicals) but belong to their run.
_SPLIT = rf"[^\p{{L}}\p{{M}}'{_CJK}]+"
#: UTF-8 lead bytes below this start no CJK character (the lowest, U+2E80, is E2 BA 80).
_CJK_MIN_LEAD_BYTE = 0xE2
#: Scripts written without spaces that need a dictionary to be cut into words: ``tokenize`` warns about them.
_UNSEGMENTED_SCRIPTS = ("Thai", "Lao", "Khmer", "Myanmar")
#: A token of those scripts longer than this many characters is probably a phrase, not a word...
_UNSEGMENTED_LENGTH = 20
#: ...and the text looks unsegmented when such tokens are at least this share of all tokens.
_UNSEGMENTED_SHARE = 0.01


def normalise_text(text: pa.Array) -> pa.Array:
    """NFKC, lower-case, typographic apostrophes as ``'``; nulls become empty strings."""
    text = pc.utf8_normalize(pc.fill_null(text, ""), "NFKC")
    return pc.replace_substring_regex(pc.utf8_lower(text), _APOSTROPHES, "'")


def _forms(pieces: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(each piece as written, quotes around it stripped; the token it becomes).

    The token drops a possessive ``'s``, then every apostrophe (``john's`` →
    ``john``, ``rock'n'roll`` → ``rocknroll``).
    """
    written = pc.replace_substring_regex(pieces, "^'+|'+$", "")
    return written, pc.replace_substring(pc.replace_substring_regex(written, "'s$", ""), "'", "")


def _kept(written: pa.Array, tokens: pa.Array, min_length: int, stop: list[str] | None,
          lengths: pa.Array | None = None) -> np.ndarray:
    """Which tokens are kept: ≥ ``min_length`` characters, and not a stop word as written or without its
    apostrophes (unless that bare form is an English word itself: ``she'll`` goes, ``shell`` stays).
    ``lengths``: the tokens' ``utf8_length`` when already computed."""
    keep = pc.greater_equal(pc.utf8_length(tokens) if lengths is None else lengths, min_length)
    if stop:
        bare = {w.replace("'", "") for w in stop if "'" in w} - _CONTRACTIONS_THAT_ARE_WORDS
        is_stop = pc.or_(pc.is_in(written, value_set=pa.array(sorted(set(stop)), pa.string())),
                         pc.is_in(tokens, value_set=pa.array(sorted(set(stop) | bare), pa.string())))
        keep = pc.and_(keep, pc.invert(is_stop))
    return keep.to_numpy(zero_copy_only=False)


def _string_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, bytes) of a string array: string i is ``bytes[offsets[i]:offsets[i + 1]]``."""
    wide = pa.types.is_large_string(arr.type)
    _, offsets, data = arr.buffers()
    dtype = np.int64 if wide else np.int32
    offsets = np.frombuffer(offsets, dtype, len(arr) + 1, arr.offset * np.dtype(dtype).itemsize)
    return offsets, (np.zeros(0, np.uint8) if data is None else np.frombuffer(data, np.uint8))


def _n_bytes(arr: pa.Array) -> int:
    offsets, _ = _string_buffers(arr)
    return int(offsets[-1] - offsets[0])


def _may_hold_cjk(text: pa.Array) -> bool:
    """False when no character of ``text`` is ≥ U+2E80, the first CJK one (UTF-8: a byte ≥ E3, or E2 then ≥ BA).

    A cheap test sparing most text without CJK (Latin, Cyrillic, … with typographic punctuation) a regex pass.
    """
    offsets, data = _string_buffers(text)
    data = data[offsets[0]:offsets[-1]]
    top = data.max() if len(data) else 0
    if top != 0xE2:
        return bool(top > 0xE2)
    return bool((data[np.flatnonzero(data == 0xE2) + 1] >= 0xBA).any())     # E2 leads 3 bytes: +1 is in range


def _cjk_pieces(pieces: pa.Array) -> np.ndarray:
    """Which pieces are CJK runs (the runs being cut out of the text, a piece is all CJK or has none)."""
    offsets, data = _string_buffers(pieces)
    n_bytes = np.diff(offsets)
    first = data[np.minimum(offsets[:-1], len(data) - 1)] if len(data) else np.zeros(len(pieces), np.uint8)
    cand = np.flatnonzero((n_bytes > 0) & (first >= _CJK_MIN_LEAD_BYTE))
    cjk = np.zeros(len(pieces), bool)
    if len(cand):
        cjk[cand] = pc.match_substring_regex(pieces.take(pa.array(cand)), f"^[{_CJK}]").to_numpy(zero_copy_only=False)
    return cjk


def _cjk_bigrams(runs: pa.Array, run_doc: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """(document index, token) of the overlapping character bigrams of CJK runs (one-character runs: the character).

    Combining marks are dropped first. Vectorised over the UTF-8 bytes of all runs at once: a token is the
    bytes from the start of its first character to the end of its last (≤ 8 bytes), gathered as rows of a
    strided view and packed into a string array.
    """
    offsets, data = _string_buffers(runs)
    whole = pa.array([data[offsets[0]:offsets[-1]].tobytes()], pa.large_binary()).cast(pa.large_string())
    if pc.match_substring_regex(whole, r"\p{M}")[0].as_py():     # one scan of all runs; marks are rare
        runs = pc.replace_substring_regex(runs, r"\p{M}+", "")
        offsets, data = _string_buffers(runs)
    data = data[offsets[0]:offsets[-1]]
    n = pc.utf8_length(runs).to_numpy(zero_copy_only=False).astype(np.int64)      # characters of each run
    char_start = np.append(np.flatnonzero((data & 0xC0) != 0x80), len(data))    # UTF-8 lead bytes, then the end
    count = np.maximum(n - 1, 1)                                                # tokens of each run
    ends = np.cumsum(count)
    first = np.arange(int(ends[-1])) + np.repeat(np.cumsum(n) - n - (ends - count), count)  # a token's 1st char
    last = first + np.repeat(n > 1, count)
    start, length = char_start[first], char_start[last + 1] - char_start[first]
    width = int(length.max())
    rows = np.lib.stride_tricks.as_strided(np.concatenate([data, np.zeros(width, np.uint8)]),
                                           (len(data) + 1, width), (1, 1))[start]
    packed = rows if (length == width).all() else rows[np.arange(width) < length[:, None]]
    token_offsets = np.concatenate([[0], np.cumsum(length)])
    wide = token_offsets[-1] >= 2**31
    tokens = pa.Array.from_buffers(pa.large_string() if wide else pa.string(), len(start),
                                   [None, pa.py_buffer(token_offsets.astype(np.int64 if wide else np.int32)),
                                    pa.py_buffer(packed)])
    return np.repeat(run_doc, count), tokens


def _warn_unsegmented(tokens: pa.Array, lengths: pa.Array, n_runs: int, exact_counts: bool = True) -> None:
    """One warning naming the scripts of :data:`_UNSEGMENTED_SCRIPTS` whose long tokens look like phrases.

    ``tokens`` (before the length and stop-word filters) and their ``lengths`` in characters: the words of the
    text but its CJK runs, of which there are ``n_runs``. ``exact_counts=False`` (a DP vocabulary selection)
    leaves the exact token counts out of the message: it names the scripts and the public 1% threshold only.
    """
    long = pc.greater(lengths, _UNSEGMENTED_LENGTH)
    if not pc.any(long).as_py():
        return
    long = pc.filter(tokens, long)
    found = [(script, int(np.count_nonzero(pc.match_substring_regex(long, rf"\p{{{script}}}")
                                            .to_numpy(zero_copy_only=False)))) for script in _UNSEGMENTED_SCRIPTS]
    if not any(k for _, k in found):
        return
    n_tokens = int(np.count_nonzero(lengths.to_numpy(zero_copy_only=False))) + n_runs
    found = [(script, k) for script, k in found if k and k >= _UNSEGMENTED_SHARE * n_tokens]
    if found:
        names = " and ".join(s for s, _ in found)
        if exact_counts:
            counts = " and ".join(f"{k} in {s}" for s, k in found)
            share = (f"of the {n_tokens} tokens, {counts} {'is' if sum(k for _, k in found) == 1 else 'are'} "
                     f"longer than {_UNSEGMENTED_LENGTH} characters")
        else:     # a DP selection: no exact counts of the private text in its messages
            share = (f"at least {_UNSEGMENTED_SHARE:.0%} of the tokens are {names} tokens longer than "
                     f"{_UNSEGMENTED_LENGTH} characters (exact counts left out: the text is private)")
        warnings.warn(f"{names} text looks unsegmented: {share} (phrases, not words). {names} "
                      f"{'are' if len(found) > 1 else 'is'} written without spaces between words: the text should "
                      "be segmented into space-separated words first (with a word segmenter for the language)",
                      UserWarning, stacklevel=3)


def tokenize(text: pa.Array, min_length: int = 3, stop: list[str] | None = None,
             exact_counts: bool = True) -> tuple[np.ndarray, pa.Array]:
    """(document index of each token, tokens): the module docstring's tokenisation, vectorised in pyarrow.

    The words of all documents in text order, then the CJK bigrams of all documents in text order (a bag of
    words: ``doc_of`` is not sorted when both occur). Warns (``UserWarning``, once) about text in Thai, Lao,
    Khmer or Myanmar that looks unsegmented (module docstring); with ``exact_counts=False`` (a DP vocabulary
    selection) the warning gives no exact token counts.
    """
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks()
    norm = normalise_text(text)
    # \0 rather than a capture group: RE2 is several times faster
    spaced = pc.replace_substring_regex(norm, _CJK_RUN, r" \0 ") if _may_hold_cjk(norm) else norm
    has_cjk = _n_bytes(spaced) != _n_bytes(norm)                   # a run was found: spaces were inserted
    lists = pc.split_pattern_regex(spaced, _SPLIT) if has_cjk else pc.split_pattern_regex(norm, _SEPARATOR)
    pieces = pc.list_flatten(lists)
    doc_of = pc.list_parent_indices(lists).to_numpy()
    runs = None
    if has_cjk:
        cjk = _cjk_pieces(pieces)
        runs, run_doc = pc.filter(pieces, pa.array(cjk)), doc_of[cjk]
        pieces, doc_of = pc.filter(pieces, pa.array(~cjk)), doc_of[~cjk]
    written, tokens = _forms(pieces)
    lengths = pc.utf8_length(tokens)
    _warn_unsegmented(tokens, lengths, 0 if runs is None else len(runs), exact_counts)
    keep = _kept(written, tokens, min_length, stop, lengths)
    doc_of, tokens = doc_of[keep], pc.filter(tokens, pa.array(keep))
    if runs is not None and len(runs):
        bigram_doc, bigrams = _cjk_bigrams(runs, run_doc)
        doc_of, tokens = np.concatenate([doc_of, bigram_doc]), pa.concat_arrays([tokens, bigrams.cast(tokens.type)])
    return doc_of, tokens


def normalise_vocab(words: list[str], min_length: int = 3, stop: list[str] | None = None,
                    source: str = "--vocab") -> tuple[list[str], list[str]]:
    """A public vocabulary put in the form tokens take, and what was changed.

    Each word is normalised as text is (:func:`normalise_text`, apostrophes
    dropped, surrounding whitespace stripped). Blank lines, repeats after
    normalisation (``Space`` and ``space``), and words no token can equal
    (stop words, shorter than ``min_length``, characters other than letters)
    are dropped, so the corpus's ``vocab.txt`` (whose line numbers are the
    word ids) is the cleaned list, in the given order. A word of Chinese or
    Japanese characters (:data:`_CJK`; combining marks dropped) is kept when
    it is one or two characters long, a token that text makes, whatever
    ``min_length``; a longer one, or one mixed with other letters, can equal
    no token (text in those scripts becomes character bigrams) and is dropped.

    Returns
    -------
    words : list of str
    notes : list of str
        One line per kind of change, naming ``source`` and examples (empty when
        nothing changed), for the caller to warn with.
    """
    raw = [w.strip().lstrip("\ufeff") for w in words]
    written, tokens = _forms(normalise_text(pa.array(raw, pa.string())))
    never = (~_kept(written, tokens, min_length, stop)
             | pc.match_substring_regex(tokens, _SEPARATOR).to_numpy(zero_copy_only=False))
    has_cjk = pc.match_substring_regex(tokens, f"[{_CJK}]").to_numpy(zero_copy_only=False)
    if has_cjk.any():   # a CJK token is a bigram or a single character, of no other letters
        bare = pc.replace_substring_regex(tokens, r"\p{M}+", "")
        ok = pc.and_(pc.match_substring_regex(tokens, f"^{_CJK_RUN}$"),
                     pc.less_equal(pc.utf8_length(bare), 2)).to_numpy(zero_copy_only=False)
        never = np.where(has_cjk, ~ok, never)
        tokens = pc.if_else(pa.array(has_cjk), bare, tokens)
        cjk_dropped = bool((has_cjk & ~ok).any())
    else:
        cjk_dropped = False
    norm = tokens.to_pylist()
    kept, seen, notes = [], set(), []
    blank, repeated, unmatched = [], [], []
    for line, (orig, w, bad) in enumerate(zip(raw, norm, never), start=1):
        if not orig:
            blank.append(line)
        elif bad:
            unmatched.append(f"line {line} {orig!r}")
        elif w in seen:
            repeated.append(f"line {line} {orig!r}")
        else:
            seen.add(w)
            kept.append(w)
    changed = sum(o != w for o, w in zip(raw, norm) if o)
    for what, items in (("blank line(s) dropped", [f"line {i}" for i in blank]),
                        ("repeated word(s) dropped (after lower-casing and Unicode normalisation)", repeated),
                        (f"word(s) no token can equal dropped (stop words, fewer than {min_length} letters, "
                         + ("not letters only, or Chinese/Japanese words of more than 2 characters or mixed with "
                            "other letters: such text becomes character bigrams)" if cjk_dropped
                            else "or not letters only)"), unmatched)):
        if items:
            notes.append(f"{source}: {len(items)} {what}: {', '.join(items[:5])}{', …' if len(items) > 5 else ''}")
    if changed:
        notes.append(f"{source}: {changed} word(s) lower-cased or normalised to match tokens")
    return kept, notes


@dataclass(frozen=True)
class PreparedCorpus:
    """Counts, vocabulary and provenance of a prepared corpus."""

    counts: sp.csr_matrix
    vocab: list[str]
    doc_ids: np.ndarray
    vocab_from_data: bool
    vocab_selection: VocabularySelection | None = None


@dataclass(frozen=True)
class DPVocabOptions:
    """Parameters of a DP vocabulary selection (see :func:`dp_vocab_options`).

    Attributes
    ----------
    epsilon, delta : float
        Budget of the selection (δ split half for the threshold, half for the noise).
    max_words_per_doc : int
        Public cap L0 on the distinct words one document contributes.
    seed : int or None
        Seed of the noise (reproducible, NOT private); ``None``: OS entropy.
    """

    epsilon: float
    delta: float
    max_words_per_doc: int = DEFAULT_MAX_WORDS_PER_DOC
    seed: int | None = None

    @property
    def private(self) -> bool:
        """True when the noise comes from OS entropy."""
        return self.seed is None


def dp_vocab_options(epsilon=None, delta=None, max_words_per_doc=None, seed=None, reproducible: bool = False,
                     vocab=None) -> DPVocabOptions | None:
    """Check the DP-vocabulary arguments of ``prepare``; ``None`` when no DP selection is asked.

    Raises
    ------
    ValueError
        With the offending option named: a public vocabulary and a DP
        selection together; DP options without ``dp_vocab_epsilon``; a missing
        or invalid δ; ε ≤ 0; L0 < 1; a seed without ``reproducible`` (or the reverse).
    """
    if epsilon is None:
        given = [n for n, v in (("--dp-vocab-delta", delta), ("--max-words-per-doc", max_words_per_doc),
                                ("--seed", seed), ("--reproducible", reproducible or None)) if v is not None]
        if given:
            raise ValueError(f"{', '.join(given)}: only for a DP vocabulary selection (add --dp-vocab-epsilon)")
        return None
    if vocab is not None:
        raise ValueError("--vocab (a public vocabulary) and --dp-vocab-epsilon (a DP selection from the text) "
                         "are mutually exclusive")
    epsilon = mechanisms.check_epsilon(epsilon, "--dp-vocab-epsilon")
    if delta is None:
        raise ValueError("--dp-vocab-delta is required with --dp-vocab-epsilon (choose delta well below 1/N)")
    delta = mechanisms.check_delta(delta, "--dp-vocab-delta")
    l0 = DEFAULT_MAX_WORDS_PER_DOC if max_words_per_doc is None else max_words_per_doc
    if isinstance(l0, bool) or int(l0) != l0 or l0 < 1:
        raise ValueError(f"--max-words-per-doc must be an integer ≥ 1, got {max_words_per_doc!r}")
    if (seed is not None) != bool(reproducible):
        raise ValueError("a seed makes the vocabulary noise reproducible, and then the selection is not private: "
                         "pass both --seed S and --reproducible, or neither")
    return DPVocabOptions(epsilon, delta, int(l0), None if seed is None else int(seed))


def check_delta_for_n_docs(delta: float, n_docs: int, name: str = "delta", detail: str = "") -> float:
    """Refuse ``delta ≥ 1/N`` (N = ``n_docs``, the public number of documents).

    An (ε, δ) guarantee with δ ≥ 1/N allows publishing a whole document: the mechanism that releases each
    document outright with probability δ is (0, δ)-DP and releases δ·N ≥ 1 of them on average. ``detail``
    is added to the message (e.g. how a total δ is made up).

    Raises
    ------
    ValueError
        Naming ``name``, δ, N and 1/N.
    """
    n = int(n_docs)
    if n >= 1 and delta >= 1.0 / n:
        raise ValueError(f"{name}: delta = {delta:g}{detail} is not below 1/N = 1/{n} = {1.0 / n:.3g} (N = {n} "
                         "documents): a guarantee with delta ≥ 1/N allows publishing whole documents (releasing "
                         "each with probability delta is (0, delta)-DP); choose delta well below 1/N")
    return delta


#: Text inputs ``prepare`` reads: parquet, and CSV/TSV (optionally compressed; pyarrow infers it from the name).
_CSV_SUFFIXES = {".csv": ",", ".tsv": "\t"}
_COMPRESSED = (".gz", ".bz2", ".zst", ".lz4")


def _name(p: Path | str) -> PurePosixPath | Path:
    """A local path, or a URI's path part (for its name and suffixes)."""
    return PurePosixPath(p.partition("?")[0]) if cio.is_uri(p) else Path(p)


def _text_format(p: Path | str) -> str | None:
    """``"parquet"``, the CSV delimiter, or None for a file ``prepare`` does not read."""
    suffixes = [x.lower() for x in _name(p).suffixes]
    if suffixes and suffixes[-1] in _COMPRESSED:
        suffixes = suffixes[:-1]
    last = suffixes[-1] if suffixes else ""
    if last in (".parquet", ".pq"):
        return "parquet"
    return _CSV_SUFFIXES.get(last)


def text_input_files(path: str | Path) -> list[Path] | list[str]:
    """The files of a ``prepare`` input: the file itself, or a directory's parquet/CSV/TSV files, sorted;
    a URI (``s3://…``, :func:`distdp.io.corpus.is_uri`) is listed and read through ``pyarrow.fs``.

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``, or a directory without such files.
    ValueError
        A file of another kind (named, with the kinds read).
    """
    kinds = "parquet (.parquet, .pq), CSV (.csv) or TSV (.tsv), optionally .gz/.bz2/.zst/.lz4"
    if cio.is_uri(path):
        return _text_input_uris(path, kinds)
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith(".")
                       and _text_format(f) is not None)
        if not files:
            raise FileNotFoundError(f"{p}: directory without text files ({kinds})")
        return files
    if not p.is_file():
        raise FileNotFoundError(f"{p}: input not found")
    if _text_format(p) is None:
        raise ValueError(f"{p}: unsupported input; expected {kinds}")
    return [p]


def _text_input_uris(uri: str, kinds: str) -> list[str]:
    """:func:`text_input_files` of a URI (``pyarrow.fs``): the file, or a directory's text files."""
    info = cio.uri_info(uri)
    if info.type == pafs.FileType.Directory:
        files = [f for f in cio.uri_files(uri, recursive=False) if _text_format(f) is not None]
        if not files:
            raise FileNotFoundError(f"{uri}: directory without text files ({kinds})")
        return files
    if info.type != pafs.FileType.File:
        raise FileNotFoundError(f"{uri}: input not found")
    if _text_format(uri) is None:
        raise ValueError(f"{uri}: unsupported input; expected {kinds}")
    return [uri]


def _source(p: Path | str):
    """What pyarrow reads: a local path (compression from its name), or a URI's stream (decompressed by
    its name's suffix)."""
    if not cio.is_uri(p):
        return p
    fs, inner = cio.filesystem_of(p)
    return fs.open_input_stream(inner, compression="detect")


def _read_table(p: Path | str, columns: list[str]) -> pa.Table:
    """The named columns of one parquet or CSV file (local or by URI), CSV columns read as text; errors
    name the file."""
    fmt = _text_format(p)
    try:
        if fmt == "parquet":
            with cio.parquet_file(p) as pf:
                table = pf.read()
        else:
            header = pcsv.open_csv(_source(p), parse_options=pcsv.ParseOptions(delimiter=fmt)).schema.names
            table = pcsv.read_csv(_source(p), parse_options=pcsv.ParseOptions(delimiter=fmt, newlines_in_values=True),
                                  convert_options=pcsv.ConvertOptions(
                                      column_types={c: pa.string() for c in columns if c in header}))
    except pa.ArrowInvalid as exc:
        msg = str(exc)
        if "UTF8" in msg or "UTF-8" in msg or "utf8" in msg:
            raise ValueError(f"{p}: not UTF-8 text; re-encode it (e.g. iconv -f latin1 -t utf-8)") from None
        if "Empty CSV file" in msg:
            raise ValueError(f"{p}: empty file (no header)") from None
        raise ValueError(f"{p}: {msg}") from None
    for col in columns:
        if col not in table.column_names:
            hint = ""
            if fmt not in (None, "parquet") and len(table.column_names) == 1:
                hint = f"; one column read: is the delimiter {fmt!r}? (.csv: comma, .tsv: tab)"
            raise ValueError(f"{p}: column {col!r} not found (columns: {table.column_names}){hint}")
    return table


def read_text_column(path: str | Path, column: str, id_column: str | None = None) -> tuple[pa.Array, np.ndarray]:
    """The text column (and ids) of a parquet or CSV file, or of all such files in a directory.

    Without ``id_column`` the ids are the row numbers (``file:row`` for a
    directory). A null id is an error naming the file and row; repeated ids
    are a warning.
    """
    files = text_input_files(path)
    texts, ids = [], []
    for p in files:
        table = _read_table(p, [c for c in (column, id_column) if c is not None])
        text = table.column(column).combine_chunks()
        if pa.types.is_null(text.type):
            text = text.cast(pa.string())
        if pa.types.is_large_string(text.type):
            text = text.cast(pa.string())
        if not pa.types.is_string(text.type):
            raise ValueError(f"{p}: column {column!r} has type {text.type}, expected a string column")
        texts.append(text)
        if id_column is not None:
            col = table.column(id_column)
            if col.null_count:
                row = pc.index(pc.is_null(col), True).as_py()
                raise ValueError(f"{p}: row {row}: column {id_column!r} is null (every document needs an id)")
            ids.append(np.asarray(col.cast(pa.string()).to_pylist(), dtype=object).astype(str))
        else:
            rows = np.arange(table.num_rows).astype(str)
            ids.append(rows if len(files) == 1 else np.char.add(f"{_name(p).name}:", rows))
    text = pa.concat_arrays(texts)
    if len(text) == 0:
        raise ValueError(f"{path}: no documents (no rows)")
    doc_ids = np.concatenate(ids)
    if id_column is not None:
        uniq, counts = np.unique(doc_ids, return_counts=True)
        if (counts > 1).any():
            dup = uniq[counts > 1]
            warnings.warn(f"{path}: {len(dup)} id(s) of column {id_column!r} repeat (e.g. {str(dup[0])!r}); the "
                          "documents are kept, but their ids no longer name one document", stacklevel=2)
    return text, doc_ids


def encode_tokens(tokens: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(word index of each token, distinct words) by dictionary encoding."""
    enc = pc.dictionary_encode(tokens).combine_chunks() if isinstance(tokens, pa.ChunkedArray) else pc.dictionary_encode(tokens)
    return enc.indices.to_numpy(), np.asarray(enc.dictionary.to_pylist(), dtype=object)


def build_vocab(doc_of: np.ndarray, tokens: pa.Array, max_vocab: int, min_df: int = 2, max_df: float = 1.0,
                n_docs: int | None = None) -> list[str]:
    """The ``max_vocab`` tokens of highest document frequency, ties alphabetical.

    Only tokens in ≥ ``min_df`` documents and in ≤ ``max_df · n_docs``
    (:func:`~distdp.privacy.vocabulary.max_df_limit`) are eligible; the
    ``max_df`` filter comes before the ``max_vocab`` cut. ``n_docs``, the
    number of documents (those without tokens included), is required when
    ``max_df < 1``.
    """
    max_df = check_max_df(max_df)
    if max_df < 1.0 and n_docs is None:
        raise ValueError("n_docs (the number of documents) is required with max_df < 1")
    codes, words = encode_tokens(tokens)
    pairs = np.unique(doc_of.astype(np.int64) * len(words) + codes)
    df = np.bincount(pairs % len(words), minlength=len(words))
    ok = df >= min_df
    if max_df < 1.0:
        ok &= df <= max_df_limit(max_df, n_docs)
    eligible = np.flatnonzero(ok)
    order = np.lexsort((words[eligible].astype(str), -df[eligible]))
    return [str(w) for w in words[eligible][order][:max_vocab]]


def select_vocab_dp(doc_of: np.ndarray, tokens: pa.Array, max_vocab: int, options: DPVocabOptions,
                    max_df: float = 1.0, n_docs: int | None = None) -> VocabularySelection:
    """DP selection of at most ``max_vocab`` words (:func:`distdp.privacy.vocabulary.dp_select_vocabulary`).

    ``max_df < 1`` (with ``n_docs``, the public number of documents) drops the
    released words of noisy document frequency above ``max_df · n_docs``
    before the ``max_vocab`` cut (post-processing: the same privacy).
    """
    codes, words = encode_tokens(tokens)
    rng = None if options.seed is None else np.random.default_rng(options.seed)
    sel = dp_select_vocabulary(doc_of, codes, words, epsilon=options.epsilon, delta=options.delta,
                               max_words_per_doc=options.max_words_per_doc, max_vocab=max_vocab, rng=rng,
                               max_df=max_df, n_docs=n_docs)
    if len(sel.words) < 2 and sel.n_above_max_df and sel.n_candidates_released >= 2:     # max_df left too few
        raise BudgetNotMetError(f"--max-df {sel.max_df:g} leaves {len(sel.words)} of the "
                                f"{sel.n_candidates_released} words the DP vocabulary selection released (the "
                                f"others have a noisy document frequency above max_df × {n_docs} documents): "
                                "raise --max-df")
    if len(sel.words) < 2:
        raise BudgetNotMetError(f"the DP vocabulary selection released {len(sel.words)} word(s) (noise sigma "
                                f"{sel.sigma:.3g}, threshold {sel.threshold:.3g} documents): the corpus is too small "
                                "for this budget (or holds too few words: is --text-column the text?); raise "
                                "--dp-vocab-epsilon/--dp-vocab-delta, lower --max-words-per-doc, or give a "
                                "public --vocab.")
    return sel


def prepare_counts(text: pa.Array, doc_ids: np.ndarray, vocab: list[str] | None = None, max_vocab: int = 5000,
                   min_df: int = 2, min_length: int = 3, dp_vocab: DPVocabOptions | None = None,
                   max_df: float = 1.0) -> PreparedCorpus:
    """Tokenise ``text`` and count words over a given, data-built or DP-selected vocabulary.

    Parameters
    ----------
    text : pyarrow.Array of str
    doc_ids : ndarray
    vocab : list of str, optional
        Public vocabulary (other words dropped).
    max_vocab : int
        Size cap of a built or DP-selected vocabulary.
    min_df : int
        Minimum document frequency of a built vocabulary (not used by a DP
        selection; ignored with ``vocab``).
    min_length : int
    dp_vocab : DPVocabOptions, optional
        Select the vocabulary with differential privacy (exclusive with ``vocab``).
    max_df : float, in (0, 1]
        Words in more than ``max_df × len(text)`` documents are left out of a
        built vocabulary before the ``max_vocab`` cut; a DP selection applies
        it to its noisy document frequencies. 1: no filter. Must be 1 with ``vocab``.
    """
    if max_vocab < 2:
        raise ValueError(f"max_vocab must be ≥ 2, got {max_vocab}")
    if vocab is not None and dp_vocab is not None:
        raise ValueError("a public vocabulary and a DP vocabulary selection are mutually exclusive")
    max_df = check_max_df_option(max_df, vocab)
    if dp_vocab is not None:     # N = len(text) is public (replace-one neighbours)
        check_delta_for_n_docs(dp_vocab.delta, len(text), "--dp-vocab-delta")
    stop = stop_words()
    doc_of, tokens = tokenize(text, min_length, stop, exact_counts=dp_vocab is None)
    if len(tokens) == 0 and dp_vocab is None:
        # A DP selection goes on: on a text without words it releases no word and fails as any selection
        # that releases too few does (a function of its noisy release, not of the exact text).
        raise ValueError(f"the text holds no words: no token of ≥ {min_length} letters that is not a stop word "
                         f"in {len(text)} document(s) (is it the right --text-column?)")
    from_data = vocab is None
    if vocab is not None:
        vocab, notes = normalise_vocab(vocab, min_length, stop)
        for note in notes:
            warnings.warn(note, stacklevel=2)
        if len(vocab) < 2:
            raise ValueError(f"--vocab: {len(vocab)} usable word(s) after normalisation; a vocabulary needs ≥ 2")
    selection = None
    if dp_vocab is not None:
        selection = select_vocab_dp(doc_of, tokens, max_vocab, dp_vocab, max_df, len(text))
        vocab = selection.words
    elif from_data:
        vocab = build_vocab(doc_of, tokens, max_vocab, min_df, max_df, len(text))
        if len(vocab) < 2:
            n_min_df = len(vocab) if max_df == 1.0 else len(build_vocab(doc_of, tokens, 2, min_df))
            if n_min_df >= 2:
                raise ValueError(f"--max-df {max_df:g} leaves {len(vocab)} word(s) in ≥ {min_df} and ≤ "
                                 f"{max_df:g} × {len(text)} documents (the others are in more); raise --max-df")
            raise ValueError(f"only {n_min_df} word(s) occur in ≥ {min_df} documents; "
                             "the text is too small to build a vocabulary")
    ids = pc.index_in(tokens, value_set=pa.array(vocab)).to_numpy(zero_copy_only=False)
    ok = ~np.isnan(ids.astype(np.float64))
    n, d = len(text), len(vocab)
    counts = sp.csr_matrix((np.ones(int(ok.sum())), (doc_of[ok], ids[ok].astype(np.int64))), shape=(n, d))
    counts.sum_duplicates()
    return PreparedCorpus(counts, list(vocab), doc_ids, from_data, selection)


def check_max_df_option(max_df, vocab=None) -> float:
    """``max_df`` checked (:func:`~distdp.privacy.vocabulary.check_max_df`) against the vocabulary source.

    Raises
    ------
    ValueError
        ``max_df`` not in (0, 1]; or ``max_df < 1`` with a public vocabulary
        ``vocab`` (a file or a word list), whose words are all kept.
    """
    max_df = check_max_df(max_df)
    if max_df < 1.0 and vocab is not None:
        raise ValueError(f"--max-df {max_df:g} filters a vocabulary built or DP-selected from the text; a public "
                         "--vocab is kept as given: drop --max-df (or --vocab)")
    return max_df


#: ``min_df`` of a vocabulary built from the text when none is given.
DEFAULT_MIN_DF = 2


def check_min_df_option(min_df, vocab=None, dp_vocab: DPVocabOptions | None = None) -> int:
    """``min_df`` (None: :data:`DEFAULT_MIN_DF`), refused where it would be ignored.

    Raises
    ------
    ValueError
        ``min_df`` given with a public ``vocab`` (kept as given) or with a DP
        selection (its noisy threshold replaces it); or not an integer ≥ 1.
    """
    if min_df is None:
        return DEFAULT_MIN_DF
    if vocab is not None or dp_vocab is not None:
        raise ValueError(f"--min-df {min_df} filters a vocabulary built from the text; "
                         + ("a public --vocab is kept as given" if vocab is not None else
                            "a DP selection (--dp-vocab-epsilon) thresholds its noisy frequencies instead")
                         + ": drop --min-df")
    if isinstance(min_df, bool) or int(min_df) != min_df or min_df < 1:
        raise ValueError(f"--min-df must be an integer ≥ 1, got {min_df!r}")
    return int(min_df)


def vocabulary_metadata(prepared: PreparedCorpus, vocab: str | Path | None, dp_vocab: DPVocabOptions | None) -> dict:
    """The ``prepare.json`` entries describing where the vocabulary came from (module docstring)."""
    sel = prepared.vocab_selection
    if sel is None:
        source = "built from this text (NOT private)" if prepared.vocab_from_data else f"given: {vocab}"
        return {"vocab_source": source, "vocab_from_private_data": prepared.vocab_from_data, "vocab_dp": False}
    noise = "OS entropy" if dp_vocab.private else f"seed {dp_vocab.seed} (reproducible, NOT private)"
    privacy = {**sel.to_dict(), "private": bool(sel.private and dp_vocab.private), "noise_source": noise}
    source = f"selected from this text with ({sel.epsilon:g}, {sel.delta:g})-DP ({privacy['mechanism']})"
    return {"vocab_source": source,
            "vocab_from_private_data": True, "vocab_dp": True, "vocabulary_privacy": privacy}


def prepare(input_path: str | Path, text_column: str, out: str | Path, vocab: str | Path | None = None,
            max_vocab: int = 5000, min_df: int | None = None, id_column: str | None = None, shards: int = 1,
            overwrite: bool = False, *, dp_vocab_epsilon: float | None = None, dp_vocab_delta: float | None = None,
            max_words_per_doc: int | None = None, seed: int | None = None,
            reproducible: bool = False, max_df: float = 1.0) -> PreparedCorpus:
    """Turn a text column into a parquet corpus directory ``out`` (with ``vocab.txt``, ``prepare.json``).

    With ``dp_vocab_epsilon`` (and ``dp_vocab_delta``, optionally
    ``max_words_per_doc``, default 100) the vocabulary is selected with
    differential privacy, noise from OS entropy unless ``seed`` and
    ``reproducible`` are given (then ``prepare.json`` says it is not private).
    ``max_df`` (a fraction in (0, 1]) leaves out of a vocabulary built or
    selected from the text the words in more than ``max_df × N`` documents
    (module docstring); it is an error with a public ``vocab`` unless 1.
    ``min_df`` (default :data:`DEFAULT_MIN_DF`) applies to a vocabulary built
    from the text only. Options are checked by :func:`dp_vocab_options`,
    :func:`check_min_df_option` and :func:`check_max_df_option` before any
    file is read.
    """
    options = dp_vocab_options(dp_vocab_epsilon, dp_vocab_delta, max_words_per_doc, seed, reproducible, vocab)
    min_df = check_min_df_option(min_df, vocab, options)
    max_df = check_max_df_option(max_df, vocab)
    text, ids = read_text_column(input_path, text_column, id_column)
    prepared = prepare_counts(text, ids, load_vocab(vocab) if vocab else None, max_vocab, min_df, dp_vocab=options,
                              max_df=max_df)
    meta = {"input": str(input_path), "text_column": text_column, "n_docs": int(prepared.counts.shape[0]),
            "vocab_size": len(prepared.vocab),
            "min_df": min_df if prepared.vocab_from_data and options is None else None,
            "max_df": max_df if prepared.vocab_from_data else None,
            **vocabulary_metadata(prepared, vocab, options),
            "tokenizer": "NFKC, lower-case, split on non-letters (any script; apostrophes kept, then dropped), "
                         "length ≥ 3, English stop words removed; Han/Hiragana/Katakana runs cut out as character "
                         "bigrams (single characters alone)"}
    write_corpus(out, prepared.counts, shards, prepared.vocab, prepared.doc_ids,
                 {PREPARE_JSON: lambda p: p.write_text(json.dumps(meta, indent=2) + "\n")}, overwrite=overwrite)
    return prepared


def read_prepare_json(corpus: str | Path) -> dict | None:
    """A corpus's ``prepare.json`` (in its directory, or beside a corpus file; local or by URI), or None.

    Raises
    ------
    ValueError
        ``prepare.json`` is not a valid JSON object (naming the corpus).
    """
    text = cio.corpus_sidecar(corpus, PREPARE_JSON)
    if text is None:
        return None
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{corpus}: its {PREPARE_JSON} is not valid JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{corpus}: its {PREPARE_JSON} is not a JSON object")
    return meta


def vocabulary_provenance(meta: dict | None) -> str:
    """Where a corpus's vocabulary came from, as its ``prepare.json`` (``meta``, or None) records it.

    ``"dp"``: selected from the text with DP (``vocabulary_privacy`` holds its release: the report's
    ``ledger``, or ``release`` in a ``prepare.json`` written before the report had a ledger);
    ``"built"``: chosen from the text without DP (``vocab_from_private_data`` true);
    ``"public"``: a vocabulary file given to ``prepare`` (``vocab_from_private_data`` false);
    ``"unknown"``: no ``prepare.json`` (a corpus written by another tool, or copied without it), or one
    that does not say. Nothing but ``prepare.json`` can tell: the words themselves do not.
    """
    if not meta:
        return "unknown"
    vp = meta.get("vocabulary_privacy") or {}
    if vp.get("ledger") or "release" in vp:
        return "dp"
    flag = meta.get("vocab_from_private_data")
    if flag is True:
        return "built"
    if flag is False:
        return "public"
    return "unknown"


def vocabulary_privacy(corpus_dir: str | Path) -> dict | None:
    """What a fit must know about a corpus's vocabulary, from its ``prepare.json``.

    Parameters
    ----------
    corpus_dir : path
        The corpus directory (or one of its parquet files: its directory is used), local or by URI.

    Returns
    -------
    dict or None
        - DP selection: the recorded ``vocabulary_privacy`` dict (``release`` is
          a :meth:`~distdp.privacy.ledger.Release.to_dict`; the fit adds the
          release to its ledger and ``delta_threshold`` to its total δ;
          ``private`` is false when the selection noise was seeded).
        - Vocabulary built from the data without DP:
          ``{"vocab_from_private_data": True, "private": False}``.
        - ``None``: public vocabulary, or no ``prepare.json``. The two differ
          for a private fit (:func:`vocabulary_provenance`: ``"public"`` or
          ``"unknown"``; a fit refuses the latter unless the vocabulary is
          declared public, :func:`distdp.lda.private.fit.vocabulary_entry`).

    Raises
    ------
    ValueError
        ``prepare.json`` is not valid JSON.
    """
    meta = read_prepare_json(corpus_dir)
    kind = vocabulary_provenance(meta)
    if kind == "dp":
        return dict(meta["vocabulary_privacy"])
    if kind == "built":
        return {"vocab_from_private_data": True, "private": False}
    return None
