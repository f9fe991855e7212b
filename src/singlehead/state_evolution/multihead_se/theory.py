"""The multi-head state evolution as a :class:`~singlehead.Result`: ``multihead_theory``, the routed entry point of
:func:`singlehead.theory` (``multihead_point``, with the problems and options it serves) and the specialisation
eigenvalue of the unspecialised fixed point. The map and its solvers are :mod:`.solve`'s; the draw error is
:mod:`.draw_error`'s.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np

from singlehead.model.problem import Problem
from singlehead.model.results import Result
from singlehead.model.validation import check, finite
from singlehead.numerics.thread_map import blas_threads, single_blas_thread
from singlehead.state_evolution.block_map import t_quantile_975
from singlehead.state_evolution.multihead_se.draw_error import multihead_draw_jackknife
from singlehead.state_evolution.multihead_se.output import multihead_test_errors
from singlehead.state_evolution.multihead_se.solve import (
    MultiHeadOptions,
    MultiHeadSEMap,
    admissible,
    default_start,
    match_heads,
    multihead_options,
    solve_coarse_to_fine,
    solve_multihead,
    specialisation_index,
    unconverged_reason,
)

__all__ = [
    "multihead_theory",
    "MAX_HEADS",
    "MAX_T",
    "check_multihead_problem",
    "multihead_point",
    "specialisation_eigenvalue",
]


def multihead_theory(
    problem: Problem, options: Any = None, *, start: tuple | None = None, verbose: bool = False
) -> Result:
    """The state evolution of ``problem`` (several heads, a softmax channel, factorized student) as a Result.

    Fields as for the single head (docs: Concepts, "Multi-head attention"): metrics of ``S_eff = (1/H) sum_h S_h``
    against ``S0_eff``, penalty ``lam sum_h Tr S_h/d``. Extras: ``head_Q``, ``head_M``, ``head_Q0``, ``head_Sigma``
    (student heads matched to teacher heads as a simulation's, ``match_heads``; ``head_order``),
    the conjugates ``Qhat``, ``Mhat``, ``Sigmahat``, ``objective`` (train error + penalty/alpha, the predicted ERM
    objective ``L/n``; ``objective_se``: its quadrature and draw error at the fixed point), ``specialisation``
    (:func:`specialisation_index`), ``ansatz``, the residual history,
    the draw standard errors of ``head_Q``, ``head_M``, and ``test_error_se``: the quadrature's at the fixed point;
    with ``draw_errors`` and it converged, the grouped jackknife's over the prior draws and the output nodes
    (``multihead_se.draw_error``; ``test_error_draws_se``, ``draws_dof``, ``draw_error_groups``), or, where the
    groups are the draws alone, that added in quadrature to the quadrature's (``test_error_quadrature_se``).

    ``options``: an :class:`~singlehead.SEOptions` (its ``None`` fields the heads model's defaults; options the
    model does not read are refused by name), or ``None``. ``start``: ``(Q, M, Sigma)`` to start from (default:
    the ansatz's generic start, ``default_start``).

    The point runs on ``options.threads`` threads (``None``: the size of this process's BLAS pool), with every
    BLAS pool held at one thread for its duration; the numbers do not depend on the number of threads.
    """
    o = _with_threads(multihead_options(options, start=start))
    with single_blas_thread():
        return _solve_point(problem, o, verbose=verbose)[2]


def _with_threads(o: MultiHeadOptions) -> MultiHeadOptions:
    """``o`` with ``threads`` resolved: ``None`` becomes the size of this process's BLAS pool."""
    return o if o.threads is not None else dataclasses.replace(o, threads=blas_threads())


def _solve_point(problem: Problem, o: MultiHeadOptions, *, verbose: bool = False) -> tuple[MultiHeadSEMap, Any, Result]:
    """:func:`multihead_theory`'s solve: the map, the solution in the ansatz's coordinates and the Result."""
    H, H0 = problem.heads, problem.teacher_heads
    ansatz = o.ansatz or ("unspecialised" if H == H0 and H > 1 else "general")
    if ansatz != "general" and H != H0:
        raise ValueError(f"options.ansatz: {ansatz!r} needs heads == teacher_heads (got {H}, {H0})")
    if problem.student.name != "factorized":
        raise ValueError(
            f"student: the multi-head state evolution covers the factorized student (got {problem.student.name!r})"
        )
    t0 = time.perf_counter()
    se_map = MultiHeadSEMap(problem, o)
    start = o.start if o.start is not None else default_start(problem, se_map.Q0, ansatz)
    solve = solve_coarse_to_fine if o.coarse and ansatz == "unspecialised" else solve_multihead
    sol = solve(
        se_map, ansatz, start, damping=o.damping, tol=o.tol, max_iter=o.max_iter, history=o.history, verbose=verbose
    )
    Q, M, Sigma, order = match_heads(sol.Q, sol.M, sol.Sigma)
    Q0 = se_map.Q0
    te = multihead_test_errors(Q, M, problem=problem, Q0=Q0, quad=se_map.quad)
    draws: dict[str, Any] = {}
    if o.draw_errors and o.sample_draws > 1 and sol.converged and not sol.collapsed:
        jk = multihead_draw_jackknife(se_map, ansatz, (sol.Q, sol.M, sol.Sigma), chord_matrix=sol.chord_matrix)
        dse = jk["test_error_draws_se"] * t_quantile_975(jk["draws_dof"]) / t_quantile_975(math.inf)
        draws = {
            "test_error_draws_se": dse,
            "draws_dof": jk["draws_dof"],
            "draw_error_groups": jk["groups"],
            "draw_error_evaluations": jk["evaluations"],
            "draw_error_converged": jk["converged"],
            "test_error_quadrature_se": te["test_error_se"],
        }
        # groups with their nodes carry the quadrature's error already (through the fixed point, which amplifies
        # it); draws alone leave the quadrature's error of the test-error integral to be added
        te["test_error_se"] = dse if jk["groups"] == "draws and nodes" else math.hypot(te["test_error_se"], dse)
    q, m, q0 = float(Q.mean()), float(M.mean()), float(Q0.mean())
    penalty = problem.lam * float(np.sum(sol.prior.traces))
    tr = sol.prior.per_draw["traces"].sum(axis=1)
    penalty_se = problem.lam * float(tr.std(ddof=1) / math.sqrt(tr.size)) if tr.size > 1 else math.nan
    objective_se = math.hypot(sol.out.err["train_error"], penalty_se / problem.alpha)
    extras = {
        "head_Q": Q,
        "head_M": M,
        "head_Q0": Q0,
        "head_Sigma": Sigma,
        "head_order": order,
        "Qhat": sol.hats[0],
        "Mhat": sol.hats[1],
        "Sigmahat": sol.hats[2],
        "q": q,
        "m": m,
        "Q0": q0,
        "objective": sol.out.train_error + penalty / problem.alpha,
        "objective_se": objective_se,
        "penalty_draw_se": penalty_se,
        "specialisation": specialisation_index(M, Q0),
        "ansatz": ansatz,
        "residuals": sol.residuals,
        "head_Q_draw_se": sol.prior.draw_se("Q"),
        "head_M_draw_se": sol.prior.draw_se("M"),
        "test_error_se": te["test_error_se"],
        "test_error_noisy_se": te["test_error_noisy_se"],
        "train_error_se": sol.out.err["train_error"],
        "prior_sweeps": sol.prior.sweeps,
        "denoiser_objective": sol.prior.objective,
        "sample_dim": o.sample_dim,
        "sample_draws": o.sample_draws,
        **draws,
        "coarse_evaluations": sol.coarse_evaluations,
        "collapsed": sol.collapsed,
    }
    diagnosis, msg = (None, "") if sol.converged else unconverged_reason(sol, o.tol)
    return (
        se_map,
        sol,
        Result(
            "theory",
            problem.to_dict(),
            test_error=te["test_error"],
            test_error_noisy=te["test_error_noisy"],
            train_error=sol.out.train_error,
            penalty=penalty,
            matrix_error=q - 2 * m + q0,
            rank_fraction=sol.prior.rank_fraction,
            converged=sol.converged,
            diagnosis=diagnosis,
            iterations=sol.evaluations,
            runtime_s=time.perf_counter() - t0,
            message=msg,
            extras=extras,
        ),
    )


#: the largest number of student or teacher heads, and the longest sequence, the routed state evolution serves
#: (head matching is exhaustive over assignments; the prox is a dense Newton on ``heads T(T+1)/2`` fields)
MAX_HEADS = 4
MAX_T = 3


def check_multihead_problem(problem: Problem, prior: Any = "auto") -> None:
    """Raise ``ValueError``, naming the parameter and its supported range, unless ``problem`` (several heads, a
    softmax channel) is one the multi-head state evolution serves: the factorized student, ``heads`` and
    ``teacher_heads`` in ``1..MAX_HEADS``, ``T`` in ``1..MAX_T``, and ``prior="auto"`` (the prior side is
    sampled; no asymptotic or finite-``d`` mode, no :class:`~singlehead.state_evolution.PriorModel`)."""
    H, H0 = problem.heads, problem.teacher_heads
    if problem.student.name != "factorized":
        raise ValueError(
            f"student must be 'factorized' for the multi-head state evolution of the "
            f"{problem.channel.name!r} channel (got {problem.student.name!r}, heads={H}, "
            f"teacher_heads={H0})"
        )
    for name, v in (("heads", H), ("teacher_heads", H0)):
        if v > MAX_HEADS:
            raise ValueError(
                f"{name} must be in 1..{MAX_HEADS} for the multi-head state evolution of the "
                f"{problem.channel.name!r} channel (got {v})"
            )
    if problem.T > MAX_T:
        raise ValueError(
            f"T must be in {problem.channel.min_T}..{MAX_T} for the multi-head state evolution of the "
            f"{problem.channel.name!r} channel (got T={problem.T}, heads={H}, teacher_heads={H0})"
        )
    if not (isinstance(prior, str) and prior == "auto"):
        raise ValueError(
            f"prior must be 'auto' for the multi-head state evolution of the {problem.channel.name!r} "
            f"channel, whose prior side is sampled (got {prior!r})"
        )


def multihead_point(
    problem: Problem, options: Any = None, prior: Any = "auto", init: Any = None, quad: Any = None
) -> Result:
    """:func:`singlehead.theory` of a problem with several heads on a softmax channel: :func:`multihead_theory`,
    marked experimental.

    ``options``: see :func:`~.solve.multihead_options`. ``init``: ``None``, or a :class:`~singlehead.Result` of this
    route (a neighbouring point of a sweep), whose ``head_Q, head_M, head_Sigma`` become the start when
    ``options`` gives none. ``quad`` must be ``None`` (the route builds its own nodes). The result is
    :func:`multihead_theory`'s with, in ``extras``, ``experimental = True``, ``method = "multihead_se"`` and
    ``residual`` (the last relative change of the overlaps; ``converged`` says whether it met ``tol``), and
    ``message`` saying that the state evolution is experimental. Raises ``ValueError`` for what
    :func:`check_multihead_problem` refuses.
    """
    check_multihead_problem(problem, prior)
    if quad is not None:
        raise ValueError(
            "quad must be None for the multi-head state evolution of a softmax channel (its output "
            "side draws nodes in K (heads + teacher_heads) dimensions itself)"
        )
    o = multihead_options(options)
    if init is not None:
        if not isinstance(init, Result) or not all(k in init.extras for k in ("head_Q", "head_M", "head_Sigma")):
            raise ValueError(
                "init must be None or a Result of the multi-head state evolution (with head_Q, head_M "
                f"and head_Sigma) for heads={problem.heads}, teacher_heads={problem.teacher_heads} "
                f"(got {type(init).__name__})"
            )
        if o.start is None:
            start = tuple(np.asarray(init.extras[k], float) for k in ("head_Q", "head_M", "head_Sigma"))
            if start[1].shape == (problem.heads, problem.teacher_heads):
                o = dataclasses.replace(o, start=start)
    r = multihead_theory(problem, o)
    res = r.extras.get("residuals") or [math.nan]
    r.extras.update(experimental=True, method="multihead_se", residual=float(res[-1]))
    note = (
        "experimental multi-head state evolution (sampled prior side, "
        f"D={o.sample_dim} x {o.sample_draws} draws; ansatz {r.extras['ansatz']!r})"
    )
    r.message = note if not r.message else f"{note}: {r.message}"
    return r


def specialisation_eigenvalue(
    problem: Problem, options: Any = None, *, start: tuple | None = None, eps: float = 0.05
) -> dict[str, Any]:
    """Linear stability of the unspecialised fixed point against specialisation (``heads == teacher_heads >= 2``).

    The unspecialised subspace (``M = m 11^T``) lies inside the specialised one (``M = a I + b 11^T``), which
    adds one direction, the gap ``a`` of ``M``; both are invariant, so at the unspecialised fixed point the
    map's Jacobian inside the specialised subspace is block triangular and that direction has one eigenvalue,
    ``lambda = d a'/d a``. It is measured by central differences: the map (denoiser to ``prior_tol``, from the
    solve's warm state) at the fixed point with ``M`` moved by ``+-eps m (I - 11^T/H)``, projected on the
    specialised subspace. ``lambda < 1``: the undamped iteration returns to the unspecialised point (stable
    against specialisation); ``lambda > 1``: it leaves it, towards a specialised fixed point.

    Returns
    -------
    dict
        ``lambda``; ``gap_in`` (the gaps ``a`` put in, ``+-``), ``gap_out`` (the map's, ``+-``) and
        ``gap_at_fixed_point`` (the map's gap at the fixed point itself, zero but for the node layout's and the
        draws' asymmetry: the scale of ``lambda``'s error is ``|gap_at_fixed_point| / |gap_in|``); ``result``:
        the unspecialised fixed point, as :func:`multihead_theory` returns it under ``options`` (its objective,
        and with ``options.draw_errors`` the draws' error in the test error's).
    """
    H, H0 = problem.heads, problem.teacher_heads
    if H != H0 or H < 2:
        raise ValueError(
            f"heads and teacher_heads must be equal and >= 2 for the specialisation eigenvalue (got {H}, {H0})"
        )
    check(finite(eps) and 0 < eps < 1, "eps", "in (0, 1)", eps)
    o = _with_threads(dataclasses.replace(multihead_options(options, start=start), ansatz="unspecialised"))
    with single_blas_thread():
        return _eigenvalue(problem, o, eps)


def _eigenvalue(problem: Problem, o: MultiHeadOptions, eps: float) -> dict[str, Any]:
    """:func:`specialisation_eigenvalue` with its options' ``threads`` resolved (the caller holds BLAS at one
    thread)."""
    H = problem.heads
    se_map, sol, result = _solve_point(problem, o)

    def gap(A: np.ndarray) -> float:
        return float(np.mean(np.diag(A)) - (A.sum() - np.trace(A)) / (H * (H - 1)))

    direction = float(sol.M.mean()) * (np.eye(H) - np.ones((H, H)) / H)
    for s in (1.0, -1.0):
        if not admissible((sol.Q, sol.M + s * eps * direction, sol.Sigma), se_map.Q0):
            raise ValueError(
                f"eps={eps} moves M out of the admissible overlaps at the unspecialised point (the fields' "
                f"covariance [[Q0, M^T], [M, Q]] must stay positive definite; the solve "
                f"{'converged' if sol.converged else 'did not converge'}): use a smaller eps"
            )
    outs = {}
    for s in (0.0, 1.0, -1.0):
        new, _, _ = se_map(sol.Q, sol.M + s * eps * direction, sol.Sigma, "specialised")
        outs[s] = gap(new[1])
    gap_in = (gap(sol.M + eps * direction), gap(sol.M - eps * direction))
    lam = (outs[1.0] - outs[-1.0]) / (gap_in[0] - gap_in[1])
    return {
        "lambda": float(lam),
        "gap_in": gap_in,
        "gap_out": (outs[1.0], outs[-1.0]),
        "gap_at_fixed_point": outs[0.0],
        "result": result,
    }
