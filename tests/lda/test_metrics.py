"""C_V coherence (against gensim's CoherenceModel), topic diversity, and their place in fits and the CLI."""
import json
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import distdp
from distdp import api
from distdp.lda import metrics, refine
from distdp.cli import main
from distdp.io.corpus import write_corpus

gensim_cm = pytest.importorskip("gensim.models.coherencemodel")
from gensim.corpora import Dictionary  # noqa: E402
from distdp.api import ClusterOptions

D = 40
VOCAB = [f"w{i:02d}" for i in range(D)]
NEVER_TOGETHER = (30, 31)   # each occurs, never in the same document
TOPICS = np.array([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
                   [10, 11, 12, 13, 14, 15, 30, 31, 16, 17],
                   [20, 21, 30, 2, 33, 34, 35, 36, 37, 31],
                   [38, 39, 0, 10, 20, 25, 26, 27, 28, 29],
                   [30, 31, 19, 9, 29, 39, 18, 8, 28, 38]])


def make_texts(n_docs=300, max_len=110, seed=3):
    """Token lists from a seeded generator: 4 word groups, no document over ``max_len`` tokens, one empty."""
    rng = np.random.default_rng(seed)
    texts = []
    for n in range(n_docs):
        length = int(rng.integers(0, max_len + 1))
        probs = np.ones(D)
        g = rng.integers(0, 4)
        probs[10 * g:10 * (g + 1)] += 8
        probs[list(NEVER_TOGETHER)] = 0
        doc = list(rng.choice(D, size=length, p=probs / probs.sum()))
        if doc and rng.random() < 0.3:
            doc[int(rng.integers(len(doc)))] = NEVER_TOGETHER[n % 2]
        texts.append([VOCAB[i] for i in doc])
    texts.append([])
    return texts


def to_counts(texts):
    rows = [i for i, t in enumerate(texts) for _ in t]
    cols = [int(w[1:]) for t in texts for w in t]
    return sp.csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(len(texts), D))


def gensim_c_v(topics_ids, texts, vocab=VOCAB):
    topics = [[vocab[i] for i in t] for t in topics_ids]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = gensim_cm.CoherenceModel(topics=topics, texts=texts, dictionary=Dictionary(texts), coherence="c_v",
                                      topn=len(topics[0]), processes=1)
        return np.array(cm.get_coherence_per_topic())


@pytest.fixture(scope="module")
def texts():
    return make_texts()


def test_c_v_agrees_with_gensim_on_documents_of_at_most_110_tokens(texts):
    assert max(len(t) for t in texts) <= metrics.GENSIM_CV_WINDOW
    X = to_counts(texts)
    words = np.unique(TOPICS)
    stats = refine.cooccurrence(X, words)
    a, b = np.searchsorted(words, NEVER_TOGETHER)
    assert stats.co[a, b] == 0 and stats.df[a] > 0 and stats.df[b] > 0
    ours = metrics.c_v(TOPICS, stats, words)
    ref = gensim_c_v(TOPICS, texts)
    assert ours.shape == (len(TOPICS),)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-6)   # measured: 0 to 1e-16
    assert ours.mean() == pytest.approx(ref.mean(), abs=1e-6)
    # summed shard partials give the same value as the whole corpus
    parts = [refine.cooccurrence(X[i:i + 70], words) for i in range(0, X.shape[0], 70)]
    np.testing.assert_allclose(metrics.c_v(TOPICS, sum(parts[1:], parts[0]), words), ours, rtol=0, atol=1e-12)


def gensim_windows(texts, w=metrics.GENSIM_CV_WINDOW):
    """The word sets of gensim's windows (``WordOccurrenceAccumulator._slide_window``).

    A text of at most ``w`` tokens is one window; over a longer one gensim
    keeps a set of words, dropping the token that leaves the window and
    adding the one that enters, so a word leaving is dropped even when it
    still occurs inside the window.
    """
    rows = []
    for t in texts:
        ids = [int(x[1:]) for x in t]
        cur = set(ids[:w])
        rows.append(set(cur))
        for s in range(1, len(ids) - w + 1):
            cur.discard(ids[s - 1])
            cur.add(ids[s + w - 1])
            rows.append(set(cur))
    return sp.csr_matrix((np.ones(sum(map(len, rows))), ([r for r, st in enumerate(rows) for _ in st],
                                                         [i for st in rows for i in sorted(st)])),
                         shape=(len(rows), D))


def test_c_v_on_longer_documents_is_gensims_with_each_window_a_document():
    """Our window is the document: on texts over 110 tokens gensim counts its 110-token windows instead."""
    texts = make_texts(n_docs=40, max_len=300, seed=5)
    assert max(len(t) for t in texts) > metrics.GENSIM_CV_WINDOW
    words = np.unique(TOPICS)
    ref = gensim_c_v(TOPICS, texts)
    on_docs = metrics.c_v(TOPICS, refine.cooccurrence(to_counts(texts), words), words)
    assert np.abs(on_docs - ref).max() > 0.01
    on_windows = metrics.c_v(TOPICS, refine.cooccurrence(gensim_windows(texts), words), words)
    np.testing.assert_allclose(on_windows, ref, rtol=0, atol=1e-6)


def test_c_v_hand_computed_and_word_absent_from_corpus():
    # 4 documents over words 0..2: {0,1}, {0,1}, {0}, {2}
    X = sp.csr_matrix(np.array([[1, 1, 0], [2, 1, 0], [1, 0, 0], [0, 0, 3]], dtype=float))
    words = np.array([0, 1, 2])
    stats = refine.cooccurrence(X, words)
    eps = metrics.EPSILON
    p = np.array([3, 2, 1]) / 4
    pj = np.array([[3, 2, 0], [2, 2, 0], [0, 0, 1]]) / 4
    npmi = np.log((pj + eps) / np.outer(p, p)) / -np.log(pj + eps)
    np.testing.assert_allclose(metrics.npmi_matrix(stats), npmi, rtol=1e-12)
    assert -1 < npmi[0, 2] < -0.9   # never together: gensim's ε keeps it a little above −1
    v_set = npmi.sum(axis=0)
    cos = npmi @ v_set / (np.linalg.norm(npmi, axis=1) * np.linalg.norm(v_set))
    assert metrics.c_v(np.array([[0, 1, 2]]), stats, words)[0] == pytest.approx(cos.mean(), abs=1e-12)
    # a top word in no document: its pairs score −1 (gensim divides by zero there), the value stays finite
    X0 = sp.hstack([X, sp.csr_matrix((4, 1))]).tocsr()
    words0 = np.array([0, 1, 3])
    got = metrics.c_v(np.array([[0, 1, 3]]), refine.cooccurrence(X0, words0), words0)
    assert np.isfinite(got).all() and -1 <= got[0] <= 1


def test_topic_diversity_hand_computed():
    tw = np.array([[0.5, 0.3, 0.1, 0.1, 0.0, 0.0],
                   [0.1, 0.4, 0.3, 0.0, 0.2, 0.0],
                   [0.6, 0.2, 0.0, 0.1, 0.0, 0.1]])
    # top 2: {0,1}, {1,2}, {0,1} → 3 distinct of 6
    assert metrics.topic_diversity(tw, top_n=2) == pytest.approx(3 / 6)
    # top 3: {0,1,2}, {1,2,4}, {0,1,3} → {0,1,2,3,4}: 5 of 9
    assert metrics.topic_diversity(tw, top_n=3) == pytest.approx(5 / 9)
    assert metrics.topic_diversity(np.eye(4)[:, :4] + 0.1, top_n=1) == 1.0
    assert metrics.topic_diversity(np.tile(tw[0], (4, 1)), top_n=2) == pytest.approx(1 / 4)
    # top 25 with 6 words: every topic's top words are the vocabulary → 1/k
    assert metrics.topic_diversity(tw) == pytest.approx(1 / 3)
    rng = np.random.default_rng(0)
    big = rng.random((10, 1000))
    top = np.argsort(-big, axis=1)[:, :25]
    assert metrics.topic_diversity(big) == pytest.approx(len(set(top.ravel())) / 250)
    with pytest.raises(ValueError, match="top_n"):
        metrics.topic_diversity(tw, top_n=0)


def test_npmi_unchanged(texts):
    """refine.npmi is still Bouma's NPMI over document probabilities, a pair never together −1."""
    X = to_counts(texts)
    words = np.unique(TOPICS)
    got = refine.npmi(TOPICS, refine.cooccurrence(X, words), words)
    docs = [set(int(w[1:]) for w in t) for t in texts]
    N = len(docs)
    expect = []
    for t in TOPICS:
        vals = []
        for i in range(len(t)):
            for j in range(i + 1, len(t)):
                pi = sum(t[i] in d for d in docs) / N
                pj = sum(t[j] in d for d in docs) / N
                pij = sum(t[i] in d and t[j] in d for d in docs) / N
                vals.append(-1.0 if pij == 0 else np.log(pij / (pi * pj)) / -np.log(pij))
        expect.append(np.mean(vals))
    np.testing.assert_allclose(got, expect, rtol=1e-12)


def test_fit_records_c_v_and_diversity_and_sharding_changes_nothing(small, tmp_path):
    m = distdp.fit_lda(small.counts, 4, seed=0, progress=False, cluster=ClusterOptions(backend="local"))
    coh = m.info["coherence"]
    assert coh["measure"] == "NPMI" and coh["top_n"] == metrics.COHERENCE_TOP_N and coh["corpus"] == "training corpus"
    assert len(coh["per_topic"]) == 4 and coh["mean"] == pytest.approx(np.mean(coh["per_topic"]))
    assert coh["c_v"]["window"] == "document" and len(coh["c_v"]["per_topic"]) == 4
    assert coh["c_v"]["mean"] == pytest.approx(np.mean(coh["c_v"]["per_topic"]))
    assert 0 < coh["c_v"]["mean"] <= 1
    assert coh["diversity"] == pytest.approx(metrics.topic_diversity(m.topic_word, 25))
    assert coh["diversity_top_n"] == 25 and 1 / 4 <= coh["diversity"] <= 1
    m.save(tmp_path / "m")
    saved = json.loads((tmp_path / "m" / "model.json").read_text())["coherence"]
    assert saved["c_v"]["per_topic"] == pytest.approx(list(coh["c_v"]["per_topic"]))

    one = api.coherence(m, small.counts, cluster=ClusterOptions(workers=1, backend="local"))
    three = api.coherence(m, small.counts, cluster=ClusterOptions(workers=3, backend="local"))
    assert set(one) >= {"mean", "per_topic", "top_n", "c_v", "diversity"}
    np.testing.assert_allclose(three["per_topic"], one["per_topic"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(three["c_v"]["per_topic"], one["c_v"]["per_topic"], rtol=0, atol=1e-12)
    assert three["diversity"] == one["diversity"] == coh["diversity"]
    np.testing.assert_allclose(one["c_v"]["per_topic"], coh["c_v"]["per_topic"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(one["per_topic"], coh["per_topic"], rtol=0, atol=1e-12)

    # and it is gensim's c_v on the same documents (all ≤ 110 tokens) and top words
    X = sp.csr_matrix(small.counts)
    vocab = [f"v{i}" for i in range(X.shape[1])]
    texts = [[vocab[w] for w, c in zip(X[r].indices, X[r].data) for _ in range(int(c))] for r in range(X.shape[0])]
    assert max(len(t) for t in texts) <= metrics.GENSIM_CV_WINDOW
    top = np.argsort(-m.topic_word, axis=1, kind="stable")[:, :metrics.COHERENCE_TOP_N]
    np.testing.assert_allclose(three["c_v"]["per_topic"], gensim_c_v(top, texts, vocab), rtol=0, atol=1e-6)


def test_cli_coherence_prints_npmi_c_v_and_diversity(tmp_path, small, capsys):
    write_corpus(tmp_path / "c", small.counts, 2, [f"w{i}" for i in range(60)], [f"d{i}" for i in range(400)])
    assert main(["fit-lda", str(tmp_path / "c"), "--k", "4", "--out", str(tmp_path / "m"), "--local", "--seed", "0",
                 "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["coherence", str(tmp_path / "m"), str(tmp_path / "c"), "--local", "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "mean NPMI" in out and "mean C_V" in out and "topic diversity (top 25 words)" in out
    assert out.count("C_V=") == 4
