"""Edges of the private paths (issue 41, part B): the vocabulary's provenance, δ against 1/N, the
data-dependent fields a private ``model.json`` leaves out, and messages that say what is true (an
unexpected error, issue 43, included).

Private fits here pin the noise generator (``fixed_entropy``, tests/lda/private/conftest.py): the report
still says "OS entropy", and the fit is reproducible. The corpus (3000 documents, d = 100, k = 3, ε = 8)
is the one ``test_vocabulary_built_from_private_text_is_reported`` fits.
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from distdp import api
from distdp.lda.private import fit as pf, pipeline as private_pipeline
from distdp.cli import INTERNAL_ERROR_EXIT, main
from distdp.io.corpus import write_corpus
from distdp.io.prepare import (DPVocabOptions, check_delta_for_n_docs, prepare_counts, read_prepare_json, tokenize,
                               vocabulary_provenance)
from distdp.privacy.ledger import BudgetNotMetError, PrivateRunInternalError
from distdp.lda.synthetic import sample_corpus
from distdp.api import ClusterOptions, PrivacyOptions

N, D, K = 3000, 100, 3
WORDS = [f"w{i}" for i in range(D)]


@pytest.fixture(scope="module")
def counts():
    return sample_corpus(N, D, K, np.random.default_rng(9)).counts


def corpus_dir(path, counts, meta=None):
    """A parquet corpus with vocab.txt, and prepare.json holding ``meta`` when given (else none)."""
    extra = {} if meta is None else {"prepare.json": lambda p: p.write_text(json.dumps(meta))}
    return write_corpus(path, counts, 1, WORDS, None, extra)


def no_release(monkeypatch):
    """Make any release fail the test: a refusal must come before the first one."""
    def boom(*args, **kwargs):
        raise AssertionError("a release was made before the refusal")
    monkeypatch.setattr(private_pipeline, "fit_lda_private_scalable", boom)


def fit(corpus, out=None, seed=None, **private):
    """A private fit at ε = 8 in process; ``private``: further PrivacyOptions fields."""
    return api.fit_lda(corpus, K, progress=False, coherence=False, out=out, seed=seed,
                       privacy=PrivacyOptions(epsilon=8, delta=1e-6, **private),
                       cluster=ClusterOptions(backend="local"))


# --------------------------------------------------------------------------------------------------
# 1. A corpus without prepare.json: its vocabulary's provenance is unknown
# --------------------------------------------------------------------------------------------------
def test_corpus_without_prepare_json_is_refused_before_any_release(tmp_path, counts, monkeypatch):
    c = corpus_dir(tmp_path / "c", counts)
    assert vocabulary_provenance(read_prepare_json(c)) == "unknown"
    no_release(monkeypatch)

    def opened(*args, **kwargs):
        raise AssertionError("the corpus was opened before the refusal")
    monkeypatch.setattr(api, "open_corpus", opened)
    with pytest.raises(ValueError) as err:
        fit(str(c), out=tmp_path / "m")
    msg = str(err.value)
    assert str(c) in msg and "no prepare.json" in msg and "Nothing was released" in msg
    assert "--vocab-public" in msg and "--dp-vocab-epsilon" in msg          # the two ways out
    assert not (tmp_path / "m").exists()
    # a prepare.json that does not say where the vocabulary came from is no better
    with pytest.raises(ValueError, match="no prepare.json records"):
        pf.vocabulary_entry(str(corpus_dir(tmp_path / "c2", counts, {"n_docs": N})))


def test_cli_refuses_a_corpus_without_prepare_json(tmp_path, counts, capsys):
    c = corpus_dir(tmp_path / "c", counts)
    code = main(["fit-lda", str(c), "--k", "3", "--out", str(tmp_path / "m"), "--local", "--epsilon", "8",
                 "--delta", "1e-6", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and str(c) in err and "--vocab-public" in err and not (tmp_path / "m").exists()


def test_declared_public_vocabulary_is_private_and_recorded(tmp_path, counts, fixed_entropy):
    c = corpus_dir(tmp_path / "c", counts)
    m = fit(str(c), vocab_public=True, out=tmp_path / "m")
    pv = m.info["privacy"]
    assert pv["private"] and pv["not_private_because"] == []
    assert pv["vocabulary"]["provenance"] == "declared_public" and "declaration" in pv["vocabulary"]["source"]
    saved = json.loads((tmp_path / "m" / "model.json").read_text())
    assert saved["privacy"]["vocabulary"]["provenance"] == "declared_public"


def test_reproducible_fit_without_prepare_json_goes_on_not_private(tmp_path, counts):
    c = corpus_dir(tmp_path / "c", counts)
    m = fit(str(c), seed=0, reproducible=True)
    pv = m.info["privacy"]
    assert not pv["private"] and pv["vocabulary"]["provenance"] == "unknown"
    assert pv["not_private_because"] == ["none: reproducible (seeded) noise", pf.VOCAB_NOT_PRIVATE["unknown"]]


def test_provenance_from_prepare_json(tmp_path, counts):
    public = corpus_dir(tmp_path / "pub", counts, {"vocab_from_private_data": False, "vocab_source": "given: v.txt"})
    built = corpus_dir(tmp_path / "built", counts, {"vocab_from_private_data": True})
    report, release, extra = pf.vocabulary_entry(str(public))
    assert report["provenance"] == "public" and "not_private" not in report and release is None and extra == 0.0
    report, _, _ = pf.vocabulary_entry(str(public / "part-00000.parquet"), vocab_public=True)   # consistent: fine
    assert report["provenance"] == "public"
    report, _, _ = pf.vocabulary_entry(str(built))
    assert report["provenance"] == "built" and report["not_private"] == pf.VOCAB_NOT_PRIVATE["built"]
    with pytest.raises(ValueError, match="built from this corpus's text: it cannot be declared public"):
        pf.vocabulary_entry(str(built), vocab_public=True)
    report, _, _ = pf.vocabulary_entry(counts)                                  # a matrix: the caller's columns
    assert report["provenance"] == "matrix"
    assert pf.vocabulary_entry(counts, vocab_public=True)[0]["provenance"] == "declared_public"
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "prepare.json").write_text("{not json")
    with pytest.raises(ValueError, match="prepare.json is not valid JSON"):
        read_prepare_json(tmp_path / "bad")


# --------------------------------------------------------------------------------------------------
# 2. δ against 1/N
# --------------------------------------------------------------------------------------------------
def test_delta_at_or_above_one_over_n_is_refused_by_the_fit(counts, monkeypatch):
    no_release(monkeypatch)
    for delta in (0.3, 1.0 / N):
        with pytest.raises(ValueError) as err:
            api.fit_lda(counts, K, progress=False, privacy=PrivacyOptions(epsilon=1.0, delta=delta),
                        cluster=ClusterOptions(backend="local"))
        msg = str(err.value)
        assert f"delta = {delta:g}" in msg and f"N = {N}" in msg and f"1/{N}" in msg and f"{1 / N:.3g}" in msg
    check_delta_for_n_docs(0.999 / N, N)                                         # just below: accepted
    # with a DP vocabulary the total δ counts: each part below 1/N, the sum not
    pf.check_delta_documents(0.5 / N, 0.4 / N, N)
    with pytest.raises(ValueError, match="total delta.*DP vocabulary's thresholding"):
        pf.check_delta_documents(0.6 / N, 0.5 / N, N)


def test_cli_refuses_the_issue_example(tmp_path, counts, capsys):
    c = corpus_dir(tmp_path / "c", counts)
    code = main(["fit-lda", str(c), "--k", "3", "--out", str(tmp_path / "m"), "--local", "--epsilon", "2",
                 "--delta", "0.3", "--no-progress", "--vocab-public"])
    err = capsys.readouterr().err
    assert code == 2 and "delta = 0.3" in err and f"N = {N}" in err and f"1/{N}" in err
    assert not (tmp_path / "m").exists()


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    """3000 documents over 12 common words, each with one word of its own."""
    rng = np.random.default_rng(0)
    common = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
              "kilo", "lima"]
    rare = ["".join(rng.choice(list("mnopqrstuvwxyz"), 8)) for _ in range(N)]
    path = tmp_path_factory.mktemp("text") / "t.parquet"
    pq.write_table(pa.table({"body": [" ".join(rng.choice(common, 20)) + " " + r for r in rare]}), path)
    return path


def test_prepare_refuses_dp_vocab_delta_at_or_above_one_over_n(tmp_path, text_file, capsys):
    code = main(["prepare", str(text_file), "--text-column", "body", "--out", str(tmp_path / "c"),
                 "--dp-vocab-epsilon", "1", "--dp-vocab-delta", "0.5"])
    err = capsys.readouterr().err
    assert code == 2 and "--dp-vocab-delta" in err and "delta = 0.5" in err and f"N = {N}" in err
    assert f"1/{N}" in err and not (tmp_path / "c").exists()


def test_dp_vocabulary_corpus_total_delta_and_declaration(tmp_path, text_file, capsys, monkeypatch):
    # δ_vocab = 2e-4 < 1/3000 passes prepare; its thresholding half (1e-4) plus the fit's 2.5e-4 does not.
    out = tmp_path / "c"
    assert main(["prepare", str(text_file), "--text-column", "body", "--out", str(out), "--dp-vocab-epsilon", "1",
                 "--dp-vocab-delta", "2e-4", "--max-words-per-doc", "20", "--max-vocab", "10"]) == 0
    capsys.readouterr()
    assert vocabulary_provenance(read_prepare_json(out)) == "dp"
    no_release(monkeypatch)
    with pytest.raises(ValueError, match=r"total delta: delta = 0.00035 \(the fit's 0.00025 \+ the DP vocabulary"):
        api.fit_lda(str(out), 3, progress=False, privacy=PrivacyOptions(epsilon=1.0, delta=2.5e-4),
                    cluster=ClusterOptions(backend="local"))
    with pytest.raises(ValueError, match="selected from this corpus's text with DP.*cannot be declared public"):
        api.fit_lda(str(out), 3, progress=False, privacy=PrivacyOptions(epsilon=1.0, delta=1e-6, vocab_public=True),
                    cluster=ClusterOptions(backend="local"))


# --------------------------------------------------------------------------------------------------
# 3. No data-dependent timing or resource field in a private model.json
# --------------------------------------------------------------------------------------------------
def _keys(obj, prefix=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield f"{prefix}{k}"
            yield from _keys(v, f"{prefix}{k}.")
    elif isinstance(obj, list):
        for v in obj:
            yield from _keys(v, prefix)


def test_private_model_json_has_no_timings_or_resources(tmp_path, counts, fixed_entropy, capsys):
    c = corpus_dir(tmp_path / "c", counts, {"vocab_from_private_data": False, "vocab_source": "given: v.txt"})
    assert main(["fit-lda", str(c), "--k", "3", "--out", str(tmp_path / "m"), "--local", "--epsilon", "8",
                 "--delta", "1e-6", "--no-progress", "--no-coherence"]) == 0
    out = capsys.readouterr().out
    assert "wall times are not saved in a private model.json" in out and "privacy: private; epsilon = 8" in out
    info = json.loads((tmp_path / "m" / "model.json").read_text())
    assert "timings_s" not in info and "resources" not in info
    keys = list(_keys(info))
    for needle in ("timing", "rss", "read_s", "bytes", "seconds"):
        assert not [k for k in keys if needle in k.lower()], needle
    assert pf.NOT_RECORDED in info["privacy"]["not_released"]
    # the non-private fit keeps them (nothing is released there)
    assert "timings_s" in api.fit_lda(counts, K, progress=False, coherence=False, refine=0,
                                      cluster=ClusterOptions(backend="local")).info


# --------------------------------------------------------------------------------------------------
# 5. Messages
# --------------------------------------------------------------------------------------------------
def test_cli_says_why_a_fit_is_not_private(tmp_path, counts, fixed_entropy, capsys):
    c = corpus_dir(tmp_path / "c", counts, {"vocab_from_private_data": True})
    assert main(["fit-lda", str(c), "--k", "3", "--out", str(tmp_path / "m"), "--local", "--epsilon", "8",
                 "--delta", "1e-6", "--no-progress", "--no-coherence"]) == 0
    out = capsys.readouterr().out
    assert "NOT private (vocabulary built from this corpus without DP)" in out and "(proven)" not in out
    pv = json.loads((tmp_path / "m" / "model.json").read_text())["privacy"]
    assert not pv["private"] and pv["guarantee"] == "proven"
    assert pv["not_private_because"] == [pf.VOCAB_NOT_PRIVATE["built"]]


THAI = "ภาษาไทยเขียนติดกันโดยไม่มีช่องว่างระหว่างคำเลย"                    # one phrase, > 20 characters


def test_unsegmented_warning_gives_no_exact_counts_with_a_dp_vocabulary():
    text = pa.array([f"alpha bravo charlie {THAI}"] * 200)
    with pytest.warns(UserWarning, match="looks unsegmented: of the 800 tokens, 200 in Thai"):
        tokenize(text)
    with pytest.warns(UserWarning, match="looks unsegmented: at least 1% of the tokens") as rec:
        tokenize(text, exact_counts=False)
    assert "800" not in str(rec[0].message) and "200" not in str(rec[0].message)
    # prepare with a DP selection passes it on (ε = 4: σ ≈ 5, τ ≈ 30, the words in all 200 documents pass)
    opts = DPVocabOptions(4.0, 1e-6, 10, seed=0)
    with pytest.warns(UserWarning) as rec:
        prepare_counts(text, np.arange(200).astype(str), dp_vocab=opts)
    msgs = [str(w.message) for w in rec if "unsegmented" in str(w.message)]
    assert msgs and "exact counts left out" in msgs[0] and "800" not in msgs[0]


def test_text_without_words_fails_as_a_dp_selection():
    text = pa.array(["the and of it is"] * 50)                                   # stop words only
    ids = np.arange(50).astype(str)
    with pytest.raises(ValueError, match="the text holds no words"):              # no DP: the exact fact
        prepare_counts(text, ids)
    with pytest.raises(BudgetNotMetError) as err:                                # DP: the selection's outcome
        prepare_counts(text, ids, dp_vocab=DPVocabOptions(1.0, 1e-6, 10))
    msg = str(err.value)
    assert "released 0 word(s)" in msg and "holds no words" not in msg and msg.endswith(BudgetNotMetError.SPENT)
    assert "--text-column" in msg


# --------------------------------------------------------------------------------------------------
# 6. Unexpected errors (issue 43): never a message about the input, and whether releases were made
# --------------------------------------------------------------------------------------------------
def _raise(exc):
    def broken(*args, **kwargs):
        raise exc
    return broken


def test_unexpected_error_before_any_release_says_nothing_was_spent(counts, fixed_entropy, monkeypatch):
    monkeypatch.setattr(private_pipeline, "private_scan", _raise(TypeError("unsupported operand type(s)")))
    with pytest.raises(PrivateRunInternalError, match=r"internal error.*TypeError: unsupported operand.*"
                       r"No noisy release of the data had been made: nothing was spent") as err:
        fit(counts, vocab_public=True)
    assert err.value.releases == 0


def test_documented_errors_pass_unchanged(counts, fixed_entropy, monkeypatch):
    # A budget the noise cannot support stays a BudgetNotMetError (exit 2, its own message), and a check of
    # the parameters against the data before the first release stays a ValueError.
    monkeypatch.setattr(private_pipeline, "private_scan", _raise(BudgetNotMetError("the privacy budget cannot")))
    with pytest.raises(BudgetNotMetError):
        fit(counts, vocab_public=True)
    monkeypatch.setattr(private_pipeline, "private_scan", _raise(ValueError("too few documents")))
    with pytest.raises(ValueError, match="^too few documents$"):
        fit(counts, vocab_public=True)


def test_cli_reports_an_internal_error_with_its_traceback_and_exit_3(tmp_path, counts, fixed_entropy, capsys,
                                                                     monkeypatch):
    monkeypatch.setattr(private_pipeline, "unmix_private", _raise(IndexError("index 7 is out of bounds")))
    c = corpus_dir(tmp_path / "c", counts, {"vocab_from_private_data": False, "vocab_source": "given: v.txt"})
    code = main(["fit-lda", str(c), "--k", "3", "--out", str(tmp_path / "m"), "--local", "--epsilon", "8",
                 "--delta", "1e-6", "--no-progress", "--no-coherence"])
    err = capsys.readouterr().err
    assert code == INTERNAL_ERROR_EXIT == 3
    assert "Traceback" in err and "IndexError: index 7 is out of bounds" in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("distdp fit-lda: internal error in the private fit") and "error:" not in last
    assert "noisy releases of the data had been made: count this run against the privacy budget" in last
    assert not (tmp_path / "m").exists()
