"""Generic fixed-point machinery of the state evolution (private).

The SE is a map ``F: (q, m, Sigma) -> (q', m', Sigma')``. It is solved in the unconstrained
coordinates ``u = (log q, atanh(m/sqrt(Q0 q)), log Sigma)`` (the u-transform) by a damped
iteration that brings a poor start into the basin of a root finder on
``G(u) = u(F(x(u))) - u`` (Broyden's method or MINPACK's hybrid method), with the damped
iteration again as a fallback. Nothing here knows about channels or targets.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

# floor of q and Sigma in the u-transform (complete rank collapse maps to the floor)
_U_FLOOR = 1e-300
# |m|/sqrt(Q0 q) is kept below 1 - _R_MARGIN so that atanh stays finite
_R_MARGIN = 1e-15
# exp() arguments are clipped to +-_EXP_CLIP (float64 range)
_EXP_CLIP = 700
# Broyden: trust region (max step norm in u), backtracking halvings, sufficient-decrease factor
_TRUST_RADIUS = 2.0
_BACKTRACKS = 4
_ARMIJO = 1e-4
# damped iteration: damping is multiplied by _BACKOFF when the residual grows, down to _MIN_DAMPING
_BACKOFF = 0.6
_MIN_DAMPING = 0.05
# the damped pre-iteration hands over to the root finder after at most this many steps,
# and at residual max(switch, _SWITCH_WITH_JACOBIAN) when a Jacobian is already known
_PRE_ITERATIONS = 60
_SWITCH_WITH_JACOBIAN = 0.3
# root-finder evaluation budget, MINPACK tolerances; the root finder stops at 0.1 tol
_ROOT_MAX_EVAL = 60
_HYBR_MAXFEV = 100
_HYBR_EPS = 1e-9
# a map value outside the domain (q <= 0, Sigma <= 0, |m| >= sqrt(Q0 q)) is reported to the
# root finder as this residual in every coordinate
_INVALID_RESIDUAL = 1e3


def _to_u(x: np.ndarray, Q0: float) -> np.ndarray:
    """Unconstrained coordinates: ``(log q, atanh(m/sqrt(Q0 q)), log Sigma)``."""
    q, m, S = map(float, x)
    if not q > 0:  # complete rank collapse (q = m = 0): the floor of the coordinates
        q, m = _U_FLOOR, 0.0
    if not S > 0:
        S = _U_FLOOR
    r = np.clip(m / math.sqrt(Q0 * q), -1 + _R_MARGIN, 1 - _R_MARGIN)
    return np.array([math.log(q), math.atanh(r), math.log(S)])


def _from_u(u: np.ndarray, Q0: float) -> np.ndarray:
    q = math.exp(np.clip(u[0], -_EXP_CLIP, _EXP_CLIP))
    return np.array([q, math.tanh(u[1]) * math.sqrt(Q0 * q), math.exp(np.clip(u[2], -_EXP_CLIP, _EXP_CLIP))])


def _residual(x: np.ndarray, fx: np.ndarray, Q0: float) -> float:
    """``max(|dq|, |dm|)/Q0`` and ``|dSigma|/Sigma`` (relative change under one SE step)."""
    d = np.abs(fx - x)
    return float(max(d[0] / Q0, d[1] / Q0, d[2] / max(abs(x[2]), 1e-300)))


def _broyden(G, u0: np.ndarray, J0: np.ndarray | None, *, g0: np.ndarray | None = None, max_eval: int = _ROOT_MAX_EVAL,
             fd_step: float = 1e-5, store: list | None = None) -> np.ndarray:
    """Root of ``G`` (3-dim) by Broyden's method with a finite-difference initial Jacobian.

    ``J0`` (e.g. the Jacobian at the previous point of a sweep) skips the finite differences.
    Steps are backtracked on ``||G||``; on failure the Jacobian is recomputed. ``G`` raises to
    signal convergence. Returns the last Jacobian estimate (also kept in ``store[0]``, which
    survives that exception). ``g0 = G(u0)`` if already known.
    """
    u = np.asarray(u0, float)
    g = G(u) if g0 is None else np.asarray(g0, float)
    n_eval = 1
    store = store if store is not None else [None]

    def fd(u, g):
        nonlocal n_eval
        J = np.empty((3, 3))
        for k in range(3):
            e = np.zeros(3)
            e[k] = fd_step
            J[:, k] = (G(u + e) - g) / fd_step
            n_eval += 1
        return J

    J = np.array(J0, float) if J0 is not None else fd(u, g)
    store[0] = J
    fresh = J0 is None
    while n_eval < max_eval:
        try:
            step = -np.linalg.solve(J, g)
        except np.linalg.LinAlgError:
            step = -np.linalg.lstsq(J, g, rcond=None)[0]
        nrm = np.linalg.norm(step)
        if nrm > _TRUST_RADIUS:  # trust region in log coordinates
            step *= _TRUST_RADIUS / nrm
        t, accepted = 1.0, False
        for _ in range(_BACKTRACKS):
            un = u + t * step
            gn = G(un)
            n_eval += 1
            if np.linalg.norm(gn) < (1 - _ARMIJO * t) * np.linalg.norm(g):
                accepted = True
                break
            t *= 0.5
        if not accepted:
            if fresh:
                return J  # Jacobian is fresh and no progress: give up (fallback takes over)
            J, fresh = fd(u, g), True
            store[0] = J
            continue
        s_ = un - u
        J = J + np.outer((gn - g) - J @ s_, s_) / (s_ @ s_)
        store[0] = J
        u, g, fresh = un, gn, False
    return J


def _damped_iteration(F: Callable[[np.ndarray], np.ndarray], x: np.ndarray, Q0: float, *, damping: float,
                      max_steps: int, stop: float, best: tuple[float, np.ndarray]
                      ) -> tuple[tuple[float, np.ndarray], int, tuple[np.ndarray, np.ndarray] | None]:
    """Damped iteration ``u <- u + damping (u(F(x(u))) - u)`` until the residual is below ``stop``.

    The damping is multiplied by ``_BACKOFF`` (down to ``_MIN_DAMPING``) whenever the residual
    grows. Returns the best ``(residual, x)`` seen (starting from ``best``), the number of map
    evaluations and the last evaluated pair ``(x, F(x))``.
    """
    u, dmp, prev, last, steps = _to_u(x, Q0), damping, math.inf, None, 0
    for _ in range(max_steps):
        x = _from_u(u, Q0)
        fx = F(x)
        last = (x, fx)
        steps += 1
        r = _residual(x, fx, Q0)
        if r < best[0]:
            best = (r, x)
        if r < stop:
            break
        if r > prev:
            dmp = max(_MIN_DAMPING, _BACKOFF * dmp)
        prev = r
        u = u + dmp * (_to_u(fx, Q0) - u)
    return best, steps, last


class _Converged(Exception):
    """Raised inside the root finder's function when the residual is small enough."""


def solve_fixed_point(F: Callable[[np.ndarray], np.ndarray], x: np.ndarray, Q0: float, *, tol: float,
                      switch: float, method: str, jacobian: np.ndarray | None, damping: float, max_iter: int
                      ) -> tuple[float, np.ndarray, np.ndarray | None, int]:
    """Fixed point of ``F`` near ``x``: damped pre-iteration, root finder, damped fallback.

    ``method`` is ``"broyden"`` / ``"hybr"`` (pre-iteration to residual ``switch``, then the
    root finder on ``G(u)``, then the fallback iteration at half the damping if needed) or
    ``"iterate"`` (damped iteration only, ``max_iter`` steps). ``jacobian`` seeds Broyden.
    Returns ``(residual, x, jacobian, evaluations)`` of the best point found.
    """
    best: tuple[float, np.ndarray] = (math.inf, x)
    if jacobian is not None and method == "broyden":
        switch = max(switch, _SWITCH_WITH_JACOBIAN)  # a Jacobian is known: hand over to Broyden early
    # phase 1: bring a poor initial guess into the basin of the root finder
    stop = tol if method == "iterate" else max(tol, switch)
    best, iterations, last = _damped_iteration(F, x, Q0, damping=damping, stop=stop, best=best,
                                               max_steps=max_iter if method == "iterate" else _PRE_ITERATIONS)
    jac_out = None
    if best[0] >= tol and method in ("broyden", "hybr"):
        jac_store: list = [None]

        def G(u: np.ndarray) -> np.ndarray:
            nonlocal best, iterations
            xx = _from_u(u, Q0)
            iterations += 1
            try:
                fx = F(xx)
            except (ValueError, FloatingPointError, ZeroDivisionError, np.linalg.LinAlgError):
                return np.full(3, _INVALID_RESIDUAL)
            if not np.all(np.isfinite(fx)) or fx[0] <= 0 or fx[2] <= 0 or fx[1] ** 2 >= Q0 * fx[0]:
                return np.full(3, _INVALID_RESIDUAL)
            r = _residual(xx, fx, Q0)
            if r < best[0]:
                best = (r, xx)
            if r < 0.1 * tol:
                raise _Converged
            return _to_u(fx, Q0) - u

        x = best[1]
        try:
            if method == "hybr":
                from scipy import optimize  # imported here: it costs ~0.2 s at start-up

                optimize.root(G, _to_u(x, Q0), method="hybr",
                              options={"xtol": tol * 1e-2, "maxfev": _HYBR_MAXFEV, "eps": _HYBR_EPS})
            else:
                ux = _to_u(x, Q0)
                g0 = _to_u(last[1], Q0) - ux if last is not None and np.array_equal(last[0], x) else None
                _broyden(G, ux, jacobian, g0=g0, store=jac_store)
        except (_Converged, ValueError, FloatingPointError, np.linalg.LinAlgError):
            pass
        jac_out = jac_store[0]
    if best[0] >= tol and method != "iterate":  # fallback: damped iteration from the best point
        best, steps, _ = _damped_iteration(F, best[1], Q0, damping=0.5 * damping, stop=tol, best=best,
                                           max_steps=max_iter)
        iterations += steps
    return best[0], best[1], jac_out, iterations
