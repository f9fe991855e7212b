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
# Newton's last step is taken unevaluated when it is predicted to bring ||G|| below this fraction of tol
# (0.1 tol is where an evaluated solve stops; ||G|| bounds the residual up to O(1) factors)
_PREDICT_FRACTION = 1e-3
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


def _du_dx(x: np.ndarray, Q0: float) -> np.ndarray:
    """Jacobian of the u-transform at ``x`` (``q, Sigma > 0``, ``|m| < sqrt(Q0 q)``)."""
    q, m, S = map(float, x)
    sq = math.sqrt(Q0 * q)
    r = m / sq
    c = 1.0 / max(1.0 - r * r, 1e-300)
    return np.array([[1.0 / q, 0.0, 0.0], [-0.5 * r / q * c, c / sq, 0.0], [0.0, 0.0, 1.0 / S]])


def _dx_du(u: np.ndarray, Q0: float) -> np.ndarray:
    """Jacobian of the inverse u-transform at ``u``."""
    q, m, S = _from_u(u, Q0)
    t = math.tanh(u[1])
    return np.array([[q, 0.0, 0.0], [0.5 * m, (1.0 - t * t) * math.sqrt(Q0 * q), 0.0], [0.0, 0.0, S]])


def _residual(x: np.ndarray, fx: np.ndarray, Q0: float) -> float:
    """``max(|dq|, |dm|)/Q0`` and ``|dSigma|/Sigma`` (relative change under one SE step)."""
    d = np.abs(fx - x)
    return float(max(d[0] / Q0, d[1] / Q0, d[2] / max(abs(x[2]), 1e-300)))


def _broyden(G, u0: np.ndarray, J0: np.ndarray | None, *, g0: np.ndarray | None = None, max_eval: int = _ROOT_MAX_EVAL,
             fd_step: float = 1e-5, store: list | None = None,
             exact: Callable[[np.ndarray], np.ndarray | None] | None = None,
             predict_below: float | None = None) -> np.ndarray:
    """Root of ``G`` (3-dim) by Broyden's method with a finite-difference initial Jacobian.

    ``J0`` (e.g. the Jacobian at the previous point of a sweep) skips the finite differences.
    Steps are backtracked on ``||G||``; on failure the Jacobian is recomputed. ``G`` raises to
    signal convergence. Returns the last Jacobian estimate (also kept in ``store[0]``, which
    survives that exception). ``g0 = G(u0)`` if already known. ``exact(u)``: the exact Jacobian of
    ``G`` at ``u`` when the map computed it with the last ``G(u)`` (else ``None``); where it is
    available it replaces the finite differences and the rank-one updates (Newton's method).
    ``predict_below``: after two full Newton steps, when the quadratic rate they show
    (``||G_k|| ~ C ||G_{k-1}||^2``) predicts ``||G||`` below this after the next one, that step is
    taken without evaluating ``G`` there (:class:`_Predicted`: the caller evaluates the point anyway).
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

    Je = exact(u) if exact is not None else None
    J = Je if Je is not None else (np.array(J0, float) if J0 is not None else fd(u, g))
    store[0] = J
    fresh = J0 is None or Je is not None
    newton_norms: list[float] = []  # ||G|| along consecutive full Newton steps
    if Je is not None:
        newton_norms.append(float(np.linalg.norm(g)))
    while n_eval < max_eval:
        try:
            step = -np.linalg.solve(J, g)
        except np.linalg.LinAlgError:
            step = -np.linalg.lstsq(J, g, rcond=None)[0]
        if predict_below is not None and len(newton_norms) >= 2 and newton_norms[-2] > 0:
            rate = newton_norms[-1] / newton_norms[-2] ** 2
            if newton_norms[-1] < newton_norms[-2] and rate * newton_norms[-1] ** 2 < predict_below \
                    and np.linalg.norm(step) < _TRUST_RADIUS:
                raise _Predicted(u + step, rate * newton_norms[-1] ** 2)
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
        Je = exact(un) if exact is not None else None
        J = Je if Je is not None else J + np.outer((gn - g) - J @ s_, s_) / (s_ @ s_)
        store[0] = J
        if Je is not None and t == 1.0:
            newton_norms.append(float(np.linalg.norm(gn)))
        else:
            newton_norms = [float(np.linalg.norm(gn))] if Je is not None else []
        u, g, fresh = un, gn, Je is not None
    return J


def _damped_iteration(F: Callable[[np.ndarray], np.ndarray], x: np.ndarray, Q0: float, *, damping: float,
                      max_steps: int, stop: float, best: tuple[float, np.ndarray], fx0: np.ndarray | None = None
                      ) -> tuple[tuple[float, np.ndarray], int, tuple[np.ndarray, np.ndarray] | None]:
    """Damped iteration ``u <- u + damping (u(F(x(u))) - u)`` until the residual is below ``stop``.

    The damping is multiplied by ``_BACKOFF`` (down to ``_MIN_DAMPING``) whenever the residual
    grows. Returns the best ``(residual, x)`` seen (starting from ``best``), the number of map
    evaluations and the last evaluated pair ``(x, F(x))``. ``fx0``: ``F(x)`` when the caller has it
    (not counted as an evaluation).
    """
    u, dmp, prev, last, steps = _to_u(x, Q0), damping, math.inf, None, 0
    x0 = x
    for i in range(max_steps):
        known = i == 0 and fx0 is not None
        x = x0 if known else _from_u(u, Q0)
        fx = np.asarray(fx0, float) if known else F(x)
        last = (x, fx)
        steps += 0 if known else 1
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


class _Predicted(Exception):
    """Raised by Newton's method when its next step is predicted to land below the tolerance."""

    def __init__(self, u: np.ndarray, norm: float) -> None:
        super().__init__()
        self.u, self.norm = u, norm


def solve_fixed_point(F: Callable[[np.ndarray], np.ndarray], x: np.ndarray, Q0: float, *, tol: float,
                      switch: float, method: str, jacobian: np.ndarray | None, damping: float, max_iter: int,
                      jacobian_of: Callable[[np.ndarray], np.ndarray | None] | None = None,
                      exact_switch: float | None = None, fx0: np.ndarray | None = None
                      ) -> tuple[float, np.ndarray, np.ndarray | None, int]:
    """Fixed point of ``F`` near ``x``: damped pre-iteration, root finder, damped fallback.

    ``method`` is ``"broyden"`` / ``"hybr"`` (pre-iteration to residual ``switch``, then the
    root finder on ``G(u)``, then the fallback iteration at half the damping if needed) or
    ``"iterate"`` (damped iteration only, ``max_iter`` steps). ``jacobian`` seeds Broyden.
    ``jacobian_of(x)``: ``dF/dx`` at ``x`` when the map computed it with its last evaluation ``F(x)``
    (else ``None``); with it Broyden becomes Newton's method (see :func:`_broyden`), and the
    pre-iteration hands over at residual ``exact_switch`` (default ``switch``). ``fx0``: ``F(x)`` if the
    caller just evaluated it (the map's last evaluation, so its Jacobian there is known too).
    Returns ``(residual, x, jacobian, evaluations)`` of the best point found.
    """
    best: tuple[float, np.ndarray] = (math.inf, x)
    if jacobian_of is not None and exact_switch is not None and method == "broyden":
        switch = max(switch, exact_switch)
    if jacobian is not None and method == "broyden":
        switch = max(switch, _SWITCH_WITH_JACOBIAN)  # a Jacobian is known: hand over to Broyden early
    # phase 1: bring a poor initial guess into the basin of the root finder
    stop = tol if method == "iterate" else max(tol, switch)
    best, iterations, last = _damped_iteration(F, x, Q0, damping=damping, stop=stop, best=best, fx0=fx0,
                                               max_steps=max_iter if method == "iterate" else _PRE_ITERATIONS)
    jac_out = None
    if best[0] >= tol and method in ("broyden", "hybr"):
        jac_store: list = [None]
        seen: list = [None]  # (u, F(x(u))) of the last valid evaluation

        def exact(u: np.ndarray) -> np.ndarray | None:
            if jacobian_of is None or seen[0] is None or not np.array_equal(seen[0][0], u):
                return None
            JF = jacobian_of(_from_u(u, Q0))
            if JF is None:
                return None
            Jg = _du_dx(seen[0][1], Q0) @ JF @ _dx_du(u, Q0) - np.eye(3)
            return Jg if np.all(np.isfinite(Jg)) else None

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
            seen[0] = (np.array(u, float), fx)
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
                if g0 is not None:  # the pre-iteration's last evaluation was at x: its Jacobian is the map's last
                    seen[0] = (ux, np.asarray(last[1], float))
                _broyden(G, ux, jacobian, g0=g0, store=jac_store, exact=exact,
                         predict_below=_PREDICT_FRACTION * tol if jacobian_of is not None else None)
        except _Predicted as p:
            # the step is evaluated by the caller (the reporting evaluation), which measures its residual
            xp = _from_u(p.u, Q0)
            if np.all(np.isfinite(xp)):
                best = (p.norm, xp)
        except (_Converged, ValueError, FloatingPointError, np.linalg.LinAlgError):
            pass
        jac_out = jac_store[0]
    if best[0] >= tol and method != "iterate":  # fallback: damped iteration from the best point
        best, steps, _ = _damped_iteration(F, best[1], Q0, damping=0.5 * damping, stop=tol, best=best,
                                           max_steps=max_iter)
        iterations += steps
    return best[0], best[1], jac_out, iterations
