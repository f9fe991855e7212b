"""The untied theory's learned singular-value law, sampled, and its fit to real query–key maps.

Law
---
An untied student ``M = W_Q W_K^T/sqrt(p d)`` trained with weight decay learns (the
prior side of the untied state evolution, docs: :doc:`untied_theory`)

    Mhat = eta * SVT_eps(Y),      Y = M0 + sigma_s Z_s + sigma_a Z_a,

where ``SVT_eps`` soft-thresholds the singular values of ``Y`` by ``eps`` and keeps at most the
top ``kappa d`` of them (rank cap ``kappa = p/d``), ``Z_s`` is GOE (off-diagonal entries of
variance ``1/d``, diagonal ``2/d``), ``Z_a`` antisymmetric (off-diagonal variance ``1/d``, zero
diagonal); ``sigma_s = sigma_a = sigma`` is Ginibre noise of entry variance ``2 sigma^2/d``.
Teachers (normalisations of docs: Theory, :ref:`theory-targets`): ``"untied"`` ``M0 = W0Q W0K^T/sqrt(p0 d)``
(``||M0||_F^2/d -> 1``)
and ``"tied"`` ``S0 = W0 W0^T/sqrt(p0 d)`` (``Tr S0^2/d -> 1 + kappa0``), ``W`` iid ``N(0, 1)``,
``p0 = kappa0 d``.

For ``sigma_s != sigma_a`` no closed form is known (elliptic noise is invariant under
``M -> O M O^T`` only, so the singular values of ``Y`` depend on ``M0``'s eigenvectors): the law
of the singular values of ``Y`` is *sampled*, ``n_samples`` matrices of size ``d_prior`` drawn
with common random numbers (the same Gaussian draws for every parameter value, so the law and
the fit objective are deterministic functions of the parameters). ``d_prior`` is
``min(d, 128)`` by default; the convergence study in ``benchmarks/bench_untied_inspect.py``
measures the KS distance between the laws at ``d_prior`` and ``2 d_prior``.

Fit
---
Data: the ``d`` singular values of one head's map in the normalisation of
:mod:`singlehead.inspect.heads` (``M_h/sqrt(d_model) = A^T B/sqrt(d_head d_model)``, which
equals the tied ``S_h`` for a tied head), zeros included. For each candidate
``(teacher, kappa0, sigma)`` the model quantile of the ``i``-th smallest value is
``eta (Q(u_i) - eps)`` above the cut ``c = max(eps, Q(1 - kappa))`` and 0 below, ``Q`` the
sampled quantile function; ``(eta, eps)`` are profiled exactly as in the tied fit (least-squares
quantile matching). ``(teacher, kappa0, sigma)`` minimise the Kolmogorov–Smirnov distance between
the non-zero data and the law of ``eta (s - eps)`` given ``s > c``: a grid (its laws shared by
all heads through ``UntiedLawCache``), then Nelder–Mead. The split ``sigma_a/sigma_s`` is
not identified by the singular values (see :func:`fit_untied`); it is fitted to the measured
asymmetry of the map. The overall scale of ``M0`` is the convention above (only
``sigma/||M0||`` is identifiable).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize

from singlehead.inspect.fit_search import best_eta_eps
from singlehead.inspect.untied_law import (
    TEACHERS,
    UntiedLawCache,
    check_cap,
    check_params,
    check_sizes,
    model_asymmetry,
    sample_singular_values,
    sample_untied_head,
    sample_untied_map,
)

__all__ = [
    "TEACHERS",
    "UntiedLawCache",
    "UntiedFit",
    "sample_singular_values",
    "sample_untied_head",
    "sample_untied_map",
    "fit_untied",
    "better_fit",
    "model_asymmetry",
    "KS_SD",
]

#: Standard deviation of ``sqrt(n) D`` under the Kolmogorov distribution (the resolution of a KS value).
KS_SD = 0.2603
_KAPPA0_GRID = (0.1, 0.3, 0.6, 1.0)
_SIGMA_GRID = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0)
_SIGMA_MAX = 8.0
_QUARTER = 0.25 * math.pi  # sigma_s = sigma_a
#: Matrices used for the model asymmetry (a Frobenius ratio: it concentrates, two suffice).
_ASYM_SAMPLES = 2
#: Largest gap between the model's and the measured asymmetry that counts as matched.
_ASYM_TOL = 0.05
#: Grid points (best KS first) tried for reaching the measured asymmetry.
_REACH_TRIES = 12


@dataclass
class UntiedFit:
    """Fitted untied law (module docstring) and its goodness of fit.

    Attributes
    ----------
    teacher, kappa0, eps, eta
        Fitted teacher family and rank ratio, threshold and scale (``eps``, ``eta`` on the data's scale).
    sigma : float
        Total noise ``sqrt(sigma_s^2 + sigma_a^2)``.
    sigma_ratio : float
        ``sigma_a/sigma_s`` (``inf`` for ``sigma_s = 0``); ``nan`` for the untied teacher, whose
        singular-value law depends on ``sigma`` only (see :func:`fit_untied`).
    ks, ks_critical, fits
        KS distance of the non-zero values, the ``1.36/sqrt(n)`` line, ``ks <= ks_critical``.
    w2
        Relative squared quantile distance at the fitted parameters.
    n_nonzero, d, d_prior, n_samples, rank_cap, evaluations
        Data size, sampling sizes, cap ``kappa`` (``None``: none), laws sampled for this fit.
    model_asymmetry : float
        ``E ||Mhat - Mhat^T||_F/||Mhat||_F`` of the fitted law (``nan`` without a measured asymmetry);
        it differs from the measured one when no split reaches it.

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead.inspect import fit_untied, sample_untied_map
    >>> M = sample_untied_map(96, 0.5, 0.3, 0.3, eps=0.2, seed=2)          # sigma = 0.42, ratio 1
    >>> asym = np.linalg.norm(M - M.T) / np.linalg.norm(M)
    >>> fit = fit_untied(np.linalg.svd(M, compute_uv=False), 96, asymmetry=asym, n_samples=4)
    >>> fit.teacher, abs(fit.sigma - 0.42) < 0.1, fit.fits
    ('untied', True, True)
    """

    teacher: str
    kappa0: float
    sigma: float
    sigma_ratio: float
    eps: float
    eta: float
    ks: float
    ks_critical: float
    fits: bool
    w2: float
    n_nonzero: int
    d: int
    d_prior: int
    n_samples: int
    rank_cap: float | None
    model_asymmetry: float = math.nan
    evaluations: int = 0

    @property
    def sigma_s(self) -> float:
        """Fitted ``sigma_s`` (``nan`` where the split is not identified)."""
        return (
            self.sigma / math.hypot(1.0, self.sigma_ratio)
            if math.isfinite(self.sigma_ratio)
            else (0.0 if self.sigma_ratio == math.inf else math.nan)
        )

    @property
    def sigma_a(self) -> float:
        """Fitted ``sigma_a`` (``nan`` where the split is not identified)."""
        if self.sigma_ratio == math.inf:
            return self.sigma
        return self.sigma_ratio * self.sigma_s

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out.update(sigma_s=self.sigma_s, sigma_a=self.sigma_a)
        return out


def better_fit(ks_untied: float, ks_tied: float, n: int) -> str:
    """``"untied"``, ``"tied"`` or ``"tie"``: the smaller KS, when it is smaller by more than ``KS_SD/sqrt(n)``.

    ``KS_SD/sqrt(n)`` is the standard deviation of a KS distance over ``n`` points; closer values
    are not told apart. ``"n/a"`` when either is not finite.

    Examples
    --------
    >>> from singlehead.inspect import better_fit
    >>> better_fit(0.05, 0.12, 32), better_fit(0.10, 0.12, 32)         # 0.2603/sqrt(32) = 0.046
    ('untied', 'tie')
    """
    if not (math.isfinite(ks_untied) and math.isfinite(ks_tied)) or n < 1:
        return "n/a"
    tol = KS_SD / math.sqrt(n)
    if ks_untied < ks_tied - tol:
        return "untied"
    if ks_tied < ks_untied - tol:
        return "tied"
    return "tie"


def _prepared(singular_values: np.ndarray, d: int, rank_cap: float | None, zero_tol: float) -> np.ndarray:
    if int(d) != d or d < 4:
        raise ValueError(f"d must be an integer >= 4 (got {d!r})")
    check_cap(rank_cap)
    s = np.asarray(singular_values, dtype=float).ravel()
    if s.size < 4 or s.size > d or not np.all(np.isfinite(s)) or np.any(s < 0):
        raise ValueError(f"singular_values must be between 4 and d={d} finite numbers >= 0 (got {s.size})")
    x = np.zeros(int(d))
    x[: s.size] = np.sort(s)[::-1]
    x = np.sort(x)
    top = float(x[-1])
    if top <= 0:
        raise ValueError("singular_values must not all be zero")
    return np.where(x <= zero_tol * top, 0.0, x)


class _Objective:
    """KS (and W2, eta, eps) of sorted data ``x`` against sampled laws, profiled over ``(eta, eps)``."""

    def __init__(self, x: np.ndarray, cap: float | None, cache: UntiedLawCache, d_prior: int, n_samples: int):
        self.x, self.cap, self.cache, self.dp, self.ns = x, cap, cache, d_prior, n_samples
        n = x.size
        self.u = (np.arange(n) + 0.5) / n
        self.sx2 = float(x @ x)
        self.nz = x[x > 0]

    def __call__(
        self, teacher: str, kappa0: float, sigma_s: float, sigma_a: float
    ) -> tuple[float, float, float, float]:
        v = self.cache.law(teacher, kappa0, sigma_s, sigma_a, self.dp, self.ns)
        lev = (np.arange(v.size) + 0.5) / v.size
        q = np.interp(self.u, lev, v)
        qcap = float(np.interp(1.0 - self.cap, lev, v)) if self.cap is not None else -math.inf
        w2, eta, eps = best_eta_eps(self.x, q, qcap, self.sx2)
        if not (math.isfinite(eta) and eta > 0):
            return 1.0, w2, math.nan, math.nan
        c = max(eps, qcap)
        fc = float(np.interp(c, v, lev, left=0.0, right=1.0))
        fm = np.clip((np.interp(self.nz / eta + eps, v, lev, left=0.0, right=1.0) - fc) / max(1.0 - fc, 1e-300), 0, 1)
        m = self.nz.size
        ks = float(max(np.max(np.abs(np.arange(1, m + 1) / m - fm)), np.max(np.abs(np.arange(m) / m - fm))))
        return ks, w2, eta, eps

    def at(self, teacher: str, kappa0: float, sigma: float, theta: float) -> float:
        """KS at ``(sigma_s, sigma_a) = sigma (cos theta, sin theta)``."""
        return self(teacher, kappa0, sigma * math.cos(theta), sigma * math.sin(theta))[0]


def fit_untied(
    singular_values: np.ndarray,
    d: int,
    *,
    asymmetry: float | None = None,
    rank_cap: float | None = None,
    teachers: tuple[str, ...] = TEACHERS,
    d_prior: int | None = None,
    n_samples: int = 16,
    seed: int = 0,
    cache: UntiedLawCache | None = None,
    refine: bool = True,
    zero_tol: float = 1e-3,
    maxfev: int = 20,
) -> UntiedFit:
    """Fit ``eta SVT_eps(M0 + sigma_s Z_s + sigma_a Z_a)`` to the singular values of one ``d x d`` map.

    Identifiability (measured, see ``benchmarks/bench_untied_inspect.py``): the singular values
    fix ``eta``, ``eps`` and the total noise ``sigma = sqrt(sigma_s^2 + sigma_a^2)`` relative to
    the teacher, but hardly the split: for the untied teacher the law depends on ``sigma`` only
    (``M0`` is bi-orthogonally invariant and elliptic noise has the quarter-circle singular
    values of variance ``sigma^2`` whatever the split); for the tied teacher the split moves the
    law by less than one head's sampling noise. So, per teacher, ``(kappa0, sigma)`` are fitted by
    KS at ``sigma_s = sigma_a``, then the ratio ``sigma_a/sigma_s`` by matching the model's
    asymmetry ``E ||Mhat - Mhat^T||_F/||Mhat||_F`` (sampled) to the measured ``asymmetry`` when one
    is given (otherwise it is ``nan``; the search then starts from the best grid point whose law can
    reach it); the teacher kept is the one with the smaller KS among those that reach the measured
    asymmetry (within 0.05). The KS reported is at the final parameters.

    Parameters
    ----------
    singular_values : array
        Singular values of the map in the theory's normalisation (``A^T B/sqrt(d_head d_model)``
        for a head), at most ``d`` of them; missing ones are zeros.
    d : int
        Matrix dimension (``d_model``).
    asymmetry : float, optional
        Measured ``||M - M^T||_F/||M||_F`` of the map, in ``[0, 2]``.
    rank_cap : float, optional
        ``kappa = d_head/d_model`` (architecture, not fitted).
    teachers : tuple of {"untied", "tied"}
        Teacher families searched (the smaller KS is kept; the choice is weakly identified).
    d_prior, n_samples, seed
        Sampling of the law: size (default ``min(d, 128)``), number of matrices, common random numbers.
    cache : UntiedLawCache, optional
        Share sampled laws between fits (its own seed then overrides ``seed``).
    refine : bool
        Nelder–Mead in ``(kappa0, sigma)`` after the grid (``maxfev`` laws per teacher at most).
    zero_tol : float
        Values ``<= zero_tol * max`` count as zero.

    Returns
    -------
    UntiedFit
        ``eps`` is on the scale of ``Y`` (the data are ``eta (s - eps)``).

    Examples
    --------
    >>> from singlehead.inspect import fit_untied
    >>> from singlehead.inspect.untied import sample_untied_head
    >>> s = sample_untied_head(128, 0.5, 0.3, 0.3, eps=0.2, seed=1)
    >>> fit = fit_untied(s, 128, n_samples=4, refine=False)
    >>> fit.fits, round(fit.eta, 1)
    (True, 1.0)
    """
    if not teachers:
        raise ValueError("teachers must name at least one of ('untied', 'tied')")
    for t in teachers:
        check_params(0.5, 0.0, 0.0, t)
    if asymmetry is not None and not 0 <= asymmetry <= 2:
        raise ValueError(f"asymmetry must be in [0, 2] (got {asymmetry!r})")
    x = _prepared(singular_values, d, rank_cap, zero_tol)
    dp = int(d_prior) if d_prior is not None else min(int(d), 128)
    check_sizes(dp, n_samples)
    cache = cache if cache is not None else UntiedLawCache(seed)
    n0 = cache.evaluations
    cap = None if rank_cap is None or rank_cap >= 1 else float(rank_cap)
    obj = _Objective(x, cap, cache, dp, int(n_samples))
    cands = [_fit_teacher(obj, t, asymmetry, refine, maxfev) for t in teachers]
    _, _, t, (k0, sg), th, model_asym = min(cands, key=lambda c: (c[0], c[1]))
    ratio = math.nan
    if asymmetry is not None and sg > 0:
        ratio = math.tan(th) if th < 0.5 * math.pi else math.inf
    ks, w2, eta, eps = obj(t, k0, sg * math.cos(th), sg * math.sin(th))
    m = int(obj.nz.size)
    crit = 1.36 / math.sqrt(m)
    return UntiedFit(
        teacher=t,
        kappa0=float(k0),
        sigma=float(sg),
        sigma_ratio=ratio,
        eps=float(eps),
        eta=float(eta),
        ks=ks,
        ks_critical=crit,
        fits=bool(ks <= crit),
        w2=float(w2),
        n_nonzero=m,
        d=int(d),
        d_prior=dp,
        n_samples=int(n_samples),
        rank_cap=cap,
        model_asymmetry=model_asym,
        evaluations=cache.evaluations - n0,
    )


def _fit_teacher(obj: _Objective, t: str, asymmetry: float | None, refine: bool, maxfev: int) -> tuple:
    """One teacher family: ``(off, ks, teacher, (kappa0, sigma), theta, model asymmetry)``.

    ``off``: the measured asymmetry is not reached (then the candidate ranks last).
    """
    scored = sorted(
        ((obj.at(t, k0, sg, _QUARTER), (k0, sg)) for k0 in _KAPPA0_GRID for sg in _SIGMA_GRID), key=lambda r: r[0]
    )
    z_grid = scored[0][1]
    if asymmetry is not None:
        # The best grid point whose law can reach the measured asymmetry with some split (the
        # KS at sigma_s = sigma_a ranks them: the split hardly moves the law).
        z_grid = next((z for _, z in scored[:_REACH_TRIES] if _reachable(obj, t, z, asymmetry)), z_grid)
    z = _refine(obj, t, z_grid, maxfev) if refine else z_grid
    if asymmetry is None:
        return False, obj.at(t, *z, _QUARTER), t, z, _QUARTER, math.nan

    def off(a: float) -> bool:
        return not abs(a - asymmetry) <= _ASYM_TOL

    th, masym = _match(obj, t, z, asymmetry)
    if off(masym) and z != z_grid:
        z = z_grid
        th, masym = _match(obj, t, z, asymmetry)
    if refine and t == "tied" and z[1] > 0:
        # The split changes the tied teacher's law a little: refit (kappa0, sigma) at the matched
        # split and match again, kept unless it loses the asymmetry. (The untied teacher's law
        # does not depend on the split: nothing to refit.)
        z2 = _refine(obj, t, z, maxfev, th)
        th2, masym2 = _match(obj, t, z2, asymmetry)
        if not off(masym2) or off(masym):
            z, th, masym = z2, th2, masym2
    return off(masym), obj.at(t, *z, th), t, z, th, masym


def _match(obj: _Objective, t: str, z: tuple[float, float], asymmetry: float) -> tuple[float, float]:
    eps = obj(t, *z, _QUARTER)[3]
    return _match_asymmetry(obj.cache, t, z[0], z[1], eps, obj.cap, obj.dp, min(obj.ns, _ASYM_SAMPLES), asymmetry)


def _reachable(obj: _Objective, t: str, z: tuple[float, float], asymmetry: float) -> bool:
    """Whether some split gives the law at ``z`` the measured asymmetry (end points, within the tolerance)."""
    eps = obj(t, *z, _QUARTER)[3]
    ends = [
        model_asymmetry(obj.cache, t, z[0], z[1], th, eps, obj.cap, obj.dp, min(obj.ns, _ASYM_SAMPLES))
        for th in ((0.0, 0.5 * math.pi) if z[1] > 0 else (0.0,))
    ]
    return min(ends) - _ASYM_TOL <= asymmetry <= max(ends) + _ASYM_TOL


def _refine(
    obj: _Objective, t: str, z0: tuple[float, float], maxfev: int, theta: float = _QUARTER
) -> tuple[float, float]:
    """Nelder–Mead on the KS in ``(kappa0, sigma)`` at the split ``theta``, clipped to the valid box."""

    def clip(z: np.ndarray) -> tuple[float, float]:
        return float(np.clip(z[0], 0.02, 1.0)), float(np.clip(z[1], 0.0, _SIGMA_MAX))

    start = np.array(z0, dtype=float)
    # Steps of about half a grid spacing: the KS is piecewise constant in kappa0 (p0 is an
    # integer) and rough on the scale of the law's sampling noise, so small steps would stall.
    simplex = np.vstack([start, start + [-0.1, 0.0], start + [0.0, 0.5 * z0[1] + 0.05]])
    r = minimize(
        lambda z: obj.at(t, *clip(z), theta),
        start,
        method="Nelder-Mead",
        options={"initial_simplex": simplex, "maxfev": int(maxfev), "xatol": 1e-3, "fatol": 1e-4},
    )
    z = clip(r.x)
    return z if obj.at(t, *z, theta) <= obj.at(t, *z0, theta) else tuple(z0)


def _match_asymmetry(
    cache: UntiedLawCache,
    t: str,
    k0: float,
    sg: float,
    eps: float,
    cap: float | None,
    d: int,
    n_samples: int,
    target: float,
    iters: int = 10,
) -> tuple[float, float]:
    """``theta`` in ``[0, pi/2]`` whose model asymmetry equals ``target``, and that asymmetry.

    Bisection (the asymmetry grows with the antisymmetric share); an end point when ``target``
    is out of the model's range (then the returned asymmetry differs from ``target``).
    """

    def f(th: float) -> float:
        return model_asymmetry(cache, t, k0, sg, th, eps, cap, d, n_samples)

    lo, hi = 0.0, 0.5 * math.pi
    f_lo = f(lo)
    if sg == 0 or not f_lo < target:
        return lo, f_lo
    f_hi = f(hi)
    if not f_hi > target:
        return hi, f_hi
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi), float(target)
