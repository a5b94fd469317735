"""Private ``fit-lda``: budget, mechanisms, ledger and privacy report.

The privacy unit is one document; neighbouring corpora replace one document
by another (the number of documents is public:
:data:`~distdp.privacy.neighbours.REPLACE_ONE_DOCUMENT`). Noise comes from OS entropy
(:func:`~distdp.privacy.mechanisms.private_generator`); a seed is accepted
only with ``reproducible=True``, and the report then says the result is not
private. Every release is recorded in one ledger, accounted with PLD
(Gaussian releases composed exactly), and saved under ``privacy`` in
``model.json``.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import scipy.sparse as sp

from distdp.io.prepare import check_delta_for_n_docs, read_prepare_json, vocabulary_provenance
from distdp.lda import LDAModel, metrics, pipeline
from distdp.lda.options import SolverOptions
from distdp.lda.private import pipeline as private_pipeline
from distdp.lda.private.options import PrivacyOptions
from distdp.lda.private.shard import PrivateShard
from distdp.lda.shard import Shard
from distdp.lda.private import scalable
from distdp.privacy import mechanisms
from distdp.privacy.neighbours import REPLACE_ONE_DOCUMENT
from distdp.privacy.report import PrivacyReport
from distdp.privacy.ledger import (BudgetExceededError, BudgetNotMetError, PrivacyLedger, PrivateRunInternalError,
                                   Release)
from distdp.progress import progress_bar

#: Scalable mechanisms (no d×d or d×d×d object) and the small-vocabulary ones of the papers.
SCALABLE = ("whitened", "power")
DENSE = ("config1", "config1-paper", "config2", "config3", "config4", "agn", "avn")
MECHANISMS = ("auto",) + SCALABLE + DENSE

#: Private defaults (benchmarks/lda_privacy_utility.py, benchmarks/refine_privacy.py). The refinement
#: (everything after the spectral stage) is DEFAULT_UNMIX unmixing passes unless EM iterations are
#: asked for. Its fraction of the budget: DEFAULT_REFINE_BUDGET_TAIL after a working vocabulary smaller than
#: the vocabulary, else DEFAULT_REFINE_BUDGET. Of it the tail release takes TAIL_SHARE_UNMIX when unmixing
#: passes follow, TAIL_SHARE when EM alone does (its Gram matrix TAIL_GRAM_SHARE of that); the unmixing
#: passes and EM iterations split the rest evenly, each pass's Gram matrix taking UNMIX_GRAM_SHARE of its
#: part. The scan takes SCAN_BUDGET of the whole budget, the spectral stages what is left.
DEFAULT_UNMIX = 2
DEFAULT_REFINE_BUDGET = 0.5
DEFAULT_REFINE_BUDGET_TAIL = 0.75
TAIL_SHARE = 0.5
TAIL_SHARE_UNMIX = 0.3
TAIL_GRAM_SHARE = 0.02
UNMIX_GRAM_SHARE = 0.1
SCAN_BUDGET = 0.02

#: What a private ``model.json`` leaves out (its ``privacy.not_released``): the non-private fit's ``timings_s``
#: and ``resources`` are unnoised functions of the data. The CLI prints the fit's wall time on the terminal of
#: whoever runs it (the data holder); the released file does not carry it.
NOT_RECORDED = ("wall times and resource use (timings_s, resources: stage and total times, per-actor peak memory "
                "and read times, bytes per round): unnoised functions of the data, left out of a private model.json")

ASSUMPTIONS = {
    "whitened": [
        "per-document contributions are clipped to bounds read off noisy histograms; the sensitivities "
        "(distdp.lda.private.scalable) hold for every pair of neighbouring corpora, with no condition on the data",
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


def check_private_args(seed, reproducible: bool, refine: int) -> None:
    """Reject an unsafe seed or a bad ``refine`` in a private fit, naming the parameter (ε, δ and the other
    private settings are checked by :class:`~distdp.lda.private.options.PrivacyOptions`)."""
    if seed is not None and not reproducible:
        raise ValueError("a seed makes the noise reproducible, and a reproducible fit is not private: "
                         "pass reproducible=True (--reproducible) to accept that, or drop the seed")
    if isinstance(refine, bool) or int(refine) != refine or refine < 0:
        raise ValueError(f"refine must be an integer ≥ 0, got {refine!r}")


#: Why a vocabulary keeps a fit from being private, by provenance (:func:`vocabulary_entry`).
VOCAB_NOT_PRIVATE = {
    "built": "vocabulary built from this corpus without DP",
    "unknown": "vocabulary of unknown provenance (no prepare.json; not declared public)",
    "dp_seeded": "vocabulary selected with seeded (reproducible) noise",
}


def vocabulary_entry(corpus, vocab_public: bool = False,
                     reproducible: bool = False) -> tuple[dict, Release | None, float]:
    """Where the vocabulary came from: (report, release to add, extra δ), from the corpus's ``prepare.json``.

    - A DP selection (``vocabulary_privacy.release``) joins the ledger and its
      thresholding δ the total δ.
    - One built from the text without DP is reported as not covered: the fit is not private.
    - A public vocabulary file given to ``prepare`` is public.
    - No ``prepare.json`` (or one that does not say): the provenance is unknown, and only the caller
      can say it is public (``vocab_public=True``); without that declaration a private fit is refused
      before any release (a reproducible fit, not private anyway, goes on and reports it unknown).
    - A count matrix: its columns are the caller's, treated as public (``vocab_public`` records the
      declaration explicitly).

    The report's ``provenance`` is ``"public"``, ``"declared_public"``, ``"matrix"``, ``"dp"``,
    ``"built"`` or ``"unknown"``; ``not_private`` (when present) says why the vocabulary keeps the
    fit from being private.

    Raises
    ------
    ValueError
        Unknown provenance without ``vocab_public`` in a private fit (naming the corpus and the two
        ways out); ``vocab_public`` with a ``prepare.json`` that says the vocabulary was chosen from
        this corpus's text.
    """
    if sp.issparse(corpus) or isinstance(corpus, np.ndarray):
        if vocab_public:
            return {"source": "declared public by the caller (vocab_public=True)", "provenance": "declared_public"}, \
                None, 0.0
        return ({"source": "given by the caller as a count matrix (its columns treated as public)",
                 "provenance": "matrix"}, None, 0.0)
    meta = read_prepare_json(corpus)
    kind = vocabulary_provenance(meta)
    if vocab_public and kind in ("dp", "built"):
        raise ValueError(f"{corpus}: its prepare.json says the vocabulary was "
                         + ("selected from this corpus's text with DP (its release joins the fit's ledger)"
                            if kind == "dp" else "built from this corpus's text")
                         + ": it cannot be declared public; drop vocab_public (--vocab-public)")
    if kind == "dp":
        info = meta["vocabulary_privacy"]
        report = {"source": "selected from this corpus with a DP mechanism", "provenance": "dp",
                  **{k: v for k, v in info.items() if k not in ("release", "ledger")}}
        if not info.get("private", True):
            report["not_private"] = VOCAB_NOT_PRIVATE["dp_seeded"]
        # the report's one-release ledger; prepare.json files written before the report had a ledger say "release"
        release = info["ledger"][0] if "ledger" in info else info["release"]
        return report, Release.from_dict(release), float(info.get("delta_threshold", 0.0))
    if kind == "built":
        return ({"source": "built from this (private) corpus WITHOUT differential privacy: the guarantee does "
                           "not cover the vocabulary; use a public vocabulary (prepare --vocab) or a DP selection",
                 "provenance": "built", "vocab_from_private_data": True, "not_private": VOCAB_NOT_PRIVATE["built"]},
                None, 0.0)
    if kind == "public":
        return ({"source": f"public: {meta.get('vocab_source', 'a vocabulary file given to prepare')} "
                           "(prepare.json; not built from this corpus)", "provenance": "public"}, None, 0.0)
    if vocab_public:
        return ({"source": "declared public by the caller (vocab_public=True, --vocab-public): no prepare.json "
                           "records where it came from, and the guarantee rests on this declaration",
                 "provenance": "declared_public"}, None, 0.0)
    if reproducible:
        return ({"source": "unknown: no prepare.json records where this corpus's vocabulary came from",
                 "provenance": "unknown", "not_private": VOCAB_NOT_PRIVATE["unknown"]}, None, 0.0)
    raise ValueError(
        f"{corpus}: no prepare.json records where this corpus's vocabulary came from (a corpus written by another "
        "tool, or copied without it), and a vocabulary chosen from the corpus's own text would release "
        "information the privacy guarantee does not cover. Either declare it public if it was not chosen from "
        "these documents (--vocab-public; vocab_public=True), or make the corpus with distdp prepare and a DP "
        "vocabulary (--dp-vocab-epsilon E --dp-vocab-delta D) or a public one (--vocab FILE). Nothing was "
        "released.")


def check_delta_documents(delta: float, vocab_delta: float, n_docs: int) -> None:
    """Refuse δ ≥ 1/N, and a total δ (``delta`` plus a DP vocabulary's thresholding δ, ``vocab_delta``)
    ≥ 1/N, N the number of documents (public: replace-one neighbours; :func:`distdp.io.prepare.check_delta_for_n_docs`)."""
    check_delta_for_n_docs(delta, n_docs, "delta (--delta)")
    if vocab_delta:
        check_delta_for_n_docs(delta + vocab_delta, n_docs, "total delta",
                               f" (the fit's {delta:g} + the DP vocabulary's thresholding {vocab_delta:g}, "
                               "recorded in prepare.json)")


def resolve_refinement(d: int, k: int, refine=None, unmix=None, refine_budget=None,
                       working_vocab=None) -> private_pipeline.Refinement:
    """Defaults of a scalable private LDA fit: ``unmix=None`` → :data:`DEFAULT_UNMIX` passes when
    ``refine`` is not given, else 0; ``refine=None`` → 0 EM iterations; the working vocabulary
    (:func:`distdp.lda.private.pipeline.check_working_vocab`); ``refine_budget=None`` →
    :data:`DEFAULT_REFINE_BUDGET_TAIL` with a tail release, else :data:`DEFAULT_REFINE_BUDGET`."""
    unmix = (DEFAULT_UNMIX if refine is None else 0) if unmix is None else unmix
    refine = 0 if refine is None else refine
    active = bool(refine or unmix)
    h = private_pipeline.check_working_vocab(working_vocab, d, k, active)
    if refine_budget is None:
        refine_budget = DEFAULT_REFINE_BUDGET_TAIL if active and h < d else DEFAULT_REFINE_BUDGET
    return private_pipeline.Refinement(h, active or h < d, active and h < d, unmix, refine, refine_budget,
                                       adaptive=working_vocab == "auto" and active and h < d)


def budget_plan(config: scalable.PrivateSpectralConfig, refinement: private_pipeline.Refinement) -> dict:
    """Noise multipliers of every release of a scalable private fit, from fractions of the budget.

    The scan takes :data:`SCAN_BUDGET` (when made); of the rest the
    refinement takes ``refine_budget`` (when active): the tail release
    :data:`TAIL_SHARE_UNMIX` of it before unmixing passes, :data:`TAIL_SHARE`
    before EM alone; the unmixing passes and EM iterations share the
    remainder evenly; the spectral stages get what is left. Fractions are of
    ``1/m²`` (μ-GDP), so the releases compose exactly to ``(ε, δ)``
    (:func:`distdp.lda.private.scalable.plan_noise`). Before unmixing passes a
    dense whitening is split into a first release and a top-up
    (:func:`distdp.lda.private.scalable.split_whitening`); the fit gives an
    unmade top-up's part to the passes' ``unmix_sstats``, and for LDA splits the first
    release's early rung off it (:func:`distdp.lda.private.scalable.split_early`), giving the
    rest of the first release to the passes too when the rung suffices.
    """
    r = refinement
    rest = 1.0 - SCAN_BUDGET if r.scan else 1.0
    total = r.refine_budget * rest if r.active else 0.0
    tail_frac = (TAIL_SHARE_UNMIX if r.unmix else TAIL_SHARE) * total if r.tail else 0.0
    per_pass = (total - tail_frac) / (r.unmix + r.refine) if r.active else 0.0
    spectral = rest - total
    extra = {"scan": (SCAN_BUDGET / spectral, 1)} if r.scan else {}
    if tail_frac:
        extra["tail_gram"] = (TAIL_GRAM_SHARE * tail_frac / spectral, 1)
        extra["tail_sstats"] = ((1.0 - TAIL_GRAM_SHARE) * tail_frac / spectral, 1)
    if r.unmix:
        extra["unmix_gram"] = (UNMIX_GRAM_SHARE * per_pass * r.unmix / spectral, r.unmix)
        extra["unmix_sstats"] = ((1.0 - UNMIX_GRAM_SHARE) * per_pass * r.unmix / spectral, r.unmix)
    if r.refine:
        extra["em_sstats"] = (per_pass * r.refine / spectral, r.refine)
    plan = scalable.plan_noise(config, extra)
    return scalable.split_whitening(plan) if r.unmix and config.dense_whitening else plan


def fit_lda_private(corpus, k: int, open_shards: Callable, public_npmi: Callable, privacy: PrivacyOptions, *,
                    alpha0: float, model: str, seed, refine: int | None, eta, out, overwrite: bool, progress: bool,
                    coherence: bool, solver: SolverOptions | None = None) -> LDAModel:
    """The private branch of :func:`distdp.api.fit_lda` (same parameters; ``privacy`` given).

    The caller (the API layer) provides the transport: ``open_shards()`` opens
    ``corpus`` on shards of :class:`distdp.lda.private.shard.PrivateShard` (a
    context manager yielding :class:`distdp.api.OpenCorpus`), and
    ``public_npmi(model, public_corpus)`` measures NPMI per topic on a corpus
    declared public. The vocabulary's provenance is settled before any release (:func:`vocabulary_entry`), and δ (with a DP
    vocabulary's thresholding δ) is checked against 1/N (:func:`check_delta_documents`) before the first
    one. ``model.json`` records no wall time or resource use (:data:`NOT_RECORDED`).

    With a scalable mechanism, ``refine``, ``privacy.unmix``, ``privacy.refine_budget`` and
    ``privacy.working_vocab`` default as :func:`resolve_refinement` says (two
    unmixing passes after a tail release); ``model='stm'`` takes unmixing
    passes (each document's θ̂ the one-hot of its single-topic posterior
    mode) but no EM; the dense mechanisms take neither.
    """
    p = privacy
    epsilon, delta, reproducible, declared_bounds = p.epsilon, p.delta, p.reproducible, p.declared_bounds
    check_private_args(seed, reproducible, refine or 0)
    mech = resolve_mechanism(p.mechanism, k)
    if refine and model != "lda":
        raise ValueError("refine (variational EM) applies to model='lda' only (model='stm' takes --unmix passes)")
    if (refine or p.unmix) and mech in DENSE:
        raise ValueError(f"private refinement builds on the scalable mechanisms {SCALABLE}, not {mech!r}")
    if declared_bounds is not None:
        from distdp.lda.private import dense

        if mech != "config2":
            raise ValueError(f"declared_bounds apply to config2 only (--mechanism config2), not {mech!r}")
        if isinstance(declared_bounds, str):
            declared_bounds = dense.DeclaredBounds.parse(declared_bounds)
    for name, value in (("working_vocab", p.working_vocab), ("whitening", p.whitening)):
        if value is not None and mech in DENSE:
            raise ValueError(f"{name} applies to the scalable mechanisms {SCALABLE}, not {mech!r}")
    whitening = "auto" if p.whitening is None else p.whitening
    scalable.whitening_form(whitening, 1)  # reject a bad value before any pass
    params = (solver or SolverOptions()).spectral_params(k, alpha0, model)
    check_solver_args(params, mech)
    rng = np.random.default_rng(seed) if reproducible else mechanisms.private_generator()
    ledger = PrivacyLedger(private=not reproducible)
    vocab_report, vocab_release, vocab_delta = vocabulary_entry(corpus, p.vocab_public, reproducible)
    update, close = progress_bar(progress)
    eta = 1.0 / k if eta is None else float(eta)
    with open_shards() as oc:
        params.validate(oc.vocab_size)
        check_delta_documents(delta, vocab_delta, int(sum(oc.backend.call(Shard.row_count))))
        try:
            if mech in DENSE:
                fit = _fit_dense(oc, params, mech, epsilon, delta, rng, reproducible, declared_bounds)
            else:
                r = resolve_refinement(oc.vocab_size, k, refine, p.unmix, p.refine_budget, p.working_vocab)
                config = spectral_config(epsilon, delta, r, mech, p.length_cap, whitening)
                fit = _fit_scalable(oc, params, config, rng, ledger, r, eta, update)
        except Exception as exc:
            raise_internal(exc, None if mech in DENSE else len(ledger.releases))
        finally:
            close()
    spent = fit["ledger"].check_budget(epsilon, delta)
    if vocab_release is not None:
        fit["ledger"].releases.insert(0, vocab_release)
    npmi = None
    if coherence and p.public_corpus is not None:
        npmi = public_npmi(LDAModel(fit["topic_word"], fit["alpha"], 0.0, model, oc.vocab, {}), p.public_corpus)
    info = _report(fit, oc, params, mech, epsilon, delta, spent, seed, reproducible, p.length_cap, eta, oc.kind,
                   vocab_report, vocab_delta)
    if npmi is not None:
        info["coherence"] = {"measure": "NPMI", "top_n": metrics.COHERENCE_TOP_N, "corpus": f"declared public: {p.public_corpus}",
                             "mean": float(npmi.mean()), "per_topic": npmi}
    elif coherence:
        info["coherence"] = {"omitted": "coherence on the private training corpus would be a further release; "
                                        "pass a corpus you declare public (--public-corpus) to measure it"}
    fitted = LDAModel(fit["topic_word"], fit["alpha"], float(params.moment_alpha0), model, oc.vocab, info,
                      fit.get("variational"))
    if out is not None:
        fitted.save(out, overwrite=overwrite)
    return fitted


def raise_internal(exc: Exception, releases: int | None) -> None:
    """Re-raise an error of a private fit's releases, as :class:`~distdp.privacy.ledger.PrivateRunInternalError`
    unless documented.

    Documented: :class:`~distdp.privacy.ledger.BudgetNotMetError` (the noise swamps the signal; its message
    says the run counts) and ``BudgetExceededError``; and, before the first release (``releases == 0``)
    or from a dense mechanism (``releases is None``: one call that checks its inputs first),
    ``ValueError`` / ``OSError`` (the parameters checked against the data, e.g. too few documents). Any
    other error, or one after a release, is a defect or a failure of the cluster: it must not read like
    a message about the input, and it says whether releases were made.
    """
    if isinstance(exc, (BudgetNotMetError, BudgetExceededError)) or (
            releases in (0, None) and isinstance(exc, (ValueError, OSError))):
        raise exc
    raise PrivateRunInternalError(exc, releases) from exc


#: Non-private solver options (SpectralParams field: its fit-lda flag) that private fits do not read:
#: the mechanism fixes the tensor's form and its power method, ``--whitening`` the eigensolver.
UNUSED_SOLVER_OPTIONS = {"tensor": "--tensor", "method": "--method", "eigensolver": "--eigensolver",
                         "eig_iters": "eig_iters", "eig_tol": "eig_tol", "precision": "--precision"}


def check_solver_args(params: pipeline.SpectralParams, mech: str) -> None:
    """Refuse solver options a private fit would silently ignore (:data:`UNUSED_SOLVER_OPTIONS`; and
    the restarts and iterations with ``mechanism='power'``, whose noisy power method has its own)."""
    base = pipeline.SpectralParams(k=params.k)
    given = [flag for f, flag in UNUSED_SOLVER_OPTIONS.items() if getattr(params, f) != getattr(base, f)]
    if mech == "power":
        given += [flag for f, flag in (("n_restarts", "--restarts"), ("n_iters", "--iters"))
                  if getattr(params, f) is not None]
    if given:
        raise ValueError(f"{', '.join(given)}: not used by a private fit with mechanism {mech!r} (the mechanism "
                         "fixes the tensor's form and its power method, --whitening the eigensolver); leave "
                         + ("it" if len(given) == 1 else "them") + " out")


def spectral_config(epsilon: float, delta: float, r: private_pipeline.Refinement, mechanism: str = "whitened",
                    length_cap: int = 100, whitening: str = "auto") -> scalable.PrivateSpectralConfig:
    """The spectral stage's configuration of a scalable private fit; the whitening's form from the
    working vocabulary's size (:func:`distdp.lda.private.scalable.whitening_form`)."""
    form = scalable.whitening_form(whitening, r.working_vocab)
    return scalable.PrivateSpectralConfig(epsilon, delta, mechanism=mechanism, length_cap=length_cap,
                                             dense_whitening=form != "power", matrix_free=form == "matrix-free")


def _fit_scalable(oc, params, config, rng, ledger, r: private_pipeline.Refinement, eta, update):
    fit = private_pipeline.fit_lda_private_scalable(oc.backend, oc.vocab_size, params, config, rng, ledger,
                                                     budget_plan(config, r), r, eta=eta, progress=update)
    return {"topic_word": fit.topic_word, "alpha": fit.alpha, "ledger": ledger, "spectral": fit.spectral,
            "variational": fit.em.variational if fit.em is not None else None, "em": fit.em,
            "refinement": dataclasses.replace(r, working_vocab=len(fit.columns)),
            "norm_cap": fit.scan.norm_cap if r.active else None,
            "guarantee": "proven" if ledger.private else "none: reproducible (seeded) noise",
            "assumptions": ASSUMPTIONS[config.mechanism]}


def _fit_dense(oc, params, mech, epsilon, delta, rng, reproducible, declared_bounds=None):
    from distdp.lda.private import dense

    dense.check_dense_vocab(oc.vocab_size)
    partial = pipeline.sum_partials(oc.backend.call(PrivateShard.dense_moments))
    # The public normaliser is the number of rows (an upper bound on the documents used, as the
    # sensitivities require); documents shorter than 3 tokens contribute zero.
    n_docs = int(sum(oc.backend.call(Shard.row_count)))
    res = dense.fit_dense(partial, params.k, params.moment_alpha0, mech, epsilon=epsilon, delta=delta,
                              rng=rng if reproducible else None, reproducible=reproducible,
                              n_restarts=params.n_restarts, n_iters=params.n_iters, n_docs=n_docs,
                              declared_bounds=declared_bounds)
    return {"topic_word": res.topic_word, "alpha": res.alpha, "ledger": res.ledger, "guarantee": res.guarantee,
            "assumptions": list(res.assumptions), "dense": res}


def _plural(n: int, what: str) -> str:
    """``"1 pass"``, ``"2 passes"``."""
    return f"{n} {what}{('es' if what.endswith('s') else 's') if n > 1 else ''}"


def _method(mech: str, r: private_pipeline.Refinement | None, d: int) -> str:
    """The report's one-line description of what the private fit did."""
    if r is None:
        return f"private spectral ({mech})"
    return (f"private spectral ({mech})"
            + (f" on the {r.working_vocab} most frequent words (noisy)" if r.working_vocab < d else "")
            + (" + private tail release (topics of the other words)" if r.tail else "")
            + (f" + {_plural(r.unmix, 'private unmixing pass')} on every word" if r.unmix else "")
            + (f" + {_plural(r.refine, 'private variational EM iteration')} on every word" if r.refine else ""))


def not_private_reasons(guarantee: str, noise_private: bool, vocab_report: dict) -> list[str]:
    """Why a private-mode fit is not private (empty when it is): its mechanism's guarantee, seeded noise,
    the vocabulary's provenance (:func:`vocabulary_entry`)."""
    reasons = []
    if guarantee != "proven":
        reasons.append(guarantee)
    elif not noise_private:
        reasons.append("reproducible (seeded) noise")
    if vocab_report.get("not_private"):
        reasons.append(vocab_report["not_private"])
    return reasons


def _report(fit, oc, params, mech, epsilon, delta, spent, seed, reproducible, length_cap, eta, backend,
            vocab_report, vocab_delta) -> dict:
    ledger: PrivacyLedger = fit["ledger"]
    r: private_pipeline.Refinement | None = fit.get("refinement")
    total_delta = delta + vocab_delta
    reasons = not_private_reasons(fit["guarantee"], ledger.private, vocab_report)
    details = {"guarantee": fit["guarantee"], "epsilon_fit": float(spent),
               "noise_source": "seeded generator (reproducible, NOT private)" if reproducible else "OS entropy",
               "vocabulary": vocab_report}
    if ledger.delta_reserved:  # a propose-test-release check: part of δ, outside the events
        details["delta_reserved"] = ledger.delta_reserved
    # The vocabulary's thresholding adds its δ on top of the ledger's (ε, δ) (distdp.privacy.vocabulary).
    privacy = PrivacyReport(
        private=not reasons, mechanism=mech, neighbour=REPLACE_ONE_DOCUMENT, epsilon=float(ledger.epsilon(delta)),
        delta=total_delta, requested_epsilon=epsilon, requested_delta=delta,
        accounting="tight: privacy loss distributions (Google dp-accounting), Gaussian releases composed "
                   "exactly (μ-GDP); noise multipliers calibrated jointly from (epsilon, delta)",
        not_private_because=tuple(reasons), assumptions=tuple(fit["assumptions"]),
        not_released=("per-document γ/φ", "evidence lower bound", "exact document and token counts",
                      "coherence on the training corpus", NOT_RECORDED),
        ledger=ledger, details=details).to_dict()
    stats = ({**fit["spectral"].result.stats, "vocab_size": oc.vocab_size} if "spectral" in fit else
             {"n_docs": int(sum(oc.backend.call(Shard.row_count))), "vocab_size": oc.vocab_size})
    info = {
        "method": _method(mech, r, oc.vocab_size),
        "parameters": {"k": params.k, "alpha0": params.alpha0, "model": params.model, "seed": seed,
                       "backend": backend, "workers": oc.backend.n_shards, "refine": r.refine if r else 0,
                       "unmix": r.unmix if r else 0,
                       "word_scale_power": scalable.WORD_SCALE_POWER if r and (r.unmix or r.refine) else None,
                       "spectral_word_scale_power": (scalable.SPECTRAL_WORD_SCALE_POWER
                                                     if r and r.scan and scalable.SPECTRAL_WORD_SCALE_POWER
                                                     else None),
                       "pass_support": (scalable.PASS_SUPPORT if r and r.unmix and params.model != "stm"
                                        else None),
                       "eta": eta if r and r.refine else None,
                       "refine_budget": r.refine_budget if r and r.active else None,
                       "length_cap": length_cap, "epsilon": epsilon, "delta": delta, "mechanism": mech,
                       "working_vocab": r.working_vocab if r else None, "norm_cap": fit.get("norm_cap")},
        "corpus": {"source": oc.source, **stats},
        "privacy": privacy,
    }
    if "spectral" in fit:
        info["m2_eigenvalues"] = fit["spectral"].result.m2_eigenvalues
        info["tensor_eigenvalues"] = fit["spectral"].result.tensor_eigenvalues
    return info
