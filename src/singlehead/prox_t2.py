"""The prox's safeguarded Newton at ``T = 2`` for the softmax channels, using the loss's rank-two Hessian.

At ``T = 2`` the fit loss ``ell(h) = f_0(D_0) + f_1(D_1)`` depends on the three logits
``h = (h_00, h_01, h_11)`` only through the row differences ``D_a = g_a . h`` with
``g_0 = (sqrt2, -1, 0)`` and ``g_1 = (0, -1, sqrt2)`` (:func:`singlehead.attention_maps._softmax_fit_loss_t2`),
so its Hessian is ``G F G^T`` with ``G = [g_0, g_1]`` and ``F = diag(f''_0, f''_1)``. The Newton
system of the prox objective ``||h - z||^2/(2 Sigma) + ell(h)`` is then solved by the Woodbury identity
with one ``2 x 2`` system per node, and positive definiteness is a ``2 x 2`` test
(:func:`~singlehead.attention_maps.softmax_t2_prox_convex`); no ``(N, 3, 3)`` Hessian is formed
except at the few nodes where it is not positive definite (a saddle-free step by eigendecomposition).

:func:`newton_t2` is a drop-in for the generic Newton of :mod:`singlehead.prox` (same starts, stopping
rules, Armijo line search with halvings and saddle-free steps), so the end points are the same minima
to the Newton tolerance; it is about twice as fast per iteration.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ._newton_steps import run_newton
from .attention_maps import _SQRT2, _sigmoid

__all__ = ["newton_t2"]

# (G^T G)^{-1} = [[3, -1], [-1, 3]]/8: the reduced positive-definiteness test uses these entries
_SINV_DIAG, _SINV_OFF2 = 0.375, 0.015625
# Cholesky pivot floor of the reduced test (the generic Newton floors its pivots at 1e-8/Sigma)
_PD_FLOOR = 1e-8


def _derivs(h: np.ndarray, Yc: np.ndarray, beta: float, order: int):
    """Fit loss at ``T = 2`` per node: value, gradient ``(n, 3)`` and the row curvatures ``f''_0, f''_1``.

    ``Yc`` holds each node's labels ``(Y_00, Y_01, Y_11, Y_10)`` as ``(n, 4)``; the formulas are those of
    :func:`~singlehead.attention_maps._softmax_fit_loss_t2`.
    """
    s0 = _sigmoid(beta * (_SQRT2 * h[:, 0] - h[:, 1]))
    s1 = _sigmoid(beta * (_SQRT2 * h[:, 2] - h[:, 1]))
    a0, b0 = s0 - Yc[:, 0], 1.0 - s0 - Yc[:, 1]
    a1, b1 = s1 - Yc[:, 2], 1.0 - s1 - Yc[:, 3]
    val = a0 * a0 + b0 * b0 + a1 * a1 + b1 * b1
    if order == 0:
        return val, None, None, None
    sp0, sp1 = beta * s0 * (1.0 - s0), beta * s1 * (1.0 - s1)
    r0, r1 = a0 - b0, a1 - b1
    f0, f1 = 2.0 * sp0 * r0, 2.0 * sp1 * r1
    grad = np.empty((h.shape[0], 3))
    grad[:, 0] = _SQRT2 * f0
    grad[:, 1] = -(f0 + f1)
    grad[:, 2] = _SQRT2 * f1
    ff0 = 2.0 * beta * sp0 * (1.0 - 2.0 * s0) * r0 + 4.0 * sp0 * sp0
    ff1 = 2.0 * beta * sp1 * (1.0 - 2.0 * s1) * r1 + 4.0 * sp1 * sp1
    return val, grad, ff0, ff1


def _direction(g: np.ndarray, ff0: np.ndarray, ff1: np.ndarray, inv: np.ndarray) -> np.ndarray:
    """Newton direction ``p = -(inv I + G F G^T)^{-1} g``: by Woodbury where the Hessian is positive
    definite, else the saddle-free step of the generic Newton (``|eigenvalues|`` floored at ``1e-3 inv``)."""
    sig = 1.0 / inv
    d0, d1 = sig * ff0, sig * ff1
    a, c = _SINV_DIAG + d0, _SINV_DIAG + d1
    pd = (a > _PD_FLOOR) & (c - _SINV_OFF2 / np.where(a > 0, a, 1.0) > _PD_FLOOR)
    m00, m11 = 1.0 + 3.0 * d0, 1.0 + 3.0 * d1
    det = np.where(pd, m00 * m11 - d0 * d1, 1.0)
    c0 = _SQRT2 * g[:, 0] - g[:, 1]
    c1 = _SQRT2 * g[:, 2] - g[:, 1]
    w0 = d0 * (m11 * c0 - d1 * c1) / det
    w1 = d1 * (m00 * c1 - d0 * c0) / det
    p = np.empty_like(g)
    p[:, 0] = -sig * (g[:, 0] - _SQRT2 * w0)
    p[:, 1] = -sig * (g[:, 1] + w0 + w1)
    p[:, 2] = -sig * (g[:, 2] - _SQRT2 * w1)
    bad = np.nonzero(~pd)[0]
    if bad.size:
        Gm = np.array([[_SQRT2, 0.0], [-1.0, -1.0], [0.0, _SQRT2]])
        H = np.einsum("ka,na,la->nkl", Gm, np.stack([ff0[bad], ff1[bad]], axis=1), Gm)
        H[:, np.arange(3), np.arange(3)] += inv[bad, None]
        lam, V = np.linalg.eigh(H)
        lam = np.maximum(np.abs(lam), 1e-3 * inv[bad, None])
        p[bad] = -np.einsum("nkl,nl->nk", V, np.einsum("nlk,nl->nk", V, g[bad]) / lam)
    return p


def newton_t2(beta: float) -> Callable:
    """The ``T = 2`` Newton runner for inverse temperature ``beta``: ``run(h0, z, Y, Sig, tol, max_iter) ->
    (h, objective, grad_norm, iterations, done)``, the contract of the generic Newton of :mod:`singlehead.prox`
    (:func:`~singlehead._newton_steps.run_newton` with the rank-two curvature ``(f''_0, f''_1)`` and
    :func:`_direction`)."""

    def derivs(h: np.ndarray, Yc: np.ndarray, inv: np.ndarray) -> tuple:
        fit, grad, ff0, ff1 = _derivs(h, Yc, beta, 1)
        return fit, grad, (ff0, ff1)

    def run(h0: np.ndarray, z: np.ndarray, Y: np.ndarray, Sig: np.ndarray, tol: float, max_iter: int):
        Yc = np.stack([Y[:, 0, 0], Y[:, 0, 1], Y[:, 1, 1], Y[:, 1, 0]], axis=1)
        return run_newton(h0, z, Yc, Sig, tol, max_iter, derivs, lambda h, lab: _derivs(h, lab, beta, 0)[0],
                          lambda g, curv, inv: _direction(g, curv[0], curv[1], inv))

    return run
