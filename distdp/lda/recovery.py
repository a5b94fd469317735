"""Recovery of LDA / single-topic parameters from the tensor decomposition (pure numpy/scipy).

Anandkumar et al. 2012 (Thm. 5.1) for LDA and Anandkumar, Hsu & Kakade 2012
for the single-topic model; :func:`fill_topics` completes a fit whose second
moment supports fewer than k topics; :func:`matched_l1` scores a fit against
known topics.
"""
from __future__ import annotations

import numpy as np

MODELS = ("lda", "stm")

def recover_parameters(eigenvalues: np.ndarray, eigenvectors: np.ndarray, unwhiten: np.ndarray,
                       alpha0: float, model: str = "lda") -> tuple[np.ndarray, np.ndarray]:
    """Topic-word distributions and Dirichlet α from ``T = Σ λ_i v_i⊗3``.

    LDA (Anandkumar et al. 2012, Thm. 5.1; checked against the moment
    decompositions of dp-spectral-lda-end-to-end, Lemma 3.2, eqs. 5–6, with
    ``T = M3(W,W,W)`` and ``W = U S^(-1/2)``):
    ``α_i = 4α0(α0+1) / ((α0+2)² λ_i²)``, ``μ_i = (α0+2)/2 · λ_i · U S^(1/2) v_i``.
    Single-topic model (α0 → 0): weights ``w_i = 1/λ_i²``, ``μ_i = λ_i U S^(1/2) v_i``.
    Negative entries of ``μ_i`` are clipped and each row renormalised
    (post-processing). An eigenpair with ``λ_i < 0`` is flipped to ``(−λ_i, −v_i)``,
    the same rank-one term of an odd tensor.

    Parameters
    ----------
    eigenvalues : ndarray (k,)
    eigenvectors : ndarray (k, k)
        Columns ``v_i``.
    unwhiten : ndarray (d, k)
        ``U S^(1/2)`` from :class:`distdp.whitening.Whitening`.
    alpha0 : float
        Dirichlet concentration (ignored for ``model='stm'``).
    model : {'lda', 'stm'}

    Returns
    -------
    topic_word : ndarray (k, d)
        Rows sum to 1, sorted by decreasing α (or weight).
    alpha : ndarray (k,)
        Dirichlet parameters (LDA) or topic weights (STM).
    """
    lam = np.asarray(eigenvalues, dtype=np.float64)
    V = np.asarray(eigenvectors, dtype=np.float64) * np.sign(np.where(lam == 0, 1.0, lam))[None, :]
    lam = np.abs(lam)
    if np.any(lam <= 0) or not np.all(np.isfinite(lam)):
        raise ValueError(f"tensor eigenvalues must be non-zero and finite to recover topics, got {lam}")
    if model == "lda":
        alpha = 4.0 * alpha0 * (alpha0 + 1.0) / ((alpha0 + 2.0) ** 2 * lam ** 2)
        scale = (alpha0 + 2.0) / 2.0 * lam
    elif model == "stm":
        alpha = 1.0 / lam ** 2
        scale = lam
    else:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    mu = (unwhiten @ V) * scale[None, :]
    topic_word = clip_normalise(mu.T)
    order = np.argsort(-alpha, kind="stable")
    return topic_word[order], alpha[order]


#: Spread of the log-normal perturbation that splits a topic in :func:`fill_topics`.
SPLIT_SPREAD = 0.5


def fill_topics(topic_word: np.ndarray, alpha: np.ndarray, k: int,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Complete ``m < k`` spectral topics to ``k`` by splitting the heaviest ones.

    Where M2 supports only ``m`` positive directions the spectral stage finds
    ``m`` topics. Each missing topic is made by splitting the topic with the
    largest current α in two: the children are the parent's row times
    ``exp(±s·z)`` (``z`` standard normal per word, ``s`` =
    :data:`SPLIT_SPREAD`), renormalised, and share its α equally. The split
    children start variational EM on different sides of the parent, which
    then separates them (the way a split-and-merge EM grows a model); on
    their own they are near-copies, so a filled fit always runs EM.

    Parameters
    ----------
    topic_word : ndarray (m, d)
    alpha : ndarray (m,)
    k : int
        Topics wanted (≥ m).
    rng : numpy.random.Generator

    Returns
    -------
    topic_word : ndarray (k, d)
    alpha : ndarray (k,)
    """
    rows, weights = [r for r in topic_word], list(np.asarray(alpha, dtype=float))
    while len(rows) < k:
        j = int(np.argmax(weights))
        z = SPLIT_SPREAD * rng.standard_normal(topic_word.shape[1])
        up, down = rows[j] * np.exp(z), rows[j] * np.exp(-z)
        rows[j] = up / up.sum()
        rows.append(down / down.sum())
        weights[j] *= 0.5
        weights.append(weights[j])
    return np.vstack(rows), np.asarray(weights)


def clip_normalise(rows: np.ndarray) -> np.ndarray:
    """Set negative entries to 0 and renormalise every row to sum 1 (uniform if all ≤ 0)."""
    rows = np.clip(rows, 0.0, None)
    sums = rows.sum(axis=1, keepdims=True)
    uniform = np.full_like(rows, 1.0 / rows.shape[1])
    return np.where(sums > 0, rows / np.where(sums > 0, sums, 1.0), uniform)


def matched_l1(estimated: np.ndarray, truth: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean L1 distance between topic rows after Hungarian matching.

    Returns the mean over true topics of ``‖μ̂_π(i) − μ_i‖₁`` and the matching ``π``.
    """
    from scipy.optimize import linear_sum_assignment

    cost = np.abs(estimated[:, None, :] - truth[None, :, :]).sum(axis=2)
    rows, cols = linear_sum_assignment(cost)
    perm = np.empty(truth.shape[0], dtype=int)
    perm[cols] = rows
    return float(cost[rows, cols].mean()), perm
