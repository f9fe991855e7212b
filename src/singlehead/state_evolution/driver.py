"""The engine's solve of one point (:func:`solve_setup`): a model's setup, the attempts of the plan, the result.

Composes the output side (:mod:`.output`), the prior side (:mod:`.prior`) and the solve stages
(:mod:`.stages`: set-up -> fixed point -> diagnostics -> result) into the six-order-parameter fixed
point of arXiv 2509.24914 (Sec. 3). See the package docstring for the equations; sweeps are in
:mod:`.sweep`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from singlehead.model.problem import Problem
from singlehead.state_evolution.block_map import BlockSetup
from singlehead.state_evolution.convergence import attempt_plan
from singlehead.state_evolution.diagnosis import diagnose, record_attempt
from singlehead.state_evolution.fixed_point import du_dx, dx_du, to_u
from singlehead.state_evolution.models.base import PointSolution
from singlehead.state_evolution.options import SEOptions, WarmStart
from singlehead.state_evolution.quadrature import OutputQuadrature
from singlehead.state_evolution.se_map import MapSettings, ProxBranches, SEMap
from singlehead.state_evolution.stages import Attempt, TiedSetup, solve_attempt

__all__ = ["solve_setup", "PointSolution"]


def solve_setup(
    problem: Problem,
    setup: TiedSetup | BlockSetup,
    o: SEOptions,
    init: Any,
    quad: OutputQuadrature | None,
    t0: float,
    *,
    refine: bool,
    cold_first: bool,
    alpha_tangent: bool,
    again: Callable[[SEOptions, Any], PointSolution],
    stability: Callable[..., Any],
) -> PointSolution:
    """The engine's solve of one point from its model's ``setup``: the attempt plan
    (:func:`~.convergence.attempt_plan`), the
    diagnosis of an unconverged result, and the re-solve on finer nodes of a point that stalled at its
    quadrature floor (``refine``: the node set is the solver's choice; ``again(options, init)``: the model's
    solve of the point under other options, for that re-solve). ``stability(result, options=, quad=)``: the
    model's replica-symmetry check, for the diagnosis. Every student with one or two blocks of overlaps runs these same
    attempts and stages; what differs
    is the setup: a symmetric student's :class:`~.stages.TiedSetup` and :class:`~.se_map.SEMap`, a
    non-symmetric student's :class:`~.block_map.BlockSetup` and :class:`~.block_map.BlockSEMap`."""
    jacobian, branches = None, None
    if isinstance(init, WarmStart):
        if hasattr(setup, "warm_prior"):  # a sampled prior side starts its solves from the previous point's
            setup.warm_prior = init.prior_solutions
        init, jacobian, branches = np.asarray(init.x, dtype=float), init.jacobian, (init.branches, init.branches_cv)
        # tracked on another node set: dropped
        branches = tuple(
            None if b is None or quad is None or any(a.shape[0] != quad.flat.shape[0] for a in b) else tuple(b)
            for b in branches
        )
    if setup.collapse_holds and problem.channel.convex_prox:
        # convex problem (the rank cap does not bind at S = 0): complete collapse is the minimiser
        r = setup.collapsed(t0, 0)
        r.extras["warm_start_retried"] = False
        r.extras["evaluations_all_attempts"] = 0
        return PointSolution(r)

    def solve(
        init_: Any,
        jacobian_: np.ndarray | None,
        branches_: Any = None,
        *,
        escalate: bool = True,
        secant: bool = False,
        cap: int | None = None,
    ) -> tuple[Attempt, dict[str, Any]]:
        oa = o if escalate else o.quick_attempt()
        oa = oa.replace(exact_jacobian=False) if secant else oa
        if cap is not None and cap < oa.max_evals:  # what is left of the point's cap (SEOptions.max_iter)
            oa = oa.replace(max_evals=cap)
        # each attempt has its own budget; closed-form output sides (no nodes) keep Broyden; with softmax
        # (non-convex) the non-trivial solve is still tried when collapse is a fixed point, and if it reaches
        # it (or fails) the collapsed solution is returned
        settings = MapSettings.from_options(oa, tangent=setup.tangent, stop_on_collapse=setup.collapse_holds)
        tracked = (
            ProxBranches() if branches_ is None else ProxBranches(*(None if b is None else list(b) for b in branches_))
        )
        trace: dict[str, Any] = {"budget": oa.max_evals}
        a = solve_attempt(setup, setup.new_map(settings, tracked), t0, oa, init=init_, jacobian=jacobian_, trace=trace)
        return a, trace

    plan = attempt_plan(init, jacobian, branches, cold_first, secant_fallback=o.exact_jacobian and setup.tangent)
    attempts: list[Attempt] = []
    warm_failed, records = False, []
    used = 0  # map evaluations of the attempts so far, against the point's cap
    for init_, jac_, br_, escalate, secant in plan:
        cap = None if o.max_iter is None else o.max_iter - used
        if cap is not None and cap < 1:
            break
        a, trace = solve(init_, jac_, br_, escalate=escalate, secant=secant, cap=cap)
        used += a.map.evaluations
        attempts.append(a)
        records.append(
            record_attempt(
                warm=init_ is not None or jac_ is not None,
                quick=not escalate,
                secant=secant,
                result=a.result,
                evaluations=a.map.evaluations,
                budget=trace["budget"],
                trace=trace,
            )
        )
        if a.converged:
            break
        warm_failed = warm_failed or init_ is not None or jac_ is not None
    kept = min(attempts, key=lambda a: (not a.converged, a.residual))
    r = kept.result
    diagnose(problem, r, records, o, quad, stability=stability)  # an unconverged result says why
    setup.finish(r, kept.map, kept.x, o, kept.jacobian)
    r.extras["warm_start_retried"] = warm_failed
    # ``iterations`` counts the kept solve's map evaluations; this counts every attempt's (thinned ones included)
    r.extras["evaluations_all_attempts"] = int(sum(a.map.evaluations for a in attempts))
    r.runtime_s = time.perf_counter() - t0
    if refine and r.diagnosis == "quadrature_floor" and (o.max_iter is None or o.max_iter > used):
        # the residual stalled at the map's quadrature error: once more on _REFINE times the nodes per scramble
        finer = o.replace(
            n_points=_REFINE * o.points(problem), max_iter=None if o.max_iter is None else o.max_iter - used
        )
        sol2 = again(finer, init)
        r2 = sol2.result
        r2.extras["evaluations_all_attempts"] += r.extras["evaluations_all_attempts"]
        r2.extras["warm_start_retried"] = r2.extras["warm_start_retried"] or warm_failed
        r2.runtime_s = time.perf_counter() - t0
        if r2.converged:
            r2.extras["quadrature_refined"] = True
            return PointSolution(r2, sol2.warm_start, r2.extras["warm_start_retried"])
        r.extras["diagnosis_details"]["refined"] = {
            "n_points": finer.n_points,
            "residual": r2.extras["residual"],
            "diagnosis": r2.diagnosis,
        }
        r.message += f"; solved again on {finer.n_points} nodes per scramble: residual {r2.extras['residual']:.1e}"
        r.extras["evaluations_all_attempts"] = r2.extras["evaluations_all_attempts"]
        r.runtime_s = r2.runtime_s
    return PointSolution(r, _next_warm_start(kept, setup.Q0, alpha_tangent), warm_failed)


#: a solve whose residual stalled at the quadrature floor is redone once on this many times the nodes (the
#: quadrature error falls like 1/sqrt(nodes) or faster for scrambled Sobol nodes: by 2 or more)
_REFINE = 4


def _next_warm_start(kept: Attempt, Q0: float, alpha_tangent: bool) -> WarmStart | None:
    """The warm start a converged, non-collapsed solution offers to the next point of a sweep."""
    if not kept.converged or kept.x is None:
        return None
    tracked = kept.map.branches  # the prox branches tracked by the kept solve
    x = kept.x
    return WarmStart(
        tuple(map(float, x)),
        kept.jacobian,
        None if tracked.main is None else tuple(tracked.main),
        _alpha_tangent(kept.map, x, Q0) if alpha_tangent else None,
        None if tracked.cv is None else tuple(tracked.cv),
        getattr(kept.map, "warm_prior", None),
    )


_TANGENT_RTOL = 1e-4


def _alpha_tangent(F: SEMap, x: np.ndarray, Q0: float) -> np.ndarray | None:
    """``du/dlog alpha`` at the fixed point ``x`` from the map's exact Jacobian there (``None`` without one).

    At a fixed point ``G(u, alpha) = u(F(x(u), alpha)) - u = 0``, so ``du/dlog alpha = -G_u^{-1} G_{log alpha}``
    (``F(x) = x`` there, so the u-transform's Jacobian is taken at ``x``). The Jacobian of the solve's
    last Newton step is used when it was taken within ``_TANGENT_RTOL`` of ``x`` (a predictor needs
    no more accuracy), else one is computed at ``x``.
    """
    lj = F.last_jacobian
    if lj is None or not np.allclose(lj[0], x, rtol=_TANGENT_RTOL, atol=0.0):
        if F.jacobian_at(x) is None:
            return None
        lj = F.last_jacobian
    _, JF, dF_dlog_alpha = lj
    try:
        Dx = du_dx(x, Q0)
        t = -np.linalg.solve(Dx @ JF @ dx_du(to_u(x, Q0), Q0) - np.eye(len(x)), Dx @ dF_dlog_alpha)
    except np.linalg.LinAlgError:
        return None
    return t if np.all(np.isfinite(t)) else None
