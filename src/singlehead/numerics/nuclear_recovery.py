"""Minimum-nuclear-norm recovery from linear measurements, and its phase transition for measurements
that see the symmetric and antisymmetric parts of a square matrix in different numbers.

* :func:`min_nuclear_norm`: ``min ||X||_*`` subject to ``A vec(X) = b`` (ADMM with singular-value
  thresholding; numpy only).
* :func:`blocked_nuclear_threshold`: the number of measurements (per ``D^2``) above which
  minimum-nuclear-norm recovery of a symmetric PSD rank-``rho D`` matrix succeeds, when the
  measurements come in three Gaussian families: ones that see only the symmetric part ``M_s``
  (isotropic on the symmetric matrices), ones that see only the antisymmetric part ``M_a``, and
  isotropic ones that see all of ``M``.

Phase transition (Gordon's comparison, the convex Gaussian min-max theorem). Write ``D`` for the
nuclear norm's descent cone at ``M0 = U Lambda U^T`` and ``D^o = {t (U U^T + W)}`` (``t >= 0``,
``U^T W = W U = 0``, ``||W||_op <= 1``) for its polar. With ``N_b`` measurements in family ``b``
(subspace ``S_b``: symmetric, antisymmetric or all matrices) the null space of the measurements meets
``D`` only at 0 (recovery) iff, with independent standard Gaussians ``g_b`` on ``S_b``,

    there are weights mu_b >= 0, sum mu_b = 1, and y in D^o with
    sum_b mu_b g_b - y  in  sum_b mu_b sqrt(N_b) Ball(S_b)

(the polar form of "no ``h`` in ``D`` with ``<g_b, P_b h> >= sqrt(N_b) ||P_b h||`` for every ``b``";
one isotropic family gives back ``N > dist(g, D^o)^2``, the statistical dimension). With
``r = sum mu_b g_b - y`` split into its symmetric and antisymmetric parts the membership reads
``(||r_s|| - mu_s sqrt(N_s))_+^2 + (||r_a|| - mu_a sqrt(N_a))_+^2 <= mu_f^2 N_f``. The blocks of
``r`` on ``U``'s range and across it have deterministic norms to leading order; the block on the
orthogonal complement ``m x m`` (``m = (1 - rho) D``) is
``sigma_s G_s + sigma_a G_a - V`` (``sigma_s^2 = mu_s^2 + mu_f^2``, ``sigma_a^2 = mu_a^2 + mu_f^2``,
``G_s`` GOE, ``G_a`` antisymmetric Gaussian, ``V = t W``), and its two parts are traded against each
other through ``V``: the weighted projections ``min_{||V|| <= t} w ||X_s - V_s||^2 + (1-w) ||X_a - V_a||^2``
trace the attainable pairs. This block is not a spectral function of one matrix (for one isotropic
family, ``w = 1/2``, it is the singular-value clipping of the quarter-circle computation), so it is
evaluated on one fixed ``m x m`` instance; the rest is exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import linalg, optimize

__all__ = ["NuclearSolution", "min_nuclear_norm", "blocked_nuclear_threshold"]


@dataclass(frozen=True)
class NuclearSolution:
    """Result of :func:`min_nuclear_norm`: the minimiser ``X``, the ADMM iterations used, whether the
    stopping rule was met, and the relative constraint residual ``||A vec(X) - b|| / ||b||``."""

    X: np.ndarray
    iterations: int
    converged: bool
    residual: float


def _svt(Y: np.ndarray, tau: float) -> np.ndarray:
    U, s, Vt = np.linalg.svd(Y, full_matrices=False)
    return (U * np.maximum(s - tau, 0.0)) @ Vt


def min_nuclear_norm(A: np.ndarray, b: np.ndarray, shape: tuple[int, int], *, tol: float = 1e-8,
                     max_iter: int = 20000, penalty: float | None = None) -> NuclearSolution:
    """``argmin ||X||_*`` subject to ``A vec(X) = b`` (``vec`` row-major, ``X.ravel()``).

    ADMM on the split ``X = Z``: ``X`` projected on the affine set (an orthonormal basis of ``A``'s row
    space, or of its null space when that is smaller, computed once by a complete QR), ``Z`` by
    singular-value soft thresholding at ``1/penalty``, residual-balancing updates of ``penalty``.
    Stops when the primal residual ``||X - Z||`` is below ``tol max(||X||, ||Z||)`` and the dual
    residual ``penalty ||Z - Z_prev||`` below ``tol`` times the dual variable's norm, or after
    ``max_iter`` iterations. The returned ``X`` is the affine iterate (it meets the constraints to rounding when
    ``A`` has full row rank). Rows of ``A`` that are linearly dependent are allowed (the projection is
    onto the row space); an inconsistent ``b`` is projected onto the range of ``A`` first.

    Parameters
    ----------
    A : (p, d1 d2) array
        The measurement matrix.
    b : (p,) array
        The measurements.
    shape : (d1, d2)
        Shape of ``X``.
    tol : float
        Relative stopping tolerance, > 0.
    max_iter : int
        Iteration cap, >= 1.
    penalty : float, optional
        Initial ADMM penalty; default ``4 sqrt(min(d1, d2)) / ||x0||`` (``x0`` the least-norm solution),
        a threshold of the order of ``x0``'s singular values.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X0 = rng.standard_normal((8, 1)) @ rng.standard_normal((1, 8))   # rank 1, 64 entries
    >>> A = rng.standard_normal((40, 64))
    >>> sol = min_nuclear_norm(A, A @ X0.ravel(), (8, 8))
    >>> bool(np.linalg.norm(sol.X - X0) < 1e-5 * np.linalg.norm(X0))
    True
    """
    A = np.asarray(A, float)
    b = np.asarray(b, float).ravel()
    d1, d2 = (int(shape[0]), int(shape[1]))
    q = d1 * d2
    if A.ndim != 2 or A.shape[1] != q:
        raise ValueError(f"A must have shape (p, {q}) for shape={shape!r} (got {A.shape})")
    if b.shape[0] != A.shape[0]:
        raise ValueError(f"b must have length {A.shape[0]} (got {b.shape[0]})")
    if not tol > 0:
        raise ValueError(f"tol must be > 0 (got {tol!r})")
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1 (got {max_iter!r})")
    if penalty is not None and not penalty > 0:
        raise ValueError(f"penalty must be > 0 (got {penalty!r})")
    p = A.shape[0]
    # orthonormal basis of the row space of A (rank-revealing through the R diagonal), and the least-norm
    # (least-squares when p > q) point x0 of the affine set, which lies in the row space
    k = min(p, q)
    if p <= q:
        Q, R = np.linalg.qr(A.T, mode="complete")
        diag = np.abs(np.diag(R[:k, :k]))
        if k and diag.min() > 1e-10 * diag.max():
            x0 = Q[:, :k] @ linalg.solve_triangular(R[:k, :k], b, trans="T")
        else:
            Q = None
    else:
        G = A.T @ A
        try:
            x0 = linalg.cho_solve(linalg.cho_factor(G), A.T @ b)
            Q = np.eye(q)
        except linalg.LinAlgError:
            Q = None
    if Q is None:  # rank deficient: an SVD basis
        Ur, sr, Vrt = np.linalg.svd(A.T, full_matrices=True)
        k = int(np.sum(sr > 1e-10 * sr[0])) if sr.size else 0
        Q = Ur
        x0 = Ur[:, :k] @ ((Vrt[:k] @ b) / sr[:k])
    row = Q[:, :k]
    if k <= q - k:
        def project(y: np.ndarray) -> np.ndarray:
            return y - row @ (row.T @ y) + x0
    else:
        null = Q[:, k:]

        def project(y: np.ndarray) -> np.ndarray:
            return null @ (null.T @ y) + x0
    if k == q:  # the measurements determine X
        X = x0.reshape(d1, d2)
        return NuclearSolution(X, 0, True, float(np.linalg.norm(A @ x0 - b) / max(np.linalg.norm(b), 1e-300)))
    scale = max(np.linalg.norm(x0), 1e-300)
    rho = penalty if penalty is not None else math.sqrt(min(d1, d2)) / scale * 4.0
    z = x0.copy()
    u = np.zeros(q)
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        x = project(z - u)
        z_prev = z
        z = _svt((x + u).reshape(d1, d2), 1.0 / rho).ravel()
        u += x - z
        r_pri = np.linalg.norm(x - z)
        r_dual = rho * np.linalg.norm(z - z_prev)
        sc = max(np.linalg.norm(x), np.linalg.norm(z), 1e-300)
        if r_pri < tol * sc and r_dual < tol * max(rho * np.linalg.norm(u), 1e-300):
            converged = True
            break
        if it % 10 == 0:  # residual balancing
            if r_pri > 10 * r_dual:
                rho *= 2.0
                u /= 2.0
            elif r_dual > 10 * r_pri:
                rho /= 2.0
                u *= 2.0
    X = x.reshape(d1, d2)
    res = float(np.linalg.norm(A @ x - b) / max(np.linalg.norm(b), 1e-300))
    return NuclearSolution(X, it, converged, res)


def _weighted_clip(Xs: np.ndarray, Xa: np.ndarray, t: float, w: float, V: np.ndarray, iters: int) -> np.ndarray:
    """``argmin_{||V||_op <= t} w ||X_s - V_s||^2 + (1 - w) ||X_a - V_a||^2`` by FISTA from ``V``."""
    L = 2.0 * max(w, 1.0 - w)
    Y = V.copy()
    theta = 1.0
    for _ in range(iters):
        Ys = 0.5 * (Y + Y.T)
        grad = 2.0 * (w * (Ys - Xs) + (1.0 - w) * (Y - Ys - Xa))
        U, s, Vt = np.linalg.svd(Y - grad / L)
        Vn = (U * np.minimum(s, t)) @ Vt
        theta_n = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * theta * theta))
        Y = Vn + ((theta - 1.0) / theta_n) * (Vn - V)
        V, theta = Vn, theta_n
    return V


def _smallest_scale(A: float, B: float, p: float, q: float, f: float) -> float:
    """Smallest ``s >= 0`` with ``(A - p s)_+^2 + (B - q s)_+^2 <= (f s)^2`` (``inf`` if none)."""
    def g(s: float) -> float:
        return max(A - p * s, 0.0) ** 2 + max(B - q * s, 0.0) ** 2 - (f * s) ** 2

    if g(0.0) <= 0.0:
        return 0.0
    if f <= 0.0:
        need = [x / c if c > 0 else (math.inf if x > 0 else 0.0) for x, c in ((A, p), (B, q))]
        return max(need)
    hi = 1.0
    while g(hi) > 0.0:
        hi *= 2.0
    return float(optimize.brentq(g, 0.0, hi, xtol=1e-14, rtol=1e-12))


def blocked_nuclear_threshold(rho: float, n_sym: float, n_antisym: float, n_full: float, *, size: int = 48,
                              seed: int = 0, fista_iters: int = 25) -> float:
    """Phase transition of minimum-nuclear-norm recovery of a symmetric PSD ``D x D`` matrix of rank
    ``rho D`` from three families of Gaussian measurements (module docstring): ``alpha_c`` such that
    recovery succeeds w.h.p. (``D -> inf``) iff ``alpha > alpha_c``, when there are ``alpha D^2 n_sym``
    measurements of the symmetric part only (GOE), ``alpha D^2 n_antisym`` of the antisymmetric part only,
    and ``alpha D^2 n_full`` isotropic ones.

    One isotropic family (``n_sym = n_antisym = 0``) gives the statistical dimension,
    ``alpha_c n_full = nuclear_statistical_dimension(rho)`` (up to the finite-size error below). At
    ``rho = 1`` (full rank, the descent cone a half-space) it is the parameter count of the families.

    The Gaussian-min-max condition is minimised over the family weights, the scale of the dual
    certificate and the trade-off weight of the complement block, the last on one fixed instance of
    size ``size`` (``G_s``, ``G_a`` drawn with ``seed``): the result carries that instance's finite-size
    error (a few ``1e-3`` at the default size; it shrinks like ``1/size``), and the inner weighted
    projection is solved by ``fista_iters`` warm-started FISTA steps per evaluation (an upper bound on
    the exact minimum for each setting). Cost: about 20 ``reference_seconds`` at the default size.

    The condition is that of the closed descent cone. Its face ``{H_s = 0, H_a`` zero on the complement
    block``}`` (dimension ``(rho - rho^2/2) D^2``), on which the norm grows only at second order, meets the
    null space of the measurements when ``M_a`` is measured fewer times than that; the value returned is
    then an upper bound on the threshold (with ``n_sym`` and ``n_antisym`` only, the symmetric problem
    alone, ``(n_sym, 0, 0)``, is the exact one for a symmetric matrix).

    Parameters
    ----------
    rho : float
        Rank ratio of the matrix, in ``[0, 1]``.
    n_sym, n_antisym, n_full : float
        Measurements per ``alpha D^2`` in each family, ``>= 0``, not all zero.
    size : int
        Side of the complement block's instance, ``>= 8``.
    seed : int
        Seed of that instance.
    fista_iters : int
        FISTA steps per evaluation of the weighted projection, ``>= 1``.

    Examples
    --------
    >>> from singlehead.numerics.nuclear_recovery import blocked_nuclear_threshold
    >>> round(blocked_nuclear_threshold(1.0, 1.0, 0.0, 1.0), 4)     # full rank: all d^2 parameters
    0.5
    """
    if not (0.0 <= rho <= 1.0):
        raise ValueError(f"rho must be in [0, 1] (got {rho!r})")
    counts = np.array([n_sym, n_antisym, n_full], float)
    if np.any(counts < 0) or not np.any(counts > 0):
        raise ValueError(f"n_sym, n_antisym, n_full must be >= 0 and not all zero (got {tuple(counts)})")
    if size < 8:
        raise ValueError(f"size must be >= 8 (got {size!r})")
    if fista_iters < 1:
        raise ValueError(f"fista_iters must be >= 1 (got {fista_iters!r})")
    if rho == 0.0:
        return 0.0
    if counts[0] + counts[2] == 0:
        return math.inf  # no measurement sees the symmetric part
    present = np.flatnonzero(counts > 0)
    sym_only = counts[1] + counts[2] == 0
    sq = np.sqrt(counts)
    base = rho - rho * rho / 2  # ||.||^2/D^2 of the U-range and cross blocks, per unit variance
    m = int(size) if rho < 1.0 else 0
    if m:
        G = np.random.default_rng(seed).standard_normal((m, m))
        Gs, Ga = 0.5 * (G + G.T), 0.5 * (G - G.T)  # GOE (off-diagonal variance 1/2) and antisymmetric
        dim = m / (1.0 - rho)
    state = {"V": np.zeros((m, m))}

    def mu_of(z: np.ndarray) -> np.ndarray:
        mu = np.zeros(3)
        e = np.exp(z[:len(present)] - np.max(z[:len(present)]))
        mu[present] = e / e.sum()
        return mu

    def alpha_of(z: np.ndarray) -> float:
        mu = mu_of(z)
        sig_s = math.hypot(mu[0], mu[2])
        sig_a = math.hypot(mu[1], mu[2])
        tau = math.exp(z[len(present)]) if m else 0.0
        eps_s = eps_a = 0.0
        if m and sym_only:
            # the antisymmetric part is not measured: the certificate must be symmetric (r_a = 0), and the
            # projection of X_s on the symmetric spectral-norm ball clips its eigenvalues
            lam = np.linalg.eigvalsh(sig_s * Gs)
            eps_s = float(np.sum((np.abs(lam) - tau * math.sqrt(dim)).clip(min=0.0) ** 2)) / dim ** 2
        elif m:
            w = 1.0 / (1.0 + math.exp(-z[len(present) + 1]))
            Xs, Xa = sig_s * Gs, sig_a * Ga
            V = _weighted_clip(Xs, Xa, tau * math.sqrt(dim), w, state["V"], fista_iters)
            state["V"] = V
            Vs = 0.5 * (V + V.T)
            eps_s = float(np.sum((Xs - Vs) ** 2)) / dim ** 2
            eps_a = float(np.sum((Xa - (V - Vs)) ** 2)) / dim ** 2
        A = math.sqrt(sig_s ** 2 * base + tau ** 2 * rho + eps_s)
        B = math.sqrt(sig_a ** 2 * base + eps_a)
        s = _smallest_scale(A, B, mu[0] * sq[0], mu[1] * sq[1], mu[2] * sq[2])
        return s * s

    # start: the weights of the measurement counts, the isotropic certificate scale, even trade-off
    z0 = [math.log(c) for c in counts[present]] + ([math.log(0.25), 0.0] if m else [])
    best = optimize.minimize(alpha_of, np.array(z0, float), method="Nelder-Mead",
                             options=dict(xatol=1e-3, fatol=1e-6, maxfev=400))
    return float(best.fun)
