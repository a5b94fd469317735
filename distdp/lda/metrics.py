"""Topic-quality metrics comparable with the literature: C_V coherence and topic diversity. Pure numpy.

Both work from statistics small enough to gather in one process: C_V from the
document co-occurrence counts of the topics' top words
(:class:`distdp.lda.refine.CooccurrencePartial`, summed over the shards: the one
pass that also gives NPMI, :func:`distdp.lda.refine.npmi`), topic diversity from
the topic-word matrix alone.
"""
from __future__ import annotations

import numpy as np

from distdp.lda import moments, refine
from distdp.lda.refine import CooccurrencePartial
from distdp.lda.shard import Shard

#: gensim's ε in its direct confirmation measures (``gensim.topic_coherence.direct_confirmation_measure.EPSILON``).
EPSILON = 1e-12
#: gensim's sliding window for ``coherence='c_v'`` (tokens); a document of at most this many tokens is one window.
GENSIM_CV_WINDOW = 110
#: Top words per topic of topic diversity (Dieng, Ruiz & Blei 2020).
DIVERSITY_TOP_N = 25
#: Top words per topic of NPMI and C_V coherence.
COHERENCE_TOP_N = 10


def npmi_matrix(stats: CooccurrencePartial, epsilon: float = EPSILON) -> np.ndarray:
    """Pairwise NPMI of a word list as gensim computes it for C_V (with ε), self-pairs included.

    ``NPMI(i, j) = log((P(i,j) + ε) / (P(i) P(j))) / (−log(P(i,j) + ε))`` with
    ``P`` the fraction of documents containing the words (gensim's
    ``log_ratio_measure(..., normalize=True)``): a pair never seen together
    gets ``log(ε/(P(i)P(j)))/(−log ε)``, a little above −1, not −1 (unlike
    :func:`distdp.lda.refine.npmi`). On the diagonal ``P(i,i) = P(i)``.

    Pairs with a word in no document (``P(i) = 0``), where gensim divides by
    zero (its C_V of the topic is then NaN), are set to −1 here: the word
    co-occurs with nothing.

    Parameters
    ----------
    stats : CooccurrencePartial
        Document counts of the words and of their pairs.
    epsilon : float
        gensim's smoothing of the joint probability.

    Returns
    -------
    ndarray (m, m)
        Symmetric.
    """
    N = float(stats.n_docs)
    p = np.asarray(stats.df, dtype=np.float64) / N
    pij = np.asarray(stats.co, dtype=np.float64) / N
    denom = p[:, None] * p[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        val = np.log((pij + epsilon) / denom) / -np.log(pij + epsilon)
    return np.where(denom > 0, val, -1.0)


def c_v(top: np.ndarray, stats: CooccurrencePartial, words: np.ndarray) -> np.ndarray:
    """C_V coherence of each topic's top words, gensim's ``coherence='c_v'`` with documents as windows.

    C_V is the measure of Röder, Both & Hinneburg (2015), "Exploring the space
    of topic coherence measures" (WSDM '15), that correlated best with human
    ratings there. Its pipeline, as ``gensim.models.CoherenceModel`` implements
    it (gensim 4.x):

    * segmentation ``S_one^set``: each top word ``w`` paired with the set ``W``
      of all of the topic's top words (``w`` included);
    * probabilities from boolean co-occurrence in windows (here: documents);
    * confirmation: indirect cosine ``cos(v(w), v(W))`` of NPMI context
      vectors over the topic's top words, ``v(w)_j = NPMI(w, w_j)^γ`` and
      ``v(W)_j = Σ_{w_i ∈ W} NPMI(w_i, w_j)^γ``, ``γ = 1``, NPMI with ε =
      1e-12 as :func:`npmi_matrix` (gensim's ``_pair_npmi``);
    * aggregation: arithmetic mean over the topic's ``n`` segments.

    Windows: gensim slides a 110-token window over each text, each window
    counting as one "document" of the probabilities, except that a text of at
    most 110 tokens (``utils.iter_windows(..., ignore_below_size=False)``) is
    one window, the whole text. Our corpora are bags of words, so the window
    here is always the whole document: for corpora whose documents all have at
    most 110 tokens the two are the same statistic (and the same numbers, to
    rounding); on longer documents this counts a pair that co-occurs anywhere
    in the document, where gensim counts the 110-token windows containing
    both (and all ``L − 109`` windows of a text of ``L`` tokens in ``N``), so
    values differ. (gensim 4.4 keeps each window's word set by removing the
    token that leaves and adding the one that enters, so a word is dropped
    from the window even when it occurs again inside it.) Empty documents
    count in ``N`` in both.

    Parameters
    ----------
    top : ndarray (k, n) of word ids
        Each topic's top words (distinct within a topic).
    stats : CooccurrencePartial
        Document counts of ``words`` and their pairs over the whole corpus.
    words : ndarray (m,)
        The sorted union of ``top``; ``stats`` is indexed like it.

    Returns
    -------
    ndarray (k,)
        C_V per topic, in [−1, 1]; NaN for a topic one of whose context
        vectors vanishes (gensim's 0/0 there).
    """
    top = np.asarray(top)
    pos = np.searchsorted(words, top)                          # (k, n) → index into words
    G = npmi_matrix(stats)[pos[:, :, None], pos[:, None, :]]   # (k, n, n): v(w_i) is row i
    v_set = G.sum(axis=1)                                      # (k, n): v(W)
    dots = np.einsum("kij,kj->ki", G, v_set)
    norms = np.linalg.norm(G, axis=2) * np.linalg.norm(v_set, axis=1)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        cos = dots / norms
    return cos.mean(axis=1)


def topic_diversity(topic_word: np.ndarray, top_n: int = DIVERSITY_TOP_N) -> float:
    """Fraction of distinct words among all topics' ``top_n`` words (Dieng, Ruiz & Blei 2020).

    Topic diversity of "Topic modeling in embedding spaces" (TACL 8, 2020),
    §6: 1 when no two topics share a top word, ``1/k`` when all topics have
    the same top words. ``top_n`` is 25 there; with fewer words than that in
    the vocabulary every topic's top words are the whole vocabulary.

    Parameters
    ----------
    topic_word : ndarray (k, d)
        Topic-word weights (rows need not be normalised: only the order counts;
        ties go to the smaller word id).
    top_n : int
        Top words per topic.

    Returns
    -------
    float
        In ``[1/k, 1]``.
    """
    topic_word = np.asarray(topic_word)
    if top_n < 1:
        raise ValueError(f"top_n must be ≥ 1, got {top_n}")
    n = min(top_n, topic_word.shape[1])
    top = np.argsort(-topic_word, axis=1, kind="stable")[:, :n]
    return float(np.unique(top).size / top.size)


def coherence_on(backend, topic_word: np.ndarray, top_n: int = COHERENCE_TOP_N) -> dict:
    """NPMI and C_V of each topic's ``top_n`` words from one pass of ``backend``'s shards, and topic diversity.

    The shards count the documents containing each top word and each pair
    (:meth:`distdp.lda.shard.Shard.cooccurrence`); only those counts are summed
    here, and both measures come from them (:func:`distdp.lda.refine.npmi`,
    :func:`distdp.lda.metrics.c_v`, the document as C_V's window). Diversity
    needs no pass (:func:`distdp.lda.metrics.topic_diversity`, top 25 words).
    """
    top = np.argsort(-topic_word, axis=1, kind="stable")[:, :top_n]
    words = np.unique(top)
    stats = moments.sum_partials(backend.call(Shard.cooccurrence, words))
    npmi = refine.npmi(top, stats, words)
    cv = c_v(top, stats, words)
    return {"mean": float(npmi.mean()), "per_topic": npmi, "top_n": top_n,
            "c_v": {"mean": float(cv.mean()), "per_topic": cv, "window": "document"},
            "diversity": topic_diversity(topic_word, DIVERSITY_TOP_N),
            "diversity_top_n": DIVERSITY_TOP_N}
