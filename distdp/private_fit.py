"""Private ``fit-lda``: budget, mechanisms, ledger and privacy report (SPEC §5).

The privacy unit is one document; neighbouring corpora replace one document
by another (the number of documents is public). Noise comes from OS entropy
(:func:`~distdp.privacy.mechanisms.private_generator`); a seed is accepted
only with ``reproducible=True``, and the report then says the result is not
private. Every release is recorded in one ledger, accounted with PLD
(Gaussian releases composed exactly), and saved under ``privacy`` in
``model.json``.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from distdp import pipeline, private_pipeline
from distdp.lda import LDAModel
from distdp.privacy import lda_private, mechanisms
from distdp.privacy.ledger import PrivacyLedger, Release

#: Scalable mechanisms (no d×d or d×d×d object) and the small-vocabulary ones of the papers.
SCALABLE = ("whitened", "power")
DENSE = ("config1", "config1-paper", "config2", "config3", "config4", "agn", "avn")
MECHANISMS = ("auto",) + SCALABLE + DENSE

#: Private defaults (benchmarks/lda_privacy_utility.py). EM iterations and the refinement's fraction of the
#: budget: with a tail release (working vocabulary smaller than the vocabulary) the refinement is the tail
#: release and EM, of which the tail takes TAIL_SHARE (its Gram matrix TAIL_GRAM_SHARE of that); without it
#: EM alone. The scan takes SCAN_BUDGET of the whole budget, the spectral stages the rest.
DEFAULT_REFINE = 3
DEFAULT_REFINE_TAIL = 2
DEFAULT_REFINE_BUDGET = 0.5
DEFAULT_REFINE_BUDGET_TAIL = 0.75
TAIL_SHARE = 0.5
TAIL_GRAM_SHARE = 0.02
SCAN_BUDGET = 0.02

UNIT = "one document; neighbouring corpora replace one document by another (the number of documents is public)"

ASSUMPTIONS = {
    "whitened": [
        "per-document contributions are clipped to bounds read off noisy histograms; the sensitivities "
        "(distdp.privacy.lda_private) hold for every pair of neighbouring corpora, with no condition on the data",
        "the number of documents N is public; which documents have ≥ 3 tokens is released with noise",
    ],
}
ASSUMPTIONS["power"] = ASSUMPTIONS["whitened"]


def resolve_mechanism(mechanism: str, k: int) -> str:
    """``auto`` → ``whitened`` (k ≤ 100) or ``power``; reject unknown names."""
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    if mechanism == "auto":
        return "whitened" if k <= 100 else "power"
    return mechanism


def check_private_args(epsilon, delta, seed, reproducible: bool, refine: int, refine_budget: float,
                       length_cap) -> None:
    """Reject an incomplete or unsafe private configuration, naming the parameter."""
    if epsilon is None or delta is None:
        raise ValueError("a private fit needs both epsilon and delta (e.g. --epsilon 1 --delta 1e-6)")
    mechanisms.check_epsilon(epsilon)
    mechanisms.check_delta(delta)
    if seed is not None and not reproducible:
        raise ValueError("a seed makes the noise reproducible, and a reproducible fit is not private: "
                         "pass reproducible=True (--reproducible) to accept that, or drop the seed")
    if refine and not 0 < refine_budget < 1:
        raise ValueError(f"refine_budget must be in (0, 1) when refine > 0, got {refine_budget!r}")
    if isinstance(length_cap, bool) or int(length_cap) != length_cap or length_cap < 1:
        raise ValueError(f"length_cap must be an integer ≥ 1, got {length_cap!r}")


def vocabulary_entry(corpus) -> tuple[dict, Release | None, float]:
    """What the corpus's ``prepare.json`` says about its vocabulary: (report, release to add, extra δ).

    A vocabulary selected with DP (``vocabulary_privacy.release``) joins the
    ledger and its thresholding δ the total δ; one built from the text
    without DP is reported as not covered by the guarantee.
    """
    if sp.issparse(corpus) or isinstance(corpus, np.ndarray):
        return {"source": "given by the caller (treated as public)"}, None, 0.0
    root = Path(corpus) if Path(corpus).is_dir() else Path(corpus).parent
    meta_path = root / "prepare.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    info = meta.get("vocabulary_privacy")
    if info and "release" in info:
        report = {"source": "selected from this corpus with a DP mechanism",
                  **{k: v for k, v in info.items() if k != "release"}}
        return report, Release.from_dict(info["release"]), float(info.get("delta_threshold", 0.0))
    if meta.get("vocab_from_private_data"):
        return ({"source": "built from this (private) corpus WITHOUT differential privacy: the guarantee does "
                           "not cover the vocabulary; use a public vocabulary (prepare --vocab) or a DP selection",
                 "vocab_from_private_data": True}, None, 0.0)
    return {"source": "public (not built from this corpus)"}, None, 0.0


def budget_plan(config: lda_private.PrivateSpectralConfig, refine: int, refine_budget: float, scan: bool,
                tail: bool = False) -> dict:
    """Noise multipliers of every release of a scalable private fit, from fractions of the budget.

    The scan takes :data:`SCAN_BUDGET` (when made); of the rest the
    refinement takes ``refine_budget`` (when ``refine > 0``): the tail
    release :data:`TAIL_SHARE` of it (when ``tail``) and the EM iterations the
    remainder; the spectral stages get what is left. Fractions are of
    ``1/m²`` (μ-GDP), so the releases compose exactly to ``(ε, δ)``
    (:func:`distdp.privacy.lda_private.plan_noise`).
    """
    rest = 1.0 - SCAN_BUDGET if scan else 1.0
    refinement = refine_budget * rest if refine else 0.0
    tail_frac = TAIL_SHARE * refinement if tail else 0.0
    em, spectral = refinement - tail_frac, rest - refinement
    extra = {"scan": (SCAN_BUDGET / spectral, 1)} if scan else {}
    if em:
        extra["em_sstats"] = (em / spectral, refine)
    if tail_frac:
        extra["tail_gram"] = (TAIL_GRAM_SHARE * tail_frac / spectral, 1)
        extra["tail_sstats"] = ((1.0 - TAIL_GRAM_SHARE) * tail_frac / spectral, 1)
    return lda_private.plan_noise(config, extra)


def fit_lda_private(corpus, k: int, *, alpha0: float, model: str, vocab, vocab_size, workers, backend, address,
                    seed, refine: int, eta, out, overwrite: bool, progress: bool, cpus_per_worker,
                    epsilon, delta, mechanism: str, refine_budget, length_cap: int, reproducible: bool,
                    public_corpus, coherence: bool, t_start: float, working_vocab=None, **solver) -> LDAModel:
    """The private branch of :func:`distdp.api.fit_lda` (same parameters).

    ``refine=None`` → private EM iterations for LDA with a scalable mechanism
    (0 otherwise): :data:`DEFAULT_REFINE_TAIL` after a tail release (working
    vocabulary smaller than the vocabulary), else :data:`DEFAULT_REFINE`;
    ``refine_budget=None`` → :data:`DEFAULT_REFINE_BUDGET_TAIL` after a tail
    release, else :data:`DEFAULT_REFINE_BUDGET`.
    """
    from distdp import api

    refine_default = refine is None
    if refine is None:
        refine = DEFAULT_REFINE if model == "lda" and resolve_mechanism(mechanism, k) in SCALABLE else 0
    budget_default = refine_budget is None
    refine_budget = DEFAULT_REFINE_BUDGET if refine_budget is None else refine_budget
    check_private_args(epsilon, delta, seed, reproducible, refine, refine_budget, length_cap)
    mech = resolve_mechanism(mechanism, k)
    if refine and model != "lda":
        raise ValueError("refine (variational EM) applies to model='lda' only")
    if refine and mech in DENSE:
        raise ValueError(f"private refinement builds on the scalable mechanisms {SCALABLE}, not {mech!r}")
    if working_vocab is not None and mech in DENSE:
        raise ValueError(f"working_vocab applies to the scalable mechanisms {SCALABLE}, not {mech!r}")
    params = pipeline.SpectralParams(k=k, alpha0=alpha0, model=model, **solver)
    rng = np.random.default_rng(seed) if reproducible else mechanisms.private_generator()
    ledger = PrivacyLedger(private=not reproducible)
    vocab_report, vocab_release, vocab_delta = vocabulary_entry(corpus)
    update, close = api._progress_bar(progress)
    eta = 1.0 / k if eta is None else float(eta)
    with api.open_corpus(corpus, vocab=vocab, vocab_size=vocab_size, workers=workers, backend=backend,
                         address=address, cpus_per_worker=cpus_per_worker) as oc:
        params.validate(oc.vocab_size)
        try:
            if mech in DENSE:
                fit = _fit_dense(oc, params, mech, epsilon, delta, rng, reproducible)
            else:
                fit = _fit_scalable(oc, params, mech, epsilon, delta, rng, ledger, refine, refine_budget,
                                    length_cap, eta, working_vocab, update, refine_default, budget_default)
                refine, refine_budget = fit["refine"], fit["refine_budget"]
            resources = oc.resources()
        finally:
            close()
    spent = fit["ledger"].check_budget(epsilon, delta)
    if vocab_release is not None:
        fit["ledger"].releases.insert(0, vocab_release)
    npmi = None
    if coherence and public_corpus is not None:
        npmi = api.coherence(LDAModel(fit["topic_word"], fit["alpha"], 0.0, model, oc.vocab, {}), public_corpus,
                             backend=backend, address=address)["per_topic"]
    info = _report(fit, oc, params, mech, epsilon, delta, spent, seed, reproducible, refine, refine_budget,
                   length_cap, eta, backend, vocab_report, vocab_delta, resources, t_start)
    if npmi is not None:
        info["coherence"] = {"measure": "NPMI", "top_n": api.COHERENCE_TOP_N, "corpus": f"declared public: {public_corpus}",
                             "mean": float(npmi.mean()), "per_topic": npmi}
    elif coherence:
        info["coherence"] = {"omitted": "coherence on the private training corpus would be a further release; "
                                        "pass a corpus you declare public (--public-corpus) to measure it"}
    fitted = LDAModel(fit["topic_word"], fit["alpha"], float(params.moment_alpha0), model, oc.vocab, info,
                      fit.get("variational"))
    if out is not None:
        fitted.save(out, overwrite=overwrite)
    return fitted


def _fit_scalable(oc, params, mech, epsilon, delta, rng, ledger, refine, refine_budget, length_cap, eta,
                  working_vocab, update, refine_default=False, budget_default=False):
    config = lda_private.PrivateSpectralConfig(epsilon, delta, mechanism=mech, length_cap=length_cap)
    d = oc.vocab_size
    h = private_pipeline.check_working_vocab(working_vocab, d, params.k, refine)
    if refine and h < d:  # the tail release already gives every word its topics
        refine = DEFAULT_REFINE_TAIL if refine_default else refine
        refine_budget = DEFAULT_REFINE_BUDGET_TAIL if budget_default else refine_budget
    plan = budget_plan(config, refine, refine_budget, scan=bool(refine) or h < d, tail=bool(refine) and h < d)
    fit = private_pipeline.fit_lda_private_scalable(oc.backend, d, params, config, rng, ledger, plan,
                                                     refine=refine, eta=eta, working_vocab=h, progress=update)
    return {"topic_word": fit.topic_word, "alpha": fit.alpha, "ledger": ledger, "spectral": fit.spectral,
            "variational": fit.em.variational if fit.em is not None else None, "em": fit.em,
            "working_vocab": h, "refine": refine, "refine_budget": refine_budget,
            "em_norm_cap": fit.scan.norm_cap if fit.em is not None else None,
            "guarantee": "proven" if ledger.private else "none: reproducible (seeded) noise",
            "assumptions": ASSUMPTIONS[mech]}


def _fit_dense(oc, params, mech, epsilon, delta, rng, reproducible):
    from distdp.privacy import lda_dense

    lda_dense.check_dense_vocab(oc.vocab_size)
    partial = pipeline._sum(oc.backend.call("dense_moments"))
    # The public normaliser is the number of rows (an upper bound on the documents used, as the
    # sensitivities require); documents shorter than 3 tokens contribute zero.
    n_docs = int(sum(oc.backend.call("row_count")))
    res = lda_dense.fit_dense(partial, params.k, params.moment_alpha0, mech, epsilon=epsilon, delta=delta,
                              rng=rng if reproducible else None, reproducible=reproducible,
                              n_restarts=params.n_restarts, n_iters=params.n_iters, n_docs=n_docs)
    return {"topic_word": res.topic_word, "alpha": res.alpha, "ledger": res.ledger, "guarantee": res.guarantee,
            "assumptions": list(res.assumptions), "dense": res}


def _report(fit, oc, params, mech, epsilon, delta, spent, seed, reproducible, refine, refine_budget, length_cap,
            eta, backend, vocab_report, vocab_delta, resources, t_start) -> dict:
    ledger: PrivacyLedger = fit["ledger"]
    total_delta = delta + vocab_delta
    privacy = {
        "private": bool(ledger.private and fit["guarantee"] == "proven"
                        and not vocab_report.get("vocab_from_private_data", False)
                        and vocab_report.get("private", True)),
        "guarantee": fit["guarantee"], "mechanism": mech, "unit": UNIT,
        "requested": {"epsilon": epsilon, "delta": delta},
        # The vocabulary's thresholding adds its δ on top of the ledger's (ε, δ) (distdp.privacy.vocabulary).
        "epsilon": float(ledger.epsilon(delta)), "delta": total_delta, "epsilon_fit": float(spent),
        "accounting": "tight: privacy loss distributions (Google dp-accounting), Gaussian releases composed "
                      "exactly (μ-GDP); noise multipliers calibrated jointly from (epsilon, delta)",
        "noise_source": "seeded generator (reproducible, NOT private)" if reproducible else "OS entropy",
        "vocabulary": vocab_report, "assumptions": fit["assumptions"],
        "not_released": ["per-document γ/φ", "evidence lower bound", "exact document and token counts",
                         "coherence on the training corpus"],
        "ledger": [r.to_dict() for r in ledger.releases],
    }
    stats = ({**fit["spectral"].result.stats, "vocab_size": oc.vocab_size} if "spectral" in fit else
             {"n_docs": int(sum(oc.backend.call("row_count"))), "vocab_size": oc.vocab_size})
    info = {
        "method": f"private spectral ({mech})" + (f" on the {fit['working_vocab']} most frequent words (noisy)"
                                                  if fit.get("working_vocab", oc.vocab_size) < oc.vocab_size else "")
                  + (" + private unmixing of the other words" if "tail_sstats" in {r.stage for r in ledger.releases}
                     else "")
                  + (f" + {refine} private variational EM iteration{'s' if refine > 1 else ''} on every word"
                     if refine else ""),
        "parameters": {"k": params.k, "alpha0": params.alpha0, "model": params.model, "seed": seed,
                       "backend": backend, "workers": oc.backend.n_shards, "refine": refine,
                       "eta": eta if refine else None, "refine_budget": refine_budget if refine else None,
                       "length_cap": length_cap, "epsilon": epsilon, "delta": delta, "mechanism": mech,
                       "working_vocab": fit.get("working_vocab"), "em_norm_cap": fit.get("em_norm_cap")},
        "corpus": {"source": oc.source, **stats},
        "timings_s": {"read": oc.read_seconds, "total": time.perf_counter() - t_start},
        "resources": resources,
        "privacy": privacy,
    }
    if "spectral" in fit:
        info["m2_eigenvalues"] = fit["spectral"].result.m2_eigenvalues
        info["tensor_eigenvalues"] = fit["spectral"].result.tensor_eigenvalues
    return info
