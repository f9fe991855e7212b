"""Fit of the theory's learned-spectrum law to measured eigenvalues.

Law (arXiv 2509.24914 §5; docs: Theory, :ref:`theory-spectrum`): the eigenvalues of a trained tied map
``S = W W^T/sqrt(p d)`` follow

    eta * ReLU(mu0 ⊞ SC(delta^2) - eps)        (top ``kappa = p/d`` fraction kept),

an atom at zero (low-rank collapse), a bulk, and outliers (learned features) created by
isolated target eigenvalues ``s > delta`` at ``eta (s + delta^2 g_bulk(s) - eps)``.

Parameters fitted
-----------------
``eta`` (scale), ``delta`` (effective noise), ``eps`` (soft threshold, >= 0) and the shape of
the target law ``mu0`` (documented choice, ``prior``):

* ``"mp"``: ``mu0 = sqrt(kappa0) MP(1/kappa0)`` (the normalisation of docs: Theory, :ref:`theory-targets`: mean
  ``sqrt(kappa0)``, ``Q0 = 1 + kappa0``), shape ``kappa0`` in ``[0.02, 4]`` (above 1: full rank);
* ``"power_law"``: the ``d`` eigenvalues ``s_i = sqrt(d) i^{-gamma}`` (the ``"sqrt_d"``
  normalisation of arXiv 2509.24914), shape ``gamma > 1/2``; the top ``k`` of them, one per
  measured outlier and matrix, are spikes, the rest the bulk.

The overall scale of ``mu0`` is a convention (only ``eta A``, ``delta/A`` and ``eps/A`` are
identifiable for a target of amplitude ``A``); the fitted numbers are in the above
normalisation. The rank cap ``kappa`` is architecture and is given, not fitted.

Estimator
---------
The bulk (eigenvalues below the fitted edge plus the resolution margin of
:func:`outlier_margin`; the rest are outliers)
is fitted by matching quantiles (the squared Wasserstein-2 distance between the empirical
law and the model law, relative to ``sum x^2``): with ``Q`` the quantile function of
``mu0 ⊞ SC(delta^2)`` and levels ``u_i = (i + 1/2)/n``, the model quantile of the ``i``-th
smallest eigenvalue is ``eta (Q(u_i) - eps)`` when ``Q(u_i)`` exceeds the cut-off
``c = max(eps, Q(1 - kappa))`` and 0 otherwise. For fixed ``(delta, shape)`` the best ``eta``
is a closed-form least-squares coefficient and ``eps`` a 1-d minimisation; ``delta`` and the
shape are found by a grid search refined with Nelder–Mead. Outliers and the bulk are
iterated until the outlier count is stable. Goodness of fit: the Kolmogorov–Smirnov distance
between the non-zero bulk eigenvalues and the law of ``eta (Y - eps)`` conditioned on
``Y > c`` (``Y ~ mu_delta``'s continuous part); the law is said to fit when it is below
``1.36/sqrt(n)`` (5% level for iid samples; eigenvalues are more rigid than iid samples,
so this is lenient, and parameters are fitted, so it is more so).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from singlehead.inspect.fit_search import DELTA_RANGE, search_fit, w2_objective
from singlehead.inspect.laws import (
    PRIORS,
    LawCache,
    bbp_inverse,
    bbp_position,
    outlier_margin,
    power_law_values,
    prior_law,
    table_cdf,
    table_quantile,
)
from singlehead.numerics.spectra import learned_spectrum_law

__all__ = [
    "PRIORS",
    "SpectralFit",
    "LawCache",
    "prior_law",
    "fit_spectrum",
    "bbp_position",
    "bbp_inverse",
    "outlier_margin",
    "power_law_values",
]


@dataclass
class SpectralFit:
    """Fitted law and its diagnostics (see the module docstring for the conventions).

    Attributes
    ----------
    prior, shape : str, float
        ``mu0`` family and its fitted (or given) shape, ``kappa0`` or ``gamma``.
    eta, delta, eps : float
        Fitted scale, effective noise and threshold.
    rank_cap : float or None
        ``kappa`` (architecture).
    cutoff : float
        ``c = max(eps, Q(1 - kappa))`` on the ``Y`` scale.
    zero_atom : float
        Fitted mass at zero ``F(c)``; ``collapse_beyond_cap`` = ``max(0, F(eps) - (1 - kappa))``.
    zero_fraction : float
        Measured fraction of (numerically) zero eigenvalues.
    bulk_edge : float
        Top of the fitted bulk, ``eta (y_top - eps)``; ``margin`` the resolution added to it.
    outliers : list of dict
        Eigenvalues above ``bulk_edge + margin``: ``position``, ``y`` (``x/eta + eps``),
        ``spike`` (inferred target eigenvalue, BBP inverse) and ``overlap`` (predicted squared
        overlap with the target direction, ``1 + delta^2 g_bulk'(s)``).
    ks, ks_critical, fits : float, float, bool
        KS distance of the non-zero bulk, the ``1.36/sqrt(n)`` line, and ``ks <= ks_critical``.
    w2 : float
        Relative squared quantile distance at the optimum.

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead import MPTarget
    >>> from singlehead.inspect import fit_spectrum
    >>> from singlehead.numerics.spectra import goe
    >>> S0 = MPTarget(0.5).sample(256, seed=0).numpy()
    >>> eig = np.maximum(np.linalg.eigvalsh(S0 + 0.3 * goe(256, np.random.default_rng(1))) - 0.3, 0.0)
    >>> fit = fit_spectrum(eig, 256, shape=0.5)
    >>> fit.fits, abs(fit.delta - 0.3) < 0.1, abs(fit.eps - 0.3) < 0.1
    (True, True, True)
    """

    prior: str
    shape: float
    eta: float
    delta: float
    eps: float
    rank_cap: float | None
    cutoff: float
    zero_atom: float
    collapse_beyond_cap: float
    zero_fraction: float
    bulk_edge: float
    margin: float
    outliers: list[dict[str, float]]
    ks: float
    ks_critical: float
    fits: bool
    w2: float
    n: int
    n_nonzero: int
    d: int
    n_spikes: int = 0
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def n_outliers(self) -> int:
        return len(self.outliers)

    @property
    def delta_at_bound(self) -> bool:
        """``delta`` at the top of its search range: a noise-dominated bulk (semicircle edge), where
        only ``eta delta`` and ``eps/delta`` are identified, not ``mu0``."""
        return self.delta >= 0.999 * DELTA_RANGE[1]

    def law(self, grid_size: int = 400):
        """The fitted law as a :class:`singlehead.numerics.spectra.LearnedSpectrum` (density, atoms, edges)."""
        return learned_spectrum_law(
            prior_law(self.prior, self.shape, self.d),
            self.delta**2,
            threshold=self.eps,
            scale=self.eta,
            rank_cap=self.rank_cap,
            grid_size=grid_size,
        )

    def params(self) -> dict[str, float]:
        return {"eta": self.eta, "delta": self.delta, "eps": self.eps, "shape": self.shape}

    def bulk_law(self):
        return prior_law(self.prior, self.shape, self.d, self.n_spikes)

    def to_dict(self) -> dict[str, Any]:
        out = {
            k: getattr(self, k)
            for k in (
                "prior",
                "shape",
                "eta",
                "delta",
                "eps",
                "rank_cap",
                "cutoff",
                "zero_atom",
                "collapse_beyond_cap",
                "zero_fraction",
                "bulk_edge",
                "margin",
                "ks",
                "ks_critical",
                "fits",
                "w2",
                "n",
                "n_nonzero",
                "d",
            )
        }
        out["n_outliers"] = self.n_outliers
        out["delta_at_bound"] = self.delta_at_bound
        out["outliers"] = [dict(o) for o in self.outliers]
        return out


def _prepared(
    eigenvalues: np.ndarray, prior: str, rank_cap: float | None, zero_tol: float
) -> tuple[np.ndarray, float | None]:
    """Validated, sorted eigenvalues with the near-zero ones set to 0, and the rank cap (``None``: none)."""
    if prior not in PRIORS:
        raise ValueError(f"prior must be one of {PRIORS} (got {prior!r})")
    x_all = np.sort(np.asarray(eigenvalues, dtype=float).ravel())
    if x_all.size < 4 or not np.all(np.isfinite(x_all)):
        raise ValueError("eigenvalues must be at least 4 finite numbers")
    if rank_cap is not None and not (0 < rank_cap <= 1):
        raise ValueError(f"rank_cap must be in (0, 1] (got {rank_cap!r})")
    cap = None if rank_cap is None or rank_cap >= 1 else float(rank_cap)
    mean = float(np.mean(np.abs(x_all)))
    return np.where(x_all <= zero_tol * max(mean, 1e-300), 0.0, x_all), cap


def _fit_result(
    x_all: np.ndarray,
    k: int,
    prior: str,
    shp: float,
    delta: float,
    eta: float,
    eps: float,
    w2: float,
    edge: float,
    margin: float,
    tab: Any,
    cap: float | None,
    d: int,
) -> SpectralFit:
    """The fit's diagnostics: zero atom and collapse, KS of the bulk, the outliers' spikes (BBP inverse)."""
    n = x_all.size
    n_mat = max(1, int(round(n / d)))
    qcap = float(table_quantile(tab, np.array([1.0 - cap]))[0]) if cap is not None else -math.inf
    c = max(eps, qcap)
    Fc = float(table_cdf(tab, np.array([c]))[0])
    Feps = float(table_cdf(tab, np.array([eps]))[0])
    collapse = max(0.0, Feps - (1.0 - cap)) if cap is not None else Feps
    xb = x_all[: n - k]
    nz = xb[xb > 0]
    ks = math.nan
    if nz.size:
        Fe = tab.bulk_mass
        Fm = np.clip((table_cdf(tab, nz / eta + eps) - Fc) / max(Fe - Fc, 1e-300), 0.0, 1.0)
        m = nz.size
        ks = float(max(np.max(np.abs(np.arange(1, m + 1) / m - Fm)), np.max(np.abs(np.arange(m) / m - Fm))))
    crit = 1.36 / math.sqrt(max(nz.size, 1))
    v = delta * delta
    n_spk = len(tab.isolated) if prior == "power_law" else 0
    bulk = prior_law(prior, shp, d, n_spk)
    outs = []
    for xo in x_all[n - k :][::-1]:
        y = float(xo) / eta + eps
        s_hat, ov = bbp_inverse(bulk, y, v)
        outs.append({"position": float(xo), "y": y, "spike": s_hat, "overlap": ov})
    pred = [eta * (p - eps) for p in tab.isolated if p > c]
    return SpectralFit(
        prior=prior,
        shape=shp,
        eta=float(eta),
        delta=delta,
        eps=float(eps),
        rank_cap=cap,
        cutoff=float(c),
        zero_atom=Fc,
        collapse_beyond_cap=float(collapse),
        zero_fraction=float(np.mean(x_all == 0)),
        bulk_edge=float(edge),
        margin=float(margin),
        outliers=outs,
        ks=ks,
        ks_critical=crit,
        fits=bool(ks <= crit),
        w2=float(w2),
        n=n,
        n_nonzero=int(np.sum(x_all > 0)),
        d=int(d),
        n_spikes=n_spk,
        extras={"predicted_outliers": sorted(pred, reverse=True), "matrices": n_mat},
    )


def fit_spectrum(
    eigenvalues: np.ndarray,
    d: int,
    *,
    rank_cap: float | None = None,
    prior: str = "mp",
    shape: float | None = None,
    zero_tol: float = 1e-3,
    cache: LawCache | None = None,
    start: dict[str, float] | None = None,
    max_rounds: int = 3,
    delta_grid: np.ndarray | None = None,
    trim: float = 0.1,
) -> SpectralFit:
    """Fit ``eta ReLU(mu0 ⊞ SC(delta^2) - eps)`` (rank cap ``kappa``) to eigenvalues of tied maps.

    Parameters
    ----------
    eigenvalues : array
        Eigenvalues of one or several ``d x d`` PSD maps in the theory's normalisation
        ``S = W W^T/sqrt(p d)`` (pooled; zeros included: ``len`` is a multiple of ``d``).
    d : int
        Matrix dimension (outlier resolution margin; atoms of the power-law prior; components
        of the fitted law lighter than ``2/d`` above the bulk are its outliers).
    rank_cap : float, optional
        ``kappa = p/d`` when ``p < d`` (architecture: the zero atom up to ``1 - kappa``).
    prior : {"mp", "power_law"}
        Family of ``mu0`` (module docstring).
    shape : float, optional
        Fix ``kappa0`` / ``gamma`` instead of fitting it.
    zero_tol : float
        Eigenvalues ``<= zero_tol * mean(|eigenvalues|)`` count as zero (the trace per
        dimension sets the scale: ``1e-3`` is the simulation's rank tolerance for O(1) spectra).
    cache : LawCache, optional
        Share convolved laws between fits (heads of one layer).
    start : dict, optional
        ``{"delta": .., "shape": ..}`` warm start (skips the grid search).
    max_rounds : int
        Outlier/bulk alternations (stops when the outlier count is stable).
    trim : float
        Fraction of the non-zero eigenvalues left out (from the top) in the first, robust round
        (MP prior).
    delta_grid : array, optional
        With a fixed ``shape``: search ``delta`` on this grid (laws shared through ``cache``)
        plus one parabolic refinement, instead of a continuous 1-d search.

    Returns
    -------
    SpectralFit
        ``extras["predicted_outliers"]``: positions ``eta (y - eps)`` of the fitted law's own
        isolated components (power-law prior: the target spikes that the law says separate).

    Examples
    --------
    Eigenvalues drawn from the law itself, ``ReLU(S0 + 0.3 Z - 0.3)`` (``eta = 1``, ``d = 256``):

    >>> import numpy as np
    >>> from singlehead import MPTarget
    >>> from singlehead.inspect import fit_spectrum
    >>> from singlehead.numerics.spectra import goe
    >>> S0 = MPTarget(0.5).sample(256, seed=0).numpy()
    >>> eig = np.maximum(np.linalg.eigvalsh(S0 + 0.3 * goe(256, np.random.default_rng(1))) - 0.3, 0.0)
    >>> fit = fit_spectrum(eig, 256, shape=0.5)
    >>> abs(fit.eta - 1.0) < 0.1, fit.ks <= fit.ks_critical
    (True, True)
    """
    x_all, cap = _prepared(eigenvalues, prior, rank_cap, zero_tol)
    n = x_all.size
    cache = cache or LawCache()
    fit_shape = shape is None
    shape0 = float(shape) if shape is not None else (0.5 if prior == "mp" else 1.0)
    k, st = 0, None
    if start is not None:
        st = np.array([math.log(start["delta"]), start.get("shape", shape0) if fit_shape else shape0])
    whole = prior == "power_law"
    # Round 0 (MP prior): a trimmed quantile fit of the whole law, the top ``trim`` fraction of
    # the non-zero eigenvalues left out, so that a few large eigenvalues (outliers, or one head
    # much larger than the others) cannot drag the bulk. Later rounds: the bulk without the
    # outliers found (the MP prior has no spikes). Power-law prior: always the whole law, its
    # own isolated components matched to the top eigenvalues (they pin gamma; the bulk alone
    # hardly depends on it).
    n_nz = int(np.sum(x_all > 0))
    t0 = 0 if whole else int(math.ceil(trim * n_nz))
    for rnd in range(max_rounds + 1):
        if whole:
            x, u, bulk_only = x_all, (np.arange(n) + 0.5) / n, False
        elif rnd == 0:
            x, u, bulk_only = x_all[: n - t0], (np.arange(n - t0) + 0.5) / n, False
        else:
            x, u, bulk_only = x_all[: n - k], (np.arange(n - k) + 0.5) / (n - k), True
        sx2 = float(x @ x)
        delta, shp = search_fit(
            x, u, prior, shape0, d, cap, cache, sx2, fit_shape, st, bulk_only=bulk_only, delta_grid=delta_grid
        )
        w2, eta, eps = w2_objective(x, u, prior, shp, delta, d, cap, cache, sx2, bulk_only=bulk_only)
        tab = cache.table(prior, shp, delta, d)
        edge = eta * (tab.edge - eps)
        margin = outlier_margin(eta, tab.sigma, d)
        k_new = int(np.sum(x_all > edge + margin))
        st = np.array([math.log(delta), shp])
        if whole or (rnd > 0 and k_new == k):
            k = k_new
            break
        k = k_new
    return _fit_result(x_all, k, prior, shp, delta, eta, eps, w2, edge, margin, tab, cap, d)
