"""Power-law exponents fitted to theory or simulation curves, with a confidence interval.

Used by :mod:`singlehead.analysis.scaling` (the regime-resolved scaling curves).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class ExponentFit:
    """Fit ``y ≈ C x^{-exponent}`` by least squares in log-log coordinates.

    Attributes
    ----------
    exponent : float
        ``-slope`` of ``log y`` against ``log x``.
    stderr : float
        Standard error of the slope from the residuals (OLS), or the bootstrap standard
        deviation.
    ci_low, ci_high : float
        Confidence interval of the exponent at ``level`` (Student t with ``n - 2`` degrees of
        freedom for OLS; percentile interval for the bootstrap over points).
    prefactor : float
        ``C``.
    n_points : int
    r2 : float
        Coefficient of determination in log-log coordinates.
    method : str
    level : float

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead.analysis import fit_exponent
    >>> x = np.geomspace(1e2, 1e4, 5)
    >>> fit = fit_exponent(x, 3.0 * x**-0.6)
    >>> round(fit.exponent, 6), round(fit.prefactor, 6), fit.ci_low <= fit.exponent <= fit.ci_high
    (0.6, 3.0, True)
    """

    exponent: float
    stderr: float
    ci_low: float
    ci_high: float
    prefactor: float
    n_points: int
    r2: float
    method: str
    level: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fit_exponent(
    x: Sequence[float],
    y: Sequence[float],
    *,
    method: str = "ols",
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> ExponentFit:
    """Exponent of a power law ``y ~ x^{-a}`` with a confidence interval.

    Parameters
    ----------
    x, y : sequences of positive floats
        At least 3 points.
    method : {"ols", "bootstrap"}
        Ordinary least squares on ``(log x, log y)`` with the textbook standard error
        ``sqrt(RSS/(n-2) / sum (log x - mean)^2)``; or a bootstrap over points (resampling pairs
        with an explicit ``seed``). Note that the residuals of a smooth theory curve are not
        independent noise: the interval measures the curvature over the fitted range.
    level : float
        Confidence level in (0, 1).

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead.analysis import fit_exponent
    >>> x = np.geomspace(1e2, 1e4, 8)
    >>> y = 2.0 * x**-0.5 * np.exp(np.random.default_rng(0).normal(0.0, 0.01, x.size))
    >>> fit = fit_exponent(x, y)
    >>> fit.ci_low < 0.5 < fit.ci_high
    True
    """
    if method not in ("ols", "bootstrap"):
        raise ValueError(f"method must be 'ols' or 'bootstrap' (got {method!r})")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1) (got {level!r})")
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.size < 3:
        raise ValueError("x and y must have the same length >= 3")
    if np.any(~np.isfinite(x)) or np.any(~np.isfinite(y)) or np.any(x <= 0) or np.any(y <= 0):
        raise ValueError("x and y must be finite and > 0 for a log-log fit")
    lx, ly = np.log(x), np.log(y)
    n = lx.size
    A = np.vstack([lx, np.ones(n)]).T
    (slope, icpt), *_ = np.linalg.lstsq(A, ly, rcond=None)
    res = ly - (slope * lx + icpt)
    sxx = float(np.sum((lx - lx.mean()) ** 2))
    ss_tot = float(np.sum((ly - ly.mean()) ** 2))
    r2 = 1.0 - float(np.sum(res * res)) / ss_tot if ss_tot > 0 else 1.0
    if method == "ols":
        se = math.sqrt(float(np.sum(res * res)) / max(n - 2, 1) / sxx) if n > 2 else math.nan
        tq = float(stats.t.ppf(0.5 + level / 2, max(n - 2, 1)))
        lo, hi = -slope - tq * se, -slope + tq * se
    else:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, n, size=(int(n_boot), n))
        bx, by = lx[idx], ly[idx]
        bxm = bx - bx.mean(axis=1, keepdims=True)
        den = np.sum(bxm * bxm, axis=1)
        ok = den > 0
        slopes = np.sum(bxm * (by - by.mean(axis=1, keepdims=True)), axis=1)[ok] / den[ok]
        se = float(np.std(-slopes, ddof=1))
        lo, hi = np.quantile(-slopes, [0.5 - level / 2, 0.5 + level / 2])
    return ExponentFit(
        exponent=float(-slope),
        stderr=float(se),
        ci_low=float(lo),
        ci_high=float(hi),
        prefactor=float(math.exp(icpt)),
        n_points=int(n),
        r2=float(r2),
        method=method,
        level=float(level),
    )
