"""``prepare`` on real-world text: tokenisation (Unicode, apostrophes, stop words, Chinese/Japanese bigrams,
unsegmented Thai), public vocabularies, input files (CSV encodings and shapes, compressed, directories, ids), and
the CLI's clean exits."""

import gzip
import json
import unicodedata
import os
import signal
import warnings
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distdp import cli
from distdp.io import corpus as cio
from distdp.io.atomic import atomic_directory
from distdp.io.prepare import (DPVocabOptions, build_vocab, normalise_vocab, prepare, prepare_counts, read_text_column,
                               stop_words, tokenize, vocabulary_privacy)
from distdp.privacy.ledger import BudgetNotMetError
from distdp.privacy.vocabulary import dp_select_vocabulary


def tokens_of(*texts):
    return tokenize(pa.array(list(texts)), 3, stop_words())[1].to_pylist()


def test_letters_of_every_script_are_words():
    # decomposed "é" (e + U+0301) and precomposed are one word after NFC
    assert tokens_of("Café Müller école E\u0301cole naïve Straße") == ["café", "müller", "école", "école", "naïve",
                                                                       "straße"]
    assert tokens_of("Москва столица, Ελλάδα") == ["москва", "столица", "ελλάδα"]
    assert tokens_of("3.14 42 _x_ ---") == []


def test_contractions_are_stop_words_with_or_without_their_apostrophe():
    typographic = "I don\u2019t think that\u2019s what he\u2019s cooking"
    ascii_ = "I don't think that's what he's cooking"
    bare = "I dont think thats what hes cooking"
    for text in (typographic, ascii_, bare):
        assert tokens_of(text) == ["think", "cooking"], text
    # apostrophe-less forms that are English words stay words; the contraction itself is a stop word
    assert tokens_of("she'll run a shell script") == ["run", "shell", "script"]


def test_possessives_quotes_and_inner_apostrophes():
    assert tokens_of("John's 'quoted' students' rock'n'roll") == ["john", "quoted", "students", "rocknroll"]


def test_public_vocabulary_is_normalised_like_tokens():
    words, notes = normalise_vocab(["\ufeffSpace", "space", "", "don't", "c++", " orbit ", "ab", "Müller\u2019s",
                                    "E\u0301cole"], 3, stop_words(), source="v.txt")
    assert words == ["space", "orbit", "müller", "école"]
    text = "\n".join(notes)
    assert "v.txt: 1 blank line(s) dropped: line 3" in text
    assert "repeated word(s) dropped" in text and "line 2 'space'" in text
    assert "3 word(s) no token can equal" in text and "'c++'" in text and "'ab'" in text
    # every kept word is what the tokenizer makes of it
    assert tokens_of(" ".join(["Space", "orbit", "Müller\u2019s", "E\u0301cole"])) == words


def test_prepare_with_a_messy_vocabulary_file_warns_and_counts(tmp_path, capsys):
    pq.write_table(pa.table({"body": ["Space rocket orbit", "ROCKET launch orbit", "café space"]}),
                   tmp_path / "t.parquet")
    (tmp_path / "v.txt").write_bytes("\ufeffSpace\nrocket\n\nRocket\nCAFÉ\n".encode("utf-8"))
    code = cli.main(["prepare", str(tmp_path / "t.parquet"), "--text-column", "body", "--out", str(tmp_path / "c"),
                     "--vocab", str(tmp_path / "v.txt")])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "distdp prepare: warning: --vocab: 1 blank line(s) dropped" in err
    assert (tmp_path / "c" / "vocab.txt").read_text(encoding="utf-8").split() == ["space", "rocket", "café"]
    X = cio.read_corpus(tmp_path / "c", 3).toarray()
    assert X.tolist() == [[1, 1, 0], [0, 1, 0], [1, 0, 1]]


def write(path, text, encoding="utf-8"):
    path.write_bytes(text.encode(encoding))
    return path


def test_csv_inputs(tmp_path):
    # numbers in the text column are text (no words), not an int64 column refused by type
    write(tmp_path / "num.csv", "id,body\n1,123\n2,456\n")
    with pytest.raises(ValueError, match="holds no words"):
        prepare_counts(read_text_column(tmp_path / "num.csv", "body")[0], np.arange(2).astype(str))
    with pytest.raises(ValueError, match=r"latin1\.csv: not UTF-8"):
        read_text_column(write(tmp_path / "latin1.csv", "id,body\n1,café au lait\n", "latin1"), "body")
    with pytest.raises(ValueError, match=r"hdr\.csv: no documents"):
        read_text_column(write(tmp_path / "hdr.csv", "id,body\n"), "body")
    with pytest.raises(ValueError, match=r"ragged\.csv: CSV parse error"):
        read_text_column(write(tmp_path / "ragged.csv", "id,body\n1,a b\n2,c d,extra\n"), "body")
    with pytest.raises(ValueError, match="is the delimiter ','"):
        read_text_column(write(tmp_path / "semi.csv", "id;body\n1;space\n"), "body")
    with pytest.raises(ValueError, match=r"t\.txt: unsupported input"):
        read_text_column(write(tmp_path / "t.txt", "space rocket\n"), "body")
    text, ids = read_text_column(write(tmp_path / "multi.csv", 'id,body\n1,"two\nlines, ""quoted"""\n'), "body")
    assert text.to_pylist() == ['two\nlines, "quoted"'] and ids.tolist() == ["0"]
    (tmp_path / "t.csv.gz").write_bytes(gzip.compress("id,body\n1,space rocket\n2,orbit\n".encode()))
    text, _ = read_text_column(tmp_path / "t.csv.gz", "body")
    assert text.to_pylist() == ["space rocket", "orbit"]
    text, _ = read_text_column(write(tmp_path / "bom.csv", "\ufeffbody,id\nspace,1\n"), "body")
    assert text.to_pylist() == ["space"]


def test_directory_input_and_ids(tmp_path):
    d = tmp_path / "dir"
    d.mkdir()
    pq.write_table(pa.table({"body": ["space rocket", "orbit launch"]}), d / "a.parquet")
    write(d / "b.csv", "body\nrocket orbit\n")
    write(d / "notes.md", "ignored")
    text, ids = read_text_column(d, "body")
    assert text.to_pylist() == ["space rocket", "orbit launch", "rocket orbit"]
    assert ids.tolist() == ["a.parquet:0", "a.parquet:1", "b.csv:0"]
    pq.write_table(pa.table({"body": ["a b", "c d", "e f"], "id": ["x", None, "y"]}), tmp_path / "n.parquet")
    with pytest.raises(ValueError, match=r"n\.parquet: row 1: column 'id' is null"):
        read_text_column(tmp_path / "n.parquet", "body", "id")
    pq.write_table(pa.table({"body": ["a b", "c d"], "id": ["x", "x"]}), tmp_path / "dup.parquet")
    with pytest.warns(UserWarning, match="1 id.*repeat.*'x'"):
        read_text_column(tmp_path / "dup.parquet", "body", "id")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="directory without text files"):
        read_text_column(tmp_path / "empty", "body")


def test_fit_vocabulary_must_match_the_corpus(tmp_path):
    X = np.eye(4)
    cio.write_corpus(tmp_path / "c", X, vocab=["a", "b", "c", "d"])
    write(tmp_path / "three.txt", "a\nb\nc\n")
    with pytest.raises(ValueError, match=r"three\.txt \(3 words\) disagrees with .*vocab\.txt \(4 words\)"):
        cio.resolve_vocab(tmp_path / "c", tmp_path / "three.txt")
    with pytest.raises(ValueError, match=r"vocab_size=5 disagrees"):
        cio.resolve_vocab(tmp_path / "c", vocab_size=5)
    write(tmp_path / "other.txt", "\ufeffa\nb\nx\nd\n")  # a byte-order mark is not part of the first word
    with pytest.warns(UserWarning, match="other words \\(first at line 3: 'x' vs 'c'\\)"):
        assert cio.resolve_vocab(tmp_path / "c", tmp_path / "other.txt") == (4, ["a", "b", "x", "d"])
    write(tmp_path / "latin1.txt", "a\nb\ncafé\nd\n", "latin1")
    with pytest.raises(ValueError, match=r"latin1\.txt: line 3: not UTF-8"):
        cio.load_vocab(tmp_path / "latin1.txt")


def test_prepare_by_uri_equals_the_local_path(tmp_path):
    """A text directory by URI (pyarrow.fs; ``file://`` here, ``s3://`` in use): a gzipped CSV and a
    parquet file read as by local path, and the same corpus comes out; ids name the files."""
    src = tmp_path / "raw text"
    src.mkdir()
    with gzip.open(src / "a.csv.gz", "wt", encoding="utf-8") as f:
        f.write('id,body\n1,"rockets launch from the space station"\n2,"the station crew launches rockets"\n')
    pq.write_table(pa.table({"body": ["space rockets and station crews", "crew rockets station"]}), src / "b.parquet")
    write(src / "notes.txt", "not read")
    local = prepare(src, "body", tmp_path / "local", min_df=1)
    by_uri = prepare(src.as_uri(), "body", tmp_path / "uri", min_df=1)
    assert by_uri.vocab == local.vocab and (by_uri.counts != local.counts).nnz == 0
    assert list(by_uri.doc_ids) == list(local.doc_ids) == ["a.csv.gz:0", "a.csv.gz:1", "b.parquet:0", "b.parquet:1"]
    with pytest.raises(FileNotFoundError, match="input not found"):
        prepare(src.as_uri() + "/missing.csv", "body", tmp_path / "none")


def test_shards(tmp_path):
    with pytest.raises(ValueError, match="--shards must be an integer ≥ 1"):
        cio.write_corpus(tmp_path / "c0", np.eye(3), n_shards=0)
    cio.write_corpus(tmp_path / "c9", np.eye(3), n_shards=9)  # more shards than documents: one each
    assert len(cio.discover(tmp_path / "c9")) == 3


def test_sigterm_unwinds_and_leaves_no_partial_output(tmp_path):
    """A command stopped by SIGTERM (kill, ray job stop) exits 143 through the atomic writer's cleanup."""
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as stopped:
        with cli._exit_cleanly_on_sigterm():
            with atomic_directory(tmp_path / "out") as tmp:
                (tmp / "half").write_text("written")
                os.kill(os.getpid(), signal.SIGTERM)
    assert stopped.value.code == 143
    assert list(tmp_path.iterdir()) == []
    assert signal.getsignal(signal.SIGTERM) is before  # the previous handler is back


# --------------------------------------------------------------------------- Chinese and Japanese: character bigrams
def pairs_of(texts, min_length=3, stop=None):
    """(document, token) pairs of ``tokenize``, as a sorted list (tokens are a bag of words)."""
    doc_of, tokens = tokenize(pa.array(texts, pa.string()), min_length, stop)
    assert len(doc_of) == len(tokens)
    return sorted(zip(doc_of.tolist(), tokens.to_pylist()))


def test_chinese_text_becomes_overlapping_character_bigrams():
    tokens = tokens_of("我爱北京天安门。天安门上太阳升！")
    assert Counter(tokens) == Counter(["我爱", "爱北", "北京", "京天", "天安", "安门",
                                       "天安", "安门", "门上", "上太", "太阳", "阳升"])
    assert tokens_of("東京都庁") == ["東京", "京都", "都庁"]
    # 〇 (a Han number, not a letter) stays in its run; full-width punctuation ends a run
    assert tokens_of("二〇二四年，好") == ["二〇", "〇二", "二四", "四年", "好"]


def test_japanese_kana_and_kanji_runs_are_cut_into_bigrams():
    tokens = tokens_of("東京都庁へ行きました。コーヒーを飲む")
    assert Counter(tokens) == Counter(["東京", "京都", "都庁", "庁へ", "へ行", "行き", "きま", "まし", "した",
                                       "コー", "ーヒ", "ヒー", "ーを", "を飲", "飲む"])
    # NFKC folds half-width katakana (its prolonged sound and voicing marks too) into the full-width
    # word, full-width Latin into ASCII and ligatures into letters; a variation selector after a kanji is dropped
    assert tokens_of("ｺｰﾋｰ") == tokens_of("コーヒー") == ["コー", "ーヒ", "ヒー"]
    assert tokens_of("ｶﾞｽ") == tokens_of("ガス") == ["ガス"]
    assert Counter(tokens_of("ＧＰＵ加速 ﬁnance")) == Counter(["gpu", "加速", "finance"])
    assert tokens_of("葛\U000E0100城") == ["葛城"]
    # Hangul is written with spaces: its words stay words (and min_length applies to them)
    assert tokens_of("서울특별시 한국어 서울") == ["서울특별시", "한국어"]


def test_letters_of_other_scripts_next_to_cjk_are_separate_words():
    text = "GPU加速 AI芯片 the東京 x光"
    assert Counter(tokens_of(text)) == Counter(["gpu", "加速", "芯片", "東京", "光"])   # ai, x: < 3 letters
    # min_length is about words of other scripts: CJK tokens are kept at any min_length
    short = tokenize(pa.array([text]), 2, stop_words())[1].to_pylist()
    assert Counter(short) == Counter(["gpu", "加速", "ai", "芯片", "東京", "光"])
    long_ = tokenize(pa.array([text]), 4, stop_words())[1].to_pylist()
    assert Counter(long_) == Counter(["加速", "芯片", "東京", "光"])


def test_a_single_cjk_character_is_a_token():
    assert tokens_of("我 and 你") == ["我", "你"]
    assert tokens_of("rocket中orbit") == ["rocket", "orbit", "中"]
    assert tokens_of("中") == ["中"]


def test_document_indices_of_bigrams_across_documents():
    texts = ["東京都", None, "", "space 中 rocket", "國家 orbit", "plain english words", "ひらがな"]
    expected = [(0, "東京"), (0, "京都"), (3, "rocket"), (3, "space"), (3, "中"), (4, "orbit"), (4, "國家"),
                (5, "english"), (5, "plain"), (5, "words"), (6, "がな"), (6, "ひら"), (6, "らが")]
    assert pairs_of(texts, 3, stop_words()) == sorted(expected)
    # chunked and large-string input give the same tokens
    doc_of, tokens = tokenize(pa.chunked_array([texts[:3], texts[3:]]), 3, stop_words())
    assert sorted(zip(doc_of.tolist(), tokens.to_pylist())) == sorted(expected)
    doc_of, tokens = tokenize(pa.array(texts, pa.large_string()), 3, stop_words())
    assert sorted(zip(doc_of.tolist(), tokens.to_pylist())) == sorted(expected)
    # documents without CJK keep their tokens in text order, as before
    doc_of, tokens = tokenize(pa.array(["space rocket", "東京", "orbit launch"]), 3, stop_words())
    words = [t for d, t in zip(doc_of.tolist(), tokens.to_pylist()) if d != 1]
    assert words == ["space", "rocket", "orbit", "launch"]
    assert pairs_of([None, ""]) == []


THAI = "ประเทศไทยมีประชากรประมาณหกสิบหกล้านคนและมีกรุงเทพมหานครเป็นเมืองหลวง ภาษาไทยเป็นภาษาราชการของประเทศ"
LAO = "ພາສາລາວເປັນພາສາທາງການຂອງສາທາລະນະລັດປະຊາທິປະໄຕປະຊາຊົນລາວ"


def caught(texts):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tokens = tokenize(pa.array(texts), 3, stop_words())[1].to_pylist()
    return tokens, [x for x in w if issubclass(x.category, UserWarning)]


def test_unsegmented_thai_warns_once_and_is_left_as_phrases():
    tokens, warned = caught([THAI, THAI + " english words", "more english"])
    assert len(warned) == 1
    message = str(warned[0].message)
    assert message.startswith("Thai text looks unsegmented")
    assert "segmented into space-separated words first" in message and "4 in Thai" in message
    assert tokens.count("ภาษาไทยเป็นภาษาราชการของประเทศ") == 2            # a phrase is one token, as before
    # two scripts: still one warning, naming both
    _, warned = caught([THAI, LAO])
    assert len(warned) == 1 and str(warned[0].message).startswith("Thai and Lao text looks unsegmented")
    # segmented Thai, English, Chinese: no warning
    for texts in (["ประเทศ ไทย มี ประชากร ประมาณ หก สิบ หก ล้าน คน"], ["plain english text, " * 50],
                  ["我爱北京天安门" * 10]):
        tokens, warned = caught(texts)
        assert tokens and warned == [], texts
    # a long Thai word among many tokens is below the 1% share
    _, warned = caught(["word " * 200 + THAI.split()[0]])
    assert warned == []


def test_public_vocabulary_with_cjk_words():
    words, notes = normalise_vocab(["東京", "京", "東京都", "GPU加速", "葛\U000E0100", "orbit", "ab", "東京"], 3,
                                   stop_words(), source="v.txt")
    assert words == ["東京", "京", "葛", "orbit"]
    text = "\n".join(notes)
    assert "3 word(s) no token can equal" in text
    assert "'東京都'" in text and "'GPU加速'" in text and "'ab'" in text and "Chinese/Japanese" in text
    assert "line 8 '東京'" in text                                         # a repeat
    # the kept CJK words are tokens text makes
    assert set(words) <= set(tokens_of("東京 京 葛\U000E0100 orbit"))
    # without CJK words the note is the one it always was
    _, notes = normalise_vocab(["orbit", "ab"], 3, stop_words())
    assert notes == ["--vocab: 1 word(s) no token can equal dropped (stop words, fewer than 3 letters, or not "
                     "letters only): line 2 'ab'"]


def test_prepare_chinese_documents_end_to_end(tmp_path, capsys):
    docs = ["北京大学的学生", "北京的大学很多", "学生在大学学习", "上海的学生"]
    pq.write_table(pa.table({"body": docs}), tmp_path / "zh.parquet")
    code = cli.main(["prepare", str(tmp_path / "zh.parquet"), "--text-column", "body", "--out", str(tmp_path / "c")])
    assert code == 0, capsys.readouterr().err
    vocab = (tmp_path / "c" / "vocab.txt").read_text(encoding="utf-8").split()
    # bigrams in ≥ 2 documents, by document frequency then alphabetically
    assert vocab == ["大学", "学生", "北京", "的学"]
    X = cio.read_corpus(tmp_path / "c", len(vocab)).toarray()
    assert X.tolist() == [[1, 1, 1, 1], [1, 0, 1, 0], [1, 1, 0, 0], [0, 1, 0, 1]]
    assert "bigrams" in json.loads((tmp_path / "c" / "prepare.json").read_text(encoding="utf-8"))["tokenizer"]
    # the same through CSV, with a public vocabulary of bigrams and a longer word
    write(tmp_path / "zh.csv", "body\n" + "\n".join(docs) + "\n")
    write(tmp_path / "v.txt", "北京\n学生\n北京大学\n")
    with pytest.warns(UserWarning, match="no token can equal.*Chinese/Japanese.*'北京大学'"):
        res = prepare(tmp_path / "zh.csv", "body", tmp_path / "c2", vocab=tmp_path / "v.txt")
    assert res.vocab == ["北京", "学生"]
    assert res.counts.toarray().tolist() == [[1, 1], [1, 0], [0, 1], [0, 1]]


CJK_ALPHABET = "東京都庁大学生ひらがなカタナー〇𠮷ｶｰ"   # with a 4-byte (U+20BB7) and half-width characters


def reference_cjk_tokens(text):
    """Bigrams (single characters) of the maximal runs of CJK_ALPHABET characters, by a plain loop."""
    out, run = [], ""
    for ch in text + " ":
        if ch in CJK_ALPHABET:
            run += ch
            continue
        if len(run) == 1:
            out.append(run)
        out.extend(run[i:i + 2] for i in range(len(run) - 1))
        run = ""
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.one_of(st.text("abcdeXYZ", min_size=1, max_size=8),
                                   st.text(CJK_ALPHABET, min_size=1, max_size=6),
                                   st.sampled_from([" ", ", ", "。", "42"])), max_size=12).map("".join),
                max_size=6),
       st.integers(1, 4))
def test_cjk_tokens_are_the_bigrams_of_each_run(texts, min_length):
    doc_of, tokens = tokenize(pa.array(texts, pa.string()), min_length, None)
    got = list(zip(doc_of.tolist(), tokens.to_pylist()))
    texts = [unicodedata.normalize("NFKC", t) for t in texts]     # the tokenizer's first step (ｶｰ → カー)
    cjk = Counter((d, t) for d, t in got if set(t) <= set(CJK_ALPHABET))
    expected = Counter((d, t) for d, text in enumerate(texts) for t in reference_cjk_tokens(text))
    assert cjk == expected
    runs = [len(r) for text in texts for r in "".join(c if c in CJK_ALPHABET else " " for c in text).split()]
    assert sum(cjk.values()) == sum(max(n - 1, 1) for n in runs)
    # the other tokens are the words of the text with its CJK runs taken out
    rest = [(d, t) for d, t in got if not set(t) <= set(CJK_ALPHABET)]
    words = [(d, w) for d, text in enumerate(texts)
             for w in "".join(c.lower() if c.isalpha() and c not in CJK_ALPHABET else " " for c in text).split()
             if len(w) >= min_length]
    assert rest == words


# --------------------------------------------------------------------------- max_df: words too common to be useful
# 10 documents: "reuters" in all 10, "rocket" in 9, "orbit" in 5, "launch" in 3, "comet" in 1
NEWS = ["reuters rocket orbit launch"] * 3 + ["reuters rocket orbit"] * 2 + ["reuters rocket"] * 4 + \
       ["reuters comet"]


def vocab_of(texts, **kwargs):
    return prepare_counts(pa.array(texts), np.arange(len(texts)).astype(str), **kwargs).vocab


def test_max_df_drops_words_in_too_many_documents():
    assert vocab_of(NEWS, min_df=1) == ["reuters", "rocket", "orbit", "launch", "comet"]
    assert vocab_of(NEWS, min_df=1, max_df=1.0) == ["reuters", "rocket", "orbit", "launch", "comet"]
    # df ≤ max_df·N is kept (as in scikit-learn): "rocket", in exactly 0.9 × 10 documents, stays
    assert vocab_of(NEWS, min_df=1, max_df=0.9) == ["rocket", "orbit", "launch", "comet"]
    assert vocab_of(NEWS, min_df=1, max_df=0.89) == ["orbit", "launch", "comet"]
    assert vocab_of(NEWS, min_df=2, max_df=0.5) == ["orbit", "launch"]
    # documents without any word count in N: 10 more empty documents make "reuters" ≤ 0.5 × 20
    assert vocab_of(NEWS + [""] * 10, min_df=2, max_df=0.5) == ["reuters", "rocket", "orbit", "launch"]
    # a decimal fraction keeps the count it names, although 0.57 * 100 == 56.99999999999999 in floating point
    texts = ["common"] * 57 + ["rover extra"] * 43
    assert vocab_of(texts, min_df=1, max_df=0.57) == ["common", "extra", "rover"]
    assert vocab_of(texts, min_df=1, max_df=0.56) == ["extra", "rover"]
    assert build_vocab(*tokenize(pa.array(texts), 3, stop_words()), 5, 1, 0.56, 100) == ["extra", "rover"]
    with pytest.raises(ValueError, match="n_docs"):
        build_vocab(*tokenize(pa.array(texts), 3, stop_words()), 5, 1, 0.56)


def test_max_df_filters_before_the_max_vocab_cut():
    assert vocab_of(NEWS, min_df=1, max_vocab=2) == ["reuters", "rocket"]
    # "reuters" removed by max_df frees its slot for the next word, as in scikit-learn
    assert vocab_of(NEWS, min_df=1, max_vocab=2, max_df=0.9) == ["rocket", "orbit"]
    assert vocab_of(NEWS, min_df=1, max_vocab=2, max_df=0.6) == ["orbit", "launch"]


@pytest.mark.parametrize("bad", [0, 0.0, -0.1, 1.5, 2, float("nan"), float("inf"), True, "0.5", None])
def test_invalid_max_df_is_refused(tmp_path, bad):
    with pytest.raises(ValueError, match=r"max_df \(--max-df\) must be a fraction .* in \(0, 1\].*got "):
        vocab_of(NEWS, min_df=1, max_df=bad)
    # prepare checks it before reading any file
    with pytest.raises(ValueError, match="max_df"):
        prepare(tmp_path / "missing.parquet", "body", tmp_path / "c", max_df=bad)
    with pytest.raises(ValueError, match="max_df"):
        dp_select_vocabulary(np.array([0, 1]), np.array([0, 1]), ["aaa", "bbb"], epsilon=1.0, delta=1e-6,
                             max_df=bad, n_docs=2, rng=np.random.default_rng(0))
    assert not (tmp_path / "c").exists()


def test_max_df_leaving_too_few_words_says_which_option_to_relax():
    with pytest.raises(ValueError, match=r"--max-df 0.5 leaves 1 word\(s\).*raise --max-df"):
        vocab_of(["reuters rocket", "reuters rocket", "reuters orbit"], min_df=1, max_df=0.5)
    # too few words without max_df: the message it always was
    with pytest.raises(ValueError, match="only 1 word"):
        vocab_of(["reuters rocket", "reuters orbit"], min_df=2, max_df=0.5)


def test_cli_passes_max_df_and_prepare_json_records_it(tmp_path, capsys):
    pq.write_table(pa.table({"body": NEWS}), tmp_path / "news.parquet")
    base = ["prepare", str(tmp_path / "news.parquet"), "--text-column", "body"]
    assert cli.main([*base, "--out", str(tmp_path / "c"), "--min-df", "1", "--max-df", "0.9"]) == 0, \
        capsys.readouterr().err
    assert (tmp_path / "c" / "vocab.txt").read_text(encoding="utf-8").split() == ["rocket", "orbit", "launch", "comet"]
    meta = json.loads((tmp_path / "c" / "prepare.json").read_text(encoding="utf-8"))
    assert meta["max_df"] == 0.9 and meta["min_df"] == 1
    # default: no filter, recorded as 1.0
    assert cli.main([*base, "--out", str(tmp_path / "d")]) == 0
    assert (tmp_path / "d" / "vocab.txt").read_text(encoding="utf-8").split() == ["reuters", "rocket", "orbit",
                                                                                  "launch"]
    meta = json.loads((tmp_path / "d" / "prepare.json").read_text(encoding="utf-8"))
    assert meta["max_df"] == 1.0 and meta["min_df"] == 2
    # a bad value: exit 2 naming the option, nothing written
    capsys.readouterr()
    assert cli.main([*base, "--out", str(tmp_path / "e"), "--max-df", "1.5"]) == 2
    assert "--max-df" in capsys.readouterr().err and not (tmp_path / "e").exists()


def test_max_df_with_a_public_vocabulary_is_an_error(tmp_path, capsys):
    pq.write_table(pa.table({"body": NEWS}), tmp_path / "news.parquet")
    (tmp_path / "v.txt").write_text("reuters\nrocket\norbit\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"--max-df 0.5 .*public --vocab is kept as given"):
        prepare(tmp_path / "news.parquet", "body", tmp_path / "c", vocab=tmp_path / "v.txt", max_df=0.5)
    with pytest.raises(ValueError, match="--max-df 0.5"):
        vocab_of(NEWS, vocab=["reuters", "rocket"], max_df=0.5)
    code = cli.main(["prepare", str(tmp_path / "news.parquet"), "--text-column", "body", "--out",
                     str(tmp_path / "c"), "--vocab", str(tmp_path / "v.txt"), "--max-df", "0.5"])
    assert code == 2 and "public --vocab" in capsys.readouterr().err and not (tmp_path / "c").exists()
    # max_df 1 (the default) is no filter, so it goes with a vocabulary; neither limit is recorded there
    res = prepare(tmp_path / "news.parquet", "body", tmp_path / "c", vocab=tmp_path / "v.txt", max_df=1.0)
    assert res.vocab == ["reuters", "rocket", "orbit"]
    meta = json.loads((tmp_path / "c" / "prepare.json").read_text(encoding="utf-8"))
    assert meta["max_df"] is None and meta["min_df"] is None


def test_min_df_where_it_would_be_ignored_is_an_error(tmp_path, capsys):
    """--min-df filters a vocabulary built from the text; with a public --vocab or a DP selection it
    would be silently ignored, so it is refused (before any file is read); left out, the default 2."""
    pq.write_table(pa.table({"body": NEWS}), tmp_path / "news.parquet")
    (tmp_path / "v.txt").write_text("reuters\nrocket\norbit\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"--min-df 1 .*public --vocab is kept as given"):
        prepare(tmp_path / "missing.parquet", "body", tmp_path / "c", vocab=tmp_path / "v.txt", min_df=1)
    with pytest.raises(ValueError, match=r"--min-df 3 .*DP selection"):
        prepare(tmp_path / "news.parquet", "body", tmp_path / "c", min_df=3, dp_vocab_epsilon=1.0,
                dp_vocab_delta=1e-6)
    with pytest.raises(ValueError, match="--min-df must be an integer ≥ 1"):
        prepare(tmp_path / "news.parquet", "body", tmp_path / "c", min_df=0)
    code = cli.main(["prepare", str(tmp_path / "news.parquet"), "--text-column", "body", "--out",
                     str(tmp_path / "c"), "--vocab", str(tmp_path / "v.txt"), "--min-df", "2"])
    assert code == 2 and "drop --min-df" in capsys.readouterr().err and not (tmp_path / "c").exists()
    assert prepare(tmp_path / "news.parquet", "body", tmp_path / "c", vocab=tmp_path / "v.txt").vocab == [
        "reuters", "rocket", "orbit"]


@pytest.fixture()
def wire_file(tmp_path):
    """400 documents: "reuters" in every one, three of eight other words in each (about 150 documents each)."""
    rng = np.random.default_rng(1)
    common = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    texts = ["reuters " + " ".join(rng.choice(common, 3, replace=False)) for _ in range(400)]
    pq.write_table(pa.table({"body": texts}), tmp_path / "wire.parquet")
    return tmp_path / "wire.parquet", common


def test_dp_selection_applies_max_df_to_noisy_frequencies_at_no_privacy_cost(tmp_path, wire_file):
    """Seeded noise (σ ≈ 10, τ ≈ 56 at ε = 2, δ = 1e-6, L0 = 10): "reuters" (df 400) is 8σ above 0.8 × 400; the
    others (df ≈ 150) are more than 15σ below it and more than 9σ above τ."""
    path, common = wire_file
    dp = dict(dp_vocab_epsilon=2.0, dp_vocab_delta=1e-6, max_words_per_doc=10, seed=5, reproducible=True)
    full = prepare(path, "body", tmp_path / "full", **dp)
    cut = prepare(path, "body", tmp_path / "cut", max_df=0.8, **dp)
    assert "reuters" in full.vocab and "reuters" not in cut.vocab
    # the same noise: the filtered vocabulary is the full one less "reuters", in the same order
    assert cut.vocab == [w for w in full.vocab if w != "reuters"] and set(cut.vocab) == set(common)
    vp_full, vp_cut = vocabulary_privacy(tmp_path / "full"), vocabulary_privacy(tmp_path / "cut")
    assert (vp_full["max_df"], vp_full["n_above_max_df"]) == (1.0, 0)
    assert (vp_cut["max_df"], vp_cut["n_above_max_df"]) == (0.8, 1)
    # post-processing: the recorded privacy (epsilon, delta, noise, threshold, ledger release) is identical
    for key in ("epsilon", "delta", "delta_gaussian", "delta_threshold", "noise_sigma", "threshold", "sensitivity",
                "n_candidates_released", "ledger", "private"):
        assert vp_cut[key] == vp_full[key], key
    assert set(vp_full) == set(vp_cut)
    meta = json.loads((tmp_path / "cut" / "prepare.json").read_text(encoding="utf-8"))
    assert meta["max_df"] == 0.8 and meta["min_df"] is None                 # min_df does not apply to DP
    # before the max_vocab cut: "reuters" leaves its slot to the next word
    top = prepare_counts(*read_text_column(path, "body"), max_vocab=3, max_df=0.8,
                         dp_vocab=DPVocabOptions(2.0, 1e-6, 10, 5))
    assert top.vocab == cut.vocab[:3]


def test_dp_selection_max_df_leaving_too_few_words(tmp_path):
    texts = ["reuters rocket"] * 400
    pq.write_table(pa.table({"body": texts}), tmp_path / "s.parquet")
    with pytest.raises(BudgetNotMetError, match=r"--max-df 0.5 leaves 0 of the 2 words .*raise --max-df.*composes"):
        prepare(tmp_path / "s.parquet", "body", tmp_path / "c", max_df=0.5, dp_vocab_epsilon=2.0,
                dp_vocab_delta=1e-6, max_words_per_doc=10, seed=5, reproducible=True)
    assert not (tmp_path / "c").exists()
    # the number of documents (public) is needed to apply max_df to a selection
    with pytest.raises(ValueError, match="n_docs"):
        dp_select_vocabulary(np.array([0, 1]), np.array([0, 1]), ["aaa", "bbb"], epsilon=1.0, delta=1e-6,
                             max_df=0.5, rng=np.random.default_rng(0))


def test_prepare_text_to_corpus(tmp_path):
    texts = ["The cat sat on the mat with another cat", "Dogs and cats are pets; the dog barked",
             "Stock markets fell as investors sold stocks", None, "Markets rallied; investors bought stock"]
    pq.write_table(pa.table({"body": texts, "id": ["a", "b", "c", "d", "e"]}), tmp_path / "t.parquet")
    res = prepare(tmp_path / "t.parquet", "body", tmp_path / "corpus", max_vocab=50, min_df=1, id_column="id")
    assert "the" not in res.vocab and "cat" in res.vocab and res.vocab_from_data
    X = cio.read_corpus(tmp_path / "corpus", len(res.vocab))
    assert X.shape == (5, len(res.vocab))
    assert X[0, res.vocab.index("cat")] == 2 and X[3].nnz == 0
    fixed = prepare_counts(pa.array(texts), np.arange(5).astype(str), vocab=["stock", "markets", "zebra"])
    assert fixed.counts.toarray()[:, :2].tolist() == [[0, 0], [0, 0], [1, 1], [0, 0], [1, 1]]
    with pytest.raises(ValueError, match="column 'text' not found"):
        prepare(tmp_path / "t.parquet", "text", tmp_path / "c2")
