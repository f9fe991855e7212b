"""Batched proximal step of the attention output channel (docs: Theory, :ref:`theory-prox`, :ref:`theory-amp`).

The state evolution of the ERM minimiser (arXiv 2509.24914, Sec. 3) and GAMP both need,
for many independent "nodes" at once, the proximal point

    h* = argmin_h  ||h - z||^2 / (2 Sigma) + || Y - chan_beta(M(h)) ||_F^2 ,

where

* ``h, z`` are ``K``-vectors, ``K = T(T+1)/2``, one component per upper-triangular pair
  ``(a, b), a <= b`` in ``numpy.triu_indices(T)`` order;
* ``M`` maps a ``K``-vector to the symmetric ``T x T`` logit matrix, copying each
  off-diagonal component to ``(a, b)`` and ``(b, a)`` and **multiplying the diagonal
  components by sqrt(2)** (this restores the variance ``2 Tr S^2/d`` of diagonal logits);
  note ``||M(v)||_F^2 = 2 ||v||^2``;
* ``Y`` is the label matrix (``T x T``), ``chan_beta`` the row-wise softmax of ``beta M(h)``
  (``seq2lab`` / ``seq2seq``) or the identity (``linear``);
* ``Sigma > 0`` is a scalar or one value per node.

The softmax square loss is not convex; for large ``Sigma`` the objective can have several
local minima. :func:`prox_softmax` runs a safeguarded (eigenvalue-modified, i.e. saddle-free)
Newton method with a vectorised Armijo backtracking line search from several starting points
and keeps, node by node, the one with the lowest objective. For the state evolution the
natural extra start is the *interpolating point*, the logits closest to ``z`` that reproduce
the labels exactly (:func:`interpolating_start`).

Everything here is plain numpy, vectorised over nodes (no Python loop over nodes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from singlehead.numerics.attention_maps import (
    mat_to_vec,
    pair_embedding,
    shift_direction,
    softmax_fit_loss,
    softmax_rows,
    vec_to_mat,
)
from singlehead.numerics.newton_steps import FitLoss, hessian_derivs, hessian_direction, run_newton

__all__ = [
    "prox_newton",
    "FitLoss",
    "pair_embedding",
    "vec_to_mat",
    "mat_to_vec",
    "shift_direction",
    "softmax_rows",
    "softmax_fit_loss",
    "ProxResult",
    "prox_objective",
    "prox_softmax",
    "prox_linear",
    "interpolating_start",
]


# ----------------------------------------------------------------------------------------
# Proximal step
# ----------------------------------------------------------------------------------------
#: ``(h0, z, labels, Sigma, tol, max_iter) -> (h, objective, grad_norm, iterations, done)``: a Newton run
NewtonRunner = Callable[..., tuple]

# two starts closer than this (relative, per coordinate) are the same start: Newton from one
# lands within its tolerance of where the other lands
_SAME_START = 1e-9


@dataclass
class ProxResult:
    """Output of the batched prox.

    Attributes
    ----------
    h : (N, K) array
        Proximal points ``h*``.
    objective : (N,) array
        Objective value at ``h*``.
    fit : (N,) array
        Fit term ``||Y - chan(M(h*))||_F^2`` (the per-node training loss).
    grad_norm : (N,) array
        Norm of the objective gradient at ``h*`` (0 for the linear channel).
    converged : bool
        All nodes reached the gradient tolerance.
    iterations : int
        Largest number of Newton iterations used by any start.
    start_index : (N,) int array
        Which starting point produced the retained minimiser.
    branches : list of (N, K) arrays
        End point of the Newton run from each start.
    """

    h: np.ndarray
    objective: np.ndarray
    fit: np.ndarray
    grad_norm: np.ndarray
    converged: bool
    iterations: int
    start_index: np.ndarray
    branches: list = dataclasses.field(default_factory=list)


def prox_objective(h: np.ndarray, z: np.ndarray, Y: np.ndarray, Sigma, beta: float) -> np.ndarray:
    """``||h - z||^2/(2 Sigma) + ||softmax_rows(beta M(h)) - Y||_F^2`` per node."""
    Sig = np.broadcast_to(np.asarray(Sigma, dtype=float), (h.shape[0],))
    d = h - z
    return np.einsum("nk,nk->n", d, d) / (2.0 * Sig) + softmax_fit_loss(h, Y, beta, order=0)[0]


def _newton(
    h0: np.ndarray,
    z: np.ndarray,
    Y: np.ndarray,
    Sig: np.ndarray,
    loss: FitLoss,
    tol: float,
    max_iter: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, np.ndarray]:
    """Safeguarded Newton from ``h0`` on all nodes with the loss's dense Hessian (batched Cholesky,
    saddle-free steps where it is indefinite): ``run_newton``."""
    return run_newton(
        h0, z, Y, Sig, tol, max_iter, hessian_derivs(loss), lambda h, lab: loss(h, lab, 0)[0], hessian_direction
    )


def _run_starts(
    starts: list[np.ndarray],
    z: np.ndarray,
    Y: np.ndarray,
    Sig: np.ndarray,
    loss: FitLoss,
    tol: float,
    max_iter: int,
    newton: NewtonRunner | None = None,
) -> tuple[list[tuple[np.ndarray, ...]], int]:
    """Newton from every start, each on the nodes where it does not coincide with an earlier start.

    Where a start coincides (to ``_SAME_START``) with an earlier one, it ends where that one ended:
    warm starts are the end points of the previous call's branches, which mostly sit at the same
    minimiser, so this saves most of the work of tracking several branches. The remaining
    ``(start, node)`` pairs run as one batch (the nodes are independent; one batch instead of one run
    per start spares the per-iteration overhead of the small runs). Returns, per start, ``(h, objective,
    grad_norm, done)`` on every node, and the most iterations any pair took.
    """
    N, K = z.shape
    run = newton if newton is not None else (lambda *a: _newton(*a[:4], loss, *a[4:]))
    if len(starts) == 1:
        h, f, gn, it, done = run(starts[0], z, Y, Sig, tol, max_iter)
        return [(h, f, gn, done)], it
    S = np.stack(starts)  # (s, N, K)
    scale = _SAME_START * (1.0 + np.abs(S))
    nodes = np.arange(N)
    # pos[i, n]: the row of the batch whose end point start i takes at node n (its own run, or the
    # run of the first earlier start it coincides with there)
    pos = np.empty((len(starts), N), dtype=np.intp)
    batches, offset = [], 0
    for i in range(len(starts)):
        if i:
            close = np.all(np.abs(S[i] - S[:i]) <= scale[:i], axis=2)  # (i, N)
            same = close.any(axis=0)
            j = np.argmax(close, axis=0)  # the first earlier start it coincides with
        else:
            same = np.zeros(N, dtype=bool)
        nn = np.nonzero(~same)[0]
        pos[i, nn] = offset + np.arange(nn.size)
        offset += nn.size
        if i:
            pos[i, same] = pos[j[same], nodes[same]]
        batches.append(nn)
    idx = np.concatenate(batches)
    h_all, f_all, g_all, it, d_all = run(
        np.concatenate([S[i, nn] for i, nn in enumerate(batches)]), z[idx], Y[idx], Sig[idx], tol, max_iter
    )
    return [(h_all[p], f_all[p], g_all[p], d_all[p]) for p in pos], it


def prox_softmax(
    z: np.ndarray,
    Y: np.ndarray,
    Sigma,
    beta: float,
    *,
    starts: Sequence[np.ndarray] | None = None,
    tol: float = 1e-12,
    max_iter: int = 100,
) -> ProxResult:
    """Global proximal point of the softmax square loss, batched over nodes.

    Parameters
    ----------
    z : (N, K) array
        Prox centres.
    Y : (N, T, T) array
        Label matrices (rows sum to one).
    Sigma : float or (N,) array
        Prox parameter (> 0).
    beta : float
        Student inverse temperature.
    starts, tol, max_iter :
        As in :func:`prox_newton` (default start: ``[z]``).
    """
    return prox_newton(
        z,
        Y,
        Sigma,
        lambda h, lab, order: softmax_fit_loss(h, lab, beta, order=order),
        starts=starts,
        tol=tol,
        max_iter=max_iter,
    )


def prox_newton(
    z: np.ndarray,
    labels: np.ndarray,
    Sigma,
    loss: FitLoss,
    *,
    starts: Sequence[np.ndarray] | None = None,
    tol: float = 1e-12,
    max_iter: int = 100,
    newton: NewtonRunner | None = None,
) -> ProxResult:
    """Proximal point ``argmin_h ||h - z||^2/(2 Sigma) + loss(h; labels)``, batched over nodes.

    Parameters
    ----------
    z : (N, K) array
        Prox centres.
    labels : array with leading axis N
        Per-node labels, passed (row-subsetted) to ``loss``.
    Sigma : float or (N,) array
        Prox parameter (> 0).
    loss : callable
        ``loss(h, labels, order) -> (value (N,), grad (N, K) or None, hess (N, K, K) or None)``,
        the fit term and its derivatives up to ``order``.
    starts : sequence of (N, K) arrays, optional
        Newton starting points (default: ``[z]``). Newton is run from each and the node-wise
        lowest objective is kept; the end point of every start is returned in
        ``ProxResult.branches`` (for warm starts along a sequence of nearby problems).
    tol : float
        Gradient tolerance, relative to ``1 + ||z||/Sigma``.
    max_iter : int
        Newton iterations per start.
    newton : callable, optional
        A Newton runner specialised to ``loss`` (``newton(h0, z, labels, Sigma, tol, max_iter) -> (h,
        objective, grad_norm, iterations, done)`` with the generic one's stopping rules, e.g.
        :func:`singlehead.numerics.prox_t2.newton_t2`); default: the generic safeguarded Newton on ``loss``.
    """
    Y = labels
    z = np.asarray(z, dtype=float)
    N, K = z.shape
    Sig = np.broadcast_to(np.asarray(Sigma, dtype=float), (N,)).astype(float)
    if starts is None or len(starts) == 0:
        starts = [z]
    best_h = best_f = best_g = None
    best_i = np.zeros(N, dtype=int)
    runs, iters = _run_starts([np.asarray(h0, dtype=float) for h0 in starts], z, Y, Sig, loss, tol, max_iter, newton)
    branches = []
    for i, (h, f, gn, done) in enumerate(runs):
        branches.append(h)
        if best_h is None:
            best_h, best_f, best_g, best_d = h.copy(), f.copy(), gn.copy(), done.copy()
            continue
        better = f < best_f - 1e-12 * np.abs(best_f)
        best_h[better], best_f[better], best_g[better] = h[better], f[better], gn[better]
        best_d[better] = done[better]
        best_i[better] = i
    fit = loss(best_h, Y, 0)[0]
    converged = bool(np.all(best_d))
    return ProxResult(best_h, best_f, fit, best_g, converged, iters, best_i, branches)


def prox_linear(z: np.ndarray, y: np.ndarray, Sigma) -> ProxResult:
    """Closed-form prox of the linear channel, ``Y = M(y)``: ``h* = (z + 4 Sigma y)/(1 + 4 Sigma)``.

    (``||M(y) - M(h)||_F^2 = 2 ||y - h||^2``, hence the factor 4.)
    """
    z = np.asarray(z, dtype=float)
    Sig = np.broadcast_to(np.asarray(Sigma, dtype=float), (z.shape[0],))[:, None]
    h = (z + 4.0 * Sig * y) / (1.0 + 4.0 * Sig)
    fit = 2.0 * np.sum((y - h) ** 2, axis=1)
    obj = np.sum((h - z) ** 2, axis=1) / (2.0 * Sig[:, 0]) + fit
    return ProxResult(h, obj, fit, np.zeros(z.shape[0]), True, 0, np.zeros(z.shape[0], dtype=int), [h])


def interpolating_start(z: np.ndarray, y: np.ndarray, ratio: float, T: int) -> np.ndarray:
    """Closest point to ``z`` of ``{ratio * y + t u}`` (``u`` = :func:`shift_direction`).

    With ``ratio = beta0/beta`` these logits reproduce the labels
    ``softmax(beta0 M(y))`` exactly; they are the prox point in the limit ``Sigma -> inf``.
    """
    u = shift_direction(T)
    base = ratio * np.asarray(y, dtype=float)
    t = (z - base) @ u
    return base + t[:, None] * u
