"""The floor of private EM on the issue's benchmark corpus: one release at the whole budget, from the truth.

On the ``lda_privacy_utility`` corpus (d = 5,000, k = 10, N = 10⁶, run 0),
one E-step is run from the *true* topics (oracle posteriors) with private
EM's weights (each ``x_n∘φ_n`` scaled to Frobenius norm C, C the 0.9
quantile of ‖x_n‖₂, sensitivity √2·C), and the k×d statistics are released
once with Gaussian noise of multiplier ``m`` · (1, 2, 4, 8), where ``m`` is
the multiplier of a single Gaussian release that is (ε = 1, δ = 1e-6)-DP.
The noisy statistics are thresholded at 0 / 2σ / 3σ and scored by matched
topic L1. No private fit can do better at that budget with one EM release.

The same for the one-hot unmixing pass (the private default's last release
when this was recorded; :func:`distdp.lda.private.scalable.unmix_pass_statistics`
with ``sharpen = np.inf``; the default now weights by θ̂², see there): θ̂_n from the true
topics, each document scaled to ``‖w x‖₂ = C``, ``Q`` released at the same
multipliers and ``G`` left exact (its noise is negligible at N = 10⁶), solved
and thresholded as the pipeline does. The private default splits the budget
over a scan, a spectral start, a tail release and the pass (≈ 46% of μ² on
the pass's ``Q``, multiplier ≈ 1.47·m) and starts far from the truth. The
pass is measured with its word scales (:func:`distdp.lda.private.scalable.word_scales`)
from the true topics and frequencies (as the pipeline does from its own),
from the frequencies alone, and without (the pass before them); at 1.47·m
and the thresholds at 2σ except at m. One E-step is also measured with
private EM's word scales from the truth (threshold 2σ/S).

Last, one E-step from the private default's own output at ε = 1 (the
``lda_privacy_utility`` fit; α the true one), without noise and at
100% / 60% / 40% of the ε = 1 budget (multiplier m/√share): how much of its
start's error an EM release after the pass would inherit.

Run: ``.venv/bin/python benchmarks/private_em_floor.py`` (≈ 30 min).
Writes ``benchmarks/results/private_em_floor.json``.
"""
from __future__ import annotations

import json
import runpy
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from distdp import lda
from distdp.lda import refine
from distdp.privacy import accounting
from distdp.lda.private import scalable as lda_private
from distdp.lda.private.shard import PrivateShard as Shard


# The sibling script (not a package), run by file path: the same corpus.
_lpu = runpy.run_path(str(Path(__file__).resolve().parent / "lda_privacy_utility.py"))
DELTA, corpus, default_fit = _lpu["DELTA"], _lpu["corpus"], _lpu["default_fit"]

OUT = Path(__file__).resolve().parent / "results" / "private_em_floor.json"
N, D, K, EPSILON, ETA = 1_000_000, 5000, 10, 1.0, 0.1
SCALES = (1, 2, 4, 8)
SHARES = (1.0, 0.6, 0.4)
THRESHOLDS = (0.0, 2.0, 3.0)
#: Ends of ``lda_private.threshold_noisy`` for the hard threshold these measurements used (the pipeline's
#: has been firm since; docs/design/private-fit.md, *The threshold*).
HARD = {"low": 1.0, "high": 1.0}
#: The pass's multiplier in the private default at ε = 1 (≈ 46% of μ² on its Q), over m.
PASS_SCALE = 1.47


def em_statistics(counts: sp.csr_matrix, topic_word: np.ndarray, alpha: np.ndarray, norm_cap: float,
                  scales: np.ndarray | None = None):
    """``Σ_n w_n x_n ∘ φ_n`` (k×d) of one E-step from ``topic_word``, with private EM's weights (for word scales S:
    ``w_n = C/‖(x_n∘φ_n)∘S‖_F``; the sum is returned unscaled)."""
    tokens = float(counts.sum())
    lam = refine.init_lambda(topic_word, alpha, tokens, ETA)
    elog = refine.dirichlet_expectation(lam)
    eeb = np.exp(elog)
    res = refine.e_step(counts, eeb, alpha, None, 100, 1e-3, True, elog, contribution_cap=norm_cap,
                        contribution_scales=scales)
    return eeb * res.sstats


def main() -> None:
    c, be = corpus(N, D, K, 0)
    counts = c.counts.tocsr()
    norm_cap = float(np.quantile(lda_private.count_norms(counts), 0.9))
    t0 = time.perf_counter()
    stats = em_statistics(counts, c.topic_word, c.alpha, norm_cap)
    seconds = time.perf_counter() - t0
    sens = lda_private.em_sensitivity(norm_cap)
    m = accounting.calibrate_gaussian_multiplier(EPSILON, DELTA, 1)
    rng = np.random.default_rng(1)
    rows = [{"release": "em", "multiplier": None, "threshold": None, "l1": lda.matched_l1(
        stats / stats.sum(1, keepdims=True), c.topic_word)[0], "what": "non-private one E-step from the truth"}]
    for scale in SCALES:
        sigma = scale * m * sens
        noisy = stats + rng.normal(0.0, sigma, stats.shape)
        for thr in THRESHOLDS:
            lam = ETA + (lda_private.threshold_noisy(noisy, sigma, thr, **HARD) if thr else np.maximum(noisy, 0.0))
            rows.append({"release": "em", "multiplier": scale * m, "multiplier_over_eps1": scale, "threshold": thr,
                         "l1": lda.matched_l1(lam / lam.sum(1, keepdims=True), c.topic_word)[0]})
            print(rows[-1], flush=True)
    freq = np.asarray(counts.sum(axis=0)).ravel()
    S = lda_private.word_scales(c.topic_word, freq)       # private EM's word scales, from the truth
    scaled = em_statistics(counts, c.topic_word, c.alpha, norm_cap, S)
    rng_s = np.random.default_rng(2)
    rows.append({"release": "em", "word_scales": "topics+frequencies", "multiplier": None, "threshold": None,
                 "l1": lda.matched_l1(scaled / scaled.sum(1, keepdims=True), c.topic_word)[0]})
    for scale in SCALES + (PASS_SCALE,):
        sigma = scale * m * sens
        lam = ETA + lda_private.threshold_noisy((scaled * S + rng_s.normal(0.0, sigma, S.shape)) / S, sigma / S, 2.0,
                                                **HARD)
        rows.append({"release": "em", "word_scales": "topics+frequencies", "multiplier": scale * m,
                     "multiplier_over_eps1": scale, "threshold": 2.0,
                     "l1": lda.matched_l1(lam / lam.sum(1, keepdims=True), c.topic_word)[0]})
        print(rows[-1], flush=True)
    sens_q = lda_private.tail_sensitivities(norm_cap)[0]
    variants = {"none": None,                                   # the pass before word scales
                   "frequencies": lda_private.word_scales(np.tile(freq, (K, 1)), freq),
                   "topics+frequencies": lda_private.word_scales(c.topic_word, freq)}   # as the pass does
    for name, S in variants.items():
        Q, G = Shard(counts).unmix_statistics(c.topic_word, c.alpha, norm_cap, 100, 1e-3, S,  # θ̂_n: true topics
                                              False, np.inf)                   # one-hot, as recorded
        rows.append({"release": "unmix", "word_scales": name, "multiplier": None, "threshold": None,
                     "l1": lda.matched_l1(lda_private.unmix_topics(Q, G, 0.0, 0.0, symmetric=False, scales=S).topic_word,
                                          c.topic_word)[0], "what": "non-private unmixing pass from the truth"})
        for scale in SCALES + (PASS_SCALE,):
            sigma = scale * m * sens_q
            noisy = Q + rng.normal(0.0, sigma, Q.shape)
            for thr in (THRESHOLDS if scale == 1 else (2.0,)):
                rows.append({"release": "unmix", "word_scales": name, "multiplier": scale * m,
                             "multiplier_over_eps1": scale, "threshold": thr,
                             "l1": lda.matched_l1(lda_private.unmix_topics(noisy, G, sigma, thr, symmetric=False,
                                                                           scales=S).topic_word,
                                                  c.topic_word)[0]})
                print(rows[-1], flush=True)
    start, _ = default_fit(be, D, K, "whitened+unmix", EPSILON, "tight", 10)   # the utility benchmark's fit
    stats = em_statistics(counts, start, c.alpha, norm_cap)
    rows.append({"release": "em-from-default", "multiplier": None, "threshold": None,
                 "start_l1": lda.matched_l1(start, c.topic_word)[0],
                 "l1": lda.matched_l1(stats / stats.sum(1, keepdims=True), c.topic_word)[0],
                 "what": "non-private one E-step from the private default's output at ε = 1"})
    for share in SHARES:
        sigma = m / np.sqrt(share) * sens
        lam = ETA + lda_private.threshold_noisy(stats + rng.normal(0.0, sigma, stats.shape), sigma, 2.0, **HARD)
        rows.append({"release": "em-from-default", "multiplier": m / np.sqrt(share), "budget_share": share,
                     "threshold": 2.0, "l1": lda.matched_l1(lam / lam.sum(1, keepdims=True), c.topic_word)[0]})
        print(rows[-1], flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"N": N, "d": D, "k": K, "epsilon": EPSILON, "delta": DELTA, "norm_cap": norm_cap,
                               "sensitivity": sens, "e_step_seconds": seconds, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
