"""The stages of one solve attempt of the state evolution: set-up -> fixed point -> diagnostics -> result.

Every stage takes the attempt's frozen :class:`~.options.SEOptions` (its ``tuning`` holds every tuning
constant) and the attempt's map, and talks to the map only through the protocol of
:class:`~.se_map.MapCore` (evaluation, budget, floor, starts, ``Q0`` of each block of overlaps), so a
map on several blocks of fields runs the same stages. The fixed-point stage is itself a short pipeline:

1. *coarse*: without a warm Jacobian, solve on the node set thinned ``thin_factor`` times (cheap)
   from the best of the structured starts, to get close and to get a Jacobian;
2. *full*: the root finder on the full node set;
3. *continuation*: if that failed and ``lam`` is small, follow the fixed point down from
   ``continuation_from`` and polish (small ``lam`` puts ``Sigma ~ 1/lam`` far from any start).

The diagnostics stage evaluates the map once more with every prox start (cold and tracked), and
where that map disagrees with the tracked one re-solves with it; it measures the quadrature floor
and decides convergence. :func:`theory_extras` is the one builder of ``Result.extras``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from singlehead.model.problem import Problem
from singlehead.model.results import Result
from singlehead.state_evolution.convergence import ACCEPT_FACTOR, is_converged
from singlehead.state_evolution.draw_spread import prior_draw_spread
from singlehead.state_evolution.fixed_point import in_domain, solve_fixed_point, step_residual
from singlehead.state_evolution.options import SEOptions
from singlehead.state_evolution.output import Q_FLOOR, OutputSide, channel_test_errors
from singlehead.state_evolution.prior import CollapsePoint, PriorModel, PriorSide
from singlehead.state_evolution.quadrature import OutputQuadrature
from singlehead.state_evolution.se_map import (
    MAX_FLOOR,
    AtQuadratureFloor,
    BudgetExhausted,
    DrivenToCollapse,
    MapSettings,
    ProxBranches,
    SEMap,
    below_floor,
    default_init,
)

__all__ = [
    "SEState",
    "Attempt",
    "ReportedPoint",
    "TiedSetup",
    "solve_attempt",
    "collapsed_result",
    "stage_message",
    "training_objective",
]

_SOLVER_ERRORS = (ValueError, FloatingPointError, ZeroDivisionError, np.linalg.LinAlgError)


@dataclass
class SEState:
    """A point ``(q, m, Sigma)`` of the SE (usable as ``init`` / warm start).

    ``q = Tr S^2/d``, ``m = Tr(S S0)/d`` and ``Sigma`` the response (docs: Theory, :ref:`theory-order-parameters`); a
    :class:`~singlehead.Result` of :func:`~singlehead.theory` can be passed as ``init`` just as well.

    Examples
    --------
    >>> from singlehead import Problem, theory
    >>> from singlehead.state_evolution import SEState
    >>> theory(Problem(T=2, alpha=1.0, noise=0.5), init=SEState(q=1.3, m=1.3, Sigma=0.5)).converged
    True
    """

    q: float
    m: float
    Sigma: float

    def as_array(self) -> np.ndarray:
        return np.array([self.q, self.m, self.Sigma])


@dataclass
class _Solve:
    """The running state of the fixed-point stage: residual, point, Jacobian, evaluations."""

    r: float
    x: np.ndarray
    jac: np.ndarray | None
    iterations: int = 0
    # what the stages tried, for the diagnosis of an unconverged result (diagnosis.record_attempt):
    # "stopped_by" ("budget" / "floor"), "continuation" ({"from", "to", "reached", "completed"} in lam),
    # "tracked_residual" and "union_resolve_from" (the re-solve with every prox start, from that residual)
    trace: dict[str, Any] = field(default_factory=dict)


def _solve(
    F: SEMap,
    x: np.ndarray,
    o: SEOptions,
    jac: np.ndarray | None,
    *,
    tol: float,
    max_iter: int,
    fx0: np.ndarray | None = None,
) -> tuple[float, np.ndarray, np.ndarray | None, int]:
    t = o.tuning
    return solve_fixed_point(
        F.values,
        x,
        F.Q0,
        tol=tol,
        switch=t.switch,
        method=o.method,
        jacobian=jac,
        damping=o.damping,
        max_iter=max_iter,
        jacobian_of=F.jacobian_at if F.tangent else None,
        exact_switch=t.exact_switch,
        fx0=fx0,
        anderson=F.pre_iteration_history,
        stop_fraction=F.root_stop_fraction,
    )


# ------------------------------------------------------------------------------------------ set-up
def start_point(init: Any, Q0: float) -> np.ndarray:
    """The starting ``(q, m, Sigma)``: ``init`` (a Result, SEState or triple) if admissible, else the default."""
    if init is None:
        x = default_init(Q0)
    elif isinstance(init, Result):
        x = np.array([init.extras["q"], init.extras["m"], init.extras["Sigma"]], dtype=float)
    elif isinstance(init, SEState):
        x = init.as_array()
    else:
        x = np.asarray(init, dtype=float)
    if not in_domain(x, Q0):
        x = default_init(Q0)
    return x


# ------------------------------------------------------------------------------------ fixed point
def coarse_stage(F: SEMap, s: _Solve, o: SEOptions, *, warm: bool) -> None:
    """Bring a poor start close to the fixed point on the thinned node set (ranking the structured
    starts by their one-step residual when there is no warm start)."""
    quad = F.quad
    thin = quad is not None and o.tuning.coarse and quad.nodes.shape[1] >= o.tuning.thin_min_nodes
    Fc = F.sibling(quad=o.thinned(quad)) if thin else F
    Q0 = F.Q0
    cands = [s.x] if warm else F.starts()
    if len(cands) > 1:
        res = []
        for c in cands:
            try:
                res.append(step_residual(c, Fc(c)[0], Q0))
            except _SOLVER_ERRORS:
                res.append(math.inf)
            s.iterations += 1
        cands = [cands[i] for i in np.argsort(res)]
    if not (thin or len(cands) > 1):
        return
    for c in cands:
        rc, xc, jc, itc = _solve(
            Fc,
            c,
            o,
            s.jac,
            tol=max(o.tol, o.tuning.coarse_tol),
            max_iter=min(o.fallback_iter, o.tuning.coarse_max_iter),
        )
        s.iterations += itc
        if rc < o.tuning.accept_coarse:
            s.x = xc
            s.jac = jc if jc is not None else s.jac
            return


def full_stage(F: SEMap, s: _Solve, o: SEOptions) -> None:
    """The root finder on the full node set from the current point."""
    r, x, jac, it = _solve(F, s.x, o, s.jac, tol=o.tol, max_iter=o.fallback_iter)
    s.r, s.x, s.iterations = r, x, s.iterations + it
    s.jac = jac if jac is not None else s.jac


def continuation_stage(F: SEMap, s: _Solve, o: SEOptions) -> None:
    """Follow the fixed point in ``lam`` from ``continuation_from`` down (thinned nodes), then polish."""
    lam = F.problem.lam
    if (
        s.r < o.tol
        or below_floor(s.r, F.floor)
        or not o.continuation
        or lam >= o.tuning.continuation_from
        or not F.has_budget()
    ):
        return
    # lam = 0 (no penalty) is reached from lam = 1e-6 continuation_from, then polished at lam = 0
    lam_end = lam if lam > 0 else 1e-6 * o.tuning.continuation_from
    n_lams = int(math.ceil(o.tuning.continuation_per_decade * math.log10(o.tuning.continuation_from / lam_end))) + 1
    xs, js = F.default_start(), None
    s.trace["continuation"] = trace = {
        "from": o.tuning.continuation_from,
        "to": lam_end,
        "reached": None,
        "completed": False,
    }
    for lv in np.geomspace(o.tuning.continuation_from, lam_end, n_lams):
        if not F.has_budget():
            return
        Fl = F.sibling(problem=F.problem.replace(lam=float(lv)), quad=o.thinned(F.quad), stop_on_collapse=False)
        rl, xl, jl, itl = _solve(
            Fl, xs, o, js, tol=max(o.tol, o.tuning.coarse_tol), max_iter=o.tuning.continuation_max_iter
        )
        s.iterations += itl
        if not rl < o.tuning.accept_coarse:
            return
        xs, js = xl, (jl if jl is not None else js)
        trace["reached"] = float(lv)
    trace["completed"] = True
    r2, x2, j2, it2 = _solve(F, xs, o, js, tol=o.tol, max_iter=o.fallback_iter)
    s.iterations += it2
    if r2 < s.r:
        s.r, s.x, s.jac = r2, x2, (j2 if j2 is not None else js)


def fixed_point_stage(
    F: SEMap,
    x: np.ndarray,
    jacobian: np.ndarray | None,
    o: SEOptions,
    *,
    warm: bool,
    trace: dict[str, Any] | None = None,
) -> _Solve:
    """Coarse -> full -> continuation; on a spent budget or at the quadrature floor, the best point seen.
    ``trace``: a dict the stages fill with what they tried (``_Solve.trace``)."""
    s = _Solve(math.inf, x, jacobian, trace=trace if trace is not None else {})
    try:
        if not warm or jacobian is None:
            coarse_stage(F, s, o, warm=warm)
        full_stage(F, s, o)
        continuation_stage(F, s, o)
    except (BudgetExhausted, AtQuadratureFloor) as stop:
        s.trace["stopped_by"] = "budget" if isinstance(stop, BudgetExhausted) else "floor"
        r, xb = F.best_point()
        if xb is not None:
            s.r, s.x = r, xb
        s.iterations = F.evaluations
    return s


# ------------------------------------------------------------------------------------ diagnostics
@dataclass
class ReportedPoint:
    """The point a solve attempt reports (the diagnostics stage's verdict): overlaps ``x``, the output and
    prior sides there, its residual and quadrature floor, ``converged`` and whether it converged at the floor."""

    x: np.ndarray
    out: OutputSide
    pr: PriorSide
    residual: float
    floor: float
    converged: bool
    at_floor: bool


def diagnostics_stage(F: SEMap, s: _Solve, o: SEOptions) -> ReportedPoint:
    """The reported point: one map evaluation with every prox start; where it disagrees with the
    tracked-branch map (and the stages had found a fixed point of that one), a bounded re-solve
    with it; then the quadrature floor and the convergence verdict."""
    F.report()
    Q0, problem = F.Q0, F.problem
    x = s.x
    fx, out, pr = F(x, mode="union")
    residual = step_residual(x, fx, Q0)
    floor = F.floor_at(x, out) if residual >= o.tol else math.nan
    s.trace["tracked_residual"] = float(s.r)  # the stages' residual, on the tracked prox branches
    if (
        s.r < o.tuning.accept_coarse
        and residual >= o.tol
        and not below_floor(residual, floor)
        and not problem.channel.convex_prox
        and math.isfinite(residual)
        and F.has_budget()
    ):
        s.trace["union_resolve_from"] = float(residual)
        F.start_union_resolve(floor, o.tuning.union_max_evals)
        n0 = F.evaluations
        try:
            # the union map was just evaluated at x (its value and Jacobian there are known)
            _, x3, j3, _ = _solve(
                F, x, o, s.jac, tol=o.tol, max_iter=min(o.fallback_iter, o.tuning.union_max_evals), fx0=fx
            )
        except (AtQuadratureFloor, BudgetExhausted):
            best = F.best_point()[1]
            x3, j3 = (best if best is not None else x), None
        F.end_union_resolve()
        s.iterations += F.evaluations - n0
        fx3, out3, pr3 = F.at(x3)  # (mostly the re-solve's last point, evaluated with every start already)
        r3 = step_residual(x3, fx3, Q0)
        if r3 < residual:
            x, out, pr, residual = x3, out3, pr3, r3
            s.jac = j3 if j3 is not None else s.jac
            floor = F.floor_at(x, out) if residual >= o.tol else math.nan
    # at the quadrature floor, one more SE step moves the point by less than the map's own quadrature error
    converged, at_floor = is_converged(
        residual, o.tol, accept=ACCEPT_FACTOR, floor=floor, prox_converged=out.prox_converged
    )
    return ReportedPoint(x, out, pr, residual, floor, converged, at_floor)


# ------------------------------------------------------------------------------------------ result
def theory_extras(
    *,
    x: np.ndarray,
    Q0: float,
    out: OutputSide,
    pr: PriorSide,
    residual: float,
    floor: float,
    qerr: dict[str, float],
    pm: PriorModel,
    quad: OutputQuadrature | None,
    col: CollapsePoint,
    collapsed: bool,
) -> dict[str, Any]:
    """``Result.extras`` of a state-evolution result (the keys are documented in :func:`~.api.theory`)."""
    q, m, Sigma = map(float, x)
    return {
        "q": q,
        "m": m,
        "Sigma": Sigma,
        "Q0": Q0,
        "qhat": out.qhat,
        "mhat": out.mhat,
        "Sigmahat": out.Sigmahat,
        "eta": pr.eta,
        "delta": pr.delta,
        "eps": pr.eps,
        "cutoff": pr.cutoff,
        "cap_binds": False if collapsed else pr.cap_binds,
        "first_moment": 0.0 if collapsed else pr.first_moment,
        "residual": residual,
        "residual_floor": floor,
        "quadrature_error": qerr,
        "prior_mode": pm.mode,
        "n_nodes": 0 if quad is None else int(quad.flat.shape[0]),
        "collapsed": collapsed,
        "collapse_lam": col.lam_c,
        "collapse_fixed_point": True if collapsed else col.holds,
    }


def stage_message(dg: Any, tol: float) -> str:
    """The message of a solve's reported point ``dg`` (converged, at the floor, or why not)."""
    if dg.converged and dg.at_floor:
        return (
            f"converged to the quadrature floor: residual {dg.residual:.1e} < the map's quadrature error {dg.floor:.1e}"
        )
    if dg.converged:
        return f"converged: residual {dg.residual:.1e} < 10 tol"
    if dg.residual < dg.floor and dg.floor > MAX_FLOOR:
        return (
            f"not converged: residual {dg.residual:.1e} is below the map's quadrature error {dg.floor:.1e}, but that "
            f"error is too large (> {MAX_FLOOR:g}) to determine a fixed point; raise SEOptions.n_points"
        )
    if not dg.out.prox_converged:
        return f"not converged: the channel prox did not converge at some nodes (residual {dg.residual:.1e})"
    return f"not converged: residual {dg.residual:.1e} >= 10 tol = {10 * tol:.1e}"


def training_objective(train_error: float, penalty: float, alpha: float) -> float:
    """The training objective per sample ``L/n`` at the fixed point (as ``simulate``'s ``extras["objective"]``).

    ``L = sum_mu ||yhat_mu - y_mu||^2 + lam d pen(S)`` and ``n = alpha d^2``, so ``L/n = train_error + penalty/alpha``
    with ``penalty = lam pen(S)/d``. At a fixed point of the replica-symmetric equations this is the energy of that
    solution: where the equations have several fixed points, the ERM minimiser is the one with the lowest
    (``studies/se_fixed_points/results/se_fixed_points.md``).
    """
    return float(train_error + penalty / alpha)


def result_stage(
    problem: Problem,
    pm: PriorModel,
    quad: OutputQuadrature | None,
    col: CollapsePoint,
    dg: ReportedPoint,
    iterations: int,
    t0: float,
    o: SEOptions,
) -> Result:
    """The :class:`Result` of a non-trivial fixed point."""
    Q0 = pm.Q0
    q, m, _ = map(float, dg.x)
    te = channel_test_errors(q, m, problem=problem, Q0=Q0, quad=quad)
    qerr = dict(dg.out.err)
    qerr.update({"test_error": te["test_error_se"], "test_error_noisy": te["test_error_noisy_se"]})
    extras = theory_extras(
        x=dg.x,
        Q0=Q0,
        out=dg.out,
        pr=dg.pr,
        residual=dg.residual,
        floor=dg.floor,
        qerr=qerr,
        pm=pm,
        quad=quad,
        col=col,
        collapsed=False,
    )
    extras.update(prior_draw_spread(problem, pm, dg.x, dg.out, dg.pr, quad))  # finite-d prior: draw-to-draw spread
    penalty = problem.student.se_penalty(problem.lam, q, dg.pr)
    extras["objective"] = training_objective(dg.out.train_error, penalty, problem.alpha)
    return Result(
        source="theory",
        problem=problem.to_dict(),
        test_error=te["test_error"],
        test_error_noisy=te["test_error_noisy"],
        train_error=dg.out.train_error,
        penalty=penalty,
        matrix_error=Q0 - 2 * m + q,
        rank_fraction=dg.pr.rank_fraction,
        converged=dg.converged,
        iterations=iterations,
        runtime_s=time.perf_counter() - t0,
        message=stage_message(dg, o.tol),
        extras=extras,
    )


def collapsed_result(
    problem: Problem, pm: PriorModel, quad: OutputQuadrature | None, col: CollapsePoint, t0: float, iterations: int
) -> Result:
    """The SE solution ``S = 0`` (complete rank collapse): ``q = m = Sigma = 0``.

    Test errors are the channel's errors of predicting with ``h = 0`` (uniform softmax rows;
    zero for the linear channel) against noiseless and noisy labels; the train error is the
    noisy-label one (the labels of the training set are noisy and ``S = 0`` fits none of them).
    """
    Q0 = pm.Q0
    te = channel_test_errors(0.0, 0.0, problem=problem, Q0=Q0, quad=quad)
    qerr = dict(col.out.err)
    qerr.update(
        {
            "test_error": te["test_error_se"],
            "test_error_noisy": te["test_error_noisy_se"],
            "train_error": te["test_error_noisy_se"],
        }
    )
    extras = theory_extras(
        x=np.zeros(3),
        Q0=Q0,
        out=col.out,
        pr=col.prior,
        residual=0.0,
        floor=0.0,
        qerr=qerr,
        pm=pm,
        quad=quad,
        col=col,
        collapsed=True,
    )
    extras["objective"] = training_objective(te["test_error_noisy"], 0.0, problem.alpha)
    return Result(
        source="theory",
        problem=problem.to_dict(),
        test_error=te["test_error"],
        test_error_noisy=te["test_error_noisy"],
        train_error=te["test_error_noisy"],
        penalty=0.0,
        matrix_error=Q0,
        rank_fraction=0.0,
        converged=True,
        iterations=iterations,
        runtime_s=time.perf_counter() - t0,
        message="complete rank collapse: S = 0 is the fixed point",
        extras=extras,
    )


@dataclass
class Attempt:
    """One solve attempt's outcome, as the driver compares and continues from it.

    ``result``: its :class:`Result`; ``residual``: the reported point's residual (0 when collapsed);
    ``x``: the reported point (the overlaps of the iterated blocks; ``None`` when collapsed); ``jacobian``:
    the root finder's last Jacobian (in u-coordinates); ``map``: the attempt's map (its tracked prox
    branches and last Jacobian).
    """

    result: Result
    residual: float
    x: np.ndarray | None
    jacobian: np.ndarray | None
    map: Any
    side: Any = None  # the prior side at the reported point (where a caller needs more than the result holds)

    @property
    def converged(self) -> bool:
        return self.result.converged


@dataclass
class TiedSetup:
    """What the driver and the stages need to know of a symmetric student's point: the prior model ``pm``,
    the node set ``quad`` and the collapse test ``col``. A setup builds the attempts' maps
    (:meth:`new_map`; ``tangent``: whether they compute the exact Jacobian), turns an ``init`` into a
    start (:meth:`start_point`), says whether a point is non-trivial (:meth:`nontrivial`), builds the
    results (:meth:`result`, :meth:`collapsed`) and completes the kept one (:meth:`finish`); a
    non-symmetric student has its own (``block_map.BlockSetup``)."""

    problem: Problem
    pm: PriorModel
    quad: OutputQuadrature | None
    col: CollapsePoint

    @property
    def collapse_holds(self) -> bool:
        return bool(self.col.holds)

    @property
    def Q0(self) -> float:
        return self.pm.Q0

    @property
    def tangent(self) -> bool:
        """The output side on nodes has an exact tangent (a closed-form one keeps Broyden's method)."""
        return self.quad is not None

    def new_map(self, settings: MapSettings, branches: ProxBranches | None = None) -> SEMap:
        """The attempt's map."""
        return SEMap(self.problem, self.pm, self.quad, settings, branches=branches)

    def start_point(self, init: Any) -> np.ndarray:
        return start_point(init, self.pm.Q0)

    def nontrivial(self, x: np.ndarray) -> bool:
        return bool(x[0] > Q_FLOOR * self.pm.Q0)

    def result(self, F: Any, dg: ReportedPoint, iterations: int, t0: float, o: SEOptions) -> Result:
        return result_stage(self.problem, self.pm, self.quad, self.col, dg, iterations, t0, o)

    def collapsed(self, t0: float, iterations: int) -> Result:
        return collapsed_result(self.problem, self.pm, self.quad, self.col, t0, iterations)

    def finish(
        self, result: Result, F: Any, x: np.ndarray | None, options: SEOptions, jacobian: np.ndarray | None = None
    ) -> None:
        """Nothing to add to a symmetric student's kept result."""


def solve_attempt(
    setup: Any,
    F: Any,
    t0: float,
    o: SEOptions,
    *,
    init: Any,
    jacobian: np.ndarray | None,
    trace: dict[str, Any] | None = None,
) -> Attempt:
    """One solve attempt: set-up -> fixed point -> diagnostics -> result (the collapsed result when
    complete collapse is a fixed point and no non-trivial one was found). ``setup``: the point's
    :class:`TiedSetup` (or a non-symmetric student's :class:`~.block_map.BlockSetup`); ``F`` its map;
    ``trace``: filled with what the fixed-point stages tried (for :mod:`.diagnosis`)."""
    try:
        x = setup.start_point(init)
        s = fixed_point_stage(F, x, jacobian, o, warm=init is not None, trace=trace)
        dg = diagnostics_stage(F, s, o)
        if setup.collapse_holds and not (dg.converged and setup.nontrivial(dg.x)):
            raise DrivenToCollapse
    except DrivenToCollapse:
        return Attempt(setup.collapsed(t0, F.n_calls), 0.0, None, None, F)
    r = setup.result(F, dg, s.iterations, t0, o)
    return Attempt(r, dg.residual, np.array(dg.x, float), None if s.jac is None else np.asarray(s.jac), F, dg.pr)
