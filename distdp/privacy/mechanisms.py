"""Noise mechanisms and their calibration (pure numpy/scipy; no Ray, no IO).

Conventions
-----------
*Sensitivity* is always the largest distance between the outputs of the
query on two neighbouring inputs, under the neighbour notion the caller
declares (replace-one document, one symmetrised tensor entry, …): ℓ2 for the
Gaussian and ℓ2-vector mechanisms, ℓ1 for Laplace. A *noise multiplier* is
noise scale / sensitivity; it is what :mod:`distdp.privacy.accounting`
composes.

Randomness comes from an explicit ``numpy.random.Generator``. Private code
obtains it from :func:`private_generator` (OS entropy, never a user seed).

Noise source
------------
A private run's generator is a :class:`SecureNoise`. The noise of the Gaussian
and Laplace mechanisms is added with :func:`add_gaussian` / :func:`add_laplace`
(and the symmetric forms), which send it to a vetted sampler instead of
numpy's PCG64 (not a CSPRNG) and float64 arithmetic (open to the
floating-point attacks of Mironov 2012):

* ``"opendp-gaussian"`` / ``"opendp-laplace"`` (releases of at most
  :data:`OPENDP_MAX_ENTRIES` entries): OpenDP's ``make_gaussian`` /
  ``make_laplace`` on the released value itself. OpenDP adds an exact
  discrete Gaussian (Canonne, Kamath & Steinke 2020) / discrete Laplace on
  the lattice 2^-1074 (every float64 is on it, so the value is not rounded),
  drawn from the operating system's CSPRNG, and rounds the exact sum to the
  nearest float: the guarantee is that of the recorded mechanism with the
  recorded σ (same zCDP as the continuous Gaussian; ε = Δ₁/b for Laplace).
* ``"csprng-lattice-gaussian"`` / ``"csprng-lattice-laplace"`` (larger
  releases, where OpenDP costs ~10⁴× numpy; see
  ``benchmarks/noise_samplers.py``): a snapping sampler. The value is
  rounded to the lattice ``Λ = 2^(⌊log2(s/√n)⌋ − 30)`` (Gaussian, s = σ) or
  ``Λ = 2^(⌊log2(b/n)⌋ − 30)`` (Laplace), an integer ``K`` (in units of Λ)
  is added, and the result is ``RN(Λ·(rint(x/Λ) + K))``, computed with exact
  float64 operations, so the output lies on the lattice whatever the input
  (no input-dependent low-order bits). ``K = ±rint((s/Λ)·|Z|)`` where the
  bits come from the kernel CSPRNG (``os.urandom``), ``|Z|`` is the
  float64 inverse CDF (``scipy.special.ndtri``, or ``−log`` for Laplace) of
  a full-precision uniform (52 random mantissa bits, the exponent geometric,
  down to 2^-268; ``|Z| ≤ 24`` for the Gaussian, ``≤ 185`` for Laplace).
  Guarantee: the recorded mechanism for the query rounded to Λ, whose
  sensitivity exceeds the recorded Δ by at most ``2^-30·σ`` (ℓ2) or
  ``2^-30·b`` (ℓ1), i.e. a multiplier ``Δ/σ`` larger by ≤ 2^-30 — *assuming*
  the float64 inverse CDF of the full-precision uniform is an exact
  Gaussian/Laplace; its rounding (relative error ~2^-50, finer than Λ by a
  factor ≥ 2^10 at the scale of σ) and the tail cut (probability < 10^-120
  per entry) are not covered by a proof, unlike OpenDP's exact sampler.
* ``"csprng-inverse-cdf-l2-vector"`` (the ℓ2-vector mechanism, AVN) and
  ``"shake256-keyed-gaussian-operator"`` (the matrix-free
  :class:`SymmetricNoiseOperator`): no vetted sampler exists for them, so
  their noise is drawn alone from cryptographic bits and used in float64.
  The ℓ2 vector's direction is a vector of normals and its radius a
  Gamma(dim, 1/β) draw, each the float64 inverse CDF (``ndtri``,
  ``gammaincinv``) of a full-precision uniform from ``os.urandom``. The
  operator regenerates its matrix for every product, so its bits come from a
  keyed stream: SHAKE-256 of a 256-bit key from ``os.urandom`` and the
  tile's position (:func:`keyed_words`), turned into normals the same way.
  Their guarantee is the mechanism's in exact arithmetic: the bits are a
  CSPRNG's, but the float64 draws and sums are not hardened against the
  floating-point attacks of Mironov (2012); their records say so.

A seeded ``numpy.random.Generator`` (``reproducible=True``) keeps numpy's
noise bit for bit; its records say ``"numpy-pcg64 (seeded: reproducible,
not private)"``. :func:`sampler_name` gives the record of a release.
Non-noise randomness of a private run (random starts, shuffles, salts) comes
from the :class:`SecureNoise` generator's own numpy methods: PCG64 seeded
from OS entropy.
"""
from __future__ import annotations

import hashlib
import itertools
import math
import os

import numpy as np
from scipy import optimize, special

__all__ = [
    "SecureNoise", "sampler_name", "add_gaussian", "add_laplace", "add_symmetric_matrix_noise",
    "add_symmetric_tensor_noise", "OPENDP_MAX_ENTRIES", "LATTICE_BITS",
    "private_generator", "noise_generator", "full_uniform", "normals_from", "keyed_words", "check_epsilon",
    "check_delta", "check_sensitivity",
    "gaussian_delta", "gaussian_epsilon", "analytic_gaussian_sigma", "classical_gaussian_sigma",
    "gaussian_noise", "laplace_scale", "laplace_noise", "l2_vector_beta", "l2_vector_noise",
    "symmetric_matrix_noise", "SymmetricNoiseOperator", "symmetric_tensor_noise", "n_unique_entries", "unique_entries",
    "from_unique_entries", "MAX_DENSE_NOISE_ENTRIES",
]

#: Largest number of unique tensor entries :func:`symmetric_tensor_noise` will fill (0.8 GB dense).
MAX_DENSE_NOISE_ENTRIES = 10 ** 8


#: Releases of at most this many entries get OpenDP's exact sampler (~100–250 µs an entry); larger ones
#: the CSPRNG lattice sampler (``benchmarks/noise_samplers.py`` has the costs).
OPENDP_MAX_ENTRIES = 2 ** 14
#: The lattice of the fast sampler is 2^-LATTICE_BITS of the per-entry scale (over √n, or n for Laplace).
LATTICE_BITS = 30
#: Exponent words of the full-precision uniform: u ≥ 2^-(64·_EXP_WORDS + 1).
_EXP_WORDS = 4

SEEDED = "numpy-pcg64 (seeded: reproducible, not private)"
NUMPY_OS_SEEDED = ("numpy-pcg64 (OS-entropy seed; PCG64 is not a CSPRNG; float64 arithmetic, "
                   "not hardened against floating-point attacks)")
OPENDP = {"gaussian": "opendp-gaussian", "laplace": "opendp-laplace"}
LATTICE = {
    "gaussian": ("csprng-lattice-gaussian (os.urandom bits; float64 inverse CDF of a full-precision uniform; "
                 "output snapped to the lattice 2^(floor(log2(sigma/sqrt(n))) - 30), which adds <= 2^-30 sigma to "
                 "the l2 sensitivity; the float64 inverse CDF is assumed exact, not proven)"),
    "laplace": ("csprng-lattice-laplace (os.urandom bits; float64 -log of a full-precision uniform; output "
                "snapped to the lattice 2^(floor(log2(b/n)) - 30), which adds <= 2^-30 b to the l1 sensitivity; "
                "the float64 inverse CDF is assumed exact, not proven)"),
}
ON_ZEROS = "; noise drawn alone and added to the value in float64 by the caller"
#: Records of the mechanisms without a vetted sampler, drawn from cryptographic bits (module docstring).
CSPRNG_DRAWN = {
    "l2-vector": ("csprng-inverse-cdf-l2-vector (os.urandom bits; direction from float64 inverse-CDF normals, radius "
                  "from the float64 inverse regularised incomplete gamma, of full-precision uniforms; drawn alone and "
                  "added in float64, not hardened against floating-point attacks)"),
    "operator": ("shake256-keyed-gaussian-operator (256-bit key from os.urandom; every tile regenerated from "
                 "SHAKE-256 of the key and its position; float64 inverse-CDF normals of full-precision uniforms; "
                 "products in float64, not hardened against floating-point attacks)"),
}


def full_uniform(words, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` uniforms on (0, 1) at full float64 precision, and ``n`` random signs (±1.0), from the bit source ``words``.

    ``words(m)`` returns m uniformly random uint64 words (``os.urandom``, or
    a keyed stream: :func:`keyed_words`). ``u = (1 + m·2^-52)·2^-(e+1)``: 52
    random mantissa bits ``m`` and ``e`` the number of leading zero bits of a
    random bit string (geometric: 11 bits of the same word, then up to
    ``_EXP_WORDS`` more words while all are zero), so every float in
    [2^-(e+1), 2^-e) is equally likely given ``e``; ``u ≥ 2^-268``.
    """
    w = words(n)
    sign = np.where((w & np.uint64(1)) == 0, 1.0, -1.0)
    chunk = ((w >> np.uint64(1)) & np.uint64(0x7FF)).astype(np.float64)    # 11 more bits of the same word
    e = (11 - np.frexp(chunk)[1]).astype(np.int64)                          # their leading zeros
    todo = np.flatnonzero(chunk == 0)                                         # all 11 zero: read on
    for _ in range(_EXP_WORDS):
        if todo.size == 0:
            break
        v = words(todo.size)
        nz = v != 0
        hi = (v[nz] >> np.uint64(32)).astype(np.float64)        # both halves are exact in float64
        lo = (v[nz] & np.uint64(0xFFFFFFFF)).astype(np.float64)
        bits = np.where(hi > 0, 32 + np.frexp(hi)[1], np.frexp(lo)[1])   # bit length of v
        e[todo[nz]] += 64 - bits
        e[todo[~nz]] += 64
        todo = todo[~nz]
    # the float with biased exponent 1023 − (e+1) and mantissa m: exactly (1 + m·2^-52)·2^-(e+1)
    u = (((1022 - e).astype(np.uint64) << np.uint64(52)) | (w >> np.uint64(12))).view(np.float64)
    return u, sign


def normals_from(words, n: int) -> np.ndarray:
    """``n`` standard normals ``±Φ⁻¹(u/2)`` of full-precision uniforms from the bit source ``words``."""
    u, sign = full_uniform(words, n)
    return sign * -special.ndtri(0.5 * u)


def keyed_words(key: bytes, position: tuple):
    """A bit source for :func:`full_uniform`: SHAKE-256 of ``key``, ``position`` and a call counter.

    The m words of call c are the first 8m bytes of SHAKE-256(key ‖ position ‖
    c) (uint64 little-endian fields), so the same key, position and sequence
    of calls give the same words (a tile is regenerated exactly), distinct
    positions and calls independent streams, and without the key the words
    are those of a cryptographic XOF.
    """
    calls = itertools.count()

    def words(m: int) -> np.ndarray:
        msg = key + np.asarray(tuple(position) + (next(calls),), dtype="<u8").tobytes()
        return np.frombuffer(hashlib.shake_256(msg).digest(8 * int(m)), dtype="<u8").astype(np.uint64)

    return words


class SecureNoise(np.random.Generator):
    """The generator of a private run: numpy's methods on OS-seeded PCG64, noise from a vetted sampler.

    As a ``numpy.random.Generator`` it serves the non-noise randomness of a
    private run (random starts, shuffles, salts) from PCG64 seeded with OS
    entropy. The ℓ2-vector mechanism and :class:`SymmetricNoiseOperator` draw
    from ``os.urandom`` (:meth:`normals`, :meth:`gammas`, :func:`keyed_words`).
    The Gaussian and Laplace noise goes through :meth:`add_gaussian`
    / :meth:`add_laplace` (reached through the module's :func:`add_gaussian`,
    :func:`add_laplace`, :func:`gaussian_noise`, :func:`laplace_noise`):
    OpenDP's exact samplers for releases of at most
    :data:`OPENDP_MAX_ENTRIES` entries, the CSPRNG lattice sampler above
    (see the module docstring for both guarantees). Drawing noise with
    ``standard_normal`` / ``laplace`` directly would bypass them.

    A pickled copy is a fresh ``SecureNoise`` with new OS entropy (nothing of
    the state travels).
    """

    def __init__(self):
        super().__init__(np.random.PCG64(np.random.SeedSequence()))
        self._opendp = None

    def __reduce__(self):
        return (SecureNoise, ())

    # ------------------------------------------------------------------ OpenDP
    def _dp(self):
        if self._opendp is None:
            import opendp.prelude as dp
            dp.enable_features("contrib")
            self._opendp = dp
        return self._opendp

    def _opendp_add(self, x: np.ndarray, scale: float, kind: str) -> np.ndarray:
        dp = self._dp()
        domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
        if kind == "gaussian":
            meas = dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale=float(scale))
        else:
            meas = dp.m.make_laplace(domain, dp.l1_distance(T=float), scale=float(scale))
        return np.asarray(meas(x.tolist()), dtype=float)

    # ------------------------------------------------------------------ CSPRNG lattice
    @staticmethod
    def _words(n: int) -> np.ndarray:
        return np.frombuffer(os.urandom(8 * n), dtype=np.uint64)

    def _full_uniform(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``n`` full-precision uniforms and signs from ``os.urandom`` (:func:`full_uniform`)."""
        return full_uniform(self._words, n)

    def normals(self, shape) -> np.ndarray:
        """Standard normals from ``os.urandom``: ``±Φ⁻¹(u/2)`` of full-precision uniforms (float64 inverse CDF)."""
        n = int(np.prod(shape))
        return normals_from(self._words, n).reshape(shape)

    def gammas(self, shape_param: float, n: int) -> np.ndarray:
        """``n`` Gamma(``shape_param``, 1) draws from ``os.urandom``: float64 inverse CDFs of full-precision uniforms."""
        u, _ = self._full_uniform(int(n))
        return special.gammaincinv(float(shape_param), u)

    def _lattice_add(self, x: np.ndarray, scale: float, kind: str, n: int) -> np.ndarray:
        lam = lattice_spacing(scale, n, kind)
        u, sign = self._full_uniform(x.size)
        if kind == "gaussian":
            mag = -special.ndtri(0.5 * u)                      # |Z| of a standard Gaussian
        else:
            mag = -np.log(u)                                   # |L| of a standard Laplace (scale 1)
        k = sign * np.rint((scale / lam) * mag)                # scale/lam is exact (Λ a power of two)
        # x/Λ is exact, rint exact, the sum the correctly rounded exact lattice value, ×Λ exact: RN(Λ(rint(x/Λ)+K))
        with np.errstate(over="raise", invalid="raise"):
            return (np.rint(x / lam) + k) * lam

    # ------------------------------------------------------------------ public
    def add(self, value, scale, kind: str, n: int | None = None, method: str | None = None) -> np.ndarray:
        """``value`` + ``kind`` noise (``"gaussian"``: σ = ``scale``; ``"laplace"``: b = ``scale``).

        ``scale`` may broadcast against ``value`` (per-column scales: one draw
        per distinct scale). ``n`` (default ``value.size``) picks the sampler
        (OpenDP up to :data:`OPENDP_MAX_ENTRIES`) and the lattice; ``method``
        (``"opendp"`` or ``"lattice"``) forces the sampler. Both must not
        depend on the private data: when the size of a release does, pass a
        public ``method`` and a public ``n`` bounding the entries that differ
        between neighbours (the lattice's sensitivity bound then holds).
        """
        x = np.asarray(value, dtype=float)
        scales = np.broadcast_to(np.asarray(scale, dtype=float), x.shape)
        if not np.all(np.isfinite(x)):
            raise ValueError("noise can only be added to finite values")
        if not np.all((scales > 0) & np.isfinite(scales)):
            raise ValueError("noise scales must be finite and > 0")
        n = int(x.size if n is None else n)
        use_opendp = _use_opendp(n, method)
        if np.ndim(scale) == 0:
            s = float(scale)
            return (self._opendp_add(x.reshape(-1), s, kind) if use_opendp
                    else self._lattice_add(x.reshape(-1), s, kind, n)).reshape(x.shape)
        out = np.empty(x.shape)
        flat_x, flat_s, flat_o = x.reshape(-1), scales.reshape(-1), out.reshape(-1)
        for s in np.unique(flat_s):
            idx = np.flatnonzero(flat_s == s)
            if use_opendp:
                flat_o[idx] = self._opendp_add(flat_x[idx], float(s), kind)
            else:
                flat_o[idx] = self._lattice_add(flat_x[idx], float(s), kind, n)
        return out

    def add_gaussian(self, value, sigma, n: int | None = None, method: str | None = None) -> np.ndarray:
        """``value + N(0, σ²)`` through the vetted sampler (see :meth:`add`)."""
        return self.add(value, sigma, "gaussian", n, method)

    def add_laplace(self, value, scale, n: int | None = None, method: str | None = None) -> np.ndarray:
        """``value + Laplace(b)`` through the vetted sampler (see :meth:`add`)."""
        return self.add(value, scale, "laplace", n, method)


def _use_opendp(n: int, method: str | None) -> bool:
    if method not in (None, "opendp", "lattice"):
        raise ValueError(f"method must be 'opendp', 'lattice' or None, got {method!r}")
    return method == "opendp" if method is not None else int(n) <= OPENDP_MAX_ENTRIES


def lattice_spacing(scale: float, n: int, kind: str = "gaussian") -> float:
    """Λ of the lattice sampler: ``2^(⌊log2(σ/√n)⌋ − 30)`` (Gaussian) or ``2^(⌊log2(b/n)⌋ − 30)`` (Laplace).

    Rounding the n values to Λ moves the ℓ2 (ℓ1) distance of two neighbours'
    queries by at most ``Λ√n ≤ 2^-30σ`` (``Λn ≤ 2^-30 b``).
    """
    per = scale / math.sqrt(n) if kind == "gaussian" else scale / n
    lam = 2.0 ** (math.floor(math.log2(per)) - LATTICE_BITS)
    if not lam > 2.0 ** -1000:
        raise ValueError(f"noise scale {scale:g} over {n} entries is too small for the lattice sampler")
    return lam


def sampler_name(rng, mechanism: str, n_entries: int, on_value: bool = True, method: str | None = None) -> str:
    """What draws the noise of a release of ``n_entries`` entries with ``rng``, as recorded in its :class:`Release`.

    ``mechanism``: ``"gaussian"``, ``"laplace"``, ``"l2-vector"`` or
    ``"operator"`` (:class:`SymmetricNoiseOperator`). ``on_value=False``
    when the noise is drawn alone and added by the caller (in float64);
    ``method`` as in :meth:`SecureNoise.add`.
    """
    if not isinstance(rng, SecureNoise):
        return SEEDED if isinstance(rng, np.random.Generator) and isinstance(rng.bit_generator, np.random.PCG64) \
            else f"numpy-{type(getattr(rng, 'bit_generator', rng)).__name__.lower()} (seeded: reproducible, not private)"
    if mechanism in CSPRNG_DRAWN:
        return CSPRNG_DRAWN[mechanism]
    if mechanism not in OPENDP:
        return NUMPY_OS_SEEDED
    name = OPENDP[mechanism] if _use_opendp(n_entries, method) else LATTICE[mechanism]
    return name if on_value else name + ON_ZEROS


def private_generator() -> "SecureNoise":
    """The generator of a private run: a :class:`SecureNoise` (OS entropy, never a user seed).

    Private mechanisms must draw from this: a noise sequence that the user
    (or an adversary who knows the seed) can reproduce protects nothing. Its
    numpy methods run on PCG64 seeded from OS entropy; Gaussian and Laplace
    noise added through :func:`add_gaussian` / :func:`add_laplace` comes from
    OpenDP or the CSPRNG lattice sampler (module docstring).
    """
    return SecureNoise()


def add_gaussian(value, sigma, rng: np.random.Generator, n: int | None = None, method: str | None = None):
    """``value`` + ``N(0, σ²)`` noise (``sigma`` may broadcast: per-column scales).

    With a :class:`SecureNoise` the noise is added to the value by the vetted
    sampler; with any other generator this is ``value + gaussian_noise(shape,
    sigma, rng)``, bit for bit (seeded, reproducible runs).
    """
    if isinstance(rng, SecureNoise):
        return rng.add_gaussian(value, sigma, n, method)
    return value + gaussian_noise(np.shape(value), sigma, rng)


def add_laplace(value, scale, rng: np.random.Generator, n: int | None = None, method: str | None = None):
    """``value`` + Laplace(``scale``) noise: the vetted sampler for a :class:`SecureNoise`, else numpy (bit for bit)."""
    if isinstance(rng, SecureNoise):
        return rng.add_laplace(value, scale, n, method)
    return value + laplace_noise(np.shape(value), scale, rng)


def noise_generator(rng, reproducible: bool) -> np.random.Generator:
    """The noise generator of a private run: OS entropy, or ``rng`` only when ``reproducible``.

    Raises
    ------
    ValueError
        ``rng`` given without ``reproducible`` (a seeded run is not private), or
        ``reproducible`` without ``rng``.
    TypeError
        ``rng`` is not a ``numpy.random.Generator``.
    """
    if rng is not None and not reproducible:
        raise ValueError("a user-supplied rng makes the noise reproducible, so the result is not private: pass "
                         "reproducible=True to accept that (the report then says 'not private'), or rng=None")
    if reproducible and rng is None:
        raise ValueError("reproducible=True needs an explicit rng (a seeded numpy.random.Generator)")
    if rng is None:
        return private_generator()
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


#: Largest ε accepted: beyond it a guarantee means nothing and the noise is below rounding of the data.
MAX_EPSILON = 1e6


def check_epsilon(epsilon, name: str = "epsilon") -> float:
    """Require a finite ``0 < epsilon ≤ MAX_EPSILON``."""
    try:
        e = float(epsilon)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number > 0, got {epsilon!r}") from None
    if not (e > 0 and math.isfinite(e)):
        raise ValueError(f"{name} must be finite and > 0, got {epsilon!r}")
    if e > MAX_EPSILON:
        raise ValueError(f"{name} {e:g} is above {MAX_EPSILON:g}: such a guarantee means nothing; for a fit "
                         "without noise, leave the privacy options out")
    return e


def check_delta(delta, name: str = "delta") -> float:
    """Require ``0 < delta < 1``."""
    try:
        d = float(delta)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1), got {delta!r}") from None
    if not 0 < d < 1:
        raise ValueError(f"{name} must be in (0, 1), got {delta!r}")
    return d


def check_sensitivity(sensitivity, name: str = "sensitivity") -> float:
    """Require a finite ``sensitivity > 0``."""
    s = float(sensitivity)
    if not (s > 0 and math.isfinite(s)):
        raise ValueError(f"{name} must be finite and > 0, got {sensitivity!r}")
    return s


# --------------------------------------------------------------------------- Gaussian

def gaussian_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """Exact δ(ε) of the Gaussian mechanism (Balle & Wang 2018, Thm 8).

    ``δ = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ)``: the mechanism
    ``f + N(0, σ²I)`` with ℓ2 sensitivity Δ is (ε, δ)-DP iff its δ is at least this.
    """
    if sigma <= 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    return float(special.ndtr(a - b) - math.exp(epsilon + special.log_ndtr(-a - b)))


def gaussian_epsilon(sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest ε with the Gaussian mechanism (σ, Δ) (ε, δ)-DP (inverse of :func:`gaussian_delta`)."""
    delta = check_delta(delta)
    if gaussian_delta(sigma, 0.0, sensitivity) <= delta:
        return 0.0
    hi = 1.0
    while gaussian_delta(sigma, hi, sensitivity) > delta:
        hi *= 2.0
        if hi > 2 * MAX_EPSILON:
            raise ValueError(f"epsilon above {MAX_EPSILON:g}: the noise is negligible")
    return float(optimize.brentq(lambda e: gaussian_delta(sigma, e, sensitivity) - delta, 0.0, hi,
                                 xtol=1e-12, rtol=1e-12))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest σ making ``f + N(0, σ²I)`` (ε, δ)-DP: the analytic Gaussian mechanism.

    Balle & Wang (2018), Algorithm 1, solved by root finding on the exact
    condition :func:`gaussian_delta` (valid for every ε > 0, unlike the
    classical ``√(2 ln(1.25/δ))Δ/ε`` which needs ε < 1).

    Parameters
    ----------
    epsilon : float, > 0
    delta : float, in (0, 1)
    sensitivity : float, > 0
        ℓ2 sensitivity Δ.

    Returns
    -------
    float
        σ (absolute, not a multiplier).
    """
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    sensitivity = check_sensitivity(sensitivity)
    # δ(σ) decreases in σ; bracket in units of Δ.
    lo, hi = 1e-3, 1.0
    while gaussian_delta(hi * sensitivity, epsilon, sensitivity) > delta:
        lo, hi = hi, hi * 2.0
    while gaussian_delta(lo * sensitivity, epsilon, sensitivity) <= delta:
        hi, lo = lo, lo / 2.0
    m = optimize.brentq(lambda s: gaussian_delta(s * sensitivity, epsilon, sensitivity) - delta, lo, hi,
                        xtol=1e-14, rtol=1e-12)
    return float(m * sensitivity)


def classical_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """``σ = √(2 ln(1.25/δ)) Δ/ε`` (Dwork & Roth 2014, Thm A.1), valid only for ε < 1.

    Used only to reproduce papers that use it; raises for ε ≥ 1, where the
    theorem does not apply (use :func:`analytic_gaussian_sigma`).
    """
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    sensitivity = check_sensitivity(sensitivity)
    if epsilon >= 1:
        raise ValueError(f"the classical Gaussian mechanism needs epsilon < 1, got {epsilon:g}: "
                         "use the analytic Gaussian mechanism")
    return math.sqrt(2.0 * math.log(1.25 / delta)) * sensitivity / epsilon


def gaussian_noise(shape, sigma, rng: np.random.Generator) -> np.ndarray:
    """``N(0, σ²)`` noise of ``shape``; ``sigma`` may broadcast against ``shape`` (per-column scales).

    With a :class:`SecureNoise` the noise comes from the vetted sampler (added
    to zeros); prefer :func:`add_gaussian`, which adds it to the value itself.
    """
    if isinstance(rng, SecureNoise):
        return rng.add_gaussian(np.zeros(shape), sigma)
    return rng.standard_normal(shape) * np.asarray(sigma, dtype=float)


# --------------------------------------------------------------------------- Laplace

def laplace_scale(epsilon: float, sensitivity: float) -> float:
    """``b = Δ₁/ε``: Laplace(b) noise on a query of ℓ1 sensitivity Δ₁ is ε-DP (Dwork & Roth Thm 3.6)."""
    return check_sensitivity(sensitivity) / check_epsilon(epsilon)


def laplace_noise(shape, scale: float, rng: np.random.Generator) -> np.ndarray:
    """Laplace noise with density ``exp(−|x|/b)/(2b)``, ``b = scale``.

    With a :class:`SecureNoise` the noise comes from the vetted sampler (added
    to zeros); prefer :func:`add_laplace`, which adds it to the value itself.
    """
    if isinstance(rng, SecureNoise):
        return rng.add_laplace(np.zeros(shape), scale)
    return rng.laplace(0.0, scale, size=shape)


# --------------------------------------------------------------------------- ℓ2 vector mechanism

def l2_vector_beta(epsilon: float, sensitivity: float) -> float:
    """``β = ε/Δ₂`` of the ℓ2 vector mechanism (density ∝ exp(−β‖b‖₂)), which is ε-DP.

    For neighbours with ``‖f(D) − f(D′)‖₂ ≤ Δ₂`` the density ratio is
    ``exp(β(‖b − f(D′)‖ − ‖b − f(D)‖)) ≤ exp(βΔ₂)`` (triangle inequality).
    """
    return check_epsilon(epsilon) / check_sensitivity(sensitivity)


def l2_vector_noise(dim: int, beta: float, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
    """Sample ``b ∈ R^dim`` with density ∝ ``exp(−β‖b‖₂)`` (Imtiaz & Sarwate, AVN; Chaudhuri et al. 2011).

    In polar coordinates the density of ``r = ‖b‖`` is ∝ ``r^(dim−1) e^(−βr)``:
    ``r ~ Gamma(shape=dim, scale=1/β)``, times a direction uniform on the sphere.
    With a :class:`SecureNoise` both come from ``os.urandom`` (inverse CDFs of
    full-precision uniforms); with a seeded generator from numpy.

    Returns
    -------
    ndarray, shape (dim,) or (size, dim)
    """
    if dim < 1:
        raise ValueError(f"dim must be ≥ 1, got {dim}")
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    n = 1 if size is None else int(size)
    if isinstance(rng, SecureNoise):                       # os.urandom bits (module docstring)
        direction = rng.normals((n, dim))
        radius = rng.gammas(dim, n) / beta
    else:                                                  # seeded: numpy's draws, bit for bit
        direction = rng.standard_normal((n, dim))
        radius = rng.gamma(shape=dim, scale=1.0 / beta, size=n)
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    out = direction * radius[:, None]
    return out[0] if size is None else out


# --------------------------------------------------------------------------- symmetric noise

def symmetric_matrix_noise(d: int, scale: float, rng: np.random.Generator, kind: str = "gaussian") -> np.ndarray:
    """Symmetric d×d noise: iid on the entries ``j ≤ i``, mirrored (Analyze Gauss, Dwork et al. 2014).

    ``kind`` is ``"gaussian"`` (``N(0, scale²)``) or ``"laplace"`` (Laplace(scale)).
    Privacy needs the noise on the symmetric (unique-entry) parametrisation of
    a symmetric query, with the sensitivity of that parametrisation.
    """
    iu = np.triu_indices(d)
    if kind == "gaussian":
        vals = gaussian_noise(iu[0].shape, scale, rng)
    elif kind == "laplace":
        vals = laplace_noise(iu[0].shape, scale, rng)
    else:
        raise ValueError(f"kind must be 'gaussian' or 'laplace', got {kind!r}")
    E = np.zeros((d, d))
    E[iu] = vals
    return E + np.triu(E, 1).T


def add_symmetric_matrix_noise(M: np.ndarray, scale: float, rng: np.random.Generator,
                               kind: str = "gaussian") -> np.ndarray:
    """``M`` + :func:`symmetric_matrix_noise` (``M`` symmetric d×d).

    With a :class:`SecureNoise` the vetted sampler adds the noise to the
    unique entries ``M[i, j]``, ``i ≤ j``, which are then mirrored; otherwise
    ``M + symmetric_matrix_noise(d, scale, rng, kind)`` bit for bit.
    """
    d = M.shape[0]
    if not isinstance(rng, SecureNoise):
        return M + symmetric_matrix_noise(d, scale, rng, kind)
    if kind not in ("gaussian", "laplace"):
        raise ValueError(f"kind must be 'gaussian' or 'laplace', got {kind!r}")
    iu = np.triu_indices(d)
    E = np.zeros((d, d))
    E[iu] = rng.add(np.asarray(M, dtype=float)[iu], scale, kind)
    return E + np.triu(E, 1).T


#: Rows of an operator tile drawn from one keyed stream (:class:`SymmetricNoiseOperator`).
KEYED_ROWS = 128


class SymmetricNoiseOperator:
    """Products with one symmetric Gaussian noise matrix that is never stored (matrix-free Analyze Gauss).

    The matrix is :func:`symmetric_matrix_noise`'s distribution, iid
    ``N(0, scale²)`` on the unique entries ``i ≤ j`` and mirrored, but it is
    drawn block by block from streams keyed by the block's position, so every
    product regenerates the same matrix: ``N X`` costs d²/2 draws and O(d²p)
    flops, and the memory is one ``block × block`` tile. With a
    :class:`SecureNoise` the stream is SHAKE-256 of a 256-bit key from
    ``os.urandom`` and the position (:func:`keyed_words`); with a seeded
    generator numpy's ``SeedSequence(entropy, spawn_key=(I, J))``. The key
    (or entropy) is drawn once and kept only in this object: a release ``S + N`` made
    through products with this operator is one Gaussian release of ``S``,
    whatever is computed from it (post-processing).

    Parameters
    ----------
    d : int
        Dimension.
    scale : float
        Standard deviation of each unique entry.
    rng : numpy.random.Generator
        Source of the entropy (the private run's noise generator).
    block : int
        Tile size; the distribution does not depend on it.
    """

    def __init__(self, d: int, scale: float, rng: np.random.Generator, block: int = 1024):
        if int(d) != d or d < 1:
            raise ValueError(f"d must be an integer ≥ 1, got {d!r}")
        if int(block) != block or block < 1:
            raise ValueError(f"block must be an integer ≥ 1, got {block!r}")
        self.d, self.scale, self.block = int(d), float(scale), int(block)
        if isinstance(rng, SecureNoise):                   # a private run: SHAKE-256 tiles under a secret key
            self._key, self._entropy = os.urandom(32), None
        else:                                              # seeded: numpy's PCG64 tiles, bit for bit
            self._key, self._entropy = None, [int(x) for x in rng.integers(0, 2 ** 63, size=4)]
        self.products = 0

    def _tile(self, i: int, j: int) -> np.ndarray:
        """Rows of block ``i``, columns of block ``j`` (``i ≤ j``); a diagonal tile is symmetric."""
        b = self.block
        rows, cols = min(b, self.d - i * b), min(b, self.d - j * b)
        if self._key is not None:                          # a few rows at a time: the temporaries stay ~1 MB
            t = np.empty((rows, cols))
            for r0 in range(0, rows, KEYED_ROWS):
                r1 = min(rows, r0 + KEYED_ROWS)
                t[r0:r1] = normals_from(keyed_words(self._key, (i, j, r0)), (r1 - r0) * cols).reshape(r1 - r0, cols)
        else:
            gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence(self._entropy, spawn_key=(i, j))))
            t = gen.standard_normal((rows, cols))
        if i == j:
            t = np.triu(t)
            t += np.triu(t, 1).T
        t *= self.scale
        return t

    def matmat(self, X: np.ndarray) -> np.ndarray:
        """``N X`` for a d×p (or length-d) ``X``."""
        X = np.asarray(X, dtype=float)
        vec = X.ndim == 1
        X = X[:, None] if vec else X
        if X.shape[0] != self.d:
            raise ValueError(f"expected {self.d} rows, got shape {X.shape}")
        Y = np.zeros_like(X)
        b, nb = self.block, -(-self.d // self.block)
        for i in range(nb):
            ri = slice(i * b, (i + 1) * b)
            for j in range(i, nb):
                rj = slice(j * b, (j + 1) * b)
                t = self._tile(i, j)
                Y[ri] += t @ X[rj]
                if i != j:
                    Y[rj] += t.T @ X[ri]
        self.products += 1
        return Y[:, 0] if vec else Y

    def dense(self) -> np.ndarray:
        """The whole matrix (tests and small d only)."""
        return self.matmat(np.eye(self.d))


def n_unique_entries(d: int) -> int:
    """``C(d+2, 3)``: unique entries ``i ≤ j ≤ k`` of a symmetric d×d×d tensor."""
    return (d + 2) * (d + 1) * d // 6


def _unique_index_arrays(d: int) -> np.ndarray:
    return np.array(list(itertools.combinations_with_replacement(range(d), 3)), dtype=np.intp).reshape(-1, 3)


def unique_entries(T: np.ndarray) -> np.ndarray:
    """The ``C(d+2,3)`` entries ``T_ijk``, ``i ≤ j ≤ k``, in lexicographic order."""
    idx = _unique_index_arrays(T.shape[0])
    return T[idx[:, 0], idx[:, 1], idx[:, 2]]


def from_unique_entries(values: np.ndarray, d: int) -> np.ndarray:
    """The symmetric d×d×d tensor whose unique entries (``i ≤ j ≤ k``) are ``values``."""
    values = np.asarray(values, dtype=float)
    if values.shape != (n_unique_entries(d),):
        raise ValueError(f"expected {n_unique_entries(d)} unique entries for d = {d}, got shape {values.shape}")
    idx = _unique_index_arrays(d)
    T = np.zeros((d, d, d))
    for p in set(itertools.permutations(range(3))):
        T[idx[:, p[0]], idx[:, p[1]], idx[:, p[2]]] = values
    return T


def symmetric_tensor_noise(d: int, scale: float, rng: np.random.Generator, kind: str = "gaussian",
                           max_entries: int = MAX_DENSE_NOISE_ENTRIES) -> np.ndarray:
    """Symmetric d×d×d noise on the ``C(d+2,3)`` unique entries, mirrored (AGN/AVN, Imtiaz & Sarwate 2018, Alg. 1).

    Parameters
    ----------
    d : int
    scale : float
        ``kind="gaussian"``: standard deviation of each unique entry (AGN).
        ``kind="l2"``: β of the ℓ2 vector mechanism on the unique-entry vector
        (AVN; :func:`l2_vector_noise`).
    rng : numpy.random.Generator
    kind : {"gaussian", "l2"}
    max_entries : int
        Refuse larger tensors (their noise alone would not fit in memory).

    Raises
    ------
    ValueError
        ``d³`` above ``max_entries``: use a mechanism that never forms the
        tensor (the DP tensor power method, noise per ``T(I,u,u)`` release).
    """
    if d ** 3 > max_entries:
        raise ValueError(f"symmetric noise on a {d}×{d}×{d} tensor ({d ** 3:.3g} entries) exceeds "
                         f"max_entries = {max_entries:.3g}: use the DP tensor power method "
                         "(distdp.tensor.dp.private_power_method), which adds noise per T(I,u,u) release")
    D = n_unique_entries(d)
    if kind == "gaussian":
        vals = gaussian_noise(D, scale, rng)
    elif kind == "l2":
        vals = l2_vector_noise(D, scale, rng)
    else:
        raise ValueError(f"kind must be 'gaussian' or 'l2', got {kind!r}")
    return from_unique_entries(vals, d)


def add_symmetric_tensor_noise(T: np.ndarray, scale: float, rng: np.random.Generator, kind: str = "gaussian",
                               max_entries: int = MAX_DENSE_NOISE_ENTRIES) -> np.ndarray:
    """``T`` + :func:`symmetric_tensor_noise` (``T`` symmetric d×d×d).

    With a :class:`SecureNoise` and ``kind="gaussian"`` the vetted sampler
    adds the noise to the unique entries of ``T``, which are then mirrored;
    otherwise (``kind="l2"``, or a seeded generator) ``T +
    symmetric_tensor_noise(d, scale, rng, kind, max_entries)`` bit for bit.
    """
    d = T.shape[0]
    if not (isinstance(rng, SecureNoise) and kind == "gaussian"):
        return T + symmetric_tensor_noise(d, scale, rng, kind, max_entries)
    if d ** 3 > max_entries:
        symmetric_tensor_noise(d, scale, rng, kind, max_entries)      # raises the size error
    return from_unique_entries(rng.add_gaussian(unique_entries(np.asarray(T, dtype=float)), scale), d)
