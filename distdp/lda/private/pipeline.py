"""The releases of the private spectral fit and of private EM, and the private fit around them.

Pure like :mod:`distdp.lda.pipeline`: shards are reached through a ``Backend``,
and the loops are that module's: :func:`~distdp.lda.pipeline.fit_spectral` with
a :class:`PrivateRelease` (its stages: :class:`PrivateStages`) and
:func:`~distdp.lda.pipeline.refine_em` with a :class:`NoisyEMRelease`.
The shards return unnormalised sums of clipped per-document statistics; the
coordinator adds Gaussian noise once per release, records it in the
:class:`~distdp.privacy.ledger.PrivacyLedger`, and derives everything else
by post-processing. The releases and their sensitivities are listed in
:mod:`distdp.lda.private.scalable`.

Mechanisms:

* ``"whitened"`` — private whitening, then one noisy ``E3(W,W,W)`` (k×k×k,
  symmetric noise on its unique entries), decomposed without further cost.
  The whitening releases the raw second moment once (Analyze Gauss, Dwork
  et al. 2014) when ``config.dense_whitening``, as a d×d matrix or, with
  ``config.matrix_free``, through products only; else it runs the noisy power
  method on it (Hardt & Price 2014), never forming it.
* ``"power"`` — the same whitening, then the distributed DP tensor power
  method: each iteration releases ``Σ_shards E3(I,U,U)`` for the k current
  vectors (orthogonal iteration), never forming the k×k×k tensor.

With a working vocabulary (:func:`fit_lda_private_scalable`), one ``scan``
release on all words picks the ``h`` most frequent words; the spectral fit
runs on the documents restricted to them (whitening noise grows with √h,
not √d), and private EM then extends the topics to every word.

Nothing data-dependent steers the computation unless it was released:
the number of used documents, the clip bounds, every eigensolver step,
whether the dense whitening stops at its early rung or its first release or makes
its second (:func:`~distdp.lda.private.scalable.split_early`,
:func:`~distdp.lda.private.scalable.split_whitening`) and whether the fit
restarts on a larger working vocabulary (:func:`fit_lda_private_scalable`)
are functions of noisy releases only; the number of passes and iterations is fixed in advance, but
for the matrix-free whitening's eigensolver, whose products stop on a test of
the one noisy matrix they multiply (post-processing of that release).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from distdp.lda import moments, refine, whitening
from distdp.lda.pipeline import (Backend, RefineResult, SpectralParams, SpectralResult, Stages, WhitenedBasis,
                                 check_em_args, fit_spectral, matrix_key, refine_em, sum_partials)
from distdp.privacy import accounting, mechanisms
from distdp.lda.private import scalable
from distdp.lda.private.shard import PrivateShard
from distdp.lda.shard import Shard
from distdp.privacy.ledger import BudgetNotMetError, PrivacyLedger
from distdp.privacy.neighbours import REPLACE_ONE_DOCUMENT
from distdp.privacy.releases import PrivateReleases
from distdp.tensor.power import robust_power_method


@dataclass
class PrivateSpectral:
    """A private spectral fit: the result, its ledger and the released constants.

    Attributes
    ----------
    result : SpectralResult
        Only released or public quantities in ``stats``.
    ledger : PrivacyLedger
    n_docs_hat : float
        Noisy number of documents with ≥ 3 tokens (the moments' normaliser).
    tokens_hat : float
        Noisy total of the tokens, each document capped at ``length_cap``.
    clip : dict
        The clip bounds ``C1, C2, C3`` read off the noisy histograms.
    """

    result: SpectralResult
    ledger: PrivacyLedger
    n_docs_hat: float
    tokens_hat: float
    clip: dict


class _Noise:
    """The budget plan over :class:`~distdp.privacy.releases.PrivateReleases`: the planned Gaussian noise at the
    coordinator, each stage recorded once (on its first release, with the plan's multiplier and count)."""

    def __init__(self, plan: dict, rng: np.random.Generator, ledger: PrivacyLedger):
        self.plan, self.rng, self.ledger = plan, rng, ledger
        self.releases = PrivateReleases(ledger, rng, REPLACE_ONE_DOCUMENT)
        self._recorded: set = set()

    def sigma(self, stage: str, sensitivity: float) -> float:
        """The noise standard deviation of ``stage`` for a release of ``sensitivity``."""
        return self.plan[stage].multiplier * float(sensitivity)

    def add(self, stage: str, value: np.ndarray, sensitivity: float, *, record_sensitivity=None,
            note: str = "", symmetric2: bool = False, symmetric3: bool = False) -> np.ndarray:
        """``value`` + noise of σ = multiplier × ``sensitivity``; the first call of a stage records it."""
        sigma, kw = self._planned(stage, sensitivity, record_sensitivity, note)
        add = (self.releases.symmetric_matrix if symmetric2 else self.releases.symmetric_tensor if symmetric3
               else self.releases.gaussian)
        return add(stage, value, sigma, **kw)

    def operator(self, stage: str, d: int, sensitivity: float, *, note: str = "") -> mechanisms.SymmetricNoiseOperator:
        """The symmetric d×d noise of one ``stage`` release, never formed (its products only); records the stage."""
        sigma, kw = self._planned(stage, sensitivity, None, note)
        return self.releases.operator(stage, d, sigma, **kw)

    def _planned(self, stage: str, sensitivity: float, record_sensitivity, note: str) -> tuple[float, dict]:
        """σ of ``stage`` and the record's fields; ``record`` is true on the stage's first release only."""
        sn = self.plan[stage]
        formula = record_sensitivity is not None
        sigma = self.sigma(stage, sensitivity)
        first = stage not in self._recorded
        self._recorded.add(stage)
        return sigma, {"sensitivity": record_sensitivity if formula else float(sensitivity),
                       "noise_scale": f"{sn.multiplier:.6g} × sensitivity" if formula else float(sigma),
                       "multiplier": sn.multiplier, "count": sn.count, "note": note, "record": first}


class ColumnBackend:
    """The same shards, their documents restricted to ``columns`` (a working vocabulary).

    Every call runs :meth:`distdp.lda.shard.Shard.on_columns`; the restricted
    shards are built on first use and rebuilt after an actor restart.
    """

    def __init__(self, backend: Backend, columns: np.ndarray):
        self.backend, self.columns = backend, np.asarray(columns, dtype=np.int64)
        self.n_shards = backend.n_shards
        self._ref, self._key = backend.broadcast(self.columns), matrix_key(self.columns)

    def call(self, method: Callable, *args) -> list:
        """``<shard>.<method>(*args)`` on the restricted documents of every shard."""
        return self.backend.call(Shard.on_columns, self._ref, self._key, method, *args)

    def call_full(self, method: Callable, *args) -> list:
        """``<shard>.<method>(columns, key, *args)`` on the whole shards (a method that also reads the view)."""
        return self.backend.call(method, self._ref, self._key, *args)

    def broadcast(self, value):
        """As the underlying backend."""
        return self.backend.broadcast(value)


@dataclass
class Scan:
    """The ``scan`` release: noisy word frequencies and the EM clip bound.

    Attributes
    ----------
    frequencies : ndarray (d,)
        ``(Σ_n x_n/l_n + noise) / N``: the mean per-document word frequencies.
    norm_cap : float
        Quantile of ``‖x_n‖₂`` read off the noisy histogram: the EM clip bound.
    frequency_deviation : float
        The noise deviation of each frequency (public).
    """

    frequencies: np.ndarray
    norm_cap: float
    frequency_deviation: float = 0.0


def private_scan(backend: Backend, n_total: int, quantile: float, noise: "_Noise") -> Scan:
    """Release ``[Σ_n x_n/l_n, hist ‖x_n‖₂]`` on all words (sensitivity 2, no clipping)."""
    edges = scalable.log_grid(*scalable.COUNT_NORM_GRID)
    raw = sum_partials(backend.call(PrivateShard.private_scan, edges))
    noisy = noise.add("scan", raw, scalable.SCAN_SENSITIVITY,
                      note="[Σ_n x_n/l_n, histogram ‖x_n‖₂] on every word: working vocabulary and EM clip bound")
    d = raw.size - (len(edges) - 1)
    sigma = noise.sigma("scan", scalable.SCAN_SENSITIVITY)
    return Scan(noisy[:d] / n_total, scalable.quantile_from_histogram(noisy[d:], edges, quantile, sigma),
                sigma / n_total)


def _orthonormal(rng: np.random.Generator, n: int, p: int) -> np.ndarray:
    return np.linalg.qr(rng.standard_normal((n, p)))[0]


def _release_counts(backend, config, noise, n_total, scales=None):
    """Release 1: used-document count, capped token total and the norm histograms → N̂, tokens, C1, C2
    (the second moment's norms those of ``S m2_n S`` with word ``scales``)."""
    edges = scalable.log_grid(*scalable.NORM_GRID)
    raw = sum_partials(backend.call(PrivateShard.private_counts, config.length_cap, edges, edges, config.dense_whitening,
                                    scales))
    norm = "‖m2_n‖_u (unique entries)" if config.dense_whitening else "‖m2_n‖_F"
    norm = _scaled_note(norm, scales is not None)
    noisy = noise.add("counts", raw, scalable.COUNT_SENSITIVITY,
                      note=f"[n_used, Σ min(l, L)/L, histogram ‖m1_n‖, histogram {norm}]")
    n_hat = float(np.clip(noisy[0], 3.0, n_total))
    tokens_hat = max(float(noisy[1]) * config.length_cap, 3.0 * n_hat)
    nb = len(edges) - 1
    sigma = noise.sigma("counts", scalable.COUNT_SENSITIVITY)
    c1 = scalable.quantile_from_histogram(noisy[2:2 + nb], edges, config.quantile, sigma)
    c2 = scalable.quantile_from_histogram(noisy[2 + nb:], edges, config.quantile, sigma)
    return n_hat, tokens_hat, c1, c2


def _spectral_remedy(d: int, k: int, dense: bool = True) -> str:
    """What a user can change when the spectral stage's budget cannot be met on ``d`` words.

    ``dense``: the whitening released the second moment once (dense or
    matrix-free); if it released products instead (the power form), that
    form is named first, as it needs far less budget (k = 50: the power form
    failed up to ε = 16 where the dense one fits at ε = 8,
    ``benchmarks/private_large_k.py``).
    """
    smaller = max(k, min(d // 2, 40 * k))
    form = "" if dense else (
        "The whitening used the power form (noisy products with M2); releasing the second moment once has far "
        f"less noise: --whitening {scalable.whitening_form('auto', d)} (the default on {d} words). ")
    return (f"{form}Use a larger epsilon, more documents, a smaller k, a smaller working vocabulary (this stage ran on "
            f"{d} words; e.g. --working-vocab {smaller}, the whitening noise grows with √words while the frequent "
            f"words carry most of the signal) or, with a refinement, a smaller --refine-budget.")


@dataclass
class _WhiteningRelease:
    """What the whitening's release gives the rest of the fit.

    ``vals, vecs``: eigenpairs of the noisy ``M2`` (vectors in ``basis`` when
    it is not None, else in word space); ``e2``: the noisy ``E2`` (per
    document) in the same basis; ``sigma``: per-entry noise of the released
    sum (after any top-up); ``noise_p``: the ``p`` of
    :func:`~distdp.lda.private.scalable.whitening_noise_level` (0 for the
    second moment released once); ``topup``: the top-up's record or None;
    ``solver``: how the eigenpairs were computed (model.json).
    """

    vals: np.ndarray
    vecs: np.ndarray
    basis: np.ndarray | None
    e2: np.ndarray
    sigma: float
    noise_p: int
    topup: dict | None
    solver: dict


def _m2_release_notes(noise, d: int, matrix_free: bool, restart: float | None = None, scaled: bool = False) -> dict:
    """Ledger notes of the second moment's releases, by stage (only the plan's stages); ``restart``: the
    probe's threshold (:func:`_whitening_dense`); ``scaled``: with word scales."""
    form = ("never formed: its noise is regenerated block by block from a secret seed for each product "
            "(mechanisms.SymmetricNoiseOperator) and its eigenpairs found by LOBPCG" if matrix_free else "dense")
    note = _scaled_note(f"Σ g_n m2_n, {d}×{d}, {form}; symmetric noise on the unique entries, clipped in their "
                        "norm (Analyze Gauss, Dwork et al. 2014)", scaled)
    if "m2_whitening_topup" not in noise.plan:
        return {"m2_whitening": note}
    whole = scalable.whitening_mu2(noise.plan)
    share = {s: f"{noise.plan[s].mu2 / whole:.2g} of the whitening's budget"
             for s in scalable.WHITENING_PARTS if s in noise.plan}
    notes = {"m2_whitening": note + f"; the first of up to two releases ({share['m2_whitening']}, as the plan "
                                    f"split it; scalable.split_whitening)",
             "m2_whitening_topup": note + f"; the same sum with fresh noise ({share['m2_whitening_topup']}), "
                                          f"released because the first release's k-th eigenvalue was below "
                                          f"{scalable.WHITENING_TOPUP_SNR:g}× its noise level (public), averaged "
                                          f"with it by precision (scalable.split_whitening)"}
    part = _first_part(noise.plan)
    if part == "m2_whitening_early":
        notes[part] = (note + f"; the early rung ({share[part]}): when its k-th eigenvalue is at least "
                              f"{scalable.WHITENING_TOPUP_SNR:g}× its noise level (public) it is the whole whitening "
                              f"and m2_whitening and the top-up are not made (their budget to unmix_sstats), else "
                              f"it is averaged by precision with m2_whitening, the two making the first release "
                              f"(scalable.split_early)")
    elif part is not None:
        when = ("" if restart is None else f"when its k-th eigenvalue is at least {restart:.3g}× its noise level "
                                           f"(public) the fit restarts on more words (scalable.restart_plan), else ")
        notes[part] = (note + f"; a probe ({share[part]}): {when}it is averaged by precision with m2_whitening, "
                              f"the two making the first release (scalable.split_probe)")
    if part is not None:
        notes["m2_whitening"] = note + (f"; the same sum with fresh noise ({share['m2_whitening']}), averaged by "
                                        f"precision with {part}: together the first of up to two "
                                        f"releases (scalable.split_whitening)")
    return notes


#: Where the whitening's record (``corpus.whitening_topup``) keeps the ratio of the first release's first part.
_RATIO_KEY = {"m2_whitening_probe": "probe_ratio", "m2_whitening_early": "early_ratio"}


def _first_part(plan: dict) -> str | None:
    """The stage the first whitening release begins with, when it is made in two parts: the restart's probe
    or the early rung (:func:`~distdp.lda.private.scalable.split_probe`); ``None`` otherwise."""
    return next((s for s in scalable.WHITENING_FIRST_PARTS if s in plan), None)


class _Restart(Exception):
    """The whitening's probe asks for the restart on more words (its public ratio in ``ratio``)."""

    def __init__(self, ratio: float):
        super().__init__(f"restart: probe ratio {ratio:.3g}")
        self.ratio = ratio


def _release_snr(vals: np.ndarray, k: int, d: int, sigma: float, n_hat: float, shift: float) -> tuple[float, float]:
    """A whitening release's k-th eigenvalue and its public noise level (public quantities only)."""
    return (float(np.sort(vals)[::-1][min(k, d) - 1]),
            scalable.whitening_noise_level(sigma / n_hat, d, 0, shift))


def _whitening_record(first_release_ratio: float | None, made: bool, early: bool = False) -> dict:
    """The whitening's record (``corpus.whitening_topup``): the first release's ratio (None when the early
    rung was the whole whitening), whether the top-up was made, whether the early rung sufficed."""
    return {"first_release_ratio": first_release_ratio, "threshold": scalable.WHITENING_TOPUP_SNR,
            "made": made, "early": early}


def _topup_record(vals: np.ndarray, k: int, d: int, sigma: float, n_hat: float, shift: float) -> dict:
    """Whether the first release's k-th eigenvalue asks for the top-up (public quantities only)."""
    eig_k, level = _release_snr(vals, k, d, sigma, n_hat, shift)
    return _whitening_record(eig_k / level, scalable.needs_topup(eig_k, level))


def _whitening_dense(backend, d, k, coef, n_hat, m1, m1_var, c2, sens, noise, restart=None,
                     scales=None) -> _WhiteningRelease:
    """One noisy dense ``Σ g_n m2_n`` (Analyze Gauss), topped up when the plan allows and it falls short.

    The ``a2·v·I`` of ``M2`` shifts every eigenvalue by ``a2·v`` and leaves the
    eigenvectors: added to the eigenvalues, not as a d×d identity. With a
    ``m2_whitening_topup`` stage in the plan (:func:`distdp.lda.private.scalable.split_whitening`),
    the same sum is released again with fresh noise when the first release's
    k-th eigenvalue is below :data:`~distdp.lda.private.scalable.WHITENING_TOPUP_SNR`
    times its noise level, and the two are averaged by precision; the record
    (``None`` without that stage) says which happened. With a
    ``m2_whitening_probe`` or ``m2_whitening_early`` stage
    (:func:`~distdp.lda.private.scalable.split_probe`) the first release is
    made in two parts: after the probe, :class:`_Restart` is raised when its
    ratio is at least ``restart``; the early rung
    (:func:`~distdp.lda.private.scalable.split_early`) is the whole whitening
    when its ratio clears the top-up's threshold (the record's ``early``; the
    fit gives the unmade releases' μ² to the passes); else the second part is
    released and averaged with the first by precision.
    """
    total = sum_partials(backend.call(PrivateShard.private_m2_dense, c2, scales))
    notes = _m2_release_notes(noise, d, False, restart, scales is not None)
    shift = coef.a2 * m1_var

    def spectrum(e2_):
        vals_, vecs_ = np.linalg.eigh(e2_ / n_hat - coef.a2 * np.outer(m1, m1))
        return vals_ + shift, vecs_

    part_ratio, part = None, _first_part(noise.plan)
    if part is not None:
        e2 = noise.add(part, total, sens, symmetric2=True, note=notes[part])
        sigma = noise.sigma(part, sens)
        vals, vecs = spectrum(e2)
        eig_k, level = _release_snr(vals, k, d, sigma, n_hat, shift)
        part_ratio = eig_k / level
        if restart is not None and scalable.should_restart(part_ratio, restart):
            raise _Restart(part_ratio)
        if part == "m2_whitening_early" and not scalable.needs_topup(eig_k, level):     # the rung suffices
            early = {**_whitening_record(None, False, early=True), _RATIO_KEY[part]: part_ratio}
            return _WhiteningRelease(vals, vecs, None, e2 / n_hat, sigma, 0, early, {"form": "dense", "solver": "eigh"})
        rest = noise.add("m2_whitening", total, sens, symmetric2=True, note=notes["m2_whitening"])
        e2, sigma = scalable.combine_releases(e2, sigma, rest, noise.sigma("m2_whitening", sens))
        del rest
    else:
        e2 = noise.add("m2_whitening", total, sens, symmetric2=True, note=notes["m2_whitening"])
        sigma = noise.sigma("m2_whitening", sens)
    vals, vecs = spectrum(e2)
    topup = _topup_record(vals, k, d, sigma, n_hat, shift) if "m2_whitening_topup" in notes else None
    if topup is not None and part_ratio is not None:
        topup[_RATIO_KEY[part]] = part_ratio
    if topup is not None and topup["made"]:
        again = noise.add("m2_whitening_topup", total, sens, symmetric2=True, note=notes["m2_whitening_topup"])
        del total       # d×d; not needed once both releases are made
        e2, sigma = scalable.combine_releases(e2, sigma, again, noise.sigma("m2_whitening_topup", sens))
        del again
        vals, vecs = spectrum(e2)
    return _WhiteningRelease(vals, vecs, None, e2 / n_hat, sigma, 0, topup, {"form": "dense", "solver": "eigh"})


#: LOBPCG's residual tolerance in the matrix-free whitening, as a fraction of the release's noise level
#: (public): the solver's error in the top-k subspace, ≲ residual/gap, stays far below the noise's own.
MATRIX_FREE_TOL = 1e-3
#: ... and at least this fraction of the largest Ritz value: at a huge ε the noise level is below
#: M2's rounding, and iterating to it is wasted products.
MATRIX_FREE_REL_TOL = 1e-6
#: Most products of one matrix-free eigensolve.
MATRIX_FREE_MAX_PRODUCTS = 300


def _whitening_matrix_free(backend, d, k, p, coef, n_hat, m1, m1_var, c2, sens, noise, rng, st,
                           scales=None) -> _WhiteningRelease:
    """The dense form's release, top-up included, without a d×d matrix anywhere.

    The released matrix is ``Σ g_n m2_n + N`` exactly as in
    :func:`_whitening_dense`, but it is only ever multiplied: the shards
    return ``(Σ g_n m2_n) X`` (the same clipping by ``‖m2_n‖_u``) and the
    coordinator adds ``N X`` from a
    :class:`~distdp.privacy.mechanisms.SymmetricNoiseOperator`, which
    regenerates the same ``N`` for every product. The eigensolver
    (:func:`~distdp.lda.whitening.lobpcg_top_basis`, until the top k Ritz pairs
    have residuals below :data:`MATRIX_FREE_TOL` times the noise level; its
    last product gives the Rayleigh–Ritz pairs and ``E2`` in the basis) is a
    function of that one noisy matrix, stopping rule included:
    post-processing of one Gaussian release, like the dense form's ``eigh``.
    The top-up's solve starts from the first one's basis. Memory: O(d·p) per
    shard and one noise tile at the coordinator; time: d²/2 Gaussian draws
    per product (d² after a top-up: two noise matrices).
    """
    notes = _m2_release_notes(noise, d, True, scaled=scales is not None)
    ops = [(1.0, noise.operator("m2_whitening", d, sens, note=notes["m2_whitening"]))]
    sigma = noise.sigma("m2_whitening", sens)
    shift = coef.a2 * m1_var
    solver = {"form": "matrix-free", "solver": "lobpcg", "products": 0, "converged": True}

    def m2_apply(X):
        raw = sum_partials(backend.call(PrivateShard.private_m2_product, backend.broadcast(X), c2, True, scales))
        for weight, op in ops:
            raw = raw + weight * op.matmat(X)      # not in place: a single Ray shard's result is read-only
        solver["products"] += 1
        st.step("whitening", solver["products"], MATRIX_FREE_MAX_PRODUCTS)
        return raw / n_hat - coef.a2 * np.outer(m1, m1 @ X)

    def spectrum(sigma_, start):
        tol = MATRIX_FREE_TOL * scalable.whitening_noise_level(sigma_ / n_hat, d, 0, shift)
        eb = whitening.lobpcg_top_basis(m2_apply, start, k, tol, MATRIX_FREE_MAX_PRODUCTS, MATRIX_FREE_REL_TOL)
        qm = eb.basis.T @ m1
        m2q = eb.basis.T @ eb.product
        m2q = 0.5 * (m2q + m2q.T)
        vals_, vecs_ = np.linalg.eigh(m2q)
        solver["converged"] = solver["converged"] and eb.converged
        return vals_ + shift, vecs_, eb.basis, m2q + coef.a2 * np.outer(qm, qm)

    vals, vecs, Q, e2q = spectrum(sigma, _orthonormal(rng, d, p))
    topup = _topup_record(vals, k, d, sigma, n_hat, shift) if "m2_whitening_topup" in notes else None
    if topup is not None and topup["made"]:
        second = noise.operator("m2_whitening_topup", d, sens, note=notes["m2_whitening_topup"])
        w1, w2, sigma = scalable.precision_weights(sigma, noise.sigma("m2_whitening_topup", sens))
        ops[:] = [(w1, ops[0][1]), (w2, second)]
        vals, vecs, Q, e2q = spectrum(sigma, Q @ vecs[:, ::-1])
    return _WhiteningRelease(vals, vecs, Q, e2q, sigma, 0, topup, solver)


def _whitening_products(backend, d, p, coef, n_hat, m1, m1_var, c2, sens, config, noise, rng, st, scales=None):
    """Noisy subspace iteration on ``M2``, one release per product (the power form)."""
    Q = _orthonormal(rng, d, p)
    for i in range(config.eig_iters + 1):
        raw = sum_partials(backend.call(PrivateShard.private_m2_product, backend.broadcast(Q), c2, False, scales))
        e2q = noise.add("m2_whitening", raw, sens, note=_scaled_note(
            f"(Σ g_n m2_n) Q, Q orthonormal d×{p}; noisy power method (Hardt & Price 2014)", scales is not None)) / n_hat
        m2q = e2q - coef.a2 * np.outer(m1, m1 @ Q) + coef.a2 * m1_var * Q
        st.step("whitening", i + 1, config.eig_iters + 1)
        if i < config.eig_iters:
            Q = np.linalg.qr(m2q)[0]
    B = Q.T @ m2q
    vals, vecs = np.linalg.eigh(0.5 * (B + B.T))
    E = 0.5 * (Q.T @ e2q + (Q.T @ e2q).T)
    return _WhiteningRelease(vals, vecs, Q, E, noise.sigma("m2_whitening", sens), p, None,
                             {"form": "power", "products": config.eig_iters + 1})


def _whitening_description(solver: dict) -> str:
    """The spectral stats' ``whitening`` entry: ``dense``, ``matrix-free …`` or ``power method, … products``."""
    if solver["form"] == "dense":
        return "dense"
    if solver["form"] == "power":
        return f"power method, {solver['products']} products"
    return (f"matrix-free (LOBPCG, {solver['products']} products"
            f"{'' if solver['converged'] else ', stopped at its iteration cap before its tolerance'})")


def _private_whitening(backend, d, k, p, coef, n_hat, m1, m1_var, c2, config, noise, rng, st, restart=None,
                       scales=None):
    """Private whitening of ``M2 = E2 − a2 M̂1M̂1ᵀ + a2 v I``: (Whitening, E2(W,W), the release's record)."""
    sens = math.sqrt(2.0) * c2
    if _first_part(noise.plan) is not None and config.form != "dense":
        raise ValueError("a whitening probe or early rung (scalable.split_probe) needs the dense whitening")
    if config.form == "power":
        rel = _whitening_products(backend, d, p, coef, n_hat, m1, m1_var, c2, sens, config, noise, rng, st, scales)
    elif config.form == "matrix-free":
        rel = _whitening_matrix_free(backend, d, k, p, coef, n_hat, m1, m1_var, c2, sens, noise, rng, st, scales)
    else:
        rel = _whitening_dense(backend, d, k, coef, n_hat, m1, m1_var, c2, sens, noise, restart, scales)
        st.step("whitening", 1, 1)
    remedy = _spectral_remedy(d, k, config.dense_whitening)
    try:
        wh = whitening.top_k_from_symmetric(rel.vals, rel.vecs if rel.basis is None else rel.basis @ rel.vecs, k)
    except ValueError as err:
        raise BudgetNotMetError(f"the privacy budget cannot be met: the noisy second moment does not support "
                                f"k={k} topics ({err}). {remedy}") from None
    noise_level = scalable.whitening_noise_level(rel.sigma / n_hat, d, rel.noise_p, coef.a2 * m1_var)
    if wh.eigenvalues[-1] <= noise_level:
        raise BudgetNotMetError(
            f"the privacy budget cannot be met: the k-th eigenvalue of the noisy second moment, "
            f"{wh.eigenvalues[-1]:.3g}, is below the spectral norm of its noise, ≈ {noise_level:.3g} "
            f"({'2σ√d' if rel.noise_p == 0 else '2σ(√d + √p)'} + a2·v, public), so the top-{k} subspace would be "
            f"noise. {remedy}")
    V = rel.vecs[:, np.argsort(rel.vals)[::-1][:k]]
    e2w = (V.T @ rel.e2 @ V) / np.sqrt(np.outer(wh.eigenvalues, wh.eigenvalues))
    return wh, e2w, rel


def _tensor_clip(backend, W, W_ref, key, config, noise) -> float:
    """Release 4: histogram of the per-document tensor-norm bounds → C3 (``W_ref``: ``W`` as broadcast to the shards)."""
    r = float(np.sqrt(np.einsum("ij,ij->i", W, W)).max())
    lo, hi, nb = scalable.TENSOR_GRID
    edges = scalable.log_grid(lo * r ** 3, hi * r ** 3, nb)
    hist = sum_partials(backend.call(PrivateShard.private_tensor_bounds, W_ref, edges, key))
    noisy = noise.add("tensor_bounds", hist, scalable.HISTOGRAM_SENSITIVITY,
                      note="histogram of B_n ≥ ‖m3_n(W,W,W)‖_F on a grid scaled by max row norm of W (public)")
    return scalable.quantile_from_histogram(noisy, edges, config.tensor_quantile,
                                               noise.sigma("tensor_bounds", scalable.HISTOGRAM_SENSITIVITY))


def _explicit_tensor(backend, W_ref, c3, key, n_hat, assemble, noise):
    e3 = noise.add("whitened_tensor", sum_partials(backend.call(PrivateShard.private_tensor, W_ref, c3, key)), 2.0 * c3,
                   note="Σ h_n m3_n(W,W,W), symmetric noise on the C(k+2,3) unique entries", symmetric3=True)
    return assemble(e3 / n_hat)


def _power_iterations(backend, W_ref, k, c3, key, n_hat, assemble_apply, config, noise, rng, st):
    """Orthogonal iteration with one noisy ``Σ_shards E3(I,U,U)`` per step; eigenpairs from the last release."""
    U = _orthonormal(rng, k, k)
    for it in range(config.power_iters):
        raw = sum_partials(backend.call(PrivateShard.private_cube_apply, W_ref, c3, U, key))
        scale = float(np.linalg.norm(U, 2)) ** 2
        Z = noise.add("whitened_tensor", raw, 2.0 * c3 * scale, record_sensitivity=f"2·C3·‖U‖₂² = {2.0 * c3:.6g}·‖U‖₂²",
                      note="Σ_shards E3(I,u,u) for the k current vectors, one release per power iteration")
        TU = assemble_apply(Z / n_hat, U)
        lam = np.einsum("kl,kl->l", U, TU)
        st.step("power_iteration", it + 1, config.power_iters)
        if it < config.power_iters - 1:
            Qm, R = np.linalg.qr(TU)
            U = Qm * np.where(np.diag(R) < 0, -1.0, 1.0)[None, :]
    sign = np.where(lam < 0, -1.0, 1.0)
    lam, V = lam * sign, U * sign[None, :]
    order = np.argsort(lam)[::-1]
    return lam[order], V[:, order]


class PrivateRelease:
    """The release seam of a private spectral fit: :func:`~distdp.lda.pipeline.fit_spectral` with it runs
    :class:`PrivateStages` (clipped sums on the shards, Gaussian noise added once per release at the coordinator
    and recorded in the ledger).

    Parameters
    ----------
    config : PrivateSpectralConfig
    noise : _Noise
        The budget plan, its generator and the ledger the releases are recorded in.
    restart : float, optional
        The whitening probe's restart threshold (:func:`fit_spectral_private`).
    word_scales : ndarray (d,), optional
        As :func:`fit_spectral_private`.
    """

    private = True

    def __init__(self, config: scalable.PrivateSpectralConfig, noise: "_Noise", restart: float | None = None,
                 word_scales: np.ndarray | None = None):
        self.config, self.noise, self.restart = config, noise, restart
        self.word_scales = None if word_scales is None else np.asarray(word_scales, dtype=np.float64)

    def spectral_stages(self, backend: Backend, vocab_size: int, params: SpectralParams, rng: np.random.Generator,
                        stages: Stages) -> "PrivateStages":
        """The private stages of one fit (kept as ``fit``: its released constants outlive the loop)."""
        self.fit = PrivateStages(self, backend, vocab_size, params, rng, stages)
        return self.fit


class PrivateStages:
    """The private stages of :func:`~distdp.lda.pipeline.fit_spectral` (module docstring: the releases in order).

    After the fit, ``n_hat``, ``tokens_hat`` and ``clip`` hold the released constants
    (:class:`PrivateSpectral`).
    """

    def __init__(self, release: PrivateRelease, backend: Backend, vocab_size: int, params: SpectralParams,
                 rng: np.random.Generator, stages: Stages):
        self.release, self.backend, self.d, self.params, self.rng, self.st = (release, backend, vocab_size, params,
                                                                              rng, stages)
        self.config, self.noise, self.s = release.config, release.noise, release.word_scales
        self.coef = moments.MomentCoefficients(params.moment_alpha0)
        self.p = params.block_columns(vocab_size)

    def first_pass(self) -> None:
        """Release 1 (counts and norm histograms → N̂, tokens, C1, C2) and release 2 (``Σ f_n m1_n``)."""
        backend, noise, k = self.backend, self.noise, self.params.k
        self.n_total = int(sum(backend.call(Shard.row_count)))
        if self.n_total < max(3, k + 1):
            raise ValueError(f"too few documents: {self.n_total}; need at least max(3, k+1) = {max(3, k + 1)}")
        self.n_hat, self.tokens_hat, self.c1, self.c2 = _release_counts(backend, self.config, noise, self.n_total,
                                                                        self.s)
        sens1 = math.sqrt(2.0) * self.c1
        self.m1 = noise.add("m1", sum_partials(backend.call(PrivateShard.private_m1, self.c1)), sens1,
                            note="Σ f_n m1_n") / self.n_hat
        self.m1_var = (noise.plan["m1"].multiplier * sens1 / self.n_hat) ** 2

    def whiten(self) -> WhitenedBasis:
        """Release 3: the noisy second moment (:func:`_private_whitening`), in the word scales' coordinates."""
        s, m1, m1_var = self.s, self.m1, self.m1_var
        # Scaled, S m̂1's noise has covariance v·S²; its bias in the eigenvalues is taken as v·mean(s²)·I.
        wh, self.e2w, self.rel = _private_whitening(
            self.backend, self.d, self.params.k, self.p, self.coef, self.n_hat, m1 if s is None else s * m1,
            m1_var if s is None else m1_var * float(np.mean(s * s)), self.c2, self.config, self.noise, self.rng,
            self.st, self.release.restart, s)
        if s is None:
            return WhitenedBasis.of(wh)
        # M3(S·,S·,S·) whitened by W̃ is M3 whitened by S W̃; the topics come back through S⁻¹
        return WhitenedBasis(wh.eigenvalues, s[:, None] * wh.W, wh.unwhiten / s[:, None])

    def tensor(self, basis: WhitenedBasis, W_ref, key: str) -> None:
        """Release 4 (the tensor's clip bound C3) and, for ``mechanism="whitened"``, release 5: the noisy
        ``E3(W,W,W)`` assembled into the whitened tensor."""
        W, params = basis.W, self.params
        self.W_ref, self.key = W_ref, key
        self.m_w, self.gram = W.T @ self.m1, W.T @ W
        self.c3 = _tensor_clip(self.backend, W, W_ref, key, self.config, self.noise)
        if self.config.mechanism == "whitened":
            self.T = _explicit_tensor(self.backend, W_ref, self.c3, key, self.n_hat,
                                      lambda e3: scalable.assemble_tensor(e3, self.e2w, self.m_w, self.gram,
                                                                          self.m1_var, params.moment_alpha0),
                                      self.noise)

    def decompose(self, m: int) -> tuple[np.ndarray, np.ndarray]:
        """The released tensor's eigenpairs (post-processing), or the noisy power iterations
        (``mechanism="power"``, one release per iteration)."""
        params = self.params
        if self.config.mechanism == "whitened":
            kwargs = {k_: v for k_, v in (("n_restarts", params.n_restarts), ("n_iters", params.n_iters)) if v}
            res = robust_power_method(self.T, m, rng=self.rng, **kwargs)
            return np.asarray(res.eigenvalues), np.asarray(res.eigenvectors)
        return _power_iterations(
            self.backend, self.W_ref, m, self.c3, self.key, self.n_hat,
            lambda e3u, U: scalable.assemble_tensor_apply(e3u, U, self.e2w, self.m_w, self.gram, self.m1_var,
                                                          params.moment_alpha0),
            self.config, self.noise, self.rng, self.st)

    def output(self, topic_word: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Post-processing of the releases: unchanged."""
        return topic_word, alpha

    @property
    def clip(self) -> dict:
        """The clip bounds read off the noisy histograms."""
        return {"m1": self.c1, "m2": self.c2, "m3": self.c3}

    def stats(self) -> dict:
        config = self.config
        stats = {"n_docs": self.n_total, "n_docs_used_noisy": self.n_hat, "n_tokens_noisy": self.tokens_hat,
                 "vocab_size": self.d, "n_shards": self.backend.n_shards,
                 "tensor_path": "implicit" if config.mechanism == "power" else "explicit",
                 "whitening": _whitening_description(self.rel.solver), "clip": self.clip,
                 "clip_quantiles": {"m1": config.quantile, "m2": config.quantile, "m3": config.tensor_quantile}}
        if self.rel.topup is not None:
            stats["whitening_topup"] = self.rel.topup
        if self.s is not None:
            stats["whitening_word_scales"] = SCALES_NOTE
        return stats

    def solver(self) -> dict:
        """Said in ``stats()["whitening"]`` instead (a private result's ``whitening`` is empty)."""
        return {}


def fit_spectral_private(backend: Backend, vocab_size: int, params: SpectralParams,
                         config: scalable.PrivateSpectralConfig, rng: np.random.Generator,
                         ledger: PrivacyLedger | None = None, plan: dict | None = None,
                         progress: Callable | None = None, restart: float | None = None,
                         word_scales: np.ndarray | None = None) -> PrivateSpectral:
    """Private spectral LDA / single-topic fit (module docstring): :func:`~distdp.lda.pipeline.fit_spectral` with a
    :class:`PrivateRelease`.

    Parameters
    ----------
    backend : Backend
    vocab_size : int
    params : SpectralParams
        ``k``, ``alpha0``, ``model``, ``oversample`` and (for the robust
        decomposition of the released tensor) ``n_restarts``, ``n_iters``.
    config : PrivateSpectralConfig
    rng : numpy.random.Generator
        Noise and random starts: :func:`~distdp.privacy.mechanisms.private_generator`
        in private mode.
    ledger : PrivacyLedger, optional
        Appended to (e.g. after a vocabulary release).
    plan : dict, optional
        Noise multipliers from :func:`~distdp.lda.private.scalable.plan_noise`
        (when the budget is shared with private EM).
    restart : float, optional
        With a whitening probe in ``plan`` (:func:`~distdp.lda.private.scalable.split_probe`):
        the probe ratio from which :class:`_Restart` is raised (:func:`fit_lda_private_scalable`).
    word_scales : ndarray (d,), optional
        Public or released positive word scales ``s`` (:func:`~distdp.lda.private.scalable.spectral_word_scales`):
        the second moment is whitened as ``S M2 S`` (``S = diag(s)``, each document clipped in that norm), the
        tensor with ``W' = S W̃``, and the topics recovered through ``S⁻¹``, so that the moments' topics are
        unchanged while words that every topic uses weigh less against the noise.

    Raises
    ------
    ValueError
        Bad parameters, or a budget that the data cannot support (noisy σ_k ≤ 0).
    """
    config.validate()
    ledger = ledger if ledger is not None else PrivacyLedger()
    release = PrivateRelease(config, _Noise(plan or scalable.plan_noise(config), rng, ledger), restart, word_scales)
    result = fit_spectral(backend, vocab_size, params, rng, releases=release, progress=progress)
    return PrivateSpectral(result, ledger, release.fit.n_hat, release.fit.tokens_hat, release.fit.clip)


#: How the ledger and the spectral stats name the whitening's word scales (fit_lda_private_scalable).
SCALES_NOTE = "S = diag(s): word scales from the scan's released frequencies (scalable.spectral_word_scales)"


def _scaled_note(note: str, scaled: bool) -> str:
    """A second-moment release's ledger note, its ``m2_n`` named ``S m2_n S`` and :data:`SCALES_NOTE` added
    when the release is of the word-scaled moment; else ``note`` unchanged."""
    return f"{note.replace('m2_n', 'S m2_n S')}; {SCALES_NOTE}" if scaled else note


#: Threshold ``t`` (in noise deviations) of the noisy EM statistics and unmixing solves (post-processing,
#: ``scalable.threshold_noisy``: firm, 0 below 0.75t, kept above 1.5t). Measured on synthetic corpora
#: (d = 5,000): the hard threshold at 2σ (before the firm one) beat the floor at 0 by ~1.5× in topic L1.
EM_THRESHOLD = 2.0
#: Default working vocabulary per topic when a refinement extends the topics to every word (at most
#: ``scalable.DENSE_WHITENING_MAX_WORDS`` words: :func:`check_working_vocab`).
WORKING_VOCAB_PER_TOPIC = 100


def refine_em_private(backend: Backend, topic_word: np.ndarray, alpha: np.ndarray, tokens_hat: float,
                      n_iter: int, eta: float, norm_cap: float, multiplier: float, rng: np.random.Generator,
                      ledger: PrivacyLedger, progress: Callable | None = None, max_inner: int = 100,
                      tol: float = 1e-3, threshold: float = EM_THRESHOLD, *, frequencies: np.ndarray,
                      scale_power: float = scalable.WORD_SCALE_POWER) -> RefineResult:
    """Private batch variational EM: Gaussian noise on each iteration's summed statistics.

    Each shard runs the E-step and scales every document's statistic
    ``x_n ∘ φ_n`` by ``w_n = C/‖(x_n ∘ φ_n)∘S‖_F`` (``C = norm_cap``); the
    coordinator sums ``Σ_n w_n (x_n ∘ φ_n)∘S`` (k×d), adds
    ``N(0, (multiplier·√2·C)²)`` once, divides ``S`` out, sets the entries
    below ``threshold`` of their noise deviations (``σ/S``) to 0 and takes
    ``λ = η + that``. ``S`` are the word scales of
    :func:`~distdp.lda.private.scalable.word_scales` from the current topics
    and the scan's ``frequencies``: one E-step from
    the true topics of the ``lda_privacy_utility`` corpus (N = 2·10⁵) with
    the noise of the whole ε = 1 budget gave L1 0.050 with them, 0.062 with
    scales from the frequencies alone and 0.069 without (0.018 without noise
    in all three). The per-document γ/φ, the evidence bound and the inner
    iteration counts stay on the shards (``elbo`` and ``inner_iterations``
    are empty). The loop is the non-private one, :func:`distdp.lda.pipeline.refine_em`,
    with :class:`NoisyEMRelease` as its release.
    """
    check_em_args(n_iter, eta)
    if n_iter == 0:
        return RefineResult(refine.init_lambda(topic_word, alpha, tokens_hat, eta), [], [], [])
    release = NoisyEMRelease(PrivateReleases(ledger, rng, REPLACE_ONE_DOCUMENT), norm_cap, multiplier, eta,
                             frequencies, scale_power, threshold)
    release.record(n_iter, int(np.prod(topic_word.shape)))
    return refine_em(backend, topic_word, alpha, tokens_hat, n_iter, eta, release, progress, max_inner, tol)


class NoisyEMRelease:
    """The release of private EM's summed statistics (``em_sstats``), for :func:`distdp.lda.pipeline.refine_em`.

    Before each E-step it gives the shards the clip bound ``C`` and the word
    scales ``S`` from the current topics (:meth:`e_step_args`); it adds
    ``N(0, σ²)``, ``σ = multiplier·√2·C``, to the scaled sum, divides ``S``
    out and thresholds (:meth:`release`). The noise is drawn by ``releases``,
    the release recorded once for all iterations (:meth:`record`).
    """

    private = True

    def __init__(self, releases: PrivateReleases, norm_cap: float, multiplier: float, eta: float,
                 frequencies: np.ndarray, scale_power: float, threshold: float):
        self.releases, self.norm_cap, self.multiplier, self.eta = releases, float(norm_cap), multiplier, eta
        self.frequencies, self.scale_power, self.threshold = frequencies, scale_power, threshold
        self.sensitivity = scalable.em_sensitivity(norm_cap)
        self.sigma = multiplier * self.sensitivity
        self.scales = None

    def record(self, n_iter: int, size: int) -> None:
        """Record the ``n_iter`` releases of ``size`` entries each (before the first; each adds its noise with
        ``record=False``)."""
        releases = self.releases
        releases.record("em_sstats", "gaussian", self.sensitivity, self.sigma, n_iter,
                        accounting.gaussian_event(self.multiplier, n_iter),
                        f"Σ_n w_n (x_n∘φ_n)∘S (k×d) per EM iteration, w_n = {self.norm_cap:.4g}/‖(x_n∘φ_n)∘S‖_F, "
                        f"word scales S = b^(-{self.scale_power:.3g}) from the current topics and the scan "
                        f"(word_scales); divided by S, " + scalable.threshold_note(self.threshold, "σ/S"),
                        releases.sampler("gaussian", size))

    def e_step_args(self, lam: np.ndarray, backend) -> tuple:
        """``(C, S, relative_tol=False)`` for the shards' E-step; ``S`` from the topics ``λ − η`` and the scan."""
        self.scales = scalable.word_scales(lam - self.eta, self.frequencies, self.scale_power)
        return self.norm_cap, backend.broadcast(self.scales), False

    def release(self, edge: str, sstats: np.ndarray) -> np.ndarray:
        """``sstats`` (the clipped, scaled sum) with its noise, ``S`` divided out, thresholded."""
        noisy = self.releases.gaussian(edge, sstats * self.scales, self.sigma, self.sensitivity,
                                       record=False) / self.scales
        return scalable.threshold_noisy(noisy, self.sigma / self.scales, self.threshold)


def _release_unmix(parts: list, stage: str, norm_cap: float, noise: _Noise, gram_note: str, q_note: str,
                   threshold: float, symmetric: bool, scales: np.ndarray | None = None,
                   diagonal: bool = False, previous: np.ndarray | None = None) -> scalable.UnmixedTopics:
    """Noisy ``G`` (``<stage>_gram``) and ``Q`` (``<stage>_sstats``) from the shards' ``(Q, G)``, solved for the topics.

    A symmetric ``G`` is released on its unique entries; the sensitivities
    are :func:`~distdp.lda.private.scalable.tail_sensitivities` either way.
    ``diagonal``: ``G`` is diagonal by construction (single-topic θ̂)
    (:func:`~distdp.lda.private.scalable.unmix_diagonal`; a topic without
    documents above the noise keeps its row of ``previous``). Where ``scales``
    are 0 (a pass's support, :func:`~distdp.lda.private.scalable.pass_support`)
    ``Q`` is 0 and is released on the other entries only.
    """
    sens_q, sens_g = scalable.tail_sensitivities(norm_cap)
    gram = sum_partials([p_[1] for p_ in parts])
    if symmetric:
        iu = np.triu_indices(gram.shape[0])
        upper = np.zeros_like(gram)
        upper[iu] = noise.add(f"{stage}_gram", gram[iu], sens_g, note=gram_note)
        gram = upper + np.triu(upper, 1).T
    else:
        gram = noise.add(f"{stage}_gram", gram, sens_g, note=gram_note)
    q = np.array(sum_partials([p_[0] for p_ in parts]))    # a copy: a single Ray actor's result is read-only
    released = np.ones(q.shape, dtype=bool) if scales is None else scales > 0   # a pass's support (pass_support)
    q[released] = noise.add(f"{stage}_sstats", q[released], sens_q, note=q_note)
    return scalable.unmix_topics(q, gram, noise.sigma(f"{stage}_sstats", sens_q), threshold, symmetric=symmetric,
                                    scales=scales, diagonal=diagonal, sigma_g=noise.sigma(f"{stage}_gram", sens_g),
                                    previous=previous)


#: How an unmixing release's ``θ̂_n`` is estimated, and what its solve does with G (ledger notes), by ``single_topic``.
_MIXTURE = {False: "the E-step's posterior mean", True: "one-hot single-topic posterior mode"}
_DIAGONAL_NOTE = {False: "", True: "; G diagonal by construction (its noisy off-diagonal entries unused), a topic "
                                   "whose G_ii is not above the threshold keeps its start (scalable.unmix_diagonal)"}


def unmix_tail_private(view: ColumnBackend, topic_word: np.ndarray, alpha: np.ndarray,
                       norm_cap: float, noise: _Noise, threshold: float = EM_THRESHOLD, max_inner: int = 100,
                       tol: float = 1e-3, single_topic: bool = False, frequencies: np.ndarray | None = None,
                       scale_power: float = scalable.WORD_SCALE_POWER) -> scalable.UnmixedTopics:
    """Topics on every word from the fit on ``view``'s working vocabulary (``tail_gram``, ``tail_sstats``).

    Each document's mixture ``θ̂_n`` is estimated on its working words alone;
    the coordinator releases ``G = Σ w_n l_n θ̂_nθ̂_nᵀ`` (unique entries) and
    ``Q = Σ w_n θ̂_n x_nᵀ`` with Gaussian noise and solves ``β̂ = G⁻¹Q``
    (:func:`distdp.lda.private.scalable.unmix_topics`). Unlike an EM
    iteration from topics flat outside the working vocabulary, which spreads
    each such word over every topic its documents mix (≈ 45% of its mass on
    wrong topics at Σα = 1), the solve undoes that mixing in one release.
    With ``frequencies`` (the scan's; LDA only) its words are scaled as the
    pass's are (:func:`unmix_private`): ``Q = Σ w_n (θ̂_n x_nᵀ)∘S``, ``w_n``
    setting ``‖(θ̂_n x_nᵀ)∘S‖_F`` to the sensitivity, ``β̂ = G⁻¹(Q/S)``,
    with the scales ``S`` of :func:`~distdp.lda.private.scalable.word_scales`
    from the spectral topics extended by the frequencies
    (:func:`~distdp.lda.private.scalable.embed_topics`). On the
    ``lda_privacy_utility`` corpus (ε = 1, N = 10⁶, noise seed 10) that took
    the tail's solve from L1 0.0667 to 0.0620 and the default's result from
    0.0267 to 0.0264 (docs/design/private-fit.md, *The tail release*). ``single_topic``: ``θ̂_n``
    is the one-hot of the document's single-topic posterior mode on its
    working words (``alpha`` the topic weights), so ``G`` is diagonal and a
    topic no document reaches keeps its start (zero off the working words);
    its words are not scaled.
    """
    start = np.maximum(topic_word, 1e-12)
    start = start / start.sum(axis=1, keepdims=True)
    scales = None
    if frequencies is not None and not single_topic:
        d = np.asarray(frequencies).shape[0]
        scales = scalable.word_scales(scalable.embed_topics(topic_word, view.columns, frequencies, d),
                                         frequencies, scale_power)
    parts = view.call_full(PrivateShard.tail_statistics, start, alpha, float(norm_cap), max_inner, tol, single_topic,
                           None if scales is None else view.broadcast(scales))
    scaled = "" if scales is None else "∘S"
    norm = "‖θ̂_n‖₂‖x_n‖₂" if scales is None else "‖(θ̂_n x_nᵀ)∘S‖_F"
    rule = (f"w_n = min({norm_cap:.4g}/{norm}, {norm_cap:.4g}²/(‖θ̂_n‖₂²‖x_n‖₁)), "
            f"θ̂_n {_MIXTURE[single_topic]} from the working words")
    if scales is not None:
        rule += (f", word scales S = b^(-{scale_power:.3g}) from the spectral topics extended by the scan's "
                 f"frequencies (word_scales, embed_topics)")
    previous = None
    if single_topic:
        previous = np.zeros((start.shape[0], parts[0][0].shape[1]))    # Q is k×d
        previous[:, view.columns] = topic_word
    return _release_unmix(parts, "tail", norm_cap, noise, f"unique entries of Σ_n w_n l_n θ̂_nθ̂_nᵀ (k×k), {rule}",
                          f"Σ_n w_n (θ̂_n x_nᵀ){scaled} (k×d), {rule}; β̂ = G⁻¹(Q{'/S' if scaled else ''}), "
                          + scalable.threshold_note(threshold) + _DIAGONAL_NOTE[single_topic], threshold,
                          symmetric=True, scales=scales, diagonal=single_topic, previous=previous)


def unmix_private(backend: Backend, start: scalable.UnmixedTopics, alpha: np.ndarray, scan: Scan, noise: _Noise,
                  passes: int, threshold: float = EM_THRESHOLD, max_inner: int = 100, tol: float = 1e-3,
                  progress: Callable | None = None, scale_power: float = scalable.WORD_SCALE_POWER,
                  single_topic: bool = False,
                  support_threshold: float | None = scalable.PASS_SUPPORT) -> np.ndarray:
    """``passes`` unmixing releases on every word (``unmix_gram``, ``unmix_sstats``), each from the last.

    Each pass estimates every document's mixture ``θ̂_n`` on all its words
    under the current topics (``start``'s, then the last pass's), every
    entry their solve set to 0 raised to
    :data:`~distdp.lda.private.scalable.MIXTURE_FLOOR` of its noise deviation
    (:func:`~distdp.lda.private.scalable.mixture_topics`); with ``g_n = θ̂_n²/‖θ̂_n²‖₂``
    (:func:`~distdp.lda.private.scalable.pass_weights`) the coordinator
    releases ``G = Σ w_n l_n g_n θ̂_nᵀ`` (all k² entries) and
    ``Q = Σ w_n (g_n x_nᵀ)∘S`` with Gaussian noise and solves ``β̂ = G⁻¹(Q/S)``
    (:func:`distdp.lda.private.scalable.unmix_pass_statistics`); the word
    scales ``S`` (:func:`~distdp.lda.private.scalable.word_scales`, power
    ``scale_power``) come from the current topics and ``scan``'s frequencies
    and ``scan.norm_cap`` is ``C``. From the tail
    release's topics one pass (then with one-hot ``g_n``) left L1 0.036 where
    two private EM iterations leave 0.043 (ε = 1, N = 10⁶,
    ``benchmarks/lda_privacy_utility.py``; both scale every document to the
    sensitivity and their words by ``S``; 0.042 and 0.050 without ``S``): EM
    splits each word between topics by its start's own ratios and keeps the
    zeros of its start; the solve is a fresh estimate of every word's topics.
    Unless ``support_threshold`` is ``None``, a pass whose start has a solve
    releases only the entries that solve puts above ``support_threshold`` of
    its noise deviations (:func:`~distdp.lda.private.scalable.pass_support`; its
    word scales are 0 elsewhere) and solves each word on them.
    ``single_topic``: ``θ̂_n`` is the one-hot of the document's single-topic
    posterior mode (``alpha`` the topic weights), so ``g_n = θ̂_n``, ``G`` is
    diagonal and ``β̂_i`` is row i of ``Q/S`` over ``G_ii``; its passes release
    every entry. Each pass's solve
    is averaged with its start's (the tail release's, then the running
    average) by precision, the start's solve first mapped onto this pass's
    mixing of the topics (:func:`~distdp.lda.private.scalable.align_mixing`)
    and its variance inflated by the bias left
    (:func:`~distdp.lda.private.scalable.combine_unmixed`); a start without a
    solve (a spectral start) is not averaged in.
    """
    norm_cap = scan.norm_cap
    floor_note = (f" under the current topics with each zeroed entry at {scalable.MIXTURE_FLOOR:g} of its noise "
                  f"deviation (mixture_topics)")
    rule = (f"g_n = θ̂_n^{scalable.UNMIX_SHARPEN:g}/‖θ̂_n^{scalable.UNMIX_SHARPEN:g}‖₂, "
            f"θ̂_n {_MIXTURE[single_topic]} from all words{'' if single_topic else floor_note}, "
            f"w_n = min({norm_cap:.4g}/‖(g_n x_nᵀ)∘S‖_F, {norm_cap:.4g}²/(‖θ̂_n‖₂‖x_n‖₁)), "
            f"word scales S = b^(-{scale_power:.3g}) from the current topics and the scan (word_scales)")
    on_support = not single_topic and support_threshold is not None
    support_note = ("" if not on_support else
                    f", released where the pass's start has a solve only on the entries that solve puts above "
                    f"{support_threshold:g} noise deviations and each word's largest, S = 0 elsewhere (pass_support), "
                    f"each word solved on its released entries (solve_on_support)")
    combine_note = (" averaged by precision with the previous release's solve, mapped onto this release's mixing "
                    "of the topics (align_mixing), whose variance is inflated by its measured bias (combine_unmixed)"
                    ) if start.solve is not None or passes > 1 else ""
    for t in range(passes):
        topic_word = start.topic_word
        scales = scalable.word_scales(topic_word, scan.frequencies, scale_power)
        support = scalable.pass_support(start, support_threshold) if on_support else None
        if support is not None:
            scales = scales * support
        mix = topic_word if single_topic else scalable.mixture_topics(start, scalable.MIXTURE_FLOOR)
        parts = backend.call(PrivateShard.unmix_statistics, backend.broadcast(mix), alpha, float(norm_cap), max_inner,
                             tol, backend.broadcast(scales), single_topic)
        solved = _release_unmix(parts, "unmix", norm_cap, noise,
                                f"Σ_n w_n l_n g_n θ̂_nᵀ (k×k, all entries) per pass, {rule}",
                                f"Σ_n w_n (g_n x_nᵀ)∘S (k×d) per pass, {rule}{support_note}; β̂ = G⁻¹(Q/S)"
                                + combine_note + ", " + scalable.threshold_note(threshold)
                                + _DIAGONAL_NOTE[single_topic], threshold,
                                symmetric=False, scales=scales, diagonal=single_topic, previous=topic_word)
        start = scalable.combine_unmixed(start, solved, threshold)
        if progress is not None:
            progress("unmix", t + 1, passes)
    return start.topic_word


@dataclass
class PrivateLDA:
    """A private LDA fit: spectral start on a working vocabulary, then private refinement on every word.

    Attributes
    ----------
    topic_word : ndarray (k, d)
    alpha : ndarray (k,)
    spectral : PrivateSpectral
        The spectral fit on the working vocabulary (its ``topic_word`` is over ``columns``).
    columns : ndarray
        The working vocabulary (all ``d`` words when none was chosen).
    scan : Scan or None
        The scan release, when one was made.
    em : RefineResult or None
        The private EM iterations, when any were run.
    """

    topic_word: np.ndarray
    alpha: np.ndarray
    spectral: PrivateSpectral
    columns: np.ndarray
    scan: Scan | None
    em: RefineResult | None


@dataclass(frozen=True)
class Refinement:
    """What a scalable private LDA fit does after its spectral stage, defaults resolved.

    Attributes
    ----------
    working_vocab : int
        Words the spectral stage runs on.
    scan : bool
        A scan release is made (a refinement follows, or ``working_vocab`` is smaller
        than the vocabulary).
    tail : bool
        A tail release gives the other words their topics (a refinement follows and
        ``working_vocab`` is smaller than the vocabulary).
    unmix : int
        One-hot unmixing passes.
    refine : int
        Private EM iterations.
    refine_budget : float
        The refinement's fraction of the budget left after the scan.
    adaptive : bool
        ``working_vocab="auto"``: the default's size, and the fit may restart on more words
        (:func:`fit_lda_private_scalable`).
    """

    working_vocab: int
    scan: bool
    tail: bool
    unmix: int
    refine: int
    refine_budget: float
    adaptive: bool = False

    @property
    def active(self) -> bool:
        """Whether anything follows the spectral stage."""
        return bool(self.unmix or self.refine)


def check_working_vocab(working_vocab, d: int, k: int, refine: bool) -> int:
    """The working vocabulary size: ``working_vocab``, checked, or by default (``None`` or ``"auto"``,
    which may restart on more words: :func:`fit_lda_private_scalable`) ``min(d, 100·k, 4000)`` when a
    refinement extends the topics to every word, else ``d``.

    The 4,000 (:data:`~distdp.lda.private.scalable.DENSE_WHITENING_MAX_WORDS`)
    keeps the default's whitening dense for k > 40 too: with the power form on
    100·k words, k = 50 failed up to ε = 16 where the dense form on 4,000 words
    fits from ε = 8 (``benchmarks/private_large_k.py``; docs/design/private-fit.md, *Large k*).
    """
    if working_vocab is None or working_vocab == "auto":
        cap = max(k, min(WORKING_VOCAB_PER_TOPIC * k, scalable.DENSE_WHITENING_MAX_WORDS))
        return min(d, cap) if refine else d
    if isinstance(working_vocab, (bool, str)) or int(working_vocab) != working_vocab or not k <= working_vocab <= d:
        raise ValueError(f"working_vocab must be 'auto' or an integer in [k, vocabulary size] = [{k}, {d}], "
                         f"got {working_vocab!r}")
    return int(working_vocab)


def _working_vocabulary(backend: Backend, scan: Scan | None, h: int, d: int):
    """The ``h`` most frequent words by the scan (every word when ``h = d``), their share of the tokens
    (:func:`~distdp.lda.private.scalable.working_share`; 1 without a scan) and the backend restricted to them."""
    columns = scalable.working_columns(scan.frequencies, h) if h < d else np.arange(d)
    share = scalable.working_share(scan.frequencies, columns) if scan is not None else 1.0
    return columns, share, (ColumnBackend(backend, columns) if h < d else backend)


def _spectral_scales(scan: Scan | None, columns: np.ndarray, power: float) -> np.ndarray | None:
    """The spectral stage's word scales over the working ``columns`` from the scan's released frequencies
    (:func:`~distdp.lda.private.scalable.spectral_word_scales`); None without a scan or with ``power`` 0."""
    return None if scan is None else scalable.spectral_word_scales(scan.frequencies[columns], power,
                                                                    scan.frequency_deviation)


def _restart_gate(r: Refinement, d: int, params: SpectralParams, config: scalable.PrivateSpectralConfig,
                  plan: dict, share: float) -> dict | None:
    """Whether the fit probes its default working vocabulary's whitening for a restart on more words.

    ``None`` when it cannot restart: a working vocabulary not asked to be
    ``"auto"``, a model other than LDA (measured on LDA only), no dense whitening split into
    a first release and a top-up before unmixing passes, or no more words to
    grow to (:func:`~distdp.lda.private.scalable.restart_vocab`). Otherwise the
    record for ``model.json``, whose ``probed`` says whether the working words
    hold less than :data:`~distdp.lda.private.scalable.RESTART_TOKEN_SHARE` of
    the tokens (``share``, post-processing of the scan).
    """
    h1 = scalable.restart_vocab(r.working_vocab, d)
    if not (r.adaptive and h1 > r.working_vocab and _splits_first_release(params, config, plan)):
        return None
    return {"words": r.working_vocab, "restart_words": h1, "token_share": share,
            "token_share_threshold": scalable.RESTART_TOKEN_SHARE,
            "probed": share < scalable.RESTART_TOKEN_SHARE, "threshold": None, "probe_ratio": None, "made": False}


def _splits_first_release(params: SpectralParams, config: scalable.PrivateSpectralConfig, plan: dict) -> bool:
    """Whether the whitening's first release can be made in two parts, a probe for the restart
    (:func:`_restart_gate`) or the early rung (:func:`~distdp.lda.private.scalable.split_early`): an LDA
    fit (measured on LDA only) whose dense whitening is split into a first release and a top-up before
    unmixing passes."""
    return (params.model == "lda" and "m2_whitening_topup" in plan and "unmix_sstats" in plan
            and config.form == "dense")


def _discard(ledger: PrivacyLedger, first: int, plan: dict, h: int, h1: int) -> float:
    """Mark the probe's releases (``ledger.releases[first:]``) as discarded; return their μ² (``plan``'s)."""
    lost = 0.0
    for i in range(first, len(ledger.releases)):
        rel = ledger.releases[i]
        lost += plan[rel.stage].mu2
        ledger.releases[i] = dataclasses.replace(
            rel, stage=rel.stage if rel.stage.endswith("_probe") else f"{rel.stage}_probe",
            note=f"{rel.note}; discarded: made on the default working vocabulary ({h} words) before the probe "
                 f"restarted the fit on {h1} words, its budget taken from unmix_sstats (scalable.restart_plan)")
    return lost


def fit_lda_private_scalable(backend: Backend, vocab_size: int, params: SpectralParams,
                             config: scalable.PrivateSpectralConfig, rng: np.random.Generator,
                             ledger: PrivacyLedger, plan: dict, refinement: Refinement, *, eta: float = 0.1,
                             progress: Callable | None = None,
                             scale_power: float | None = None) -> PrivateLDA:
    """Private LDA: scan, spectral fit on the working vocabulary, tail release, unmixing passes, private EM.

    The whitening's early rung (:func:`_splits_first_release`): before unmixing passes
    the whitening's first release begins with
    :data:`~distdp.lda.private.scalable.WHITENING_EARLY_SHARE` of its μ²
    (:func:`~distdp.lda.private.scalable.split_early`); where that release's
    k-th eigenvalue already clears the top-up's threshold it is the whole
    whitening, and the rest of the first release and the top-up go to the
    passes' Q (``corpus.whitening_topup.early``). Else the fit goes on as
    without it.

    The working vocabulary's restart (``refinement.adaptive``, ``--working-vocab auto``;
    :func:`_restart_gate`): when the default's working words hold less than
    :data:`~distdp.lda.private.scalable.RESTART_TOKEN_SHARE` of the tokens (the
    scan's noisy frequencies), the whitening's first release is made in two
    parts (:func:`~distdp.lda.private.scalable.split_probe`). If the first
    part's k-th eigenvalue is at least
    :func:`~distdp.lda.private.scalable.restart_snr` times its noise level, the
    releases made so far (counts, m1, the probe) are kept in the ledger as
    discarded (``*_probe``) and the spectral stage runs again on
    :func:`~distdp.lda.private.scalable.restart_vocab` words, its plan
    :func:`~distdp.lda.private.scalable.restart_plan` (the discarded μ² taken
    from the passes' Q); else the second part is released and averaged with
    the probe, which is the fit without a probe in distribution. Why: the tail
    release's θ̂_n see only the working words' tokens, and more of them make
    the tail's solve better where the whitening has margin to spare; the
    passes then gained on synthetic topics and lost on topics fitted from real
    text (docs/design/private-fit.md, *The working vocabulary's size*), hence opt-in. Privacy: every branch is
    chosen from released values and spends the plan's total μ² (Smith &
    Thakurta 2022, as :func:`~distdp.lda.private.scalable.split_whitening`).
    ``model.json`` records the decision under ``corpus.working_vocab_restart``.

    Parameters
    ----------
    backend : Backend
    vocab_size : int
    params : SpectralParams
    config : PrivateSpectralConfig
    rng : numpy.random.Generator
    ledger : PrivacyLedger
    plan : dict
        Noise multipliers of every stage (:func:`distdp.lda.private.fit.budget_plan`): ``"scan"`` when
        ``refinement.scan``, ``"tail_gram"`` and ``"tail_sstats"`` when ``refinement.tail``
        (:func:`unmix_tail_private`; without them a refinement starts from
        :func:`~distdp.lda.private.scalable.embed_topics`), ``"unmix_gram"`` and ``"unmix_sstats"``
        when ``refinement.unmix > 0``, ``"em_sstats"`` when ``refinement.refine > 0``.
    refinement : Refinement
        What follows the spectral stage, defaults resolved
        (:func:`distdp.lda.private.fit.resolve_refinement`). Without a refinement the topics are zero
        outside the working vocabulary.
    eta : float
        EM topic-word smoothing.
    scale_power : float, optional
        Power of the spectral stage's word scales from the scan (:func:`_spectral_scales`; 0: none); by default
        :data:`~distdp.lda.private.scalable.SPECTRAL_WORD_SCALE_POWER`, read when the fit runs (as the report does).
    """
    d, r = vocab_size, refinement
    h = r.working_vocab
    scale_power = scalable.SPECTRAL_WORD_SCALE_POWER if scale_power is None else scale_power
    scan, noise = None, _Noise(plan, rng, ledger)
    if r.scan:
        n_total = int(sum(backend.call(Shard.row_count)))
        scan = private_scan(backend, max(n_total, 1), config.quantile, noise)
    columns, share, view = _working_vocabulary(backend, scan, h, d)
    record = _restart_gate(r, d, params, config, plan, share)
    restart = None
    if record is not None and record["probed"]:
        plan = noise.plan = scalable.split_probe(plan)
        restart = record["threshold"] = scalable.restart_snr(plan)
    elif _splits_first_release(params, config, plan):
        plan = noise.plan = scalable.split_early(plan)
    first = len(ledger.releases)
    try:
        ps = fit_spectral_private(view, h, params, config, rng, ledger, plan, progress, restart,
                                  _spectral_scales(scan, columns, scale_power))
    except _Restart as probe:
        h1 = record["restart_words"]
        plan = noise.plan = scalable.restart_plan(plan, _discard(ledger, first, plan, h, h1))
        h = h1
        columns, share, view = _working_vocabulary(backend, scan, h, d)
        record.update(probe_ratio=probe.ratio, made=True)
        ps = fit_spectral_private(view, h, params, config, rng, ledger, plan, progress,
                                  word_scales=_spectral_scales(scan, columns, scale_power))
    else:
        if restart is not None:
            record["probe_ratio"] = ps.result.stats["whitening_topup"]["probe_ratio"]
    if h < d:
        ps.result.stats["working_vocab_token_share"] = share
    if record is not None:
        ps.result.stats["working_vocab_restart"] = record
    topup = ps.result.stats.get("whitening_topup")
    if topup is not None and topup["early"]:
        plan = scalable.move_budget(plan, "m2_whitening", "unmix_sstats")
    if topup is not None and not topup["made"]:
        noise.plan = scalable.move_budget(plan, "m2_whitening_topup", "unmix_sstats")
    if not r.active:
        topic_word = np.zeros((params.k, d))
        topic_word[:, columns] = ps.result.topic_word
        return PrivateLDA(topic_word, ps.result.alpha, ps, columns, scan, None)
    single = params.model == "stm"
    if r.tail:
        start = unmix_tail_private(view, ps.result.topic_word, ps.result.alpha, scan.norm_cap, noise,
                                   single_topic=single, frequencies=scan.frequencies)
    else:
        embedded = scalable.embed_topics(ps.result.topic_word, columns, scan.frequencies, d)
        start = scalable.UnmixedTopics(embedded)
    topic_word = start.topic_word
    if r.unmix:
        topic_word = unmix_private(backend, start, ps.result.alpha, scan, noise, r.unmix, progress=progress,
                                   single_topic=single)
    if not r.refine:
        return PrivateLDA(topic_word, ps.result.alpha, ps, columns, scan, None)
    em = refine_em_private(backend, topic_word, ps.result.alpha, ps.tokens_hat / share, r.refine, eta,
                           scan.norm_cap, plan["em_sstats"].multiplier, rng, ledger, progress,
                           frequencies=scan.frequencies)
    return PrivateLDA(em.topic_word, ps.result.alpha, ps, columns, scan, em)
