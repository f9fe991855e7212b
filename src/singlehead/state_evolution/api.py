"""The state evolution's entry points: :func:`theory`, :func:`theory_curve`, :func:`iter_theory_curve`,
:func:`stability` and the cache settings of a result (:func:`result_settings`).

Each asks :func:`~singlehead.state_evolution.models.model_for` once what the problem is and hands it to its
model (:mod:`.models`), which runs the engine (:mod:`.driver`, :mod:`.sweep`, :mod:`.stages`); every result leaves
in the one schema (``SEModel.finish``). Imports point downward: entry points -> models -> engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from singlehead.model.problem import Problem
from singlehead.model.results import Result
from singlehead.state_evolution.models import model_for
from singlehead.state_evolution.models.base import PointSolution
from singlehead.state_evolution.options import SEOptions, WarmStart
from singlehead.state_evolution.prior import CollapsePoint, PriorModel
from singlehead.state_evolution.quadrature import OutputQuadrature
from singlehead.state_evolution.stability_record import Stability
from singlehead.state_evolution.stages import SEState

__all__ = ["theory", "solve_point", "theory_curve", "iter_theory_curve", "stability", "result_settings"]


def theory(
    problem: Problem,
    *,
    options: SEOptions | None = None,
    prior: str | PriorModel = "auto",
    init: SEState | WarmStart | Sequence[float] | Result | None = None,
    quad: OutputQuadrature | None = None,
) -> Result:
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
        (:func:`~singlehead.state_evolution.multihead_se.multihead_theory`, docs page "Multi-head attention: the state
        evolution"),
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
        (``extras["quadrature_refined"]``, and ``extras["n_nodes"]`` counts the nodes used);
        ``extras["warm_start_retried"]``
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
        when the residual met ``tol`` and the floor was not needed), ``quadrature_error`` (dict of standard errors),
        ``prior_mode``, ``collapsed`` (complete
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


def solve_point(
    problem: Problem,
    options: SEOptions,
    prior: str | PriorModel,
    init: Any,
    quad: OutputQuadrature | None,
    cold_first: bool = False,
    alpha_tangent: bool = False,
    collapse: CollapsePoint | None = None,
) -> PointSolution:
    """:func:`theory`, also returning the warm start its solution offers to a next point (for sweeps).

    ``cold_first``: try the default start before the warm one (see :func:`~.convergence.attempt_plan`).
    ``alpha_tangent``: include the fixed point's tangent along ``log alpha`` in the warm start (one more
    Jacobian; an ``alpha`` sweep's predictor uses it). ``collapse``: this problem's
    :func:`~singlehead.state_evolution.collapse_point` when the caller has it (a sweep rescales the previous point's).

    The problem's model (:func:`~singlehead.state_evolution.models.model_for`, the one place that asks what a
    problem is) solves it: the tied and block models by :func:`~.driver.solve_setup` on their setup, the others by their
    own means.
    """
    model = model_for(problem)
    sol = model.solve_point(
        model.prepare(options), prior, init, quad, cold_first=cold_first, alpha_tangent=alpha_tangent, collapse=collapse
    )
    model.finish(sol.result)
    return sol


def theory_curve(
    problem: Problem,
    values: Iterable[float],
    *,
    param: str = "alpha",
    options: SEOptions | None = None,
    prior: str | PriorModel = "auto",
    init: SEState | WarmStart | Sequence[float] | Result | None = None,
    quad: OutputQuadrature | None = None,
    progress: bool = False,
) -> list[Result]:
    """SE along a grid of ``param`` (``"alpha"`` or ``"lam"``, or any Problem field), warm-started.

    Along ``alpha`` each point starts from the previous fixed point moved along its tangent
    ``du/dlog alpha`` (second order once two tangents are known; ``u`` the unconstrained
    coordinates, see :class:`~singlehead.state_evolution.WarmStart`); along other parameters from a secant extrapolation
    of the
    previous two fixed points; in both cases with the previous point's Jacobian and prox branches
    (a :class:`~singlehead.state_evolution.WarmStart`). All points share one quadrature node set and one prior model
    (rebuilt
    per point when ``param`` is ``"d"`` or ``"target"``). ``options``, ``prior``, ``init`` and
    ``quad`` are as in :func:`~singlehead.theory`. :func:`~singlehead.state_evolution.iter_theory_curve` yields the
    points as they are solved.
    Several heads on a softmax channel (the experimental multi-head state evolution): point by point, each
    started from the previous converged point's overlaps. A non-symmetric student (its map has no
    tangent): from a secant extrapolation of the previous two converged points in ``u`` and ``log`` of a
    positive ``param``, with the previous point's Jacobian, prox branches and prior-side estimators.

    Examples
    --------
    >>> from singlehead import Problem, theory_curve
    >>> curve = theory_curve(Problem(T=2, noise=0.5, lam=0.01), [0.25, 0.5, 1.0])
    >>> [r.problem["alpha"] for r in curve]
    [0.25, 0.5, 1.0]
    >>> errors = [r.test_error for r in curve]
    >>> errors[0] > errors[1] > errors[2]               # more data, less error at this lam
    True
    """
    return list(
        iter_theory_curve(
            problem, values, param=param, options=options, prior=prior, init=init, quad=quad, progress=progress
        )
    )


def iter_theory_curve(
    problem: Problem,
    values: Iterable[float],
    *,
    param: str = "alpha",
    options: SEOptions | None = None,
    prior: str | PriorModel = "auto",
    init: SEState | WarmStart | Sequence[float] | Result | None = None,
    quad: OutputQuadrature | None = None,
    progress: bool = False,
) -> Iterator[Result]:
    """:func:`~singlehead.theory_curve`, yielding each point's :class:`~singlehead.Result` as soon as it is solved.

    The next point is solved only when it is asked for, so a caller can stop early (the explorer
    does, when its view changes) and still has every point it received, warm-started as in
    :func:`~singlehead.theory_curve`.

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.state_evolution import iter_theory_curve
    >>> points = iter_theory_curve(Problem(T=2, noise=0.5, lam=0.01), [0.25, 0.5, 1.0])
    >>> round(next(points).problem["alpha"], 2)        # the first point, before the others are solved
    0.25
    """
    model = model_for(problem)
    for r in model.curve(list(values), param, model.prepare(options or SEOptions()), prior, init, quad, progress):
        yield model.finish(r)


def stability(
    problem: Problem, result: Result, *, options: SEOptions | None = None, quad: OutputQuadrature | None = None
) -> Stability:
    """RS-stability diagnostics of the SE fixed point ``result`` of ``problem``.

    Parameters
    ----------
    problem : Problem
        The problem ``result`` solves (any student and channel; a student with a symmetric and an
        antisymmetric block of fields, e.g. ``"untied"``, gets the two-block check of
        :func:`~singlehead.state_evolution.block_stability.block_stability`, a
        :class:`~singlehead.state_evolution.block_stability.BlockStability`).
    result : Result
        A converged :func:`~singlehead.theory` result (its ``extras`` hold the
        order parameters). A collapsed fixed point (``S = 0``) is stable: replicon 0.
    options, quad : optional
        Quadrature of the output side (default: the SE's own, ``SEOptions().quadrature``).

    The prior factor uses the target's asymptotic law (``prior_model(problem, "asymptotic")``),
    also for a fixed point solved with the finite-``d`` prior.

    Returns
    -------
    Stability

    Examples
    --------
    >>> from singlehead import Problem, theory
    >>> from singlehead.state_evolution import stability
    >>> problem = Problem(T=2, alpha=1.0, noise=0.5, lam=0.01)
    >>> check = stability(problem, theory(problem))
    >>> check.replicon < 1.0, 0.0 <= check.prox_jump_share < 0.05
    (True, True)
    """
    if result.problem and result.problem != problem.to_dict():
        raise ValueError(
            "result is the fixed point of another problem: pass the problem it was solved for "
            f"(result.problem = {result.problem})"
        )
    return model_for(problem).stability(result, options=options, quad=quad)


def result_settings(problem: Problem, options: SEOptions, prior: str = "auto") -> tuple[tuple[str, Any], ...]:
    """The settings among ``prior`` and ``options`` that change ``theory(problem)``, as a sorted tuple of
    ``(name, value)`` (what a cache key of the result holds besides the problem), ``options`` resolved for the
    problem's model first.

    ``prior``: ``"asymptotic"`` is ``"auto"``. ``tol`` always; ``n_points`` (resolved, see
    :meth:`SEOptions.points`) where nodes are used: a channel without closed forms, or a
    non-symmetric student (its collapse test integrates on nodes); ``node_seed`` where nodes are
    used or something is drawn (``prior="finite"``'s GOE draws); and the model's ``key_options``: a
    sampled prior side's instances (``sample_dim``, ``sample_draws``, ``sample_extrapolate``, the resolved
    ``sample_seed``: ``None`` and ``node_seed`` give one key), whether its error bars include their sampling
    error (``draw_errors``), the heads model's ``ansatz`` and ``max_iter``.

    Examples
    --------
    >>> from singlehead import Problem
    >>> result_settings(Problem(channel="linear"), SEOptions())
    (('prior', 'auto'), ('tol', 1e-06))
    >>> dict(result_settings(Problem(channel="seq2lab", student="untied"), SEOptions()))["n_points"]
    4096
    """
    model = model_for(problem)
    options = model.prepare(options)  # the model's values of the options left at None
    prior = "auto" if prior == "asymptotic" else str(prior)
    nodes = problem.channel.needs_quadrature or not problem.student.symmetric
    out: dict[str, Any] = {"prior": prior, "tol": options.tol}
    if nodes:
        out["n_points"] = options.points(problem)
    if nodes or prior == "finite":
        out["node_seed"] = options.node_seed
    for name in model.key_options:  # a sampled prior side's instances, an ansatz, ...
        out[name] = options.instance_seed if name == "sample_seed" else getattr(options, name)
    return tuple(sorted(out.items()))
