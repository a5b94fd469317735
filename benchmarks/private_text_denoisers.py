"""Where the private default's error on text-shaped corpora comes from, and what its last denoiser costs there.

    .venv/bin/python benchmarks/private_text_denoisers.py                 # ≈ 25 min on 2 cores
    .venv/bin/python benchmarks/private_text_denoisers.py --shapes bg0.3  # one corpus, ≈ 6 min

Exploratory, for issue 43 (ε = 1 within 1.5× of non-private on corpora shaped like text). On the
``lda_privacy_utility.py`` corpora (N = 10⁶, corpus draw 0: ``dirichlet`` = background 0, ``bg0.3``,
``bg0.5``, ``semireal``), the private default at ε = 1, δ = 10⁻⁶ (noise seed 10, as that benchmark)
is run with its last unmixing release captured: the solve ``G⁻¹(Q/S)`` averaged with the earlier
ones and each entry's noise deviation (``scalable.combine_unmixed``'s result; the pipeline then
firm-thresholds it at 2 deviations and normalises the rows). Post-processing alternatives of that
same solve are then scored by matched topic L1 against the generating topics:

- ``threshold 2`` (the default), ``threshold 1``, ``floor 0`` (negative entries to 0, no threshold);
- ``empirical Bayes``: the posterior mean per entry under a grid prior fitted by EM to all entries
  (the NPMLE; ``private_final_release.npmle_posterior``), on the solve scaled by the default's row
  sums;
- ``mixing``: the k×k map ``A`` of each release's solve on the true topics (least squares over the
  words: ``solve ≈ A β``), its diagonal and the L1 of ``A β`` itself, the error the mixing alone
  leaves (the tail release, each pass, and their running averages).

Writes ``benchmarks/results/private_text_denoisers.json``; docs/design/private-fit.md, *Corpora shaped
like text*, quotes it.
"""
from __future__ import annotations

import argparse
import json
import runpy
import time
from pathlib import Path

import numpy as np

from distdp import lda
from distdp.lda.private import pipeline as private_pipeline
from distdp.lda.private import scalable

HERE = Path(__file__).resolve().parent
UTILITY = runpy.run_path(str(HERE / "lda_privacy_utility.py"), run_name="private_text_denoisers")
FINAL = runpy.run_path(str(HERE / "private_final_release.py"), run_name="private_text_denoisers")
SHAPES = ("dirichlet", "bg0.3", "bg0.5", "semireal")
N, D, K, RUN, EPSILON = 1_000_000, 5000, 10, 0, 1.0


def captured_fit(shape: str) -> dict:
    """The corpus, the non-private spectral fit and the private default, with the unmixing releases captured."""
    releases, scan = [], {}
    combine, unmix = scalable.combine_unmixed, private_pipeline.unmix_private

    def capture_combine(earlier, later, threshold):
        out = combine(earlier, later, threshold)
        releases.append({"earlier": earlier, "pass": later, "combined": out})
        return out

    def capture_unmix(backend, start, alpha, sc, *args, **kwargs):
        scan.update(frequencies=np.array(sc.frequencies), alpha=np.array(alpha), tail=start)
        return unmix(backend, start, alpha, sc, *args, **kwargs)

    scalable.combine_unmixed, private_pipeline.unmix_private = capture_combine, capture_unmix
    try:
        c, be = UTILITY["corpus"](N, D, K, RUN, shape)
        d, k = c.topic_word.shape[1], c.topic_word.shape[0]
        t = time.perf_counter()
        base = UTILITY["fit_spectral"](be, d, UTILITY["SpectralParams"](k=k, alpha0=1.0),
                                       np.random.default_rng(RUN)).topic_word
        base_s = time.perf_counter() - t
        t = time.perf_counter()
        private, _ = UTILITY["default_fit"](be, d, k, "whitened+unmix", EPSILON, "tight", 1000 * RUN + int(10 * EPSILON))
        private_s = time.perf_counter() - t
    finally:
        scalable.combine_unmixed, private_pipeline.unmix_private = combine, unmix
    return {"truth": c.topic_word, "base": base, "private": private, "releases": releases, "scan": scan,
            "seconds": {"non_private": base_s, "private": private_s}}


def normalised_l1(estimate: np.ndarray, truth: np.ndarray) -> float:
    e = np.maximum(estimate, 0.0)
    return float(lda.matched_l1(e / e.sum(axis=1, keepdims=True), truth)[0])


def denoisers(solve: np.ndarray, deviation: np.ndarray, truth: np.ndarray) -> dict:
    """Matched L1 of each post-processing of the final solve."""
    out = {f"threshold {t:g}": normalised_l1(scalable.threshold_noisy(solve, deviation, t), truth) for t in (2.0, 1.0)}
    out["floor 0"] = normalised_l1(solve, truth)
    scale = scalable.threshold_noisy(solve, deviation, 2.0).sum(axis=1, keepdims=True)
    y, s = (solve / scale).ravel(), (deviation / scale).ravel()
    ok = np.isfinite(s)
    grid = np.concatenate([[0.0], np.geomspace(0.05 * s[ok].min(), max(1.05 * y[ok].max(), 10 * s[ok].max()), 200)])
    mean = np.where(np.isfinite(s), 0.0, y)
    mean[ok] = FINAL["npmle_posterior"](y[ok], s[ok], grid)[0]
    out["empirical Bayes posterior mean"] = normalised_l1(mean.reshape(solve.shape), truth)
    return out


def mixing(solve: np.ndarray, deviation: np.ndarray, topic_word: np.ndarray, truth: np.ndarray) -> dict:
    """The k×k mixing A of a solve on the true topics (solve ≈ A β over the words it released)."""
    _, perm = lda.matched_l1(topic_word, truth)
    words = np.isfinite(np.asarray(deviation)[perm]).all(axis=0)
    A = np.linalg.lstsq(truth[:, words].T, np.asarray(solve)[perm][:, words].T, rcond=None)[0].T
    return {"diag": np.diag(A).round(4).tolist(), "row_sums": A.sum(axis=1).round(4).tolist(),
            "l1_of_A_beta": normalised_l1(A @ truth, truth), "l1": float(lda.matched_l1(topic_word, truth)[0])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    ap.add_argument("--out", default=str(HERE / "results" / "private_text_denoisers.json"))
    args = ap.parse_args()
    rows = []
    for shape in args.shapes:
        fit = captured_fit(shape)
        truth = fit["truth"]
        final, tail = fit["releases"][-1]["combined"], fit["scan"]["tail"]
        solve, deviation = np.asarray(final.solve), np.asarray(final.solve_deviation)
        row = {"shape": shape, "N": N, "epsilon": EPSILON, "seconds": fit["seconds"],
               "non_private_l1": float(lda.matched_l1(fit["base"], truth)[0]),
               "private_l1": float(lda.matched_l1(fit["private"], truth)[0]),
               "denoisers": denoisers(solve, deviation, truth),
               "mixing": {**({"tail": mixing(tail.solve, tail.solve_deviation, tail.topic_word, truth)}
                             if tail.solve is not None else {}),
                          **{f"pass {j}": mixing(r["pass"].solve, r["pass"].solve_deviation, r["pass"].topic_word, truth)
                             for j, r in enumerate(fit["releases"])},
                          **{f"average after pass {j}": mixing(r["combined"].solve, r["combined"].solve_deviation,
                                                               r["combined"].topic_word, truth)
                             for j, r in enumerate(fit["releases"])}}}
        rows.append(row)
        print(json.dumps(row), flush=True)
        Path(args.out).write_text(json.dumps({"rows": rows}, indent=1))
    print("\n| corpus | non-private | " + " | ".join(rows[0]["denoisers"]) + " |")
    print("|---|---|" + "---|" * len(rows[0]["denoisers"]))
    for r in rows:
        print(f"| {r['shape']} | {r['non_private_l1']:.4f} | " + " | ".join(
            f"{v:.4f} ({v / r['non_private_l1']:.2f}×)" for v in r["denoisers"].values()) + " |")


if __name__ == "__main__":
    main()
