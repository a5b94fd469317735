"""Math of the scalable private spectral LDA fit (pure numpy/scipy; no Ray, no IO).

The private pipeline (:mod:`distdp.lda.private.pipeline`) releases, in order,
each through the Gaussian mechanism with the sensitivity stated here under
replace-one-document neighbours (the number of documents ``N`` is public;
which of them have ≥ 3 tokens is not):

1. ``counts``: ``[n_used, tokens_capped/L, hist(‖m1_n‖), hist(‖m2_n‖)]``
   — a document moves ``n_used`` by ≤ 1, the capped token count by ≤ L
   (hence ≤ 1 after dividing by the public cap ``L``), and each histogram in
   at most two bins by 1: ℓ2 sensitivity ``√(1 + 1 + 2 + 2) = √6``.
2. ``m1``: ``Σ_n f_n m1_n`` with ``f_n = min(1, C1/‖m1_n‖)``: nonnegative
   vectors of norm ≤ C1, so two of them differ by ≤ ``√2·C1`` (their inner
   product is ≥ 0).
3. ``m2_whitening``, one of two releases (:func:`whitening_form`):

   * *dense* (once): ``Σ_n g_n m2_n`` itself, ``g_n = min(1, C2/‖m2_n‖_u)``,
     with symmetric noise on its ``d(d+1)/2`` unique entries (Analyze Gauss,
     Dwork et al. 2014). ``‖A‖_u² = Σ_{i≤j} A_ij² = (‖A‖_F² + Σ_i A_ii²)/2``
     is the norm of that unique-entry vector (:func:`doc_norms`); clipped
     nonnegative matrices differ in it by ≤ ``√2·C2``. By default above
     :data:`DENSE_WHITENING_MAX_WORDS` words (or when asked) the same release is made
     matrix-free (``PrivateSpectralConfig.matrix_free``): never formed, only
     multiplied, its noise regenerated for every product
     (:class:`~distdp.privacy.mechanisms.SymmetricNoiseOperator`).
   * *power* (once per subspace iteration): ``(Σ_n g_n m2_n) Q`` with
     ``g_n = min(1, C2/‖m2_n‖_F)`` and ``Q`` orthonormal: nonnegative
     matrices of Frobenius norm ≤ C2 differ by ≤ ``√2·C2``, and
     ``‖ΔQ‖_F ≤ ‖Δ‖_F‖Q‖₂`` (the noisy power method of Hardt & Price 2014 on
     the raw second moment); far noisier for the same budget (``--whitening power``).

   The ``counts`` histogram of release 1 is of the norm the form clips by.
   Before unmixing passes the dense form is released in two parts
   (:func:`split_whitening`): the second (``m2_whitening_topup``, the same
   statistic with fresh noise) is made only when the first's k-th eigenvalue
   is below :data:`WHITENING_TOPUP_SNR` times its public noise level, and
   otherwise its budget goes to the passes (:func:`move_budget`). For LDA the
   first begins with an early rung (``m2_whitening_early``,
   :func:`split_early`), which is the whole whitening when it clears that
   threshold on its own. With
   ``--working-vocab auto`` and the default's working vocabulary holding
   under :data:`RESTART_TOKEN_SHARE` of the tokens, the first of them is itself made in two parts
   (:func:`split_probe`): when the first part's ratio clears
   :func:`restart_snr`, releases 1–3 so far are kept in the ledger as
   discarded and every spectral release is made again on
   :func:`restart_vocab` words (:func:`restart_plan`).
4. ``tensor_bounds``: ``hist(B_n)``, ``B_n`` the bound below on the norm of a
   document's whitened third moment: sensitivity ``√2``.
5. ``whitened_tensor`` (explicit) or ``tensor_apply`` (once per power
   iteration): ``Σ_n h_n m3_n(W,W,W)`` with ``h_n = min(1, C3/B_n)``; two
   clipped documents differ by ≤ ``2·C3`` in Frobenius norm, which bounds
   the unique-entry vector too, and ``‖T(I,U,U)‖_F ≤ ‖T‖_F ‖U‖₂²``.

Before them, a fit with private EM refinement or a working vocabulary
smaller than ``d`` makes one ``scan`` release on the whole vocabulary:
``[Σ_n x_n/l_n, hist(‖x_n‖₂)]`` (all documents with ≥ 1 token). Each
``x_n/l_n`` is nonnegative with norm ≤ 1 (``‖x‖₂ ≤ ‖x‖₁``), so two differ by
≤ √2, and the histogram by ≤ √2: sensitivity ``√(2 + 2) = 2``, no clipping.
Its frequencies choose the working vocabulary (the ``h`` most frequent
words), on which releases 1–5 run; its histogram gives the EM clip bound.
After them, when EM extends a working vocabulary to every word, the
``tail_gram`` and ``tail_sstats`` releases (:func:`tail_statistics`,
sensitivities :func:`tail_sensitivities`) give every word its topics
(:func:`unmix_topics`), and each EM iteration releases its statistics
(:func:`em_sensitivity`).

Only the *raw* moments ``E[x1⊗x2]``, ``E[x1⊗x2⊗x3]`` and ``M1`` are released;
the α0 corrections of LDA (dp-spectral-lda-end-to-end, Def. 3.1, with the M3
coefficients corrected as in :mod:`distdp.lda.moments`) are post-processing of the releases, with
the Gaussian noise's own bias removed in closed form (:func:`assemble_tensor`).
This avoids the α0-dependent sensitivity of the corrected moments, which is
(1 + 2a2) times larger for M2 and (2 + 12 a3 + 6 b3)/2 times for T.

The clip bounds ``C1, C2, C3`` are quantiles of the per-document norms read
off noisy histograms (releases 1 and 4) on public log-spaced grids; clipping
down-weights the few most concentrated documents, a bias traded for noise
(C3's clip biases α upward, hence its higher quantile:
:class:`PrivateSpectralConfig`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from distdp.lda import moments
from distdp.privacy import accounting, mechanisms
from distdp.privacy.ledger import BudgetNotMetError

__all__ = [
    "STAGES", "COUNT_SENSITIVITY", "DENSE_WHITENING_MAX_WORDS", "WHITENING_FORMS", "whitening_form",
    "PrivateSpectralConfig", "StageNoise", "plan_noise", "WHITENING_FIRST_SHARE", "WHITENING_TOPUP_SNR",
    "split_whitening", "move_budget", "needs_topup", "combine_releases", "RESTART_PROBE_SHARE",
    "RESTART_FIRST_SHARE", "RESTART_GROWTH", "RESTART_TOKEN_SHARE", "split_probe", "restart_snr", "restart_plan",
    "WHITENING_EARLY_SHARE", "split_early", "WHITENING_FIRST_PARTS", "WHITENING_PARTS",
    "restart_vocab", "should_restart", "whitening_mu2",
    "log_grid", "histogram", "quantile_from_histogram", "doc_norms", "tensor_norm_bound",
    "clip_factors", "assemble_tensor", "assemble_tensor_apply", "whitening_noise_level", "em_sensitivity",
    "SCAN_SENSITIVITY", "WORD_SCALE_POWER",
    "count_norms", "working_columns", "working_share", "embed_topics", "threshold_noisy", "threshold_note", "unmix_weights", "tail_statistics",
    "tail_sensitivities", "UNMIX_SHARPEN", "pass_weights", "pass_norms", "unmix_pass_statistics", "unmix_topics",
    "word_scales", "SPECTRAL_WORD_SCALE_POWER", "SPECTRAL_SCALE_FLOOR",
    "spectral_word_scales",
    "UnmixedTopics", "MIXTURE_FLOOR", "mixture_topics", "unmix_diagonal", "ALIGN_MAX_NOISE", "ALIGN_MAX_CONDITION",
    "align_mixing", "combine_unmixed",
]

#: Release stages of the spectral fit, in order, and their default share of the Gaussian budget (μ²).
STAGES = ("counts", "m1", "m2_whitening", "tensor_bounds", "whitened_tensor")
#: Measured (benchmarks/lda_privacy_utility.py): the whitening's noise dominates the error.
DEFAULT_SHARES = {"counts": 0.01, "m1": 0.04, "m2_whitening": 0.85, "tensor_bounds": 0.01,
                  "whitened_tensor": 0.09}

#: Largest working vocabulary whose whitening forms the released d×d second moment (8·d² bytes per
#: shard: 128 MB here); above it the same release is computed matrix-free (its products only). The
#: second-moment release beats the noisy power method's products (N = 10⁵, d = 2,000, k = 20, ε = 4,
#: one noise draw of each): the top-k subspace's largest principal angle to the noise-free one is
#: 0.31 rad vs 1.24 rad (a topic lost) with 7 products; one release instead of 7 divides the noise
#: by √7, and no iteration loses signal to it.
DENSE_WHITENING_MAX_WORDS = 4000
#: Choices of the whitening's form (:func:`whitening_form`).
WHITENING_FORMS = ("auto", "dense", "matrix-free", "power")

#: ℓ2 sensitivity of the first release (see the module docstring).
COUNT_SENSITIVITY = math.sqrt(6.0)
#: ℓ2 sensitivity of a histogram of one value per document under replace-one.
HISTOGRAM_SENSITIVITY = math.sqrt(2.0)

#: ℓ2 sensitivity of the scan release ``[Σ_n x_n/l_n, hist(‖x_n‖₂)]`` (module docstring).
SCAN_SENSITIVITY = 2.0

#: Exponent of the word scales of the unmixing pass and private EM, s ∝ b^{-1/3} (:func:`word_scales`).
WORD_SCALE_POWER = 1.0 / 3.0
#: Power p of the spectral stage's word scales ``s_w ∝ f̂_w^(-p)`` (:func:`spectral_word_scales`); 0: none.
SPECTRAL_WORD_SCALE_POWER = 0.25
#: Least frequency of :func:`spectral_word_scales`, as a fraction of the largest.
SPECTRAL_SCALE_FLOOR = 1e-3

#: Power p of an unmixing pass's document weights ``g_n = θ̂_n^p/‖θ̂_n^p‖₂`` (:func:`unmix_pass_statistics`).
UNMIX_SHARPEN = 2.0

#: An unmixing pass releases entry (i, v) only where its start's solve is above PASS_SUPPORT of that entry's
#: noise deviation (:func:`pass_support`).
PASS_SUPPORT = -0.5

#: Public grids: log-spaced bins for ‖m1_n‖, ‖m2_n‖_F ∈ (0, 1], for B_n relative to r³ and for ‖x_n‖₂ ≥ 1.
NORM_GRID = (2.0 ** -24, 1.0, 96)
COUNT_NORM_GRID = (1.0, 2.0 ** 20, 160)
TENSOR_GRID = (2.0 ** -40, 2.0 ** 4, 176)


@dataclass(frozen=True)
class PrivateSpectralConfig:
    """What a private spectral fit releases and how its budget is split.

    Parameters
    ----------
    epsilon, delta : float
        Budget of the spectral stage (all of it Gaussian: calibrated exactly).
    mechanism : {"whitened", "power"}
        ``"whitened"``: one noisy k×k×k tensor; ``"power"``: the distributed
        DP power method, noise on each ``Σ_shards T(I,U,U)``.
    eig_iters : int
        Noisy subspace iterations on M2 (``eig_iters + 1`` releases of
        ``M2 Q``). A fixed count (a stopping rule on the data would be a
        data-dependent choice). 6: on 24k real documents (ε = 10⁴, noise
        small) 3 left the working-vocabulary topics 0.31–0.41 (L1) from a
        30-iteration fit's, 6 and 10 0.16 (the spread between two noise
        seeds at 30 is 0.18); on the benchmark corpus, where 3 converge,
        6 cost nothing measurable (N = 10⁶, ε = 1 / 2: 0.0423 / 0.0307 vs
        0.0431 / 0.0311; N = 10⁵, ε = 8: 0.0724 vs 0.0719; one seed each),
        although each release's noise is √(7/4) = 1.32× larger.
    power_iters : int
        Releases of the power method (``"power"`` only).
    quantile : float
        Quantile of the per-document norms used as the clip bounds C1, C2.
    tensor_quantile : float
        Quantile of the per-document tensor-norm bounds used as C3. Higher
        than ``quantile``: the documents C3 clips are the short, single-topic
        ones that carry the tensor's signal, most of all a rare topic's, so
        clipping them shrinks the eigenvalues and inflates α = f(1/λ²). At 0.9,
        Σα came out 2.3–2.5 instead of 0.99 on 24k real documents (noise off)
        and 1.19 instead of 1.00 on synthetic LDA; at 0.99, 1.04 and 1.00, for
        ~4× the tensor's noise: topic L1 of the spectral stage alone +5% at
        N = 2·10⁵, d = 1,000, ε = 3, and of the default fit (with its unmixing
        pass) 0.0445 → 0.0431 at N = 10⁶, ε = 1 (``lda_privacy_utility``).
    length_cap : int
        Public cap ``L`` on the tokens counted per document in the token total.
    dense_whitening : bool
        Release ``Σ g_n m2_n`` once (release 3, the second-moment form:
        one symmetric Gaussian noise matrix) instead of ``eig_iters + 1``
        noisy products ``M2 Q`` (the power form).
    matrix_free : bool
        With ``dense_whitening``: never form that d×d release, only its
        products (the noise regenerated per product,
        :class:`~distdp.privacy.mechanisms.SymmetricNoiseOperator`; the
        eigenpairs by LOBPCG). The same release and privacy; memory O(d·p).
        :func:`whitening_form` chooses it above
        :data:`DENSE_WHITENING_MAX_WORDS` words.
    shares : dict
        Fraction of the Gaussian budget (in μ², which adds exactly) per stage.
    """

    epsilon: float
    delta: float
    mechanism: str = "whitened"
    eig_iters: int = 6
    power_iters: int = 12
    quantile: float = 0.9
    tensor_quantile: float = 0.99
    length_cap: int = 100
    dense_whitening: bool = False
    matrix_free: bool = False
    shares: dict = field(default_factory=lambda: dict(DEFAULT_SHARES))

    def validate(self) -> None:
        """Raise ``ValueError`` naming the bad parameter."""
        mechanisms.check_epsilon(self.epsilon)
        mechanisms.check_delta(self.delta)
        if self.mechanism not in ("whitened", "power"):
            raise ValueError(f"mechanism must be 'whitened' or 'power', got {self.mechanism!r}")
        for name in ("eig_iters", "power_iters", "length_cap"):
            v = getattr(self, name)
            if isinstance(v, bool) or int(v) != v or v < 1:
                raise ValueError(f"{name} must be an integer ≥ 1, got {v!r}")
        for name in ("quantile", "tensor_quantile"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {getattr(self, name)!r}")
        for name in ("dense_whitening", "matrix_free"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.matrix_free and not self.dense_whitening:
            raise ValueError("matrix_free=True computes the second-moment release (dense_whitening=True) without "
                             "forming it; the power form (dense_whitening=False) has no matrix to avoid")
        if set(self.shares) != set(STAGES) or not all(v > 0 for v in self.shares.values()):
            raise ValueError(f"shares must give a positive fraction to each of {STAGES}, got {self.shares!r}")

    @property
    def form(self) -> str:
        """The whitening's form (:func:`whitening_form`): ``"dense"``, ``"matrix-free"`` or ``"power"``."""
        return ("matrix-free" if self.matrix_free else "dense") if self.dense_whitening else "power"

    def releases(self, stage: str) -> int:
        """How many Gaussian releases ``stage`` makes."""
        if stage == "m2_whitening":
            return 1 if self.dense_whitening else int(self.eig_iters) + 1
        if stage == "whitened_tensor" and self.mechanism == "power":
            return int(self.power_iters)
        return 1


@dataclass(frozen=True)
class StageNoise:
    """Noise multiplier (σ / sensitivity) of each release of one stage."""

    stage: str
    multiplier: float
    count: int

    @property
    def mu2(self) -> float:
        """This stage's part of the plan's μ² (``count/multiplier²``; the parts add up, μ-GDP)."""
        return self.count / self.multiplier ** 2


def plan_noise(config: PrivateSpectralConfig, extra: dict | None = None, accounting_mode: str = "tight") -> dict:
    """Noise multipliers of every stage, calibrated jointly to ``(epsilon, delta)``.

    Gaussian releases compose exactly: multipliers ``m_s`` (``c_s`` releases
    each) are together one Gaussian mechanism with ``1/m² = Σ c_s/m_s²``
    (μ-GDP, Dong, Roth & Su 2019). The smallest ``m`` that is
    ``(ε, δ)``-DP under PLD accounting (what the ledger certifies) is split by
    the shares: ``c_s/m_s² = share_s/m²``.

    Parameters
    ----------
    config : PrivateSpectralConfig
    extra : dict, optional
        More stages ``{name: (share, count)}`` sharing the same budget
        (the EM refinement's iterations).
    accounting_mode : {"tight", "basic"}
        ``"basic"`` reproduces the papers' recipe: ε split by the shares and
        evenly over a stage's releases, δ evenly over all releases, each
        release calibrated alone (analytic Gaussian); the ledger then
        certifies a smaller ε than requested.

    Returns
    -------
    dict
        ``{stage: StageNoise}``.
    """
    config.validate()
    stages = {s: (config.shares[s], config.releases(s)) for s in STAGES}
    stages.update(extra or {})
    total = sum(share for share, _ in stages.values())
    if accounting_mode == "basic":
        n_rel = sum(count for _, count in stages.values())
        return {s: StageNoise(s, mechanisms.analytic_gaussian_sigma(config.epsilon * share / total / count,
                                                                    config.delta / n_rel), count)
                for s, (share, count) in stages.items()}
    if accounting_mode != "tight":
        raise ValueError(f"accounting must be 'tight' or 'basic', got {accounting_mode!r}")
    m = accounting.calibrate_gaussian_multiplier(config.epsilon, config.delta, 1, "pld")
    return {s: StageNoise(s, m * math.sqrt(count * total / share), count)
            for s, (share, count) in stages.items()}


#: Fraction of the dense whitening's budget (μ²) that its first release spends before unmixing passes
#: (:func:`split_whitening`). 0.25 did ≤ 2% better where the top-up is skipped either way and lost the
#: gain (5–6%) on fits whose first release then fell below the threshold (``benchmarks/private_corpora.py``).
WHITENING_FIRST_SHARE = 0.4
#: The first whitening release suffices when the noisy second moment's k-th eigenvalue is at least this many
#: times the spectral norm of its noise (:func:`needs_topup`).
WHITENING_TOPUP_SNR = 2.0


def split_whitening(plan: dict, first_share: float | None = None) -> dict:
    """``plan`` with its one dense ``m2_whitening`` release split into two: ``first_share`` of its μ² for
    ``m2_whitening`` and the rest for ``m2_whitening_topup`` (``None``: :data:`WHITENING_FIRST_SHARE`,
    read when called).

    Why: the spectral start only has to be good enough for the tail release
    and the unmixing passes to build on (at ε = 1, N = 10⁶ on the
    ``lda_privacy_utility`` corpus a spectral stage at 0.4 of its budget
    left the start's L1 on the working words 0.11–0.13 instead of 0.076, but
    the tail release's 0.066 unchanged). The second release is made only where
    the first falls short (:func:`needs_topup`): with all spectral stages at
    0.4 of their budget, 8 synthetic corpora (N = 10⁵, d = 2,000, ε = 1–8) lost
    a topic (L1 0.41 instead of 0.10) where the first release's ratio was
    1.2–1.5, and of the 14 fits where it was ≥ 2, 12 gained (up to 8%) and
    two (k = 20) lost ≈ 1%. As shipped (the whitening
    alone split; ``benchmarks/private_corpora.py``), of the 15 of those 32 fits
    whose first release cleared 2×, 13 improved (by 0.6–6.3%), one kept its L1
    and one lost 0.5%; the benchmark corpus at N = 10⁶, ε = 1 went from 0.0293
    to 0.0277 (docs/design/private-fit.md, *The whitening's top-up*).

    Privacy: the two releases are Gaussian, the second decided from the
    first's (public) output, and in either branch the fit's Σμ² is the same
    (:func:`move_budget` gives an unspent second release's μ² to the passes):
    Gaussian DP composes with budgets chosen adaptively exactly as it does
    with fixed ones (Smith & Thakurta 2022, "Fully adaptive composition for
    Gaussian differential privacy"), so the fit is as private as the plan
    says whichever branch runs.
    """
    first_share = WHITENING_FIRST_SHARE if first_share is None else first_share
    if not 0 < first_share < 1:
        raise ValueError(f"first_share must be in (0, 1), got {first_share!r}")
    w = plan["m2_whitening"]
    if w.count != 1:
        raise ValueError(f"only a single (dense) whitening release can be split, got {w.count} releases")
    out = dict(plan)
    out["m2_whitening"] = StageNoise("m2_whitening", w.multiplier / math.sqrt(first_share), 1)
    out["m2_whitening_topup"] = StageNoise("m2_whitening_topup", w.multiplier / math.sqrt(1.0 - first_share), 1)
    return out


def move_budget(plan: dict, source: str, target: str) -> dict:
    """``plan`` without stage ``source``, its μ² (``count/multiplier²``) added to ``target``'s releases.

    Each of ``target``'s ``c`` releases gets multiplier ``m' = (c/(c/m² + c_s/m_s²))^{1/2}``, so
    the plan's total μ² (what the ledger composes to ``(ε, δ)``) is unchanged.
    """
    tgt = plan[target]
    out = {s: n for s, n in plan.items() if s != source}
    out[target] = StageNoise(target, math.sqrt(tgt.count / (tgt.mu2 + plan[source].mu2)), tgt.count)
    return out


def needs_topup(eigenvalue_k: float, noise_level: float, ratio: float | None = None) -> bool:
    """Whether a whitening release's k-th eigenvalue (of the noisy M2) is below ``ratio`` times its noise level
    (``None``: :data:`WHITENING_TOPUP_SNR`, read when called).

    Both are public (a released eigenvalue and :func:`whitening_noise_level`); by Davis–Kahan the top-k
    subspace's angle to the noise-free one is at most about ``noise_level/eigenvalue_k``.
    """
    ratio = WHITENING_TOPUP_SNR if ratio is None else ratio
    return not float(eigenvalue_k) >= float(ratio) * float(noise_level)


def combine_releases(first: np.ndarray, sigma_first: float, second: np.ndarray,
                     sigma_second: float) -> tuple[np.ndarray, float]:
    """Two Gaussian releases of one statistic averaged by precision: ``(value, σ)``, σ = (σ₁⁻² + σ₂⁻²)^{-1/2}.

    The average has exactly the distribution of one release at that σ (post-processing). Computed as
    ``first + w(second − first)``, ``w = σ₂⁻²/(σ₁⁻² + σ₂⁻²)``, in one new array (the inputs are not
    modified): the dense whitening's d×d releases are up to 128 MB each.
    """
    _, w2, sigma = precision_weights(sigma_first, sigma_second)
    out = np.subtract(second, first, dtype=np.float64)
    out *= w2
    out += first
    return out, sigma


def precision_weights(sigma_first: float, sigma_second: float) -> tuple[float, float, float]:
    """Weights ``(w₁, w₂)`` of two Gaussian releases' precision average and its σ = (σ₁⁻² + σ₂⁻²)^{-1/2}."""
    p1, p2 = 1.0 / float(sigma_first) ** 2, 1.0 / float(sigma_second) ** 2
    return p1 / (p1 + p2), p2 / (p1 + p2), 1.0 / math.sqrt(p1 + p2)


#: The working vocabulary's restart (``--working-vocab auto``; :func:`split_probe`, :func:`restart_plan`;
#: docs/design/private-fit.md, *The working vocabulary's size*): the probe's part of the whitening's first release (0.1 of the
#: whitening's μ²), the restart's first release's part of the whitening's μ², its working vocabulary's growth,
#: and the token share (:func:`working_share`) below which the default's working words are probed at all.
RESTART_PROBE_SHARE = 0.25
RESTART_FIRST_SHARE = 0.25
RESTART_GROWTH = 2
RESTART_TOKEN_SHARE = 0.7


#: The stages a dense whitening's first release can begin with: the restart's probe or the early rung
#: (:func:`split_probe`).
WHITENING_FIRST_PARTS = ("m2_whitening_probe", "m2_whitening_early")
#: The stages a dense whitening's release can be made in: those, the first release, the top-up (:func:`split_whitening`).
WHITENING_PARTS = WHITENING_FIRST_PARTS + ("m2_whitening", "m2_whitening_topup")


def split_probe(plan: dict, share: float | None = None, stage: str = "m2_whitening_probe") -> dict:
    """``plan`` with the whitening's first release (``m2_whitening``) split into a probe
    (``stage``, ``share`` of its μ²; ``None``: :data:`RESTART_PROBE_SHARE`) and the rest.

    Without a restart the fit releases both and averages them by precision
    (:func:`combine_releases`): exactly the distribution of the unsplit
    release, so a fit that does not restart is the fit without a probe.
    ``stage="m2_whitening_early"``: the early rung (:func:`split_early`).
    """
    share = RESTART_PROBE_SHARE if share is None else share
    if not 0 < share < 1:
        raise ValueError(f"share must be in (0, 1), got {share!r}")
    w = plan["m2_whitening"]
    if w.count != 1 or "m2_whitening_topup" not in plan:
        raise ValueError("only a split dense whitening (split_whitening) can be probed")
    if stage not in WHITENING_FIRST_PARTS:
        raise ValueError(f"stage must be one of {WHITENING_FIRST_PARTS}, got {stage!r}")
    out = dict(plan)
    out[stage] = StageNoise(stage, w.multiplier / math.sqrt(share), 1)
    out["m2_whitening"] = StageNoise("m2_whitening", w.multiplier / math.sqrt(1.0 - share), 1)
    return out


#: The fraction of the dense whitening's μ² its early rung spends before unmixing passes
#: (:func:`split_early`). A release whose k-th eigenvalue clears :data:`WHITENING_TOPUP_SNR` times its
#: noise level at this share is the whole whitening; the benchmark corpus's first release (0.4) cleared
#: it by 3.8×, i.e. 2.35× at 0.15 (docs/design/private-fit.md, *The whitening's early rung*).
WHITENING_EARLY_SHARE = 0.15


def split_early(plan: dict, share: float | None = None) -> dict:
    """``plan`` with the whitening's first release split (:func:`split_probe`) so that its first part,
    the early rung ``m2_whitening_early``, holds ``share`` of the whole whitening's μ² (``None``:
    :data:`WHITENING_EARLY_SHARE`, read when called).

    Why: a whitening release is good enough to start from once its k-th
    eigenvalue is :data:`WHITENING_TOPUP_SNR` times its noise level
    (:func:`needs_topup`), and what it spends beyond that the passes' ``Q``
    could have had. The early rung clears the bar on its own where the
    margin is large (the fit then makes no other whitening release and
    gives their μ² to the passes); elsewhere the rest of the first release
    follows and is averaged with it by precision, which is the first
    release of :func:`split_whitening` in distribution, so such fits are
    unchanged but for their noise draws. Privacy as the top-up's: every
    branch is chosen from released values and spends the plan's total μ².
    """
    share = WHITENING_EARLY_SHARE if share is None else share
    first = plan["m2_whitening"].mu2
    if not 0 < share < first / whitening_mu2(plan):
        raise ValueError(f"share must be in (0, {first / whitening_mu2(plan):.3g}) (the first release's part of "
                         f"the whitening), got {share!r}")
    return split_probe(plan, share * whitening_mu2(plan) / first, "m2_whitening_early")


def whitening_mu2(plan: dict) -> float:
    """The whitening's whole μ²: its probe or early rung, first release and top-up together (those in ``plan``)."""
    return sum(plan[s].mu2 for s in WHITENING_PARTS if s in plan)


def restart_snr(plan: dict, growth: float = RESTART_GROWTH, first_share: float = RESTART_FIRST_SHARE) -> float:
    """The probe's ratio (k-th eigenvalue / noise level) from which the fit restarts on more words.

    The restart's first release, on ``growth`` times the words at ``first_share``
    of the whitening's μ², has noise level ``√(growth·μ²_probe/(first_share·μ²_w))``
    times the probe's (:func:`whitening_noise_level` grows with √words and σ
    with 1/√μ²), and about the probe's k-th eigenvalue (the added words are the
    rarer ones). The threshold is the probe ratio at which that release is
    expected to clear :data:`WHITENING_TOPUP_SNR` without its top-up:
    ``2·√(2·0.1/0.25) ≈ 1.79`` with the defaults. Measured, the eigenvalue on
    twice the words was 0.81–1.02 times the probe's (three corpus families), so a
    restart near the threshold can still make its top-up (docs/design/private-fit.md, *The
    working vocabulary's size*).
    """
    return WHITENING_TOPUP_SNR * math.sqrt(growth * plan["m2_whitening_probe"].mu2
                                           / (first_share * whitening_mu2(plan)))


def restart_plan(plan: dict, lost_mu2: float, target: str = "unmix_sstats",
                 first_share: float = RESTART_FIRST_SHARE) -> dict:
    """The plan of a restart's releases: ``plan`` (probed, :func:`split_probe`) without the probe, its
    whitening's whole μ² re-split at ``first_share`` (:func:`split_whitening`) and ``lost_mu2`` (the
    discarded releases' μ²) taken from ``target``'s releases, so that the discarded and the restart's
    releases together compose to the plan's total.
    """
    whole = whitening_mu2(plan)
    tgt = plan[target]
    if not 0 <= lost_mu2 < tgt.mu2:
        raise ValueError(f"the discarded releases' μ² {lost_mu2:.3g} must be below {target}'s {tgt.mu2:.3g}")
    out = {s: n for s, n in plan.items() if s not in ("m2_whitening_probe", "m2_whitening_topup")}
    out["m2_whitening"] = StageNoise("m2_whitening", 1.0 / math.sqrt(whole), 1)
    out[target] = StageNoise(target, math.sqrt(tgt.count / (tgt.mu2 - lost_mu2)), tgt.count)
    return split_whitening(out, first_share)


def restart_vocab(h: int, d: int) -> int:
    """The restart's working vocabulary: :data:`RESTART_GROWTH` times ``h`` words, at most ``d`` and
    :data:`DENSE_WHITENING_MAX_WORDS` (its whitening stays dense)."""
    return int(min(d, RESTART_GROWTH * h, max(h, DENSE_WHITENING_MAX_WORDS)))


def should_restart(probe_ratio: float, threshold: float) -> bool:
    """Whether the probe's (public) ratio asks for the restart on more words (:func:`restart_snr`)."""
    return float(probe_ratio) >= float(threshold)


# --------------------------------------------------------------------------- clip bounds

def log_grid(lo: float, hi: float, n_bins: int) -> np.ndarray:
    """``n_bins + 1`` log-spaced bin edges from ``lo`` to ``hi``."""
    return np.geomspace(lo, hi, n_bins + 1)


def histogram(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Counts of ``values`` per bin; values outside the grid go to the end bins."""
    idx = np.searchsorted(edges, values, side="right") - 1
    return np.bincount(np.clip(idx, 0, len(edges) - 2), minlength=len(edges) - 1).astype(np.float64)


def quantile_from_histogram(noisy_counts: np.ndarray, edges: np.ndarray, q: float, sigma: float = 0.0,
                            threshold: float = 2.0) -> float:
    """Upper edge of the first bin where the cumulative noisy mass reaches ``q``.

    Post-processing of a noisy histogram whose bins carry Gaussian noise of
    standard deviation ``sigma``: bins below ``threshold·sigma`` count as
    empty, so the noise of the many empty bins past the data does not move
    the quantile up (on 3,000 documents with 2% of ε = 8 it had pushed the
    0.9-quantile of ‖x‖₂ from ≈ 50 to the grid's top edge, 512). With no
    mass left the largest edge is returned (no clipping, the most noise).
    """
    c = np.asarray(noisy_counts, dtype=np.float64)
    c = np.where(c > max(threshold * float(sigma), 0.0), c, 0.0)
    total = c.sum()
    if total <= 0:
        return float(edges[-1])
    i = int(np.searchsorted(np.cumsum(c), q * total, side="left"))
    return float(edges[min(i, len(c) - 1) + 1])


def doc_norms(counts: sp.csr_matrix, scales: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``‖m1_n‖₂``, ``‖m2_n‖_F`` and ``‖m2_n‖_u`` of every document (0 for documents shorter than 3 tokens).

    ``‖c cᵀ − diag c‖_F² = (Σc²)² − 2Σc³ + Σc²``; its diagonal's squares sum to
    ``Σ(c² − c)²``, and the unique-entry norm (release 3, dense form) is
    ``‖A‖_u = √((‖A‖_F² + Σ A_ii²)/2)``: O(nnz). With word ``scales`` s the
    second moment's norms are those of ``S m2_n S`` (``S = diag(s)``, the
    scaled whitening of :func:`spectral_word_scales`):
    ``‖S(c cᵀ − diag c)S‖_F² = (Σs²c²)² − 2Σs⁴c³ + Σs⁴c²``, diagonal ``Σs⁴(c² − c)²``.
    """
    w1, w2, _ = moments.doc_weights(moments.doc_lengths(counts))
    plain = moments.row_sums(counts, np.square)
    v2, v4 = (None, None) if scales is None else (scales ** 2, scales ** 4)
    s2 = plain if scales is None else moments.row_sums(counts, np.square, column_weights=v2)
    s3 = moments.row_sums(counts, lambda x: x ** 3, column_weights=v4)
    s2b = s2 if scales is None else moments.row_sums(counts, np.square, column_weights=v4)
    diag_sq = moments.row_sums(counts, lambda x: (x * x - x) ** 2, column_weights=v4)
    frob_sq = np.maximum(s2 * s2 - 2.0 * s3 + s2b, 0.0)
    return w1 * np.sqrt(plain), w2 * np.sqrt(frob_sq), w2 * np.sqrt(0.5 * (frob_sq + diag_sq))


def tensor_norm_bound(counts: sp.csr_matrix, W: np.ndarray, Y: np.ndarray | None = None) -> np.ndarray:
    """An upper bound ``B_n`` on ``‖m3_n(W,W,W)‖_F`` for every document, O(nnz + n k).

    ``l(l−1)(l−2)·m3_n(W,W,W) = y⊗3 − sym3(P⊗y) + 2 Σ_i c_i w_i⊗3`` with
    ``y = Wᵀc``, ``P = Σ_i c_i w_i w_iᵀ`` (dp-spectral-lda-end-to-end, eq. 9, whitened;
    :mod:`distdp.lda.moments`), so by the triangle inequality
    ``B_n = (‖y‖³ + 3‖y‖ Σ c_i‖w_i‖² + 2 Σ c_i ‖w_i‖³) / (l(l−1)(l−2))``.
    """
    _, _, w3 = moments.doc_weights(moments.doc_lengths(counts))
    if Y is None:
        Y = np.asarray(counts @ W)
    rn = np.sqrt(np.einsum("ij,ij->i", W, W))
    ny = np.sqrt(np.einsum("ij,ij->i", Y, Y))
    return w3 * (ny ** 3 + 3.0 * ny * (counts @ rn ** 2) + 2.0 * (counts @ rn ** 3))


def clip_factors(norms: np.ndarray, bound: float) -> np.ndarray:
    """``min(1, bound / norm)`` per document (1 where the norm is 0)."""
    norms = np.asarray(norms, dtype=np.float64)
    return np.where(norms > bound, bound / np.where(norms > 0, norms, 1.0), 1.0)


# --------------------------------------------------------------------------- assembling T

def assemble_tensor(e3: np.ndarray, e2w: np.ndarray, m: np.ndarray, gram: np.ndarray,
                    m1_var: float, alpha0: float) -> np.ndarray:
    """LDA's whitened ``M3(W,W,W)`` from released raw moments, debiased for the M1 noise.

    ``M3 = E3 − a3·sym3(E2⊗M1) + b3·M1⊗3`` (dp-spectral-lda-end-to-end, Def. 3.1,
    corrected: ``a3 = α0/(α0+2)``, ``b3 = 2α0²/((α0+1)(α0+2))``; the paper's
    eqs. 3 and 29 print other coefficients). With ``m̂ = Wᵀ(M1 + η)``, ``η ~ N(0, v I)``
    independent of the other releases, ``E[m̂⊗3] = m⊗3 + v·sym3((WᵀW)⊗m)``
    and ``E[sym3(Ê2⊗m̂)] = sym3(E2⊗m)``, so the estimate below is unbiased
    for the plug-in moment.

    Parameters
    ----------
    e3 : ndarray (k,k,k)
        Released ``E3(W,W,W)``.
    e2w : ndarray (k,k)
        ``E2(W,W)`` (post-processing of the M2 releases).
    m : ndarray (k,)
        ``Wᵀ M̂1``.
    gram : ndarray (k,k)
        ``WᵀW``.
    m1_var : float
        Per-entry variance ``v`` of the M1 noise.
    alpha0 : float
    """
    coef = moments.MomentCoefficients(alpha0)
    cube = m[:, None, None] * m[None, :, None] * m[None, None, :]
    return (e3 - coef.a3 * moments.sym3_outer(e2w, m)
            + coef.b3 * (cube - m1_var * moments.sym3_outer(gram, m)))


def assemble_tensor_apply(e3u: np.ndarray, U: np.ndarray, e2w: np.ndarray, m: np.ndarray,
                          gram: np.ndarray, m1_var: float, alpha0: float) -> np.ndarray:
    """:func:`assemble_tensor` contracted as ``(I, u, u)`` for each column of ``U`` (k×L).

    ``sym3(P⊗y)(I,u,u) = 2 (Pu)(y·u) + y (uᵀPu)``.
    """
    coef = moments.MomentCoefficients(alpha0)

    def sym_apply(P):
        PU = P @ U
        return 2.0 * PU * (m @ U)[None, :] + m[:, None] * np.einsum("kl,kl->l", U, PU)[None, :]

    mu = m @ U
    return (e3u - coef.a3 * sym_apply(e2w)
            + coef.b3 * (m[:, None] * (mu * mu)[None, :] - m1_var * sym_apply(gram)))


def whitening_form(choice: str, d: int) -> str:
    """The whitening's form on ``d`` words: ``"dense"``, ``"matrix-free"`` or ``"power"``.

    ``choice``: one of :data:`WHITENING_FORMS`; ``"auto"`` releases the
    second moment once, formed as a d×d matrix for d ≤
    :data:`DENSE_WHITENING_MAX_WORDS` and matrix-free above. ``d`` is public
    (the working vocabulary's size).
    """
    if choice not in WHITENING_FORMS:
        raise ValueError(f"whitening must be one of {WHITENING_FORMS}, got {choice!r}")
    if choice == "auto":
        return "dense" if d <= DENSE_WHITENING_MAX_WORDS else "matrix-free"
    return choice


def whitening_noise_level(sigma: float, d: int, p: int, shift: float) -> float:
    """Below this the k-th eigenvalue of the private whitening's ``Qᵀ M̂2 Q`` is noise: ``2σ(√d + √p) + shift``.

    ``2σ(√d + √p)`` is about the top eigenvalue of the noise of the last
    d×p product (``σ`` per entry, in M2's units); ``p = 0`` gives ``2σ√d``,
    the spectral norm of the dense form's symmetric noise (``σ`` per unique
    entry, a Wigner matrix). ``shift = a2·v`` is the
    identity that un-biases the noisy ``M̂1M̂1ᵀ`` (``v`` the variance of each
    entry of the noisy M̂1): it raises every eigenvalue but one by
    ``a2·v`` whatever the data, so a k-th eigenvalue that does not clear it
    is that shift. (A corpus of 395 documents at ε = 2 whose noisy clip bound
    C2 fell to 1e-7 once returned topics from ten equal eigenvalues
    ``≈ a2·v`` that cleared ``2σ(√d + √p)`` alone.) All of it is public.
    """
    return 2.0 * float(sigma) * (math.sqrt(d) + math.sqrt(p)) + float(shift)


def em_sensitivity(norm_cap: float) -> float:
    """ℓ2 sensitivity of the EM statistics ``Σ_n w_n (x_n ∘ φ_n)`` (k×d), ``w_n = C/‖x_n ∘ φ_n‖_F``.

    Each document's term is scaled to Frobenius norm ``C``
    (:func:`distdp.lda.refine.contribution_scale`; 0 for an empty document);
    the terms are nonnegative, so two documents' differ by ≤ ``√2·C``.
    """
    return math.sqrt(2.0) * float(norm_cap)


def unmix_weights(norms: np.ndarray, lengths: np.ndarray, norm_cap: float,
                  theta_norms: np.ndarray | None = None, weight_norms: np.ndarray | None = None) -> np.ndarray:
    """Per-document weights of an unmixing release: ``min(C/(‖g‖₂‖x‖₂), C²/(‖g‖₂‖θ̂‖₂ l))`` (0 for empty documents).

    A document weighted by ``g_n`` (``θ̂_n`` itself in the ``tail`` release,
    the default; a unit vector in :func:`unmix_pass_statistics`) adds
    ``w g xᵀ`` to the unmixing statistics (Frobenius norm ``w‖g‖₂‖x‖₂``) and
    ``w l g θ̂ᵀ`` to the topic Gram matrix (``w l‖g‖₂‖θ̂‖₂``); the weights
    set the first to ``C`` and cap the second at ``C²``
    (:func:`tail_sensitivities`). ``theta_norms`` defaults to 1 (its largest
    value on the simplex).

    Every document is scaled to the sensitivity, not only those above it
    (``min(1, ·)`` would leave the others at ``w = 1``): the noise is set by
    ``C`` alone, and a document's signal ``w l ∝ l/‖x‖₂`` is the most any
    weight allows, so the solve's noise falls by the ratio of
    ``Σ l/‖x‖₂`` to ``Σ min(l/C, l/‖x‖₂)`` (1.16 at the 0.9 quantile on the
    ``lda_privacy_utility`` corpora; L1 0.0445 vs 0.0504 at ε = 1, N = 10⁶,
    with no change without noise). For integer counts ``l ≤ ‖x‖₂²``, so the
    second bound only bites where ``‖x‖₂ > C/‖θ̂‖₂``.
    """
    c = float(norm_cap)
    t = np.ones(np.shape(norms)) if theta_norms is None else np.asarray(theta_norms, dtype=np.float64)
    g = t if weight_norms is None else np.asarray(weight_norms, dtype=np.float64)
    q, r = g * np.asarray(norms, dtype=np.float64), g * t * np.asarray(lengths, dtype=np.float64)
    return np.where(q > 0, np.minimum(c / np.where(q > 0, q, 1.0), c * c / np.where(r > 0, r, 1.0)), 0.0)


def spectral_word_scales(frequencies: np.ndarray, power: float = SPECTRAL_WORD_SCALE_POWER,
                         noise: float = 0.0) -> np.ndarray | None:
    """Word scales ``s_w = f̂_w^(-p) / max_v f̂_v^(-p)`` of the private spectral stage (None when ``power`` is 0).

    ``f̂``: the scan's released frequencies over the working words (post-processing), floored at
    their noise deviation ``noise`` and at :data:`SPECTRAL_SCALE_FLOOR` of the largest: a word whose
    frequency the noise hides is not weighted as if it were rarer still, and the scales span at most
    ``SPECTRAL_SCALE_FLOOR^(-p)``. Whitening ``S M2 S`` instead of ``M2`` (``S = diag(s)``) has the
    same topics (``S μ_i``, mapped back by ``S⁻¹``), but the words every topic shares — the frequent
    ones of real text — weigh less in each document's clipped ``m2_n`` and in the released sum,
    whose noise is isotropic: the topics' differences, which set σ_k, live on rarer words. Scaled so
    the largest is 1: the scaled documents' norms stay below the unscaled ones (the clip's histogram
    grid holds them).
    """
    if power == 0:
        return None
    f = np.asarray(frequencies, dtype=np.float64)
    f = np.maximum(f, max(SPECTRAL_SCALE_FLOOR * float(f.max()), float(noise), 1e-300))
    s = f ** -power
    return s / s.max()


def word_scales(topic_word: np.ndarray, frequencies: np.ndarray, power: float = WORD_SCALE_POWER) -> np.ndarray:
    """Word scales ``s_iv = b_iv^{-p}`` (k×d) of an unmixing pass or private EM, from released topics and frequencies.

    ``b_i = ½(β̂_i + f̂)``, with ``β̂`` the current topics and ``f̂`` the scan's
    word frequencies (both post-processing of earlier releases, clipped at 0
    and normalised), floored at ``1/(2d)``; each row is scaled so that
    ``Σ_v b_iv s_iv² = Σ_v b_iv`` (a typical document keeps its norm).

    Why: the pass releases ``Q_iv = s_iv Σ_{n→i} w_n x_nv`` with each
    document scaled to ``‖w x∘s_i‖₂ = C``, so entry ``(i, v)`` of ``Q/s``
    carries noise ``σ/s_iv``. For a document of topic i, ``‖x∘s_i‖₂²`` grows
    as ``Σ_v b_iv s_iv²``, and the sum of the entries' noise over the words,
    ``∝ (Σ_v b_iv s_iv²)^{1/2} Σ_v 1/s_iv``, is smallest at ``s ∝ b^{-1/3}``
    (Lagrange): rare words, which cost a document little norm, get less
    noise, frequent ones (whose topic weights are large) more. The floor and
    the half of ``f̂`` keep a word the current topics put at 0 (thresholded)
    or a mixed document's stray word from blowing up a norm. ``power = 0``
    gives scales of 1 (the unscaled pass).
    """
    tw = np.maximum(np.asarray(topic_word, dtype=np.float64), 0.0)
    f = np.maximum(np.asarray(frequencies, dtype=np.float64), 0.0)
    d = tw.shape[1]
    if f.shape != (d,):
        raise ValueError(f"frequencies must have shape ({d},), got {f.shape}")
    rows = tw.sum(axis=1, keepdims=True)
    tw = np.where(rows > 0, tw / np.where(rows > 0, rows, 1.0), 1.0 / d)
    f = f / f.sum() if f.sum() > 0 else np.full(d, 1.0 / d)
    b = np.maximum(0.5 * (tw + f), 0.5 / d)
    s = b ** -float(power)
    return s * np.sqrt(b.sum(axis=1, keepdims=True) / (b * s * s).sum(axis=1, keepdims=True))


#: Weight of the uniform distribution mixed into the topics of :func:`single_topic_posterior`.
SINGLE_TOPIC_SMOOTHING = 0.1


def single_topic_posterior(counts: sp.csr_matrix, topic_word: np.ndarray, weights: np.ndarray,
                           smoothing: float = SINGLE_TOPIC_SMOOTHING) -> np.ndarray:
    """One-hot of each document's posterior mode under the single-topic model (n×k).

    ``argmax_i log π_i + Σ_v x_nv log β̃_iv``, ``β̃ = (1 − s)β + s/d`` with
    ``s = smoothing`` (floored at 1e-12 when ``s = 0``) and ``π`` the released
    weights normalised: the ``θ̂_n`` of the unmixing releases when every
    document has one topic; their ``G`` is then diagonal by construction.
    The smoothing keeps a word a noisy start topic put at 0 from ruling that
    topic out of every document containing it: with ``s = 0``, 1 of 10 noise
    seeds of a private fit (N = 10⁴, d = 500, k = 5, ε = 4) left L1 0.34
    instead of 0.041; ``s`` = 0.01 / 0.1 / 0.3 all gave 0.041–0.047 there,
    and identical results at ε = 16.
    """
    counts = sp.csr_matrix(counts)
    tw = np.maximum(np.asarray(topic_word, dtype=np.float64), 0.0)
    tw = (1.0 - smoothing) * tw / np.maximum(tw.sum(axis=1, keepdims=True), 1e-300) + smoothing / tw.shape[1]
    w = np.maximum(np.asarray(weights, dtype=np.float64), 0.0)
    w = w / w.sum() if w.sum() > 0 else np.full(tw.shape[0], 1.0 / tw.shape[0])
    score = np.asarray(counts @ np.log(np.maximum(tw, 1e-12)).T) + np.log(np.maximum(w, 1e-12))[None, :]
    out = np.zeros(score.shape)
    out[np.arange(score.shape[0]), score.argmax(axis=1)] = 1.0
    return out


def _unmix_sums(counts: sp.csr_matrix, theta: np.ndarray, g: np.ndarray, norm_cap: float, norms: np.ndarray):
    """``Q = Σ_n w_n g_n x_nᵀ`` and ``G = Σ_n w_n l_n g_n θ̂_nᵀ`` with the weights of :func:`unmix_weights`.

    ``norms``: the norm each document's ``Q`` term is scaled by, per unit of ``‖g_n‖₂``.
    """
    lengths = moments.doc_lengths(counts)
    w = unmix_weights(norms, lengths, norm_cap, np.linalg.norm(theta, axis=1), np.linalg.norm(g, axis=1))
    return np.asarray((counts.T @ (g * w[:, None])).T), (g * (w * lengths)[:, None]).T @ theta


def tail_statistics(counts: sp.csr_matrix, theta: np.ndarray, norm_cap: float,
                    scales: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``tail`` release's sums ``Q = Σ_n w_n θ̂_n x_nᵀ`` (k×d) and ``G = Σ_n w_n l_n θ̂_nθ̂_nᵀ`` (k×k).

    ``w_n`` are the weights of :func:`unmix_weights` with ``C = norm_cap``.
    With word ``scales`` ``S`` (k×d, :func:`word_scales`) ``Q = Σ_n w_n (θ̂_n x_nᵀ)∘S``
    and ``w_n`` sets ``‖(θ̂_n x_nᵀ)∘S‖_F`` (not ``‖θ̂_n‖₂‖x_n‖₂``) to ``C`` (:func:`pass_norms`),
    so the sensitivities are those of :func:`tail_sensitivities` either way; solve
    with ``unmix_topics(..., scales=S)``.

    ``θ̂_n`` is document n's topic mixture estimated from its working-vocabulary
    words only. Where those are independent of word ``v`` given ``θ_n`` and
    ``θ̂_n`` is the posterior mean, ``E[Q] = G β`` (each ``x_nv`` has mean
    ``l_n θ_nᵀβ_{·v}``, and ``E[θ̂ θᵀ] = E[θ̂ θ̂ᵀ]``), so :func:`unmix_topics`
    recovers β on every word from one release instead of EM's slow, noisy
    sharpening of words outside the working vocabulary.
    """
    theta, counts = np.asarray(theta, dtype=np.float64), sp.csr_matrix(counts)
    if scales is None:
        return _unmix_sums(counts, theta, theta, norm_cap, count_norms(counts))
    # A pass's sums with g_n = θ̂_n/‖θ̂_n‖₂ (sharpen 1): its weights are these times ‖θ̂_n‖₂, the same terms.
    return unmix_pass_statistics(counts, theta, norm_cap, scales, sharpen=1.0)


def pass_weights(theta: np.ndarray, sharpen: float = UNMIX_SHARPEN) -> np.ndarray:
    """An unmixing pass's document weights ``g_n = θ̂_n^p/‖θ̂_n^p‖₂`` (n×k), ``p = sharpen``; ``p = ∞``: the
    one-hot of ``argmax θ̂_n``. A row of zeros stays zero."""
    theta = np.asarray(theta, dtype=np.float64)
    p = float(sharpen)
    if not p > 0:
        raise ValueError(f"sharpen must be > 0 (np.inf for one-hot weights), got {sharpen!r}")
    if math.isinf(p):
        g = np.zeros_like(theta)
        g[np.arange(theta.shape[0]), theta.argmax(axis=1)] = 1.0
        return np.where(theta.any(axis=1, keepdims=True), g, 0.0)
    g = np.maximum(theta, 0.0) ** p
    norm = np.linalg.norm(g, axis=1, keepdims=True)
    return g / np.where(norm > 0, norm, 1.0)


def unmix_pass_statistics(counts: sp.csr_matrix, theta: np.ndarray, norm_cap: float,
                          scales: np.ndarray | None = None,
                          sharpen: float = UNMIX_SHARPEN) -> tuple[np.ndarray, np.ndarray]:
    """An unmixing pass's sums ``Q = Σ w_n (g_n x_nᵀ)∘S`` (k×d) and ``G = Σ w_n l_n g_n θ̂_nᵀ`` (k×k).

    ``g_n`` = :func:`pass_weights` (``θ̂_n`` sharpened to the power
    ``sharpen`` and scaled to unit norm) and
    ``w_n = min(C/‖(g_n x_nᵀ)∘S‖_F, C²/(l_n‖θ̂_n‖₂))`` (:func:`unmix_weights`
    with ``‖g‖ = 1``), so each document's terms have Frobenius norm
    ``≤ C`` and ``≤ C²``: the sensitivities of :func:`tail_sensitivities`,
    with ``G`` released on all k² entries (it is symmetric only at
    ``sharpen = 1``). As for :func:`tail_statistics`, ``E[Q/S] = Gβ`` when
    ``θ̂_n`` is the posterior mean given words independent of the counted
    ones, whatever function of θ̂ weights; solve with
    ``unmix_topics(..., symmetric=False, scales=S)``. ``S`` defaults to ones.

    Why sharpen: weighting by ``θ̂_n`` itself spreads a document's weight,
    and with it the solve's undoing of mixed documents, over every topic;
    the one-hot of ``argmax θ̂_n`` (``sharpen = ∞``) puts all of it on one
    topic, whose row then also counts the other topics' words that ``G⁻¹``
    must subtract. ``θ̂²`` lies between: from the true topics of the
    ``lda_privacy_utility`` corpus (N = 10⁶) the solve's error is 0.0158
    without noise and 0.0310 at the private default's ε = 1 noise, against
    0.0169 / 0.0327 one-hot and 0.0156 / 0.0313 with ``θ̂`` (median of 3
    noise seeds); the whole private default at ε = 4 (N = 10⁵, d = 2,000)
    improved on all 8 synthetic corpora tried (2–10%), powers 1.5 and 2
    doing best and 3, 4, 6 falling back toward the one-hot.
    """
    counts = sp.csr_matrix(counts)
    theta = np.asarray(theta, dtype=np.float64)
    g = pass_weights(theta, sharpen)
    if scales is None:
        return _unmix_sums(counts, theta, g, norm_cap, count_norms(counts))
    Q, G = _unmix_sums(counts, theta, g, norm_cap, pass_norms(counts, g, scales))   # per unit ‖g_n‖₂ (1 or 0)
    return Q * scales, G


def pass_norms(counts: sp.csr_matrix, g: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """``‖(g_n x_nᵀ)∘S‖_F = (Σ_i g_ni² ‖x_n∘s_i‖₂²)^{1/2}`` of every document (n,), in O(nnz·k)."""
    s2 = np.asarray(scales, dtype=np.float64) ** 2
    squares = sp.csr_matrix((np.square(counts.data), counts.indices, counts.indptr), shape=counts.shape)
    per_topic = np.asarray(squares @ s2.T)      # ‖x_n∘s_i‖₂², n×k; the indices shared, not copied
    return np.sqrt((g * g * per_topic).sum(axis=1))


def pass_support(start: UnmixedTopics, threshold: float = PASS_SUPPORT) -> np.ndarray | None:
    """The entries an unmixing pass releases (k×d bool; post-processing of ``start``), or ``None`` for all.

    Entry ``(i, v)`` is released where ``start``'s solve is above
    ``threshold`` times its noise deviation, on a row kept from a start
    (infinite deviation: no information), and where it is word v's largest
    entry of the solve (every word keeps a topic). ``None`` when ``start``
    has no solve (a spectral start) or every entry qualifies. The pass's word
    scales are 0 elsewhere: its documents' terms leave those entries out, and
    :func:`unmix_topics` solves each word for its released entries alone,
    taking the others as 0.

    Why: a document's term ``(g_n x_nᵀ)∘S`` is scaled to norm ``C``, and
    much of that norm sits on entries whose true value is below the noise: a
    mixed document's words counted in its other topics' rows, which the solve
    must then subtract, and which the threshold sets to 0 anyway. Leaving out
    the entries the start puts below 0 raised the documents' weights by ≈ 12%
    (the median of ``‖term‖`` over ``‖term on the support‖``, from the true
    θ̂ of the ``lda_privacy_utility`` corpus, N = 10⁶) and took the solve from
    L1 0.0307 to 0.0289 at the default's noise (the support from a solve of
    that noise). An entry left out cannot come back, where the average of
    two releases could raise one its start had low: with the support at 1
    deviation the whole default did worse than releasing everything (0.0304
    against 0.0277 at ε = 1, N = 10⁶, noise seed 1), at 0 and −0.5 better
    (0.0268 / 0.0267). On 8 synthetic corpora at ε = 1–8 (N = 10⁵,
    ``benchmarks/private_corpora.py``) −0.5 beat 0 in 21 of 28 fits (mean
    log ratio to releasing everything −2.3% against −1.5%), by most where a
    noisy start has many true entries below 0 (dense topic rows at ε = 2:
    0.2284 against 0.2410; 0.2173 releasing everything); docs/design/private-fit.md,
    Overview.
    """
    if start.solve is None or start.solve_deviation is None:
        return None
    solve = np.asarray(start.solve, dtype=np.float64)
    dev = np.asarray(start.solve_deviation, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        keep = np.where(np.isfinite(dev), solve > float(threshold) * dev, True)
    keep[solve.argmax(axis=0), np.arange(solve.shape[1])] = True
    return None if keep.all() else keep


def tail_sensitivities(norm_cap: float) -> tuple[float, float]:
    """ℓ2 sensitivities of ``Q`` and of ``G``'s unique entries (:func:`tail_statistics`).

    With the weights of :func:`unmix_weights` and ``θ̂_n`` on the simplex
    (``‖θ̂‖₂ ≤ 1``): ``‖w θ̂ xᵀ‖_F = w‖θ̂‖₂‖x‖₂ ≤ C`` and
    ``‖w l θ̂θ̂ᵀ‖_F = w l ‖θ̂‖₂² ≤ C²``. Both are nonnegative, so two documents'
    terms differ by ≤ ``√2·C`` and ``√2·C²``; the unique entries of a
    symmetric matrix have norm ≤ its Frobenius norm.
    """
    c = float(norm_cap)
    return math.sqrt(2.0) * c, math.sqrt(2.0) * c * c


@dataclass(frozen=True)
class UnmixedTopics:
    """Topics solved from a noisy unmixing release, with the solve they came from and its noise deviations.

    Attributes
    ----------
    topic_word : ndarray (k, d)
        Rows normalised; the solve firm-thresholded (:func:`threshold_noisy`),
        so each solved row is those entries over their sum.
    solve : ndarray (k, d) or None
        The solve before thresholding and normalising (``G⁻¹(Q/S)``); 0 on a
        row kept from the release's start. ``None`` for topics not solved
        from a release (a spectral start).
    solve_deviation : ndarray (k, d) or None
        Each entry's deviation in ``solve`` (inflated for bias after
        :func:`combine_unmixed`); ``inf`` on a row kept from the start.
    """

    topic_word: np.ndarray
    solve: np.ndarray | None = None
    solve_deviation: np.ndarray | None = None

    @property
    def deviation(self) -> np.ndarray | None:
        """Each entry's noise deviation on ``topic_word``'s scale: ``solve_deviation`` over the row's
        normaliser (the sum of the thresholded solve, which ``topic_word`` is divided by: the smallest
        ``solve/topic_word`` over the entries kept, reached on those kept whole, as
        :func:`threshold_noisy` only shrinks); 0 on a row kept from the start; ``None`` without a solve."""
        if self.solve_deviation is None:
            return None
        sd = np.asarray(self.solve_deviation, dtype=np.float64)
        tw = np.asarray(self.topic_word, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            mass = np.where(tw > 0, np.asarray(self.solve, dtype=np.float64) / tw, np.inf).min(axis=1, keepdims=True)
        mass = np.where(np.isfinite(mass), mass, 0.0)
        return np.divide(sd, mass, out=np.zeros_like(sd), where=np.isfinite(sd) & (mass > 0))


#: What an unmixing pass's E-step puts on an entry its start's solve set to 0, in noise deviations of that entry.
MIXTURE_FLOOR = 0.2


def mixture_topics(start: UnmixedTopics, floor: float = MIXTURE_FLOOR) -> np.ndarray:
    """The topics an unmixing pass estimates each document's ``θ̂_n`` under: ``start``'s, with every entry
    its solve set to 0 raised to ``floor`` times that entry's noise deviation, rows normalised (post-processing).

    Why: the solve zeroes every entry below 1.5 noise deviations, so a word
    whose true weight in a topic is small but not negligible sits at 0
    there, and the E-step (responsibilities ``∝ θ_i β_iv``) can give its
    tokens only to topics that kept it, pulling ``θ̂_n`` toward them. A zeroed
    entry's true value lies somewhere below about 1.5–2 deviations, mostly near
    0 for sparse topics; ``floor`` = 0.2 puts it at a fifth of one. On the
    ``lda_privacy_utility`` corpus (d = 5,000, k = 10) the private default's
    L1 went from 0.138–0.140 / 0.084–0.085 / 0.060 to 0.129–0.130 /
    0.080–0.081 / 0.060 at ε = 2 / 4 / 8 (N = 10⁵, noise seeds 1–2) and from
    0.0356 / 0.0357 to 0.0337 / 0.0337 at ε = 1, N = 10⁶ (seeds 1 / 2); at
    ε = 4 on 8 other synthetic corpora (N = 10⁵, d = 2,000) it improved or
    kept every one (by 0–9%).
    Floors 0.1–0.35 were within 1.5% of each other at ε = 2 and 4; 0.5 and
    1 did worse (0.084 / 0.093 at ε = 4), and 0.25 was 1% worse at ε = 8. The
    floor scales with the noise, so it vanishes where the start is precise;
    a uniform floor (``s/d`` mixed into every row) helped less at ε = 2 / 4
    (0.132 / 0.082 at s = 0.05) and hurt at ε = 8 (0.065). ``floor = 0`` (or
    ``start.deviation is None``) returns the start's topics normalised.
    """
    tw = np.maximum(np.asarray(start.topic_word, dtype=np.float64), 0.0)
    if start.deviation is not None and floor > 0:
        tw = np.where(tw > 0, tw, float(floor) * np.asarray(start.deviation, dtype=np.float64))
    return tw / np.maximum(tw.sum(axis=1, keepdims=True), 1e-300)


def unmix_topics(Q: np.ndarray, G: np.ndarray, sigma_q: float, threshold: float, symmetric: bool = True,
                 scales: np.ndarray | None = None, diagonal: bool = False, sigma_g: float = 0.0,
                 previous: np.ndarray | None = None) -> UnmixedTopics:
    """Topics on every word from a noisy unmixing release: ``β̂ = G⁻¹Q``, thresholded, rows normalised.

    With word scales ``S`` (:func:`unmix_pass_statistics`; all ones by
    default) the solve is ``β̂ = G⁻¹(Q/S)``, whose entry ``(i, v)`` carries
    noise of standard deviation ``σ_Q (Σ_j (G⁻¹)_ij²/S_jv²)^{1/2}``
    (``σ_Q ‖(G⁻¹)_i‖₂`` unscaled); where some scales are 0 (a pass released on
    a support, :func:`pass_support`) each word is solved on its released
    entries alone (:func:`solve_on_support`); entries are firm-thresholded at
    ``threshold`` of those (post-processing, :func:`threshold_noisy`). ``symmetric``: ``G`` is
    a Gram matrix (:func:`tail_statistics`) and must be positive definite;
    otherwise (:func:`unmix_pass_statistics`) its eigenvalues must have
    positive real parts (as when each topic dominates the documents assigned
    to it, which makes the expectation diagonally dominant). ``diagonal``:
    ``G`` is diagonal by construction (one-hot ``θ̂_n``,
    :func:`single_topic_posterior`): see :func:`unmix_diagonal`.

    Returns
    -------
    UnmixedTopics
        The topics, the solve ``G⁻¹(Q/S)`` and each entry's noise deviation in it.

    Raises
    ------
    BudgetNotMetError
        When the noisy ``G`` fails that check (too little data or budget), or a topic keeps no word.
    """
    if diagonal:
        return unmix_diagonal(Q, np.diag(G), sigma_q, sigma_g, threshold, scales, previous)
    if symmetric:
        G = 0.5 * (G + G.T)
        smallest = float(np.linalg.eigvalsh(G)[0])
    else:
        smallest = float(np.linalg.eigvals(G).real.min())
    _require_definite(smallest, "", not symmetric)
    S = np.ones_like(Q) if scales is None else np.asarray(scales, dtype=np.float64)
    if np.all(S > 0):
        Ginv = np.linalg.inv(G)
        dev = float(sigma_q) * np.sqrt((Ginv * Ginv) @ S ** -2.0)
        solve = Ginv @ (Q / S)
    else:
        solve, dev = solve_on_support(Q, G, S, sigma_q)
    B = threshold_noisy(solve, dev, threshold)
    mass = B.sum(axis=1, keepdims=True)
    if np.any(mass <= 0):
        raise BudgetNotMetError("the privacy budget cannot be met: a topic has no word above the noise in the "
                                "unmixing release; use a larger epsilon or more documents")
    return UnmixedTopics(B / mass, solve, dev)


def _require_definite(smallest: float, which: str, real_part: bool) -> None:
    """Raise :class:`BudgetNotMetError` when an unmixing solve's Gram matrix (``which``) has ``smallest`` ≤ 0."""
    if smallest <= 0:
        raise BudgetNotMetError(
            f"the privacy budget cannot be met: the noisy topic Gram matrix of the unmixing release{which} is not "
            f"positive definite (smallest eigenvalue {smallest:.3g}{', real part' if real_part else ''}): too few "
            f"documents or too small a budget for this k")


#: Entries (words × k²) of the per-word Gram matrices :func:`solve_on_support` forms at a time.
SUPPORT_BLOCK = 1 << 22


def solve_on_support(Q: np.ndarray, G: np.ndarray, scales: np.ndarray, sigma_q: float,
                     block: int = SUPPORT_BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """Each word's released entries solved alone: ``(solve, deviation)``, both k×d (post-processing).

    Word v's released entries ``R_v = {i : S_iv > 0}`` have
    ``E[Q_iv/S_iv] = Σ_j G_ij β_jv``; taking ``β_jv = 0`` off ``R_v`` (what
    :func:`pass_support` judged below the noise) leaves the square system
    ``G[R_v, R_v] β_{R_v, v} = (Q/S)_{R_v, v}``. Its solution carries noise of
    deviation ``σ_Q (Σ_{j∈R_v} (G[R_v,R_v]⁻¹)_ij²/S_jv²)^{1/2}``; entries off
    ``R_v`` are 0 with infinite deviation (not released: no information).
    Words are solved in blocks of ``block // k²``, as batched k×k systems
    (rows and columns off ``R_v`` replaced by the identity's).

    Raises
    ------
    BudgetNotMetError
        When some ``G[R_v, R_v]`` has an eigenvalue whose real part is not
        positive (as :func:`unmix_topics` requires of ``G``).
    """
    Q, G, S = (np.asarray(a, dtype=np.float64) for a in (Q, G, scales))
    k, d = Q.shape
    solve, dev = np.zeros((k, d)), np.full((k, d), np.inf)
    eye = np.eye(k)
    step = max(1, int(block) // (k * k))
    for v0 in range(0, d, step):
        cols = slice(v0, min(d, v0 + step))
        m = (S[:, cols] > 0).T.astype(np.float64)                          # words × k
        Gv = G[None] * (m[:, :, None] * m[:, None, :]) + eye[None] * (1.0 - m)[:, :, None]
        _require_definite(float(np.linalg.eigvals(Gv).real.min()), ", restricted to a word's released topics,", True)
        inv = np.linalg.inv(Gv)
        s = np.where(m > 0, S[:, cols].T, 1.0)
        x = np.einsum("wij,wj->wi", inv, m * Q[:, cols].T / s)
        v = np.einsum("wij,wj->wi", inv * inv, m / (s * s))
        solve[:, cols] = (m * x).T
        dev[:, cols] = np.where(m > 0, float(sigma_q) * np.sqrt(v), np.inf).T
    return solve, dev


def unmix_diagonal(Q: np.ndarray, g: np.ndarray, sigma_q: float, sigma_g: float, threshold: float,
                   scales: np.ndarray | None = None, previous: np.ndarray | None = None) -> UnmixedTopics:
    """Topics from a noisy unmixing release whose ``G`` is diagonal by construction (single-topic ``θ̂``).

    Row ``i`` is ``Q_i/(S_i g_i)`` firm-thresholded at ``threshold`` of its
    entries' deviations ``σ_Q/(S_iv g_i)`` (:func:`threshold_noisy`), normalised; ``G``'s noisy
    off-diagonal entries are not used (post-processing). A topic whose noisy
    ``g_i`` is not above ``threshold·σ_G``, or that keeps no word, received
    no documents above the noise: the start put no document there (as when
    it holds two copies of one topic), so dividing by ``g_i`` would return
    noise. Its row is then ``previous[i]`` (the release's start), normalised,
    with solve 0 and infinite solve deviation (no information).

    Raises
    ------
    BudgetNotMetError
        When such a topic has no (nonzero) ``previous`` row to keep.
    """
    g = np.asarray(g, dtype=np.float64)
    S = np.ones_like(Q) if scales is None else scales
    supported = g > threshold * float(sigma_g)
    scale = np.where(supported, g, 1.0)[:, None] * S
    dev = float(sigma_q) / scale
    B = np.where(supported[:, None], threshold_noisy(Q / scale, dev, threshold), 0.0)
    keep = B.sum(axis=1) <= 0
    if np.any(keep) and previous is not None:
        B[keep] = np.maximum(np.asarray(previous, dtype=np.float64)[keep], 0.0)
    mass = B.sum(axis=1, keepdims=True)
    if np.any(mass <= 0):
        raise BudgetNotMetError("the privacy budget cannot be met: a topic received no documents above the noise "
                                "in the unmixing release and has no start to keep; use a larger epsilon or more "
                                "documents")
    kept = keep[:, None]
    return UnmixedTopics(B / mass, np.where(kept, 0.0, Q / scale), np.where(kept, np.inf, dev))


#: Largest noise-to-signal energy ratio ``Σ_v n_iv²/Σ_v y_iv²`` of any row at which :func:`align_mixing`
#: estimates the mixing; above it the errors-in-variables correction would dominate the estimate.
ALIGN_MAX_NOISE = 0.05
#: Largest condition number of the (corrected) Gram matrix of the earlier solve's rows at which
#: :func:`align_mixing` solves for the map; above it two rows are (nearly) collinear and the map is not unique.
ALIGN_MAX_CONDITION = 1e8


def align_mixing(earlier: np.ndarray, deviation: np.ndarray, later: np.ndarray, later_deviation: np.ndarray,
                 max_noise: float = ALIGN_MAX_NOISE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The earlier solve mapped onto the later one's mixing: ``(R y_e, √(R²·n_e²), R)`` (post-processing).

    An unmixing solve from weights ``θ̂`` has mean ``E[G⁻¹Q] = Ĝ⁻¹ G* β = A β``:
    ``Ĝ = Σ w l g θ̂ᵀ`` is released, ``G* = Σ w l g θᵀ`` the same with the true
    ``θ`` (``E[x_n] = l_n βᵀθ_n``), so a worse ``θ̂`` biases the solve by a k×k
    mixing of the topics, not entry by entry. ``R = A_l A_e⁻¹`` is then the
    least-squares map of ``y_e`` onto ``y_l`` over the words, corrected for
    the noise in ``y_e`` (errors in variables, diagonal noise):
    ``R = (Y_l Y_eᵀ)(Y_e Y_eᵀ − diag_i Σ_v n_iv²)⁻¹``, k² numbers fitted to k·d
    entries. Rows kept from a start (infinite deviation on every entry of the
    later solve, on any of the earlier's) are left out; the later solve's
    entries a pass did not release (:func:`pass_support`; infinite deviation)
    count at its value there, 0. A row set of fewer than 2, a row whose noise energy exceeds
    ``max_noise`` of its signal, or collinear rows (no unique map) leave the
    solve as it is (``R = I``).

    Measured on the default fit (N = 10⁵, d = 2,000, ε = 8, truth known): the
    tail's solve had L1 0.095 to the truth, 0.040 of it from its mixing
    ``A`` (least squares on the true topics), the first pass's 0.063 with
    0.013 from ``A``.
    """
    ye = np.asarray(earlier, dtype=np.float64)
    ne = np.asarray(deviation, dtype=np.float64)
    yl = np.asarray(later, dtype=np.float64)
    k = ye.shape[0]
    rows = np.flatnonzero(np.isfinite(ne).all(axis=1) & np.isfinite(np.asarray(later_deviation)).any(axis=1))
    R = np.eye(k)
    if rows.size < 2:
        return ye, ne, R
    Ye, Yl, Ne = ye[rows], yl[rows], ne[rows]
    signal = np.einsum("iv,iv->i", Ye, Ye)
    noise = np.einsum("iv,iv->i", Ne, Ne)
    if not np.all(noise <= max_noise * signal):
        return ye, ne, R
    M = Ye @ Ye.T - np.diag(noise)
    if not np.linalg.cond(M) < ALIGN_MAX_CONDITION:  # collinear rows (e.g. two identical topics): no unique map
        return ye, ne, R
    Rr = np.linalg.solve(M.T, (Yl @ Ye.T).T).T
    aligned, dev = ye.copy(), ne.copy()
    aligned[rows] = Rr @ Ye
    dev[rows] = np.sqrt((Rr ** 2) @ (Ne ** 2))
    R[np.ix_(rows, rows)] = Rr
    return aligned, dev, R


def combine_unmixed(earlier: UnmixedTopics, later: UnmixedTopics, threshold: float) -> UnmixedTopics:
    """Both releases' solves averaged entry by entry by precision, thresholded, rows normalised (post-processing).

    Each solve estimates the topics (``E[G⁻¹(Q/S)] = β`` whatever ``θ̂``
    weighted, :func:`tail_statistics`) with independent noise of known
    deviations ``n_e``, ``n_l``. The earlier one (a tail release or pass
    from a worse start) also carries a bias from its ``θ̂``, which is not
    known, so its variance is taken as ``κ_i n_e²`` per topic, with
    ``κ_i = max(1, (mean_v D_iv² − mean_v n_l,iv²)/mean_v n_e,iv²)``
    from the difference ``D`` of the two solves (whose mean square is
    ``κ n_e² + n_l²`` under that model): the bias is measured, not assumed.
    First the earlier solve is mapped onto the later's mixing of the topics
    (:func:`align_mixing`), which removes the part of its bias that is a k×k
    mixing; κ measures what is left.
    The average is ``(y_e/(κ n_e²) + y_l/n_l²)/(1/(κ n_e²) + 1/n_l²)`` with
    deviation ``(1/(κ n_e²) + 1/n_l²)^{-1/2}``, firm-thresholded at
    ``threshold`` of that, as in :func:`unmix_topics`. Rows kept from a
    start (``solve_deviation`` infinite) take the other solve alone; a row
    neither solved, or with no entry left by the threshold, is ``later``'s, as
    is everything when either has no solve (a spectral start).

    Why: the private default's tail release spends ≈ 22% of the budget and
    served only as the pass's start (``θ̂`` and word scales). Averaging its
    solve in took the default's L1 from 0.234 / 0.129 / 0.080 / 0.060 to
    0.205 / 0.117 / 0.076 / 0.060 at ε = 1 / 2 / 4 / 8 (``lda_privacy_utility``
    corpus, N = 10⁵, noise seed 1) and from 0.0337 to 0.0333 at ε = 1,
    N = 10⁶, where ``κ`` (1.2–8.8 by topic) says the tail's error is mostly
    bias from its worse ``θ̂`` (with the benchmark's seed: 0.052 / 0.0332 /
    0.0260 / 0.0229 → 0.049 / 0.0329 / 0.0266 / 0.0234 at ε = 0.5 / 1 / 2 / 4:
    where the bias dominates, the per-topic κ lets too much of it in and the
    average costs 2%). On 7 other synthetic corpora with a tail
    release (N = 10⁵, d = 2,000, ε = 1 / 2 / 4 / 8) every fit improved or
    kept, by 0–13%; on the single-topic model (``private_stm`` corpora) by
    0–9%. Without ``κ`` (plain inverse-variance weights) it did worse where
    the bias dominates: 0.0357 at N = 10⁶ and 0.062 at ε = 8, N = 10⁵.
    The alignment then took the default (two passes) at ε = 1, N = 10⁶ from
    0.0318 to 0.0296 (noise seed 1); docs/design/private-fit.md, Overview.
    """
    if earlier.solve is None or later.solve is None:
        return later
    ye, ne, _ = align_mixing(earlier.solve, earlier.solve_deviation, later.solve, later.solve_deviation)
    yl, nl = np.asarray(later.solve, dtype=np.float64), np.asarray(later.solve_deviation, dtype=np.float64)
    both = np.isfinite(ne) & np.isfinite(nl)
    count = np.maximum(both.sum(axis=1), 1)

    def row_mean(a):
        return np.where(both, a, 0.0).sum(axis=1) / count

    kappa = np.maximum((row_mean((ye - yl) ** 2) - row_mean(nl ** 2)) / np.maximum(row_mean(ne ** 2), 1e-300), 1.0)
    pe = 1.0 / np.maximum(kappa[:, None] * ne ** 2, 1e-300)    # 0 where a row was kept from a start (n = inf)
    pl = 1.0 / np.maximum(nl ** 2, 1e-300)
    precision = pe + pl
    solved = precision > 0
    solve = (pe * ye + pl * yl) / np.where(solved, precision, 1.0)
    dev = np.where(solved, 1.0 / np.sqrt(np.where(solved, precision, 1.0)), np.inf)
    B = threshold_noisy(solve, dev, threshold)
    mass = B.sum(axis=1, keepdims=True)
    own = (mass[:, 0] > 0) & solved.all(axis=1)
    mass = np.where(own[:, None], mass, 1.0)
    rows = own[:, None]
    return UnmixedTopics(np.where(rows, B / mass, later.topic_word), np.where(rows, solve, later.solve),
                         np.where(rows, dev, later.solve_deviation))


def count_norms(counts: sp.csr_matrix) -> np.ndarray:
    """``‖x_n‖₂`` of every document's count vector."""
    return np.sqrt(moments.row_sums(counts, np.square))


def working_columns(frequencies: np.ndarray, h: int) -> np.ndarray:
    """The ``h`` words of largest (noisy) frequency, in increasing column order.

    Post-processing of the scan release; ties go to the smaller index.
    """
    f = np.asarray(frequencies, dtype=np.float64)
    if not 1 <= h <= f.size:
        raise ValueError(f"working_vocab must be in [1, {f.size}], got {h}")
    return np.sort(np.argsort(-f, kind="stable")[:h])


def working_share(frequencies: np.ndarray, columns: np.ndarray) -> float:
    """The share of the corpus's tokens that ``columns`` hold, from the scan's noisy frequencies.

    ``Σ_{v∈columns} max(f̂_v, 0) / Σ_v max(f̂_v, 0)``, clipped to [10⁻³, 1]
    (post-processing of the scan release; ``f̂`` is the noisy ``Σ_n x_n/l_n``,
    so this is the mean share of a document's tokens). A working vocabulary
    that holds a small share leaves the tail release's ``θ̂_n`` few tokens
    (docs/design/private-fit.md, *The working vocabulary's size*).
    """
    f = np.maximum(np.asarray(frequencies, dtype=np.float64), 0.0)
    return float(np.clip(f[np.asarray(columns)].sum() / max(f.sum(), 1e-300), 1e-3, 1.0))


def embed_topics(topic_word: np.ndarray, columns: np.ndarray, frequencies: np.ndarray, d: int) -> np.ndarray:
    """Topics over ``columns`` extended to ``d`` words: a start for EM on the full vocabulary.

    Each topic keeps the working vocabulary's share ``s`` of the (noisy,
    floored) frequencies and spreads ``1 − s`` over the other words in
    proportion to their frequencies: the tail carries no topic information
    until EM assigns it.
    """
    f = np.maximum(np.asarray(frequencies, dtype=np.float64), 0.0)
    total = f.sum()
    if columns.size == d or total <= 0:
        out = np.zeros((topic_word.shape[0], d))
        out[:, columns] = topic_word
        return out
    tail = np.ones(d, dtype=bool)
    tail[columns] = False
    share = float(np.clip(f[columns].sum() / total, 0.0, 1.0))
    tail_f = f[tail] if f[tail].sum() > 0 else np.ones(int(tail.sum()))
    out = np.empty((topic_word.shape[0], d))
    out[:, columns] = share * topic_word
    out[:, tail] = (1.0 - share) * tail_f / tail_f.sum()
    return out


#: Firm threshold of :func:`threshold_noisy`: its ends as fractions of the threshold ``t`` (``t = 2``: 1.5σ and 3σ).
FIRM_LOW, FIRM_HIGH = 0.75, 1.5


def threshold_note(t: float, unit: str = "σ") -> str:
    """The ledger's words for :func:`threshold_noisy` at ``t`` (deviations in ``unit``)."""
    return (f"entries firm-thresholded (threshold_noisy): 0 below {FIRM_LOW * t:g}{unit}, kept above "
            f"{FIRM_HIGH * t:g}{unit}, linear between")


def threshold_noisy(noisy: np.ndarray, sigma: float | np.ndarray, t: float, low: float = FIRM_LOW,
                    high: float = FIRM_HIGH) -> np.ndarray:
    """Firm-threshold a noisy nonnegative release at ``t·σ`` (post-processing).

    Entries below ``a = low·t·σ`` are set to 0, entries above
    ``b = high·t·σ`` kept, and those between mapped linearly from 0 at
    ``a`` to ``b`` at ``b``: ``b(y − a)/(b − a)`` (firm shrinkage, Gao &
    Bruce 1997, between the hard threshold (``a = b``) and the soft one
    (``b = ∞``)). With ``t = 2`` and the default ends: 0 below 1.5σ, the
    entry itself above 3σ. ``low = high = 1`` is the hard threshold at
    ``t·σ`` (what the pipeline used before; the benchmarks that measured it
    keep it). ``t = 0`` is the floor at 0.

    Why: the hard threshold at 2σ keeps an entry at 2.1σ whole, though it is
    as likely noise as signal, and drops one at 1.9σ whole. The private
    default's L1 with firm (1.5σ, 3σ) instead of hard 2σ everywhere (the tail,
    the passes, their averages): 0.0296 → 0.0292 at ε = 1, N = 10⁶
    (``lda_privacy_utility`` corpus, noise seed 1); on 8 synthetic corpora
    (N = 10⁵, d = 2,000, ε = 1 / 2 / 4 / 8, noise seed 0) 0.5–2.4% better in 25
    of 27 fits, 0.7% worse on Dirichlet(0.5) topics at ε = 4 and 8 (1.3% at
    ε = 1, N = 10⁶; docs/design/private-fit.md, Overview). Soft thresholds, the non-negative garrote and
    firm ends chosen per topic by SURE (which targets squared error) did
    worse in L1 on the same solves.
    """
    y = np.asarray(noisy, dtype=np.float64)
    s = np.asarray(sigma, dtype=np.float64) if t > 0 else np.zeros(np.shape(sigma))   # t = 0: σ = inf is no bar
    a, b = low * t * s, high * t * s
    with np.errstate(invalid="ignore"):   # σ = inf (a row kept from a start): every entry is below a
        ramp = b * (y - a) / np.where(b > a, b - a, 1.0)
    return np.where(y <= a, 0.0, np.where(y >= b, y, ramp))


@dataclass(frozen=True)
class ClippedRawWeights:
    """Per-document weights of ``Σ_n h_n m3_n(W,W,W)`` (the raw third moment, clipped).

    Duck-types :class:`distdp.lda.moments.TensorWeights` with ``α0 = 0`` and ``N = 1``
    (unnormalised sums), each document's weights multiplied by its clip factor ``h_n``.
    """

    h: np.ndarray

    def omega(self, w1, w2, w3):
        """Weight of ``y_n⊗3``."""
        return self.h * w3

    def v(self, w1, w2, w3):
        """Weight of ``sym3(P_n⊗y_n)``."""
        return -self.h * w3

    def diag(self, w3):
        """Weight of ``Σ_i c_ni w_i⊗3``."""
        return 2.0 * self.h * w3
