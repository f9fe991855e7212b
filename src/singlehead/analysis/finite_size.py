"""Finite-size extrapolation: simulated minus predicted quantities measured at several d, fitted in 1/d.

The state evolution (docs: Theory, :ref:`theory-se`) describes the ERM minimiser as ``d -> inf`` at fixed
``alpha = n/d^2``; simulations at finite ``d`` differ from it by finite-size corrections,
expected analytic in ``1/d`` to leading order (matrix-model corrections). This module
measures them instead of widening a tolerance: the simulation-minus-theory gap is measured at
several ``d``, fitted as

    gap(d) = a + b/d            (order=1)
    gap(d) = a + b/d + c/d^2    (order=2)

by weighted least squares with the standard errors of the seed means as weights, and the
intercept ``a`` — the ``d = inf`` value — is compared with zero (the theory) within its
confidence interval.

Goodness of fit is reported (``chi2``, ``dof``, ``chi2/dof`` and the p-value of ``chi2`` under
the fitted model). When ``chi2/dof > 1`` (scatter larger than the stated errors, or a wrong
model) the covariance is multiplied by ``chi2/dof`` (the Birge-ratio / PDG scale-factor
convention), so the interval widens with the observed scatter instead of staying overconfident;
it is never shrunk when ``chi2/dof < 1``. With correct standard errors this makes the interval
slightly conservative (coverage at or a little above nominal); with underestimated ones it
restores approximate coverage. A tiny p-value still means the model ``a + b/d`` is doubtful:
callers should say so rather than trust the interval.

Normalisation of the gap (same as the reproduction figures): ``gap = simulated test error -
SE test error``, both per sequence, ``E ||yhat(X) - y(X)||_F^2`` against noiseless labels
(docs: Theory, :ref:`theory-metrics`). numpy/scipy only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from singlehead.model.validation import check, finite, is_int

__all__ = ["Extrapolation", "FiniteSizeGaps", "extrapolate_to_infinite_d", "finite_size_gaps"]


@dataclass(frozen=True)
class Extrapolation:
    """A weighted least-squares fit ``value(d) = a + sum_k b_k d^{-k}`` (k = 1..order).

    Attributes
    ----------
    intercept : float
        ``a``, the fitted value at ``d = inf``.
    stderr : float
        Standard error of ``a`` (after the ``chi2/dof`` inflation when ``inflated``).
    ci : tuple of float
        ``a -/+ z stderr`` with ``z`` the two-sided normal quantile of ``level``.
    level : float
        Confidence level of ``ci``.
    slopes, slopes_stderr : tuple of float
        ``(b_1, ..., b_order)`` and their standard errors.
    covariance : ndarray, shape (order + 1, order + 1)
        Covariance of ``(a, b_1, ...)`` (inflated when ``inflated``).
    chi2, dof, chi2_per_dof, p_value : float, int, float, float
        ``chi2 = sum ((value - fit)/stderr)^2``, ``dof = points - (order + 1)``, their ratio and
        ``P(chi2_dof > chi2)``; ``nan`` when ``dof = 0``.
    inflated : bool
        Whether the covariance was multiplied by ``chi2/dof`` (> 1).
    order : int
        Highest power of ``1/d`` in the model.

    Examples
    --------
    >>> from singlehead.analysis import extrapolate_to_infinite_d
    >>> ext = extrapolate_to_infinite_d([25, 50, 100], [0.14, 0.12, 0.11], [0.002, 0.002, 0.002])
    >>> round(ext.intercept, 4), ext.ci[0] < ext.intercept < ext.ci[1]
    (0.1, True)
    """

    intercept: float
    stderr: float
    ci: tuple[float, float]
    level: float
    slopes: tuple[float, ...]
    slopes_stderr: tuple[float, ...]
    covariance: np.ndarray
    chi2: float
    dof: int
    chi2_per_dof: float
    p_value: float
    inflated: bool
    order: int

    def contains(self, value: float = 0.0) -> bool:
        """Whether ``value`` lies inside the confidence interval of the intercept."""
        return bool(self.ci[0] <= value <= self.ci[1])

    def predict(self, d: float | np.ndarray) -> np.ndarray:
        """The fitted ``a + sum_k b_k d^{-k}`` at ``d`` (``d = np.inf`` gives ``a``)."""
        x = 1.0 / np.asarray(d, dtype=float)
        coef = (self.intercept, *self.slopes)
        return sum(c * x**k for k, c in enumerate(coef))

    def poor_fit(self, threshold: float = 0.01) -> bool:
        """Whether the fit is rejected at ``threshold`` (p-value below it; False when ``dof = 0``)."""
        return bool(self.dof > 0 and self.p_value < threshold)


def _as_1d(x: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a 1-D sequence of finite numbers (got {x!r})") from exc
    check(a.ndim == 1, name, "a 1-D sequence of finite numbers", x)
    check(bool(np.all(np.isfinite(a))), name, "a 1-D sequence of finite numbers", x)
    return a


def extrapolate_to_infinite_d(
    d: Sequence[float] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    stderr: Sequence[float] | np.ndarray,
    *,
    order: int = 1,
    level: float = 0.95,
    inflate: bool = True,
) -> Extrapolation:
    """Fit ``values(d) = a + b/d`` (``order=1``; ``+ c/d^2`` with ``order=2``) and return ``a`` with its CI.

    Weighted least squares with weights ``1/stderr^2``: ``theta = (X^T W X)^{-1} X^T W y`` with
    ``X = [1, 1/d, ..., 1/d^order]``, covariance ``(X^T W X)^{-1}``. When ``inflate`` and
    ``chi2/dof > 1`` the covariance is multiplied by ``chi2/dof`` (never shrunk); the interval is
    ``a -/+ z stderr(a)`` with ``z = Phi^{-1}((1 + level)/2)``.

    Parameters
    ----------
    d : sequence of float
        Sizes (> 0, finite), one per point; at least ``order + 1`` distinct values.
    values : sequence of float
        Measured values (e.g. mean gaps over seeds), same length as ``d``.
    stderr : sequence of float
        Standard errors of ``values`` (> 0, finite), same length as ``d``.
    order : int
        1 or 2: highest power of ``1/d``.
    level : float
        Confidence level, in (0, 1).
    inflate : bool
        Multiply the covariance by ``chi2/dof`` when it exceeds 1 (see the module docstring).

    Returns
    -------
    Extrapolation

    Raises
    ------
    ValueError
        Naming the parameter: non-finite or non-positive ``d`` or ``stderr``, mismatched lengths,
        fewer points (or distinct ``d``) than the ``order + 1`` parameters, bad ``order``/``level``.

    Examples
    --------
    >>> from singlehead.analysis import extrapolate_to_infinite_d
    >>> ext = extrapolate_to_infinite_d([25, 50, 100], [0.14, 0.12, 0.11], [0.002, 0.002, 0.002])
    >>> round(ext.intercept, 4), round(ext.slopes[0], 4)   # values = 0.1 + 1/d exactly
    (0.1, 1.0)
    """
    check(is_int(order) and order in (1, 2), "order", "1 or 2", order)
    check(finite(level) and 0.0 < float(level) < 1.0, "level", "a number in (0, 1)", level)
    x_d, y, s = _as_1d(d, "d"), _as_1d(values, "values"), _as_1d(stderr, "stderr")
    check(bool(np.all(x_d > 0)), "d", "positive sizes", d)
    check(len(y) == len(x_d), "values", f"of the same length as d ({len(x_d)})", len(y))
    check(len(s) == len(x_d), "stderr", f"of the same length as d ({len(x_d)})", len(s))
    check(bool(np.all(s > 0)), "stderr", "positive standard errors", stderr)
    n_par = order + 1
    check(len(np.unique(x_d)) >= n_par, "d", f"at least order + 1 = {n_par} distinct sizes", d)
    X = np.vander(1.0 / x_d, n_par, increasing=True)
    w = 1.0 / s**2
    A = X.T @ (w[:, None] * X)
    cov = np.linalg.inv(A)
    theta = cov @ (X.T @ (w * y))
    chi2 = float(np.sum(w * (y - X @ theta) ** 2))
    dof = len(y) - n_par
    chi2_dof = chi2 / dof if dof > 0 else math.nan
    p = float(stats.chi2.sf(chi2, dof)) if dof > 0 else math.nan
    inflated = bool(inflate and dof > 0 and chi2_dof > 1.0)
    if inflated:
        cov = cov * chi2_dof
    se = np.sqrt(np.diag(cov))
    z = float(stats.norm.ppf(0.5 + 0.5 * float(level)))
    a, sa = float(theta[0]), float(se[0])
    return Extrapolation(
        intercept=a,
        stderr=sa,
        ci=(a - z * sa, a + z * sa),
        level=float(level),
        slopes=tuple(float(t) for t in theta[1:]),
        slopes_stderr=tuple(float(t) for t in se[1:]),
        covariance=cov,
        chi2=chi2,
        dof=dof,
        chi2_per_dof=chi2_dof,
        p_value=p,
        inflated=inflated,
        order=order,
    )


@dataclass(frozen=True)
class FiniteSizeGaps:
    """Per-``d`` gaps to the theory and their extrapolation to ``d = inf``.

    Attributes
    ----------
    d : ndarray
        Sizes, increasing.
    gap : ndarray
        Mean over seeds of ``simulated - theory``.
    se : ndarray
        Standard error of ``gap`` used in the fit (see ``pool`` and ``extra_se`` of
        :func:`finite_size_gaps`).
    sd : ndarray
        Sample standard deviation over seeds (``ddof=1``), for comparison with the model.
    n_seeds : ndarray of int
        Finite values per ``d`` (NaN values, from failed runs, are left out).
    theory : float
        The theory value the gaps are measured from.
    extrapolation : Extrapolation
        Fit of ``gap(d)``; its intercept is the ``d = inf`` gap (0 when simulations and theory agree).
    pooled_c : float
        ``c`` of the pooled variance model ``c^2/d^2 + mc^2`` (``nan`` without pooling).

    Examples
    --------
    >>> from singlehead.analysis import finite_size_gaps
    >>> per_d = {25: [0.15, 0.13, 0.14], 50: [0.125, 0.115, 0.12], 100: [0.112, 0.108, 0.11]}
    >>> gaps = finite_size_gaps(per_d, theory=0.1)
    >>> [round(float(g), 4) for g in gaps.gap]                 # mean simulated value minus theory, per d
    [0.04, 0.02, 0.01]
    """

    d: np.ndarray
    gap: np.ndarray
    se: np.ndarray
    sd: np.ndarray
    n_seeds: np.ndarray
    theory: float
    extrapolation: Extrapolation
    pooled_c: float = math.nan

    @property
    def agrees(self) -> bool:
        """Whether 0 (the theory) lies inside the CI of the extrapolated gap."""
        return self.extrapolation.contains(0.0)


def finite_size_gaps(
    per_d: Mapping[float, Sequence[float]],
    theory: float,
    *,
    order: int = 1,
    level: float = 0.95,
    inflate: bool = True,
    mc_se: Mapping[float, Sequence[float]] | None = None,
    pool: bool = False,
    extra_se: Callable[[float], float] | None = None,
) -> FiniteSizeGaps:
    """Gap to the theory per ``d`` from per-seed simulated values, and its extrapolation to ``d = inf``.

    Standard error of the mean gap at ``d`` (``k`` seeds, sample variance ``s^2``, mean squared
    Monte Carlo error ``v = mean(mc_se^2)``, 0 when ``mc_se`` is not given):

    * ``pool=False``: ``sqrt(max(s^2, v)/k)`` — the seed scatter, floored by the known Monte
      Carlo part of it (a sample variance from few seeds can fall below it by chance);
    * ``pool=True``: ``sqrt((c^2/d^2 + v)/k)``, a per-seed variance model whose task-to-task part
      ``c^2/d^2`` assumes the fluctuations of a self-averaging quantity are ``O(1/d)``;
      ``c^2 = max(0, sum_d (k-1) d^2 (s^2 - v) / sum_d (k-1))`` pools every seed instead of
      trusting a ``k-1 = 3``-degree-of-freedom variance at the largest (most expensive) ``d``,
      whose underestimate would dominate the weighted fit. Compare ``sd`` with the model.

    Parameters
    ----------
    per_d : mapping d -> sequence of float
        Per-seed simulated values at each size (e.g. test errors per sequence, docs: Theory, :ref:`theory-metrics`); NaN
        entries (failed runs) are dropped; at least 2 finite values per ``d``.
    theory : float
        The ``d = inf`` prediction (e.g. the SE test error); ``gap = simulated - theory``.
    order, level, inflate
        As in :func:`extrapolate_to_infinite_d`.
    mc_se : mapping d -> sequence of float, optional
        Per-seed Monte Carlo standard errors of the values, aligned with ``per_d`` (e.g. the
        test-set error of each run's test error, ``test_error_se`` of a simulation record).
    pool : bool
        Use the pooled variance model above.
    extra_se : callable d -> float, optional
        An error common to all seeds at a given ``d``, added in quadrature to the s.e. (it does
        not average out over seeds). Example: a fraction of ``d`` eigenvalues (the zero-atom
        mass) is a count over ``d``, resolved to ``1/d``; its rounding error, taken as uniform,
        has s.d. ``1/(sqrt(12) d)``.

    Returns
    -------
    FiniteSizeGaps

    Raises
    ------
    ValueError
        ``per_d`` with fewer than 2 finite values at some ``d`` or non-positive sizes; ``mc_se``
        not aligned with ``per_d`` or negative; a non-finite ``theory``; a non-callable or
        negative ``extra_se``; and everything :func:`extrapolate_to_infinite_d` rejects.

    Examples
    --------
    >>> from singlehead.analysis import finite_size_gaps
    >>> per_d = {25: [0.15, 0.13, 0.14], 50: [0.125, 0.115, 0.12], 100: [0.112, 0.108, 0.11]}
    >>> ext = finite_size_gaps(per_d, theory=0.1).extrapolation
    >>> ext.ci[0] < 0.0 < ext.ci[1]                     # the gap extrapolates to zero at d = inf
    True
    """
    check(finite(theory), "theory", "a finite number", theory)
    check(isinstance(per_d, Mapping) and len(per_d) > 0, "per_d", "a non-empty mapping d -> per-seed values", per_d)
    check(mc_se is None or isinstance(mc_se, Mapping), "mc_se", "None or a mapping d -> per-seed errors", mc_se)
    check(extra_se is None or callable(extra_se), "extra_se", "None or a callable d -> error", extra_se)
    ds, gaps, s2, v2, ks = [], [], [], [], []
    for d in sorted(per_d):
        check(finite(d) and float(d) > 0, "per_d", "keyed by positive sizes d", d)
        v = np.asarray(per_d[d], dtype=float).ravel()
        mc = np.zeros_like(v) if mc_se is None else np.asarray(mc_se.get(d, ()), dtype=float).ravel()
        check(mc.shape == v.shape, "mc_se", f"aligned with per_d (d={d}: {len(v)} values)", mc_se and mc_se.get(d))
        ok = np.isfinite(v) & np.isfinite(mc)
        v, mc = v[ok], mc[ok]
        check(len(v) >= 2, "per_d", f"at least 2 finite values per d (d={d} has {len(v)})", per_d[d])
        check(bool(np.all(mc >= 0)), "mc_se", "non-negative errors", mc_se and mc_se.get(d))
        ds.append(float(d))
        gaps.append(float(v.mean()) - float(theory))
        s2.append(float(v.var(ddof=1)))
        v2.append(float(np.mean(mc**2)))
        ks.append(len(v))
    d_a, s2_a, v2_a, k_a = np.array(ds), np.array(s2), np.array(v2), np.array(ks, dtype=int)
    c = math.nan
    if pool:
        c2 = max(0.0, float(np.sum((k_a - 1) * d_a**2 * (s2_a - v2_a)) / np.sum(k_a - 1)))
        c, var = math.sqrt(c2), c2 / d_a**2 + v2_a
    else:
        var = np.maximum(s2_a, v2_a)
    se = np.sqrt(var / k_a)
    if extra_se is not None:
        ex = np.array([float(extra_se(d)) for d in ds])
        check(bool(np.all(np.isfinite(ex) & (ex >= 0))), "extra_se", "a callable returning finite errors >= 0", ex)
        se = np.hypot(se, ex)
    ext = extrapolate_to_infinite_d(d_a, gaps, se, order=order, level=level, inflate=inflate)
    return FiniteSizeGaps(d_a, np.array(gaps), se, np.sqrt(s2_a), k_a, float(theory), ext, c)
