"""The sampling error of the multi-head prior side at the fixed point: a jackknife over the draws.

The prior side averages the coupled denoiser over ``R`` fixed instances (:class:`.prior.MultiHeadPriorSample`),
so the fixed point, and the test error predicted there, depend on the particular draws. The jackknife re-solves
the fixed point ``R`` times, each time without one draw (started at the full fixed point, so a few map
evaluations each), and estimates the standard error of the prediction over sampling seeds by

    se^2 = (R - 1)/R sum_r (t_(-r) - mean_r t_(-r))^2 ,

``t_(-r)`` the test error without draw ``r``; it has ``R - 1`` degrees of freedom.

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

from singlehead.state_evolution.multihead_se.output import multihead_test_errors
from singlehead.state_evolution.multihead_se.prior import MultiHeadPriorSample
from singlehead.state_evolution.multihead_se.solve import MultiHeadSEMap, chord_solve, solve_multihead

__all__ = ["multihead_draw_jackknife"]


def multihead_draw_jackknife(se_map: MultiHeadSEMap, ansatz: str, x: tuple, *, tol: float = 1e-3,
                             max_iter: int = 30, chord_matrix: np.ndarray | None = None) -> dict[str, Any]:
    """Jackknife standard error over the prior draws of the test error at the fixed point ``x`` (module docstring).

    Parameters
    ----------
    se_map : MultiHeadSEMap
        The solved problem's map (its draws, nodes, prox branches and denoiser solutions; left unchanged).
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
        ``test_error_draws_se`` (``nan`` with one draw), ``draws_dof`` (``R - 1``), ``leave_one_out`` (the
        ``R`` test errors), ``evaluations`` (map evaluations of the ``R`` solves) and ``converged`` (every
        leave-one-out solve met ``tol``).
    """
    if not (math.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a finite number > 0 (got {tol!r})")
    sample = se_map.sample
    R = sample.S0.shape[0]
    if R < 2:
        return {"test_error_draws_se": math.nan, "draws_dof": 0, "leave_one_out": [], "evaluations": 0,
                "converged": True}
    values, evaluations, converged = [], 0, True
    for r in range(R):
        keep = [k for k in range(R) if k != r]
        sub = copy.copy(se_map)  # the same nodes, options and prox branches; its own draws and denoiser starts
        sub.sample = MultiHeadPriorSample(sample.S0[keep], sample.Z[keep])
        sub.Q0 = sub.sample.teacher_overlaps()
        sub.solutions = None if se_map.solutions is None else se_map.solutions[keep]
        # the prox continues the fixed point's branches (whose cold starts the solve ran): the leave-one-out solve
        # counts its own evaluations, so its cold starts come after union_every of them, not at the solve's count
        sub.calls = 0
        # solved to a relative change ``tol``: the denoiser to ``tol/100`` suffices (not the solve's ``prior_tol``)
        sub.options = dataclasses.replace(se_map.options, prior_tol=max(se_map.options.prior_tol, 1e-2 * tol))
        if chord_matrix is not None:
            sol = chord_solve(sub, ansatz, x, chord_matrix, tol=tol, max_iter=max_iter,
                              damping=se_map.options.damping, history=se_map.options.history)
        else:
            sol = solve_multihead(sub, ansatz, x, damping=se_map.options.damping, tol=tol, max_iter=max_iter,
                                  history=se_map.options.history)
        evaluations += sol.evaluations
        converged &= sol.converged
        values.append(multihead_test_errors(sol.Q, sol.M, problem=se_map.problem, Q0=sub.Q0,
                                            quad=se_map.quad)["test_error"])
    t = np.array(values)
    se = float(math.sqrt((R - 1) / R * np.sum((t - t.mean()) ** 2)))
    return {"test_error_draws_se": se, "draws_dof": R - 1, "leave_one_out": t.tolist(), "evaluations": evaluations,
            "converged": bool(converged)}
