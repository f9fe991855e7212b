"""Batched proximal step of the attention output channel (THEORY §3, §10).

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

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

__all__ = [
    "pair_embedding",
    "vec_to_mat",
    "mat_to_vec",
    "shift_direction",
    "softmax_rows",
    "attention",
    "softmax_fit_loss",
    "ProxResult",
    "prox_objective",
    "prox_softmax",
    "prox_linear",
    "prox_channel",
    "interpolating_start",
]


# ----------------------------------------------------------------------------------------
# K-vector <-> T x T symmetric matrix
# ----------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _embedding(T: int) -> np.ndarray:
    K = T * (T + 1) // 2
    P = np.zeros((T, T, K))
    iu, ju = np.triu_indices(T)
    for k, (a, b) in enumerate(zip(iu, ju)):
        if a == b:
            P[a, a, k] = math.sqrt(2.0)
        else:
            P[a, b, k] = 1.0
            P[b, a, k] = 1.0
    P.setflags(write=False)
    return P


def pair_embedding(T: int) -> np.ndarray:
    """The linear map ``M`` as an array ``P`` of shape ``(T, T, K)``: ``M(v)_ab = sum_k P[a,b,k] v_k``.

    ``P[a,b,k] = 1`` for an off-diagonal pair ``k = {a, b}`` (both orders), ``sqrt(2)`` for a
    diagonal pair ``k = (a, a)``; pairs are ordered as ``numpy.triu_indices(T)``.
    """
    return _embedding(int(T))


def vec_to_mat(v: np.ndarray, T: int) -> np.ndarray:
    """``M(v)``: ``(..., K) -> (..., T, T)`` symmetric, diagonal multiplied by ``sqrt(2)``."""
    return np.einsum("abk,...k->...ab", pair_embedding(T), v)


def mat_to_vec(H: np.ndarray) -> np.ndarray:
    """Inverse of :func:`vec_to_mat` on symmetric matrices: ``(..., T, T) -> (..., K)``."""
    T = H.shape[-1]
    iu, ju = np.triu_indices(T)
    v = H[..., iu, ju].copy()
    v[..., iu == ju] /= math.sqrt(2.0)
    return v


def shift_direction(T: int) -> np.ndarray:
    """Unit ``K``-vector ``u`` with ``M(u)`` proportional to the all-ones matrix.

    Adding ``t u`` to ``h`` shifts every logit by the same amount, which leaves the row-wise
    softmax unchanged (the only symmetric shift that does).
    """
    iu, ju = np.triu_indices(T)
    u = np.where(iu == ju, 1.0 / math.sqrt(2.0), 1.0)
    return u / np.linalg.norm(u)


# ----------------------------------------------------------------------------------------
# Softmax channel and its derivatives
# ----------------------------------------------------------------------------------------
def softmax_rows(H: np.ndarray) -> np.ndarray:
    """Row-wise softmax over the last axis (numerically stabilised)."""
    Z = H - H.max(axis=-1, keepdims=True)
    E = np.exp(Z)
    return E / E.sum(axis=-1, keepdims=True)


def attention(h: np.ndarray, T: int, channel: str, beta: float) -> np.ndarray:
    """``chan_beta(M(h))`` for ``K``-vectors ``h`` (same semantics as
    :func:`singlehead.channels.attention_map`): softmax rows of ``beta M(h)``, or ``M(h)``
    for ``linear``."""
    H = vec_to_mat(h, T)
    if channel == "linear":
        return H
    if channel in ("seq2lab", "seq2seq"):
        return softmax_rows(beta * H)
    raise ValueError(f"channel must be one of seq2lab, seq2seq, linear (got {channel!r})")


def softmax_fit_loss(
    h: np.ndarray, Y: np.ndarray, beta: float, *, order: int = 2
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """``ell(h) = ||softmax_rows(beta M(h)) - Y||_F^2`` with analytic gradient and Hessian in ``h``.

    Parameters
    ----------
    h : (N, K) array
        Logit ``K``-vectors.
    Y : (N, T, T) array
        Label matrices.
    beta : float
        Inverse temperature.
    order : {0, 1, 2}
        Highest derivative returned (others are ``None``).

    Returns
    -------
    value (N,), grad (N, K) or None, hess (N, K, K) or None

    Notes
    -----
    Row ``a`` only depends on row ``a`` of ``H = M(h)``. With ``A = softmax(beta H_a)``,
    ``R = A - Y_a``, ``w = R * A``, ``s = sum(w)``, the row Jacobian is
    ``J = beta (diag A - A A^T)``; the row gradient is ``2 J R = 2 beta (w - s A)`` and the
    row Hessian ``2 J J + 2 beta^2 [diag(w - s A) - A w^T - w A^T + 2 s A A^T]``. They are
    pulled back to ``h`` through ``P`` (:func:`pair_embedding`).
    """
    N, K = h.shape
    T = Y.shape[-1]
    P = pair_embedding(T)
    H = np.einsum("abk,nk->nab", P, h)
    A = softmax_rows(beta * H)
    R = A - Y
    val = np.einsum("nab,nab->n", R, R)
    if order == 0:
        return val, None, None
    w = R * A
    s = w.sum(axis=-1, keepdims=True)  # (N, T, 1)
    GH = 2.0 * beta * (w - s * A)  # d ell / d H_ab (row-wise), (N, T, T)
    grad = np.einsum("abk,nab->nk", P, GH)
    if order == 1:
        return val, grad, None
    # row Hessians (N, T, T, T): [n, a, c, e]
    Jr = beta * (A[..., :, None] * np.eye(T) - A[..., :, None] * A[..., None, :])
    JJ = np.einsum("nace,naef->nacf", Jr, Jr)
    ws = w - s * A
    Hr = 2.0 * JJ + 2.0 * beta**2 * (
        ws[..., :, None] * np.eye(T)
        - A[..., :, None] * w[..., None, :]
        - w[..., :, None] * A[..., None, :]
        + 2.0 * s[..., None] * A[..., :, None] * A[..., None, :]
    )
    hess = np.einsum("ack,nace,ael->nkl", P, Hr, P)
    return val, grad, hess


# ----------------------------------------------------------------------------------------
# Proximal step
# ----------------------------------------------------------------------------------------
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
    """

    h: np.ndarray
    objective: np.ndarray
    fit: np.ndarray
    grad_norm: np.ndarray
    converged: bool
    iterations: int
    start_index: np.ndarray


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
    beta: float,
    tol: float,
    max_iter: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Safeguarded Newton from ``h0`` on all nodes; returns (h, objective, grad_norm, iterations)."""
    h = h0.copy()
    N, K = h.shape
    inv = 1.0 / Sig
    fit, g, Hs = softmax_fit_loss(h, Y, beta)
    d = h - z
    f = 0.5 * inv * np.einsum("nk,nk->n", d, d) + fit
    g = g + inv[:, None] * d
    Hs = Hs + inv[:, None, None] * np.eye(K)
    gn = np.linalg.norm(g, axis=1)
    scale = 1.0 + np.linalg.norm(z, axis=1) * inv
    active = gn > tol * scale
    it = 0
    while active.any() and it < max_iter:
        it += 1
        idx = np.nonzero(active)[0]
        # saddle-free Newton direction: |eigenvalues|, floored relative to the prox curvature
        lam, V = np.linalg.eigh(Hs[idx])
        lam = np.maximum(np.abs(lam), 1e-3 * inv[idx, None])
        gi = g[idx]
        p = -np.einsum("nkl,nl->nk", V, np.einsum("nlk,nl->nk", V, gi) / lam)
        slope = np.einsum("nk,nk->n", gi, p)
        t = np.ones(idx.size)
        fi = f[idx]
        todo = np.arange(idx.size)
        h_new = h[idx].copy()
        f_new = fi.copy()
        for _ in range(40):  # backtracking halvings (vectorised over the pending nodes)
            cand = h[idx[todo]] + t[todo, None] * p[todo]
            fc = prox_objective(cand, z[idx[todo]], Y[idx[todo]], Sig[idx[todo]], beta)
            ok = fc <= fi[todo] + 1e-4 * t[todo] * slope[todo] + 1e-15 * np.abs(fi[todo])
            h_new[todo[ok]] = cand[ok]
            f_new[todo[ok]] = fc[ok]
            todo = todo[~ok]
            if todo.size == 0:
                break
            t[todo] *= 0.5
        h[idx] = h_new
        fit, gg, HH = softmax_fit_loss(h[idx], Y[idx], beta)
        di = h[idx] - z[idx]
        f[idx] = 0.5 * inv[idx] * np.einsum("nk,nk->n", di, di) + fit
        g[idx] = gg + inv[idx, None] * di
        Hs[idx] = HH + inv[idx, None, None] * np.eye(K)
        gn[idx] = np.linalg.norm(g[idx], axis=1)
        stalled = np.zeros(idx.size, bool)
        stalled[todo] = True  # line search failed: at machine precision
        active[idx] = (gn[idx] > tol * scale[idx]) & ~stalled
    return h, f, gn, it


def prox_softmax(
    z: np.ndarray,
    Y: np.ndarray,
    Sigma,
    beta: float,
    *,
    starts: Sequence[np.ndarray] = (),
    tol: float = 1e-10,
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
    starts : sequence of (N, K) arrays
        Extra Newton starting points; ``z`` itself is always tried first. The node-wise
        lowest objective over all starts is kept.
    tol : float
        Gradient tolerance, relative to ``1 + ||z||/Sigma``.
    max_iter : int
        Newton iterations per start.
    """
    z = np.asarray(z, dtype=float)
    N, K = z.shape
    Sig = np.broadcast_to(np.asarray(Sigma, dtype=float), (N,)).astype(float)
    best_h = None
    best_f = None
    best_g = None
    best_i = np.zeros(N, dtype=int)
    iters = 0
    for i, h0 in enumerate([z, *starts]):
        h, f, gn, it = _newton(np.asarray(h0, dtype=float), z, Y, Sig, beta, tol, max_iter)
        iters = max(iters, it)
        if best_h is None:
            best_h, best_f, best_g = h, f, gn
            continue
        better = f < best_f - 1e-12 * np.abs(best_f)
        best_h[better], best_f[better], best_g[better] = h[better], f[better], gn[better]
        best_i[better] = i
    fit = softmax_fit_loss(best_h, Y, beta, order=0)[0]
    scale = 1.0 + np.linalg.norm(z, axis=1) / Sig
    converged = bool(np.all(best_g <= max(tol, 1e-8) * scale * 10))
    return ProxResult(best_h, best_f, fit, best_g, converged, iters, best_i)


def prox_linear(z: np.ndarray, y: np.ndarray, Sigma) -> ProxResult:
    """Closed-form prox of the linear channel, ``Y = M(y)``: ``h* = (z + 4 Sigma y)/(1 + 4 Sigma)``.

    (``||M(y) - M(h)||_F^2 = 2 ||y - h||^2``, hence the factor 4.)
    """
    z = np.asarray(z, dtype=float)
    Sig = np.broadcast_to(np.asarray(Sigma, dtype=float), (z.shape[0],))[:, None]
    h = (z + 4.0 * Sig * y) / (1.0 + 4.0 * Sig)
    fit = 2.0 * np.sum((y - h) ** 2, axis=1)
    obj = np.sum((h - z) ** 2, axis=1) / (2.0 * Sig[:, 0]) + fit
    return ProxResult(h, obj, fit, np.zeros(z.shape[0]), True, 0, np.zeros(z.shape[0], dtype=int))


def interpolating_start(z: np.ndarray, y: np.ndarray, ratio: float, T: int) -> np.ndarray:
    """Closest point to ``z`` of ``{ratio * y + t u}`` (``u`` = :func:`shift_direction`).

    With ``ratio = beta0/beta`` these logits reproduce the labels
    ``softmax(beta0 M(y))`` exactly; they are the prox point in the limit ``Sigma -> inf``.
    """
    u = shift_direction(T)
    base = ratio * np.asarray(y, dtype=float)
    t = (z - base) @ u
    return base + t[:, None] * u


def prox_channel(
    z: np.ndarray,
    y: np.ndarray,
    Sigma,
    *,
    T: int,
    channel: str,
    beta: float,
    beta0: float,
    tol: float = 1e-10,
    max_iter: int = 100,
) -> ProxResult:
    """Prox for labels generated from teacher logits ``y`` (``K``-vectors, noise included).

    The labels are ``chan_beta0(M(y))``; for softmax channels the starts are ``z``, the
    interpolating point (:func:`interpolating_start`) and their midpoint.
    """
    if channel == "linear":
        return prox_linear(z, y, Sigma)
    if channel not in ("seq2lab", "seq2seq"):
        raise ValueError(f"channel must be one of seq2lab, seq2seq, linear (got {channel!r})")
    Y = softmax_rows(beta0 * vec_to_mat(y, T))
    hi = interpolating_start(z, y, beta0 / beta, T)
    return prox_softmax(z, Y, Sigma, beta, starts=(hi, 0.5 * (hi + z)), tol=tol, max_iter=max_iter)
