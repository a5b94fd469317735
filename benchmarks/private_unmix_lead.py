"""A lead for private LDA, not shipped: a second, one-hot unmixing release in place of EM.

On the ``lda_privacy_utility`` corpus (d = 5,000, k = 10, run 0), for each ε:

* ``default`` — what ``fit-lda --epsilon`` does (scan, spectral fit on 1,000
  words, tail release, 2 private EM iterations; :func:`distdp.private_fit.budget_plan`).
* ``second unmixing`` — scan 2%, spectral 25%, tail release 23%, then one
  release at 50% of the budget (μ² fractions, composed exactly with the rest):
  each document's mixture θ̂_n is estimated on *all* its words under the
  tail's topics, and with ``e_n`` the one-hot of ``argmax θ̂_n``,
  ``Q = Σ w_n e_n x_nᵀ`` (k×d) and ``G = Σ w_n l_n e_n θ̂_nᵀ`` (k×k, all
  entries) are released (:func:`distdp.privacy.lda_private.hard_unmix_statistics`,
  sensitivities √2·C and √2·C² as for the tail release); ``β̂ = G⁻¹Q``,
  thresholded at 2σ per row, rows normalised. E[Q] ≈ Gβ for a
  posterior-mean θ̂, up to each word's own ~1/l influence on θ̂_n.

Both use the same corpus; the ledger's certified ε is recorded for each.
Run: ``.venv/bin/python benchmarks/private_unmix_lead.py --eps 1 8`` (≈ 15 min per ε at
N = 10⁶). Writes ``benchmarks/results/private_unmix_lead.json`` (``--eps`` rows replace
the same rows).
"""
from __future__ import annotations

import argparse
import json
import runpy
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from distdp import lda, refine
from distdp import private_pipeline as pp
from distdp.pipeline import SpectralParams
from distdp.private_fit import TAIL_GRAM_SHARE
from distdp.privacy import lda_private
from distdp.privacy.ledger import PrivacyLedger


# The sibling script (not a package), run by file path: the same corpus and default fit.
_lpu = runpy.run_path(str(Path(__file__).resolve().parent / "lda_privacy_utility.py"))
DELTA, corpus = _lpu["DELTA"], _lpu["corpus"]
OUT = Path(__file__).resolve().parent / "results" / "private_unmix_lead.json"
D, K, H = 5000, 10, 1000
#: Fractions of μ² (spectral stages: the rest).
SCAN, SPECTRAL, TAIL, UNMIX, GRAM = 0.02, 0.25, 0.23, 0.50, 0.03


def onehot_statistics(counts: sp.csr_matrix, topic_word: np.ndarray, alpha: np.ndarray, cap: float):
    """``(Q, G)`` of the second unmixing on one shard: θ̂ on all words, then
    :func:`distdp.privacy.lda_private.hard_unmix_statistics`."""
    theta = refine.theta_from_gamma(refine.e_step(counts, np.maximum(topic_word, 1e-12), alpha, None, 100, 1e-3,
                                                  False).gamma)
    return lda_private.hard_unmix_statistics(counts, theta, cap)


def second_unmixing(backend, eps: float, seed: int) -> tuple[np.ndarray, float]:
    """Topics and certified ε of the lead pipeline (``backend``: the in-process shards of ``corpus``)."""
    cfg = lda_private.PrivateSpectralConfig(eps, DELTA)
    extra = {"scan": (SCAN / SPECTRAL, 1), "tail_gram": (TAIL_GRAM_SHARE * TAIL / SPECTRAL, 1),
             "tail_sstats": ((1 - TAIL_GRAM_SHARE) * TAIL / SPECTRAL, 1), "unmix_gram": (GRAM * UNMIX / SPECTRAL, 1),
             "unmix_sstats": ((1 - GRAM) * UNMIX / SPECTRAL, 1)}
    plan = lda_private.plan_noise(cfg, extra)
    rng, ledger = np.random.default_rng(seed), PrivacyLedger(private=False)
    n = int(sum(backend.call("row_count")))
    noise = pp._Noise(plan, rng, ledger)
    scan = pp.private_scan(backend, n, cfg.quantile, noise)
    cols = lda_private.working_columns(scan.frequencies, H)
    view = pp.ColumnBackend(backend, cols)
    ps = pp.fit_spectral_private(view, H, SpectralParams(k=K, alpha0=1.0), cfg, rng, ledger, plan)
    start = pp.unmix_tail_private(view, ps.result.topic_word, ps.result.alpha, scan.norm_cap, noise)
    cap = scan.norm_cap
    stats = [onehot_statistics(shard.counts, start, ps.result.alpha, cap) for shard in backend.shards]
    sens_q, sens_g = lda_private.tail_sensitivities(cap)
    G = noise.add("unmix_gram", sum(s[1] for s in stats), sens_g, note="Σ w l e θ̂ᵀ (k×k, all entries)")
    Q = noise.add("unmix_sstats", sum(s[0] for s in stats), sens_q, note="Σ w e xᵀ (k×d)")
    topics = lda_private.unmix_topics(Q, G, plan["unmix_sstats"].multiplier * sens_q, pp.EM_THRESHOLD,
                                      symmetric=False)
    return topics, ledger.epsilon(DELTA)


def default_fit(backend, eps: float, seed: int) -> tuple[np.ndarray, float]:
    """The shipped default (as ``benchmarks/lda_privacy_utility.py --part default``)."""
    return _lpu["default_fit"](backend, D, K, "whitened", eps, "tight", seed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0, 8.0])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    c, backend = corpus(args.n, D, K, 0)
    old = json.loads(OUT.read_text())["rows"] if OUT.exists() else []
    rows = [r for r in old if not (r["N"] == args.n and r["epsilon"] in args.eps)]
    for eps in args.eps:
        for name, fit in (("second unmixing", second_unmixing), ("default", default_fit)):
            t0 = time.perf_counter()
            row = {"N": args.n, "epsilon": eps, "method": name, "seed": args.seed}
            try:
                topic_word, certified = fit(backend, eps, args.seed)
                row.update(l1=lda.matched_l1(topic_word, c.topic_word)[0], epsilon_certified=certified)
            except ValueError as err:  # "the privacy budget cannot be met"
                row.update(l1=None, failed=str(err)[:120])
            rows.append({**row, "seconds": time.perf_counter() - t0})
            print(rows[-1], flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"d": D, "k": K, "delta": DELTA, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
