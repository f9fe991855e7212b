"""The untied theory's learned singular-value law, sampled, and its fit to real query–key maps.

Law
---
An untied student ``M = W_Q W_K^T/sqrt(p d)`` trained with weight decay learns (issue 27,
prior side of the untied state evolution)

    Mhat = eta * SVT_eps(Y),      Y = M0 + sigma_s Z_s + sigma_a Z_a,

where ``SVT_eps`` soft-thresholds the singular values of ``Y`` by ``eps`` and keeps at most the
top ``kappa d`` of them (rank cap ``kappa = p/d``), ``Z_s`` is GOE (off-diagonal entries of
variance ``1/d``, diagonal ``2/d``), ``Z_a`` antisymmetric (off-diagonal variance ``1/d``, zero
diagonal); ``sigma_s = sigma_a = sigma`` is Ginibre noise of entry variance ``2 sigma^2/d``.
Teachers (THEORY §1 normalisation): ``"untied"`` ``M0 = W0Q W0K^T/sqrt(p0 d)`` (``||M0||_F^2/d -> 1``)
and ``"tied"`` ``S0 = W0 W0^T/sqrt(p0 d)`` (``Tr S0^2/d -> 1 + kappa0``), ``W`` iid ``N(0, 1)``,
``p0 = kappa0 d``.

For ``sigma_s != sigma_a`` no closed form is known (elliptic noise is invariant under
``M -> O M O^T`` only, so the singular values of ``Y`` depend on ``M0``'s eigenvectors): the law
of the singular values of ``Y`` is *sampled*, ``n_samples`` matrices of size ``d_prior`` drawn
with common random numbers (the same Gaussian draws for every parameter value, so the law and
the fit objective are deterministic functions of the parameters). ``d_prior`` is
``min(d, 256)`` by default; the convergence study in ``benchmarks/bench_untied_inspect.py``
measures the KS distance between the laws at ``d_prior`` and ``2 d_prior``.

Fit
---
Data: the ``d`` singular values of one head's map in the normalisation of
:mod:`singlehead.inspect.heads` (``M_h/sqrt(d_model) = A^T B/sqrt(d_head d_model)``, which
equals the tied ``S_h`` for a tied head), zeros included. For each candidate
``(teacher, kappa0, sigma_s, sigma_a)`` the model quantile of the ``i``-th smallest value is
``eta (Q(u_i) - eps)`` above the cut ``c = max(eps, Q(1 - kappa))`` and 0 below, ``Q`` the
sampled quantile function; ``(eta, eps)`` are profiled exactly as in the tied fit (least-squares
quantile matching). The shape parameters minimise the Kolmogorov–Smirnov distance between the
non-zero data and the law of ``eta (s - eps)`` given ``s > c``: a grid (shared by all heads
through :class:`UntiedLawCache`), then Nelder–Mead in ``(kappa0, sigma_s, sigma_a)``.
The overall scale of ``M0`` is the convention above (only ``sigma/||M0||`` is identifiable).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize

from .fit_search import _inner

__all__ = ["TEACHERS", "UntiedLawCache", "UntiedFit", "sample_singular_values", "sample_untied_head",
           "fit_untied", "better_fit", "KS_SD"]

TEACHERS = ("untied", "tied")
#: Standard deviation of ``sqrt(n) D`` under the Kolmogorov distribution (the resolution of a KS value).
KS_SD = 0.2603
_KAPPA0_GRID = (0.1, 0.3, 0.6, 1.0)
_SIGMA_GRID = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0)
#: Angles ``theta`` of ``(sigma_s, sigma_a) = sigma (cos theta, sin theta)``: ratios 0, 0.41, 1, 2.4, inf.
_THETA_GRID = tuple(np.linspace(0.0, 0.5 * math.pi, 5))
_SIGMA_MAX = 8.0


def _check_params(kappa0: float, sigma_s: float, sigma_a: float, teacher: str) -> None:
    if teacher not in TEACHERS:
        raise ValueError(f"teacher must be one of {TEACHERS} (got {teacher!r})")
    if not 0 < kappa0 <= 1:
        raise ValueError(f"kappa0 must be in (0, 1] (got {kappa0!r})")
    for name, s in (("sigma_s", sigma_s), ("sigma_a", sigma_a)):
        if not (math.isfinite(s) and s >= 0):
            raise ValueError(f"{name} must be a finite number >= 0 (got {s!r})")


def _check_sizes(d_prior: int, n_samples: int) -> None:
    if int(d_prior) != d_prior or d_prior < 4:
        raise ValueError(f"d_prior must be an integer >= 4 (got {d_prior!r})")
    if int(n_samples) != n_samples or n_samples < 1:
        raise ValueError(f"n_samples must be an integer >= 1 (got {n_samples!r})")


class UntiedLawCache:
    """Common random numbers and sampled laws, shared between fits (all heads of a model).

    The ``k``-th sample of size ``d`` uses ``numpy.random.default_rng([seed, d, k])`` for four
    ``d x d`` standard Gaussian matrices: the teacher's factors (their first ``p0`` columns) and
    the raw noises ``H, K`` with ``Z_s = (H + H^T)/sqrt(2d)``, ``Z_a = (K - K^T)/sqrt(2d)``.
    """

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)
        self._bank: dict[tuple[int, int], tuple[np.ndarray, ...]] = {}
        self._teach: dict[tuple, np.ndarray] = {}
        self._laws: dict[tuple, np.ndarray] = {}
        self.evaluations = 0

    def _draws(self, d: int, k: int) -> tuple[np.ndarray, ...]:
        if (d, k) not in self._bank:
            rng = np.random.default_rng([self.seed, d, k])
            g1, g2, h, kk = (rng.standard_normal((d, d)) for _ in range(4))
            r = math.sqrt(2.0 * d)
            self._bank[(d, k)] = (g1, g2, (h + h.T) / r, (kk - kk.T) / r)
        return self._bank[(d, k)]

    def teacher(self, teacher: str, kappa0: float, d: int, k: int) -> np.ndarray:
        """The ``k``-th sampled teacher ``M0`` (``p0 = max(1, round(kappa0 d))``)."""
        p0 = max(1, int(round(kappa0 * d)))
        key = (teacher, p0, d, k)
        if key not in self._teach:
            g1, g2 = self._draws(d, k)[:2]
            a = g1[:, :p0]
            b = a if teacher == "tied" else g2[:, :p0]
            self._teach[key] = a @ b.T / math.sqrt(p0 * d)
        return self._teach[key]

    def law(self, teacher: str, kappa0: float, sigma_s: float, sigma_a: float, d: int, n_samples: int
            ) -> np.ndarray:
        """Sorted pooled singular values of ``Y`` over the ``n_samples`` draws (``n_samples d`` values)."""
        p0 = max(1, int(round(kappa0 * d)))
        key = (teacher, p0, round(float(sigma_s), 12), round(float(sigma_a), 12), d, n_samples)
        if key not in self._laws:
            out = []
            for k in range(n_samples):
                zs, za = self._draws(d, k)[2:]
                y = self.teacher(teacher, kappa0, d, k) + sigma_s * zs + sigma_a * za
                out.append(np.linalg.svd(y, compute_uv=False))
            self._laws[key] = np.sort(np.concatenate(out))
            self.evaluations += 1
        return self._laws[key]


def sample_singular_values(kappa0: float, sigma_s: float, sigma_a: float, *, teacher: str = "untied",
                           d_prior: int = 256, n_samples: int = 8, seed: int = 0,
                           cache: UntiedLawCache | None = None) -> np.ndarray:
    """Sorted singular values of ``Y = M0 + sigma_s Z_s + sigma_a Z_a``, pooled over ``n_samples`` draws.

    Parameters
    ----------
    kappa0 : float
        Teacher rank ratio ``p0/d`` in ``(0, 1]``.
    sigma_s, sigma_a : float
        Symmetric (GOE) and antisymmetric noise levels, ``>= 0`` (module docstring).
    teacher : {"untied", "tied"}
        ``M0 = W0Q W0K^T/sqrt(p0 d)`` or ``S0 = W0 W0^T/sqrt(p0 d)``.
    d_prior, n_samples, seed : int
        Matrix size, number of matrices, seed of the common random numbers.

    Examples
    --------
    >>> from singlehead.inspect.untied import sample_singular_values
    >>> s = sample_singular_values(0.5, 0.0, 0.0, d_prior=200, n_samples=2)
    >>> s.size, round(float((s**2).mean()), 1)          # ||M0||_F^2/d -> 1
    (400, 1.0)
    """
    _check_params(kappa0, sigma_s, sigma_a, teacher)
    _check_sizes(d_prior, n_samples)
    cache = cache if cache is not None else UntiedLawCache(seed)
    return cache.law(teacher, kappa0, sigma_s, sigma_a, int(d_prior), int(n_samples)).copy()


def sample_untied_head(d: int, kappa0: float, sigma_s: float, sigma_a: float, *, eps: float = 0.0,
                       eta: float = 1.0, rank_cap: float | None = None, teacher: str = "untied",
                       seed: int = 0) -> np.ndarray:
    """One draw of the law: the ``d`` singular values of ``eta SVT_eps(Y)`` (rank cap), descending.

    Independent of the common random numbers of :class:`UntiedLawCache` (its own ``seed``).
    """
    _check_params(kappa0, sigma_s, sigma_a, teacher)
    if not (eps >= 0 and eta > 0):
        raise ValueError(f"eps must be >= 0 and eta > 0 (got eps={eps!r}, eta={eta!r})")
    _check_cap(rank_cap)
    cache = UntiedLawCache(seed + 7919)
    s = cache.law(teacher, kappa0, sigma_s, sigma_a, int(d), 1)[::-1]
    s = eta * np.maximum(s - eps, 0.0)
    if rank_cap is not None:
        s[int(round(rank_cap * d)):] = 0.0
    return s


def _check_cap(rank_cap: float | None) -> None:
    if rank_cap is not None and not 0 < rank_cap <= 1:
        raise ValueError(f"rank_cap must be in (0, 1] (got {rank_cap!r})")


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
    evaluations: int = 0

    @property
    def sigma_s(self) -> float:
        """Fitted ``sigma_s`` (``nan`` where the split is not identified)."""
        return self.sigma / math.hypot(1.0, self.sigma_ratio) if math.isfinite(self.sigma_ratio) else (
            0.0 if self.sigma_ratio == math.inf else math.nan)

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
    _check_cap(rank_cap)
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

    def __call__(self, teacher: str, kappa0: float, sigma_s: float, sigma_a: float) -> tuple[float, float, float, float]:
        v = self.cache.law(teacher, kappa0, sigma_s, sigma_a, self.dp, self.ns)
        lev = (np.arange(v.size) + 0.5) / v.size
        q = np.interp(self.u, lev, v)
        qcap = float(np.interp(1.0 - self.cap, lev, v)) if self.cap is not None else -math.inf
        w2, eta, eps = _inner(self.x, q, qcap, self.sx2)
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


def fit_untied(singular_values: np.ndarray, d: int, *, rank_cap: float | None = None,
               teachers: tuple[str, ...] = TEACHERS, d_prior: int | None = None, n_samples: int = 8,
               seed: int = 0, cache: UntiedLawCache | None = None, refine: bool = True,
               zero_tol: float = 1e-3, maxfev: int = 40) -> UntiedFit:
    """Fit ``eta SVT_eps(M0 + sigma_s Z_s + sigma_a Z_a)`` to the singular values of one ``d x d`` map.

    Parameters
    ----------
    singular_values : array
        Singular values of the map in the theory's normalisation (``A^T B/sqrt(d_head d_model)``
        for a head), at most ``d`` of them; missing ones are zeros.
    d : int
        Matrix dimension (``d_model``).
    rank_cap : float, optional
        ``kappa = d_head/d_model`` (architecture, not fitted).
    teachers : tuple of {"untied", "tied"}
        Teacher families searched (the better one is kept).
    d_prior, n_samples, seed
        Sampling of the law: size (default ``min(d, 256)``), number of matrices, common random numbers.
    cache : UntiedLawCache, optional
        Share sampled laws between fits (its own seed then overrides ``seed``).
    refine : bool
        Nelder–Mead in ``(kappa0, sigma_s, sigma_a)`` after the grid (``maxfev`` laws at most).
    zero_tol : float
        Values ``<= zero_tol * max`` count as zero.

    Examples
    --------
    >>> from singlehead.inspect.untied import fit_untied, sample_untied_head
    >>> s = sample_untied_head(128, 0.5, 0.3, 0.3, eps=0.2, seed=1)
    >>> fit = fit_untied(s, 128, n_samples=4, refine=False)
    >>> fit.fits
    True
    """
    if not teachers:
        raise ValueError("teachers must name at least one of ('untied', 'tied')")
    for t in teachers:
        _check_params(0.5, 0.0, 0.0, t)
    x = _prepared(singular_values, d, rank_cap, zero_tol)
    dp = int(d_prior) if d_prior is not None else min(int(d), 256)
    _check_sizes(dp, n_samples)
    cache = cache if cache is not None else UntiedLawCache(seed)
    n0 = cache.evaluations
    cap = None if rank_cap is None or rank_cap >= 1 else float(rank_cap)
    obj = _Objective(x, cap, cache, dp, int(n_samples))
    best = None
    for t in teachers:
        # Untied teacher: bi-orthogonally invariant, so the singular values of Y depend on the
        # noise only through its own singular-value law, a quarter circle of variance
        # sigma_s^2 + sigma_a^2 whatever the split: fit sigma alone (theta fixed at pi/4).
        thetas = _THETA_GRID if t == "tied" else (0.25 * math.pi,)
        z = min(((obj.at(t, k0, sg, th), (k0, sg, th)) for k0 in _KAPPA0_GRID for sg in _SIGMA_GRID
                 for th in (thetas if sg > 0 else thetas[:1])), key=lambda r: r[0])[1]
        if refine:
            z = _refine(obj, t, z, maxfev, fit_theta=t == "tied")
        ks = obj.at(t, *z)
        if best is None or ks < best[0]:
            best = (ks, t, z)
    _, t, (k0, sg, th) = best
    ks, w2, eta, eps = obj(t, k0, sg * math.cos(th), sg * math.sin(th))
    ratio = (math.tan(th) if th < 0.5 * math.pi - 1e-12 else math.inf) if t == "tied" else math.nan
    m = int(obj.nz.size)
    crit = 1.36 / math.sqrt(m)
    return UntiedFit(teacher=t, kappa0=float(k0), sigma=float(sg), sigma_ratio=ratio, eps=float(eps),
                     eta=float(eta), ks=ks, ks_critical=crit, fits=bool(ks <= crit), w2=float(w2), n_nonzero=m,
                     d=int(d), d_prior=dp, n_samples=int(n_samples), rank_cap=cap,
                     evaluations=cache.evaluations - n0)


def _refine(obj: _Objective, t: str, z0: tuple[float, float, float], maxfev: int, fit_theta: bool
            ) -> tuple[float, float, float]:
    """Nelder–Mead on the KS in ``(kappa0, sigma[, theta])`` (clipped to the valid box) from a grid point."""
    th0 = z0[2]

    def clip(z: np.ndarray) -> tuple[float, float, float]:
        th = float(np.clip(z[2], 0.0, 0.5 * math.pi)) if fit_theta else th0
        return float(np.clip(z[0], 0.02, 1.0)), float(np.clip(z[1], 0.0, _SIGMA_MAX)), th

    start = np.array(z0[: 3 if fit_theta else 2])
    # Steps of about half a grid spacing: the KS is piecewise constant in kappa0 (p0 is an
    # integer) and rough on the scale of the law's sampling noise, so small steps would stall.
    steps = np.diag([-0.1, 0.5 * z0[1] + 0.05, 0.2][: start.size])
    simplex = np.vstack([start, start + steps])
    r = minimize(lambda z: obj.at(t, *clip(np.append(z, th0))), start, method="Nelder-Mead",
                 options={"initial_simplex": simplex, "maxfev": int(maxfev), "xatol": 1e-3, "fatol": 1e-4})
    z = clip(np.append(r.x, th0))
    return z if obj.at(t, *z) <= obj.at(t, *z0) else tuple(z0)
