"""The search behind :func:`singlehead.inspect.fit.fit_spectrum`: the relative W2 loss of pooled
eigenvalues against the law's quantiles, minimised over ``delta`` (and the prior's shape)."""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize, minimize_scalar

from singlehead.inspect.laws import table_quantile

#: Bounds of the fitted noise variance ``delta`` (the search and the fit's reports share them).
DELTA_RANGE = (0.01, 4.0)
_SHAPE_RANGE = {"mp": (0.02, 4.0), "power_law": (0.55, 3.0)}
_SHAPE_GRID = {"mp": (0.05, 0.15, 0.3, 0.5, 0.75, 1.0, 1.5, 2.5), "power_law": (0.6, 0.8, 1.0, 1.3, 1.7, 2.2)}


def best_eta_eps(x: np.ndarray, q: np.ndarray, qcap: float, sx2: float) -> tuple[float, float, float]:
    """Best ``(loss, eta, eps)`` for sorted data ``x`` against ``Y``-quantiles ``q`` (cap cut ``qcap``)."""

    def loss_at(eps):
        c = max(eps, qcap)
        a = np.where(q > c, q - eps, 0.0)
        aa = float(a @ a)
        if aa <= 0:
            return sx2, 0.0
        ax = float(a @ x)
        if ax <= 0:
            return sx2, 0.0
        return sx2 - ax * ax / aa, ax / aa

    hi = float(q[-1])
    if hi <= 0:
        return 1.0, math.nan, math.nan
    grid = np.linspace(0.0, hi, 64)
    losses = [loss_at(e)[0] for e in grid]
    j = int(np.argmin(losses))
    a, b = grid[max(j - 1, 0)], grid[min(j + 1, grid.size - 1)]
    if b > a:
        r = minimize_scalar(lambda e: loss_at(e)[0], bounds=(a, b), method="bounded", options={"xatol": 1e-7 * hi})
        eps = float(r.x) if r.fun <= losses[j] else float(grid[j])
    else:
        eps = float(grid[j])
    L, eta = loss_at(eps)
    return L / sx2, eta, eps


def w2_objective(x, u, prior, shape, delta, d, cap, cache, sx2, bulk_only=True):
    """Relative W2 loss, ``eta``, ``eps``: data ``x`` against the bulk (or the whole law)."""
    tab = cache.table(prior, shape, delta, d)
    q = table_quantile(tab, u * tab.bulk_mass if bulk_only else u)
    qcap = float(table_quantile(tab, np.array([1.0 - cap]))[0]) if cap is not None and cap < 1 else -math.inf
    return best_eta_eps(x, q, qcap, sx2)


def search_fit(x, u, prior, shape0, d, cap, cache, sx2, fit_shape, start=None, bulk_only=True, delta_grid=None):
    """Minimise the relative W2 loss over ``delta`` (and the shape when ``fit_shape``).

    With ``delta_grid`` (shape fixed) the loss is evaluated on the grid (cached laws, shared
    between fits) and refined by one parabolic step in ``log delta``.
    """
    lo_d, hi_d = DELTA_RANGE
    lo_s, hi_s = _SHAPE_RANGE[prior]

    def f(z):
        delta = float(np.exp(np.clip(z[0], math.log(lo_d), math.log(hi_d))))
        shape = float(np.clip(z[1], lo_s, hi_s)) if fit_shape else shape0
        return w2_objective(x, u, prior, shape, delta, d, cap, cache, sx2, bulk_only)[0]

    if delta_grid is not None and not fit_shape:
        t = np.unique(np.log(np.clip(np.asarray(delta_grid, dtype=float), lo_d, hi_d)))
        vals = np.array([f(np.array([ti, shape0])) for ti in t])
        j = int(np.argmin(vals))
        best_t, best_v = t[j], vals[j]
        if 0 < j < t.size - 1:
            x0, x1, x2 = t[j - 1 : j + 2]
            y0, y1, y2 = vals[j - 1 : j + 2]
            den = (x0 - x1) * (x0 - x2) * (x1 - x2)
            a = (x2 * (y1 - y0) + x1 * (y0 - y2) + x0 * (y2 - y1)) / den
            b = (x2 * x2 * (y0 - y1) + x1 * x1 * (y2 - y0) + x0 * x0 * (y1 - y2)) / den
            if a > 0:
                tv = float(np.clip(-b / (2 * a), x0, x2))
                fv = f(np.array([tv, shape0]))
                if fv < best_v:
                    best_t = tv
        return float(np.exp(best_t)), shape0

    if start is None:
        shapes = _SHAPE_GRID[prior] if fit_shape else (shape0,)
        best = (math.inf, None)
        for sh in shapes:
            for dl in np.geomspace(0.03, 2.0, 10):
                val = f(np.array([math.log(dl), sh]))
                if val < best[0]:
                    best = (val, np.array([math.log(dl), sh]))
        start = best[1]
    if fit_shape:
        simplex = np.array([start, start + [0.15, 0.0], start + [0.0, 0.08 * (hi_s - lo_s)]])
        r = minimize(
            f,
            start,
            method="Nelder-Mead",
            options={"initial_simplex": simplex, "xatol": 2e-3, "fatol": 1e-9, "maxfev": 120},
        )
        z = r.x
    else:
        r = minimize_scalar(
            lambda t: f(np.array([t, shape0])),
            bounds=(start[0] - 0.5, start[0] + 0.5),
            method="bounded",
            options={"xatol": 2e-3},
        )
        z = np.array([r.x, shape0])
    delta = float(np.exp(np.clip(z[0], math.log(lo_d), math.log(hi_d))))
    shape = float(np.clip(z[1], lo_s, hi_s)) if fit_shape else shape0
    return delta, shape
