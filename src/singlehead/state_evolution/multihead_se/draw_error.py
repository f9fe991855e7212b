"""The sampling error of the multi-head fixed point: a grouped jackknife over the prior draws and the output nodes.

The prior side averages the coupled denoiser over ``R`` fixed instances (:class:`.prior.MultiHeadPriorSample`)
and the output side over ``S`` scrambled node sets (:class:`~singlehead.state_evolution.quadrature.OutputQuadrature`),
so the fixed point, and the test error predicted there, depend on both samples. The map amplifies their errors
on the way to its fixed point (by ``(I - J)^{-1}``, large near a transition), so the quadrature's own standard
error of the test-error integral at fixed overlaps is not that of the prediction. The jackknife re-solves the
fixed point ``G`` times, each time without one group (started at the full fixed point, so a few map evaluations
each), and estimates the standard error of the prediction over sampling seeds by

    se^2 = (G - 1)/G sum_g (t_(-g) - mean_g t_(-g))^2 ,

``t_(-g)`` the test error without group ``g``; it has ``G - 1`` degrees of freedom. Where ``S`` is a multiple of
``R`` the ``G = R`` groups are one draw and ``S/R`` scrambles each (draws and nodes are independent, so leaving
out a group samples both errors at once, at the cost of the draws-only jackknife); otherwise the groups are the
draws alone, ``G = R``, and the quadrature error enters only through the test-error integral.

Why not the linear response ``(I - J)^{-1} (F_r - F)`` used for the single head's finite-``d`` prior
(:mod:`singlehead.state_evolution.draw_spread`)? The multi-head map is a function of its input only up to the
accuracy of its inner solves (the block-coordinate denoiser's step-size stopping rule, and which prox branch a
quadrature node ends on), about ``1e-3`` of the overlaps, and its Jacobian is far from normal: a differenced ``J``
is either noisy (small steps) or biased (large ones), and the response it gives overstated the measured spread
over sampling seeds several times. The jackknife uses only converged fixed points.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

import numpy as np

from singlehead.numerics.thread_map import thread_map
from singlehead.state_evolution.multihead_se.output import multihead_test_errors
from singlehead.state_evolution.multihead_se.prior import MultiHeadPriorSample
from singlehead.state_evolution.multihead_se.solve import MultiHeadSEMap, chord_solve, solve_multihead
from singlehead.state_evolution.quadrature import OutputQuadrature

__all__ = ["multihead_draw_jackknife", "jackknife_groups"]


def jackknife_groups(draws: int, scrambles: int) -> tuple[list[list[int]], list[list[int]] | None]:
    """The jackknife's groups: per group the prior draws and the node scrambles it holds (module docstring).

    Returns ``(draw_groups, scramble_groups)``; ``scramble_groups`` is ``None`` where ``scrambles`` is not a multiple
    of ``draws`` (the groups are then the draws alone).

    Examples
    --------
    >>> from singlehead.state_evolution.multihead_se.draw_error import jackknife_groups
    >>> jackknife_groups(4, 4)
    ([[0], [1], [2], [3]], [[0], [1], [2], [3]])
    >>> jackknife_groups(2, 4)
    ([[0], [1]], [[0, 1], [2, 3]])
    >>> jackknife_groups(3, 2)
    ([[0], [1], [2]], None)
    """
    draw_groups = [[r] for r in range(draws)]
    if scrambles % draws:
        return draw_groups, None
    k = scrambles // draws
    return draw_groups, [list(range(g * k, (g + 1) * k)) for g in range(draws)]


def _without(se_map: MultiHeadSEMap, draws: list[int], scrambles: list[int] | None, tol: float) -> MultiHeadSEMap:
    """A shallow copy of ``se_map`` on the kept draws (and scrambles), with its warm starts cut to them."""
    sub = copy.copy(se_map)  # the same options and problem; its own draws, nodes and warm starts
    sample = se_map.sample
    sub.sample = MultiHeadPriorSample(sample.S0[draws], sample.Z[draws])
    sub.Q0 = sub.sample.teacher_overlaps()
    sub.solutions = None if se_map.solutions is None else se_map.solutions[draws]
    if scrambles is not None:
        quad = se_map.quad
        sub.quad = OutputQuadrature(quad.nodes[scrambles], quad.seed)

        def cut(a: np.ndarray) -> np.ndarray:  # node-major rows: scramble s holds rows s N .. (s + 1) N - 1
            return a.reshape(quad.n_scrambles, -1, *a.shape[1:])[scrambles].reshape(-1, *a.shape[1:])

        sub.branches = None if se_map.branches is None else [cut(b) for b in se_map.branches]
        sub.z_branch = None if se_map.z_branch is None else cut(se_map.z_branch)
    # the prox continues the fixed point's branches (whose cold starts the solve ran): the leave-one-out solve
    # counts its own evaluations, so its cold starts come after union_every of them, not at the solve's count
    sub.calls = 0
    # solved to a relative change ``tol``: the denoiser to ``tol/100`` suffices (not the solve's ``prior_tol``)
    # (and on one thread: the jackknife runs the groups' solves side by side instead)
    sub.options = dataclasses.replace(se_map.options, prior_tol=max(se_map.options.prior_tol, 1e-2 * tol), threads=1)
    return sub


def multihead_draw_jackknife(
    se_map: MultiHeadSEMap,
    ansatz: str,
    x: tuple,
    *,
    tol: float = 1e-3,
    max_iter: int = 30,
    chord_matrix: np.ndarray | None = None,
) -> dict[str, Any]:
    """Grouped jackknife standard error over the prior draws and the output nodes of the test error at the fixed
    point ``x`` (module docstring).

    Parameters
    ----------
    se_map : MultiHeadSEMap
        The solved problem's map (its draws, nodes, prox branches and denoiser solutions; left unchanged). The
        ``G`` solves run on its ``options.threads`` threads (BLAS held at one thread by the caller), each of them
        on one.
    ansatz : str
        The ansatz the fixed point was solved in.
    x : tuple of arrays
        The fixed point ``(Q, M, Sigma)``, the start of every leave-one-out solve.
    tol, max_iter : float, int
        The leave-one-out solves' stopping rule (:func:`.solve.solve_multihead`): their shifts from ``x`` are a
        few per cent of the overlaps, so a relative change of ``1e-3`` resolves them.
    chord_matrix : array, optional
        ``J - I`` of the map in the ansatz's coordinates (a coarse-to-fine solve's ``chord_matrix``): the
        leave-one-out solves take its chord steps (:func:`.solve.chord_solve`, the same stopping rule) instead
        of the Anderson iteration.

    Returns
    -------
    dict
        ``test_error_draws_se`` (``nan`` with one draw), ``draws_dof`` (``G - 1``), ``groups`` (``"draws and
        nodes"`` or ``"draws"``: what a group holds, :func:`jackknife_groups`), ``leave_one_out`` (the ``G`` test
        errors), ``evaluations`` (map evaluations of the ``G`` solves) and ``converged`` (every leave-one-out
        solve met ``tol``).
    """
    if not (math.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a finite number > 0 (got {tol!r})")
    R = se_map.sample.S0.shape[0]
    if R < 2:
        return {
            "test_error_draws_se": math.nan,
            "draws_dof": 0,
            "groups": "draws",
            "leave_one_out": [],
            "evaluations": 0,
            "converged": True,
        }
    draw_groups, scramble_groups = jackknife_groups(R, se_map.quad.n_scrambles)

    def leave_out(g: int) -> tuple[float, int, bool]:
        keep_d = [r for h, grp in enumerate(draw_groups) if h != g for r in grp]
        keep_s = (
            None if scramble_groups is None else [s for h, grp in enumerate(scramble_groups) if h != g for s in grp]
        )
        sub = _without(se_map, keep_d, keep_s, tol)
        if chord_matrix is not None:
            sol = chord_solve(
                sub,
                ansatz,
                x,
                chord_matrix,
                tol=tol,
                max_iter=max_iter,
                damping=se_map.options.damping,
                history=se_map.options.history,
            )
        else:
            sol = solve_multihead(
                sub,
                ansatz,
                x,
                damping=se_map.options.damping,
                tol=tol,
                max_iter=max_iter,
                history=se_map.options.history,
            )
        te = multihead_test_errors(sol.Q, sol.M, problem=se_map.problem, Q0=sub.Q0, quad=sub.quad)["test_error"]
        return te, sol.evaluations, sol.converged

    # the groups' solves are independent (each its own copy of the map): side by side on the map's threads
    solved = thread_map(leave_out, range(len(draw_groups)), se_map.options.threads or 1)
    values = [v[0] for v in solved]
    evaluations = sum(v[1] for v in solved)
    converged = all(v[2] for v in solved)
    t = np.array(values)
    G = t.size
    se = float(math.sqrt((G - 1) / G * np.sum((t - t.mean()) ** 2)))
    return {
        "test_error_draws_se": se,
        "draws_dof": G - 1,
        "groups": "draws" if scramble_groups is None else "draws and nodes",
        "leave_one_out": t.tolist(),
        "evaluations": evaluations,
        "converged": bool(converged),
    }
