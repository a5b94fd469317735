"""What the private default's last release can still gain at ε = 1, N = 10⁶: alternatives to it, measured.

On the ``lda_privacy_utility`` corpus (d = 5,000, k = 10, N = 10⁶, run 0),
the unmixing pass with one-hot weights, the default when this was recorded
(:func:`distdp.lda.private.scalable.unmix_pass_statistics` with ``sharpen = np.inf``,
word scales from the truth) is computed from the *true* topics and released
with the noise the private default gives it at ε = 1 (multiplier
``PASS_SCALE``·m, m that of one (ε = 1, δ = 1e-6) Gaussian release; ``G``
exact). Then, scored by matched topic L1 (the issue's target is 0.0255, 1.5×
the non-private spectral fit's 0.017):

1. the solve's denoiser: the hard threshold at 0…3 noise deviations (the
   pipeline uses 2); an empirical-Bayes posterior mean and median per entry
   (a nonparametric prior on a grid fitted by EM, the NPMLE, per tenth of the
   vocabulary by scanned frequency); a per-word projection onto the scan's
   frequencies (``Σ_i p_i β_iv ≈ f̂_v`` with the scan's noise, β ≥ 0); and
   the pass's documents weighted by the purity of their θ̂ (each one-hot term
   times ``max θ̂_n`` or its square, or kept only when ``max θ̂_n`` > 0.4 / 0.6
   / 0.8), which makes ``G`` closer to diagonal but carries less signal;
2. one noise-free E-step from that pass's output, as is and mixed with the
   frequencies (weight γ): what private EM after the pass would inherit;
3. the whole private pipeline at ε = 1 (noise seed 10; the default of the
   day, so a rerun now weights the pass by θ̂²), the default (tail
   release, then the pass) and the pass alone from the spectral topics (no
   tail release; the pass takes its budget).

Run: ``.venv/bin/python benchmarks/private_final_release.py`` (≈ 14 min).
Writes ``benchmarks/results/private_final_release.json``.
"""
from __future__ import annotations

import json
import runpy
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from distdp import lda
from distdp.lda import moments, refine
from distdp.lda.private import fit as private_fit
from distdp.lda.pipeline import SpectralParams
from distdp.privacy import accounting
from distdp.lda.private import scalable as lda_private
from distdp.privacy.ledger import PrivacyLedger
from distdp.lda.private.pipeline import Refinement, fit_lda_private_scalable
from distdp.lda.private.shard import PrivateShard as Shard

_lpu = runpy.run_path(str(Path(__file__).resolve().parent / "lda_privacy_utility.py"))
DELTA, corpus = _lpu["DELTA"], _lpu["corpus"]

OUT = Path(__file__).resolve().parent / "results" / "private_final_release.json"
N, D, K, EPSILON, ETA = 1_000_000, 5000, 10, 1.0, 0.1
#: The pass's multiplier in the private default at ε = 1 (≈ 46% of μ² on its Q), over m.
PASS_SCALE = 1.47
THRESHOLDS = (0.0, 1.0, 1.5, 2.0, 2.5, 3.0)
GAMMAS = (0.0, 0.02, 0.1)
#: Ends of ``lda_private.threshold_noisy`` for the hard threshold these measurements used (the pipeline's
#: has been firm since; docs/design/private-fit.md, *The threshold*).
HARD = {"low": 1.0, "high": 1.0}
EB_BINS = 10


def npmle_posterior(y: np.ndarray, s: np.ndarray, grid: np.ndarray, iters: int = 300) -> tuple:
    """Posterior means and medians of ``β`` from ``y ~ N(β, s²)`` under the grid prior fitted by EM (NPMLE)."""
    w = np.full(grid.size, 1.0 / grid.size)
    lik = np.exp(-0.5 * ((y[:, None] - grid[None, :]) / s[:, None]) ** 2)
    for _ in range(iters):
        post = lik * w
        post /= post.sum(axis=1, keepdims=True) + 1e-300
        w = post.mean(axis=0)
    post = lik * w
    post /= post.sum(axis=1, keepdims=True) + 1e-300
    return post @ grid, grid[np.argmax(np.cumsum(post, axis=1) >= 0.5, axis=1)]


def frequency_projection(B: np.ndarray, sd: np.ndarray, f: np.ndarray, tau: float, p: np.ndarray) -> np.ndarray:
    """Per word v: ``argmin_{β ≥ 0} Σ_i (B_iv − β_i)²/sd_iv² + (f_v − pᵀβ)²/τ²`` (bisection on the multiplier)."""
    lo, hi = np.full(B.shape[1], -1e12), np.full(B.shape[1], 1e12)
    for _ in range(200):
        mu = 0.5 * (lo + hi)
        g = mu * tau ** 2 - (f - p @ np.maximum(0.0, B + sd ** 2 * p[:, None] * mu))
        hi, lo = np.where(g > 0, mu, hi), np.where(g > 0, lo, mu)
    return np.maximum(0.0, B + sd ** 2 * p[:, None] * (0.5 * (lo + hi)))


def rows_normalised(B: np.ndarray) -> np.ndarray:
    return B / B.sum(axis=1, keepdims=True)


def denoiser_rows(B, sd, truth, f_noisy, tau_f, order) -> list:
    """Part 1: every denoiser of the noisy solve ``B`` (entry deviations ``sd``)."""
    l1 = lambda est: lda.matched_l1(rows_normalised(est), truth)[0]  # noqa: E731
    rows = [{"part": "denoiser", "what": f"threshold {t:g}σ", "l1": l1(lda_private.threshold_noisy(B, sd, t, **HARD))}
            for t in THRESHOLDS]
    base = lda_private.threshold_noisy(B, sd, 2.0, **HARD)
    scale = base.sum(axis=1, keepdims=True)               # the estimate's rows on the topics' scale
    Bn, sdn = B / scale, sd / scale
    mean, med = np.zeros_like(B), np.zeros_like(B)
    for idx in np.array_split(order, EB_BINS):
        y, s = Bn[:, idx].ravel(), sdn[:, idx].ravel()
        grid = np.concatenate([[0.0], np.geomspace(0.05 * s.min(), max(1.05 * y.max(), 10 * s.max()), 200)])
        pm, pmed = npmle_posterior(y, s, grid)
        mean[:, idx], med[:, idx] = pm.reshape(K, -1), pmed.reshape(K, -1)
    rows += [{"part": "denoiser", "what": f"empirical Bayes posterior {name}, {EB_BINS} frequency bins", "l1": l1(e)}
             for name, e in (("mean", mean), ("median", med))]
    p = np.linalg.lstsq(rows_normalised(base).T, f_noisy, rcond=None)[0]
    rows.append({"part": "denoiser", "what": "projection onto the scan's frequencies (β ≥ 0)",
                 "l1": l1(frequency_projection(Bn, sdn, f_noisy, tau_f, p)),
                 "scan_sd": tau_f, "median_entry_sd": float(np.median(sdn))})
    return rows


def purity_rows(counts, theta, S, norm_cap, sigma, noise, truth) -> list:
    """Part 1, purity: the pass with each document's term times ``h(max θ̂_n) ≤ 1`` (same sensitivities)."""
    e, tmax = lda_private.pass_weights(theta, np.inf), theta.max(axis=1)       # the one-hot pass's weights
    lengths = moments.doc_lengths(counts)
    scaled = lda_private.pass_norms(counts, e, S)                                  # ‖x_n∘s_(argmax θ̂_n)‖₂
    w = lda_private.unmix_weights(scaled, lengths, norm_cap, np.linalg.norm(theta, axis=1), np.ones(theta.shape[0]))
    out = []
    for name, h in [("max θ̂", tmax), ("(max θ̂)²", tmax ** 2)] + [(f"max θ̂ > {t:g}", (tmax > t) * 1.0)
                                                                  for t in (0.4, 0.6, 0.8)]:
        wh = (w * h)[:, None]
        Q = np.asarray((counts.T @ (e * wh)).T) * S
        Ginv = np.linalg.inv((e * wh * lengths[:, None]).T @ theta)
        B = Ginv @ ((Q + sigma * noise) / S)
        sd = sigma * np.sqrt((Ginv * Ginv) @ S ** -2.0)
        out.append({"part": "denoiser", "what": f"threshold 2σ, documents weighted by {name}",
                    "mean_weight": float(h.mean()),
                    "l1": lda.matched_l1(rows_normalised(lda_private.threshold_noisy(B, sd, 2.0, **HARD)), truth)[0]})
    return out


def em_from(counts: sp.csr_matrix, start: np.ndarray, alpha: np.ndarray, norm_cap: float) -> np.ndarray:
    """One noise-free E-step's topics from ``start`` with private EM's weights (no word scales)."""
    lam = refine.init_lambda(start, alpha, float(counts.sum()), ETA)
    elog = refine.dirichlet_expectation(lam)
    eeb = np.exp(elog)
    res = refine.e_step(counts, eeb, alpha, None, 100, 1e-3, True, elog, contribution_cap=norm_cap)
    return rows_normalised(eeb * res.sstats)


def pipeline_l1(be, truth: np.ndarray, tail: bool, seed: int) -> float:
    """Matched L1 of the private pipeline at ε = 1 with or without the tail release (one pass either way)."""
    cfg = lda_private.PrivateSpectralConfig(EPSILON, DELTA)
    r = Refinement(private_fit.resolve_refinement(D, K).working_vocab, True, tail, 1, 0,
                   private_fit.DEFAULT_REFINE_BUDGET_TAIL)
    fit = fit_lda_private_scalable(be, D, SpectralParams(k=K, alpha0=1.0), cfg, np.random.default_rng(seed),
                                   PrivacyLedger(private=False), private_fit.budget_plan(cfg, r), r, eta=1.0 / K)
    return lda.matched_l1(fit.topic_word, truth)[0]


def main() -> None:
    c, be = corpus(N, D, K, 0)
    counts = c.counts.tocsr()
    norm_cap = float(np.quantile(lda_private.count_norms(counts), 0.9))
    lengths = np.maximum(np.asarray(counts.sum(axis=1)).ravel(), 1)
    fbar = np.asarray((sp.diags(1.0 / lengths) @ counts).sum(axis=0)).ravel() / N  # what the scan releases, / N
    freq = np.asarray(counts.sum(axis=0)).ravel()
    S = lda_private.word_scales(c.topic_word, freq)
    Q, G = Shard(counts).unmix_statistics(c.topic_word, c.alpha, norm_cap, 100, 1e-3, S, False, np.inf)  # one-hot
    m = accounting.calibrate_gaussian_multiplier(EPSILON, DELTA, 1)
    sigma = PASS_SCALE * m * lda_private.tail_sensitivities(norm_cap)[0]
    rng = np.random.default_rng(5)
    noise = rng.normal(0.0, 1.0, Q.shape)
    Ginv = np.linalg.inv(G)
    B = Ginv @ ((Q + sigma * noise) / S)
    sd = sigma * np.sqrt((Ginv * Ginv) @ S ** -2.0)
    # The scan: 2% of μ², sensitivity 2, on Σ_n x_n/l_n.
    tau_f = m / np.sqrt(private_fit.SCAN_BUDGET) * lda_private.SCAN_SENSITIVITY / N
    f_noisy = fbar + rng.normal(0.0, tau_f, D)
    rows = [{"part": "denoiser", "what": "no noise", "l1": lda.matched_l1(
        rows_normalised(np.maximum(Ginv @ (Q / S), 0.0)), c.topic_word)[0]}]
    rows += denoiser_rows(B, sd, c.topic_word, f_noisy, tau_f, np.argsort(-f_noisy))
    theta = refine.theta_from_gamma(refine.e_step(counts, np.maximum(c.topic_word, 1e-12), c.alpha, None, 100, 1e-3,
                                                  False).gamma)              # the pass's θ̂_n (Shard.unmix_statistics)
    rows += purity_rows(counts, theta, S, norm_cap, sigma, noise, c.topic_word)
    for r in rows:
        print(r, flush=True)
    start = rows_normalised(lda_private.threshold_noisy(B, sd, 2.0, **HARD))
    f = freq / freq.sum()
    for gamma in GAMMAS:
        s0 = rows_normalised((1.0 - gamma) * start + gamma * f)
        rows.append({"part": "em_after_pass", "gamma": gamma, "start_l1": lda.matched_l1(s0, c.topic_word)[0],
                     "l1": lda.matched_l1(em_from(counts, s0, c.alpha, norm_cap), c.topic_word)[0],
                     "what": "one noise-free E-step from the pass's output mixed with the frequencies"})
        print(rows[-1], flush=True)
    for tail in (True, False):
        try:
            l1 = pipeline_l1(be, c.topic_word, tail, 10)
        except ValueError as e:
            l1 = f"failed: {e}"
        rows.append({"part": "pipeline", "tail_release": tail, "epsilon": EPSILON, "seed": 10, "l1": l1})
        print(rows[-1], flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"N": N, "d": D, "k": K, "epsilon": EPSILON, "delta": DELTA, "norm_cap": norm_cap,
                               "pass_multiplier": PASS_SCALE * m, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
