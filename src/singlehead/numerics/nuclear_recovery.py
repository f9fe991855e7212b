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
nuclear norm's descent cone at ``M0 = U Lambda U^T`` and ``D° = {t (U U^T + W)}`` (``t >= 0``,
``U^T W = W U = 0``, ``||W||_op <= 1``) for its polar. With ``N_b`` measurements in family ``b``
(subspace ``S_b``: symmetric, antisymmetric or all matrices) the null space of the measurements meets
``D`` only at 0 (recovery) iff, with independent standard Gaussians ``g_b`` on ``S_b``,

    there are weights mu_b >= 0, sum mu_b = 1, and y in D° with
    sum_b mu_b g_b - y  in  sum_b mu_b sqrt(N_b) Ball(S_b)

(the polar form of "no ``h`` in ``D`` with ``<g_b, P_b h> >= sqrt(N_b) ||P_b h||`` for every ``b``";
one isotropic family gives back ``N > dist(g, D°)^2``, the statistical dimension). With
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
    p = A.shape[0]
    # orthonormal basis of the row space of A (rank-revealing through the R diagonal), and the least-norm
    # (least-squares when p > q) point x0 of the affine set, which lies in the row space
    k = min(p, q)
    Q = R = None
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
