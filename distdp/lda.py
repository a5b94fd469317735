"""Recovery of LDA / single-topic parameters from the tensor decomposition, and the model.

Pure math plus the model's own save/load (a directory of .npy/.json/.txt files).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
import numpy as np
import scipy.sparse as sp

MODELS = ("lda", "stm")


def recover_parameters(eigenvalues: np.ndarray, eigenvectors: np.ndarray, unwhiten: np.ndarray,
                       alpha0: float, model: str = "lda") -> tuple[np.ndarray, np.ndarray]:
    """Topic-word distributions and Dirichlet α from ``T = Σ λ_i v_i⊗3`` (SPEC §4).

    LDA (Anandkumar et al. 2012, Thm. 5.1; checked against SPEC §4):
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


@dataclass
class LDAModel:
    """A fitted topic model (spectral, optionally refined).

    Attributes
    ----------
    topic_word : ndarray (k, d)
        Topic-word distributions, rows sum to 1 (``components_`` in scikit-learn terms).
    alpha : ndarray (k,)
        Dirichlet parameters (LDA) or topic weights (single-topic model).
    alpha0 : float
        Concentration used for the moments (0 for the single-topic model).
    model : str
        ``'lda'`` or ``'stm'``.
    vocab : list of str or None
        Word of each column, when known.
    info : dict
        Parameters, corpus statistics, timings per stage, diagnostics.
    variational : ndarray (k, d) or None
        Topic Dirichlet parameters λ after variational EM refinement.
    """

    topic_word: np.ndarray
    alpha: np.ndarray
    alpha0: float
    model: str = "lda"
    vocab: list[str] | None = None
    info: dict = field(default_factory=dict)
    variational: np.ndarray | None = None

    def exp_elog_beta(self) -> np.ndarray:
        """``exp E[log β]`` (k×d) for the E-step: from λ when refined, else the topic rows (floored)."""
        from distdp import refine

        if self.variational is not None:
            return np.exp(refine.dirichlet_expectation(self.variational))
        return refine.exp_elog_beta_from_topics(self.topic_word)

    def transform(self, X, **kwargs) -> np.ndarray:
        """Topic mixtures θ (n×k, rows sum to 1), like scikit-learn's ``LatentDirichletAllocation.transform``.

        ``X`` is a documents×words count matrix (computed in this process) or a
        parquet corpus path (computed on shard actors; ``kwargs`` as for
        :func:`distdp.api.transform`). Documents with no in-vocabulary word get
        the prior mean ``α/Σα``.
        """
        from distdp import api

        if isinstance(X, (str, Path)):
            return api.transform(self, X, **kwargs).theta
        X = sp.csr_matrix(X, dtype=np.float64)
        if X.shape[1] != self.topic_word.shape[1]:
            raise ValueError(f"X has {X.shape[1]} columns but the model's vocabulary has {self.topic_word.shape[1]}")
        from distdp import refine

        return refine.theta_from_gamma(refine.e_step(X, self.exp_elog_beta(), self.alpha, with_sstats=False,
                                                    with_bound=False).gamma)

    @property
    def n_topics(self) -> int:
        """Number of topics k."""
        return int(self.topic_word.shape[0])

    @property
    def components_(self) -> np.ndarray:
        """scikit-learn alias of :attr:`topic_word`."""
        return self.topic_word

    def top_words(self, n: int = 10) -> list[list[str]]:
        """The ``n`` most probable words of every topic (ids as strings without a vocabulary)."""
        idx = np.argsort(-self.topic_word, axis=1, kind="stable")[:, :n]
        words = self.vocab if self.vocab is not None else [str(i) for i in range(self.topic_word.shape[1])]
        return [[words[j] for j in row] for row in idx]

    def format_top_words(self, n: int = 10) -> str:
        """One line per topic: index, α (or weight), top words."""
        label = "alpha" if self.model == "lda" else "weight"
        return "\n".join(f"topic {i:3d}  {label}={a:8.4f}  " + " ".join(ws)
                         for i, (a, ws) in enumerate(zip(self.alpha, self.top_words(n)))) + "\n"

    def save(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write the model to directory ``path`` atomically (all files or none).

        Files: ``topic_word.npy`` (k×d), ``alpha.npy`` (k), ``model.json``,
        ``top_words.txt`` and, with a vocabulary, ``vocab.txt``.
        """
        from distdp.io.atomic import atomic_directory

        with atomic_directory(path, overwrite=overwrite) as tmp:
            np.save(tmp / "topic_word.npy", self.topic_word)
            np.save(tmp / "alpha.npy", self.alpha)
            meta = {"model": self.model, "alpha0": self.alpha0, "n_topics": self.n_topics,
                    "vocab_size": int(self.topic_word.shape[1]), **self.info}
            (tmp / "model.json").write_text(json.dumps(_jsonable(meta), indent=2) + "\n")
            (tmp / "top_words.txt").write_text(self.format_top_words())
            if self.vocab is not None:
                (tmp / "vocab.txt").write_text("\n".join(self.vocab) + "\n")
            if self.variational is not None:
                np.save(tmp / "variational.npy", self.variational)
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> "LDAModel":
        """Read a model written by :meth:`save`."""
        path = Path(path)
        if not (path / "model.json").is_file():
            raise FileNotFoundError(f"{path}: not a distdp model directory (no model.json)")
        meta = json.loads((path / "model.json").read_text())
        vocab_file = path / "vocab.txt"
        vocab = vocab_file.read_text().split("\n")[:-1] if vocab_file.is_file() else None
        info = {k: v for k, v in meta.items() if k not in ("model", "alpha0", "n_topics", "vocab_size")}
        var = np.load(path / "variational.npy") if (path / "variational.npy").is_file() else None
        return cls(np.load(path / "topic_word.npy"), np.load(path / "alpha.npy"), float(meta["alpha0"]),
                   meta["model"], vocab, info, var)


def _jsonable(obj):
    """Convert numpy scalars/arrays inside nested dicts/lists to JSON types."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


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


def validate_fit_params(k: int, alpha0: float, model: str, vocab_size: int) -> None:
    """Reject parameters that cannot give a model, naming the parameter."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if k >= vocab_size:
        raise ValueError(f"k={k} must be smaller than the vocabulary size d={vocab_size}")
    if model == "lda" and not (np.isfinite(alpha0) and alpha0 > 0):
        raise ValueError(f"alpha0 must be > 0 for LDA (use model='stm' for the single-topic limit), got {alpha0}")

