"""The fitted topic model: parameters, top words, in-memory transform, save/load (a directory of files)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from distdp.lda import refine
from distdp.lda.recovery import MODELS


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
        if self.variational is not None:
            return np.exp(refine.dirichlet_expectation(self.variational))
        return refine.exp_elog_beta_from_topics(self.topic_word)

    def transform(self, X) -> np.ndarray:
        """Topic mixtures θ (n×k, rows sum to 1) of the documents×words count matrix ``X``, in this process.

        Like scikit-learn's ``LatentDirichletAllocation.transform``. Documents
        with no in-vocabulary word get the prior mean ``α/Σα``. For a parquet
        corpus (computed on shard actors) use :func:`distdp.api.transform` or
        :meth:`distdp.SpectralLDA.transform`.
        """
        if isinstance(X, (str, Path)):
            raise TypeError(f"LDAModel.transform takes a count matrix; for the corpus {str(X)!r} use "
                            "distdp.transform(model, corpus) or SpectralLDA.transform")
        X = sp.csr_matrix(X, dtype=np.float64)
        if X.shape[1] != self.topic_word.shape[1]:
            raise ValueError(f"X has {X.shape[1]} columns but the model's vocabulary has {self.topic_word.shape[1]}")
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

