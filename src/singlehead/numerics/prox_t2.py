"""The prox's safeguarded Newton at ``T = 2`` for the softmax channels, in the plane the loss depends on.

At ``T = 2`` the fit loss ``ell(h) = f_0(D_0) + f_1(D_1)`` depends on the three logits
``h = (h_00, h_01, h_11)`` only through the row differences ``D_a = g_a . h`` with
``g_0 = (sqrt2, -1, 0)`` and ``g_1 = (0, -1, sqrt2)`` (:func:`singlehead.numerics.attention_maps._softmax_fit_loss_t2`).
Both are orthogonal to the global shift ``u = (1, sqrt2, 1)/2`` (softmax rows do not see it). In the
orthonormal basis ``e_1 = (1, 0, -1)/sqrt2``, ``e_2 = (1, -sqrt2, 1)/2``, ``u`` with ``h = c_1 e_1 + c_2 e_2 + w u``,

    D_0 = c_1 + sqrt2 c_2,    D_1 = -c_1 + sqrt2 c_2,

so the prox objective ``||h - z||^2/(2 Sigma) + ell(h)`` splits into ``(w - u.z)^2/(2 Sigma)``, minimised by
``w = u.z``, and a two-dimensional prox in ``c`` with the same isotropic quadratic term. The basis is
orthonormal, so Newton's method in ``c`` is Newton's method in ``h`` restricted to the plane: the same
steps, the same saddle-free modification (the Hessian's eigenvalues in ``h`` are those in ``c`` and ``1/Sigma``),
the same gradient norm and objective once ``w = u.z``; the generic Newton reaches ``w = u.z`` in its first full
step, here it holds from the start. Every array is ``(N, 2)`` and the Newton system a closed-form ``2 x 2``.

:func:`newton_t2` is a drop-in for the generic Newton of ``singlehead.numerics.prox`` (same starts, stopping
rules, Armijo line search with halvings and saddle-free steps), so the end points are the same minima
to the Newton tolerance.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from singlehead.numerics.attention_maps import SQRT2, t2_rows
from singlehead.numerics.newton_steps import rowdot, run_newton, saddle_free_step

__all__ = ["newton_t2"]

# rows e_1, e_2 of the basis of the plane the loss depends on, and the shift direction u
_PLANE = np.array([[1.0 / SQRT2, 0.0, -1.0 / SQRT2], [0.5, -0.5 * SQRT2, 0.5]])
_SHIFT = np.array([0.5, 0.5 * SQRT2, 0.5])
# Cholesky pivot floor of the 2 x 2 Newton system, relative to the prox curvature 1/Sigma (as the
# generic Newton's)
_PD_FLOOR = 1e-8


def _row_derivs(c: np.ndarray, Yc: np.ndarray, beta: float, order: int):
    """Fit loss per node at plane coordinates ``c`` (``(n, 2)``): value, with ``order >= 1`` the row
    derivatives ``f'_0, f'_1`` and with ``order 2`` the curvatures ``f''_0, f''_1`` in ``D_0, D_1`` (:func:`t2_rows`).

    ``Yc`` holds each node's labels ``(Y_00, Y_01, Y_11, Y_10)`` as ``(n, 4)``; the formulas are those of
    :func:`~singlehead.numerics.attention_maps._softmax_fit_loss_t2`.
    """
    c2 = SQRT2 * c[:, 1]
    return t2_rows(c2 + c[:, 0], c2 - c[:, 0], Yc[:, 0], Yc[:, 1], Yc[:, 2], Yc[:, 3], beta, order)


def _direction(g: np.ndarray, ff0: np.ndarray, ff1: np.ndarray, inv: np.ndarray) -> np.ndarray:
    """Newton direction ``p = -(inv I + Hc)^{-1} g`` in the plane, ``Hc = [[A, sqrt2 B], [sqrt2 B, 2A]]`` with
    ``A = f''_0 + f''_1``, ``B = f''_0 - f''_1``: by Cramer's rule where it is positive definite (pivots above
    ``1e-8 inv``), else the saddle-free step of the generic Newton (``|eigenvalues|`` floored at ``1e-3 inv``)."""
    A, B = ff0 + ff1, ff0 - ff1
    m11, m22, m12 = inv + A, inv + 2.0 * A, SQRT2 * B
    det = m11 * m22 - m12 * m12
    floor = _PD_FLOOR * inv
    pd = (m11 > floor) & (det > floor * m11)
    det = np.where(pd, det, 1.0)
    p = np.empty_like(g)
    g0, g1 = g[:, 0], g[:, 1]
    p[:, 0] = (m12 * g1 - m22 * g0) / det
    p[:, 1] = (m12 * g0 - m11 * g1) / det
    bad = np.nonzero(~pd)[0]
    if bad.size:
        H = np.empty((bad.size, 2, 2))
        H[:, 0, 0], H[:, 1, 1], H[:, 0, 1] = m11[bad], m22[bad], m12[bad]
        H[:, 1, 0] = H[:, 0, 1]
        p[bad] = saddle_free_step(H, g[bad], inv[bad])
    return p


def newton_t2(beta: float) -> Callable:
    """The ``T = 2`` Newton runner for inverse temperature ``beta``: ``run(h0, z, Y, Sig, tol, max_iter) ->
    (h, objective, grad_norm, iterations, done)``, the contract of the generic Newton of ``singlehead.numerics.prox``
    (``run_newton`` on the plane coordinates, with the curvature
    ``(f''_0, f''_1)`` and ``_direction``; the stopping threshold ``tol (1 + ||z||/Sigma)`` of the full ``z``)."""

    def derivs(c: np.ndarray, Yc: np.ndarray, inv: np.ndarray) -> tuple:
        fit, f0, f1, ff0, ff1 = _row_derivs(c, Yc, beta, 2)
        grad = np.empty_like(c)
        grad[:, 0] = f0 - f1
        grad[:, 1] = SQRT2 * (f0 + f1)
        return fit, grad, (ff0, ff1)

    def run(h0: np.ndarray, z: np.ndarray, Y: np.ndarray, Sig: np.ndarray, tol: float, max_iter: int):
        Yc = np.stack([Y[:, 0, 0], Y[:, 0, 1], Y[:, 1, 1], Y[:, 1, 0]], axis=1)
        c, f, gn, it, done = run_newton(
            h0 @ _PLANE.T,
            z @ _PLANE.T,
            Yc,
            Sig,
            tol,
            max_iter,
            derivs,
            lambda c_, lab: _row_derivs(c_, lab, beta, 0)[0],
            lambda g, curv, inv: _direction(g, curv[0], curv[1], inv),
            z_norm=np.sqrt(rowdot(z, z)),
        )
        return c @ _PLANE + (z @ _SHIFT)[:, None] * _SHIFT, f, gn, it, done

    return run
