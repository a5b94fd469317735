"""``prepare`` on real-world text: tokenisation (Unicode, apostrophes, stop words), public vocabularies,
input files (CSV encodings and shapes, compressed, directories, ids), and the CLI's clean exits."""
import gzip
import os
import signal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from distdp import cli
from distdp.io import corpus as cio
from distdp.io.atomic import atomic_directory
from distdp.io.prepare import normalise_vocab, prepare_counts, read_text_column, stop_words, tokenize


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
