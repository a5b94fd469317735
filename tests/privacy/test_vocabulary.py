"""DP vocabulary selection: cap locality and sensitivity, threshold δ, utility, noise law, prepare integration.

Every random quantity uses a fixed seed; each statistical tolerance is derived
where it is used.
"""
import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from distdp import cli
from distdp.io.prepare import vocabulary_privacy
from distdp.privacy import accounting
from distdp.privacy.ledger import Release
from distdp.privacy.vocabulary import (capped_document_frequency, capped_pairs, dp_select_vocabulary,
                                       exclusive_release_probability, selection_threshold, vocabulary_sensitivity)

WORDS = [f"w{i:02d}" for i in range(16)]


def flatten(docs):
    """(doc_of, word_of) token arrays of a list of documents (lists of word ids, repeats allowed)."""
    doc_of = np.repeat(np.arange(len(docs)), [len(d) for d in docs]).astype(np.int64)
    word_of = np.array([w for d in docs for w in d], dtype=np.int64)
    return doc_of, word_of


def kept_sets(docs, words, l0, salt):
    """{document: set of kept word strings}."""
    d, w = capped_pairs(*flatten(docs), words, l0, salt)
    out = {j: set() for j in range(len(docs))}
    for j, k in zip(d.tolist(), w.tolist()):
        out[j].add(words[k])
    return out


doc_st = st.lists(st.integers(0, len(WORDS) - 1), max_size=25)


@settings(max_examples=150, deadline=None)
@given(docs=st.lists(doc_st, min_size=1, max_size=8), new_doc=doc_st, data=st.data(),
       l0=st.integers(1, 8), salt=st.integers(0, 2 ** 63 - 1), disjoint=st.booleans())
def test_capped_df_sensitivity_replace_one(docs, new_doc, data, l0, salt, disjoint):
    """Replace one document: ‖Δdf‖₂ = √|K(x) Δ K(x′)| ≤ √(2·L0), ‖Δdf‖∞ ≤ 1, other kept sets unchanged.

    ``disjoint`` makes the replacement adversarial: x′ uses only words x does not (the bound is attained
    when both keep L0 words). The neighbour's word list holds only its own words, shuffled (word ids
    come from dictionary encoding, which depends on the whole corpus): the cap must not depend on them.
    """
    j = data.draw(st.integers(0, len(docs) - 1))
    if disjoint:
        new_doc = [w for w in new_doc if w not in set(docs[j])]
    docs2 = [list(d) for d in docs]
    docs2[j] = new_doc
    # D′'s word list holds only the words present in D′, in a shuffled order (as dictionary encoding gives)
    present = np.random.default_rng(salt % 1000).permutation(sorted({w for d in docs2 for w in d}))
    words2 = [WORDS[w] for w in present]
    id2 = {int(w): i for i, w in enumerate(present)}
    docs2_ids = [[id2[w] for w in d] for d in docs2]

    df = capped_document_frequency(*flatten(docs), WORDS, l0, salt)
    df2 = np.zeros_like(df)
    df2[present.astype(int)] = capped_document_frequency(*flatten(docs2_ids), words2, l0, salt)  # WORDS order
    k1, k2 = kept_sets(docs, WORDS, l0, salt), kept_sets(docs2_ids, words2, l0, salt)
    for i in range(len(docs)):
        assert len(k1[i]) == min(l0, len(set(docs[i])))
        assert k1[i] <= {WORDS[w] for w in docs[i]}
        if i != j:
            assert k1[i] == k2[i]                                       # locality of the cap
    change = df2 - df
    assert np.abs(change).max(initial=0) <= 1
    assert np.linalg.norm(change) == pytest.approx(math.sqrt(len(k1[j] ^ k2[j])), abs=1e-12)
    assert np.linalg.norm(change) <= vocabulary_sensitivity(l0) + 1e-12


def test_sensitivity_bound_is_attained():
    """x, x′ with > L0 words each, none in common, all also in other documents: ‖Δdf‖₂ = √(2L0)."""
    l0 = 5
    others = [list(range(16))] * 3
    d1 = others + [list(range(8))]
    d2 = others + [list(range(8, 16))]
    change = (capped_document_frequency(*flatten(d2), WORDS, l0, 11)
              - capped_document_frequency(*flatten(d1), WORDS, l0, 11))
    assert np.linalg.norm(change) == pytest.approx(math.sqrt(2 * l0))


def test_threshold_formula():
    """τ makes the release probability of L0 df-1 words exactly δ_thr/(1 + δ_thr) (so p/(1−p) = δ_thr)."""
    for sigma, dthr, l0 in [(3.0, 0.05, 3), (40.0, 5e-7, 100), (1.0, 1e-9, 1)]:
        tau = selection_threshold(sigma, dthr, l0)
        p = exclusive_release_probability(sigma, tau, l0)
        assert p == pytest.approx(dthr / (1 + dthr), rel=1e-9)
        assert tau > 1


def test_single_document_words_released_at_most_delta_threshold():
    """Words only one document holds are released with probability δ_thr/(1+δ_thr) ≤ δ_thr.

    δ = 0.1 split half/half gives δ_thr = 0.05 (measurable). The special document holds L0 = 3 words
    nobody else has, so one of them is released with probability exactly p = 0.05/1.05 = 0.0476.
    Over n = 3000 seeded runs the count is Binomial(n, p) (mean 143, sd 11.7): a two-sided exact
    binomial test at level 1e-4, and the empirical rate must stay below δ_thr + 4 sd/n.
    """
    l0, n = 3, 3000
    docs = [[0, 1, 2, 3]] * 50 + [[10, 11, 12]]
    doc_of, word_of = flatten(docs)
    hits = 0
    for seed in range(n):
        sel = dp_select_vocabulary(doc_of, word_of, WORDS, epsilon=1.0, delta=0.1, max_words_per_doc=l0,
                                   rng=np.random.default_rng(seed), accountant="analytic")
        hits += any(w in sel.words for w in ("w10", "w11", "w12"))
    p = 0.05 / 1.05
    assert stats.binomtest(hits, n, p).pvalue > 1e-4
    assert hits / n <= 0.05 + 4 * math.sqrt(p * (1 - p) / n)


def test_frequent_words_always_selected_and_ranked():
    """df = 500 words are selected on every seed; df-1 words never are; max_vocab keeps the noisy top.

    ε = 1, δ = 1e-6, L0 = 10: σ ≈ 4.37·√20 = 19.5 and τ ≈ 1 + 19.5·5.7 ≈ 112, so a frequent word
    misses with probability Φ̄((500 − τ)/σ) < 1e-80, and a df-1 word passes with at most 5e-7.
    """
    rng = np.random.default_rng(5)
    docs = [[0, 1, 2, 3, 4] + list(rng.choice(np.arange(5, 16), 5, replace=False)) for _ in range(500)]
    docs += [[5 + (i % 11)] for i in range(3)]
    doc_of, word_of = flatten(docs)
    for seed in range(20):
        sel = dp_select_vocabulary(doc_of, word_of, WORDS, epsilon=1.0, delta=1e-6, max_words_per_doc=10,
                                   rng=np.random.default_rng(seed), accountant="analytic")
        assert set(WORDS[:5]) <= set(sel.words)
        assert np.all(np.diff(sel.noisy_df) <= 0)
        assert not sel.private
    top = dp_select_vocabulary(doc_of, word_of, WORDS, epsilon=1.0, delta=1e-6, max_words_per_doc=10, max_vocab=3,
                               rng=np.random.default_rng(0))
    assert len(top.words) == 3 and set(top.words) <= set(WORDS[:5]) and top.n_candidates_released >= 5


def test_noise_is_gaussian_with_the_recorded_scale():
    """noisy df − df ~ N(0, σ²) (KS test on 400 words), and the ledger event certifies exactly (ε, δ_G).

    2000 documents of 40 distinct words (≤ L0, so nothing is capped), each word in 200 documents;
    τ ≈ 60 and σ ≈ 14, so every word is released (200 is 10σ above τ). KS level 1e-3 at a fixed seed.
    """
    n_words, l0 = 400, 40
    words = [f"v{i:03d}" for i in range(n_words)]
    docs = [[(j + 10 * i) % n_words for i in range(40)] for j in range(2000)]
    doc_of, word_of = flatten(docs)
    df = np.bincount(word_of, minlength=n_words)
    sel = dp_select_vocabulary(doc_of, word_of, words, epsilon=2.0, delta=1e-3, max_words_per_doc=l0,
                               rng=np.random.default_rng(123))
    assert len(sel.words) == n_words
    noise = sel.noisy_df - df[[words.index(w) for w in sel.words]]
    assert stats.kstest(noise / sel.sigma, "norm").pvalue > 1e-3
    rel = sel.release
    assert rel.sensitivity == pytest.approx(math.sqrt(2 * l0)) and rel.noise_scale == sel.sigma
    assert rel.dp_event.noise_multiplier * rel.sensitivity == pytest.approx(sel.sigma)
    eps = accounting.epsilon(rel.dp_event, sel.delta_gaussian)
    assert 0.99 * 2.0 <= eps <= 2.0 * (1 + 1e-9)
    assert sel.delta_total == pytest.approx(sel.delta_gaussian + sel.delta_threshold) and sel.delta == 1e-3
    assert Release.from_dict(json.loads(json.dumps(rel.to_dict()))) == rel


@pytest.mark.parametrize("kwargs, match", [
    (dict(epsilon=0.0), "epsilon"), (dict(epsilon=-1.0), "epsilon"), (dict(delta=0.0), "delta"),
    (dict(delta=1.0), "delta"), (dict(max_words_per_doc=0), "max_words_per_doc"),
    (dict(max_words_per_doc=2.5), "max_words_per_doc"), (dict(threshold_fraction=1.0), "threshold_fraction"),
    (dict(max_vocab=0), "max_vocab")])
def test_invalid_parameters(kwargs, match):
    base = dict(epsilon=1.0, delta=1e-6, max_words_per_doc=5)
    with pytest.raises(ValueError, match=match):
        dp_select_vocabulary(*flatten([[0, 1]]), WORDS, **{**base, **kwargs}, rng=np.random.default_rng(0))


def test_invalid_tokens():
    with pytest.raises(ValueError, match="only 16 words"):
        capped_document_frequency(np.array([0]), np.array([16]), WORDS, 3, 0)
    with pytest.raises(ValueError, match="distinct"):
        capped_document_frequency(np.array([0]), np.array([0]), ["a", "a"], 3, 0)


# --------------------------------------------------------------------------- prepare

@pytest.fixture()
def text_file(tmp_path):
    """3000 documents over 12 common words, each with one word of its own (a rare, revealing word)."""
    rng = np.random.default_rng(0)
    common = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
              "kilo", "lima"]
    rare = ["".join(rng.choice(list("mnopqrstuvwxyz"), 8)) for _ in range(3000)]
    texts = [" ".join(rng.choice(common, 20)) + " " + r for r in rare]
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"body": texts}), path)
    return path, common


def run(argv, capsys):
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out + out.err


def test_prepare_cli_dp_vocabulary(tmp_path, text_file, capsys):
    path, common = text_file
    out = tmp_path / "c"
    code, msg = run(["prepare", str(path), "--text-column", "body", "--out", str(out), "--dp-vocab-epsilon", "1",
                     "--dp-vocab-delta", "1e-6", "--max-words-per-doc", "20", "--max-vocab", "10"], capsys)
    assert code == 0 and "DP" in msg
    meta = json.loads((out / "prepare.json").read_text())
    assert meta["vocab_from_private_data"] is True and meta["vocab_dp"] is True
    vp = meta["vocabulary_privacy"]
    for key in ("mechanism", "epsilon", "delta", "delta_threshold", "max_words_per_doc", "private", "ledger"):
        assert key in vp
    assert vp["private"] is True and vp["epsilon"] == 1.0 and vp["delta"] == 1e-6 and vp["max_words_per_doc"] == 20
    assert len(vp["ledger"]) == 1 and Release.from_dict(vp["ledger"][0]).stage == "vocabulary"
    vocab = (out / "vocab.txt").read_text().split()
    assert len(vocab) == 10 and set(vocab) <= set(common)          # no document's own word is released
    assert vocabulary_privacy(out) == vp and vocabulary_privacy(out / "part-00000.parquet") == vp


def test_prepare_cli_reproducible_and_other_vocabularies(tmp_path, text_file, capsys):
    path, common = text_file
    dp = ["--dp-vocab-epsilon", "1", "--dp-vocab-delta", "1e-6", "--seed", "3", "--reproducible"]
    for name in ("r1", "r2"):
        assert run(["prepare", str(path), "--text-column", "body", "--out", str(tmp_path / name), *dp], capsys)[0] == 0
    assert (tmp_path / "r1" / "vocab.txt").read_text() == (tmp_path / "r2" / "vocab.txt").read_text()
    vp = vocabulary_privacy(tmp_path / "r1")
    assert vp["private"] is False and "NOT private" in vp["noise_source"]

    assert run(["prepare", str(path), "--text-column", "body", "--out", str(tmp_path / "built")], capsys)[0] == 0
    assert vocabulary_privacy(tmp_path / "built") == {"vocab_from_private_data": True, "private": False}

    (tmp_path / "public.txt").write_text("\n".join(common) + "\n")
    assert run(["prepare", str(path), "--text-column", "body", "--out", str(tmp_path / "pub"),
                "--vocab", str(tmp_path / "public.txt")], capsys)[0] == 0
    assert json.loads((tmp_path / "pub" / "prepare.json").read_text())["vocab_from_private_data"] is False
    assert vocabulary_privacy(tmp_path / "pub") is None
    assert vocabulary_privacy(tmp_path) is None                      # no prepare.json


@pytest.mark.parametrize("extra, match", [
    (["--vocab", "v.txt", "--dp-vocab-epsilon", "1", "--dp-vocab-delta", "1e-6"], "mutually exclusive"),
    (["--dp-vocab-epsilon", "0", "--dp-vocab-delta", "1e-6"], "dp-vocab-epsilon"),
    (["--dp-vocab-epsilon", "1", "--dp-vocab-delta", "1"], "dp-vocab-delta"),
    (["--dp-vocab-epsilon", "1", "--dp-vocab-delta", "0"], "dp-vocab-delta"),
    (["--dp-vocab-epsilon", "1"], "dp-vocab-delta is required"),
    (["--dp-vocab-epsilon", "1", "--dp-vocab-delta", "1e-6", "--max-words-per-doc", "0"], "max-words-per-doc"),
    (["--dp-vocab-epsilon", "1", "--dp-vocab-delta", "1e-6", "--seed", "1"], "reproducible"),
    (["--max-words-per-doc", "5"], "add --dp-vocab-epsilon")])
def test_prepare_cli_rejects_bad_options(tmp_path, text_file, capsys, extra, match):
    path, _ = text_file
    (tmp_path / "v.txt").write_text("alpha\nbravo\n")
    extra = [str(tmp_path / "v.txt") if a == "v.txt" else a for a in extra]
    code, msg = run(["prepare", str(path), "--text-column", "body", "--out", str(tmp_path / "c"), *extra], capsys)
    assert code == 2 and match in msg
    assert not (tmp_path / "c").exists()


def test_prepare_too_small_for_the_budget(tmp_path, capsys):
    pq.write_table(pa.table({"body": ["alpha bravo charlie"] * 5}), tmp_path / "s.parquet")
    code, msg = run(["prepare", str(tmp_path / "s.parquet"), "--text-column", "body", "--out", str(tmp_path / "c"),
                     "--dp-vocab-epsilon", "0.5", "--dp-vocab-delta", "1e-8"], capsys)
    assert code == 2 and "too small for this budget" in msg and "another run on the same data composes" in msg
