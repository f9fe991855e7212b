"""The state-evolution driver: :func:`theory`, one fixed point, from up to three solve attempts.

Composes the output side (:mod:`.output`), the prior side (:mod:`.prior`) and the solve stages
(:mod:`.stages`: set-up -> fixed point -> diagnostics -> result) into the six-order-parameter fixed
point of arXiv 2509.24914 (Sec. 3). See the package docstring for the equations; sweeps are in
:mod:`.sweep`.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from singlehead.model.problem import Problem
from singlehead.model.results import Result
from singlehead.state_evolution.block_map import BlockSetup
from singlehead.state_evolution.convergence import attempt_plan
from singlehead.state_evolution.diagnosis import diagnose, record_attempt
from singlehead.state_evolution.fixed_point import du_dx, dx_du, to_u
from singlehead.state_evolution.models.base import PointSolution
from singlehead.state_evolution.options import SEOptions, WarmStart
from singlehead.state_evolution.prior import CollapsePoint, PriorModel
from singlehead.state_evolution.quadrature import OutputQuadrature
from singlehead.state_evolution.se_map import MapSettings, ProxBranches, SEMap
from singlehead.state_evolution.stages import Attempt, SEState, TiedSetup, solve_attempt

__all__ = ["theory", "solve_point", "solve_setup", "PointSolution"]


def theory(problem: Problem, *, options: SEOptions | None = None, prior: str | PriorModel = "auto",
           init: SEState | WarmStart | Sequence[float] | Result | None = None,
           quad: OutputQuadrature | None = None) -> Result:
    """State-evolution prediction for ``problem`` (arXiv 2509.24914, Sec. 3; docs: Theory, :ref:`theory-se`).

    Parameters
    ----------
    problem : Problem
        Channels ``seq2lab``/``seq2seq`` (same theory) or ``linear``; students ``factorized``
        (nuclear norm, rank cap ``kappa``) or ``direct`` (Frobenius), and non-symmetric students
        (``untied``), whose fields form a symmetric and an antisymmetric block, solved by the same
        stages on the map of :class:`~singlehead.state_evolution.block_map.BlockSEMap` (options that cannot
        apply to them raise ``ValueError``, see
        :func:`~singlehead.state_evolution.block_map.check_block_options`). ``d`` only matters in
        the finite-``d`` prior mode. Several heads (``heads``, ``teacher_heads``): on the linear
        channel as its single-head equivalent (``effective_single_head``;
        docs: :ref:`concepts-multihead`), exact; on a softmax channel (``seq2lab``, ``seq2seq``,
        ``hardmax``) by the *experimental* multi-head state evolution
        (:func:`~singlehead.state_evolution.multihead_se.multihead_theory`, docs page "Multi-head attention: the state evolution"),
        whose result says so (``extras["experimental"]``, ``message``) and carries its own ``converged``
        and ``extras["residual"]``; it serves the factorized student, ``heads`` and ``teacher_heads`` up to
        ``MAX_HEADS``, ``T`` up to ``MAX_T`` and ``prior="auto"`` (others raise ``ValueError`` naming
        the parameter and its range, :func:`~singlehead.state_evolution.multihead_se.check_multihead_problem`).
        With ``heads = teacher_heads = 1`` the problem is the single-head one.
    options : SEOptions, optional
        Solver settings (tolerance, quadrature, method, ...); defaults ``SEOptions()``, its ``None`` fields the
        problem's model's defaults. An option that does not apply to the problem's model (tied, blocks, heads)
        raises ``ValueError`` naming it.
    prior : {"auto", "asymptotic", "finite"} or PriorModel
        Target-side model, see :func:`~singlehead.state_evolution.prior_model`.
    init : SEState, WarmStart, (q, m, Sigma), Result or None
        Starting point (e.g. the previous point of a sweep); default ``(Q0/2, 0.4 Q0, 1)``.
        A solve from ``init`` is tried first without the continuation in ``lam``; if it does not
        converge, the default start runs every stage, then (if still unconverged) ``init`` does, then
        the default start with secant updates (see ``attempt_plan``), and the first converged solve
        (else the smallest residual) is kept. If the kept one stalled at the map's quadrature error
        (``diagnosis == "quadrature_floor"``) and neither ``quad`` nor ``SEOptions.n_points`` fixed the
        node set, the point is solved once more on 4 times the nodes per scramble, kept if it converges
        (``extras["quadrature_refined"]``, and ``extras["n_nodes"]`` counts the nodes used); ``extras["warm_start_retried"]``
        says whether a warm attempt failed, ``extras["evaluations_all_attempts"]`` counts the map
        evaluations of every attempt (``iterations``: those of the kept one).
    quad : OutputQuadrature, optional
        Reuse a node set (sweeps); default ``options.quadrature(problem)``.

    Returns
    -------
    Result
        ``source="theory"``; metrics as in :class:`~singlehead.Result`; standard fields
        ``converged`` (residual below ``10 tol``, or below ``residual_floor`` — the map's own
        quadrature error, see ``SEOptions.floor_after`` — and every prox converged), ``iterations``
        (SE map evaluations), ``runtime_s``, ``message``; ``extras`` with ``q, m, Sigma, qhat, mhat,
        Sigmahat, eta, delta, eps, cutoff, cap_binds, first_moment, residual, residual_floor`` (``nan``
        when the residual met ``tol`` and the floor was not needed), ``quadrature_error`` (dict of standard errors), ``prior_mode``, ``collapsed`` (complete
        rank collapse: the solution is ``S = 0``, ``q = m = Sigma = 0``, matrix error ``Q0``,
        rank fraction 0, penalty 0, test/train errors of predicting with ``h = 0``),
        ``collapse_lam`` (the ``lam`` above which ``S = 0`` is a fixed point, see
        :func:`~singlehead.state_evolution.collapse_point`; ``inf`` for direct students), ``collapse_fixed_point``
        (whether it is one at this ``lam``), ``objective`` (the training objective per sample ``L/n = train_error +
        penalty/alpha`` predicted at this fixed point, as ``simulate`` measures it; where several fixed points
        exist, the ERM minimiser's is the lowest). An unconverged result says why: ``diagnosis``
        (``"rs_unstable"``, ``"quadrature_floor"`` or ``"solver_miss"``), the cause and remedy in
        ``message``, and ``extras["diagnosis_details"]`` (the replicon, prox-jump share and floor at the
        best point, and what each solve attempt tried; module ``singlehead.state_evolution.diagnosis``).

        A non-symmetric student's ``extras`` hold its six overlaps ``q_s, m_s, Sigma_s, q_a, m_a,
        Sigma_a`` (``_s``: symmetric part of the learned matrix, ``_a``: antisymmetric part) and their
        conjugates ``qhat_s, ...``, ``asymmetry = ||M - M^T||_F/||M||_F``, ``prior`` (how the prior side
        was computed: ``"sampled D=... x ..."`` (with ``", D=... x ..., extrapolated in 1/D"`` when
        extrapolated), ``"closed form"``, ``"exact (tied prior)"`` or
        ``"collapse"``), ``residual``, ``residual_floor``, ``evaluations``, ``objective``, ``collapsed``,
        standard errors ``<name>_se`` (output quadrature and, with ``SEOptions.draw_errors``, the
        sampling error over the prior's draws, ``<name>_draws_se``, with its degrees of freedom
        ``draws_dof``), and for a sampled prior side the learned
        singular values (``singular_values``, with ``zero_fraction``, ``sv_edges``, ``sv_density``).

    Examples
    --------
    >>> from singlehead import MPTarget, Problem, theory
    >>> problem = Problem(T=2, alpha=1.0, noise=0.5, lam=0.01, target=MPTarget(kappa0=0.5))
    >>> result = theory(problem)
    >>> result.converged, round(result.test_error, 2)
    (True, 0.03)
    >>> sorted(k for k in ("delta", "eps", "eta") if k in result.extras)   # learned-spectrum law
    ['delta', 'eps', 'eta']
    """
    return solve_point(problem, options or SEOptions(), prior, init, quad).result


def solve_point(problem: Problem, options: SEOptions, prior: str | PriorModel, init: Any,
                quad: OutputQuadrature | None, cold_first: bool = False, alpha_tangent: bool = False,
                collapse: CollapsePoint | None = None) -> PointSolution:
    """:func:`theory`, also returning the warm start its solution offers to a next point (for sweeps).

    ``cold_first``: try the default start before the warm one (see :func:`~.convergence.attempt_plan`).
    ``alpha_tangent``: include the fixed point's tangent along ``log alpha`` in the warm start (one more
    Jacobian; an ``alpha`` sweep's predictor uses it). ``collapse``: this problem's
    :func:`~singlehead.state_evolution.collapse_point` when the caller has it (a sweep rescales the previous point's).

    The problem's model (:func:`~singlehead.state_evolution.models.model_for`, the one place that asks what a
    problem is) solves it: the tied and block models by :func:`solve_setup` on their setup, the others by their
    own means.
    """
    from singlehead.state_evolution.models import model_for

    model = model_for(problem)
    sol = model.solve_point(model.prepare(options), prior, init, quad, cold_first=cold_first,
                            alpha_tangent=alpha_tangent, collapse=collapse)
    model.finish(sol.result)
    return sol


def solve_setup(problem: Problem, setup: TiedSetup | BlockSetup, o: SEOptions, init: Any,
                quad: OutputQuadrature | None, t0: float, *, refine: bool, prior_again: Any, cold_first: bool,
                alpha_tangent: bool, collapse: CollapsePoint | None) -> PointSolution:
    """The engine's solve of one point from its model's ``setup``: the attempt plan (:func:`~.convergence.attempt_plan`), the
    diagnosis of an unconverged result, and the re-solve on finer nodes of a point that stalled at its
    quadrature floor (``refine``: the node set is the solver's choice; ``prior_again``: the prior that re-solve
    uses). Every student with one or two blocks of overlaps runs these same attempts and stages; what differs
    is the setup: a symmetric student's :class:`~.stages.TiedSetup` and :class:`~.se_map.SEMap`, a
    non-symmetric student's :class:`~.block_map.BlockSetup` and :class:`~.block_map.BlockSEMap`."""
    jacobian, branches = None, None
    if isinstance(init, WarmStart):
        if hasattr(setup, "warm_prior"):  # a sampled prior side starts its solves from the previous point's
            setup.warm_prior = init.prior_solutions
        init, jacobian, branches = np.asarray(init.x, dtype=float), init.jacobian, (init.branches, init.branches_cv)
        # tracked on another node set: dropped
        branches = tuple(None if b is None or quad is None or any(a.shape[0] != quad.flat.shape[0] for a in b)
                         else tuple(b) for b in branches)
    if setup.collapse_holds and problem.channel.convex_prox:
        # convex problem (the rank cap does not bind at S = 0): complete collapse is the minimiser
        r = setup.collapsed(t0, 0)
        r.extras["warm_start_retried"] = False
        r.extras["evaluations_all_attempts"] = 0
        return PointSolution(r)

    def solve(init_: Any, jacobian_: np.ndarray | None, branches_: Any = None, *, escalate: bool = True,
              secant: bool = False, cap: int | None = None) -> tuple[Attempt, dict[str, Any]]:
        oa = o if escalate else o.quick_attempt()
        oa = oa.replace(exact_jacobian=False) if secant else oa
        if cap is not None and cap < oa.max_evals:  # what is left of the point's cap (SEOptions.max_iter)
            oa = oa.replace(max_evals=cap)
        # each attempt has its own budget; closed-form output sides (no nodes) keep Broyden; with softmax
        # (non-convex) the non-trivial solve is still tried when collapse is a fixed point, and if it reaches
        # it (or fails) the collapsed solution is returned
        settings = MapSettings.from_options(oa, tangent=setup.tangent, stop_on_collapse=setup.collapse_holds)
        tracked = ProxBranches() if branches_ is None else ProxBranches(*(None if b is None else list(b) for b in branches_))
        trace: dict[str, Any] = {"budget": oa.max_evals}
        a = solve_attempt(setup, setup.new_map(settings, tracked), t0, oa, init=init_, jacobian=jacobian_, trace=trace)
        return a, trace

    plan = attempt_plan(init, jacobian, branches, cold_first,
                         secant_fallback=o.exact_jacobian and setup.tangent)
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
        records.append(record_attempt(warm=init_ is not None or jac_ is not None, quick=not escalate, secant=secant,
                                      result=a.result, evaluations=a.map.evaluations, budget=trace["budget"],
                                      trace=trace))
        if a.converged:
            break
        warm_failed = warm_failed or init_ is not None or jac_ is not None
    kept = min(attempts, key=lambda a: (not a.converged, a.residual))
    r = kept.result
    diagnose(problem, r, records, o, quad)  # an unconverged result says why
    setup.finish(r, kept.map, kept.x, o, kept.jacobian)
    r.extras["warm_start_retried"] = warm_failed
    # ``iterations`` counts the kept solve's map evaluations; this counts every attempt's (thinned ones included)
    r.extras["evaluations_all_attempts"] = int(sum(a.map.evaluations for a in attempts))
    r.runtime_s = time.perf_counter() - t0
    if refine and r.diagnosis == "quadrature_floor" and (o.max_iter is None or o.max_iter > used):
        # the residual stalled at the map's quadrature error: once more on _REFINE times the nodes per scramble
        finer = o.replace(n_points=_REFINE * o.points(problem),
                          max_iter=None if o.max_iter is None else o.max_iter - used)
        sol2 = solve_point(problem, finer, prior_again, init, None, cold_first, alpha_tangent, collapse=None)
        r2 = sol2.result
        r2.extras["evaluations_all_attempts"] += r.extras["evaluations_all_attempts"]
        r2.extras["warm_start_retried"] = r2.extras["warm_start_retried"] or warm_failed
        r2.runtime_s = time.perf_counter() - t0
        if r2.converged:
            r2.extras["quadrature_refined"] = True
            return PointSolution(r2, sol2.warm_start, r2.extras["warm_start_retried"])
        r.extras["diagnosis_details"]["refined"] = {"n_points": finer.n_points, "residual": r2.extras["residual"],
                                                    "diagnosis": r2.diagnosis}
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
    return WarmStart(tuple(map(float, x)), kept.jacobian, None if tracked.main is None else tuple(tracked.main),
                     _alpha_tangent(kept.map, x, Q0) if alpha_tangent else None,
                     None if tracked.cv is None else tuple(tracked.cv),
                     getattr(kept.map, "warm_prior", None))


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
