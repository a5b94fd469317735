"""distdp: differentially private spectral topic models and tensor decompositions on Ray.

The scikit-learn estimator is :class:`SpectralLDA` (options grouped in
:class:`PrivacyOptions`, :class:`SolverOptions` and :class:`ClusterOptions`);
the function underneath is :func:`fit_lda`, whose fitted :class:`LDAModel`
saves to and loads from a directory. :func:`transform`, :func:`coherence` and
:func:`export` run a model over a corpus.

``import distdp`` imports nothing else: each name below is imported from its
module when first used (PEP 562), so the package face costs no NumPy, SciPy,
scikit-learn or Ray until they are needed.
"""
from __future__ import annotations

import importlib
import importlib.util

__version__ = "0.1.0"

#: Each public name and the module that defines it, imported on first access.
_EXPORTS = {
    "SpectralLDA": "distdp.estimator",
    "PrivacyOptions": "distdp.lda.private.options",
    "SolverOptions": "distdp.lda.options",
    "ClusterOptions": "distdp.api",
    "fit_lda": "distdp.api",
    "transform": "distdp.api",
    "coherence": "distdp.api",
    "export": "distdp.api",
    "LDAModel": "distdp.lda",
    "matched_l1": "distdp.lda",
    "sample_corpus": "distdp.lda.synthetic",
    "SyntheticCorpus": "distdp.lda.synthetic",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    """Import a public name's module on first access; a submodule (``distdp.api``, …) is imported likewise."""
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    # ``import distdp; distdp.api.…`` worked when this file imported its submodules eagerly: keep it working.
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
