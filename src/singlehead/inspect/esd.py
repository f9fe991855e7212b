"""Weightwatcher-style power-law tail exponent of an empirical spectral density (ESD).

The incumbent tool, weightwatcher (Martin & Mahoney, "Implicit self-regularization in deep
neural networks", JMLR 22 (2021); Martin, Peng & Mahoney, Nature Comm. 12 (2021)), reports
for a weight matrix ``W`` the exponent ``alpha`` of a power law ``p(x) ~ x^{-alpha}`` fitted
to the tail of the eigenvalues of ``W^T W`` (its ESD), with the method of Clauset, Shalizi &
Newman, "Power-law distributions in empirical data", SIAM Review 51 (2009):

* for a lower cut-off ``xmin`` the continuous maximum-likelihood estimate over the ``n`` tail
  eigenvalues ``x_i >= xmin`` is ``alpha = 1 + n / sum_i log(x_i / xmin)``;
* ``xmin`` is the candidate (each distinct eigenvalue, leaving at least ``min_tail`` points in
  the tail) that minimises the Kolmogorov–Smirnov distance ``D`` between the empirical tail
  CDF and ``1 - (x/xmin)^{1 - alpha}``.

This is our own implementation of that recipe (weightwatcher delegates to the ``powerlaw``
package); exact zeros (below ``zero_tol * max``) are dropped first, as weightwatcher does.
Martin & Mahoney read ``alpha`` in ``[2, 6]`` as "well trained", ``alpha < 2`` as very
heavy-tailed / over-fitted, ``alpha > 6`` as random-like.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["PowerLawTail", "esd_power_law"]


@dataclass(frozen=True)
class PowerLawTail:
    """Result of :func:`esd_power_law`: ``alpha``, ``xmin``, KS distance ``D``, tail size ``n_tail``, ``n``."""

    alpha: float
    xmin: float
    D: float
    n_tail: int
    n: int


def esd_power_law(eigenvalues: np.ndarray, *, min_tail: int = 5, zero_tol: float = 1e-10) -> PowerLawTail:
    """Clauset-style power-law fit of the tail of an ESD (weightwatcher's ``alpha``).

    Parameters
    ----------
    eigenvalues : array
        Eigenvalues of ``W^T W`` (squared singular values of ``W``); zeros are dropped.
    min_tail : int
        Smallest tail size allowed for a candidate ``xmin``.

    Returns
    -------
    PowerLawTail
        ``alpha = nan`` when fewer than ``min_tail`` positive eigenvalues remain.

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead.inspect import esd_power_law
    >>> tail = esd_power_law(1.0 + np.random.default_rng(0).pareto(2.0, 500))   # density ~ x^-3
    >>> round(tail.alpha, 1), tail.n
    (2.9, 500)
    """
    x = np.sort(np.asarray(eigenvalues, dtype=float).ravel())
    x = x[np.isfinite(x)]
    if x.size and x[-1] > 0:
        x = x[x > zero_tol * x[-1]]
    else:
        x = x[:0]
    n = x.size
    if n < max(2, min_tail):
        return PowerLawTail(math.nan, math.nan, math.nan, n, n)
    logx = np.log(x)
    # Candidates: distinct values with at least min_tail points at or above them.
    cand = np.unique(np.searchsorted(x, np.unique(x), side="left"))
    cand = cand[n - cand >= min_tail]
    suffix = np.concatenate([np.cumsum(logx[::-1])[::-1], [0.0]])  # sum_{j >= i} log x_j
    best = (math.inf, math.nan, math.nan, 0)
    for i in cand:
        m = n - i
        s = suffix[i] - m * logx[i]
        if s <= 0:
            continue
        a = 1.0 + m / s
        tail = x[i:]
        model = 1.0 - (tail / x[i]) ** (1.0 - a)
        emp_hi = np.arange(1, m + 1) / m
        emp_lo = np.arange(0, m) / m
        D = float(max(np.max(np.abs(emp_hi - model)), np.max(np.abs(emp_lo - model))))
        if D < best[0]:
            best = (D, a, float(x[i]), m)
    D, a, xmin, m = best
    return PowerLawTail(alpha=float(a), xmin=float(xmin), D=float(D), n_tail=int(m), n=int(n))
