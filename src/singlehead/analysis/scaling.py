"""Scaling laws of the excess test error for power-law targets: regimes, exponents, phase diagram.

Sources: arXiv 2509.24882 (scaling laws and spectra of shallow networks: the regimes below),
arXiv 2509.24914 (§4, power-law targets of attention), arXiv 2505.17958. docs: Theory, :ref:`theory-scaling`.

Mechanism (target ``s_i = sqrt(d) i^{-gamma}``; ``delta`` the effective noise, ``eps`` the
threshold and ``c >= eps`` the cut-off on the scale of ``Y = S0 + delta Z``): mode ``i`` is
recovered when it is *detected* (``s_i > delta``, an outlier at ``s_i + delta^2/s_i``) and
*survives* the threshold (``s_i + delta^2/s_i > c``). The smallest recovered eigenvalue is

    s_* = delta                                  if c <= 2 delta  (detection binds)
    s_* = (c + sqrt(c^2 - 4 delta^2)) / 2        if c >  2 delta  (the threshold binds),

``K ~ (sqrt(d)/s_*)^{1/gamma}`` and the excess error (lost tail ``K^{1-2 gamma}`` plus the error
on the recovered modes, of the same order) is ``~ (s_*/sqrt(d))^{2 - 1/gamma}``. For the linear
channel (``T = 1``) the state evolution gives exactly ``delta^2 = (E + Delta/2)/(2 alpha)``
(``E`` the matrix error, ``alpha = n/d^2``) and ``eps = lam (Sigma + 1/4)/alpha ~ lam d^2/n``.
A point is labelled by **the scale that sets the last recovered mode**:

* ``"threshold"`` (``c > 2 delta``): ``s_* ~ eps``, excess ``~ (lam d^{3/2}/n)^{2 - 1/gamma}``;
  local exponent in ``n`` ``(2 - 1/gamma)(1 - a)`` with ``a = d log lam / d log n`` along the
  curve: ``2 - 1/gamma`` at fixed ``lam``, and **``1 - 1/(2 gamma)`` for ``lam ∝ sqrt(alpha)``**
  — with ``lam ∝ sqrt(n)/d``, ``(lam d^{3/2}/n)^{2-1/gamma} = (n/d)^{-(1 - 1/(2 gamma))}``, the
  optimally tuned (LASSO / matrix-sensing minimax) rate. This is the "sample-limited" setting of
  ``SAMPLE_LIMITED_SETTING``; it needs no label noise. The law also holds with
  ``2 < c/delta < 3``, where ``s_*`` lies between ``delta`` and ``c``, and with ``c/delta``
  drifting along the curve;
* ``"label_noise"`` (``c <= 2 delta``, ``Delta/2 > 3 E``): ``s_* = delta ∝ sqrt(Delta d^2/n)``,
  ``K ~ (n/(d Delta))^{1/(2 gamma)}``, exponent ``1 - 1/(2 gamma)`` (finite ``K`` and ``d``: as for
  ``"tail_noise"`` below, the same discrete law with ``Delta``);
* ``"tail_noise"`` (``c <= 2 delta``, ``E > 3 Delta/2``): the noise is the energy of the
  unrecovered modes themselves, ``delta^2 ~ E d^2/n`` with ``E ~ (delta/sqrt d)^{2 - 1/gamma}``:
  ``delta ∝ n^{-gamma}``, ``K ∝ n/d``, exponent ``2 gamma - 1`` (the noiseless best-K-term rate)
  **in the limit K -> infinity, K/d -> 0**. Neither limit is near on practical grids, so the local
  exponents drift along ``n``. Finite ``K``: the exponent of the discrete law
  (:mod:`singlehead.analysis.finite_k`) is ``2 gamma - 1 - 1.9/K`` (``gamma = 1.25``: 1.31 at
  ``K = 10``, 1.46 at ``K = 50``), and it is what ``predicted_exponent`` holds for these cells
  (``asymptotic_exponent`` keeps the limit); finite ``d``: the large-``d`` law needs the noise
  bulk to take up the surplus degrees of freedom at its edge, and at ``d = 1000`` the cut-off
  sinks towards ``delta``: the fixed point's error departs from the law at its own
  ``delta`` (``finite_d_mismatch``), increasingly along ``n``, and the local exponent
  exceeds the law's. A noise-limited cell with ``|finite_d_mismatch| > FINITE_D_TOL``
  (0.05, the exponent tolerance: the departure shifts the exponent by about its own size) is a
  crossover (linear channel, ``T = 1``, ``A = sqrt(d)``, where ``2 alpha delta^2 = E + Delta/2``
  is exact; other channels keep the asymptotic exponent). What moves the exponent is the change
  of the departure along ``n``, not its level: ``finite_d_exponent_shift`` of :func:`regime_map`
  is that part of the gap, exactly (law + shift = measured local exponent);
* ``"harmful_overfitting"`` (``c <= 2 delta`` and the fitted part of the noise bulk,
  ``E_fit = eta^2 int_{x > c} (x - eps)^2 SC_delta(dx)``, is more than half of ``E``): the
  threshold sits inside the noise bulk (small ``lam``, e.g. the paper's ``0.1-1 sqrt(alpha)``,
  with large ``Delta``) and the fitted noise grows as ``c/delta`` falls: the error *rises* with
  ``n`` (no exponent; checked by sign);
* ``"shrinkage"`` (all modes kept, ``eps > delta``): ``(lam d^2/n)^2``, exponent ``2 (1 - a)``;
  ``"d2_over_n"`` (all modes kept, ``eps <= delta``): ``d^2/n``, exponent 1;
* ``"plateau"``: complete rank collapse (``S = 0``), exponent 0;
* ``"crossover"``: two scales within a factor 3 (``E`` vs ``Delta/2``), ``E_fit/E`` in
  ``[1/4, 1/2]``, or fewer than ``K_MIN = 5``
  recovered modes (single modes switching on one by one — the emergence steps — are not a
  power law), a point whose neighbour along ``n`` is in another regime (its centred local
  exponent mixes two laws), or — with the spiked prior of :func:`power_law_curve` — more than
  half of its spikes recovered (the modes below its floor are a null bulk, so the curve stops
  being a power law: at ``d = 10^5``, ``Delta = 0``, ``lam = 0.01``, ``K -> 2274`` the local
  exponent falls to 0.96): no single exponent claimed.

Labels are set by these mechanisms, not by a fit; :func:`regime_map` puts the local exponent
measured from the theory curve beside the predicted one, so the labels can be checked.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from singlehead.analysis.exponents import ExponentFit, fit_exponent
from singlehead.analysis.finite_k import finite_d_mismatch, noise_limited_law
from singlehead.analysis.power_law import power_law_curve, switch_on_sample_sizes
from singlehead.model.channels import get_channel
from singlehead.model.targets import power_law_eigenvalues

__all__ = [
    "ExponentFit",
    "fit_exponent",
    "predicted_exponent",
    "classify_regime",
    "regime_map",
    "scaling_curve",
    "local_exponents",
    "fitted_noise_error",
    "REGIMES",
    "SAMPLE_LIMITED_SETTING",
]

#: Theory setting in which every point is threshold-limited with ``lam ∝ sqrt(alpha)``, so the
#: exponent is 1 - 1/(2 gamma) for gamma in {0.75, 1.25, 2} (spiked prior; lam = lam_prefactor
#: sqrt(alpha); n from n_over_d[0] d to n_over_d[1] d): fitted 0.332 / 0.579 / 0.714 (Delta = 4)
#: and 0.333 / 0.585 / 0.730 (Delta = 0) against 0.333 / 0.600 / 0.750. The label noise is not
#: needed (module docstring).
SAMPLE_LIMITED_SETTING = {"d": 100_000, "noise": 4.0, "lam_prefactor": 10.0, "n_over_d": (100.0, 10_000.0)}

REGIMES = (
    "threshold",
    "label_noise",
    "tail_noise",
    "harmful_overfitting",
    "shrinkage",
    "d2_over_n",
    "plateau",
    "crossover",
)

#: Scale ratios of the labels (module docstring).
CROSSOVER_FACTOR = 3.0
#: Largest ``|E_SE/E(dt) - 1|`` (finite-d departure from the large-d discrete law) of a noise-limited cell: the
#: departure grows along n as a power of x/d and shifts the local exponent by about its own size (finite_k).
FINITE_D_TOL = 0.05
#: Fewer recovered modes than this: single modes switching on one by one (emergence steps).
K_MIN = 5


def predicted_exponent(regime: str, gamma: float, lam_slope: float = 0.0) -> float:
    """Predicted local exponent ``-d log E / d log n`` of a regime (docs: Theory, :ref:`theory-scaling`; module
    docstring).

    ``lam_slope = d log lam / d log n`` along the curve (0 at fixed ``lam``; 0.5 for
    ``lam ∝ sqrt(alpha)``). ``nan`` for ``"harmful_overfitting"`` (the error rises: negative,
    no law) and ``"crossover"``.

    Examples
    --------
    >>> from singlehead.analysis import predicted_exponent
    >>> predicted_exponent("threshold", gamma=1.25, lam_slope=0.5)   # lam ~ sqrt(alpha): 1 - 1/(2 gamma)
    0.6
    >>> predicted_exponent("tail_noise", gamma=1.25)                 # 2 gamma - 1
    1.5
    """
    if gamma <= 0.5:
        raise ValueError(f"gamma must be > 0.5 (got {gamma!r})")
    a = float(lam_slope)
    table = {
        "threshold": (2.0 - 1.0 / gamma) * (1.0 - a),
        "label_noise": 1.0 - 1.0 / (2.0 * gamma),
        "tail_noise": 2.0 * gamma - 1.0,
        "harmful_overfitting": math.nan,
        "shrinkage": 2.0 * (1.0 - a),
        "d2_over_n": 1.0,
        "plateau": 0.0,
        "crossover": math.nan,
    }
    if regime not in table:
        raise ValueError(f"regime must be one of {REGIMES} (got {regime!r})")
    return table[regime]


def fitted_noise_error(
    delta: np.ndarray, eps: np.ndarray, cutoff: np.ndarray, eta: np.ndarray, n_nodes: int = 64
) -> np.ndarray:
    """``E_fit = eta^2 int_{x > c} (x - eps)^2 SC_delta(dx)``: matrix error of the fitted noise bulk.

    Null-bulk approximation (semicircle of radius ``2 delta``; the noise directions carry no
    signal), vectorised over points: ``x = 2 delta cos(theta)``, Gauss–Legendre in ``theta``.
    """
    dl, ep, cc, et = (np.atleast_1d(np.asarray(v, dtype=float)) for v in (delta, eps, cutoff, eta))
    cc = np.where(np.isfinite(cc), cc, ep)
    t = np.clip(cc / np.maximum(dl, 1e-300), -2.0, 2.0)
    th_max = np.arccos(t / 2.0)  # x in (c, 2 delta)  <->  theta in (0, th_max)
    g, w = np.polynomial.legendre.leggauss(n_nodes)
    th = 0.5 * th_max[:, None] * (g[None, :] + 1.0)
    x = 2.0 * dl[:, None] * np.cos(th)
    dens = (2.0 / math.pi) * np.sin(th) ** 2  # SC(dx) = (2/pi) sin^2(theta) dtheta
    val = np.sum(0.5 * th_max[:, None] * w[None, :] * dens * (x - ep[:, None]) ** 2, axis=1)
    return et * et * val


def classify_regime(
    row: dict[str, Any] | pd.Series,
    d: int,
    *,
    noise: float | None = None,
    cutoff_drift: float = 0.0,
    rank_tol: float = 1e-9,
) -> str:
    """Mechanistic regime of one fixed point (a row of :func:`power_law_curve`; module docstring).

    Parameters
    ----------
    row : mapping
        ``rank_fraction, delta, eps, eta, cutoff, K, matrix_error``.
    d : int
    noise : float, optional
        Label noise ``Delta`` (``0`` when omitted).
    cutoff_drift : float
        ``d log(c/delta) / d log n`` along the curve (diagnostic; not used by the rules).

    Examples
    --------
    >>> from singlehead.analysis import classify_regime, power_law_curve
    >>> curve = power_law_curve(1.25, 200, [2e3, 2e4], lam=1e-3, noise=0.1)
    >>> from singlehead.analysis.scaling import REGIMES
    >>> all(classify_regime(row, 200, noise=0.1) in REGIMES for _, row in curve.iterrows())
    True
    """
    if not math.isfinite(float(row["rank_fraction"])):
        return "failed"
    if row["rank_fraction"] <= rank_tol:
        return "plateau"
    delta, eps = float(row["delta"]), float(row["eps"])
    c = float(row["cutoff"]) if math.isfinite(float(row["cutoff"])) else eps
    if int(row["K"]) >= d - 1:
        return "shrinkage" if eps > delta else "d2_over_n"
    E = float(row["matrix_error"])
    phi = float(fitted_noise_error(delta, eps, c, float(row.get("eta", 1.0)))[0]) / E if E > 0 else 0.0
    if c <= 2.0 * delta and phi > 0.5:
        return "harmful_overfitting"
    if int(row["K"]) < K_MIN:
        return "crossover"
    if c > 2.0 * delta:
        return "threshold"
    if phi > 0.25:
        return "crossover"
    half = 0.5 * float(noise or 0.0)
    if half > CROSSOVER_FACTOR * E:
        return "label_noise"
    if E > CROSSOVER_FACTOR * half:
        return "tail_noise"
    return "crossover"


def local_exponents(df: pd.DataFrame) -> pd.DataFrame:
    """Add ``local_exponent_n`` (``-d log E/d log n``, centred differences), ``lam_slope``
    (``d log lam / d log n``) and ``cutoff_drift`` (``d log(c/delta)/d log n``) to one curve."""
    out = df.copy()
    ln = np.log(out["n"].to_numpy(dtype=float))
    if len(out) < 2:
        out["local_exponent_n"] = out["lam_slope"] = out["cutoff_drift"] = np.nan
        return out
    le = np.log(np.maximum(out["excess_error"].to_numpy(dtype=float), 1e-300))
    ll = np.log(np.maximum(out["lam"].to_numpy(dtype=float), 1e-300))
    c = out["cutoff"].fillna(out["eps"]).to_numpy(dtype=float)
    lc = np.log(np.maximum(c / out["delta"].to_numpy(dtype=float), 1e-300))
    out["local_exponent_n"] = -np.gradient(le, ln)
    out["lam_slope"] = np.gradient(ll, ln)
    out["cutoff_drift"] = np.gradient(lc, ln)
    return out


def _label_regimes(df: pd.DataFrame, d: int, gamma: float) -> pd.DataFrame:
    """Local exponents, ``regime`` and ``predicted_exponent`` columns of one curve."""
    attrs = dict(df.attrs)
    df = local_exponents(df)
    df.attrs.update(attrs)
    noise = attrs.get("noise", 0.0)
    df["fitted_noise_fraction"] = fitted_noise_error(df["delta"], df["eps"], df["cutoff"], df["eta"]) / np.maximum(
        df["matrix_error"].to_numpy(dtype=float), 1e-300
    )
    lab = [
        classify_regime(r, d, noise=noise, cutoff_drift=float(np.nan_to_num(r["cutoff_drift"])))
        for _, r in df.iterrows()
    ]
    # the quadratic network: a closed-form (linear) channel with one token
    linear = (
        not get_channel(attrs.get("channel", "linear")).needs_quadrature
        and int(attrs.get("T", 1)) == 1
        and attrs.get("normalisation", "sqrt_d") == "sqrt_d"
    )
    noise_limited = ("tail_noise", "label_noise")
    df["finite_d_mismatch"] = [
        finite_d_mismatch(r["delta"], r["matrix_error"], gamma, d) if linear and x in noise_limited else math.nan
        for x, (_, r) in zip(lab, df.iterrows())
    ]
    # the large-d law of a noise-limited cell holds only where the fixed point's error is that law's (finite d)
    lab = [
        x if not (x in noise_limited and abs(mm) > FINITE_D_TOL) else "crossover"
        for x, mm in zip(lab, df["finite_d_mismatch"])
    ]
    n_sp = attrs.get("n_spikes")
    if n_sp:  # spiked prior: modes below its floor are null bulk, so K near the spike count is an artefact
        lab = [x if int(k) <= n_sp // 2 or x in ("plateau", "failed") else "crossover" for x, k in zip(lab, df["K"])]
    # the centred local exponent at a point whose neighbour along n is in another regime mixes two laws
    df["regime"] = [
        x
        if x in ("failed", "crossover") or all(lab[j] == x for j in (k - 1, k + 1) if 0 <= j < len(lab))
        else "crossover"
        for k, x in enumerate(lab)
    ]
    df["asymptotic_exponent"] = [
        predicted_exponent(rg, gamma, float(np.nan_to_num(a))) if rg in REGIMES else math.nan
        for rg, a in zip(df["regime"], df["lam_slope"])
    ]
    # noise-limited cells: the exponent of the discrete law at the cell's delta (its K), not the K -> inf limit,
    # taken with the measurement's own stencil (np.gradient over the curve's points, on the law's E and x at each
    # point's delta): at an end point the measured exponent is the one-sided secant to its neighbour, so the law's
    # point derivative there would compare different K (d = 1e5, lam = 0.01, K = 9 -> 17: 1.313 vs secant 1.355)
    law_exp = [math.nan] * len(df)
    df["finite_d_exponent_shift"] = df["discrete_law_exponent"] = math.nan
    if linear and np.isfinite(df["finite_d_mismatch"]).any() and len(df) >= 2 and np.isfinite(df["delta"]).all():
        laws = [noise_limited_law(float(v) / math.sqrt(d), gamma, d, noise) for v in df["delta"]]
        log_x = np.log([w["x"] for w in laws])
        law_exp = list(-np.gradient(np.log([w["E"] for w in laws]), log_x))
        # Why a cell misses its law: with mu = log(E_SE/E_law) and nu = log(n/(d x)) at each point's delta (x: the
        # law's n/d there; nu = mu at Delta = 0), log E = log E_law + mu and log n = log(d x) + nu, so on the
        # measurement's stencil G the local exponent is p_law + shift, shift = -(G mu + p_law G nu)/G log n (exact
        # at the end points, to the stencil's accuracy inside): a constant departure from the law leaves the
        # exponent alone, a departure that changes along n moves it. Diagnostic only: a label set by it would make
        # the exponent check circular, so the labels keep the level rule above.
        log_n = np.log(df["n"].to_numpy(dtype=float))
        mu = np.log(df["matrix_error"].to_numpy(dtype=float) / np.array([w["E"] for w in laws]))
        nu = log_n - math.log(d) - log_x
        g_n = np.gradient(log_n)
        shift = -(np.gradient(mu) + np.asarray(law_exp) * np.gradient(nu)) / g_n
        on_law = np.isfinite(df["finite_d_mismatch"])
        df["finite_d_exponent_shift"] = np.where(on_law, shift, math.nan)
        df["discrete_law_exponent"] = np.where(on_law, law_exp, math.nan)
    df["predicted_exponent"] = [
        le if linear and rg in noise_limited else pa
        for rg, pa, le in zip(df["regime"], df["asymptotic_exponent"], law_exp)
    ]
    return df


def scaling_curve(
    gamma: float,
    d: int,
    ns: Sequence[float],
    *,
    lam: float | Callable[[float], float],
    fit_range: tuple[float, float] | None = None,
    method: str = "ols",
    level: float = 0.95,
    **kwargs: Any,
) -> dict[str, Any]:
    """Excess-error curve over ``n`` with regimes, a fitted exponent and recovered modes.

    Returns ``{"curve": DataFrame (power_law_curve + local_exponent_n, lam_slope, cutoff_drift,
    fitted_noise_fraction, regime, predicted_exponent), "fit": ExponentFit, "predicted": ...,
    "regime_counts": {...}, "switch_on": {...}}``; the fit uses the points with
    ``fit_range[0] <= n <= fit_range[1]`` (all by default). ``predicted`` is the predicted
    exponent of the majority regime other than ``"crossover"`` (mean over its points; ``nan`` if
    every point is a crossover), reported as ``"regime"``.

    Example: ``SAMPLE_LIMITED_SETTING`` (spiked prior, ``d = 10^5``, ``lam = 10 sqrt(alpha)``,
    ``n in [100 d, 10^4 d]``): every point is threshold-limited (``c ≈ 2.1-2.5 delta`` with
    ``Delta = 4``, ``c > 3 delta`` with ``Delta = 0``; points with fewer than ``K_MIN`` recovered
    modes are labelled ``"crossover"``) and the predicted exponent is
    ``(2 - 1/gamma)/2 = 1 - 1/(2 gamma)``; fitted 0.332 / 0.579 / 0.714 (``Delta = 4``) and
    0.333 / 0.585 / 0.730 (``Delta = 0``) against 0.333 / 0.600 / 0.750.

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead.analysis import scaling_curve
    >>> d = 100_000
    >>> out = scaling_curve(1.25, d, np.geomspace(100 * d, 10_000 * d, 5), lam=lambda a: 10 * np.sqrt(a),
    ...                     noise=4.0, prior="spiked", tol=1e-7)
    >>> round(out["predicted"], 6), round(out["fit"].exponent, 2)
    (0.6, 0.58)
    """
    df = _label_regimes(power_law_curve(gamma, d, ns, lam=lam, **kwargs), d, gamma)
    sel = np.isfinite(df["excess_error"].to_numpy()) & (df["excess_error"].to_numpy() > 0)
    if fit_range is not None:
        sel = sel & (df["n"] >= fit_range[0]).to_numpy() & (df["n"] <= fit_range[1]).to_numpy()
    fit = fit_exponent(df["n"][sel], df["excess_error"][sel], method=method, level=level)
    counts = df["regime"].value_counts()
    labelled = counts.drop(["crossover", "failed"], errors="ignore")
    major = str(labelled.index[0]) if len(labelled) else "crossover"
    pred = float(df.loc[df["regime"] == major, "predicted_exponent"].mean())
    s = power_law_eigenvalues(gamma, d, kwargs.get("normalisation", "sqrt_d"))
    n_on = switch_on_sample_sizes(df["n"], df["delta"], df["cutoff"].fillna(df["eps"]), s, modes=20)
    return {
        "curve": df,
        "fit": fit,
        "predicted": pred,
        "regime": major,
        "regime_counts": {str(k): int(v) for k, v in counts.items()},
        "switch_on": {
            "n_i": n_on.tolist(),
            "n_i_over_d_i2gamma": (n_on / (d * np.arange(1, n_on.size + 1) ** (2 * gamma))).tolist(),
        },
    }


def regime_map(gamma: float, d: int, ns: Sequence[float], lams: Sequence[float], **kwargs: Any) -> pd.DataFrame:
    """The ``(n, lam)`` phase diagram: one :func:`power_law_curve` per fixed ``lam``, labelled.

    Columns of :func:`power_law_curve` plus ``local_exponent_n`` (measured from the theory curve
    at fixed ``lam``), ``predicted_exponent`` (of the label, ``lam_slope = 0``; for noise-limited
    cells the discrete law's exponent at the cell's ``K``), ``asymptotic_exponent`` (the
    ``K -> infinity`` law), ``finite_d_mismatch``, ``regime``, ``fitted_noise_fraction``,
    ``cutoff_drift``, ``exponent_gap`` (measured - predicted) and, for the noise-limited cells of
    the linear channel, ``finite_d_exponent_shift``: the part of the gap that the change of the
    finite-``d`` departure along ``n`` accounts for (``_label_regimes``; a diagnostic, not a label),
    beside ``discrete_law_exponent`` (the law's exponent at those cells, whatever their label).

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead.analysis import regime_map
    >>> rmap = regime_map(1.25, 1000, np.geomspace(1e3, 1e5, 5), [1e-3, 1e-1, 10.0])  # doctest: +SKIP
    >>> rmap.pivot_table(index="lam", columns="n", values="regime", aggfunc="first")  # doctest: +SKIP
    """
    frames = []
    for lam in lams:
        df = _label_regimes(power_law_curve(gamma, d, ns, lam=float(lam), **kwargs), d, gamma)
        frames.append(df)
    out = pd.concat(frames, ignore_index=True)
    out["exponent_gap"] = out["local_exponent_n"] - out["predicted_exponent"]
    return out
