"""Finite-K scaling laws: the discrete sums behind the power-law exponents (docs: Theory, :ref:`theory-scaling`).

The exponents of :mod:`singlehead.analysis.scaling` are ``K -> infinity`` limits of sums over the
modes ``t_i = s_i/sqrt(d) = i^{-gamma}`` (normalisation ``A = sqrt(d)``). At the ``K`` of the
reproduction grids (5-80 recovered modes) the sums are far from their integrals; this module
evaluates them exactly, so that a prediction can be stated *at the cell's K*.

**Noise-limited recovery** (``"tail_noise"``, ``"label_noise"``; linear channel ``T = 1``). In
units of ``sqrt(d)`` (``dt = delta/sqrt(d)``, ``x = n/d``) the state evolution gives exactly
``2 x dt^2 = E + Delta/2`` (``E`` the matrix error). When detection binds, in the large-``d``
limit the cut-off sits at the edge of the noise bulk (``c = 2 delta``: the ``d``-dimensional bulk
absorbs the degrees of freedom that the spikes do not use, at no cost in error as
``d -> infinity``). A detected mode (``r = dt/t_i < 1``) has its outlier at ``t + dt^2/t``,
squared overlap ``1 - r^2`` and estimate ``t (1 - r)^2``, hence the error (in units of ``t^2``)

    phi(r) = 1 + (1 - r)^4 - 2 (1 - r)^3 (1 + r)     (r < 1),     phi(r) = 1     (r >= 1),

``phi(r) ≈ 6 r^2`` for strong modes, ``phi(1) = 1``, ``phi'(r) = 12 r (1 - r)^2`` (``C^2`` at the
detection point). So ``E(dt) = sum_{i <= d} t_i^2 phi(dt/t_i)``, ``x(dt) = (E + Delta/2)/(2 dt^2)``
and the local exponent along this discrete law is exactly

    p = a / (2 - a E/(E + Delta/2)),     a = d log E / d log dt = 12 sum_det t^2 r^2 (1-r)^2 / E.

Continuum limit: ``a -> 2 - 1/gamma``, so ``p -> 2 gamma - 1`` (``Delta = 0``, best-K-term rate)
and ``p -> 1 - 1/(2 gamma)`` (``Delta/2 >> E``). **Finite K lowers p by about 1.9/K** at
``gamma = 1.25``, ``Delta = 0`` (``p = 1.31 / 1.41 / 1.44 / 1.46 / 1.48`` at ``K = 10 / 20 / 30 /
50 / 100`` against 1.5): the discrete ``K``-term error of the recovered modes, ``sum_{i <= K}
t_i^2 phi``, has an ``O(1)`` share of top modes far above the noise whose error ``6 dt^2`` does
not follow the continuum.

**Finite d.** The large-``d`` law needs the bulk to take up the surplus degrees of freedom at
its edge. At finite ``d`` the cut-off moves into the bulk (``c/delta`` = 1.6 -> 1.1 at ``d = 1000``,
``K = 5 -> 80``), the recovered modes are shrunk less and noise directions are fitted: the error
at the fixed point's ``delta`` departs from ``E(dt)`` (relative ``E_SE/E(dt) - 1 = -0.12`` at
``K = 5`` to ``-0.37`` at ``K = 80``, ``d = 1000``), and this departure grows along the curve as a
power of ``x/d`` (``(x/d)^{2/5}`` near the edge), so it shifts the local exponent by about its own
size (at ``d = 1000`` the measured exponents exceed ``p`` by 0.12-0.55). :func:`finite_d_mismatch`
returns that relative departure for a fixed point; a cell whose mismatch exceeds the exponent
tolerance is not in the large-``d`` regime (a crossover), whatever its ``K``.

**Threshold-limited recovery** (``c > 2 delta``, ``delta -> 0``): the best soft-threshold error of
the power law, ``E(e) = sum_i min(t_i, e)^2`` (``e = eps/sqrt(d)``). Averaged over one switch-on
period ``e in [t_{K+1}, t_K]`` (single modes switching on are steps, not a power law), its
exponent in ``e`` is ``a_K = log(F_K/F_{K+1}) / (gamma log((K+1)/K))`` with
``F_K = K t_K^2 + sum_{i > K} t_i^2``; Euler–Maclaurin gives
``a_K = (2 - 1/gamma)(1 - 1/(4 gamma K) + O(K^-2))`` (:func:`threshold_exponent_leading`).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "recovered_mode_error",
    "noise_limited_law",
    "noise_limited_exponent",
    "finite_d_mismatch",
    "threshold_switch_on_exponent",
    "threshold_exponent_leading",
]


def _modes(gamma: float, d: int) -> np.ndarray:
    if gamma <= 0.5:
        raise ValueError(f"gamma must be > 0.5 (got {gamma!r})")
    if not (int(d) >= 2):
        raise ValueError(f"d must be >= 2 (got {d!r})")
    return np.arange(1, int(d) + 1, dtype=float) ** -float(gamma)


def recovered_mode_error(r: np.ndarray) -> np.ndarray:
    """``phi(r)``: error of a mode with ``r = delta/s`` in units of ``s^2`` (cut-off at the bulk edge)."""
    r = np.asarray(r, dtype=float)
    rc = np.minimum(r, 1.0)
    return np.where(r < 1.0, 1.0 + (1.0 - rc) ** 4 - 2.0 * (1.0 - rc) ** 3 * (1.0 + rc), 1.0)


def noise_limited_law(dt: float, gamma: float, d: int, noise: float = 0.0) -> dict[str, float]:
    """The discrete noise-limited law at ``dt = delta/sqrt(d)`` (module docstring).

    Returns ``E`` (matrix error), ``x`` (``n/d`` at which this ``dt`` is the fixed point), ``K``
    (detected modes), ``a = d log E/d log dt`` and ``exponent`` (``-d log E/d log n``, exact
    derivative of the discrete law).

    Examples
    --------
    >>> from singlehead.analysis import noise_limited_law
    >>> law = noise_limited_law(0.1, gamma=1.25, d=1000)
    >>> law["K"], round(law["E"], 3)
    (6, 0.221)
    """
    t = _modes(gamma, d)
    dt = float(dt)
    if not (math.isfinite(dt) and dt > 0):
        raise ValueError(f"dt must be > 0 (got {dt!r})")
    r = dt / t
    det = r < 1.0
    E = float(np.sum(t * t * recovered_mode_error(r)))
    rd = r[det]
    a = 12.0 * float(np.sum(t[det] ** 2 * rd * rd * (1.0 - rd) ** 2)) / E
    h = 0.5 * float(noise)
    return {
        "E": E,
        "x": (E + h) / (2.0 * dt * dt),
        "K": int(det.sum()),
        "a": a,
        "exponent": a / (2.0 - a * E / (E + h)),
    }


def noise_limited_exponent(dt: float, gamma: float, d: int, noise: float = 0.0) -> float:
    """Local exponent of the discrete noise-limited law at ``dt`` (finite ``K``, large ``d``)."""
    return noise_limited_law(dt, gamma, d, noise)["exponent"]


def finite_d_mismatch(delta: float, matrix_error: float, gamma: float, d: int) -> float:
    """``E_SE / E(dt) - 1``: departure of a fixed point's error from the large-``d`` law at its ``delta``.

    ``delta`` and ``matrix_error`` are the fixed point's (normalisation ``A = sqrt(d)``).

    Examples
    --------
    >>> from singlehead.analysis import finite_d_mismatch, noise_limited_law
    >>> law = noise_limited_law(0.1, gamma=1.25, d=1000)
    >>> round(finite_d_mismatch(0.1 * 1000**0.5, law["E"], gamma=1.25, d=1000), 6)   # on the law: 0
    0.0
    """
    law = noise_limited_law(float(delta) / math.sqrt(d), gamma, d)
    return float(matrix_error) / law["E"] - 1.0


def _F(K: np.ndarray, gamma: float, n_tail: int) -> np.ndarray:
    i = np.arange(1, n_tail + 1, dtype=float)
    t2 = i ** (-2.0 * gamma)
    tail = np.cumsum(t2[::-1])[::-1]  # tail[k] = sum_{i >= k+1} t_i^2
    beyond = n_tail ** (1.0 - 2.0 * gamma) / (2.0 * gamma - 1.0)  # modes past n_tail (integral)
    K = np.asarray(K, dtype=int)
    return K * K ** (-2.0 * gamma) + tail[K] + beyond


def threshold_switch_on_exponent(K: int | np.ndarray, gamma: float, n_tail: int = 1_000_000) -> np.ndarray:
    """``a_K``: exponent in ``eps`` of ``sum_i min(t_i, e)^2`` over the switch-on period of mode ``K+1``.

    Direct discrete sums (``sum_{i > K}`` to ``n_tail``, integral beyond). Multiply by
    ``1 - lam_slope`` for the exponent in ``n`` (``eps ∝ lam d^{3/2}/n``).

    Examples
    --------
    >>> from singlehead.analysis import threshold_switch_on_exponent
    >>> [round(float(a), 3) for a in threshold_switch_on_exponent([5, 50], gamma=1.25)]
    [1.161, 1.195]
    """
    K = np.atleast_1d(np.asarray(K, dtype=int))
    if np.any(K < 1) or np.any(K + 1 >= n_tail):
        raise ValueError("K must be in [1, n_tail - 2]")
    return np.log(_F(K, gamma, n_tail) / _F(K + 1, gamma, n_tail)) / (gamma * np.log((K + 1.0) / K))


def threshold_exponent_leading(K: int | np.ndarray, gamma: float) -> np.ndarray:
    """Euler–Maclaurin to ``O(1/K)``: ``a_K ≈ (2 - 1/gamma)(1 - 1/(4 gamma (K + 1/2)))``.

    ``F_K = K^{1-2 gamma} [2 gamma/(2 gamma - 1) - 1/(2K) + O(K^-2)]`` gives
    ``d log F/d log K = (1 - 2 gamma) + (2 gamma - 1)/(4 gamma K)``; the secant over ``[K, K+1]``
    evaluates it at ``K + 1/2``.
    """
    K = np.asarray(K, dtype=float)
    return (2.0 - 1.0 / gamma) * (1.0 - 1.0 / (4.0 * gamma * (K + 0.5)))
