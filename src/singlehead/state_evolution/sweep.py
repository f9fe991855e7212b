"""The engine's sweeps (:func:`~singlehead.theory_curve`): each point predicted from the previous ones and solved
by the model's ``solve_point(problem, options, prior, init, quad, ...)``, passed in."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from singlehead.model.problem import Problem
from singlehead.model.results import Result
from singlehead.state_evolution.fixed_point import from_u, in_domain, to_u
from singlehead.state_evolution.options import SEOptions, WarmStart
from singlehead.state_evolution.prior import PriorModel, collapse_point, prior_model
from singlehead.state_evolution.quadrature import OutputQuadrature
from singlehead.state_evolution.untied.teachers import teacher_norms

__all__ = ["tied_curve", "block_curve", "progress_bar"]


def tied_curve(
    problem: Problem,
    values: list,
    param: str,
    o: SEOptions,
    prior: str | PriorModel,
    init: Any,
    quad: OutputQuadrature | None,
    progress: bool,
    solve_point: Callable[..., Any],
) -> Iterator[Result]:
    """The engine's sweep of a model with one block of overlaps (the tied model): each point predicted from the
    previous ones (tangent along ``alpha``, secant otherwise) and solved by ``solve_point``."""
    if quad is None:
        quad = o.quadrature(problem)
    if not isinstance(prior, PriorModel) and param not in ("d", "target"):
        prior = prior_model(problem, prior, draws=o.draws, seed=o.node_seed)
    warm = init
    hist: list[tuple[float, np.ndarray]] = []  # converged points (value, u) for the secant predictor
    it = progress_bar(values, param) if progress else values
    Q0 = prior.Q0 if isinstance(prior, PriorModel) else None
    tangents: list[tuple[float, np.ndarray]] = []  # (log alpha, du/dlog alpha) at the converged points
    col = None  # along alpha the collapse point's conjugates are rescaled from the previous point's
    retried = False  # whether the previous point's warm start failed
    for v in it:
        p = problem.replace(**{param: v})
        if param == "alpha" and isinstance(prior, PriorModel):  # (an untied student returned above)
            col = collapse_point(p, prior, quad, like=col)
        predicted = _tangent_prediction(param, v, hist, tangents, Q0, warm)
        if predicted is not None:
            warm = replace(warm, x=tuple(from_u(predicted, Q0)))
        elif len(hist) >= 2 and Q0 is not None and isinstance(v, (int, float)) and isinstance(warm, WarmStart):
            (v0, u0), (v1, u1) = hist[-2], hist[-1]
            if v1 != v0:
                w = np.clip((float(v) - v1) / (v1 - v0), -2.0, 2.0)
                warm = replace(warm, x=tuple(from_u(u1 + w * (u1 - u0), Q0)))
        # the previous warm start failed (the fixed point changes fast here): start this point cold first
        cold_first = retried
        sol = solve_point(p, o, prior, warm, quad, cold_first=cold_first, alpha_tangent=param == "alpha", collapse=col)
        r, new_warm, retried = sol.result, sol.warm_start, sol.warm_start_retried
        yield r
        if new_warm is not None:
            # keep the last known Jacobian when this solve did not produce one
            jac = new_warm.jacobian if new_warm.jacobian is not None else getattr(warm, "jacobian", None)
            warm = replace(new_warm, jacobian=jac)
            if Q0 is not None and isinstance(v, (int, float)):
                hist.append((float(v), to_u(np.array(new_warm.x), Q0)))
                if param == "alpha" and new_warm.du_dlog_alpha is not None:
                    tangents.append((float(np.log(v)), np.asarray(new_warm.du_dlog_alpha)))
                else:
                    tangents.clear()
        else:
            hist.clear()
            tangents.clear()


#: the tangent predictor's step in log alpha is capped (beyond it the secant one is used)
_MAX_TANGENT_STEP = 1.0


def _tangent_prediction(
    param: str, v: object, hist: list, tangents: list, Q0: float | None, warm: object
) -> np.ndarray | None:
    """The next fixed point in u-coordinates predicted from the last one's tangent along ``log alpha``.

    Second order when the previous point's tangent is known too (its change estimates the curvature):
    ``u1 + h t1 + (h^2/2) (t1 - t0)/h0``, ``h`` and ``h0`` the steps in ``log alpha``. ``None`` when no
    tangent applies (another parameter, no converged previous point with an exact Jacobian).
    """
    if (
        param != "alpha"
        or Q0 is None
        or not tangents
        or not hist
        or not isinstance(warm, WarmStart)
        or not isinstance(v, (int, float))
        or not v > 0
    ):
        return None
    s1, t1 = tangents[-1]
    v1, u1 = hist[-1]
    if not np.isclose(np.log(v1), s1, rtol=0, atol=1e-12):
        return None
    h = float(np.log(v)) - s1
    if abs(h) > _MAX_TANGENT_STEP:
        return None
    u = u1 + h * t1
    if len(tangents) >= 2 and tangents[-2][0] != s1:
        s0, t0 = tangents[-2]
        u = u + 0.5 * h * h * (t1 - t0) / (s1 - s0)
    return u


def progress_bar(values: list, param: str) -> Any:
    """``values`` through a tqdm bar (imported here: a theory point from the command line starts without tqdm)."""
    from tqdm import tqdm

    return tqdm(values, desc=f"theory over {param}")


def block_curve(
    problem: Problem,
    values: list,
    param: str,
    options: SEOptions,
    prior: str | PriorModel,
    init: object,
    quad: OutputQuadrature | None,
    progress: bool,
    solve_point: Callable[..., Any],
) -> Iterator[Result]:
    """:func:`iter_theory_curve` for a non-symmetric student: each point from the previous converged one's warm
    start (its overlaps, Jacobian, prox branches and prior-side estimators), by ``solve_point``;
    once two consecutive points converged, the overlaps are extrapolated linearly in ``u`` (in ``log v`` for
    positive values ``v``) to the next value, the step at most twice the last one."""
    warm = init
    hist: list[tuple[float, np.ndarray]] = []  # converged points (coordinate, u)
    for v in progress_bar(values, param) if progress else values:
        p = problem.replace(**{param: v})
        start = _block_prediction(p, v, hist, warm)
        sol = solve_point(p, options, prior, start, quad)
        yield sol.result
        if sol.warm_start is None:
            hist.clear()
            continue
        warm = sol.warm_start
        c = _coordinate(v)
        if c is None or not hist or len(hist[-1][1]) != len(warm.x):
            hist.clear()
        if c is not None:
            hist.append((c, to_u(np.array(warm.x, float), _block_norms(p, len(warm.x)))))


def _coordinate(v: object) -> float | None:
    """The coordinate a block curve extrapolates in: ``log v`` for a positive number, ``v`` for another one."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(np.log(v)) if v > 0 else float(v)


def _block_norms(problem: Problem, size: int) -> tuple[float, ...]:
    """The teacher norm of each iterated block of a non-symmetric student's ``size`` overlaps."""
    Q0s, Q0a = teacher_norms(problem)
    return (Q0s,) if size == 3 else (Q0s, Q0a)


def _block_prediction(problem: Problem, v: object, hist: list, warm: object) -> object:
    """``warm`` with its overlaps moved to the secant prediction at ``v`` (``warm`` itself without two converged
    points, or where the prediction leaves the domain)."""
    c = _coordinate(v)
    if c is None or len(hist) < 2 or not isinstance(warm, WarmStart) or len(hist[-2][1]) != len(hist[-1][1]):
        return warm
    (c0, u0), (c1, u1) = hist[-2], hist[-1]
    if c1 == c0 or len(u1) != len(warm.x):
        return warm
    Q0 = _block_norms(problem, len(u1))
    w = float(np.clip((c - c1) / (c1 - c0), -2.0, 2.0))
    x = from_u(u1 + w * (u1 - u0), Q0)
    return replace(warm, x=tuple(map(float, x))) if in_domain(x, Q0) else warm
