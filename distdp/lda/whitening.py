"""Top-k eigenpairs of M2 and the whitening transform, without a d×d matrix.

Pure numpy: the second moment is seen only through a callable ``apply(Ω)`` that
returns ``M2 Ω`` for a d×p block (a distributed pass over the shards in
practice). The randomized subspace iteration of Halko, Martinsson & Tropp
(2011, Alg. 4.4 with Rayleigh–Ritz, Alg. 5.3) needs ``n_iter`` such products
after the first; it converges to the largest-*magnitude* eigenvalues, which
for the indefinite M2 of short documents are not the largest ones.
:func:`lobpcg_top_eigh` and :func:`lobpcg_top_basis` (LOBPCG, Knyazev 2001)
converge to the algebraically largest and need fewer products where the
spectrum near λ_k is flat (real text; the private matrix-free whitening,
whose every product regenerates its noise).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

#: Eigenvalues below this fraction of the largest are zero up to rounding.
RANK_TOL = 1e-10


@dataclass(frozen=True)
class Whitening:
    """Top-k eigenpairs ``M2 ≈ U diag(s) Uᵀ`` and the derived transforms.

    Attributes
    ----------
    eigenvalues : ndarray (k,)
        ``s``, descending, all positive.
    eigenvectors : ndarray (d, k)
        ``U``, orthonormal columns.
    products : int or None
        Products with M2 the randomized solver made after the first (None: dense).
    converged : bool or None
        Whether it stopped on its residual tolerance (None: no tolerance, or dense).
    """

    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    products: int | None = None
    converged: bool | None = None

    @property
    def W(self) -> np.ndarray:
        """Whitening matrix ``W = U diag(s)^(-1/2)`` (d×k): ``Wᵀ M2 W = I_k``."""
        return self.eigenvectors / np.sqrt(self.eigenvalues)[None, :]

    @property
    def unwhiten(self) -> np.ndarray:
        """Un-whitening matrix ``(W†)ᵀ = U diag(s)^(1/2)`` (d×k)."""
        return self.eigenvectors * np.sqrt(self.eigenvalues)[None, :]


def top_k_from_symmetric(vals: np.ndarray, vecs: np.ndarray, k: int) -> Whitening:
    """Keep the k algebraically largest eigenpairs; fail if the k-th is not positive.

    Raises
    ------
    ValueError
        If ``σ_k ≤ RANK_TOL · σ_1`` (zero up to rounding) or ``σ_k ≤ 0``: the data do not support ``k`` topics (too few
        documents, or ``k`` above the number of topics the corpus holds).
    """
    order = np.argsort(vals)[::-1][:k]
    vals, vecs = vals[order], vecs[:, order]
    if not np.all(np.isfinite(vals)):
        raise ValueError("M2 has non-finite eigenvalues; check the corpus for empty or invalid documents")
    if vals[-1] <= RANK_TOL * max(vals[0], 0.0):
        raise ValueError(
            f"k={k} is larger than the data supports: eigenvalue λ_{k} of M2 is {vals[-1]:.3g} ≤ 0 (to "
            f"{RANK_TOL:g} of the largest, {vals[0]:.3g}); {_positive_count(vals)} of the top {k} are positive. "
            "Use a smaller k or more documents.")
    return Whitening(vals, vecs)


def supported_top_k(vals: np.ndarray, vecs: np.ndarray, k: int) -> Whitening:
    """The algebraically largest ``m ≤ k`` eigenpairs that are positive beyond rounding.

    Where the data support fewer than ``k`` directions (the ``k``-th
    algebraic eigenvalue is ``≤ RANK_TOL · λ_1``), the returned
    :class:`Whitening` has the ``m`` supported ones; the caller decides what
    to do with the other ``k − m`` (:func:`distdp.lda.fill_topics`).

    Raises
    ------
    ValueError
        If no eigenvalue is positive, or some are not finite.
    """
    order = np.argsort(vals)[::-1][:k]
    vals, vecs = vals[order], vecs[:, order]
    if not np.all(np.isfinite(vals)):
        raise ValueError("M2 has non-finite eigenvalues; check the corpus for empty or invalid documents")
    m = _positive_count(vals) if vals[0] > 0 else 0
    if m == 0:
        raise ValueError(f"M2 has no positive eigenvalue (largest {vals[0]:.3g}): the corpus supports no topic "
                         "(too few documents, or every document too short)")
    return Whitening(vals[:m], vecs[:, :m])


def _positive_count(vals: np.ndarray) -> int:
    """How many eigenvalues are positive beyond rounding (``> RANK_TOL · λ_1``)."""
    return int(np.sum(vals > RANK_TOL * max(vals[0], 0.0)))


def randomized_top_eigh(apply: Callable[[np.ndarray], np.ndarray], first_product: np.ndarray,
                        k: int, n_iter: int = 3, tol: float | None = None, partial: bool = False) -> Whitening:
    """Top-k eigenpairs of a symmetric operator by randomized subspace iteration.

    Parameters
    ----------
    apply : callable
        ``apply(Q) = M2 Q`` for a d×p block ``Q``.
    first_product : ndarray (d, p)
        ``M2 Ω`` for a Gaussian test block ``Ω`` (p ≥ k; computed with the
        first data pass so that it costs no extra pass).
    k : int
        Number of eigenpairs.
    n_iter : int
        Products with M2 after the first (≥ 1). With ``n_iter = q + 1`` this
        is subspace iteration with ``q`` power steps, then Rayleigh–Ritz on
        ``Qᵀ M2 Q`` computed from the last product. Each costs one pass.
        With ``tol``, the most products made.
    tol : float, optional
        Stop once every one of the top k Ritz pairs ``(θ, u)`` of the last
        product has relative residual ``‖M2 u − θ u‖₂ / θ ≤ tol`` (checked
        from ``M2 Q`` at no extra pass). A fixed ``n_iter`` is not enough on
        real text, whose spectrum near the k-th eigenvalue is flat: three
        products left topics 0.2–0.26 (L1) from the exact eigenvectors'
        on 24k documents, with seed-dependent α. Private fits use a fixed
        count (each product is a release; the stopping rule would be a
        data-dependent choice).
    partial : bool
        Return the ``m ≤ k`` supported pairs (:func:`supported_top_k`)
        instead of raising when the k-th eigenvalue is not positive.

    Returns
    -------
    Whitening
        With ``products`` (made after the first) and ``converged``.
    """
    if n_iter < 1:
        raise ValueError(f"n_iter must be ≥ 1, got {n_iter}")
    if first_product.shape[1] < k:
        raise ValueError(f"the test block has {first_product.shape[1]} columns, fewer than k={k}")
    Q, _ = np.linalg.qr(first_product)
    converged = None
    for i in range(n_iter):
        Y = apply(Q)
        if tol is not None or i == n_iter - 1:
            vals, vecs = np.linalg.eigh(_sym(Q.T @ Y))
            converged = None if tol is None else _ritz_converged(Q, Y, vals, vecs, k, tol)
            if converged or i == n_iter - 1:
                break
        Q, _ = np.linalg.qr(Y)
    pick = supported_top_k if partial else top_k_from_symmetric
    return replace(pick(vals, Q @ vecs, k), products=i + 1, converged=converged)


def rayleigh_ritz(X: np.ndarray, AX: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ritz values (descending) and vectors of an orthonormal ``X`` with ``AX = M2 X``: ``(θ, X y, AX y)``."""
    theta, y = np.linalg.eigh(_sym(X.T @ AX))
    theta, y = theta[::-1], y[:, ::-1]
    return theta, X @ y, AX @ y


def top_k_converged(residual: np.ndarray, theta: np.ndarray, k: int, tol: float | None) -> bool:
    """LOBPCG's stopping test (:func:`lobpcg_top_eigh`, :func:`lanczos_top_eigh`): θ_k > 0 and every top-k
    residual ``‖M2 u − θ u‖₂ ≤ tol·θ_k`` (``residual``: the top k's; ``theta``: descending). False without ``tol``."""
    return tol is not None and theta[k - 1] > 0 and bool(np.all(residual <= tol * theta[k - 1]))


def lobpcg_top_eigh(apply: Callable[[np.ndarray], np.ndarray], first_product: np.ndarray, k: int,
                    max_products: int = 30, tol: float | None = 1e-3, partial: bool = False,
                    soft_locking: bool = False) -> Whitening:
    """The k algebraically largest eigenpairs of a symmetric, possibly indefinite operator (LOBPCG).

    The unbiased M2 of short documents is strongly indefinite: its diagonal
    correction gives negative eigenvalues as large in magnitude as the
    largest positive ones, so subspace iteration (:func:`randomized_top_eigh`)
    converges to the largest-*magnitude* subspace and Rayleigh–Ritz finds
    too few positive directions in it. LOBPCG (Knyazev 2001) maximises the
    Rayleigh quotient over ``span[X, R, P]`` (Ritz vectors, residuals,
    previous directions), so it converges to the algebraically largest
    eigenpairs whatever the negative part. One product per iteration, on
    the residual block only: ``A X`` and ``A P`` are carried as the same
    linear combinations as ``X`` and ``P``.

    Parameters
    ----------
    apply : callable
        ``apply(Q) = M2 Q`` for a d×p block.
    first_product : ndarray (d, p)
        ``M2 Ω`` for a Gaussian block ``Ω`` (from the first data pass): its
        orthonormal basis starts the iteration (one power step at no cost).
    k : int
    max_products : int
        Most products with M2.
    tol : float or None
        Stop once every top-k Ritz pair has residual ``‖M2 u − θ u‖₂ ≤ tol·θ_k``
        (θ_k > 0); None: always ``max_products``.
    partial : bool
        Return the ``m ≤ k`` supported pairs (:func:`supported_top_k`)
        instead of raising when the k-th eigenvalue is not positive.
    soft_locking : bool
        Soft locking (Knyazev et al. 2007, BLOPEX; scipy's ``lobpcg`` active
        mask): a top-k pair whose residual is already within ``tol`` adds no
        direction to the next product (:func:`residual_active`). It stays in
        the Rayleigh–Ritz basis, so it keeps improving and is active again if
        its residual grows; the stopping test is unchanged. Narrower products
        (18% fewer columns on 10 real corpora at k = 10–50; 31% less
        whitening time on 1M documents, d = 50,000, k = 100), sometimes one
        product more.
    """
    d, p = first_product.shape
    if p < k:
        raise ValueError(f"the test block has {p} columns, fewer than k={k}")
    X = orthonormal_basis(first_product)[0]
    if X.shape[1] < p:                             # M2 Ω is rank-deficient (M2 of rank < p): complete the basis
        X = np.linalg.qr(first_product)[0]
    AX = apply(X)
    products, P, AP, converged = 1, None, None, False
    theta, X, AX = rayleigh_ritz(X, AX)
    while True:
        # X holds Ritz vectors and θ their values: the first from the eigh above, later from the Rayleigh–Ritz
        # step below, whose basis is orthonormal (so Xᵀ A X = diag(θ) to rounding; no second eigh is needed)
        R = AX - X * theta[None, :]
        residual = np.linalg.norm(R[:, :k], axis=0)
        converged = top_k_converged(residual, theta, k, tol)
        if converged or products >= max_products:
            break
        active = residual_active(residual, theta, k, tol if soft_locking else None)
        Z = _orthonormal_against(R[:, active], X, float(np.abs(theta).max()))
        if Z is None:                              # the residuals are rounding: span(X) is invariant
            converged = True
            break
        AZ = apply(Z)
        products += 1
        basis, images = [X, Z], [AX, AZ]
        if P is not None:
            P, AP = _orthonormal_carried(P, AP, basis, images)
            if P is not None:
                basis.append(P)
                images.append(AP)
        # Rayleigh–Ritz on span[X, Z, P] block by block: S = [X Z P] and A S are never formed (d×3p each);
        # A is symmetric, so only the blocks on and above the diagonal of Sᵀ A S are computed
        gram = _block_gram(basis, images)
        vals, Y = np.linalg.eigh(gram)
        theta, Y = vals[::-1][:p], Y[:, ::-1][:, :p]
        cuts = np.cumsum([b.shape[1] for b in basis])[:-1]
        parts = np.split(Y, cuts, axis=0)
        P, AP = _combine(basis[1:], parts[1:]), _combine(images[1:], parts[1:])
        X, AX = X @ parts[0] + P, AX @ parts[0] + AP
        del basis, images, Z, AZ
    pick = supported_top_k if partial else top_k_from_symmetric
    return replace(pick(theta, X, k), products=products, converged=converged if tol is not None else None)


#: Most restarts of the implicitly restarted Lanczos method (ARPACK's ``maxiter``) before
#: :func:`lanczos_top_eigh` hands over to LOBPCG; each costs at most ``ncv − k`` products.
LANCZOS_MAX_RESTARTS = 30


#: Significant digits :func:`start_vector` keeps.
START_DIGITS = 10


def start_vector(v: np.ndarray) -> np.ndarray:
    """``v`` scaled to largest entry 1 and rounded to :data:`START_DIGITS` decimals: Lanczos's start.

    The first product is summed over the shards, whose BLAS calls may round differently in the last bit in
    process and in Ray's single-threaded workers; ARPACK's restarts are not continuous in their start, so
    a last-bit difference could change how many products it makes and move its result within the tolerance.
    Rounded, the start is the same on both (unless an entry sits on a rounding boundary).
    """
    v = np.asarray(v, dtype=np.float64)
    top = float(np.abs(v).max(initial=0.0))
    return np.round(v / top, START_DIGITS) if top > 0 and np.isfinite(top) else v


def lanczos_top_eigh(apply: Callable[[np.ndarray], np.ndarray], first_product: np.ndarray, k: int,
                     max_products: int = 30, tol: float | None = 1e-3, partial: bool = False) -> Whitening:
    """The k algebraically largest eigenpairs by implicitly restarted Lanczos, one column per product.

    ARPACK's Lanczos method (Lehoucq, Sorensen & Yang 1998; scipy's ``eigsh``
    with ``which='LA'``) converges to the algebraically largest eigenvalues of
    a symmetric, possibly indefinite operator, as LOBPCG does, but works on
    single vectors: its products have one column, and its own work per
    product is O(d·ncv) instead of LOBPCG's orthonormalisations and
    Rayleigh–Ritz on d × 3p blocks. Where the products are cheap (a small
    corpus) that work is the whitening's cost, so this is the faster solver
    there; where each product is costly (a large corpus, or a round of
    distributed passes), LOBPCG's few block products are.

    The start is ``first_product``'s first column (a power step from a
    Gaussian vector). The result is then checked, with one k-column product,
    against LOBPCG's stopping test (every top-k pair with residual
    ``‖M2 u − θ u‖₂ ≤ tol·θ_k``, after a Rayleigh–Ritz step on the k
    vectors); if it fails, or ARPACK stops with an error (no convergence
    within :data:`LANCZOS_MAX_RESTARTS` restarts, or no shift applicable),
    :func:`lobpcg_top_eigh` continues from the vectors found (from
    ``first_product`` where ARPACK left fewer than k), with at most
    ``max_products`` more products.

    Parameters
    ----------
    apply : callable
        ``apply(Q) = M2 Q`` for a d×p block (here mostly p = 1).
    first_product : ndarray (d, p)
        ``M2 Ω`` for a Gaussian block ``Ω``.
    k : int
    max_products : int
        Most products of the LOBPCG continuation, if one is needed.
    tol : float or None
        The stopping residual, as in :func:`lobpcg_top_eigh`; None: ARPACK to
        machine precision, no check (``converged`` None).
    partial : bool
        As in :func:`lobpcg_top_eigh`.

    Returns
    -------
    Whitening
        ``products`` counts every product after ``first_product``: ARPACK's
        one-column products, the check's, and any of LOBPCG.
    """
    from scipy.sparse.linalg import ArpackError, LinearOperator, eigsh
    from threadpoolctl import threadpool_limits

    d = first_product.shape[0]
    if k >= d - 1:                                   # ARPACK needs k < d − 1: the block method does
        return lobpcg_top_eigh(apply, first_product, k, max_products, tol, partial)
    count = [0]

    def matvec(v: np.ndarray) -> np.ndarray:
        count[0] += 1
        return np.asarray(apply(np.asarray(v, dtype=np.float64).reshape(d, 1)), dtype=np.float64)[:, 0]

    op = LinearOperator((d, d), matvec=matvec, dtype=np.float64)
    try:
        # one BLAS thread: ARPACK's steps are O(d·ncv) vector operations, which a second thread only slows
        # (waking it cost 0.1 s of a 0.04 s whitening in about half of the fresh processes measured)
        with threadpool_limits(limits=1, user_api="blas"):
            U = eigsh(op, k=k, which="LA", v0=start_vector(first_product[:, 0]), ncv=min(d, max(2 * k + 1, 20)),
                      tol=0.0 if tol is None else tol, maxiter=LANCZOS_MAX_RESTARTS)[1]
    except ArpackError as err:                      # no convergence (with what it found), or no shifts applicable
        U = getattr(err, "eigenvectors", None)
    U = orthonormal_basis(U)[0] if U is not None and U.shape[1] else np.zeros((d, 0))
    if U.shape[1] < k:                               # too few vectors to check: LOBPCG from the first product
        out = lobpcg_top_eigh(apply, first_product, k, max_products, tol, partial)
        return replace(out, products=out.products + count[0])
    theta, U, AU = rayleigh_ritz(U, apply(U))        # exact Ritz pairs of the k vectors
    products = count[0] + 1
    if tol is None or top_k_converged(np.linalg.norm(AU - U * theta[None, :], axis=0), theta, k, tol):
        pick = supported_top_k if partial else top_k_from_symmetric
        return replace(pick(theta, U, k), products=products, converged=None if tol is None else True)
    out = lobpcg_top_eigh(apply, AU, k, max_products, tol, partial)   # start from M2 U: span(U), one power step on
    return replace(out, products=out.products + products)


def residual_active(residual: np.ndarray, theta: np.ndarray, k: int, tol: float | None) -> np.ndarray:
    """The Ritz columns that get a new direction in :func:`lobpcg_top_eigh`: all but converged top-k pairs.

    ``residual``: the top k pairs' residuals ``‖M2 u − θ u‖₂``; ``theta``: all Ritz values, descending. A
    top-k pair is converged when its residual is at most ``tol·θ_k`` (θ_k > 0), the solver's own stopping
    test; the columns beyond k (the oversampling) are always active.
    """
    active = np.ones(len(theta), dtype=bool)
    if tol is not None and theta[k - 1] > 0:
        active[:k] = residual > tol * theta[k - 1]
    return active


def _orthonormal_against(R: np.ndarray, X: np.ndarray, scale: float, rcond: float = 1e-10) -> np.ndarray | None:
    """An orthonormal basis of ``R``'s part orthogonal to ``span(X)`` (X orthonormal).

    Columns of ``R`` below ``rcond·scale`` (``scale`` the operator's, e.g.
    its largest Ritz value in magnitude) are rounding, whose projection off
    ``span(X)`` is not reliable: they are dropped, and so are directions
    below :data:`GRAM_RCOND` of the rest (:func:`orthonormal_basis`). The
    basis is projected off ``span(X)`` and orthonormalised once more only
    where orthonormalising lost that orthogonality (``‖Xᵀ Z‖ >``
    :data:`ORTHO_TOL`), as in the orthogonalisation of Duersch, Shao, Yang &
    Gu (2018, SIAM J. Sci. Comput. 40(5)).
    """
    for _ in range(2):                              # twice is enough (Giraud et al. 2005)
        R = R - X @ (X.T @ R)
    R = R[:, np.linalg.norm(R, axis=0) > rcond * scale]
    if R.shape[1] == 0:
        return None
    Z = orthonormal_basis(R)[0]
    if Z.shape[1] == 0:
        return None
    overlap = X.T @ Z
    if np.abs(overlap).max() <= ORTHO_TOL:
        return Z
    return orthonormal_basis(Z - X @ overlap)[0]


#: Largest entry of ``Xᵀ Z`` (``Qᵀ Q − I``) accepted as orthogonal (orthonormal) in :func:`_orthonormal_against`
#: (:func:`orthonormal_basis`): a few hundred units of rounding (2.2·10⁻¹⁶), far below the Ritz residual
#: tolerances (≥ 10⁻⁸ relative) the solvers stop at.
ORTHO_TOL = 1e-13


#: Directions :func:`orthonormal_basis` keeps: singular values above this fraction of the largest (after the
#: columns are scaled to unit norm). The Gram matrix resolves singular values down to about √ε ≈ 1.5·10⁻⁸ of
#: the largest; this stays 100× above that.
GRAM_RCOND = 1e-6


def orthonormal_basis(A: np.ndarray, rcond: float = GRAM_RCOND) -> tuple[np.ndarray, np.ndarray]:
    """An orthonormal basis of ``A``'s column space from its Gram matrix: ``(Q = A T, T)``.

    SVQB (Stathopoulos & Wu 2002, §4): with ``D`` the inverse column norms,
    ``D Aᵀ A D = V Λ Vᵀ`` and ``Q = A D V Λ^{-1/2}`` over the eigenvalues
    above ``rcond²·max Λ``; run again on ``Q`` when ``Qᵀ Q`` is further
    than :data:`ORTHO_TOL` from the identity (as CholeskyQR2, Yamamoto et
    al. 2015), so that ``QᵀQ = I`` to rounding. Directions of ``A`` with
    singular values below ``rcond`` of the largest (scaled) are dropped, so
    ``Q`` may have fewer columns than ``A``. Its cost is two Gram products
    and one or two block products, far below Householder QR or an SVD on
    tall blocks (50,000 × 440 on 2 cores: 0.74 s for two passes, against
    2.1 s for QR, 1.7 s for an SVD).

    Returns
    -------
    Q : ndarray (d, r)
        Orthonormal columns, ``r ≤ A.shape[1]``.
    T : ndarray (p, r)
        ``Q = A @ T``: apply it to ``A``'s image under an operator to carry that image along.
    """
    T = _svqb_map(A, rcond)
    Q = A @ T
    gram = Q.T @ Q
    if gram.size == 0 or np.abs(gram - np.eye(gram.shape[0])).max() <= ORTHO_TOL:
        return Q, T
    T2 = _svqb_map(Q, rcond, gram)
    return Q @ T2, T @ T2


def _svqb_map(A: np.ndarray, rcond: float, gram: np.ndarray | None = None) -> np.ndarray:
    """The ``T`` of one SVQB pass: ``A T`` has orthonormal columns (to the Gram matrix's rounding).

    ``gram``: ``Aᵀ A`` where already computed.
    """
    if A.shape[1] == 0:
        return np.zeros((0, 0))
    gram = A.T @ A if gram is None else gram
    norms = np.sqrt(np.maximum(np.diag(gram), 0.0))
    inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    w, V = np.linalg.eigh(_sym(gram * inv[:, None] * inv[None, :]))
    keep = w > (rcond ** 2) * max(float(w[-1]), 0.0)
    return inv[:, None] * V[:, keep] / np.sqrt(w[keep])[None, :]


def _combine(blocks: list, coefficients: list) -> np.ndarray:
    """``Σ_i blocks[i] @ coefficients[i]`` (the product of ``[B_1 B_2 …]`` with stacked coefficients)."""
    out = blocks[0] @ coefficients[0]
    for b, c in zip(blocks[1:], coefficients[1:]):
        out += b @ c
    return out


def _orthonormal_carried(P, AP, S: list, AS: list, floor: float = 1e-8):
    """``P`` made orthonormal and orthogonal to ``span(S)``, with ``A P`` carried by the same combinations.

    ``S`` and ``AS`` are lists of blocks (``[X, Z]``, ``[AX, AZ]``), each of
    ``S``'s orthonormal and orthogonal to the others. ``P``'s columns are
    combinations of orthonormal vectors with coefficients of at most 1, so a
    column below ``floor`` (absolute) after the projection is a direction
    already converged: dividing ``A P``'s rounding by it would amplify that
    rounding, so it is dropped (and so are directions below
    :data:`GRAM_RCOND` of the rest).
    """
    C = [s.T @ P for s in S]
    P, AP = P - _combine(S, C), AP - _combine(AS, C)
    keep = np.linalg.norm(P, axis=0) > floor
    if not keep.any():
        return None, None
    Q, T = orthonormal_basis(P[:, keep])
    if Q.shape[1] == 0:
        return None, None
    return Q, AP[:, keep] @ T


#: LOBPCG iterations between the top-k convergence checks of :func:`lobpcg_top_basis`.
LOBPCG_CHUNK = 10


@dataclass(frozen=True)
class BlockEigenBasis:
    """A basis of a symmetric operator's top eigenvectors and its product with the operator.

    Attributes
    ----------
    basis : ndarray (d, p)
        Orthonormal.
    product : ndarray (d, p)
        ``A @ basis`` (a Rayleigh–Ritz step on ``basisᵀ product`` gives the
        eigenpairs).
    products : int
        Products with ``A`` made.
    converged : bool
        Whether the top k Ritz pairs reached the tolerance.
    """

    basis: np.ndarray
    product: np.ndarray
    products: int
    converged: bool


def lobpcg_top_basis(apply: Callable[[np.ndarray], np.ndarray], X0: np.ndarray, k: int, tol: float,
                     max_products: int = 300, rel_tol: float = 0.0) -> BlockEigenBasis:
    """A basis of the top-k eigenvectors of a symmetric operator seen through block products (LOBPCG).

    Where every product is expensive but its cost hardly depends on the
    block's width (a noise matrix regenerated per product), a block method
    that converges in few products is what is needed: subspace iteration
    needs ``log(1/tol)/log(λ_k/λ_{p+1})`` products, which near a noise bulk
    (``λ_k/λ_{p+1}`` → 1) is hundreds. LOBPCG (Knyazev 2001; scipy's
    ``lobpcg``) runs in chunks of :data:`LOBPCG_CHUNK` iterations, each
    restarted from the last Rayleigh–Ritz vectors, and stops once the top k
    pairs have converged: scipy's own test waits for all p columns, the
    oversampled ones in the noise bulk included, 3–7× longer (spiked Wigner
    matrices, d = 2,000–4,000, k = 10–50, λ_k 1.1–2× the bulk's edge: 14–28
    products against 60–125, subspace angles ≈ 10⁻³ both). Below ``d = 5p``
    the operator is formed from ⌈d/p⌉ products (small) and diagonalised, as
    scipy would; if LOBPCG breaks down (raises) the remaining products go to
    subspace iteration from the last basis.

    Parameters
    ----------
    apply : callable
        ``apply(X) = A X`` for a d×p block.
    X0 : ndarray (d, p)
        Starting block (random, or a previous basis); p ≥ k.
    k : int
        Number of top pairs whose residuals decide convergence.
    tol : float
        Absolute residual ``‖A u − θ u‖₂`` at which a pair has converged (in
        A's units).
    max_products : int
        Most products with ``A`` (the last chunk may end up to 3 above it).
    rel_tol : float
        Floor on ``tol`` relative to the largest Ritz value: where ``tol`` is
        far below rounding of A's scale (a private fit at a huge ε, whose
        noise level sets ``tol``), iterating to it is wasted.
    """
    from scipy.linalg import LinAlgWarning
    from scipy.sparse.linalg import LinearOperator, lobpcg

    d, p = X0.shape
    if p < k:
        raise ValueError(f"the starting block has {p} columns, fewer than k={k}")
    count = [0]

    def mm(X):
        count[0] += 1
        return apply(np.asarray(X).reshape(d, -1))

    if d < 5 * p:
        eye = np.eye(d)
        vecs = np.linalg.eigh(_sym(np.hstack([mm(eye[:, j:j + p]) for j in range(0, d, p)])))[1]
        basis = vecs[:, ::-1][:, :p]
        return BlockEigenBasis(basis, mm(basis), count[0], True)
    op = LinearOperator((d, d), matvec=mm, matmat=mm, dtype=float)
    X, use_lobpcg = X0, True
    while True:
        if use_lobpcg:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)  # "not reaching the requested tolerance"
                    warnings.simplefilter("ignore", LinAlgWarning)  # ill-conditioned Gram: our residuals decide
                    X = lobpcg(op, X, largest=True, tol=tol,
                               maxiter=max(1, min(LOBPCG_CHUNK, max_products - count[0] - 2)))[1]
            except (np.linalg.LinAlgError, ValueError):
                use_lobpcg = False   # breakdown: subspace iteration from the last basis
        Q = np.linalg.qr(X)[0]
        Y = mm(Q)
        vals, y = np.linalg.eigh(_sym(Q.T @ Y))
        tol = max(tol, rel_tol * float(np.abs(vals).max()))
        converged = bool(np.all(_ritz_residuals(Q, Y, vals, y, k)[1] <= tol))
        if converged or count[0] >= max_products:
            return BlockEigenBasis(Q, Y, count[0], converged)
        X = Q @ y[:, ::-1] if use_lobpcg else Y


def _sym(B: np.ndarray) -> np.ndarray:
    return 0.5 * (B + B.T)


def _block_gram(basis: list, images: list) -> np.ndarray:
    """``Sᵀ A S`` for ``S = [basis…]``, ``A S = [images…]`` and symmetric ``A``: the blocks on and above the
    diagonal computed (diagonal blocks symmetrised), those below mirrored."""
    blocks = [[None] * len(basis) for _ in basis]
    for i, b in enumerate(basis):
        blocks[i][i] = _sym(b.T @ images[i])
        for j in range(i + 1, len(basis)):
            blocks[i][j] = b.T @ images[j]
            blocks[j][i] = blocks[i][j].T
    return np.block(blocks)


def _ritz_residuals(Q: np.ndarray, Y: np.ndarray, vals: np.ndarray, vecs: np.ndarray,
                    k: int) -> tuple[np.ndarray, np.ndarray]:
    """The top k Ritz values ``θ`` of ``Y = M2 Q`` (descending) and their residuals ``‖M2 u − θ u‖₂``."""
    top = np.argsort(vals)[::-1][:k]
    theta = vals[top]
    return theta, np.linalg.norm(Y @ vecs[:, top] - (Q @ vecs[:, top]) * theta[None, :], axis=0)


def _ritz_converged(Q: np.ndarray, Y: np.ndarray, vals: np.ndarray, vecs: np.ndarray, k: int, tol: float) -> bool:
    """Whether the top k Ritz pairs from ``Y = M2 Q`` all have relative residual ≤ ``tol``."""
    theta, residual = _ritz_residuals(Q, Y, vals, vecs, k)
    return bool(theta[-1] > 0 and np.all(residual <= tol * theta))


def dense_top_eigh(m2: np.ndarray, k: int, partial: bool = False) -> Whitening:
    """Top-k algebraic eigenpairs of a dense symmetric M2 (small vocabularies only); ``partial`` as in :func:`lobpcg_top_eigh`."""
    vals, vecs = np.linalg.eigh(0.5 * (m2 + m2.T))
    return (supported_top_k if partial else top_k_from_symmetric)(vals, vecs, k)

