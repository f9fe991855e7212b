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
evaluated on a few fixed ``m x m`` instances whose spectra are those of the limiting laws (only their
eigenvectors are random); the rest is exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import integrate, linalg, optimize

__all__ = ["NuclearSolution", "min_nuclear_norm", "blocked_nuclear_threshold", "nuclear_statistical_dimension"]


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


def min_nuclear_norm(
    A: np.ndarray,
    b: np.ndarray,
    shape: tuple[int, int],
    *,
    tol: float = 1e-8,
    max_iter: int = 20000,
    penalty: float | None = None,
) -> NuclearSolution:
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


def nuclear_statistical_dimension(rho: float) -> float:
    """``delta(rho)/D^2``: statistical dimension of the nuclear norm's descent cone at a rank-``rho D``
    ``D x D`` matrix, per entry (Chandrasekaran et al. 2012; Amelunxen et al. 2014, Prop. 4.7).

    ``min_t [1 - (1-rho)^2 + t^2 rho (1-rho) + (1-rho)^2 int (s - t)_+^2 qc(ds)]``, ``qc`` the
    quarter-circle law on ``[0, 2]`` (singular values of a square Gaussian block, scaled). Minimum-
    nuclear-norm recovery from isotropic Gaussian measurements succeeds above ``delta`` measurements
    (the phase transition of Donoho, Gavish & Montanari 2013). ``rho = 1/2`` gives 0.9054.
    """
    if not (0.0 <= rho <= 1.0):
        raise ValueError(f"rho must be in [0, 1] (got {rho!r})")

    def excess(t: float) -> float:
        tail = integrate.quad(lambda s: (s - t) ** 2 * math.sqrt(4 - s * s) / math.pi, t, 2.0)[0] if t < 2 else 0.0
        return 1 - (1 - rho) ** 2 + t * t * rho * (1 - rho) + (1 - rho) ** 2 * tail

    return float(optimize.minimize_scalar(excess, bounds=(0.0, 2.0), method="bounded", options={"xatol": 1e-10}).fun)


def _ball_projection(Y: np.ndarray, t: float) -> np.ndarray:
    """Frobenius projection of each matrix of the stack ``Y`` (``(k, m, m)``) on ``{||V||_op <= t}``: the
    singular values above ``t`` clipped to ``t``, from the eigendecomposition of ``Y^T Y`` (only the clipped
    directions, whose singular values exceed ``t > 0``, enter, so squaring the condition number is harmless)."""
    lam, W = np.linalg.eigh(np.swapaxes(Y, -1, -2) @ Y)
    s = np.sqrt(np.clip(lam, 0.0, None))
    cut = np.where(s > t, (s - t) / np.where(s > t, s, 1.0), 0.0)
    if not cut.any():
        return Y.copy()
    return Y - ((Y @ W) * cut[..., None, :]) @ np.swapaxes(W, -1, -2)


def _semicircle_bin_means(n: int) -> np.ndarray:
    """The semicircle law on ``[-1, 1]`` cut into ``n`` bins of mass ``1/n``: each bin's mean (increasing),
    from its edges (bisection on the distribution function to rounding) and the closed-form first moment
    ``int x dF = -(2/(3 pi)) (1 - x^2)^(3/2)``."""
    u = np.arange(1, n) / n
    lo, hi = -np.ones(n - 1), np.ones(n - 1)
    for _ in range(60):
        y = 0.5 * (lo + hi)
        below = 0.5 + (y * np.sqrt(1.0 - y * y) + np.arcsin(y)) / np.pi < u
        lo, hi = np.where(below, y, lo), np.where(below, hi, y)
    edges = np.concatenate([[-1.0], 0.5 * (lo + hi), [1.0]])
    moment = -(2.0 / (3.0 * math.pi)) * (1.0 - edges**2).clip(min=0.0) ** 1.5
    return n * np.diff(moment)


def _semicircle_excess(c: float, t: float) -> float:
    """``E (c |x| - t)_+^2`` for ``x`` semicircular on ``[-1, 1]`` (``c >= 0``, ``t >= 0``), in closed form
    from the truncated moments ``int_a^1 x^k (2/pi) sqrt(1 - x^2) dx``, ``k = 0, 1, 2``."""
    if c <= 0.0 or t >= c:
        return 0.0
    a = t / c
    r = math.sqrt(1.0 - a * a)
    i0 = math.pi / 4 - (a * r + math.asin(a)) / 2
    i1 = r**3 / 3
    i2 = math.pi / 16 - (a * (2 * a * a - 1) * r + math.asin(a)) / 8
    return (4.0 / math.pi) * (c * c * i2 - 2 * c * t * i1 + t * t * i0)


def _complement_instances(m: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``k`` independent pairs ``(G_s, G_a)`` of side ``m``: the symmetric and antisymmetric parts of a
    standard Gaussian matrix (off-diagonal variances 1/2; independent of each other), with their spectra
    replaced by those of the limiting laws, cut into ``m`` bins of equal mass and each bin represented by
    its mean (``G_s``: eigenvalues on the semicircle of radius ``sqrt(2 m)``; ``G_a``: singular values, in
    pairs, the moduli of those values), and their Haar eigenvectors kept."""
    G = np.random.default_rng(seed).standard_normal((k, m, m))
    Gs, Ga = 0.5 * (G + np.swapaxes(G, 1, 2)), 0.5 * (G - np.swapaxes(G, 1, 2))
    q = math.sqrt(2.0 * m) * _semicircle_bin_means(m)
    _, Q = np.linalg.eigh(Gs)
    Gs = (Q * q) @ np.swapaxes(Q, 1, 2)
    lam, W = np.linalg.eigh(np.swapaxes(Ga, 1, 2) @ Ga)  # Ga^T Ga commutes with Ga: rescale along W
    target = np.sort(np.abs(q))
    Ga = Ga @ ((W * (target / np.sqrt(np.clip(lam, 1e-300, None)))[:, None, :]) @ np.swapaxes(W, 1, 2))
    return Gs, 0.5 * (Ga - np.swapaxes(Ga, 1, 2))


def _smallest_scale(A: float, B: float, p: float, q: float, f: float) -> float:
    """Smallest ``s >= 0`` with ``(A - p s)_+^2 + (B - q s)_+^2 <= (f s)^2`` (``inf`` if none), from the
    quadratic on each interval between the kinks ``A/p``, ``B/q``."""
    kinks = sorted({0.0} | {x / c for x, c in ((A, p), (B, q)) if c > 0 and x > 0}) + [math.inf]
    for lo, hi in zip(kinks[:-1], kinks[1:]):
        mid = lo + 1.0 if hi == math.inf else 0.5 * (lo + hi)
        act = [(x, c) for x, c in ((A, p), (B, q)) if x - c * mid > 0]
        a2 = sum(c * c for _, c in act) - f * f
        a1 = -2.0 * sum(x * c for x, c in act)
        a0 = sum(x * x for x, _ in act)
        if a2 * lo * lo + a1 * lo + a0 <= 0.0:
            return lo
        if a2 == 0.0:
            roots = [-a0 / a1] if a1 < 0 else []
        else:
            disc = a1 * a1 - 4.0 * a2 * a0
            roots = [] if disc < 0 else sorted(((-a1 - math.sqrt(disc)) / (2 * a2), (-a1 + math.sqrt(disc)) / (2 * a2)))
        for r in roots:
            if lo <= r <= hi:
                return r
    return math.inf


def blocked_nuclear_threshold(
    rho: float,
    n_sym: float,
    n_antisym: float,
    n_full: float,
    *,
    size: int = 48,
    seed: int = 0,
    fista_iters: int = 3,
    instances: int = 8,
    tol: float = 1e-6,
    max_rounds: int = 1000,
    control_variate: bool = True,
) -> float:
    """Phase transition of minimum-nuclear-norm recovery of a symmetric PSD ``D x D`` matrix of rank
    ``rho D`` from three families of Gaussian measurements (module docstring): ``alpha_c`` such that
    recovery succeeds w.h.p. (``D -> inf``) iff ``alpha > alpha_c``, when there are ``alpha D^2 n_sym``
    measurements of the symmetric part only (GOE), ``alpha D^2 n_antisym`` of the antisymmetric part only,
    and ``alpha D^2 n_full`` isotropic ones.

    One isotropic family (``n_sym = n_antisym = 0``) gives the statistical dimension,
    ``alpha_c n_full = nuclear_statistical_dimension(rho)`` (to the solver's tolerance when
    ``control_variate``, below). At ``rho = 1`` (full rank, the descent cone a half-space) it is the parameter count of
    the families.

    Evaluation. The Gaussian-min-max condition is minimised over the family weights ``mu_b``, the scale
    ``tau`` of the dual certificate and its complement block ``V`` (``||V||_op <= tau sqrt(D)``, the
    attainable pairs of the module docstring) by alternating minimisation: for a fixed ``V/tau`` the
    condition depends on the scalars through six inner products, and ``(mu, tau)`` are minimised
    exactly (Nelder-Mead on the closed-form condition); for fixed scalars ``fista_iters`` FISTA steps
    (projections on the spectral-norm ball) descend the weighted projection whose weight is the
    condition's own sensitivity to the two parts, which at a fixed point is the best trade-off. Rounds
    stop when two consecutive ones change ``alpha`` by less than ``tol``. Every value met is attained by
    a feasible certificate on the instances below, so the minimum found is an upper bound on theirs.
    The result is at most the value of the symmetric family alone (the other weights zero, closed form
    below), a face on which the alternating minimisation stalls (large ``rho``).

    Accuracy contract. The complement block is evaluated on ``instances`` independent pairs
    ``(G_s, G_a)`` of side ``size`` (drawn with ``seed``; the condition averaged over them) whose spectra
    are those of the limiting semicircle laws, cut into ``size`` bins of equal mass (each represented by
    its mean), so that only their eigenvectors are random. With ``control_variate`` the minimum is then
    multiplied by ``nuclear_statistical_dimension(rho) / alpha_iso``, ``alpha_iso`` the isotropic
    one-family condition minimised on the same instances (singular-value clipping of ``G_s + G_a``):
    the two share the instances' fluctuation to leading order, and the ratio's expectation is the
    ``D -> inf`` value up to ``O(1/size)``. The result differs from the ``D -> inf`` value by the part
    of the eigenvector fluctuation not shared with the isotropic condition, whose standard deviation
    falls like ``1 / (size sqrt(instances))``, by a bias of order ``1/size`` (the bins), and by the
    stopping error (a multiple of ``tol``, larger where the rounds contract slowly, small ``rho``); the
    first dominates at the defaults. Trade ``size`` (cost
    ``~size^3`` per instance) against ``instances`` (cost linear). Families that see only the
    symmetric part (``n_antisym = n_full = 0``) give a spectral function of ``G_s``, evaluated in its
    ``D -> inf`` limit (closed form on the semicircle; no instances). Cost: per round ``fista_iters``
    batched eigendecompositions of ``instances`` matrices of side ``size`` and a Nelder-Mead search over
    at most three scalars; the rounds needed grow as ``rho -> 0``.

    The condition is that of the closed descent cone. Its face ``{H_s = 0, H_a`` zero on the complement
    block``}`` (dimension ``(rho - rho^2/2) D^2``), on which the norm grows only at second order, meets the
    null space of the measurements when ``M_a`` is measured fewer times than that; the value returned is
    then an upper bound on the threshold (with ``n_sym`` and ``n_antisym`` only, the symmetric problem
    alone, ``(n_sym, 0, 0)``, is the exact one for a symmetric matrix). Without isotropic measurements
    the conditions on the two parts decouple: the value is the larger of the symmetric problem's and
    ``(rho - rho^2/2) / n_antisym``, the antisymmetric one's (its complement block absorbed by a
    vanishing weight ``mu_a``, which leaves the whole spectral-norm ball to the symmetric part).

    Parameters
    ----------
    rho : float
        Rank ratio of the matrix, in ``[0, 1]``.
    n_sym, n_antisym, n_full : float
        Measurements per ``alpha D^2`` in each family, ``>= 0``, not all zero.
    size : int
        Side of the complement block's instances, ``>= 8``.
    seed : int
        Seed of the instances' eigenvectors.
    fista_iters : int
        FISTA steps on the complement block per round, ``>= 1``.
    instances : int
        Number of instances the condition is averaged over, ``>= 1``.
    tol : float
        Stopping tolerance on ``alpha`` between rounds, ``> 0``.
    max_rounds : int
        Cap on the rounds, ``>= 1``.
    control_variate : bool
        Divide by the isotropic condition on the same instances and multiply by its exact value
        (accuracy contract).

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
    if instances < 1:
        raise ValueError(f"instances must be >= 1 (got {instances!r})")
    if not tol > 0:
        raise ValueError(f"tol must be > 0 (got {tol!r})")
    if max_rounds < 1:
        raise ValueError(f"max_rounds must be >= 1 (got {max_rounds!r})")
    if rho == 0.0:
        return 0.0
    if counts[0] + counts[2] == 0:
        return math.inf  # no measurement sees the symmetric part
    base = rho - rho * rho / 2  # ||.||^2/D^2 of the U-range and cross blocks, per unit variance
    if counts[2] == 0 and counts[1] > 0:
        # no isotropic family: the two parts decouple (docstring)
        symmetric = blocked_nuclear_threshold(
            rho,
            counts[0],
            0.0,
            0.0,
            size=size,
            seed=seed,
            fista_iters=fista_iters,
            instances=instances,
            tol=tol,
            max_rounds=max_rounds,
            control_variate=control_variate,
        )
        return float(max(symmetric, base / counts[1]))
    present = np.flatnonzero(counts > 0)
    npres = len(present)
    sq = np.sqrt(counts)
    m = int(size) if rho < 1.0 else 0
    sym_only = counts[1] + counts[2] == 0
    dim = m / (1.0 - rho) if m else 1.0
    sd = math.sqrt(dim)

    def unpack(x: np.ndarray) -> tuple[np.ndarray, float]:
        # x: log(mu_b / mu_first) for the other present families, then log tau (when there is a block)
        mu = np.zeros(3)
        z = np.concatenate([[0.0], x[: npres - 1]])
        e = np.exp(z - z.max())
        mu[present] = e / e.sum()
        return mu, (math.exp(min(max(x[npres - 1], -30.0), 30.0)) if m else 0.0)

    def condition(x: np.ndarray, eps) -> tuple[float, float, float, float, float, float, np.ndarray, float]:
        mu, tau = unpack(x)
        sig_s, sig_a = math.hypot(mu[0], mu[2]), math.hypot(mu[1], mu[2])
        eps_s, eps_a = eps(sig_s, sig_a, tau)
        A = math.sqrt(max(sig_s**2 * base + tau**2 * rho + eps_s, 0.0))
        B = math.sqrt(max(sig_a**2 * base + eps_a, 0.0))
        p, q, f = mu[0] * sq[0], mu[1] * sq[1], mu[2] * sq[2]
        return _smallest_scale(A, B, p, q, f), A, B, p, q, f, mu, tau

    def minimise(x: np.ndarray, eps) -> np.ndarray:
        if x.size == 0:
            return x
        return optimize.minimize(
            lambda y: condition(y, eps)[0] ** 2,
            x,
            method="Nelder-Mead",
            options=dict(xatol=1e-6, fatol=1e-12, maxfev=4000),
        ).x

    # start: the weights of the measurement counts, a certificate scale of the order of the optimum
    x = np.array([math.log(c / counts[present[0]]) for c in counts[present[1:]]] + ([math.log(0.25)] if m else []))
    if not m:
        return float(condition(minimise(x, lambda *a: (0.0, 0.0)), lambda *a: (0.0, 0.0))[0] ** 2)
    if sym_only:
        # the antisymmetric part is not measured: the certificate must be symmetric (r_a = 0), and the
        # projection of X_s on the symmetric spectral-norm ball clips its eigenvalues, a semicircle of
        # radius sigma_s sqrt(2 (1 - rho)) per sqrt(D): its D -> inf limit in closed form
        c = math.sqrt(2.0 * (1.0 - rho))

        def eps_sym(sig_s: float, sig_a: float, tau: float) -> tuple[float, float]:
            return (1.0 - rho) * _semicircle_excess(sig_s * c, tau), 0.0

        return float(condition(minimise(x, eps_sym), eps_sym)[0] ** 2)
    Gs, Ga = _complement_instances(m, int(instances), seed)
    norm = instances * dim * dim
    Gss, Gaa = float(np.sum(Gs * Gs)) / norm, float(np.sum(Ga * Ga)) / norm
    mu, tau = unpack(x)
    U = _ball_projection(math.hypot(mu[0], mu[2]) * Gs + math.hypot(mu[1], mu[2]) * Ga, tau * sd) / (tau * sd)
    prev, calm, value = math.inf, 0, math.inf
    for _ in range(max_rounds):
        Us = 0.5 * (U + np.swapaxes(U, 1, 2))
        Ua = U - Us
        gs, ga = float(np.sum(Gs * Us)) / norm, float(np.sum(Ga * Ua)) / norm
        us, ua = float(np.sum(Us * Us)) / norm, float(np.sum(Ua * Ua)) / norm

        def eps_block(sig_s: float, sig_a: float, tau: float) -> tuple[float, float]:
            # ||sig X - tau sqrt(D) U||^2 / D^2 per part, averaged over the instances
            return (
                sig_s * sig_s * Gss - 2 * sig_s * tau * sd * gs + tau * tau * dim * us,
                sig_a * sig_a * Gaa - 2 * sig_a * tau * sd * ga + tau * tau * dim * ua,
            )

        x = minimise(x, eps_block)
        s, A, B, p, q, f, mu, tau = condition(x, eps_block)
        value = s * s
        if abs(value - prev) < tol:
            calm += 1
            if calm >= 2:
                break
        else:
            calm = 0
        prev = value
        w = _trade_off_weight(s, A, B, p, q)
        sig_s, sig_a = math.hypot(mu[0], mu[2]), math.hypot(mu[1], mu[2])
        Xs, Xa, t = sig_s * Gs, sig_a * Ga, tau * sd
        V = t * U
        Y, theta, L = V, 1.0, 2.0 * max(w, 1.0 - w)
        for _ in range(fista_iters):
            Ys = 0.5 * (Y + np.swapaxes(Y, 1, 2))
            grad = 2.0 * (w * (Ys - Xs) + (1.0 - w) * (Y - Ys - Xa))
            Vn = _ball_projection(Y - grad / L, t)
            theta_n = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * theta * theta))
            Y = Vn + ((theta - 1.0) / theta_n) * (Vn - V)
            V, theta = Vn, theta_n
        U = V / t
    if control_variate:
        value *= nuclear_statistical_dimension(rho) / _isotropic_condition(Gs + Ga, rho, dim, norm)
    if counts[0] > 0:
        # the certificates that use the symmetric family alone (closed form): the alternating minimisation
        # stalls on that face (mu_f -> 0 drives tau to 0 for a fixed V/tau), where it is the minimum
        symmetric = blocked_nuclear_threshold(rho, counts[0], 0.0, 0.0)
        value = value if value <= symmetric else symmetric
    return float(value)


def _isotropic_condition(X: np.ndarray, rho: float, dim: float, norm: float) -> float:
    """The isotropic one-family condition minimised on the instances ``X`` (``(k, m, m)``, the condition's
    complement block the singular-value clipping of ``X``; ``norm = k dim^2``)."""
    sv = np.linalg.svd(X, compute_uv=False).ravel()
    sd = math.sqrt(dim)

    def isotropic(tau: float) -> float:
        return 2 * rho - rho * rho + tau * tau * rho + float(np.sum((sv - tau * sd).clip(min=0.0) ** 2)) / norm

    return float(
        optimize.minimize_scalar(
            isotropic, bounds=(0.0, float(sv.max()) / sd), method="bounded", options={"xatol": 1e-10}
        ).fun
    )


def _trade_off_weight(s: float, A: float, B: float, p: float, q: float) -> float:
    """Weight ``w`` of the symmetric part in the complement block's weighted projection: the condition's
    sensitivity to ``||r_s||^2`` over the sum of its sensitivities to both parts. With an isotropic family
    the smallest scale ``s`` is a smooth function of ``(A^2, B^2)`` whose derivatives are proportional to
    ``(A - p s)_+ / A`` and ``(B - q s)_+ / B``."""
    gA = max(A - p * s, 0.0) / A if A > 0 else 0.0
    gB = max(B - q * s, 0.0) / B if B > 0 else 0.0
    return gA / (gA + gB) if gA + gB > 0 else 0.5
