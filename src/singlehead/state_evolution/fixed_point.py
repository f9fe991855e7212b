"""Generic fixed-point machinery of the state evolution.

The SE is a map ``F: (q, m, Sigma) -> (q', m', Sigma')`` on each block of fields (``3 B``
overlaps for ``B`` blocks). It is solved in the unconstrained coordinates
``u = (log q, atanh(m/sqrt(Q0 q)), log Sigma)`` of each block (the u-transform) by a damped
iteration that brings a poor start into the basin of a root finder on
``G(u) = u(F(x(u))) - u`` (Broyden's method or MINPACK's hybrid method), with the damped
iteration again as a fallback. Nothing here knows about channels or targets.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

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


def _block_norms(Q0: float | Sequence[float]) -> tuple[float, ...]:
    """The teacher norm of each block of three overlaps (a single ``Q0``: one block)."""
    return (float(Q0),) if np.ndim(Q0) == 0 else tuple(float(v) for v in Q0)


def to_u(x: np.ndarray, Q0: float | Sequence[float]) -> np.ndarray:
    """Unconstrained coordinates: ``(log q, atanh(m/sqrt(Q0 q)), log Sigma)`` of each block of ``x``.

    ``x`` holds ``3 B`` overlaps, block ``b`` being ``x[3b:3b+3] = (q, m, Sigma)`` with teacher norm
    ``Q0[b]`` (a single ``Q0``: one block). A block without teacher (``Q0[b] = 0``) has ``m = 0`` (its
    second coordinate is 0) and keeps ``q`` itself as first coordinate: its ``q`` may decay to (nearly) 0
    at the fixed point (labels that carry nothing of the block), where ``log q`` would have no root
    for a root finder to reach (``G = log(F(q)/q)`` tends to a constant)."""
    out = []
    for b, Qb in enumerate(_block_norms(Q0)):
        q, m, S = map(float, x[3 * b : 3 * b + 3])
        if not S > 0:
            S = _U_FLOOR
        if not Qb > 0:
            out += [q, 0.0, math.log(S)]
            continue
        if not q > 0:  # complete rank collapse (q = m = 0): the floor of the coordinates
            q, m = _U_FLOOR, 0.0
        r = np.clip(m / math.sqrt(Qb * q), -1 + _R_MARGIN, 1 - _R_MARGIN)
        out += [math.log(q), math.atanh(r), math.log(S)]
    return np.array(out)


def from_u(u: np.ndarray, Q0: float | Sequence[float]) -> np.ndarray:
    """The inverse of :func:`to_u`."""
    out = []
    for b, Qb in enumerate(_block_norms(Q0)):
        ub = u[3 * b : 3 * b + 3]
        if not Qb > 0:
            out += [float(ub[0]), 0.0, math.exp(np.clip(ub[2], -_EXP_CLIP, _EXP_CLIP))]
            continue
        q = math.exp(np.clip(ub[0], -_EXP_CLIP, _EXP_CLIP))
        out += [q, math.tanh(ub[1]) * math.sqrt(Qb * q), math.exp(np.clip(ub[2], -_EXP_CLIP, _EXP_CLIP))]
    return np.array(out)


def du_dx(x: np.ndarray, Q0: float | Sequence[float]) -> np.ndarray:
    """Jacobian of the u-transform at ``x`` (``q, Sigma > 0``, ``|m| < sqrt(Q0 q)`` in each block; block diagonal)."""
    Qs = _block_norms(Q0)
    J = np.zeros((3 * len(Qs), 3 * len(Qs)))
    for b, Qb in enumerate(Qs):
        q, m, S = map(float, x[3 * b : 3 * b + 3])
        if not Qb > 0:  # no teacher in this block: q itself, m = 0 is not a coordinate
            J[3 * b : 3 * b + 3, 3 * b : 3 * b + 3] = [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 1.0 / S]]
            continue
        sq = math.sqrt(Qb * q)
        r = m / sq
        c = 1.0 / max(1.0 - r * r, 1e-300)
        J[3 * b : 3 * b + 3, 3 * b : 3 * b + 3] = [
            [1.0 / q, 0.0, 0.0],
            [-0.5 * r / q * c, c / sq, 0.0],
            [0.0, 0.0, 1.0 / S],
        ]
    return J


def dx_du(u: np.ndarray, Q0: float | Sequence[float]) -> np.ndarray:
    """Jacobian of the inverse u-transform at ``u`` (block diagonal)."""
    Qs = _block_norms(Q0)
    x = from_u(u, Q0)
    J = np.zeros((3 * len(Qs), 3 * len(Qs)))
    for b, Qb in enumerate(Qs):
        q, m, S = x[3 * b : 3 * b + 3]
        if not Qb > 0:
            J[3 * b : 3 * b + 3, 3 * b : 3 * b + 3] = [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, S]]
            continue
        t = math.tanh(u[3 * b + 1])
        J[3 * b : 3 * b + 3, 3 * b : 3 * b + 3] = [
            [q, 0.0, 0.0],
            [0.5 * m, (1.0 - t * t) * math.sqrt(Qb * q), 0.0],
            [0.0, 0.0, S],
        ]
    return J


def step_residual(x: np.ndarray, fx: np.ndarray, Q0: float | Sequence[float]) -> float:
    """The relative change under one SE step: ``max(|dq|, |dm|)/Q0`` and ``|dSigma|/Sigma`` over the blocks.

    ``q`` and ``m`` of every block are measured against the teacher's whole norm ``Q0 = sum_b Q0[b]``
    (the blocks' overlaps add up: ``q = sum_b q_b``), so a block whose overlaps are small (or whose
    teacher part is 0) is held to the same absolute accuracy as the others."""
    d = np.abs(fx - x)
    norms = _block_norms(Q0)
    Qt = norms[0] if len(norms) == 1 else sum(norms)
    terms = []
    for b in range(len(norms)):
        i = 3 * b
        terms += [d[i] / Qt, d[i + 1] / Qt, d[i + 2] / max(abs(x[i + 2]), 1e-300)]
    return float(max(terms))


def in_domain(x: np.ndarray, Q0: float | Sequence[float]) -> bool:
    """Whether ``x`` is a finite point with ``q > 0``, ``Sigma > 0`` and ``m^2 < Q0 q`` in every block (``m = 0``
    in a block without teacher)."""
    if not np.all(np.isfinite(x)):
        return False
    return all(
        x[3 * b] > 0 and x[3 * b + 2] > 0 and (x[3 * b + 1] ** 2 < Qb * x[3 * b] if Qb > 0 else x[3 * b + 1] == 0)
        for b, Qb in enumerate(_block_norms(Q0))
    )


def _broyden(
    G,
    u0: np.ndarray,
    J0: np.ndarray | None,
    *,
    g0: np.ndarray | None = None,
    max_eval: int = _ROOT_MAX_EVAL,
    fd_step: float = 1e-5,
    store: list | None = None,
    exact: Callable[[np.ndarray], np.ndarray | None] | None = None,
    predict_below: float | None = None,
) -> np.ndarray:
    """Root of ``G`` (``n``-dim, ``n = len(u0)``) by Broyden's method with a finite-difference initial Jacobian.

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
        n = len(u)
        J = np.empty((n, n))
        for k in range(n):
            e = np.zeros(n)
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
            if (
                newton_norms[-1] < newton_norms[-2]
                and rate * newton_norms[-1] ** 2 < predict_below
                and np.linalg.norm(step) < _TRUST_RADIUS
            ):
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


def _damped_iteration(
    F: Callable[[np.ndarray], np.ndarray],
    x: np.ndarray,
    Q0: float | Sequence[float],
    *,
    damping: float,
    max_steps: int,
    stop: float,
    best: tuple[float, np.ndarray],
    fx0: np.ndarray | None = None,
    anderson: int = 0,
) -> tuple[tuple[float, np.ndarray], int, tuple[np.ndarray, np.ndarray] | None]:
    """Damped iteration ``u <- u + damping (u(F(x(u))) - u)`` until the residual is below ``stop``.

    The damping is multiplied by ``_BACKOFF`` (down to ``_MIN_DAMPING``) whenever the residual
    grows. ``anderson > 0``: each step is instead Anderson's extrapolation (type II, mixing 1) from
    the last ``anderson + 1`` iterates and their images in ``u`` (its step cut to the larger of the trust
    radius and the plain step's length), falling back to the damped step
    where the extrapolation is not finite or leaves the domain, and restarting where the map's value
    does (history cleared; half way back to the best point, or a damped step from the best point itself). Returns the
    best ``(residual, x)`` seen (starting from
    ``best``), the number of map evaluations and the last evaluated pair ``(x, F(x))``. ``fx0``:
    ``F(x)`` when the caller has it (not counted as an evaluation).
    """
    u, dmp, prev, last, steps = to_u(x, Q0), damping, math.inf, None, 0
    x0 = x
    hist_u: list[np.ndarray] = []
    hist_g: list[np.ndarray] = []
    for i in range(max_steps):
        known = i == 0 and fx0 is not None
        x = x0 if known else from_u(u, Q0)
        fx = np.asarray(fx0, float) if known else F(x)
        last = (x, fx)
        steps += 0 if known else 1
        r = step_residual(x, fx, Q0)
        if r < best[0]:
            best = (r, x)
        if r < stop:
            break
        if r > prev:
            dmp = max(_MIN_DAMPING, _BACKOFF * dmp)
        prev = r
        g = to_u(fx, Q0) - u
        step = u + dmp * g
        if anderson and not in_domain(fx, Q0):
            # the map left its domain (an overshoot, a transient collapse): forget the extrapolation history and go
            # half way back to the best point, or (at the best point itself) take the damped step
            hist_u, hist_g = [], []
            if not np.array_equal(best[1], x):
                step = 0.5 * (u + to_u(best[1], Q0))
        elif anderson and np.all(np.isfinite(g)):
            hist_u, hist_g = (hist_u + [u])[-(anderson + 1) :], (hist_g + [g])[-(anderson + 1) :]
            cand = u + g
            if len(hist_u) > 1:
                dU, dG = np.diff(np.array(hist_u), axis=0), np.diff(np.array(hist_g), axis=0)
                gamma = np.linalg.lstsq(dG.T, g, rcond=None)[0]
                cand = u + g - (dU + dG).T @ gamma
                # an extrapolation far beyond the plain step (a nearly singular history) is cut to the trust radius
                size = np.linalg.norm(cand - u)
                if size > max(_TRUST_RADIUS, np.linalg.norm(g)):
                    cand = u + (cand - u) * (max(_TRUST_RADIUS, np.linalg.norm(g)) / size)
            # an extrapolation outside the domain (a negative q of a block without teacher) is not taken
            step = cand if np.all(np.isfinite(cand)) and in_domain(from_u(cand, Q0), Q0) else step
        u = step
    return best, steps, last


class _Converged(Exception):
    """Raised inside the root finder's function when the residual is small enough."""


class _Predicted(Exception):
    """Raised by Newton's method when its next step is predicted to land below the tolerance."""

    def __init__(self, u: np.ndarray, norm: float) -> None:
        super().__init__()
        self.u, self.norm = u, norm


def solve_fixed_point(
    F: Callable[[np.ndarray], np.ndarray],
    x: np.ndarray,
    Q0: float | Sequence[float],
    *,
    tol: float,
    switch: float,
    method: str,
    jacobian: np.ndarray | None,
    damping: float,
    max_iter: int,
    jacobian_of: Callable[[np.ndarray], np.ndarray | None] | None = None,
    exact_switch: float | None = None,
    fx0: np.ndarray | None = None,
    anderson: int = 0,
    stop_fraction: float = 0.1,
) -> tuple[float, np.ndarray, np.ndarray | None, int]:
    """Fixed point of ``F`` near ``x``: damped pre-iteration, root finder, damped fallback.

    ``method`` is ``"broyden"`` / ``"hybr"`` (pre-iteration to residual ``switch``, then the
    root finder on ``G(u)``, then the fallback iteration at half the damping if needed) or
    ``"iterate"`` (damped iteration only, ``max_iter`` steps). ``jacobian`` seeds Broyden.
    ``jacobian_of(x)``: ``dF/dx`` at ``x`` when the map computed it with its last evaluation ``F(x)``
    (else ``None``); with it Broyden becomes Newton's method (see :func:`_broyden`), and the
    pre-iteration hands over at residual ``exact_switch`` (default ``switch``). ``fx0``: ``F(x)`` if the
    caller just evaluated it (the map's last evaluation, so its Jacobian there is known too).
    ``anderson``: the pre-iteration and the fallback extrapolate from this many previous iterates
    (Anderson acceleration; 0: damped iteration; see :func:`_damped_iteration`). The root finder stops at
    residual ``stop_fraction tol``.
    Returns ``(residual, x, jacobian, evaluations)`` of the best point found.
    """
    best: tuple[float, np.ndarray] = (math.inf, x)
    if jacobian_of is not None and exact_switch is not None and method == "broyden":
        switch = max(switch, exact_switch)
    if jacobian is not None and method == "broyden":
        switch = max(switch, _SWITCH_WITH_JACOBIAN)  # a Jacobian is known: hand over to Broyden early
    # phase 1: bring a poor initial guess into the basin of the root finder
    stop = tol if method == "iterate" else max(tol, switch)
    best, iterations, last = _damped_iteration(
        F,
        x,
        Q0,
        damping=damping,
        stop=stop,
        best=best,
        fx0=fx0,
        max_steps=max_iter if method == "iterate" else _PRE_ITERATIONS,
        anderson=anderson,
    )
    jac_out = None
    if best[0] >= tol and method in ("broyden", "hybr"):
        jac_store: list = [None]
        seen: list = [None]  # (u, F(x(u))) of the last valid evaluation

        def exact(u: np.ndarray) -> np.ndarray | None:
            if jacobian_of is None or seen[0] is None or not np.array_equal(seen[0][0], u):
                return None
            JF = jacobian_of(from_u(u, Q0))
            if JF is None:
                return None
            Jg = du_dx(seen[0][1], Q0) @ JF @ dx_du(u, Q0) - np.eye(len(u))
            return Jg if np.all(np.isfinite(Jg)) else None

        def G(u: np.ndarray) -> np.ndarray:
            nonlocal best, iterations
            xx = from_u(u, Q0)
            iterations += 1
            try:
                fx = F(xx)
            except (ValueError, FloatingPointError, ZeroDivisionError, np.linalg.LinAlgError):
                return np.full(len(u), _INVALID_RESIDUAL)
            if not in_domain(fx, Q0):
                return np.full(len(u), _INVALID_RESIDUAL)
            r = step_residual(xx, fx, Q0)
            seen[0] = (np.array(u, float), fx)
            if r < best[0]:
                best = (r, xx)
            if r < stop_fraction * tol:
                raise _Converged
            return to_u(fx, Q0) - u

        x = best[1]
        try:
            if method == "hybr":
                from scipy import optimize  # imported here: it costs ~0.2 s at start-up

                optimize.root(
                    G,
                    to_u(x, Q0),
                    method="hybr",
                    options={"xtol": tol * 1e-2, "maxfev": _HYBR_MAXFEV, "eps": _HYBR_EPS},
                )
            else:
                ux = to_u(x, Q0)
                g0 = to_u(last[1], Q0) - ux if last is not None and np.array_equal(last[0], x) else None
                if g0 is not None:  # the pre-iteration's last evaluation was at x: its Jacobian is the map's last
                    seen[0] = (ux, np.asarray(last[1], float))
                _broyden(
                    G,
                    ux,
                    jacobian,
                    g0=g0,
                    store=jac_store,
                    exact=exact,
                    predict_below=_PREDICT_FRACTION * tol if jacobian_of is not None else None,
                )
        except _Predicted as p:
            # the step is evaluated by the caller (the reporting evaluation), which measures its residual
            xp = from_u(p.u, Q0)
            if np.all(np.isfinite(xp)):
                best = (p.norm, xp)
        except (_Converged, ValueError, FloatingPointError, np.linalg.LinAlgError):
            pass
        jac_out = jac_store[0]
    if best[0] >= tol and method != "iterate":  # fallback: damped iteration from the best point
        best, steps, _ = _damped_iteration(
            F, best[1], Q0, damping=0.5 * damping, stop=tol, best=best, max_steps=max_iter, anderson=anderson
        )
        iterations += steps
    return best[0], best[1], jac_out, iterations
