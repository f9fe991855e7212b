"""Target laws, quantile tables of ``mu0 ⊞ SC(delta^2)`` and the BBP map, for :mod:`.fit`.

Conventions (docs: Theory, :ref:`theory-targets`, :ref:`theory-spectrum`, :ref:`theory-free-probability`): ``mu0`` is
the target's spectral law, in the
theory's normalisation — Marchenko–Pastur ``sqrt(kappa0) MP(1/kappa0)`` (mean ``sqrt(kappa0)``)
or the power law ``s_i = sqrt(d) i^{-gamma}`` (the ``"sqrt_d"`` normalisation of
arXiv 2509.24914); ``SC(v)`` the semicircle of variance ``v = delta^2``; Stieltjes transform
``g(z) = int mu(dy)/(z - y)``. Outliers (BBP; Capitaine, Donati-Martin & Féral 2009; Belinschi,
Bercovici, Capitaine & Février 2017): a spike ``s`` with ``1 + v g_bulk'(s) > 0`` creates an
eigenvalue of ``Y = S0 + delta Z`` at ``s + v g_bulk(s)`` with squared overlap
``1 + v g_bulk'(s)`` (``s + v/s`` and ``1 - v/s^2`` for a null bulk).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from singlehead.numerics.spectra import DiscreteLaw, MarchenkoPastur, free_convolve_semicircle

__all__ = [
    "PRIORS",
    "power_law_values",
    "prior_law",
    "outlier_margin",
    "LawCache",
    "table_quantile",
    "table_cdf",
    "bbp_position",
    "bbp_inverse",
]

PRIORS = ("mp", "power_law")


def power_law_values(gamma: float, d: int) -> np.ndarray:
    """``s_i = sqrt(d) i^{-gamma}``, ``i = 1..d`` (descending; normalisation ``"sqrt_d"`` of docs: Theory,
    :ref:`theory-targets`)."""
    return math.sqrt(d) * np.arange(1, d + 1, dtype=float) ** (-float(gamma))


def prior_law(prior: str, shape: float, d: int | None = None, n_spikes: int = 0):
    """Bulk law of ``mu0`` (spikes removed): MP(``kappa0 = shape``) or the power law's ``s_{k+1..d}``."""
    if prior == "mp":
        return MarchenkoPastur(float(shape))
    if prior == "power_law":
        if d is None:
            raise ValueError("the power-law prior needs the matrix dimension d")
        s = power_law_values(shape, d)[int(n_spikes) :]
        return DiscreteLaw(_compress(s))
    raise ValueError(f"prior must be one of {PRIORS} (got {prior!r})")


def _compress(s: np.ndarray, keep: int = 40, groups: int = 40) -> np.ndarray:
    """Merge the small atoms of a long descending spectrum into ``groups`` equal-count groups.

    The top ``keep`` values stay as they are; below, each group of consecutive values is
    replaced by copies of its mean (first moment kept), so the free convolution (cost ~ number of
    distinct atoms) stays cheap. Used only for the power-law prior with ``d > keep + groups``.
    """
    if s.size <= keep + groups:
        return s
    head, tail = s[:keep], s[keep:]
    parts = np.array_split(tail, groups)
    return np.concatenate([head] + [np.full(p.size, p.mean()) for p in parts])


def outlier_margin(eta: float, sigma: float, d: int) -> float:
    """Resolution margin above the bulk edge: ``4 eta sigma d^{-2/3}``.

    ``sigma`` is the standard deviation of the bulk of ``mu0 ⊞ SC(delta^2)``: the largest
    eigenvalue of a ``d x d`` matrix fluctuates around the edge on the Tracy–Widom scale
    ``~ sigma d^{-2/3}`` (``sigma = delta`` for a pure semicircle); four of those separate
    outliers from edge fluctuations. :func:`~singlehead.inspect.fit_spectrum` counts an eigenvalue as an
    outlier when it lies more than this margin above the fitted law's bulk edge.

    Examples
    --------
    >>> from singlehead.inspect import outlier_margin
    >>> round(outlier_margin(1.0, 0.3, 1000), 6)  # 4 * 0.3 / 1000^(2/3)
    0.012
    """
    return 4.0 * eta * sigma * float(d) ** (-2.0 / 3.0)


@dataclass(frozen=True)
class _Table:
    """Quantile table of ``mu0 ⊞ SC(delta^2)``: CDF ``cum`` at increasing points ``x``."""

    cum: np.ndarray
    x: np.ndarray
    law: Any
    edge: float  # top of the highest component of mass >= 2/d (the bulk edge)
    bulk_mass: float  # mass of the law up to the bulk edge (1 - the isolated components)
    sigma: float  # standard deviation of the law below the bulk edge (sets the edge resolution)
    isolated: tuple[float, ...]  # positions of the lighter components above it (model outliers)


class LawCache:
    """Quantile tables of ``mu0 ⊞ SC(delta^2)``, cached by ``(prior, shape, d, delta)``.

    ``prior`` is one of ``"mp"`` (shape ``kappa0``; ``d`` is ignored) and ``"power_law"`` (shape ``gamma``, the
    ``d`` eigenvalues of the power-law target). Each table holds the law's CDF ``cum`` at increasing points ``x``,
    its bulk ``edge`` (the top of the highest component of mass at least ``2/d``), the mass ``bulk_mass`` below it,
    the bulk's standard deviation ``sigma`` (the edge resolution of :func:`outlier_margin`) and the positions
    ``isolated`` of lighter components above it. Pass one cache to several
    :func:`~singlehead.inspect.fit_spectrum` calls (``cache=``) to share the tables; ``evaluations`` counts the
    tables computed.

    Examples
    --------
    >>> from singlehead.inspect import LawCache
    >>> cache = LawCache()
    >>> table = cache.table("mp", 0.5, 0.3, None)
    >>> table.edge > table.sigma > 0, cache.evaluations
    (True, 1)
    >>> cache.table("mp", 0.5, 0.3, None) is table, cache.evaluations
    (True, 1)
    """

    def __init__(self) -> None:
        self._tab: dict[tuple, _Table] = {}
        self.evaluations = 0

    def table(self, prior: str, shape: float, delta: float, d: int | None) -> _Table:
        """The quantile table of the full law (spikes included) at these parameters (class docstring)."""
        key = (prior, round(float(shape), 12), d if prior == "power_law" else None, round(float(delta), 12))
        if key not in self._tab:
            law = prior_law(prior, shape, d)
            cl = free_convolve_semicircle(law, float(delta) ** 2)
            r = cl.rule()
            pos, mass = cl.atoms()
            x = np.concatenate([r.x, pos])
            w = np.concatenate([r.w, mass])
            o = np.argsort(x, kind="stable")
            x, w = x[o], w[o]
            total = float(np.sum(w))
            cum = (np.cumsum(w) - 0.5 * w) / total
            comps = [(a, b) for a, b in cl.edges()] + [(p, p) for p in pos]
            comps.sort()
            lo, hi = comps[0][0], comps[-1][1]
            edge, isolated = hi, []
            if d is not None:
                for a, b in comps[::-1]:
                    m = float(np.sum(w[(x >= a) & (x <= b)])) / total
                    if m >= 2.0 / d:
                        edge = b
                        break
                    isolated.append(0.5 * (a + b))
            below = x < edge
            bulk_mass = float(np.sum(w[x <= edge])) / total if edge < hi else 1.0
            wb, xb = w[x <= edge], x[x <= edge]
            mb = float(np.sum(wb * xb) / np.sum(wb))
            sigma = math.sqrt(max(float(np.sum(wb * (xb - mb) ** 2) / np.sum(wb)), 0.0))
            xx = np.concatenate([[lo], x[below], [edge], x[~below], [hi]])
            cc = np.concatenate([[0.0], cum[below], [bulk_mass], cum[~below], [1.0]])
            xx, idx = np.unique(xx, return_index=True)
            cc = np.maximum.accumulate(cc[idx])
            self._tab[key] = _Table(cc, xx, law, float(edge), bulk_mass, sigma, tuple(isolated[::-1]))
            self.evaluations += 1
        return self._tab[key]


def table_quantile(tab: _Table, u: np.ndarray) -> np.ndarray:
    """Quantile function of the tabulated law at levels ``u`` (linear interpolation)."""
    return np.interp(u, tab.cum, tab.x)


def table_cdf(tab: _Table, y: np.ndarray) -> np.ndarray:
    """Distribution function of the tabulated law at ``y`` (linear interpolation)."""
    return np.interp(y, tab.x, tab.cum, left=0.0, right=1.0)


def _stieltjes(law, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(s, dtype=float)
    g = np.real(law.stieltjes(s + 0j))
    dg = np.real(law.stieltjes_derivative(s + 0j))
    return g, dg


def _law_top(law) -> float:
    if isinstance(law, MarchenkoPastur):
        return law.ac_edges()[1]
    return float(np.max(law.eigenvalues))


def _critical_spike(law, v: float) -> float:
    """Smallest ``s`` above the support with ``1 + v g'(s) >= 0`` (BBP transition point)."""
    top = _law_top(law)
    lo, hi = top * (1 + 1e-12) + 1e-12, top + 10.0 * math.sqrt(v) + 1.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if 1.0 + v * _stieltjes(law, mid)[1] >= 0:
            hi = mid
        else:
            lo = mid
    return hi


def bbp_position(law, spikes: np.ndarray, v: float) -> tuple[np.ndarray, np.ndarray]:
    """Outlier positions ``s + v g_bulk(s)`` of ``Y`` and squared overlaps ``1 + v g_bulk'(s)``.

    ``nan`` for spikes below the BBP transition (no outlier). See docs: Theory, :ref:`theory-spectrum` (null bulk:
    ``s + v/s``, ``1 - v/s^2``).
    """
    s = np.atleast_1d(np.asarray(spikes, dtype=float))
    sc = _critical_spike(law, v)
    g, dg = _stieltjes(law, np.maximum(s, sc))
    ok = s > sc
    return np.where(ok, s + v * g, np.nan), np.where(ok, 1.0 + v * dg, np.nan)


def bbp_inverse(law, y: float, v: float) -> tuple[float, float]:
    """Target spike ``s`` whose outlier sits at ``y`` (``s + v g_bulk(s) = y``) and its overlap."""
    sc = _critical_spike(law, v)
    ymin = sc + v * _stieltjes(law, sc)[0]
    if not y > ymin:
        return math.nan, math.nan
    lo, hi = sc, float(y)
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if mid + v * _stieltjes(law, mid)[0] < y:
            lo = mid
        else:
            hi = mid
    s = 0.5 * (lo + hi)
    return float(s), float(1.0 + v * _stieltjes(law, s)[1])
