"""Draw-to-draw spread of the finite-``d`` prior at a solved state-evolution fixed point.

The finite-``d`` prior (:class:`singlehead.numerics.spectra.FiniteDSpectrum`) averages the prior-side map
over ``R`` fixed GOE draws, ``F = (1/R) sum_r F_r``. How much does the prediction depend on the
particular draws? Each draw alone would have its own fixed point ``x_r``; to first order
``x_r - x* = (I - J_F)^{-1} (F_r(x*) - F(x*))`` with ``J_F`` the Jacobian of the averaged SE map at
the fixed point ``x* = (q, m, Sigma)``. :func:`prior_draw_spread` evaluates that linear response
(cheaply: the per-draw ``F_r(x*)`` come with the final SE evaluation; ``J_F`` costs one extra
eigendecomposition per draw, at ``delta (1 + h)``, and three or four output-side evaluations) and
reports the standard error over draws of the test error predicted at the ``x_r``.

The linear response is first order in the draw-to-draw difference: it reproduces the fixed point
of the SE solved with one draw alone up to second-order terms, and its standard error estimates
the spread of single-draw solutions over seeds divided by ``sqrt(R)``. The one-step spread
(``F_r(x*)`` without ``(I - J_F)^{-1}``) is reported too.
"""

from __future__ import annotations

import math

import numpy as np

from singlehead.model.problem import Problem
from singlehead.numerics.spectra.prior_model import PriorModel
from singlehead.state_evolution.output import OutputSide, channel_test_errors, output_side
from singlehead.state_evolution.prior import PriorSide
from singlehead.state_evolution.quadrature import OutputQuadrature

__all__ = ["prior_draw_spread"]

# relative finite-difference step of the SE-map Jacobian (in delta, eps and each of q, m, Sigma)
_REL_STEP = 1e-5


def _conjugate_params(out: OutputSide, lam: float) -> np.ndarray:
    """``(delta, eps, eta, Sigmahat)`` of the prior side from the conjugates (factorized student)."""
    return np.array(
        [math.sqrt(max(out.qhat, 0.0)) / out.mhat, 2 * lam / out.mhat, out.mhat / out.Sigmahat, out.Sigmahat]
    )


def _prior_values(prior: PriorModel, delta: float, eps: float, cap: float | None) -> np.ndarray:
    """``(J, overlap, D)`` of the draw-averaged finite-``d`` prior."""
    ti = prior.threshold_integrals(delta, eps, rank_cap=cap)
    return np.array([ti.J, ti.overlap, ti.divergence])


def _map_jacobian(
    problem: Problem, prior: PriorModel, x: np.ndarray, out: OutputSide, quad: OutputQuadrature | None
) -> np.ndarray:
    """Jacobian of the averaged SE map ``x -> prior_side(output_side(x))`` at ``x`` (3 x 3).

    Chain rule through ``c = (delta, eps, eta, Sigmahat)``: ``q = eta^2 J``, ``m = eta A``,
    ``Sigma = D/Sigmahat`` with ``(J, A, D)`` differentiated by forward differences in ``delta``
    (one new decomposition per draw) and ``eps`` (cached decomposition), the output side by
    forward differences in each of ``q, m, Sigma`` (all output sides cold, so that the
    differences compare the same prox branches; ``out``, the solver's final evaluation, may have
    used other starts).
    """
    cap = problem.student.rank_cap(problem.kappa)
    if problem.channel.needs_quadrature:
        out = output_side(*map(float, x), problem=problem, Q0=prior.Q0, quad=quad)
    c0 = _conjugate_params(out, problem.lam)
    dl, ep, eta, Sh = c0
    v0 = _prior_values(prior, dl, ep, cap)
    h_dl, h_ep = _REL_STEP * dl, _REL_STEP * max(ep, 1e-3 * dl)
    dv_ddl = (_prior_values(prior, dl + h_dl, ep, cap) - v0) / h_dl
    dv_dep = (_prior_values(prior, dl, ep + h_ep, cap) - v0) / h_ep
    J, A, D = v0
    # rows (q, m, Sigma), columns (delta, eps, eta, Sigmahat)
    dP = np.array(
        [
            [eta**2 * dv_ddl[0], eta**2 * dv_dep[0], 2 * eta * J, 0.0],
            [eta * dv_ddl[1], eta * dv_dep[1], A, 0.0],
            [dv_ddl[2] / Sh, dv_dep[2] / Sh, 0.0, -D / Sh**2],
        ]
    )
    dC = np.empty((4, 3))
    for k in range(3):
        h = _REL_STEP * max(abs(x[k]), 1e-3 * prior.Q0)
        xk = x.copy()
        xk[k] += h
        ok = output_side(*map(float, xk), problem=problem, Q0=prior.Q0, quad=quad)
        dC[:, k] = (_conjugate_params(ok, problem.lam) - c0) / h
    return dP @ dC


def prior_draw_spread(
    problem: Problem, prior: PriorModel, x: np.ndarray, out: OutputSide, pr: PriorSide, quad: OutputQuadrature | None
) -> dict:
    """Draw-to-draw spread of the finite-``d`` prior's prediction at the fixed point ``x = (q, m, Sigma)``.

    Parameters
    ----------
    problem, prior : Problem, PriorModel
        The solved problem and its prior model; anything but a finite-``d`` prior (or a direct
        student) returns ``{}``.
    x : array (3,)
        The fixed point ``(q, m, Sigma)``.
    out, pr : OutputSide, PriorSide
        The SE evaluation at ``x`` (its ``pr.q_draws, m_draws, Sigma_draws`` are ``F_r(x)``).
    quad : OutputQuadrature or None
        The output node set of the solve.

    Returns
    -------
    dict
        ``prior_draw_spread``: standard error over the ``R`` draws, ``std_r(TE_r)/sqrt(R)``
        (``ddof = 1``; ``nan`` for ``R = 1``), of the noiseless test error ``TE_r`` at draw
        ``r``'s linear-response fixed point ``x_r = x + (I - J_F)^{-1}(F_r(x) - F(x))`` (module
        docstring); it estimates the standard deviation of the prediction over independent
        draw sets of the same size. ``prior_draw_test_errors``: the ``TE_r``.
        ``prior_draw_spread_one_step``: the same without the feedback (``TE`` at ``F_r(x)``).
    """
    if prior.mode != "finite" or pr.q_draws is None or not problem.student.thresholded:
        return {}
    x = np.asarray(x, dtype=float)
    Fr = np.column_stack([pr.q_draws, pr.m_draws, pr.Sigma_draws])
    dev = Fr - Fr.mean(axis=0)
    R = Fr.shape[0]

    def te(q: float, m: float) -> float:
        return float(channel_test_errors(q, m, problem=problem, Q0=prior.Q0, quad=quad)["test_error"])

    def se(values: list[float]) -> float:
        return float(np.std(values, ddof=1) / math.sqrt(R)) if R > 1 else math.nan

    one_step = [te(q, m) for q, m in Fr[:, :2]]
    try:
        dx = np.linalg.solve(np.eye(3) - _map_jacobian(problem, prior, x, out, quad), dev.T).T
        fixed = [te(*(x[:2] + d[:2])) for d in dx]
    except (np.linalg.LinAlgError, ValueError, ZeroDivisionError, FloatingPointError):
        fixed = [math.nan] * R
    return {"prior_draw_spread": se(fixed), "prior_draw_test_errors": fixed, "prior_draw_spread_one_step": se(one_step)}
