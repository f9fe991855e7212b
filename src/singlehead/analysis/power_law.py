"""Power-law targets: state evolution over decades of ``n``, sequential mode recovery.

Sources: arXiv 2509.24914 (§4, power-law targets of tied attention), arXiv 2509.24882
(scaling laws and spectra of shallow networks: sequential recovery / emergence of the modes of
a power-law quadratic target), arXiv 2505.17958 (nuclear route). docs: Theory, :ref:`theory-scaling`.

Target ``S0 = O diag(s) O^T`` with ``s_i = A i^{-gamma}``, ``i = 1..d`` (``gamma > 1/2``):
normalisation ``"sqrt_d"`` (``A = sqrt d``, arXiv 2509.24914) or ``"unit_q0"``
(``Q0 = Tr S0^2/d = 1``, arXiv 2509.24882), see :class:`singlehead.model.problem.PowerLawTarget`.

**Recovery of mode i** at a state-evolution fixed point ``(delta, eps, c)`` (``c >= eps`` the
cut-off on the scale of ``Y = S0 + delta Z``): the mode is *detected* when ``s_i > delta``
(BBP: an outlier of ``Y`` exists, at ``s_i + delta^2/s_i``, null-bulk approximation) and
*survives* the threshold when ``s_i + delta^2/s_i > c`` (docs: Theory, :ref:`theory-scaling`; the rough rule is
``s_i > eps``). ``K(n)`` is the number of recovered modes. Since ``delta^2 ≈ (E + Delta/2) /
(2 alpha K_pairs)`` (linear channel, ``E`` the matrix error) and ``s_i^2 = A^2 i^{-2 gamma}``, mode
``i`` switches on at ``n_i ~ d i^{2 gamma}`` (``A = sqrt d``): sequential recovery.

Prior models (``prior`` argument):

* ``"finite"``: exact eigendecompositions of ``diag(s) + delta Z`` for fixed GOE draws
  (:class:`singlehead.numerics.spectra.FiniteDSpectrum`; costly: ``O(draws d^3)`` per SE step);
* ``"asymptotic"``: free convolution of the discrete law of the ``d`` eigenvalues with the
  semicircle (deterministic equivalent at this ``d``);
* ``"spiked"`` (large-``d`` limit): the ``s_i`` above ``spike_floor`` are spikes of mass
  ``1/d`` over a null bulk (:class:`singlehead.numerics.spectra.SpikedLaw`), ``Q0`` keeps the energy of
  all ``d`` modes (the rest is never recovered and counts as error).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from singlehead.model.problem import PowerLawTarget, Problem
from singlehead.model.results import Result
from singlehead.model.targets import power_law_eigenvalues
from singlehead.state_evolution import SEOptions, prior_model, theory

__all__ = [
    "power_law_problem",
    "spiked_prior",
    "recovered_modes",
    "switch_on_sample_sizes",
    "power_law_curve",
    "PRIORS",
]

PRIORS = ("finite", "asymptotic", "spiked")


def _lam_value(lam: float | Callable[[float], float], alpha: float) -> float:
    v = float(lam(alpha)) if callable(lam) else float(lam)
    if not (math.isfinite(v) and v >= 0):
        raise ValueError(f"lam must be >= 0 (got {v!r} at alpha={alpha!r})")
    return v


def power_law_problem(
    gamma: float,
    d: int,
    n: float,
    *,
    lam: float = 0.0,
    noise: float = 0.0,
    normalisation: str = "sqrt_d",
    channel: str = "linear",
    T: int = 1,
    kappa: float = 1.0,
    **kw: Any,
) -> Problem:
    """``Problem`` with a power-law target and ``alpha = n/d^2`` (validated; ValueError names the field).

    Defaults: the linear channel with ``T = 1`` (the quadratic network of the scaling-law
    papers) and the ``sqrt_d`` normalisation ``s_i = sqrt(d) i^-gamma``.

    Examples
    --------
    >>> from singlehead.analysis import power_law_problem
    >>> problem = power_law_problem(1.25, d=100, n=5000, lam=0.01)
    >>> problem.alpha, problem.channel.name, problem.T, problem.target.gamma
    (0.5, 'linear', 1, 1.25)
    """
    if not (isinstance(d, int) and d >= 2):
        raise ValueError(f"d must be an integer >= 2 (got {d!r})")
    if not (math.isfinite(float(n)) and n > 0):
        raise ValueError(f"n must be > 0 (got {n!r})")
    return Problem(
        d=d,
        T=T,
        alpha=float(n) / d**2,
        channel=channel,
        noise=noise,
        lam=lam,
        kappa=kappa,
        target=PowerLawTarget(gamma=gamma, normalisation=normalisation),
        **kw,
    )


def spiked_prior(problem: Problem, *, spike_floor: float = 0.0, max_spikes: int | None = None):
    """Large-``d`` prior model: spikes ``s_i > spike_floor`` of mass ``1/d`` over a null bulk.

    Returns a :class:`singlehead.state_evolution.PriorModel` (``mode="asymptotic"``) whose
    ``Q0`` is ``sum_i s_i^2 / d`` over all ``d`` modes.

    Examples
    --------
    >>> from singlehead import PowerLawTarget, Problem
    >>> from singlehead.analysis import spiked_prior
    >>> prior = spiked_prior(Problem(d=500, target=PowerLawTarget(1.25)), spike_floor=1.0)
    >>> prior.Q0 > 0.0
    True
    """
    if not problem.target.scaling_law:  # Target.scaling_law: a power-law spectrum
        raise ValueError("spiked_prior needs a power-law target")
    return problem.target.spectral_law(problem.d, "spiked_null", spike_floor=spike_floor, max_spikes=max_spikes)


def recovered_modes(s: np.ndarray, delta: float, eps: float, cutoff: float | None = None) -> dict[str, Any]:
    """Which target modes are recovered at ``(delta, eps, c)`` (module docstring).

    Returns ``detected`` (``s_i > delta``), ``survives`` (``s_i + delta^2/s_i > c``, ``c = cutoff``
    or ``eps``), ``recovered`` (both), ``K`` (their number), ``K_simple``
    (``#{s_i > max(delta, eps)}``, the rough rule of docs: Theory, :ref:`theory-scaling`).

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead.analysis import recovered_modes
    >>> modes = recovered_modes(np.array([3.0, 2.0, 1.0, 0.5]), delta=1.2, eps=0.5)
    >>> modes["K"], modes["recovered"].tolist()         # s_i > delta: the first two modes
    (2, [True, True, False, False])
    """
    s = np.asarray(s, dtype=float)
    c = eps if cutoff is None or not math.isfinite(cutoff) else cutoff
    with np.errstate(divide="ignore"):
        pos = s + delta * delta / np.where(s > 0, s, np.nan)
    det = s > delta
    surv = np.nan_to_num(pos, nan=-np.inf) > c
    rec = det & surv
    return {
        "detected": det,
        "survives": surv,
        "recovered": rec,
        "K": int(rec.sum()),
        "K_simple": int(np.sum(s > max(delta, eps))),
    }


def switch_on_sample_sizes(
    ns: Sequence[float], deltas: Sequence[float], cutoffs: Sequence[float], s: np.ndarray, modes: int | None = None
) -> np.ndarray:
    """Sample size ``n_i`` at which mode ``i`` becomes recovered, from a theory curve.

    The recovery margin ``g_i(n) = min(s_i - delta(n), s_i + delta^2/s_i - c(n))`` is
    interpolated linearly in ``log n`` between the grid points where it changes sign (first
    crossing from below). ``nan`` for modes not recovered on the grid (or already recovered
    at its first point: then ``n_i <= ns[0]`` and ``-inf`` is returned).

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead.analysis import switch_on_sample_sizes
    >>> s = np.array([3.0, 2.0, 1.0])
    >>> n_i = switch_on_sample_sizes([1e3, 1e4, 1e5], [2.5, 1.5, 0.5], [0.1, 0.1, 0.1], s)
    >>> n_i.shape
    (3,)
    """
    ns = np.asarray(ns, dtype=float)
    dl = np.asarray(deltas, dtype=float)[:, None]
    cc = np.asarray(cutoffs, dtype=float)[:, None]
    s = np.asarray(s, dtype=float)[: modes if modes else None][None, :]
    g = np.minimum(s - dl, s + dl * dl / s - cc)  # (n_grid, modes)
    out = np.full(s.shape[1], np.nan)
    ln = np.log(ns)
    for i in range(s.shape[1]):
        gi = g[:, i]
        if gi[0] > 0:
            out[i] = -np.inf
            continue
        up = np.nonzero((gi[:-1] <= 0) & (gi[1:] > 0))[0]
        if up.size:
            j = up[0]
            t = -gi[j] / (gi[j + 1] - gi[j])
            out[i] = float(np.exp(ln[j] + t * (ln[j + 1] - ln[j])))
    return out


def _failed_row(n: float, a: float, lam: float, runtime_s: float, exc: Exception) -> dict[str, Any]:
    nan = math.nan
    return {
        "n": n,
        "alpha": a,
        "lam": lam,
        "test_error": nan,
        "test_error_noisy": nan,
        "excess_error": nan,
        "matrix_error": nan,
        "rank_fraction": nan,
        "q": nan,
        "m": nan,
        "delta": nan,
        "eps": nan,
        "eta": nan,
        "cutoff": nan,
        "K": 0,
        "K_simple": 0,
        "converged": False,
        "residual": nan,
        "runtime_s": runtime_s,
        "recovered": (),
        "error": f"{type(exc).__name__}: {exc}",
    }


def _curve_row(
    n: float, a: float, lam: float, r: Result, s: np.ndarray, modes: int, runtime_s: float
) -> dict[str, Any]:
    ex = r.extras
    cut = float(ex.get("cutoff", math.nan))
    rm = recovered_modes(s, ex["delta"], ex["eps"], cut)
    return {
        "n": n,
        "alpha": a,
        "lam": lam,
        "test_error": r.test_error,
        "test_error_noisy": r.test_error_noisy,
        "excess_error": r.test_error,
        "matrix_error": r.matrix_error,
        "rank_fraction": r.rank_fraction,
        "q": ex["q"],
        "m": ex["m"],
        "delta": ex["delta"],
        "eps": ex["eps"],
        "eta": ex["eta"],
        "cutoff": cut,
        "K": rm["K"],
        "K_simple": rm["K_simple"],
        "converged": bool(r.converged),
        "residual": ex["residual"],
        "runtime_s": runtime_s,
        "recovered": tuple(int(b) for b in rm["recovered"][:modes]),
        "error": "",
    }


def power_law_curve(
    gamma: float,
    d: int,
    ns: Sequence[float],
    *,
    lam: float | Callable[[float], float] = 1e-3,
    noise: float = 0.1,
    normalisation: str = "sqrt_d",
    prior: str = "asymptotic",
    channel: str = "linear",
    T: int = 1,
    kappa: float = 1.0,
    draws: int = 2,
    seed: int = 0,
    spike_floor: float | None = None,
    modes: int = 50,
    tol: float = 1e-8,
) -> pd.DataFrame:
    """State-evolution curve over sample sizes for a power-law target (docs: Theory, :ref:`theory-scaling`).

    Parameters
    ----------
    gamma, d : float, int
        Power-law exponent (> 1/2) and dimension.
    ns : sequence of float
        Sample sizes (``alpha = n/d^2``), increasing; warm-started in this order.
    lam : float or callable
        Regularisation, or a function of ``alpha`` (e.g. ``lambda a: 0.1 * sqrt(a)``).
    noise, normalisation, channel, T, kappa :
        Problem fields.
    prior : {"finite", "asymptotic", "spiked"}
        Prior model (module docstring).
    draws, seed : int
        GOE draws and their seed for ``prior="finite"``.
    spike_floor : float, optional
        ``prior="spiked"``: modes with ``s_i <= spike_floor`` go to the null bulk (default:
        ``0.2 x`` the smallest ``delta`` expected on the grid, from ``delta^2 ~ Q0/(2 alpha)``).
    modes : int
        Number of leading modes whose recovery flags are reported (column ``recovered``).

    Returns
    -------
    DataFrame
        One row per ``n``: ``n, alpha, lam, test_error, test_error_noisy, excess_error``
        (= ``test_error``, against noiseless labels), ``matrix_error, rank_fraction, q, m,
        delta, eps, eta, cutoff, K, K_simple, converged, residual, runtime_s``, ``error`` (message
        when the state evolution raised; the row is then nan) and
        ``recovered`` (tuple of 0/1 flags of the first ``modes`` modes).

    Examples
    --------
    >>> from singlehead.analysis import power_law_curve
    >>> curve = power_law_curve(1.25, 200, [2e3, 2e4, 2e5], lam=1e-3, noise=0.1)
    >>> curve.K.tolist() == sorted(curve.K.tolist())    # modes switch on one by one as n grows
    True
    >>> bool((curve.test_error.diff().dropna() < 0).all())
    True
    """
    if prior not in PRIORS:
        raise ValueError(f"prior must be one of {PRIORS} (got {prior!r})")
    ns = [float(n) for n in ns]
    if not ns or any(not (math.isfinite(n) and n > 0) for n in ns):
        raise ValueError("ns must be a non-empty list of sample sizes > 0")
    p0 = power_law_problem(
        gamma,
        d,
        ns[0],
        lam=_lam_value(lam, ns[0] / d**2),
        noise=noise,
        normalisation=normalisation,
        channel=channel,
        T=T,
        kappa=kappa,
    )
    s = power_law_eigenvalues(gamma, d, normalisation)
    if prior == "spiked":
        if spike_floor is None:
            a_max = max(ns) / d**2
            spike_floor = 0.2 * math.sqrt(max(float(np.mean(s * s)), 1e-12) * 0.01 / (2 * a_max * p0.n_pairs))
        pm = spiked_prior(p0, spike_floor=spike_floor)
    else:
        pm = prior_model(p0, prior, draws=draws, seed=seed)
    rows = []
    init = None
    options = SEOptions(tol=tol)
    for n in ns:
        a = n / d**2
        p = p0.replace(alpha=a, lam=_lam_value(lam, a))
        t0 = time.perf_counter()
        try:
            r: Result = theory(p, prior=pm, init=init, options=options)
        except (ValueError, FloatingPointError, ZeroDivisionError) as exc:
            # e.g. q -> 0 at complete rank collapse makes the SE's log-coordinates fail
            rows.append(_failed_row(n, a, p.lam, time.perf_counter() - t0, exc))
            init = None
            continue
        ex = r.extras
        if r.converged:
            init = [ex["q"], ex["m"], ex["Sigma"]]
        rows.append(_curve_row(n, a, p.lam, r, s, modes, time.perf_counter() - t0))
    df = pd.DataFrame(rows)
    df.attrs.update(
        {
            "gamma": gamma,
            "d": d,
            "normalisation": normalisation,
            "prior": prior,
            "noise": noise,
            "channel": channel,
            "T": T,
            "Q0": pm.Q0,
            "n_spikes": pm.description.get("n_spikes"),
        }
    )
    return df
